//! The leader's view of its replica set, as a pure state machine (no I/O, no clock: `now` comes
//! in with the events): each follower's log end, fetch times, `lastCaughtUpTimeMs` and broker
//! epoch; the committed ISR (the image's) and the maximal ISR (plus a pending expansion); at
//! most one AlterPartition in flight; and the high watermark as a pure function of them.
//!
//! Rules (Kafka's `Partition.scala` and `Replica.scala`, notes §1):
//! - A fetch at `f` when the leader's log ends at `L` moves `lastCaughtUpTimeMs` to now if
//!   `f ≥ L`, else to the previous fetch's time if `f` reached the leader end recorded then; it
//!   never goes back. Caught up: at the leader end, or caught up within `replica.lag.time.max.ms`.
//! - Shrink (on a tick): ISR followers not caught up are dropped by an AlterPartition. Until it
//!   commits, the maximal ISR is still the old one, so the high watermark cannot move on the
//!   survivors' say-so while the controller may still elect a removed follower (§1.7).
//! - Expand (on a fetch): a follower reaching the high watermark and the leader-epoch start,
//!   eligible (unfenced, not shutting down) at its current broker epoch, joins the maximal ISR at
//!   once (extra members only slow the high watermark) and the committed one once it commits.
//! - High watermark: frozen while the committed ISR is below `min(min.insync.replicas,
//!   replicas)` (strict min ISR); otherwise the minimum log end over the leader, the maximal ISR
//!   and every caught-up eligible replica not yet in it; never back, never past the leader end
//!   (the fsynced end when the broker fsyncs before acknowledging).
//! - Low watermark (DeleteRecords, Kafka's `lowWatermarkIfLeader`): the minimum of the leader's
//!   log start and the log start each follower on an eligible broker last reported in its
//!   fetch; a follower that has not fetched under this leader counts as unknown (-1) and holds
//!   it down.

use std::collections::{BTreeMap, BTreeSet};

/// A follower whose log end is not known yet (a new leader forgets them).
pub const UNKNOWN_OFFSET: i64 = -1;
/// `lastCaughtUpTimeMs` of a follower never caught up under this leader.
const NEVER: i64 = i64::MIN / 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsrConfig {
    /// `replica.lag.time.max.ms` (30 000 by default).
    pub replica_lag_time_max_ms: i64,
    /// The topic's `min.insync.replicas`.
    pub min_insync_replicas: usize,
    /// Simulator and tests: the bug planted here (`IsrShrinkAdvancesHw`).
    #[cfg(any(madsim, test))]
    pub planted: crate::config::planted::Planted,
}

/// What the image says about a replica's broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrokerView {
    pub broker_epoch: i64,
    /// Registered, unfenced and not in controlled shutdown.
    pub eligible: bool,
}

/// The partition as the image has it, when this broker leads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leadership {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// The controller's answer to an AlterPartition, already sorted into what the leader does with
/// it (notes §1.9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlterOutcome {
    /// Committed: this ISR at this partition epoch (for this leader epoch).
    Committed {
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
    },
    /// INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED: definitely not applied; roll back.
    Refused,
    /// FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_*, INVALID_REQUEST,
    /// NEW_LEADER_ELECTED: stay pending until new metadata arrives.
    Stale,
    /// Anything else (NOT_CONTROLLER, a timeout...): send it again on the next tick.
    Retry,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The image names this broker leader (a new leader epoch), or changes the partition under
    /// the same leader epoch (a newer partition epoch: ISR or replicas). `log_end` is the
    /// leader's log end and `high_watermark` its current one.
    BecomeLeader {
        leadership: Leadership,
        log_end: i64,
        durable_end: i64,
        high_watermark: i64,
        now: i64,
    },
    /// The image's view of the replicas' brokers.
    Brokers(BTreeMap<i32, BrokerView>),
    /// The leader appended (`log_end`) or fsynced (`durable_end`; equal to `log_end` when the
    /// broker does not fsync before acknowledging).
    LeaderEnd {
        log_end: i64,
        durable_end: i64,
    },
    /// A follower fetched from `fetch_offset` (so it holds, durably in durable mode, everything
    /// below it), sending `broker_epoch` (-1 when its Fetch version has none) and its log start
    /// (`log_start_offset`, -1 when its Fetch version has none).
    FollowerFetch {
        replica: i32,
        fetch_offset: i64,
        log_start_offset: i64,
        broker_epoch: i64,
        now: i64,
    },
    Tick {
        now: i64,
    },
    AlterPartitionDone(AlterOutcome),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send AlterPartition with this ISR (each member with its broker epoch).
    AlterPartition {
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<(i32, i64)>,
    },
    /// The high watermark moved to this offset: wake what waits on it.
    HighWatermark(i64),
}

