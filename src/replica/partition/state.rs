//! The replica state core of one partition: role and leader epoch, high watermark, the ISR view
//! while leading (the [`ReplicaSet`]), a truncation not yet durable, and the producer-state
//! bookkeeping (which batch is a duplicate, which transaction a marker closes). No I/O, no
//! clock: the driver ([`Partition`](super::Partition), which owns the log) passes in `now` and
//! the log's offsets ([`LogEnds`]) with every step, does the reads and writes the state asks for,
//! and tells the state what the log did.
//!
//! Invariants, checked after every step ([`ReplicaState::check_invariants`]):
//! - the log's offsets are ordered: start ≤ end, durable end ≤ end;
//! - the leader epoch is never negative;
//! - the high watermark lies inside the log: start ≤ HW ≤ end;
//! - the last stable offset never passes the high watermark;
//! - a follower holds no replica set and no AlterPartition, and its HW is the leader's (never
//!   moved by its own appends);
//! - a replica set is held only by a leader whose HW moves by the ISR rule;
//! - an AlterPartition waits only while the replica set has one in flight;
//! - a truncation not yet durable is where the log ends (nothing appended after the cut);
//! - the producer snapshot's last batch ends at or below the log end.

use super::leader::LeaderRefused;
use super::snapshot::LastBatch;
use super::{Appended, DeleteRecordsError, ProduceError, Role, StaleLeaderEpoch};
use crate::config::{TimestampType, TopicConfig};
use crate::log::batch::BatchHeader;
use crate::log::control::Marker;
use crate::replica::isr::{self, ReplicaSet};
use crate::replica::producer::{
    ProducerStates, SequenceCheck, TxnRefusal, Verification, VerificationGuard,
};

/// The log's offsets as the driver sees them at a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogEnds {
    /// The log start offset.
    pub start: i64,
    /// The log end offset (the next offset to be written).
    pub end: i64,
    /// The end of what is fsynced (at most `end`).
    pub durable: i64,
}

/// Who wrote a batch: a client (sequence numbers checked) or a coordinator on a producer's
/// behalf (none carried).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    Client,
    Coordinator,
}

/// What to do with a checked produce batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admission {
    /// Append it.
    Append,
    /// A retry of a batch already in the log: answer with the original's offsets (the log
    /// start is the driver's to add).
    Duplicate {
        base_offset: i64,
        last_offset: i64,
        log_append_time: i64,
    },
}

/// A batch the leader sent or the log holds, as the producer state replays it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Replayed {
    /// Records (data): the producer's last batch, unchecked.
    Data,
    /// A transaction marker whose record was read.
    Marker(Marker),
    /// Nothing for the producer state (a control batch without a producer, or an unreadable
    /// marker the driver reported).
    Nothing,
}

fn txn_refusal(refusal: TxnRefusal) -> ProduceError {
    match refusal {
        TxnRefusal::InvalidTxnState => ProduceError::InvalidTxnState,
        TxnRefusal::StaleEpoch { .. } => ProduceError::InvalidProducerEpoch,
        TxnRefusal::CoordinatorFenced { .. } => ProduceError::CoordinatorFenced,
    }
}

pub struct ReplicaState {
    pub(super) config: TopicConfig,
    pub(super) leader_epoch: i32,
    /// Leader or follower (a broker on its own is its partitions' leader).
    pub(super) role: Role,
    pub(super) high_watermark: i64,
    /// A replicated leader or a follower: the high watermark moves only by the ISR rule (the
    /// replica set's) or the leader's, never on append.
    pub(super) hw_from_replicas: bool,
    /// While leading a partition with other replicas: their state and the ISR rule.
    pub(super) replica_set: Option<ReplicaSet>,
    /// An AlterPartition the replica set asked for, until the ISR driver takes it.
    pub(super) alter_partition: Option<isr::Action>,
    /// A truncation whose cut is not yet durable: nothing may be appended after it until
    /// [`ReplicaState::truncation_durable`] (power loss could otherwise bring the old tail back
    /// behind new data).
    pub(super) pending_truncation: Option<i64>,
    /// Expose only fsynced records (`weir.fsync.before.ack`).
    pub(super) durable_reads: bool,
    pub(super) producers: ProducerStates,
    /// The batch the log ends with, named in producer snapshots (see `snapshot`).
    pub(super) last_batch: Option<LastBatch>,
    /// Simulator and tests: the bugs planted in this partition.
    #[cfg(any(madsim, test))]
    pub(super) planted: crate::config::planted::Planted,
}

