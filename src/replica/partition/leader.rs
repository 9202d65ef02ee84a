//! The leader side of a replicated partition: the [`ReplicaSet`] it holds while it leads, fed
//! the image's leadership and broker views, the leader's own appends and fsyncs, its followers'
//! fetches, the ISR driver's ticks and the controller's AlterPartition answers. The high
//! watermark of a replicated leader moves only by the set's [`isr::Action::HighWatermark`];
//! an AlterPartition it asks for waits here (at most one, as the set keeps one in flight) until
//! the driver takes it.
//!
//! A partition whose only replica is this broker holds no set: its high watermark follows its
//! own log end (or fsynced end), as on a single node.
//!
//! The decisions are the state core's ([`ReplicaState`], pure); [`Partition`]'s methods here
//! only hand it the log's offsets.

use std::collections::BTreeMap;

use super::state::{LogEnds, ReplicaState};
use super::{Partition, Role};
use crate::replica::isr::{
    self, AlterOutcome, BrokerView, Event, FetchRefused, IsrConfig, Leadership, NotEnoughReplicas,
    ReplicaSet,
};
use crate::replica::read_replica::{self, ReplicaView};

/// Kafka's default `replica.lag.time.max.ms`.
pub const DEFAULT_REPLICA_LAG_TIME_MAX_MS: i64 = 30_000;

/// What the image says when it names this broker a partition's leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderView {
    /// This broker.
    pub node: i32,
    pub leadership: Leadership,
    /// The image's view of each replica's broker.
    pub brokers: BTreeMap<i32, BrokerView>,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: i64,
}

impl LeaderView {
    /// A partition whose only replica is `node` (a single node's partitions).
    pub fn sole(node: i32, leader_epoch: i32) -> LeaderView {
        LeaderView {
            node,
            leadership: Leadership {
                leader_epoch,
                partition_epoch: 0,
                replicas: vec![node],
                isr: vec![node],
            },
            brokers: BTreeMap::from([(
                node,
                BrokerView {
                    broker_epoch: -1,
                    eligible: true,
                },
            )]),
            replica_lag_time_max_ms: DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        }
    }

    /// Node 1 leading replicas 1-3, all in the ISR, none fetched yet: the high watermark stays
    /// where it is until followers fetch.
    #[cfg(test)]
    pub(in crate::replica) fn replicated_for_tests(leader_epoch: i32) -> LeaderView {
        let eligible = BrokerView {
            broker_epoch: 10,
            eligible: true,
        };
        LeaderView {
            node: 1,
            leadership: Leadership {
                leader_epoch,
                partition_epoch: leader_epoch,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2, 3],
            },
            brokers: (1..=3).map(|r| (r, eligible)).collect(),
            replica_lag_time_max_ms: DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        }
    }

    /// Whether other replicas share the partition (then the ISR rule moves the high watermark).
    pub fn replicated(&self) -> bool {
        self.leadership.replicas.iter().any(|&r| r != self.node)
    }
}

/// Why the image's leadership is not taken up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaderRefused {
    /// An older leader epoch than the one this replica already knows.
    Stale { requested: i32, current: i32 },
    /// The image names this broker leader but not as one of the partition's replicas in its
    /// ISR: a broken image, not acted on (a leader outside its ISR could commit alone).
    NotInIsr,
}

impl ReplicaState {
    /// Steps the replica set (whose presence the caller checked) and applies what it says.
    fn step_replicas(&mut self, event: Event, ends: LogEnds) -> Result<(), FetchRefused> {
        let set = self
            .replica_set
            .as_mut()
            .expect("stepped only while it leads a replicated partition");
        for action in set.step(event)? {
            match action {
                isr::Action::HighWatermark(hw) => {
                    // The set's watermark starts at this replica's (capped at its durable
                    // end), so it never asks for less than what consumers were shown.
                    if hw > self.high_watermark {
                        self.advance_high_watermark(hw, ends);
                    }
                }
                alter @ isr::Action::AlterPartition { .. } => {
                    // The set keeps one in flight: a newer one replaces an untaken resend.
                    self.alter_partition = Some(alter);
                }
            }
        }
        if self
            .replica_set
            .as_ref()
            .is_some_and(|s| s.in_flight_isr().is_none())
        {
            // New metadata or an answer ended the proposal before the driver took it: there
            // is nothing to send any more.
            self.alter_partition = None;
        }
        Ok(())
    }

    /// Creates or updates the replica set from the image, once `become_leader` took the epoch.
    pub(super) fn lead_replicas(&mut self, view: LeaderView, ends: LogEnds, now_ms: i64) {
        if !view.replicated() {
            self.replica_set = None;
            self.alter_partition = None;
            return;
        }
        let config = self.isr_config(view.replica_lag_time_max_ms);
        let set = self
            .replica_set
            .get_or_insert_with(|| ReplicaSet::new(view.node, config));
        set.set_config(config);
        let _ = self.step_replicas(Event::Brokers(view.brokers), ends);
        let (log_end, durable_end) = self.leader_ends(ends);
        let _ = self.step_replicas(
            Event::BecomeLeader {
                leadership: view.leadership,
                log_end,
                durable_end,
                high_watermark: self.high_watermark,
                now: now_ms,
            },
            ends,
        );
    }