/// Why a follower fetch is refused (the Fetch then answers with the error; nothing changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchRefused {
    /// Not one of the partition's replicas (or this broker is not leading).
    NotReplica,
    /// A broker epoch older than the image's (KIP-903): NOT_LEADER_OR_FOLLOWER... a stale
    /// incarnation must not be counted.
    StaleBrokerEpoch { sent: i64, current: i64 },
    /// Past the leader's log end: OFFSET_OUT_OF_RANGE.
    PastLogEnd { fetch_offset: i64, log_end: i64 },
}

/// `min.insync.replicas` is not met (NOT_ENOUGH_REPLICAS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotEnoughReplicas {
    pub isr: usize,
    pub required: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Follower {
    log_end: i64,
    last_fetch_ms: i64,
    /// The leader's log end at the last fetch.
    leader_end_at_last_fetch: i64,
    last_caught_up_ms: i64,
    /// The broker epoch its last fetch carried.
    broker_epoch: i64,
    /// The log start its last fetch reported ([`UNKNOWN_OFFSET`] before one).
    log_start: i64,
}

impl Follower {
    fn new(last_caught_up_ms: i64) -> Follower {
        Follower {
            log_end: UNKNOWN_OFFSET,
            last_fetch_ms: NEVER,
            leader_end_at_last_fetch: UNKNOWN_OFFSET,
            last_caught_up_ms,
            broker_epoch: -1,
            log_start: UNKNOWN_OFFSET,
        }
    }

    fn caught_up(&self, leader_end: i64, now: i64, lag_max: i64) -> bool {
        self.log_end == leader_end || now.saturating_sub(self.last_caught_up_ms) <= lag_max
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    /// The ISR proposed.
    isr: BTreeSet<i32>,
    /// Sent and not answered yet (false: resend on the next tick).
    in_flight: bool,
    /// The controller answered with a stale-state error: wait for new metadata.
    waiting_for_metadata: bool,
}

/// The replica set of a partition this broker leads.
#[derive(Clone, Debug)]
pub struct ReplicaSet {
    leader: i32,
    config: IsrConfig,
    leader_epoch: i32,
    partition_epoch: i32,
    replicas: Vec<i32>,
    isr: BTreeSet<i32>,
    pending: Option<Pending>,
    followers: BTreeMap<i32, Follower>,
    brokers: BTreeMap<i32, BrokerView>,
    log_end: i64,
    durable_end: i64,
    /// The leader's log end when it was elected: a follower must reach it to join.
    epoch_start_offset: i64,
    high_watermark: i64,
    /// The latest `now` any event carried.
    now: i64,
}

impl ReplicaSet {
    /// The replica set of `leader` (this broker), not leading anything until
    /// [`Event::BecomeLeader`].
    pub fn new(leader: i32, config: IsrConfig) -> ReplicaSet {
        ReplicaSet {
            leader,
            config,
            leader_epoch: -1,
            partition_epoch: -1,
            replicas: Vec::new(),
            isr: BTreeSet::new(),
            pending: None,
            followers: BTreeMap::new(),
            brokers: BTreeMap::new(),
            log_end: 0,
            durable_end: 0,
            epoch_start_offset: 0,
            high_watermark: 0,
            now: NEVER,
        }
    }

    pub fn set_config(&mut self, config: IsrConfig) {
        self.config = config;
    }