impl ReplicaState {
    /// The state of a just-opened log (everything in it durable): it leads, alone, in the
    /// newest epoch its log holds, and its high watermark is the log end.
    pub(super) fn opened(
        config: TopicConfig,
        ends: LogEnds,
        latest_epoch: i32,
        producers: ProducerStates,
        last_batch: Option<LastBatch>,
        #[cfg(any(madsim, test))] planted: crate::config::planted::Planted,
    ) -> ReplicaState {
        assert_eq!(ends.durable, ends.end, "an opened log is durable");
        let state = ReplicaState {
            config,
            leader_epoch: latest_epoch.max(0),
            role: Role::Leader,
            high_watermark: ends.end,
            hw_from_replicas: false,
            replica_set: None,
            alter_partition: None,
            pending_truncation: None,
            durable_reads: false,
            producers,
            last_batch,
            #[cfg(any(madsim, test))]
            planted,
        };
        state.check_invariants(ends);
        state
    }

    /// Simulator and tests: whether `bug` is planted here.
    #[cfg(any(madsim, test))]
    pub(super) fn planted(&self, bug: crate::config::PlantedBug) -> bool {
        self.planted.is(bug)
    }

    /// Checks the invariants listed at the top of this file against the log's `ends`.
    pub fn check_invariants(&self, ends: LogEnds) {
        assert!(
            ends.start <= ends.end && ends.durable <= ends.end,
            "log offsets out of order: {ends:?}"
        );
        assert!(self.leader_epoch >= 0, "negative leader epoch");
        assert!(
            self.high_watermark <= ends.end,
            "high watermark {} beyond the log end {}",
            self.high_watermark,
            ends.end
        );
        assert!(
            self.high_watermark >= ends.start,
            "high watermark {} below the log start {}",
            self.high_watermark,
            ends.start
        );
        assert!(
            self.last_stable_offset(ends) <= self.high_watermark,
            "last stable offset past the high watermark"
        );
        if self.role == Role::Follower {
            assert!(self.hw_from_replicas, "a follower's HW is the leader's");
            assert!(
                self.replica_set.is_none(),
                "a follower holds no replica set"
            );
        }
        if self.replica_set.is_some() {
            assert_eq!(self.role, Role::Leader, "only a leader holds a replica set");
            assert!(
                self.hw_from_replicas,
                "a replicated leader's HW is the ISR's"
            );
        }
        if self.alter_partition.is_some() {
            assert!(
                self.replica_set
                    .as_ref()
                    .is_some_and(|s| s.in_flight_isr().is_some()),
                "an AlterPartition waits only while one is in flight"
            );
        }
        if let Some(at) = self.pending_truncation {
            assert_eq!(at, ends.end, "appended after a truncation not yet durable");
        }
        if let Some(last) = self.last_batch {
            assert!(
                last.base_offset < ends.end,
                "the last batch at {} lies beyond the log end {}",
                last.base_offset,
                ends.end
            );
        }
    }

