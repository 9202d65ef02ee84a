//! Retiring a broker, the controller's side. Pure: the committed image in, records out.
//!
//! - **Cordoning** (KIP-1066): a broker reports in its heartbeats which of its directories are
//!   cordoned (`cordoned.log.dirs`, a path list or `*`); the first report that differs from the
//!   registration is recorded (Kafka's BrokerRegistrationChangeRecord `CordonedLogDirs`). A
//!   broker whose every online directory is cordoned takes no new partitions
//!   (`Controller::create_topic` / `create_partitions` place on the others); its existing
//!   replicas keep serving.
//! - **Unregistering** (UnregisterBroker, `kafka-cluster.sh unregister`): as Kafka's
//!   `ReplicationControlManager.unregisterBroker`, an id that is not registered is refused
//!   (BROKER_ID_NOT_REGISTERED); otherwise the broker leaves every ISR and ELR (a partition it
//!   led elects another leader) and its registration is removed. Its replicas stay in the
//!   partitions' replica lists (they are under-replicated until reassigned), as in Kafka: the
//!   operator moves them away first.

use uuid::Uuid;

use super::election::{change_partition, Election, ElectionConfig};
use super::image::{MetadataImage, MetadataRecord, TopicMeta};
use super::ControllerError;

/// The record for a heartbeat of `broker` reporting `cordoned` directories, if they differ
/// from those recorded. Only the broker's registered directories count, sorted.
pub fn cordon(image: &MetadataImage, broker: i32, cordoned: &[Uuid]) -> Option<MetadataRecord> {
    let registration = image.broker(broker)?;
    let mut now: Vec<Uuid> = cordoned
        .iter()
        .copied()
        .filter(|d| registration.log_dirs.contains(d))
        .collect();
    now.sort();
    now.dedup();
    if now == registration.cordoned_log_dirs {
        return None;
    }
    Some(MetadataRecord::BrokerCordonedLogDirs {
        id: broker,
        epoch: registration.epoch,
        cordoned_log_dirs: now,
    })
}

/// UnregisterBroker for `broker`: the partition changes taking it out of every ISR and ELR,
/// then the UnregisterBroker record.
pub fn unregister(
    image: &MetadataImage,
    broker: i32,
    config: &dyn Fn(&TopicMeta) -> ElectionConfig,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let Some(registration) = image.broker(broker) else {
        return Err(ControllerError::BrokerIdNotRegistered(format!(
            "Broker ID {broker} is not currently registered"
        )));
    };
    let acceptable = |r: i32| r != broker && image.is_active_broker(r);
    let mut records: Vec<MetadataRecord> = image
        .partitions()
        .filter(|(_, p)| p.leader == broker || p.isr.contains(&broker) || p.elr.contains(&broker))
        .filter_map(|(key, p)| {
            let topic = image.topic_by_id(key.0)?;
            let target: Vec<i32> = p.isr.iter().copied().filter(|r| *r != broker).collect();
            // Listed as an unclean shutdown so that it does not move into the ELR: a broker
            // that is gone is no candidate for anything.
            let mut change = change_partition(
                key,
                p,
                target,
                Election::Online,
                config(topic),
                &acceptable,
                &[broker],
            )
            .unwrap_or_else(|| super::image::PartitionChange::new(key.0, key.1));
            let elr = change.elr.as_ref().unwrap_or(&p.elr);
            if elr.contains(&broker) {
                change.elr = Some(elr.iter().copied().filter(|r| *r != broker).collect());
            }
            (!change.is_empty()).then_some(MetadataRecord::PartitionChange(change))
        })
        .collect();
    records.push(MetadataRecord::UnregisterBroker {
        id: broker,
        epoch: registration.epoch,
    });
    Ok(records)
}

#[cfg(test)]
mod tests;
