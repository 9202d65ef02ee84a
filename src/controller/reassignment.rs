//! Partition reassignment (KIP-455) on the controller, as Kafka's KRaft
//! `ReplicationControlManager` does it (notes operations §3.1): pure functions of the committed
//! image that turn one partition's AlterPartitionReassignments entry into a PartitionChange.
//!
//! - **Start** (a target list): non-empty, distinct, only registered brokers (fenced ones are
//!   allowed), else INVALID_REPLICA_ASSIGNMENT. With `current` = the registration's replicas
//!   (earlier adding replicas included): removing = current − target, adding = target −
//!   original (current − earlier adding), replicas = target in the order given, then the
//!   removing ones. The change goes
//!   through the election core, so a target already in the ISR (a reorder, or only removals)
//!   completes in the same record. Re-targeting a reassignment in flight works the same way:
//!   earlier adding replicas no longer wanted become removing.
//! - **Completion** happens in every later change of the partition
//!   ([`super::election::Target::complete_reassignment`]): when the ISR holds every target
//!   replica, the removing ones leave, the leader epoch bumps, and a removed leader is
//!   replaced.
//! - With `AllowReplicationFactorChange` false (KIP-860), a target of another length than the
//!   original replicas is INVALID_REPLICATION_FACTOR.
//! - **Cancel** (null replicas): NO_REASSIGNMENT_IN_PROGRESS when none is; else Kafka's
//!   `PartitionReassignmentRevert`: replicas and ISR lose the adding replicas, adding and
//!   removing clear. If the ISR would be empty the first original replica is forced into it,
//!   which is unclean: INVALID_REPLICA_ASSIGNMENT unless the topic allows unclean election.

use uuid::Uuid;

use super::election::{self, Election, ElectionConfig, Target};
use super::image::{MetadataImage, PartitionChange, PartitionRegistration};
use super::ControllerError;

/// One partition of an AlterPartitionReassignments request: a new target, or cancel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reassign {
    pub topic: String,
    pub partition: i32,
    /// `None` cancels the reassignment in progress.
    pub replicas: Option<Vec<i32>>,
    /// KIP-860 (v1's `AllowReplicationFactorChange`): when false, a target whose length is not
    /// the original replica count is refused (INVALID_REPLICATION_FACTOR).
    pub allow_rf_change: bool,
}

/// A partition being reassigned, as ListPartitionReassignments answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ongoing {
    pub topic: String,
    pub partition: i32,
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// The change `request` asks of the committed `image` (`Ok(None)`: nothing to write, e.g. a
/// target equal to the current assignment). `config` is the topic's election settings.
pub fn reassign(
    image: &MetadataImage,
    request: &Reassign,
    config: &dyn Fn(&super::image::TopicMeta) -> ElectionConfig,
) -> Result<Option<PartitionChange>, ControllerError> {
    let name = format!("{}-{}", request.topic, request.partition);
    let unknown = || ControllerError::UnknownTopic(name.clone());
    let topic = image.topic(&request.topic).ok_or_else(unknown)?;
    let p = image
        .partition(topic.id, request.partition)
        .ok_or_else(unknown)?;
    let key = (topic.id, request.partition);
    let config = config(topic);
    let acceptable = |r: i32| image.is_active_broker(r);
    match &request.replicas {
        Some(target) => {
            validate_target(image, &name, target)?;
            // KIP-1066 (its error handling): a reassignment placing a replica on a broker
            // whose every directory is cordoned is refused; replicas already there may stay.
            let added_to_cordoned = target.iter().find(|r| {
                !p.replicas.contains(r) && image.broker(**r).is_some_and(|b| b.is_cordoned())
            });
            if let Some(r) = added_to_cordoned {
                return Err(ControllerError::IneligibleReplica(format!(
                    "{name}: broker {r} has every log directory cordoned"
                )));
            }
            let original = p.replicas.len() - p.adding_replicas.len();
            if !request.allow_rf_change && target.len() != original {
                return Err(ControllerError::InvalidReplicationFactor(format!(
                    "{name}: the target has {} replicas, the partition {original}, and the request does not allow a change",
                    target.len()
                )));
            }
            Ok(election::change_partition_to(
                key,
                p,
                start(p, target),
                Election::Online,
                config,
                &acceptable,
                &[],
            ))
        }
        None => {
            if !p.is_reassigning() {
                return Err(ControllerError::NoReassignmentInProgress(format!(
                    "{name}: no reassignment is in progress"
                )));
            }
            let (target, unclean) = revert(p);
            if unclean && !config.unclean {
                return Err(ControllerError::InvalidReplicaAssignment(format!(
                    "{name}: reverting the reassignment would need an unclean leader election"
                )));
            }
            Ok(election::change_partition_to(
                key,
                p,
                target,
                Election::Online,
                config,
                &acceptable,
                &[],
            ))
        }
    }
}