    fn isr_config(&self, replica_lag_time_max_ms: i64) -> IsrConfig {
        IsrConfig {
            replica_lag_time_max_ms,
            min_insync_replicas: self.config.min_insync_replicas.max(1) as usize,
            #[cfg(any(madsim, test))]
            planted: self.planted,
        }
    }

    /// A topic config change reaches the set's `min.insync.replicas`.
    pub(super) fn reconfigure_replicas(&mut self) {
        if let Some(set) = &self.replica_set {
            let lag = set.config().replica_lag_time_max_ms;
            let config = self.isr_config(lag);
            self.replica_set.as_mut().unwrap().set_config(config);
        }
    }

    /// The leader's log end and the end that counts for the high watermark: the fsynced one
    /// when consumers see only fsynced records (`weir.fsync.before.ack`).
    fn leader_ends(&self, ends: LogEnds) -> (i64, i64) {
        (
            ends.end,
            if self.durable_reads {
                ends.durable
            } else {
                ends.end
            },
        )
    }

    /// Tells the replica set the leader's log grew or was fsynced.
    pub(super) fn leader_end_moved(&mut self, ends: LogEnds) {
        if self.replica_set.is_some() {
            let (log_end, durable_end) = self.leader_ends(ends);
            let _ = self.step_replicas(
                Event::LeaderEnd {
                    log_end,
                    durable_end,
                },
                ends,
            );
        }
    }

    /// Leader side of a follower's Fetch at `fetch_offset`: everything below it is on the
    /// follower (durably, in durable mode). Steps the replica set; a high-watermark move is
    /// applied at once and an AlterPartition (an ISR expansion) queued for the driver. A refusal
    /// changes nothing.
    pub(super) fn follower_fetched(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        log_start_offset: i64,
        broker_epoch: i64,
        ends: LogEnds,
        now_ms: i64,
    ) -> Result<(), FetchRefused> {
        if self.role != Role::Leader || self.replica_set.is_none() {
            return Err(FetchRefused::NotReplica);
        }
        let stepped = self.step_replicas(
            Event::FollowerFetch {
                replica,
                fetch_offset,
                log_start_offset,
                broker_epoch,
                now: now_ms,
            },
            ends,
        );
        self.check_invariants(ends);
        stepped
    }

    /// The ISR driver's periodic check: shrinks the ISR by followers not caught up within
    /// `replica.lag.time.max.ms`, or resends an AlterPartition the controller asked to retry.
    pub(super) fn tick_replicas(&mut self, ends: LogEnds, now_ms: i64) {
        if self.replica_set.is_some() {
            let _ = self.step_replicas(Event::Tick { now: now_ms }, ends);
        }
        self.check_invariants(ends);
    }

    /// The AlterPartition to send, if the replica set asked for one since the last call.
    pub(super) fn take_alter_partition(&mut self) -> Option<isr::Action> {
        self.alter_partition.take()
    }

    /// The controller's answer to the AlterPartition last taken.
    pub(super) fn alter_partition_done(&mut self, outcome: AlterOutcome, ends: LogEnds) {
        if self.replica_set.is_some() {
            let _ = self.step_replicas(Event::AlterPartitionDone(outcome), ends);
        }
        self.check_invariants(ends);
    }

    /// KIP-392: the replica a consumer in `client_rack` fetching from `fetch_offset` should
    /// read from instead of this leader (`node`), or `None` to read here. Only a replicated
    /// leader redirects, and only to a follower in the committed ISR whose log end, as last
    /// fetched, reaches `fetch_offset` (Kafka's `findPreferredReadReplica`; the follower's log
    /// start is not known here, so it is not checked: a consumer sent below it gets
    /// OFFSET_OUT_OF_RANGE there and returns to the leader). `rack_of` gives a broker's rack,
    /// `None` for a broker clients cannot reach.
    pub(super) fn preferred_read_replica(
        &self,
        ends: LogEnds,
        node: i32,
        client_rack: &str,
        fetch_offset: i64,
        now_ms: i64,
        rack_of: impl Fn(i32) -> Option<String>,
    ) -> Option<i32> {
        let set = self.replica_set.as_ref()?;
        if self.role != Role::Leader || client_rack.is_empty() {
            return None;
        }
        let leader = ReplicaView {
            id: node,
            rack: rack_of(node),
            log_end: ends.end,
            since_caught_up_ms: 0,
        };
        let followers: Vec<ReplicaView> = set
            .committed_isr()
            .into_iter()
            .filter(|&r| r != node)
            .filter_map(|r| {
                let log_end = set.follower_log_end(r)?;
                (log_end >= fetch_offset).then(|| ReplicaView {
                    id: r,
                    rack: rack_of(r),
                    log_end,
                    since_caught_up_ms: set
                        .last_caught_up_ms(r)
                        .map_or(i64::MAX, |t| now_ms.saturating_sub(t).max(0)),
                })
            })
            .collect();
        let chosen = read_replica::rack_aware(client_rack, &leader, &followers);
        (chosen != node).then_some(chosen)
    }

