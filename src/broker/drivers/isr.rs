//! The ISR driver: the I/O around each led partition's replica set (`replica::isr`). Every
//! [`TICK`] it ticks every replicated partition this broker leads (a follower not caught up
//! within `replica.lag.time.max.ms` is proposed out of the ISR; a proposal the controller asked
//! to retry is sent again), drains the AlterPartitions the sets asked for (shrinks from the tick,
//! expansions from follower fetches), sends them batched in one AlterPartition v3 (topic ids,
//! each ISR member with its broker epoch, KIP-497/KIP-903) to the active controller over the
//! broker-session link, and feeds each partition's answer back as an [`AlterOutcome`].
//!
//! Bounds: each set keeps at most one AlterPartition in flight (so a partition is in at most
//! one request), one request is in flight per broker (the loop waits for it, bounded by the
//! session call's timeout), and a request carries at most [`MAX_PARTITIONS_PER_REQUEST`]
//! partitions (the rest stay queued in their partitions for the next round).
//!
//! A committed change arrives twice: in the answer, and as the controller's PartitionChange
//! record in the image, which `reconcile::sync_role` hands to the partition (a newer partition
//! epoch under the same leader epoch). Either alone is enough; the later one is ignored.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, ApiKey, BrokerId, RequestKind, ResponseKind,
};
use uuid::Uuid;

use crate::broker::{drivers::broker_session, shared::Broker, state::PartitionHandle};
use crate::replica::isr::{Action, AlterOutcome};

/// How often led partitions are ticked and queued AlterPartitions sent: a shrink lands within
/// this of `replica.lag.time.max.ms`, an expansion within this of the follower's fetch.
pub const TICK: Duration = Duration::from_millis(100);
/// The most partitions one AlterPartition carries.
pub const MAX_PARTITIONS_PER_REQUEST: usize = 1000;
/// AlterPartition v3: topic ids and `new_isr_with_epochs`.
const VERSION: i16 = 3;

/// One partition's proposal, taken from its replica set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Each member with the broker epoch the leader saw.
    pub isr: Vec<(i32, i64)>,
}

