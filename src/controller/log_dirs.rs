//! Several log directories per broker (JBOD, KIP-858), the controller's side. Pure: the
//! committed image in, the records to commit out.
//!
//! - A broker places each replica in one of its directories itself and reports it
//!   (AssignReplicasToDirs): the partition's `directories` entry for that broker is set.
//! - A broker reports its failed directories in every heartbeat (`OfflineLogDirs`,
//!   cumulative). The first report of a directory still registered online takes it out of the
//!   broker's online directories (Kafka's BrokerRegistrationChangeRecord with `LogDirs`) and,
//!   for every partition whose replica on that broker lives there, removes the broker from the
//!   ISR and the ELR and moves leadership away, exactly as a fenced broker's partitions — but
//!   only those: its partitions in other directories keep their places.

use uuid::Uuid;

use super::election::{change_partition, Election, ElectionConfig};
use super::image::{MetadataImage, MetadataRecord, PartitionChange, TopicMeta, DIR_UNASSIGNED};
use super::ControllerError;

/// AssignReplicasToDirs from `broker` at `epoch`: each ((topic id, partition), directory).
/// Returns the changes (one per partition whose recorded directory differs) and, per
/// assignment in order, whether it was accepted (`false`: no such partition, or the broker is
/// not one of its replicas — Kafka's UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER).
pub fn assign_dirs(
    image: &MetadataImage,
    broker: i32,
    epoch: i64,
    assignments: &[((Uuid, i32), Uuid)],
) -> Result<(Vec<MetadataRecord>, Vec<bool>), ControllerError> {
    check_epoch(image, broker, epoch)?;
    let mut records = Vec::new();
    let mut accepted = Vec::with_capacity(assignments.len());
    for &((topic_id, partition), dir) in assignments {
        let Some(p) = image.partition(topic_id, partition) else {
            accepted.push(false);
            continue;
        };
        let Some(at) = p.replicas.iter().position(|r| *r == broker) else {
            accepted.push(false);
            continue;
        };
        accepted.push(true);
        if p.directory_of(broker) == Some(dir) {
            continue;
        }
        let mut directories = match p.directories.len() == p.replicas.len() {
            true => p.directories.clone(),
            false => vec![DIR_UNASSIGNED; p.replicas.len()],
        };
        directories[at] = dir;
        let mut change = PartitionChange::new(topic_id, partition);
        change.directories = Some(directories);
        records.push(MetadataRecord::PartitionChange(change));
    }
    Ok((records, accepted))
}

/// The records for `broker` reporting `offline` directories (its heartbeat's cumulative
/// `OfflineLogDirs`): nothing unless one of them is still registered online.
pub fn dirs_offline(
    image: &MetadataImage,
    broker: i32,
    offline: &[Uuid],
    config: &dyn Fn(&TopicMeta) -> ElectionConfig,
) -> Vec<MetadataRecord> {
    let Some(registration) = image.broker(broker) else {
        return Vec::new();
    };
    if !registration.log_dirs.iter().any(|d| offline.contains(d)) {
        return Vec::new();
    }
    let acceptable = |r: i32| r != broker && image.is_active_broker(r);
    let mut records: Vec<MetadataRecord> = image
        .partitions()
        .filter(|(_, p)| {
            p.directory_of(broker).is_some_and(|d| offline.contains(&d))
                && (p.leader == broker || p.isr.contains(&broker) || p.elr.contains(&broker))
        })
        .filter_map(|(key, p)| {
            let topic = image.topic_by_id(key.0)?;
            let target: Vec<i32> = p.isr.iter().copied().filter(|r| *r != broker).collect();
            // Listed as if it had shut down uncleanly, so it does not enter (or stay in) the
            // ELR: its log is unreachable.
            let mut change = change_partition(
                key,
                p,
                target,
                Election::Online,
                config(topic),
                &acceptable,
                &[broker],
            )?;
            if change.elr.is_none() && p.elr.contains(&broker) {
                change.elr = Some(p.elr.iter().copied().filter(|r| *r != broker).collect());
            }
            Some(MetadataRecord::PartitionChange(change))
        })
        .collect();
    records.push(MetadataRecord::BrokerLogDirs {
        id: broker,
        epoch: registration.epoch,
        log_dirs: registration
            .log_dirs
            .iter()
            .copied()
            .filter(|d| !offline.contains(d))
            .collect(),
    });
    records
}

/// Whether `broker`'s replica of a partition registered in `directories` lives in a directory
/// its broker no longer lists online (the replica cannot lead or be in sync).
pub fn replica_dir_offline(image: &MetadataImage, key: (Uuid, i32), broker: i32) -> bool {
    let (Some(p), Some(b)) = (image.partition(key.0, key.1), image.broker(broker)) else {
        return false;
    };
    match p.directory_of(broker) {
        Some(d) if d != DIR_UNASSIGNED && !b.log_dirs.is_empty() => !b.log_dirs.contains(&d),
        _ => false,
    }
}

fn check_epoch(image: &MetadataImage, broker: i32, epoch: i64) -> Result<(), ControllerError> {
    match image.broker(broker) {
        Some(b) if b.epoch == epoch => Ok(()),
        Some(b) => Err(ControllerError::StaleBrokerEpoch(format!(
            "broker {broker} sent epoch {epoch}, but its registration has epoch {}",
            b.epoch
        ))),
        None => Err(ControllerError::StaleBrokerEpoch(format!(
            "broker {broker} is not registered"
        ))),
    }
}

#[cfg(test)]
mod tests;
