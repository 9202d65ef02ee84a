//! The follower's side of replication as a pure state machine: one per source (leader) broker,
//! holding every partition this broker follows from it (Kafka's `AbstractFetcherThread`
//! decisions, without its I/O). Events come in with `now` (monotonic); actions go out for the
//! driver (`broker::drivers::replica_fetcher`) to carry out, and it reports each result back.
//!
//! One round: `Poll` → [`Action::ReadPositions`] (the ready partitions: not backing off, at most
//! `max_partitions`, taken round-robin) → `Positions` (read under the partition locks) →
//! [`Action::SendFetch`] → `Fetched` (or `FetchFailed`) → per partition one of
//! - records: [`Action::Append`] (then the leader's high watermark, capped at the log end, and
//!   the leader's log start when it is past ours: Kafka's follower
//!   `maybeIncrementLogStartOffset`, so records deleted at the leader stay deleted here);
//! - a diverging epoch (KIP-320): [`Action::LookUpEpoch`] (our own end of that epoch, from the
//!   local leader-epoch cache: the follower's OffsetForLeaderEpoch) → `EpochLookedUp` →
//!   [`Action::Truncate`] to the lower of the two ends;
//! - OFFSET_OUT_OF_RANGE: [`Action::AskLeaderOffsets`] (ListOffsets earliest and latest) →
//!   `LeaderOffsets` → truncate to the leader's end when ours is past it, else back off;
//! - stale metadata or any other error: back off `backoff` (a new leader epoch re-arms at once).
//!
//! A partition the driver leaves out of `Positions` (not a follower at that epoch here yet, a
//! truncation not yet durable) backs off too: listed again at once, it would be read again at
//! once by a driver whose reads need not wait, which then never yields to what it waits for.
//!
//! Then `Done` closes each partition's step (a failure backs it off). While a partition has a
//! step open it is not fetched again, so its positions come from one state at a time.
//!
//! Invariants (checked after every step): at most one fetch in flight, naming at most
//! `max_partitions` partitions, each once, each assigned when sent with `0 <= log start <=
//! fetch offset`; at the same leader epoch a partition's fetch offset never goes back except
//! through a truncation this core ordered; a partition with a step open is not in a fetch.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use uuid::Uuid;

use super::key::PartitionKey;
use crate::log::leader_epochs::EpochEnd;

/// KIP-279's cut for the leader's diverging epoch `leader` (its epoch and its end of it), from
/// our own end of the largest epoch at or below it (`own`, from the local leader-epoch cache)
/// and our log end: the lower of the two ends when both logs have that epoch, our end of our
/// older epoch otherwise, the leader's when we have none; never past our log end, never the high
/// watermark (KIP-101).
pub fn divergence_cut(leader: EpochEnd, own: EpochEnd, log_end: i64) -> i64 {
    if own.is_undefined() {
        leader.end_offset.min(log_end)
    } else if own.epoch != leader.epoch {
        own.end_offset.min(log_end)
    } else {
        leader.end_offset.min(own.end_offset).min(log_end)
    }
}

/// A followed partition: (topic, index).
pub type Key = (String, i32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetcherConfig {
    /// `replica.fetch.backoff.ms`: how long a partition waits after an error.
    pub backoff: Duration,
    /// Partitions one Fetch names at most; the rest wait for the next round.
    pub max_partitions: usize,
    /// Simulator and tests: the bug planted here (`NoDivergingEpochCheck`: pre-KIP-279, trust
    /// the leader's end offset, then fetch on without epoch checks; `TruncateToHwOnRestart`:
    /// pre-KIP-101, cut to the checkpointed high watermark when starting to follow).
    #[cfg(any(madsim, test))]
    pub planted: crate::config::planted::Planted,
}

impl FetcherConfig {
    fn no_diverging_epoch_check(&self) -> bool {
        #[cfg(any(madsim, test))]
        if self
            .planted
            .is(crate::config::PlantedBug::NoDivergingEpochCheck)
        {
            return true;
        }
        false
    }

    fn truncate_to_hw(&self) -> bool {
        #[cfg(any(madsim, test))]
        if self
            .planted
            .is(crate::config::PlantedBug::TruncateToHwOnRestart)
        {
            return true;
        }
        false
    }
}

/// Where one followed partition stands, read under its lock just before the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    /// The leader epoch of the image that named the leader.
    pub leader_epoch: i32,
    /// The local log end: the leader counts everything below it as held here.
    pub fetch_offset: i64,
    /// The epoch of the local log's last batch (-1: none, or not to be checked).
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
}