    pub fn config(&self) -> IsrConfig {
        self.config
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// This leader's log end when it was elected: its epoch's first offset. While the high
    /// watermark is below it, the leader cannot yet say where the committed log ends
    /// (Kafka's `leaderEpochStartOffsetOpt`, KAFKA-7395).
    pub fn epoch_start_offset(&self) -> i64 {
        self.epoch_start_offset
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    /// The ISR the controller committed.
    pub fn committed_isr(&self) -> Vec<i32> {
        self.isr.iter().copied().collect()
    }

    /// The committed ISR plus a pending expansion (a pending shrink removes nobody yet).
    pub fn maximal_isr(&self) -> Vec<i32> {
        self.maximal().iter().copied().collect()
    }

    pub fn alter_in_flight(&self) -> bool {
        self.pending.is_some()
    }

    /// The ISR of the AlterPartition sent and not answered yet, if one is (for the driver's
    /// bookkeeping: what it sends and what it feeds back must be this one).
    pub fn in_flight_isr(&self) -> Option<Vec<i32>> {
        self.pending
            .as_ref()
            .filter(|p| p.in_flight)
            .map(|p| p.isr.iter().copied().collect())
    }

    /// A follower's log end as last fetched, [`UNKNOWN_OFFSET`] before its first fetch.
    pub fn follower_log_end(&self, replica: i32) -> Option<i64> {
        self.followers.get(&replica).map(|f| f.log_end)
    }

    /// DeleteRecords' low watermark (Kafka's `lowWatermarkIfLeader`): the lowest of the
    /// leader's `leader_log_start` and the log start last reported by each follower whose
    /// broker is eligible; [`UNKNOWN_OFFSET`] while such a follower has not fetched under this
    /// leader. Records below it are gone from every live replica.
    pub fn low_watermark(&self, leader_log_start: i64) -> i64 {
        let mut low = leader_log_start;
        for (&r, f) in &self.followers {
            let alive = self.brokers.get(&r).is_some_and(|b| b.eligible);
            if alive && f.log_start < low {
                low = f.log_start;
            }
        }
        low
    }

    /// `lastCaughtUpTimeMs` of a follower.
    pub fn last_caught_up_ms(&self, replica: i32) -> Option<i64> {
        self.followers.get(&replica).map(|f| f.last_caught_up_ms)
    }

    fn effective_min_isr(&self) -> usize {
        self.config
            .min_insync_replicas
            .min(self.replicas.len())
            .max(1)
    }

    /// Before appending an acks=all produce: NOT_ENOUGH_REPLICAS when the committed ISR is below
    /// the effective `min.insync.replicas`.
    pub fn check_min_isr(&self) -> Result<(), NotEnoughReplicas> {
        let required = self.effective_min_isr();
        if self.isr.len() < required {
            return Err(NotEnoughReplicas {
                isr: self.isr.len(),
                required,
            });
        }
        Ok(())
    }

    /// When an acks=all produce's offsets are below the high watermark: whether the maximal ISR
    /// still meets `min.insync.replicas` (else NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    pub fn enough_replicas_after_append(&self) -> bool {
        self.maximal().len() >= self.effective_min_isr()
    }

    /// Borrowed, not cloned: it is read on every step and after every partition change (the
    /// waiters' `enough_replicas`), where a copied set was most of the step's cost.
    fn maximal(&self) -> &BTreeSet<i32> {
        match &self.pending {
            Some(p) if p.isr.len() > self.isr.len() => &p.isr,
            // The planted bug: a pending shrink already counts (§1.7).
            #[cfg(any(madsim, test))]
            Some(p) if (self.config.planted).is(crate::config::PlantedBug::IsrShrinkAdvancesHw) => {
                &p.isr
            }
            _ => &self.isr,
        }
    }

    fn eligible(&self, replica: i32, broker_epoch: i64) -> bool {
        match self.brokers.get(&replica) {
            Some(b) => b.eligible && (broker_epoch == -1 || broker_epoch == b.broker_epoch),
            None => false,
        }
    }

    pub fn step(&mut self, event: Event) -> Result<Vec<Action>, FetchRefused> {
        let before = self.high_watermark;
        let mut actions = Vec::new();
        if let Event::BecomeLeader { now, .. }
        | Event::FollowerFetch { now, .. }
        | Event::Tick { now } = &event
        {
            self.now = self.now.max(*now);
        }
        match event {
            Event::BecomeLeader {
                leadership,
                log_end,
                durable_end,
                high_watermark,
                now,
            } => self.become_leader(leadership, log_end, durable_end, high_watermark, now),
            Event::Brokers(brokers) => self.brokers = brokers,
            Event::LeaderEnd {
                log_end,
                durable_end,
            } => {
                assert!(
                    log_end >= self.log_end,
                    "the leader's log end never goes back"
                );
                assert!(durable_end <= log_end, "durable past the log end");
                self.log_end = log_end;
                self.durable_end = self.durable_end.max(durable_end);
            }
            Event::FollowerFetch {
                replica,
                fetch_offset,
                log_start_offset,
                broker_epoch,
                now,
            } => {
                self.follower_fetch(replica, fetch_offset, broker_epoch, now)?;
                let f = self.followers.get_mut(&replica).expect("accepted");
                f.log_start = log_start_offset.max(UNKNOWN_OFFSET);
                self.maybe_expand(replica, &mut actions);
            }
            Event::Tick { now } => self.tick(now, &mut actions),
            Event::AlterPartitionDone(outcome) => self.alter_done(outcome),
        }
        if self.leading() {
            self.update_high_watermark();
        }
        if self.high_watermark > before {
            actions.push(Action::HighWatermark(self.high_watermark));
        }
        self.check(before);
        Ok(actions)
    }

    fn leading(&self) -> bool {
        self.leader_epoch >= 0
    }

    fn become_leader(
        &mut self,
        leadership: Leadership,
        log_end: i64,
        durable_end: i64,
        high_watermark: i64,
        now: i64,
    ) {
        assert!(
            leadership.replicas.contains(&self.leader) && leadership.isr.contains(&self.leader),
            "a leader is a replica in its ISR"
        );
        if leadership.leader_epoch < self.leader_epoch
            || (leadership.leader_epoch == self.leader_epoch
                && leadership.partition_epoch <= self.partition_epoch)
        {
            // Older (or the same) state than the one held: ignored.
            return;
        }
        let new_epoch = leadership.leader_epoch > self.leader_epoch;
        self.leader_epoch = leadership.leader_epoch;
        self.partition_epoch = leadership.partition_epoch;
        self.replicas = leadership.replicas;
        self.isr = leadership.isr.into_iter().collect();
        self.pending = None;
        let followers: Vec<i32> = self
            .replicas
            .iter()
            .copied()
            .filter(|&r| r != self.leader)
            .collect();
        if new_epoch {
            // A new leader forgets what followers had; those in the ISR count as caught up now.
            self.followers = followers
                .iter()
                .map(|&r| {
                    let caught_up = if self.isr.contains(&r) { now } else { NEVER };
                    (r, Follower::new(caught_up))
                })
                .collect();
            self.log_end = log_end;
            self.durable_end = durable_end.min(log_end);
            self.epoch_start_offset = log_end;
            self.high_watermark = high_watermark.min(self.durable_end);
        } else {
            self.followers.retain(|r, _| followers.contains(r));
            for r in followers {
                self.followers
                    .entry(r)
                    .or_insert_with(|| Follower::new(NEVER));
            }
        }
    }

    fn follower_fetch(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        broker_epoch: i64,
        now: i64,
    ) -> Result<(), FetchRefused> {
        if !self.leading() {
            return Err(FetchRefused::NotReplica);
        }
        if let Some(b) = self.brokers.get(&replica) {
            if broker_epoch != -1 && broker_epoch < b.broker_epoch {
                return Err(FetchRefused::StaleBrokerEpoch {
                    sent: broker_epoch,
                    current: b.broker_epoch,
                });
            }
        }
        let log_end = self.log_end;
        if fetch_offset > log_end || fetch_offset < 0 {
            return Err(FetchRefused::PastLogEnd {
                fetch_offset,
                log_end,
            });
        }
        let Some(f) = self.followers.get_mut(&replica) else {
            return Err(FetchRefused::NotReplica);
        };
        if fetch_offset >= log_end {
            f.last_caught_up_ms = f.last_caught_up_ms.max(now);
        } else if fetch_offset >= f.leader_end_at_last_fetch {
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
        }
        f.log_end = fetch_offset;
        f.last_fetch_ms = now;
        f.leader_end_at_last_fetch = log_end;
        f.broker_epoch = broker_epoch;
        Ok(())
    }

    fn maybe_expand(&mut self, replica: i32, actions: &mut Vec<Action>) {
        if self.pending.is_some() || self.isr.contains(&replica) {
            return;
        }
        let f = self.followers[&replica];
        #[allow(unused_mut)]
        let mut held = f.log_end;
        // The planted bug: what this fetch's answer will carry (up to the leader's end at the
        // fetch) counts as held already, one round trip before the follower has it.
        #[cfg(any(madsim, test))]
        if (self.config.planted).is(crate::config::PlantedBug::IsrExpandOneFetchEarly) {
            held = f.leader_end_at_last_fetch;
        }
        let in_sync = held >= self.high_watermark && held >= self.epoch_start_offset;
        if !in_sync || !self.eligible(replica, f.broker_epoch) {
            return;
        }
        let mut isr = self.isr.clone();
        isr.insert(replica);
        self.propose(isr, actions);
    }

    fn tick(&mut self, now: i64, actions: &mut Vec<Action>) {
        if !self.leading() {
            return;
        }
        if let Some(p) = &mut self.pending {
            if !p.in_flight && !p.waiting_for_metadata {
                p.in_flight = true;
                let isr = p.isr.clone();
                actions.push(self.alter_action(&isr));
            }
            return;
        }
        let lag_max = self.config.replica_lag_time_max_ms;
        let out_of_sync: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|&r| r != self.leader)
            .filter(|r| {
                self.followers
                    .get(r)
                    .is_none_or(|f| !f.caught_up(self.log_end, now, lag_max))
            })
            .collect();
        if out_of_sync.is_empty() {
            return;
        }
        let isr = self
            .isr
            .iter()
            .copied()
            .filter(|r| !out_of_sync.contains(r))
            .collect();
        self.propose(isr, actions);
    }