    pub fn config(&self) -> &TopicConfig {
        &self.config
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// A truncation not yet durable, and where it cut.
    pub fn pending_truncation(&self) -> Option<i64> {
        self.pending_truncation
    }

    pub(super) fn producers(&self) -> &ProducerStates {
        &self.producers
    }

    /// Begins KIP-890 verification of a producer's transactional write here (see
    /// [`ProducerStates::start_verification`]).
    pub(super) fn start_verification(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        now_ms: i64,
    ) -> Option<VerificationGuard> {
        self.producers
            .start_verification(producer_id, producer_epoch, now_ms)
    }

    pub(super) fn last_batch(&self) -> Option<LastBatch> {
        self.last_batch
    }

    /// Checks a request's `CurrentLeaderEpoch` (-1: not sent, no check) and, with
    /// `require_leader`, that this replica leads.
    pub fn check_current_leader_epoch(
        &self,
        current_leader_epoch: i32,
        require_leader: bool,
    ) -> Result<(), super::EpochRefusal> {
        if current_leader_epoch >= 0 {
            if current_leader_epoch < self.leader_epoch {
                return Err(super::EpochRefusal::Fenced);
            }
            if current_leader_epoch > self.leader_epoch {
                return Err(super::EpochRefusal::Unknown);
            }
        }
        if require_leader && self.role != Role::Leader {
            return Err(super::EpochRefusal::NotLeader);
        }
        Ok(())
    }

    pub(super) fn check_epoch(&self, leader_epoch: i32) -> Result<(), StaleLeaderEpoch> {
        if leader_epoch < self.leader_epoch || leader_epoch < 0 {
            return Err(StaleLeaderEpoch {
                requested: leader_epoch,
                current: self.leader_epoch,
            });
        }
        Ok(())
    }

    /// Whether the image's leadership may be taken up (the log then starts the epoch).
    pub(super) fn check_leadership(&self, view: &super::LeaderView) -> Result<(), LeaderRefused> {
        let leader_epoch = view.leadership.leader_epoch;
        self.check_epoch(leader_epoch)
            .map_err(|e| LeaderRefused::Stale {
                requested: e.requested,
                current: e.current,
            })?;
        if !view.leadership.replicas.contains(&view.node)
            || !view.leadership.isr.contains(&view.node)
        {
            return Err(LeaderRefused::NotInIsr);
        }
        Ok(())
    }

    /// Leads in the view's epoch (checked by [`ReplicaState::check_leadership`], started in the
    /// log's epoch cache by the driver).
    pub(super) fn lead(&mut self, view: super::LeaderView, ends: LogEnds, now_ms: i64) {
        debug_assert!(self.check_leadership(&view).is_ok());
        if self.role != Role::Leader {
            // A follower's view of its old leader's followers means nothing now.
            self.replica_set = None;
            self.alter_partition = None;
        }
        self.leader_epoch = view.leadership.leader_epoch;
        self.role = Role::Leader;
        self.hw_from_replicas = view.replicated();
        self.lead_replicas(view, ends, now_ms);
        if !self.hw_from_replicas && !self.durable_reads {
            self.advance_high_watermark(ends.end, ends);
        }
        self.check_invariants(ends);
    }

    /// Follows in `leader_epoch` (checked by [`ReplicaState::check_epoch`]).
    pub(super) fn follow(&mut self, leader_epoch: i32, ends: LogEnds) {
        debug_assert!(self.check_epoch(leader_epoch).is_ok());
        self.leader_epoch = leader_epoch;
        self.role = Role::Follower;
        self.hw_from_replicas = true;
        self.replica_set = None;
        self.alter_partition = None;
        self.check_invariants(ends);
    }

    /// A new topic config (its `min.insync.replicas` reaches the replica set).
    pub(super) fn set_config(&mut self, config: TopicConfig, ends: LogEnds) {
        self.config = config;
        self.reconfigure_replicas();
        self.check_invariants(ends);
    }

    /// Consumers see only what has been fsynced (for brokers that fsync before acknowledging).
    pub(super) fn set_durable_reads(&mut self, durable: bool, ends: LogEnds) {
        self.durable_reads = durable;
        if !durable && !self.hw_from_replicas {
            self.advance_high_watermark(ends.end, ends);
        }
        self.leader_end_moved(ends);
        self.check_invariants(ends);
    }

    /// The log fsynced up to `ends.durable`.
    pub(super) fn flushed(&mut self, ends: LogEnds) {
        if self.durable_reads && !self.hw_from_replicas && ends.durable > self.high_watermark {
            self.advance_high_watermark(ends.durable, ends);
        }
        if self.role == Role::Leader {
            self.leader_end_moved(ends);
        }
        self.check_invariants(ends);
    }

    pub(super) fn advance_high_watermark(&mut self, to: i64, ends: LogEnds) {
        assert!(
            to >= self.high_watermark,
            "the high watermark never goes back"
        );
        assert!(to <= ends.end, "high watermark beyond log end");
        self.high_watermark = to;
    }

    /// Whether a leader's append may go ahead at all.
    pub(super) fn check_leader_append(&self) -> Result<(), ProduceError> {
        if self.role != Role::Leader {
            return Err(ProduceError::NotLeader);
        }
        if let Some(at) = self.pending_truncation {
            return Err(ProduceError::Storage(std::io::Error::other(format!(
                "the truncation to {at} is not durable yet"
            ))));
        }
        Ok(())
    }

    /// The producer-state decision on a well-formed batch (its framing checked by the
    /// driver): append it, answer it as a duplicate, or refuse it.
    pub(super) fn admit(
        &self,
        header: &BatchHeader,
        origin: Origin,
        verification: Verification,
    ) -> Result<Admission, ProduceError> {
        match self.producers.check(header) {
            SequenceCheck::StaleEpoch { .. } if origin == Origin::Coordinator => {
                return Err(ProduceError::InvalidProducerEpoch)
            }
            _ if origin == Origin::Coordinator => {}
            SequenceCheck::Append => {}
            #[cfg(any(madsim, test))]
            SequenceCheck::Duplicate(_)
                if self.planted(crate::config::PlantedBug::DuplicateAppended) => {}
            SequenceCheck::Duplicate(meta) => {
                // The retry gets the original answer: under LogAppendTime, the time the
                // original was stamped with (its max timestamp), as Kafka answers.
                let log_append_time =
                    if self.config.message_timestamp_type == TimestampType::LogAppendTime {
                        meta.max_timestamp
                    } else {
                        -1
                    };
                return Ok(Admission::Duplicate {
                    base_offset: meta.first_offset,
                    last_offset: meta.last_offset,
                    log_append_time,
                });
            }
            SequenceCheck::OutOfOrder { expected, found } => {
                return Err(ProduceError::OutOfOrderSequence { expected, found })
            }
            SequenceCheck::StaleEpoch { .. } => return Err(ProduceError::InvalidProducerEpoch),
        }
        self.producers
            .check_transaction(header, verification)
            .map_err(txn_refusal)?;
        Ok(Admission::Append)
    }

    /// The leader appended a client's or coordinator's batch: `header` as recorded (stamped),
    /// `stored` as the log holds it.
    pub(super) fn appended(
        &mut self,
        header: &BatchHeader,
        stored: &BatchHeader,
        ends: LogEnds,
        now_ms: i64,
    ) {
        assert_eq!(stored.next_offset(), ends.end, "the batch ends the log");
        self.producers.record(header, now_ms);
        self.last_batch = Some(LastBatch::of(stored));
        self.leader_appended(ends);
    }

    /// Whether the transaction coordinator's marker may be written.
    pub(super) fn check_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        v2: bool,
    ) -> Result<(), ProduceError> {
        self.check_leader_append()?;
        if producer_id < 0 || producer_epoch < 0 {
            return Err(ProduceError::InvalidRecord(
                "a marker needs a producer id and epoch".into(),
            ));
        }
        self.producers
            .check_marker(producer_id, producer_epoch, marker, v2)
            .map_err(txn_refusal)
    }