impl Position {
    pub fn key(&self) -> Key {
        (self.topic.clone(), self.partition)
    }
}

/// A partition the driver should read a position for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToRead {
    pub key: Key,
    pub topic_id: Uuid,
    pub leader_epoch: i32,
    /// Planted `truncate-to-hw-on-restart`: cut to the checkpointed high watermark first.
    pub truncate_to_hw_first: bool,
}

/// The leader's answer for one partition, already decoded (`replica_fetcher::response`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Records {
        records: Bytes,
        high_watermark: i64,
        log_start_offset: i64,
    },
    Diverging(EpochEnd),
    OutOfRange,
    /// NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, unknown topic or partition.
    WaitForMetadata(i16),
    Retry(i16),
}

/// How a step the driver carried out ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepResult {
    Done,
    /// The partition moved on meanwhile (role, epoch or log end): nothing was done.
    Stale,
    /// It failed (storage, refused batches, no answer): back off.
    Failed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The image names `leader_epoch` for this partition under this fetcher's leader. A new
    /// epoch (or topic id) re-arms the partition; the same one changes nothing.
    Assign {
        key: Key,
        topic_id: Uuid,
        leader_epoch: i32,
    },
    /// The partition no longer follows this fetcher's leader.
    Unassign { key: Key },
    /// Time to look for work (the driver's timer or a wake-up).
    Poll,
    /// The positions read for [`Action::ReadPositions`] (partitions not ready left out).
    Positions(Vec<Position>),
    /// The Fetch got no usable answer (no route, refused as a whole, lost).
    FetchFailed,
    /// The leader's answer, per partition (topic id, index).
    Fetched(Vec<(Uuid, i32, Answer)>),
    /// Our own end of the leader's diverging epoch (`end_offset_for_epoch`) and the log end.
    EpochLookedUp {
        key: Key,
        leader_epoch: i32,
        own: EpochEnd,
        log_end: i64,
    },
    /// The leader's log start and end (ListOffsets), and our log end; `None`: no answer.
    LeaderOffsets {
        key: Key,
        leader_epoch: i32,
        offsets: Option<(i64, i64)>,
        local_end: i64,
    },
    /// An [`Action::Append`] or [`Action::Truncate`] ended.
    Done {
        key: Key,
        leader_epoch: i32,
        result: StepResult,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Read these partitions' positions (in this order) and report them with `Positions`.
    ReadPositions(Vec<ToRead>),
    /// Send one Fetch for these positions; answer with `Fetched` or `FetchFailed`.
    SendFetch(Vec<Position>),
    /// Append the leader's batches if the partition is still at `position`, then follow the
    /// leader's high watermark (capped at the log end), then, with `log_start`, move the local
    /// log start (durably) to it, capped at the local high watermark. Answer with `Done`.
    Append {
        position: Position,
        records: Bytes,
        high_watermark: i64,
        /// The leader's log start, when it is past the one this fetch sent (DeleteRecords or
        /// retention at the leader).
        log_start: Option<i64>,
    },
    /// Look up our own end of `epoch` if the partition is still at `position`; answer with
    /// `EpochLookedUp` (or `Done` Stale).
    LookUpEpoch { position: Position, epoch: i32 },
    /// Ask the leader for its log start and end; answer with `LeaderOffsets` (or `Done` Stale).
    AskLeaderOffsets { position: Position },
    /// If the partition is still a follower at `leader_epoch` whose log ends at `from`, cut
    /// the log to `to` and make the cut durable before anything else is appended; `Done`.
    Truncate {
        key: Key,
        leader_epoch: i32,
        from: i64,
        to: i64,
    },
    /// The partition waits until `until` before it is fetched again.
    BackOff { key: Key, until: Duration },
    /// The leader no longer has what this follower misses (deleted or retained away while it
    /// was gone): if the partition is still a follower at `leader_epoch` whose log ends at
    /// `from`, empty the log and start it at `at`, the leader's log start (Kafka's
    /// `truncateFullyAndStartAt`), durably before anything is appended; `Done`.
    StartAt {
        key: Key,
        leader_epoch: i32,
        from: i64,
        at: i64,
    },
}