    fn propose(&mut self, isr: BTreeSet<i32>, actions: &mut Vec<Action>) {
        assert!(self.pending.is_none(), "one AlterPartition at a time");
        assert!(isr.contains(&self.leader));
        actions.push(self.alter_action(&isr));
        self.pending = Some(Pending {
            isr,
            in_flight: true,
            waiting_for_metadata: false,
        });
    }

    fn alter_action(&self, isr: &BTreeSet<i32>) -> Action {
        Action::AlterPartition {
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            isr: isr
                .iter()
                .map(|&r| {
                    let epoch = match self.brokers.get(&r) {
                        Some(b) => b.broker_epoch,
                        None => -1,
                    };
                    (r, epoch)
                })
                .collect(),
        }
    }

    fn alter_done(&mut self, outcome: AlterOutcome) {
        let Some(pending) = &mut self.pending else {
            // An answer for a state already superseded by metadata.
            return;
        };
        match outcome {
            AlterOutcome::Committed {
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                if leader_epoch != self.leader_epoch || partition_epoch < self.partition_epoch {
                    return;
                }
                assert!(
                    isr.contains(&self.leader),
                    "a committed ISR holds its leader"
                );
                self.isr = isr.into_iter().collect();
                self.partition_epoch = partition_epoch;
                self.pending = None;
            }
            AlterOutcome::Refused => self.pending = None,
            AlterOutcome::Stale => {
                pending.in_flight = false;
                pending.waiting_for_metadata = true;
            }
            AlterOutcome::Retry => pending.in_flight = false,
        }
    }

