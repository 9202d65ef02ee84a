//! AlterPartition (KIP-497) on the controller: a partition leader asks to change its ISR.
//! Validated against the committed image in Kafka's order (notes §1.8), then turned into a
//! PartitionChange; the leader is answered after it commits.
//!
//! Order: the sender's broker epoch (whole request, STALE_BROKER_EPOCH); unknown topic
//! (UNKNOWN_TOPIC_ID) or partition (UNKNOWN_TOPIC_OR_PARTITION); a leader or partition epoch
//! above the registry's (NOT_CONTROLLER: this controller is behind); a leader epoch below
//! (FENCED_LEADER_EPOCH); a sender that is not the leader (INVALID_REQUEST); a partition
//! epoch below (INVALID_UPDATE_VERSION); an ISR outside the replicas or without the leader
//! (INVALID_REQUEST); a recovering leader with a larger ISR, or RECOVERED → RECOVERING
//! (INVALID_REQUEST); a new member not registered, fenced, shutting down or with another
//! broker epoch (INELIGIBLE_REPLICA).

use std::collections::BTreeSet;

use uuid::Uuid;

use super::election::{self, Election, ElectionConfig};
use super::image::{MetadataImage, MetadataRecord, PartitionChange, PartitionRegistration};
use super::ControllerError;

/// The most partitions one request may alter (Kafka's bound on one controller operation's
/// records); a larger request is refused whole.
pub const MAX_ALTERATIONS: usize = super::MAX_NEW_PARTITIONS as usize;

/// One partition of an AlterPartition request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alteration {
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// The proposed ISR, each member with the broker epoch the leader saw in its fetches
    /// (-1 when unknown: requests before v3).
    pub new_isr: Vec<(i32, i64)>,
    /// The leader reports RECOVERING (true) or RECOVERED (false).
    pub leader_recovering: bool,
}

/// The validated change, if anything changes, and whether it also moved leadership (Kafka then
/// answers NEW_LEADER_ELECTED while still writing the record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    pub change: Option<PartitionChange>,
    pub new_leader_elected: bool,
}

/// What one partition of a request is answered, as of after the request's records commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartitionAnswer {
    /// Accepted: the partition as it is once the change (if any) is committed.
    Done(PartitionRegistration),
    /// Accepted, but the change also moved the leadership away from the sender: Kafka writes
    /// it and answers NEW_LEADER_ELECTED.
    NewLeaderElected,
    Refused(ControllerError),
}

/// A whole AlterPartition request decided: the records to commit, and each partition's answer
/// in request order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    pub records: Vec<MetadataRecord>,
    pub answers: Vec<((Uuid, i32), PartitionAnswer)>,
}

/// An AlterPartition request from `broker` at `broker_epoch`: the sender's epoch first (an
/// `Err` answers the whole request), then each partition on its own against the committed
/// image. A partition named twice is refused the second time (both would be validated against
/// the same registration and the second record would not fit the first).
pub fn alter_partitions(
    image: &MetadataImage,
    broker: i32,
    broker_epoch: i64,
    requests: &[Alteration],
    config: &dyn Fn(&super::image::TopicMeta) -> ElectionConfig,
) -> Result<Decided, ControllerError> {
    check_sender(image, broker, broker_epoch)?;
    if requests.len() > MAX_ALTERATIONS {
        return Err(ControllerError::InvalidRequest(format!(
            "{} partitions in one AlterPartition; at most {MAX_ALTERATIONS}",
            requests.len()
        )));
    }
    let mut seen = BTreeSet::new();
    let mut decided = Decided {
        records: Vec::new(),
        answers: Vec::with_capacity(requests.len()),
    };
    for request in requests {
        let key = (request.topic_id, request.partition);
        let answer = if !seen.insert(key) {
            PartitionAnswer::Refused(ControllerError::InvalidRequest(format!(
                "partition {} of topic id {} named twice",
                key.1, key.0
            )))
        } else {
            match alter_partition(image, broker, request, config) {
                Err(e) => PartitionAnswer::Refused(e),
                Ok(accepted) => {
                    let mut after = image
                        .partition(key.0, key.1)
                        .expect("validated: the partition exists")
                        .clone();
                    if let Some(change) = accepted.change {
                        after.apply(&change);
                        decided
                            .records
                            .push(MetadataRecord::PartitionChange(change));
                    }
                    if accepted.new_leader_elected {
                        PartitionAnswer::NewLeaderElected
                    } else {
                        PartitionAnswer::Done(after)
                    }
                }
            }
        };
        decided.answers.push((key, answer));
    }
    Ok(decided)
}