/// Kafka's checks on a target: non-empty, no duplicates, every broker registered.
fn validate_target(
    image: &MetadataImage,
    name: &str,
    target: &[i32],
) -> Result<(), ControllerError> {
    let invalid = |why: String| Err(ControllerError::InvalidReplicaAssignment(why));
    if target.is_empty() {
        return invalid(format!("{name}: the target replica list is empty"));
    }
    let mut sorted = target.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return invalid(format!("{name}: the target {target:?} repeats a broker"));
    }
    if let Some(r) = target.iter().find(|r| image.broker(**r).is_none()) {
        return invalid(format!("{name}: broker {r} is not registered"));
    }
    Ok(())
}

/// Kafka's `PartitionReassignmentReplicas`: current = `p.replicas`, removing = current −
/// target, replicas = target then the removing ones. Adding = target − the original replicas
/// (current − earlier adding), so an earlier adding replica still wanted stays adding (Kafka
/// keeps the earlier adding set when the new one is empty; this also covers a partial
/// overlap).
fn start(p: &PartitionRegistration, target: &[i32]) -> Target {
    let removing: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    let adding: Vec<i32> = target
        .iter()
        .copied()
        .filter(|r| !p.replicas.contains(r) || p.adding_replicas.contains(r))
        .collect();
    let mut replicas = target.to_vec();
    replicas.extend(&removing);
    Target {
        isr: p.isr.clone(),
        replicas,
        adding,
        removing,
    }
}

/// Kafka's `PartitionReassignmentRevert`: the adding replicas leave replicas and ISR; an ISR
/// left empty takes the first original replica (unclean: `true`).
fn revert(p: &PartitionRegistration) -> (Target, bool) {
    let keep = |r: &i32| !p.adding_replicas.contains(r);
    let replicas: Vec<i32> = p.replicas.iter().copied().filter(keep).collect();
    let mut isr: Vec<i32> = p.isr.iter().copied().filter(keep).collect();
    let unclean = isr.is_empty();
    if unclean {
        isr.push(replicas[0]);
    }
    let target = Target {
        isr,
        replicas,
        adding: Vec::new(),
        removing: Vec::new(),
    };
    (target, unclean)
}

/// ListPartitionReassignments: every partition being reassigned (`None`), or those named that
/// are (unknown ones are left out, as Kafka does), in (topic, partition) order.
pub fn list(image: &MetadataImage, named: Option<&[(String, Vec<i32>)]>) -> Vec<Ongoing> {
    let ongoing = |topic: &str, partition: i32, id: Uuid| {
        let p = image.partition(id, partition)?;
        p.is_reassigning().then(|| Ongoing {
            topic: topic.to_string(),
            partition,
            replicas: p.replicas.clone(),
            adding: p.adding_replicas.clone(),
            removing: p.removing_replicas.clone(),
        })
    };
    let mut out: Vec<Ongoing> = match named {
        Some(list) => list
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t, *p)))
            .filter_map(|(t, p)| ongoing(t, p, image.topic(t)?.id))
            .collect(),
        None => image
            .partitions()
            .filter(|(_, p)| p.is_reassigning())
            .filter_map(|((id, p), _)| ongoing(&image.topic_by_id(id)?.name, p, id))
            .collect(),
    };
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    out.dedup_by(|a, b| a.topic == b.topic && a.partition == b.partition);
    out
}

#[cfg(test)]
mod tests;