    /// The leader appended a transaction marker.
    pub(super) fn marker_appended(
        &mut self,
        stored: &BatchHeader,
        marker: Marker,
        ends: LogEnds,
        now_ms: i64,
    ) {
        assert_eq!(stored.next_offset(), ends.end, "the marker ends the log");
        self.producers
            .record_marker(stored, marker, now_ms, self.high_watermark);
        self.last_batch = Some(LastBatch::of(stored));
        self.leader_appended(ends);
    }

    fn leader_appended(&mut self, ends: LogEnds) {
        if !self.durable_reads && !self.hw_from_replicas {
            self.advance_high_watermark(ends.end, ends);
        }
        self.leader_end_moved(ends);
        self.check_invariants(ends);
    }

    /// The answer to a duplicate.
    pub(super) fn duplicate_answer(admission: Admission, ends: LogEnds) -> Appended {
        match admission {
            Admission::Duplicate {
                base_offset,
                last_offset,
                log_append_time,
            } => Appended {
                base_offset,
                last_offset,
                log_append_time,
                log_start_offset: ends.start,
                duplicate: true,
            },
            Admission::Append => unreachable!("answered only for a duplicate"),
        }
    }

    /// Whether the leader's batches may be appended here.
    pub(super) fn check_follower_append(&self) -> Result<(), super::FollowerAppendError> {
        if self.role != Role::Follower {
            return Err(super::FollowerAppendError::NotFollower);
        }
        if let Some(at) = self.pending_truncation {
            return Err(super::FollowerAppendError::TruncationPending { at });
        }
        Ok(())
    }

    /// One batch of the leader's (or of the log, replayed) applied to the producer state
    /// unchecked; returns the producer's epoch when the batch's is older (the driver warns).
    pub(super) fn replayed(
        &mut self,
        header: &BatchHeader,
        what: Replayed,
        now_ms: i64,
    ) -> Option<i16> {
        self.last_batch = Some(LastBatch::of(header));
        replay(
            &mut self.producers,
            header,
            what,
            now_ms,
            self.high_watermark,
        )
    }