/// The request-level check: the sender is registered with this broker epoch.
pub fn check_sender(image: &MetadataImage, broker: i32, epoch: i64) -> Result<(), ControllerError> {
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

/// Validates one partition's alteration from `broker` (already checked by [`check_sender`]).
pub fn alter_partition(
    image: &MetadataImage,
    broker: i32,
    request: &Alteration,
    config: &dyn Fn(&super::image::TopicMeta) -> ElectionConfig,
) -> Result<Accepted, ControllerError> {
    let topic = image
        .topic_by_id(request.topic_id)
        .ok_or(ControllerError::UnknownTopicId(request.topic_id))?;
    let p = image
        .partition(request.topic_id, request.partition)
        .ok_or_else(|| {
            ControllerError::UnknownTopic(format!("{}-{}", topic.name, request.partition))
        })?;
    let name = format!("{}-{}", topic.name, request.partition);
    if request.leader_epoch > p.leader_epoch || request.partition_epoch > p.partition_epoch {
        return Err(ControllerError::NotController(format!(
            "{name}: epochs ({}, {}) are ahead of this controller's ({}, {})",
            request.leader_epoch, request.partition_epoch, p.leader_epoch, p.partition_epoch
        )));
    }
    if request.leader_epoch < p.leader_epoch {
        return Err(ControllerError::FencedLeaderEpoch(format!(
            "{name}: leader epoch {} is below the current {}",
            request.leader_epoch, p.leader_epoch
        )));
    }
    if broker != p.leader {
        return Err(ControllerError::InvalidRequest(format!(
            "{name}: broker {broker} is not the leader ({})",
            p.leader
        )));
    }
    if request.partition_epoch < p.partition_epoch {
        return Err(ControllerError::InvalidUpdateVersion(format!(
            "{name}: partition epoch {} is below the current {}",
            request.partition_epoch, p.partition_epoch
        )));
    }
    let isr: Vec<i32> = request.new_isr.iter().map(|(id, _)| *id).collect();
    let mut sorted = isr.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != isr.len()
        || !isr.iter().all(|r| p.replicas.contains(r))
        || !isr.contains(&p.leader)
    {
        return Err(ControllerError::InvalidRequest(format!(
            "{name}: the ISR {isr:?} must be distinct replicas of {:?} including the leader {}",
            p.replicas, p.leader
        )));
    }
    if request.leader_recovering && isr.len() > 1 {
        return Err(ControllerError::InvalidRequest(format!(
            "{name}: a recovering leader cannot have an ISR of {isr:?}"
        )));
    }
    if request.leader_recovering && !p.leader_recovering {
        return Err(ControllerError::InvalidRequest(format!(
            "{name}: a recovered leader cannot become recovering"
        )));
    }
    // Every member, as Kafka checks them (KIP-841, KIP-903): one fenced or shutting down is
    // out of the ISR already, and one with another epoch is a restarted broker whose log the
    // leader has not seen.
    for &(id, epoch) in &request.new_isr {
        let eligible = image
            .broker(id)
            .is_some_and(|b| b.is_active() && (epoch == -1 || epoch == b.epoch))
            // KIP-858: nor one whose replica's directory failed.
            && !super::log_dirs::replica_dir_offline(image, (request.topic_id, request.partition), id);
        if !eligible {
            return Err(ControllerError::IneligibleReplica(format!(
                "{name}: replica {id} is not registered, is fenced or shutting down, or has another broker epoch"
            )));
        }
    }
    let acceptable = |r: i32| image.is_active_broker(r);
    let mut change = election::change_partition(
        (request.topic_id, request.partition),
        p,
        isr,
        Election::Online,
        config(topic),
        &acceptable,
        &[],
    )
    .unwrap_or_else(|| PartitionChange::new(request.topic_id, request.partition));
    if change.leader_recovering.is_none() && request.leader_recovering != p.leader_recovering {
        change.leader_recovering = Some(request.leader_recovering);
    }
    let new_leader_elected = change.leader.is_some_and(|l| l != p.leader);
    Ok(Accepted {
        change: (!change.is_empty()).then_some(change),
        new_leader_elected,
    })
}

#[cfg(test)]
mod tests;
