//! Balanced unclean recovery (KIP-966 part 2, which Kafka designed but has not shipped), with
//! Kafka's planned names: `unclean.recovery.manager.enabled`, `unclean.recovery.strategy`,
//! `unclean.recovery.timeout.ms`.
//!
//! It decides a partition whose ISR and ELR are both empty (after a whole-cluster crash every
//! restarted replica left both). Instead of Kafka 4.x's last-known-leader rung, the active
//! controller asks the replicas for their logs — each broker reports, on its BrokerHeartbeat,
//! the last leader epoch and log end offset of every such partition it hosts — and:
//!
//! - `Balanced`: waits until every last-known ELR member (the last leader, plus every ELR
//!   member removed by an unclean shutdown while the ISR was empty) is acceptable and has
//!   reported, then elects the highest last epoch, then the longest log, ties in assignment
//!   order; past `unclean.recovery.timeout.ms` since the partition was first seen so, the best
//!   among the members that are acceptable and have reported;
//! - `Aggressive`: at once, the best among every acceptable replica that reported;
//! - `None`: never by itself (ElectLeaders UNCLEAN still elects).
//!
//! Either way it is an unclean election: ISR = [leader], recovering (KIP-704), ELR and last
//! known ELR cleared. The reports and the "leaderless since" times are the active controller's
//! memory ([`ReplicaReports`]): a controller failover starts them afresh, as the KIP says.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::ElectionConfig;
use crate::controller::image::{MetadataImage, PartitionChange, PartitionRegistration, NO_LEADER};

/// `unclean.recovery.strategy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryStrategy {
    None,
    Balanced,
    Aggressive,
}

impl RecoveryStrategy {
    /// Kafka's spelling (case-insensitive); `None` for anything else.
    pub fn parse(text: &str) -> Option<RecoveryStrategy> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" => Some(RecoveryStrategy::None),
            "balanced" => Some(RecoveryStrategy::Balanced),
            "aggressive" => Some(RecoveryStrategy::Aggressive),
            _ => None,
        }
    }

    /// The strategy when `unclean.recovery.strategy` is not set: KIP-966's mapping of
    /// `unclean.leader.election.enable` (true: Aggressive, false: Balanced).
    pub fn derived(unclean_leader_election: bool) -> RecoveryStrategy {
        if unclean_leader_election {
            RecoveryStrategy::Aggressive
        } else {
            RecoveryStrategy::Balanced
        }
    }
}

/// The recovery settings of a topic, present when `unclean.recovery.manager.enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    pub strategy: RecoveryStrategy,
    /// `unclean.recovery.timeout.ms`.
    pub timeout_ms: i64,
}

/// What a replica reports of its log for a leaderless partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReplicaLog {
    /// The epoch of its last batch (the leader epoch cache's latest entry; -1: empty log).
    pub last_epoch: i32,
    /// Its log end offset.
    pub log_end: i64,
}

/// Whether `p` is one balanced recovery decides: no leader, ISR and ELR empty.
pub fn awaits_recovery(p: &PartitionRegistration) -> bool {
    p.leader == NO_LEADER && p.isr.is_empty() && p.elr.is_empty()
}