    /// A follower's appends are done: the log ends at `ends.end`.
    pub(super) fn replicated(&mut self, ends: LogEnds) {
        self.check_invariants(ends);
    }

    /// Forgets how much of the log was committed (a replicated partition just opened).
    pub(super) fn forget_high_watermark(&mut self, ends: LogEnds) {
        self.high_watermark = ends.start;
        self.check_invariants(ends);
    }

    /// A follower's high watermark: the leader's, capped at the local log end (and never below
    /// the log start).
    pub(super) fn follow_high_watermark(&mut self, leader_high_watermark: i64, ends: LogEnds) {
        assert_eq!(
            self.role,
            Role::Follower,
            "only a follower follows a high watermark"
        );
        self.high_watermark = leader_high_watermark.min(ends.end).max(ends.start);
        self.check_invariants(ends);
    }

    /// Whether a truncation may cut this log.
    pub(super) fn check_truncate(&self) -> Result<(), super::TruncateError> {
        if self.role != Role::Follower {
            return Err(super::TruncateError::NotFollower);
        }
        Ok(())
    }

    /// The log was cut at `ends.end`; `producers` and `last_batch` are rebuilt for the prefix.
    pub(super) fn truncated(
        &mut self,
        ends: LogEnds,
        producers: ProducerStates,
        last_batch: Option<LastBatch>,
    ) {
        self.producers = producers;
        self.last_batch = last_batch;
        self.high_watermark = self.high_watermark.min(ends.end).max(ends.start);
        self.pending_truncation = Some(ends.end);
        self.check_invariants(ends);
    }

    /// The truncation that cut the log at `end` is durable: appends may resume.
    pub(super) fn truncation_durable(&mut self, end: i64, ends: LogEnds) {
        if self.pending_truncation == Some(end) {
            self.pending_truncation = None;
        }
        self.check_invariants(ends);
    }

    /// The last stable offset: the first offset of a transaction still open or whose marker
    /// the high watermark has not passed, else the high watermark (KIP-98).
    pub fn last_stable_offset(&self, ends: LogEnds) -> i64 {
        let lso = self
            .producers
            .last_stable_offset(ends.start, self.high_watermark);
        debug_assert!(lso <= self.high_watermark);
        lso
    }

    /// Forgets producers idle for `expiration_ms`; returns how many.
    pub(super) fn expire_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.expire(now_ms, expiration_ms)
    }

    /// DeleteRecords: the new log start for `offset` (`-1`: the high watermark), `None` when
    /// the log already starts there.
    pub(super) fn delete_records_target(
        &self,
        offset: i64,
        ends: LogEnds,
    ) -> Result<Option<i64>, DeleteRecordsError> {
        if self.config.cleanup_policy == crate::config::CleanupPolicy::Compact {
            return Err(DeleteRecordsError::PolicyViolation);
        }
        let target = if offset == super::DELETE_TO_HIGH_WATERMARK {
            self.high_watermark
        } else {
            offset
        };
        if target < 0 || target > self.high_watermark {
            return Err(DeleteRecordsError::OffsetOutOfRange {
                offset: target,
                high_watermark: self.high_watermark,
            });
        }
        if target <= ends.start {
            return Ok(None);
        }
        Ok(Some(target))
    }

    /// The log start moved (DeleteRecords, retention): producers whose batches are all gone
    /// below it are forgotten.
    pub(super) fn log_start_moved(&mut self, ends: LogEnds) {
        assert!(
            self.high_watermark >= ends.start,
            "log start past the high watermark"
        );
        self.producers.log_start_moved(ends.start);
        self.check_invariants(ends);
    }
}

/// Applies one replayed batch to `producers` (the follower's appends and the rebuild from the
/// log share it).
pub(super) fn replay(
    producers: &mut ProducerStates,
    header: &BatchHeader,
    what: Replayed,
    now_ms: i64,
    high_watermark: i64,
) -> Option<i16> {
    match what {
        Replayed::Data => producers.record_replicated(header, now_ms),
        Replayed::Marker(marker) => {
            producers.record_marker(header, marker, now_ms, high_watermark);
            None
        }
        Replayed::Nothing => None,
    }
}

#[cfg(test)]
mod tests;