/// The request for `proposals` from broker `node` at `broker_epoch`, grouped by topic.
pub fn request(node: i32, broker_epoch: i64, proposals: &[Proposal]) -> AlterPartitionRequest {
    let mut topics: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    for p in proposals {
        let members = p
            .isr
            .iter()
            .map(|&(id, epoch)| {
                BrokerState::default()
                    .with_broker_id(BrokerId(id))
                    .with_broker_epoch(epoch)
            })
            .collect();
        topics.entry(p.topic_id).or_default().push(
            PartitionData::default()
                .with_partition_index(p.partition)
                .with_leader_epoch(p.leader_epoch)
                .with_new_isr_with_epochs(members)
                .with_leader_recovery_state(0)
                .with_partition_epoch(p.partition_epoch),
        );
    }
    AlterPartitionRequest::default()
        .with_broker_id(BrokerId(node))
        .with_broker_epoch(broker_epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(id, partitions)| {
                    TopicData::default()
                        .with_topic_id(id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

/// How the leader takes one partition's error code (notes §1.9).
fn outcome_of(code: i16) -> Option<AlterOutcome> {
    use ResponseError::*;
    match ResponseError::try_from_code(code) {
        None => None,
        Some(IneligibleReplica | OperationNotAttempted) => Some(AlterOutcome::Refused),
        Some(
            FencedLeaderEpoch
            | InvalidUpdateVersion
            | UnknownTopicOrPartition
            | UnknownTopicId
            | InvalidRequest
            | NewLeaderElected,
        ) => Some(AlterOutcome::Stale),
        Some(_) => Some(AlterOutcome::Retry),
    }
}

/// Each proposal's outcome from the controller's answer (`None`: nobody answered). A whole-
/// request error (NOT_CONTROLLER, STALE_BROKER_EPOCH...) and a partition missing from the
/// answer are retried.
pub fn outcomes(
    proposals: &[Proposal],
    response: Option<&AlterPartitionResponse>,
) -> Vec<AlterOutcome> {
    let Some(response) = response.filter(|r| r.error_code == 0) else {
        return vec![AlterOutcome::Retry; proposals.len()];
    };
    let mut answers = BTreeMap::new();
    for t in &response.topics {
        for p in &t.partitions {
            answers.insert((t.topic_id, p.partition_index), p);
        }
    }
    proposals
        .iter()
        .map(|prop| {
            let Some(a) = answers.get(&(prop.topic_id, prop.partition)) else {
                return AlterOutcome::Retry;
            };
            match outcome_of(a.error_code) {
                Some(o) => o,
                None => AlterOutcome::Committed {
                    leader_epoch: a.leader_epoch,
                    partition_epoch: a.partition_epoch,
                    isr: a.isr.iter().map(|b| b.0).collect(),
                },
            }
        })
        .collect()
}

/// The round's bookkeeping: at most [`MAX_PARTITIONS_PER_REQUEST`] proposals, each partition
/// once (a set keeps at most one AlterPartition in flight), each ISR without a member twice.
fn check_proposals(proposals: &[Proposal]) {
    assert!(
        proposals.len() <= MAX_PARTITIONS_PER_REQUEST,
        "{} proposals in one AlterPartition",
        proposals.len()
    );
    let mut seen = std::collections::BTreeSet::new();
    for p in proposals {
        assert!(
            seen.insert((p.topic_id, p.partition)),
            "partition {} of {} proposed twice in one round",
            p.partition,
            p.topic_id
        );
        let members: std::collections::BTreeSet<i32> = p.isr.iter().map(|m| m.0).collect();
        assert_eq!(members.len(), p.isr.len(), "an ISR member twice: {p:?}");
    }
}

/// Whether `proposal` is still the AlterPartition the partition's set has in flight: same
/// leader and partition epoch, same ISR (Kafka's `partitionState eq proposedIsrState`).
fn answers_pending(p: &crate::replica::Partition, proposal: &Proposal) -> bool {
    let Some(set) = p.replica_set() else {
        return false;
    };
    let members: Vec<i32> = proposal.isr.iter().map(|m| m.0).collect();
    set.leader_epoch() == proposal.leader_epoch
        && set.partition_epoch() == proposal.partition_epoch
        && set.in_flight_isr().as_deref() == Some(&members[..])
}

/// The driver task (cluster brokers): runs until the broker shuts down.
pub(crate) async fn run(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    loop {
        tokio::select! {
            biased;
            _ = broker.io.clock.sleep(TICK) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        round(&broker).await;
    }
}

/// The AlterPartition the partition's set asked for since the last round, if any, checked
/// against the set: it is the set's one pending proposal, at its epochs.
fn take_proposal(p: &mut crate::replica::Partition, topic_id: Uuid) -> Option<Proposal> {
    let Action::AlterPartition {
        leader_epoch,
        partition_epoch,
        isr,
    } = p.take_alter_partition()?
    else {
        return None;
    };
    let set = p.replica_set().expect("only a replicated leader proposes");
    let members: Vec<i32> = isr.iter().map(|m| m.0).collect();
    assert_eq!(
        set.in_flight_isr().as_deref(),
        Some(&members[..]),
        "{}-{}: the AlterPartition sent is not the one pending",
        p.topic(),
        p.index()
    );
    assert_eq!(
        (set.leader_epoch(), set.partition_epoch()),
        (leader_epoch, partition_epoch),
        "{}-{}: an AlterPartition from another epoch",
        p.topic(),
        p.index()
    );
    Some(Proposal {
        topic_id,
        partition: p.index(),
        leader_epoch,
        partition_epoch,
        isr,
    })
}

/// One round: tick, drain, send, feed back.
async fn round(broker: &Broker) {
    let now = broker.io.clock.wall_ms();
    let handles: Vec<Arc<PartitionHandle>> = broker
        .partitions
        .read()
        .unwrap()
        .values()
        .cloned()
        .collect();
    // With the committed ISR's size when proposed (for the shrink/expand counters: the commit
    // may reach the partition through the metadata before the answer does).
    let mut taken: Vec<(Arc<PartitionHandle>, Proposal, usize)> = Vec::new();
    for handle in handles {
        let Some(mut p) = handle.lock_open() else {
            continue;
        };
        if p.replica_set().is_none() {
            continue;
        }
        p.tick_replicas(now);
        if taken.len() >= MAX_PARTITIONS_PER_REQUEST {
            // Left queued in the partition for the next round.
            continue;
        }
        if let Some(proposal) = take_proposal(&mut p, handle.topic_id) {
            let before = p.isr_size();
            drop(p);
            taken.push((handle, proposal, before));
        }
    }
    if taken.is_empty() {
        return;
    }
    let proposals: Vec<Proposal> = taken.iter().map(|(_, p, _)| p.clone()).collect();
    check_proposals(&proposals);
    let node = broker.config.node_id;
    let broker_epoch = broker.image().broker(node).map_or(-1, |b| b.epoch);
    let req = request(node, broker_epoch, &proposals);
    let answer = match broker_session::call(
        broker,
        ApiKey::AlterPartition,
        VERSION,
        RequestKind::AlterPartition(req),
    )
    .await
    {
        Ok(ResponseKind::AlterPartition(r)) => Some(r),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(error = %e, "AlterPartition not answered; retried next round");
            None
        }
    };
    let results = outcomes(&proposals, answer.as_ref());
    assert_eq!(results.len(), proposals.len(), "one outcome per proposal");
    for ((handle, proposal, before), outcome) in taken.into_iter().zip(results) {
        tracing::debug!(partition = proposal.partition, isr = ?proposal.isr, ?outcome,
            "AlterPartition answered");
        let Some(mut p) = handle.lock_open() else {
            continue;
        };
        if !answers_pending(&p, &proposal) {
            // Superseded meanwhile (new metadata cleared it, maybe a new one is pending): the
            // answer is not for the set's proposal, and the image carries what committed. When
            // that is this change (the image got here before the answer), it still counts, as
            // Kafka's leader counts an answer whose partition epoch it already has.
            if let (
                Some(set),
                AlterOutcome::Committed {
                    leader_epoch,
                    partition_epoch,
                    isr,
                },
            ) = (p.replica_set(), &outcome)
            {
                if set.leader_epoch() == *leader_epoch
                    && set.partition_epoch() == *partition_epoch
                    && set.committed_isr() == *isr
                {
                    broker.metrics.isr_changed(before, isr.len());
                }
            }
            tracing::debug!(
                partition = proposal.partition,
                "AlterPartition answer superseded"
            );
            continue;
        }
        // Kafka's IsrShrinks/IsrExpands: changes this leader asked for and got.
        match &outcome {
            AlterOutcome::Committed { isr, .. } => broker.metrics.isr_changed(before, isr.len()),
            _ => broker.metrics.isr_update_failed(),
        }
        let committed = matches!(outcome, AlterOutcome::Committed { .. });
        // The guard's drop wakes produces whose offsets a committed ISR change passed.
        p.alter_partition_done(outcome);
        // A refusal or an error ends the flight (a commit for another epoch is ignored).
        assert!(
            committed || p.replica_set().and_then(|s| s.in_flight_isr()).is_none(),
            "{}-{}: still in flight after its answer",
            p.topic(),
            p.index()
        );
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::alter_partition_response::{
        PartitionData as AnswerData, TopicData as AnswerTopic,
    };

    use super::*;

    fn proposal(topic: u64, partition: i32) -> Proposal {
        Proposal {
            topic_id: Uuid::from_u64_pair(0, topic),
            partition,
            leader_epoch: 3,
            partition_epoch: 7,
            isr: vec![(1, 11), (2, 12)],
        }
    }

    #[test]
    fn a_round_proposes_each_partition_once() {
        check_proposals(&[proposal(1, 0), proposal(1, 1), proposal(2, 0)]);
        let twice = std::panic::catch_unwind(|| check_proposals(&[proposal(1, 0), proposal(1, 0)]));
        assert!(twice.is_err());
        let mut doubled = proposal(1, 0);
        doubled.isr.push((1, 11));
        assert!(std::panic::catch_unwind(|| check_proposals(&[doubled])).is_err());
    }

    #[test]
    fn the_request_groups_by_topic_with_each_members_broker_epoch() {
        let req = request(1, 11, &[proposal(1, 0), proposal(2, 4), proposal(1, 2)]);
        assert_eq!((req.broker_id.0, req.broker_epoch), (1, 11));
        assert_eq!(req.topics.len(), 2);
        let t1 = &req.topics[0];
        assert_eq!(t1.topic_id, Uuid::from_u64_pair(0, 1));
        let indexes: Vec<i32> = t1.partitions.iter().map(|p| p.partition_index).collect();
        assert_eq!(indexes, vec![0, 2]);
        let p = &t1.partitions[0];
        assert_eq!((p.leader_epoch, p.partition_epoch), (3, 7));
        let members: Vec<(i32, i64)> = p
            .new_isr_with_epochs
            .iter()
            .map(|m| (m.broker_id.0, m.broker_epoch))
            .collect();
        assert_eq!(members, vec![(1, 11), (2, 12)]);
        assert_eq!(p.leader_recovery_state, 0);
    }

    fn answer(topic: u64, partition: i32, code: ResponseError) -> AnswerTopic {
        let mut data = AnswerData::default()
            .with_partition_index(partition)
            .with_error_code(if code == ResponseError::UnknownServerError {
                0
            } else {
                code.code()
            });
        data = data
            .with_leader_epoch(3)
            .with_partition_epoch(8)
            .with_isr(vec![BrokerId(1), BrokerId(2)]);
        AnswerTopic::default()
            .with_topic_id(Uuid::from_u64_pair(0, topic))
            .with_partitions(vec![data])
    }

    #[test]
    fn answers_sort_into_commit_refuse_stale_and_retry() {
        let proposals: Vec<Proposal> = (0..6).map(|i| proposal(1, i)).collect();
        // UnknownServerError stands for "no error" in `answer`.
        let codes = [
            ResponseError::UnknownServerError,
            ResponseError::IneligibleReplica,
            ResponseError::FencedLeaderEpoch,
            ResponseError::InvalidUpdateVersion,
            ResponseError::NotController,
        ];
        let topics = codes
            .iter()
            .enumerate()
            .map(|(i, c)| answer(1, i as i32, *c))
            .collect();
        let response = AlterPartitionResponse::default().with_topics(topics);
        let got = outcomes(&proposals, Some(&response));
        assert_eq!(
            got,
            vec![
                AlterOutcome::Committed {
                    leader_epoch: 3,
                    partition_epoch: 8,
                    isr: vec![1, 2]
                },
                AlterOutcome::Refused,
                AlterOutcome::Stale,
                AlterOutcome::Stale,
                AlterOutcome::Retry,
                // Partition 5 is missing from the answer.
                AlterOutcome::Retry,
            ]
        );
        let whole =
            AlterPartitionResponse::default().with_error_code(ResponseError::NotController.code());
        assert_eq!(
            outcomes(&proposals[..2], Some(&whole)),
            vec![AlterOutcome::Retry; 2]
        );
        assert_eq!(outcomes(&proposals[..1], None), vec![AlterOutcome::Retry]);
    }
}