/// The recovery election for one partition, `leaderless_ms` after it was first seen awaiting
/// recovery; `None` while it must wait (or has nothing to do).
pub fn recover_partition(
    key: (Uuid, i32),
    p: &PartitionRegistration,
    config: ElectionConfig,
    leaderless_ms: i64,
    acceptable: &dyn Fn(i32) -> bool,
    reported: &dyn Fn(i32) -> Option<ReplicaLog>,
) -> Option<PartitionChange> {
    let recovery = config.recovery.filter(|_| config.elr)?;
    if !awaits_recovery(p) {
        return None;
    }
    let members: Vec<i32> = match recovery.strategy {
        RecoveryStrategy::None => return None,
        RecoveryStrategy::Aggressive => p.replicas.clone(),
        RecoveryStrategy::Balanced => {
            let lke: Vec<i32> = p
                .replicas
                .iter()
                .copied()
                .filter(|r| p.last_known_elr.contains(r))
                .collect();
            let members = if lke.is_empty() {
                p.replicas.clone()
            } else {
                lke
            };
            let all_back = members
                .iter()
                .all(|r| acceptable(*r) && reported(*r).is_some());
            if !all_back && leaderless_ms < recovery.timeout_ms {
                return None;
            }
            members
        }
    };
    // The best log: highest last epoch, then longest; the first in assignment order on a tie.
    let mut best: Option<(ReplicaLog, i32)> = None;
    for r in members {
        if !acceptable(r) {
            continue;
        }
        let Some(log) = reported(r) else { continue };
        if best.is_none_or(|(b, _)| log > b) {
            best = Some((log, r));
        }
    }
    let (_, leader) = best?;
    let mut change = PartitionChange::new(key.0, key.1);
    change.leader = Some(leader);
    change.isr = Some(vec![leader]);
    if !p.leader_recovering {
        change.leader_recovering = Some(true);
    }
    if !p.last_known_elr.is_empty() {
        change.last_known_elr = Some(Vec::new());
    }
    Some(change)
}

/// One broker's report: each partition's log.
type Logs = BTreeMap<(Uuid, i32), ReplicaLog>;

/// The active controller's memory for recovery: each broker's latest report with the broker
/// epoch it was sent under, and when each partition was first seen awaiting recovery.
#[derive(Clone, Debug, Default)]
pub struct ReplicaReports {
    reports: BTreeMap<i32, (i64, Logs)>,
    since: BTreeMap<(Uuid, i32), i64>,
}

impl ReplicaReports {
    /// A heartbeat's report (replaces the broker's previous one). One from an older broker
    /// epoch than the kept one is discarded.
    pub fn report(&mut self, broker: i32, epoch: i64, logs: &[((Uuid, i32), ReplicaLog)]) {
        if self.reports.get(&broker).is_some_and(|(e, _)| *e > epoch) {
            return;
        }
        self.reports
            .insert(broker, (epoch, logs.iter().copied().collect()));
    }

    /// `broker`'s report for `key`, if it came from its registered epoch.
    fn log(&self, image: &MetadataImage, broker: i32, key: (Uuid, i32)) -> Option<ReplicaLog> {
        let (epoch, logs) = self.reports.get(&broker)?;
        let registered = image.broker(broker)?.epoch;
        (*epoch == registered).then(|| logs.get(&key).copied())?
    }

    /// The recovery elections due at `now` (at most `limit`), after noting which partitions
    /// await recovery and forgetting those that no longer do and brokers no longer registered.
    pub fn elect(
        &mut self,
        image: &MetadataImage,
        now: i64,
        limit: usize,
        config: &dyn Fn(&crate::controller::image::TopicMeta) -> ElectionConfig,
    ) -> Vec<PartitionChange> {
        self.reports.retain(|id, _| image.broker(*id).is_some());
        let waiting: BTreeSet<(Uuid, i32)> = image
            .partitions()
            .filter(|(_, p)| awaits_recovery(p))
            .map(|(k, _)| k)
            .collect();
        self.since.retain(|k, _| waiting.contains(k));
        let acceptable = |r: i32| image.is_active_broker(r);
        let mut changes = Vec::new();
        for key in waiting {
            let since = *self.since.entry(key).or_insert(now);
            if changes.len() >= limit {
                continue;
            }
            let (Some(topic), Some(p)) = (image.topic_by_id(key.0), image.partition(key.0, key.1))
            else {
                continue;
            };
            let reported = |r: i32| self.log(image, r, key);
            if let Some(c) =
                recover_partition(key, p, config(topic), now - since, &acceptable, &reported)
            {
                changes.push(c);
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests;