/// A partition's step the driver is carrying out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    Append,
    /// Looking up our end of the leader's diverging epoch (the leader's end kept here).
    LookUp(EpochEnd),
    AskLeaderOffsets,
    Truncate(i64),
    /// Restarting the log at the leader's log start.
    StartAt(i64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Assigned {
    topic_id: Uuid,
    leader_epoch: i32,
    /// Not fetched before this: backing off after an error.
    retry_at: Option<Duration>,
    /// The step open for it (append, lookup, ListOffsets, truncation), if any.
    open: Option<Open>,
    /// The last fetch offset sent at this epoch (`None` after a truncation).
    last_fetch_offset: Option<i64>,
    /// Planted `no-diverging-epoch-check`: after its one truncation, fetch without the epoch.
    epoch_unchecked: bool,
    /// Planted `truncate-to-hw-on-restart`: cut to the high watermark before fetching.
    truncate_to_hw: bool,
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Fetcher {
    config: FetcherConfig,
    partitions: BTreeMap<Key, Assigned>,
    /// Round-robin: the next round starts after this partition.
    cursor: Option<Key>,
    /// The partitions whose positions are being read (asked for, not yet reported).
    reading: Option<BTreeSet<Key>>,
    /// The fetch in flight, by (topic id, index).
    in_flight: Option<BTreeMap<(Uuid, i32), Position>>,
    now: Duration,
    actions: Vec<Action>,
}

impl Fetcher {
    pub fn new(config: FetcherConfig) -> Fetcher {
        assert!(
            config.max_partitions > 0,
            "a fetch names at least one partition"
        );
        Fetcher {
            config,
            partitions: BTreeMap::new(),
            cursor: None,
            reading: None,
            in_flight: None,
            now: Duration::ZERO,
            actions: Vec::new(),
        }
    }

    pub fn config(&self) -> FetcherConfig {
        self.config
    }

    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// The partitions followed, in order.
    pub fn keys(&self) -> Vec<Key> {
        self.partitions.keys().cloned().collect()
    }

    /// Whether a fetch is in flight or positions are being read.
    pub fn round_open(&self) -> bool {
        self.reading.is_some() || self.in_flight.is_some()
    }

    /// The leader epoch `key` is followed at here, if it is.
    pub fn leader_epoch(&self, key: &Key) -> Option<(Uuid, i32)> {
        self.partitions
            .get(key)
            .map(|a| (a.topic_id, a.leader_epoch))
    }

    /// When the next `Poll` may find a partition ready: the earliest end of a backoff (`None`:
    /// none is backing off, or a round is open).
    pub fn next_deadline(&self) -> Option<Duration> {
        if self.round_open() {
            return None;
        }
        self.partitions
            .values()
            .filter(|a| a.open.is_none())
            .filter_map(|a| a.retry_at.filter(|t| *t > self.now))
            .min()
    }

    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    pub fn step(&mut self, now: Duration, event: Event) {
        assert!(now >= self.now, "time went back: {now:?} < {:?}", self.now);
        self.now = now;
        match event {
            Event::Assign {
                key,
                topic_id,
                leader_epoch,
            } => self.assign(key, topic_id, leader_epoch),
            Event::Unassign { key } => {
                self.partitions.remove(&key);
            }
            Event::Poll => self.poll(),
            Event::Positions(positions) => self.positions(positions),
            Event::FetchFailed => {
                let sent = self
                    .in_flight
                    .take()
                    .expect("a fetch failed with none in flight");
                for p in sent.values() {
                    self.back_off_if_current(&(p.topic.as_str(), p.partition), p.leader_epoch);
                }
            }
            Event::Fetched(answers) => self.fetched(answers),
            Event::EpochLookedUp {
                key,
                leader_epoch,
                own,
                log_end,
            } => self.epoch_looked_up(key, leader_epoch, own, log_end),
            Event::LeaderOffsets {
                key,
                leader_epoch,
                offsets,
                local_end,
            } => self.leader_offsets(key, leader_epoch, offsets, local_end),
            Event::Done {
                key,
                leader_epoch,
                result,
            } => self.done(&key, leader_epoch, result),
        }
        self.check_invariants();
    }

    fn assign(&mut self, key: Key, topic_id: Uuid, leader_epoch: i32) {
        assert!(leader_epoch >= 0, "{key:?}: leader epoch {leader_epoch}");
        let fresh = self
            .partitions
            .get(&key)
            .is_none_or(|a| a.leader_epoch != leader_epoch || a.topic_id != topic_id);
        if fresh {
            self.partitions.insert(
                key,
                Assigned {
                    topic_id,
                    leader_epoch,
                    retry_at: None,
                    open: None,
                    last_fetch_offset: None,
                    epoch_unchecked: false,
                    truncate_to_hw: self.config.truncate_to_hw(),
                },
            );
        }
    }

    fn poll(&mut self) {
        if self.round_open() {
            return;
        }
        let now = self.now;
        let start = self.cursor.clone();
        let after = self
            .partitions
            .iter()
            .filter(|(k, _)| start.as_ref().is_none_or(|c| *k > c));
        let before = self
            .partitions
            .iter()
            .filter(|(k, _)| start.as_ref().is_some_and(|c| *k <= c));
        let mut ready = Vec::new();
        for (key, a) in after.chain(before) {
            let waiting = a.open.is_some() || a.retry_at.is_some_and(|t| t > now);
            if !waiting && ready.len() < self.config.max_partitions {
                ready.push(ToRead {
                    key: key.clone(),
                    topic_id: a.topic_id,
                    leader_epoch: a.leader_epoch,
                    truncate_to_hw_first: a.truncate_to_hw,
                });
            }
        }
        self.cursor = if ready.len() == self.config.max_partitions {
            ready.last().map(|r| r.key.clone())
        } else {
            None
        };
        if ready.is_empty() {
            return;
        }
        for r in &ready {
            let a = self.partitions.get_mut(&r.key).expect("just listed");
            if a.truncate_to_hw {
                // Its one cut happens now; whatever the log end was, it may go back once.
                a.truncate_to_hw = false;
                a.last_fetch_offset = None;
            }
        }
        // Inserted one by one: collecting a set sorts through a buffer first, dearer for the
        // few partitions of a round.
        let mut reading = BTreeSet::new();
        for r in &ready {
            reading.insert(r.key.clone());
        }
        self.reading = Some(reading);
        self.actions.push(Action::ReadPositions(ready));
    }

    fn positions(&mut self, positions: Vec<Position>) {
        let asked = self.reading.take().expect("positions nobody asked for");
        assert!(self.in_flight.is_none(), "a second fetch in flight");
        let mut sent = BTreeMap::new();
        let mut fetched = std::collections::BTreeSet::new();
        let mut out = Vec::with_capacity(positions.len());
        for mut p in positions {
            let key = p.key();
            assert!(asked.contains(&key), "{key:?}: position not asked for");
            let Some(a) = self.partitions.get_mut(&key) else {
                continue; // unassigned while it was read
            };
            if a.leader_epoch != p.leader_epoch || a.topic_id != p.topic_id || a.open.is_some() {
                continue;
            }
            assert!(
                0 <= p.log_start_offset && p.log_start_offset <= p.fetch_offset,
                "{key:?}: fetch offset {} below log start {}",
                p.fetch_offset,
                p.log_start_offset
            );
            if let Some(last) = a.last_fetch_offset {
                assert!(
                    p.fetch_offset >= last,
                    "{key:?}: fetch offset went back from {last} to {} without a truncation",
                    p.fetch_offset
                );
            }
            a.last_fetch_offset = Some(p.fetch_offset);
            if a.epoch_unchecked {
                p.last_fetched_epoch = -1;
            }
            let previous = sent.insert((p.topic_id, p.partition), p.clone());
            assert!(previous.is_none(), "{key:?} fetched twice in one request");
            fetched.insert(key);
            out.push(p);
        }
        // A partition asked for whose position did not come back (not a follower at this epoch
        // here yet, a truncation not yet durable, ...) waits a backoff, as Kafka delays a
        // partition in error: listed again at once, it would be read again at once, and a
        // driver whose reads never wait would spin with the simulated clock standing still.
        let missing: Vec<(Key, i32)> = asked
            .iter()
            .filter(|key| !fetched.contains(*key))
            .filter_map(|key| {
                let a = self.partitions.get(key)?;
                a.open.is_none().then(|| (key.clone(), a.leader_epoch))
            })
            .collect();
        for (key, leader_epoch) in missing {
            self.back_off_if_current(&key, leader_epoch);
        }
        if out.is_empty() {
            return;
        }
        self.in_flight = Some(sent);
        self.actions.push(Action::SendFetch(out));
    }

    fn fetched(&mut self, answers: Vec<(Uuid, i32, Answer)>) {
        let sent = self
            .in_flight
            .take()
            .expect("an answer with no fetch in flight");
        for (topic_id, partition, answer) in answers {
            let Some(pos) = sent.get(&(topic_id, partition)) else {
                continue; // not asked for
            };
            // Borrowed: an owned key is made only where an action carries one.
            let key = (pos.topic.as_str(), pos.partition);
            if !self.is_current(&key, pos.topic_id, pos.leader_epoch) {
                continue;
            }
            match answer {
                Answer::Records {
                    records,
                    high_watermark,
                    log_start_offset,
                } => {
                    self.open_step(&key, Open::Append);
                    // Only forward (an old leader answers -1: unknown).
                    let log_start =
                        (log_start_offset > pos.log_start_offset).then_some(log_start_offset);
                    self.actions.push(Action::Append {
                        position: pos.clone(),
                        records,
                        high_watermark,
                        log_start,
                    });
                }
                Answer::Diverging(end) if self.config.no_diverging_epoch_check() => {
                    // Planted (pre-KIP-279): trust the leader's end offset without looking
                    // up our own end of its epoch, then fetch on without epoch checks.
                    let a = self
                        .partitions
                        .get_mut(&key as &dyn PartitionKey)
                        .expect("current");
                    a.epoch_unchecked = true;
                    let to = end.end_offset.min(pos.fetch_offset);
                    self.truncate(pos.key(), pos.leader_epoch, pos.fetch_offset, to);
                }
                Answer::Diverging(end) => {
                    self.open_step(&key, Open::LookUp(end));
                    self.actions.push(Action::LookUpEpoch {
                        position: pos.clone(),
                        epoch: end.epoch,
                    });
                }
                Answer::OutOfRange => {
                    self.open_step(&key, Open::AskLeaderOffsets);
                    self.actions.push(Action::AskLeaderOffsets {
                        position: pos.clone(),
                    });
                }
                Answer::WaitForMetadata(_) | Answer::Retry(_) => {
                    self.back_off_if_current(&key, pos.leader_epoch)
                }
            }
        }
    }

    /// The cut: the lower of the leader's end of its epoch and our own end of
    /// it (Kafka's `truncateOnFetchResponse`); ours alone when we never had that epoch.
    fn epoch_looked_up(&mut self, key: Key, leader_epoch: i32, own: EpochEnd, log_end: i64) {
        let Some(Open::LookUp(leader)) = self.open_of(&key, leader_epoch) else {
            return;
        };
        self.close_step(&key);
        let to = divergence_cut(leader, own, log_end);
        self.truncate(key, leader_epoch, log_end, to);
    }

    /// OFFSET_OUT_OF_RANGE, as Kafka's `fetchOffsetAndTruncate`: the leader's log ends before
    /// ours (only after an unclean election): cut to its end; ours ends before its log starts
    /// (the leader deleted or retained away what this follower misses): start over there;
    /// neither: the leader's log moved meanwhile, fetch again after a backoff.
    fn leader_offsets(
        &mut self,
        key: Key,
        leader_epoch: i32,
        offsets: Option<(i64, i64)>,
        local_end: i64,
    ) {
        let Some(Open::AskLeaderOffsets) = self.open_of(&key, leader_epoch) else {
            return;
        };
        self.close_step(&key);
        match offsets {
            Some((_, leader_end)) if leader_end < local_end => {
                self.truncate(key, leader_epoch, local_end, leader_end)
            }
            Some((leader_start, _)) if local_end < leader_start => {
                self.open_step(&key, Open::StartAt(leader_start));
                self.actions.push(Action::StartAt {
                    key,
                    leader_epoch,
                    from: local_end,
                    at: leader_start,
                });
            }
            _ => self.back_off_if_current(&key, leader_epoch),
        }
    }

    fn done(&mut self, key: &Key, leader_epoch: i32, result: StepResult) {
        let Some(open) = self.open_of(key, leader_epoch) else {
            return;
        };
        self.close_step(key);
        if let Open::Truncate(_) | Open::StartAt(_) = open {
            if result != StepResult::Stale {
                // The log end moved: it may now be below the last fetch offset, or past it.
                self.partitions
                    .get_mut(key)
                    .expect("open")
                    .last_fetch_offset = None;
            }
        }
        if result == StepResult::Failed {
            self.back_off_if_current(key, leader_epoch);
        }
    }

    fn truncate(&mut self, key: Key, leader_epoch: i32, from: i64, to: i64) {
        assert!(to <= from, "{key:?}: truncation from {from} up to {to}");
        if to < 0 {
            // The leader named no end offset: nothing to cut to; ask again later.
            self.back_off_if_current(&key, leader_epoch);
            return;
        }
        self.open_step(&key, Open::Truncate(to));
        self.actions.push(Action::Truncate {
            key,
            leader_epoch,
            from,
            to,
        });
    }

    fn is_current(&self, key: &dyn PartitionKey, topic_id: Uuid, leader_epoch: i32) -> bool {
        self.partitions
            .get(key)
            .is_some_and(|a| a.topic_id == topic_id && a.leader_epoch == leader_epoch)
    }

    /// The step open for `key` if it is still followed at `leader_epoch`.
    fn open_of(&self, key: &dyn PartitionKey, leader_epoch: i32) -> Option<Open> {
        self.partitions
            .get(key)
            .filter(|a| a.leader_epoch == leader_epoch)
            .and_then(|a| a.open)
    }

    fn open_step(&mut self, key: &dyn PartitionKey, open: Open) {
        let a = self
            .partitions
            .get_mut(key)
            .expect("only a followed partition steps");
        assert!(
            a.open.is_none(),
            "{key:?}: a second step while {:?} is open",
            a.open
        );
        a.open = Some(open);
    }

    fn close_step(&mut self, key: &dyn PartitionKey) {
        let a = self
            .partitions
            .get_mut(key)
            .expect("only a followed partition steps");
        assert!(a.open.take().is_some(), "{key:?}: no step open");
    }

    fn back_off_if_current(&mut self, key: &dyn PartitionKey, leader_epoch: i32) {
        let until = self.now + self.config.backoff;
        if let Some(a) = self.partitions.get_mut(key) {
            if a.leader_epoch == leader_epoch {
                a.retry_at = Some(until);
                self.actions.push(Action::BackOff {
                    key: (key.topic().to_string(), key.index()),
                    until,
                });
            }
        }
    }

    /// The invariants of the module documentation.
    pub fn check_invariants(&self) {
        assert!(
            !(self.reading.is_some() && self.in_flight.is_some()),
            "positions read while a fetch is in flight"
        );
        if let Some(reading) = &self.reading {
            assert!(reading.len() <= self.config.max_partitions);
        }
        if let Some(sent) = &self.in_flight {
            assert!(!sent.is_empty(), "an empty fetch in flight");
            assert!(
                sent.len() <= self.config.max_partitions,
                "{} partitions in one fetch",
                sent.len()
            );
            for p in sent.values() {
                assert!(0 <= p.log_start_offset && p.log_start_offset <= p.fetch_offset);
                let key: &dyn PartitionKey = &(p.topic.as_str(), p.partition);
                if let Some(a) = self.partitions.get(key) {
                    if a.leader_epoch == p.leader_epoch && a.topic_id == p.topic_id {
                        assert!(
                            a.open.is_none(),
                            "{:?}: in a fetch with a step open",
                            p.key()
                        );
                        assert_eq!(a.last_fetch_offset, Some(p.fetch_offset));
                    }
                }
            }
        }
        for (key, a) in &self.partitions {
            assert!(
                a.leader_epoch >= 0,
                "{key:?}: leader epoch {}",
                a.leader_epoch
            );
            if let Some(Open::Truncate(to) | Open::StartAt(to)) = a.open {
                assert!(to >= 0);
            }
            if !self.config.truncate_to_hw() {
                assert!(!a.truncate_to_hw);
            }
            if !self.config.no_diverging_epoch_check() {
                assert!(!a.epoch_unchecked);
            }
        }
    }
}

#[cfg(test)]
mod tests;