    fn update_high_watermark(&mut self) {
        if self.isr.len() < self.effective_min_isr() {
            return;
        }
        let maximal = self.maximal();
        let lag_max = self.config.replica_lag_time_max_ms;
        let mut candidate = self.durable_end;
        for (&r, f) in &self.followers {
            // A caught-up follower about to join holds the high watermark back too, so it
            // cannot fall behind it for ever while it catches up. Looked at only for one
            // outside the maximal ISR (a broker look-up on every step otherwise).
            let waiting_to_join = || {
                f.log_end != UNKNOWN_OFFSET
                    && f.caught_up(self.log_end, self.now, lag_max)
                    && self.eligible(r, f.broker_epoch)
            };
            #[cfg(any(madsim, test))]
            if f.log_end == UNKNOWN_OFFSET
                && (self.config.planted).is(crate::config::PlantedBug::NewLeaderHwSkipsUnknown)
            {
                continue;
            }
            if maximal.contains(&r) || waiting_to_join() {
                candidate = candidate.min(f.log_end);
            }
        }
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
        }
    }

    fn check(&self, before: i64) {
        assert!(
            self.high_watermark >= before,
            "the high watermark never goes back"
        );
        if self.leading() {
            assert!(
                self.high_watermark <= self.durable_end && self.durable_end <= self.log_end,
                "high watermark {} past the leader end {}",
                self.high_watermark,
                self.durable_end
            );
            assert!(self.isr.contains(&self.leader), "the leader is in its ISR");
            assert!(self.isr.iter().all(|r| self.replicas.contains(r)));
        }
    }
}

#[cfg(test)]
mod tests;