    /// The replica set while this broker leads a replicated partition.
    pub fn replica_set(&self) -> Option<&ReplicaSet> {
        self.replica_set.as_ref()
    }

    /// Before appending an acks=all produce. Replicated: the committed ISR against
    /// `min(min.insync.replicas, replicas)` (Kafka ≥ 3.7). A partition on its own keeps the
    /// stricter single-node rule the README documents: `min.insync.replicas` itself, so one
    /// replica with `min.insync.replicas=2` refuses acks=all.
    pub fn check_min_isr(&self) -> Result<(), NotEnoughReplicas> {
        match &self.replica_set {
            Some(set) => set.check_min_isr(),
            None => {
                let required = self.config.min_insync_replicas.max(1) as usize;
                if required > 1 {
                    return Err(NotEnoughReplicas { isr: 1, required });
                }
                Ok(())
            }
        }
    }

    /// When an acks=all produce's offsets fall below the high watermark: whether the maximal
    /// ISR still meets the minimum (else NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    pub fn enough_replicas_after_append(&self) -> bool {
        match &self.replica_set {
            Some(set) => set.enough_replicas_after_append(),
            None => self.config.min_insync_replicas <= 1,
        }
    }
}

impl Partition {
    /// The end of what this replica has fsynced: what a follower in durable mode sends as its
    /// fetch offset (a replica counts towards the high watermark only up to it), and what a
    /// durable leader's high watermark is capped at.
    pub fn durable_log_end(&self) -> i64 {
        self.ends().durable
    }

    /// Leader side of a follower's Fetch at `fetch_offset`: everything below it is on the
    /// follower (durably, in durable mode), whose log starts at `log_start_offset` (-1: not
    /// said). Steps the replica set; a high-watermark move is applied at once and an
    /// AlterPartition (an ISR expansion) queued for the driver. A refusal changes nothing.
    pub fn follower_fetched(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        log_start_offset: i64,
        broker_epoch: i64,
        now_ms: i64,
    ) -> Result<(), FetchRefused> {
        let ends = self.ends();
        self.state.follower_fetched(
            replica,
            fetch_offset,
            log_start_offset,
            broker_epoch,
            ends,
            now_ms,
        )
    }

    /// DeleteRecords' low watermark (Kafka's `lowWatermarkIfLeader`): the log start of this
    /// leader and of every live follower (see [`isr::ReplicaSet::low_watermark`]); the log
    /// start alone without other replicas; `None` on a replica that does not lead.
    pub fn low_watermark(&self) -> Option<i64> {
        if self.role() != Role::Leader {
            return None;
        }
        let start = self.log_start_offset();
        Some(
            self.state
                .replica_set
                .as_ref()
                .map_or(start, |set| set.low_watermark(start)),
        )
    }

    /// The ISR driver's periodic check (see [`ReplicaState`]'s `tick_replicas`).
    pub fn tick_replicas(&mut self, now_ms: i64) {
        let ends = self.ends();
        self.state.tick_replicas(ends, now_ms);
    }

    /// The AlterPartition to send, if the replica set asked for one since the last call.
    pub fn take_alter_partition(&mut self) -> Option<isr::Action> {
        let taken = self.state.take_alter_partition();
        self.state.check_invariants(self.ends());
        taken
    }

    /// The controller's answer to the AlterPartition last taken.
    pub fn alter_partition_done(&mut self, outcome: AlterOutcome) {
        let ends = self.ends();
        self.state.alter_partition_done(outcome, ends);
    }

    /// KIP-392: the replica a consumer in `client_rack` should read from instead of this
    /// leader (`node`), or `None` to read here (see the state core's rule).
    pub fn preferred_read_replica(
        &self,
        node: i32,
        client_rack: &str,
        fetch_offset: i64,
        now_ms: i64,
        rack_of: impl Fn(i32) -> Option<String>,
    ) -> Option<i32> {
        self.state.preferred_read_replica(
            self.ends(),
            node,
            client_rack,
            fetch_offset,
            now_ms,
            rack_of,
        )
    }

    /// The replica set while this broker leads a replicated partition.
    pub fn replica_set(&self) -> Option<&ReplicaSet> {
        self.state.replica_set()
    }

    /// Before appending an acks=all produce (see [`ReplicaState::check_min_isr`]).
    pub fn check_min_isr(&self) -> Result<(), NotEnoughReplicas> {
        self.state.check_min_isr()
    }

    /// When an acks=all produce's offsets fall below the high watermark: whether the maximal
    /// ISR still meets the minimum (else NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    pub fn enough_replicas_after_append(&self) -> bool {
        self.state.enough_replicas_after_append()
    }
}

#[cfg(test)]
mod tests;
