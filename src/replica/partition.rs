//! One partition replica on this broker: the log driver ([`Partition`], which owns the log and
//! does its reads and writes) around the replica state core ([`ReplicaState`] in `state`: high
//! watermark, role and epochs, the ISR view, producer-state decisions; pure, invariants checked
//! after every step). Driven by plain method calls (no async). The broker layer wraps it in a
//! lock and does the waiting (fsync, long polls) around it.
//!
//! With one replica the high watermark follows the log end on every append, or, when the broker
//! fsyncs before acknowledging, the flushed end: then consumers never see a record that a power
//! loss could take back. A replicated leader's high watermark is moved by the ISR rule instead
//! (the [`ReplicaSet`](crate::replica::isr::ReplicaSet) it holds while leading, in `leader`),
//! and a follower's is the leader's, capped at its own log end. The follower side (appending
//! the leader's batches, truncating on divergence) lives in `follower`.

mod follower;
mod leader;
mod leader_epoch;
mod snapshot;
mod state;
#[cfg(test)]
mod txn_tests;

use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::producer::{Verification, VerificationGuard};
use super::transactions::AbortedTxn;
use super::validation::{self, RecordError, ValidationError};
use crate::config::{TimestampType, TopicConfig};
use crate::io::Disk;
use crate::log::batch::{self, BatchError};
use crate::log::cleaner::{AbortedRange, CleanJob, CleanPolicy, Cleaned, CleanerCheckpoint};
use crate::log::control::{self, Marker};
use crate::log::{Log, LogConfig, ReadError, Recovery, StartOffsetWrite};
pub use follower::{FollowerAppendError, FollowerAppended, TruncateError, TruncationPlan};
pub use leader::{LeaderRefused, LeaderView, DEFAULT_REPLICA_LAG_TIME_MAX_MS};
pub use leader_epoch::EpochRefusal;
use state::{Admission, Origin};
pub use state::{LogEnds, ReplicaState};

#[derive(Debug)]
pub enum ProduceError {
    /// CRC mismatch or broken framing.
    Corrupt(String),
    /// Well-formed but not acceptable (several batches, empty, transactional...).
    InvalidRecord(String),
    MessageTooLarge {
        size: usize,
        max: i32,
    },
    OutOfOrderSequence {
        expected: i32,
        found: i32,
    },
    InvalidProducerEpoch,
    /// A non-transactional batch from a producer with a transaction open here.
    InvalidTxnState,
    /// A marker from a transaction coordinator older than the last one that wrote here.
    CoordinatorFenced,
    /// Records that break the topic's rules (a keyless record on a compacted topic).
    RecordErrors(Vec<RecordError>),
    /// This replica is a follower: only the leader takes produces.
    NotLeader,
    Storage(io::Error),
}

/// DeleteRecords' offset meaning "up to the high watermark".
pub const DELETE_TO_HIGH_WATERMARK: i64 = -1;

#[derive(Debug, PartialEq, Eq)]
pub enum DeleteRecordsError {
    /// Below zero (other than -1) or past the high watermark.
    OffsetOutOfRange { offset: i64, high_watermark: i64 },
    /// The topic is `cleanup.policy=compact` only: records there go by compaction alone.
    PolicyViolation,
}

/// The outcome of an accepted produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker time stamped on the batch, or -1 under CreateTime.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    /// A retried batch already in the log: nothing was written.
    pub duplicate: bool,
}

use snapshot::{LastBatch, Snapshot, PRODUCER_SNAPSHOT};

pub fn log_config(config: &TopicConfig) -> LogConfig {
    // A compacted topic rolls by max.compaction.lag.ms too (KIP-354): the active segment is
    // never cleaned, so it must not hold old data for longer than that.
    let segment_ms = if config.is_compacted() {
        config
            .segment_ms
            .min(config.compaction().max_compaction_lag_ms)
    } else {
        config.segment_ms
    };
    LogConfig {
        segment_bytes: config.segment_bytes,
        segment_ms,
        index_interval_bytes: config.index_interval_bytes.max(1) as u64,
        #[cfg(any(madsim, test))]
        planted: Default::default(),
    }
}

/// The log driver: owns the log and does its I/O; every decision about the high watermark,
/// the role, the ISR and the producers is the state core's.
pub struct Partition {
    topic: String,
    index: i32,
    log: Log,
    state: ReplicaState,
}

/// This replica's part in the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
}

/// A role change for an epoch older than the one already known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaleLeaderEpoch {
    pub requested: i32,
    pub current: i32,
}

/// What opening a partition takes besides its topic config. Production builds carry nothing
/// here; the simulator's and the tests' carry the bug planted in the partition (its log, its
/// producer state, its replica set), which then lives in the log's config.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptions {
    #[cfg(any(madsim, test))]
    pub planted: crate::config::planted::Planted,
}

impl Partition {
    pub async fn open(
        disk: Arc<dyn Disk>,
        dir: &Path,
        topic: &str,
        index: i32,
        config: TopicConfig,
        options: OpenOptions,
        now_ms: i64,
    ) -> io::Result<(Partition, Recovery)> {
        #[allow(unused_mut)]
        let mut log_config = log_config(&config);
        #[cfg(any(madsim, test))]
        {
            log_config.planted = options.planted;
        }
        let _ = options;
        let (mut log, mut recovery) = Log::open(disk.clone(), dir, log_config, now_ms).await?;
        // Start from the snapshot when it is sound and the log still holds everything it
        // covers; otherwise rebuild from the whole log. Damage this walk meets in a segment
        // open trusted sends that segment through full recovery, and the walk runs again.
        let (producers, last_batch) = log
            .repairing(&mut recovery, now_ms, |log| {
                let producers = snapshot::rebuild_at_open(log, disk.as_ref(), dir)?;
                Ok((producers, LastBatch::in_log(log, log.end_offset())?))
            })
            .await?;
        // Whatever survived recovery is what this broker has: it is the committed log. It is
        // all durable (an unclean open fsyncs what it kept), so even a broker that exposes only
        // fsynced records can start its high watermark at the end: no consumer sees a tail a
        // later power loss could take back.
        assert_eq!(
            log.recovery_point(),
            log.end_offset(),
            "an opened log is durable"
        );
        // Until told its role, a replica stamps no epoch older than what its log holds.
        let state = ReplicaState::opened(
            config,
            ends_of(&log),
            log.latest_epoch(),
            producers,
            last_batch,
            #[cfg(any(madsim, test))]
            log.config().planted,
        );
        let partition = Partition {
            topic: topic.to_string(),
            index,
            log,
            state,
        };
        Ok((partition, recovery))
    }

    /// The log's offsets, as the state core takes them.
    pub(super) fn ends(&self) -> LogEnds {
        ends_of(&self.log)
    }

    /// The replica state core (read only: it moves by the driver's steps).
    pub fn state(&self) -> &ReplicaState {
        &self.state
    }

    /// Simulator and tests: whether `bug` is planted here (it travels in the log's config).
    #[cfg(any(madsim, test))]
    fn planted(&self, bug: crate::config::PlantedBug) -> bool {
        self.log.config().planted.is(bug)
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn index(&self) -> i32 {
        self.index
    }

    pub fn leader_epoch(&self) -> i32 {
        self.state.leader_epoch()
    }

    pub fn role(&self) -> Role {
        self.state.role()
    }

    /// Becomes the leader the image names (`view`): records the epoch as starting at the log
    /// end before anything is appended in it (KAFKA-7415), so a follower holding data of an
    /// intermediate epoch is answered correctly. With other replicas, a replica set then moves
    /// the high watermark by the ISR rule; alone, it follows the log end (or the fsynced end).
    /// The same epoch again only updates the replica set (a committed ISR change, fresher
    /// broker views); an older one is refused.
    pub fn become_leader(&mut self, view: LeaderView, now_ms: i64) -> Result<(), LeaderRefused> {
        let leader_epoch = view.leadership.leader_epoch;
        self.state.check_leadership(&view)?;
        if !self.log.assign_epoch_start(leader_epoch) {
            // The log holds batches of a newer epoch than the image's: a leader may not stamp
            // older epochs after them.
            return Err(LeaderRefused::Stale {
                requested: leader_epoch,
                current: self.log.latest_epoch(),
            });
        }
        let ends = self.ends();
        self.state.lead(view, ends, now_ms);
        Ok(())
    }

    /// Becomes a follower in `leader_epoch`: from now on only the leader's batches are appended
    /// ([`Partition::append_as_follower`]) and the high watermark is the leader's.
    pub fn become_follower(&mut self, leader_epoch: i32) -> Result<(), StaleLeaderEpoch> {
        self.state.check_epoch(leader_epoch)?;
        // An epoch this replica led without writing anything holds no data; dropped, so the
        // leader's batches of the epoch before it follow on (fetches send the latest epoch).
        self.log.forget_epochs_from(self.log.end_offset());
        let ends = self.ends();
        self.state.follow(leader_epoch, ends);
        Ok(())
    }

    pub fn config(&self) -> &TopicConfig {
        self.state.config()
    }

    pub fn set_config(&mut self, config: TopicConfig) {
        #[allow(unused_mut)]
        let mut log_config = log_config(&config);
        #[cfg(any(madsim, test))]
        {
            log_config.planted = self.log.config().planted;
        }
        self.log.set_config(log_config);
        let ends = self.ends();
        self.state.set_config(config, ends);
    }

    /// The producer-state snapshot to write now: (path, contents).
    pub fn producer_snapshot(&self) -> (std::path::PathBuf, Vec<u8>) {
        let snapshot = Snapshot {
            offset: self.log.end_offset(),
            producers: self.state.producers().clone(),
            last_batch: self.state.last_batch(),
        };
        (self.log.dir().join(PRODUCER_SNAPSHOT), snapshot.render())
    }

    /// Consumers see only what has been fsynced (for brokers that fsync before acknowledging).
    pub fn set_durable_reads(&mut self, durable: bool) {
        let ends = self.ends();
        self.state.set_durable_reads(durable, ends);
    }

    /// Everything the plan covered is on stable storage.
    pub fn flushed(&mut self, plan: &crate::log::FlushPlan, now_ms: i64) {
        self.log.flushed(plan, now_ms);
        let ends = self.ends();
        self.state.flushed(ends);
    }

    pub fn high_watermark(&self) -> i64 {
        self.state.high_watermark()
    }

    /// Size of the committed in-sync replica set (one for a partition on its own).
    pub fn isr_size(&self) -> usize {
        self.state
            .replica_set()
            .map_or(1, |set| set.committed_isr().len())
    }

    /// Size of the maximal in-sync set (the committed one plus a pending expansion).
    pub fn maximal_isr_size(&self) -> usize {
        self.state
            .replica_set()
            .map_or(1, |set| set.maximal_isr().len())
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log.start_offset()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.end_offset()
    }

    pub fn log(&self) -> &Log {
        &self.log
    }

    /// Whether `future` holds exactly this replica's log (same start and end, its last epoch
    /// ending where this log's does: no truncation came between) and at least as much of it
    /// durably: the condition for [`Partition::replace_log`].
    pub fn can_replace_log(&self, future: &Log) -> bool {
        let log = &self.log;
        let epoch = future.latest_epoch();
        let same_tail = epoch < 0 || {
            let here = log.end_offset_for_epoch(epoch);
            here.epoch == epoch && here.end_offset == future.end_offset()
        };
        future.start_offset() == log.start_offset()
            && future.end_offset() == log.end_offset()
            && future.recovery_point() >= log.recovery_point().min(log.end_offset())
            && same_tail
            && (future.gaps_allowed() || !log.gaps_allowed())
    }

    /// Swaps in `future` as this replica's log (an intra-broker move, KIP-113) and returns the
    /// old one; every other state (high watermark, producers, role) stays, as the logs hold
    /// the same batches.
    pub fn replace_log(&mut self, future: Log) -> Log {
        assert!(
            self.can_replace_log(&future),
            "the future log is not caught up"
        );
        let mut future = future;
        // Epochs a leader started without a batch yet are in this log's cache only.
        future.adopt_epochs(self.log.epochs().clone());
        let old = std::mem::replace(&mut self.log, future);
        let ends = self.ends();
        self.state.flushed(ends);
        old
    }

    pub fn log_mut(&mut self) -> &mut Log {
        &mut self.log
    }

    /// Validates one produce's records (exactly one v2 batch, as Kafka requires from v3 on),
    /// checks the producer's sequence, and appends.
    pub fn append(&mut self, records: &[u8], now_ms: i64) -> Result<Appended, ProduceError> {
        self.append_from(records, now_ms, Origin::Client, Verification::Skipped)
    }

    /// A client's append under KIP-890 part 1: a transactional batch that would open its
    /// producer's transaction here is appended only if `verification` holds the guard
    /// [`Self::start_txn_verification`] handed out and no marker or transactional batch of that
    /// producer came since (else INVALID_TXN_STATE).
    pub fn append_verified(
        &mut self,
        records: &[u8],
        now_ms: i64,
        verification: Verification,
    ) -> Result<Appended, ProduceError> {
        self.append_from(records, now_ms, Origin::Client, verification)
    }

    /// Begins the verification of `producer_id`'s transactional write at `producer_epoch` with
    /// its coordinator: `None` if it has a transaction open here at that epoch (nothing to
    /// ask), else the guard to append with.
    pub fn start_txn_verification(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        now_ms: i64,
    ) -> Option<VerificationGuard> {
        self.state
            .start_verification(producer_id, producer_epoch, now_ms)
    }

    /// Appends a batch a coordinator wrote for a producer (the group coordinator's
    /// transactional offset commits): Kafka's `AppendOrigin.COORDINATOR`, checked like a
    /// client's batch except for sequence numbers (it carries none), an older epoch than the
    /// producer's still refused (INVALID_PRODUCER_EPOCH).
    pub fn append_from_coordinator(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<Appended, ProduceError> {
        self.append_from(records, now_ms, Origin::Coordinator, Verification::Skipped)
    }

    fn append_from(
        &mut self,
        records: &[u8],
        now_ms: i64,
        origin: Origin,
        verification: Verification,
    ) -> Result<Appended, ProduceError> {
        self.state.check_leader_append()?;
        let config = self.state.config();
        let mut header = check_client_batch(records, config)?;
        let admission = self.state.admit(&header, origin, verification)?;
        if admission != Admission::Append {
            return Ok(ReplicaState::duplicate_answer(admission, self.ends()));
        }
        // Topics whose config looks inside batches (compaction keys, compression.type) may
        // refuse records or hand back a recompressed batch; all others keep the bytes as sent.
        let topic_partition = format!("{}-{}", self.topic, self.index);
        let rewritten =
            validation::apply(records, &header, config, &topic_partition).map_err(|e| match e {
                ValidationError::Invalid(why) => ProduceError::InvalidRecord(why),
                ValidationError::Records(errors) => ProduceError::RecordErrors(errors),
            })?;
        // One copy per batch (not per record): the offsets are patched into our own buffer.
        let mut owned = match rewritten {
            Some(batch) => {
                header = batch::check(&batch).expect("a rewritten batch is well formed");
                if batch.len() > config.max_message_bytes.max(0) as usize {
                    return Err(ProduceError::MessageTooLarge {
                        size: batch.len(),
                        max: config.max_message_bytes,
                    });
                }
                batch
            }
            None => records.to_vec(),
        };
        let leader_epoch = self.state.leader_epoch();
        batch::set_partition_leader_epoch(&mut owned, leader_epoch);
        header.partition_leader_epoch = leader_epoch;
        let log_append_time = if config.message_timestamp_type == TimestampType::LogAppendTime {
            batch::set_log_append_time(&mut owned, now_ms);
            header.max_timestamp = now_ms;
            header.attributes |= 0x08;
            now_ms
        } else {
            -1
        };
        let before = self.log.end_offset();
        let (base_offset, last_offset) = self
            .log
            .append(&mut owned, std::slice::from_mut(&mut header), now_ms)
            .map_err(ProduceError::Storage)?;
        assert_eq!(base_offset, before);
        let stored = batch::BatchHeader::parse(&owned).expect("an appended batch parses");
        let ends = self.ends();
        self.state.appended(&header, &stored, ends, now_ms);
        Ok(Appended {
            base_offset,
            last_offset,
            log_append_time,
            log_start_offset: self.log.start_offset(),
            duplicate: false,
        })
    }

    /// Writes a transactions v1 marker: [`Self::append_marker_as`] with the legacy epoch check.
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        now_ms: i64,
    ) -> Result<Appended, ProduceError> {
        self.append_marker_as(producer_id, producer_epoch, marker, false, now_ms)
    }

    /// Writes a transaction marker (WriteTxnMarkers, on the leader) for producer
    /// (`producer_id`, `producer_epoch`): the control batch closes the producer's open
    /// transaction here, if any. Refused when the epoch is older than the producer's — or, for
    /// a transactions v2 marker (`v2`, KIP-1228), not above it while a transaction is open
    /// (INVALID_PRODUCER_EPOCH) — or the coordinator older than the last marker's
    /// (TRANSACTION_COORDINATOR_FENCED).
    pub fn append_marker_as(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        v2: bool,
        now_ms: i64,
    ) -> Result<Appended, ProduceError> {
        self.state
            .check_marker(producer_id, producer_epoch, marker, v2)?;
        let mut owned = control::marker_batch(producer_id, producer_epoch, marker, now_ms);
        let mut header = batch::check(&owned).expect("a marker batch is well formed");
        let leader_epoch = self.state.leader_epoch();
        batch::set_partition_leader_epoch(&mut owned, leader_epoch);
        header.partition_leader_epoch = leader_epoch;
        let (base_offset, last_offset) = self
            .log
            .append(&mut owned, std::slice::from_mut(&mut header), now_ms)
            .map_err(ProduceError::Storage)?;
        assert_eq!(base_offset, last_offset, "a marker takes one offset");
        let stored = batch::BatchHeader::parse(&owned).expect("an appended batch parses");
        let ends = self.ends();
        self.state.marker_appended(&stored, marker, ends, now_ms);
        Ok(Appended {
            base_offset,
            last_offset,
            log_append_time: -1,
            log_start_offset: self.log.start_offset(),
            duplicate: false,
        })
    }

    /// The last stable offset: the first offset of a transaction still open or whose marker
    /// the high watermark has not passed, else the high watermark (KIP-98).
    pub fn last_stable_offset(&self) -> i64 {
        self.state.last_stable_offset(self.ends())
    }

    /// A `read_committed` read: whole batches from `offset` below the last stable offset,
    /// with the aborted transactions the reader must drop from them (the broker never
    /// filters; clients do, as Kafka's contract says).
    pub fn read_committed(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<(Bytes, Vec<AbortedTxn>), ReadError> {
        let lso = self.last_stable_offset();
        let records = self.log.read(offset, max_bytes, lso)?;
        // The aborted transactions that overlap what is returned: up to its end.
        let upper_bound = batch::iter(&records)
            .filter_map(Result::ok)
            .last()
            .map_or(offset, |(_, h)| h.next_offset());
        let aborted = if records.is_empty() {
            Vec::new()
        } else {
            self.state.producers().aborted_between(offset, upper_bound)
        };
        Ok((records, aborted))
    }

    /// Whether `producer_id` has a transaction open on this replica at `epoch` (one of an
    /// older epoch is not the batch's: see `ProducerStates::has_open_transaction_at`).
    pub fn has_open_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        self.state
            .producers()
            .has_open_transaction_at(producer_id, epoch)
    }

    /// The producers this replica remembers (DescribeProducers).
    pub fn active_producers(&self) -> Vec<super::producer::ActiveProducer> {
        self.state.producers().active()
    }

    /// How many transactions are open on this replica.
    pub fn open_transactions(&self) -> usize {
        self.state.producers().open_transactions()
    }

    /// Forgets producers idle for `expiration_ms` (`producer.id.expiration.ms`); returns how
    /// many.
    pub fn expire_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let expired = self.state.expire_producers(now_ms, expiration_ms);
        self.state.check_invariants(self.ends());
        expired
    }

    /// How many idempotent producers this partition remembers.
    pub fn producer_count(&self) -> usize {
        self.state.producers().len()
    }

    /// Committed data from `offset` (consumers never see past the high watermark).
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<Bytes, ReadError> {
        #[cfg(any(madsim, test))]
        if self.planted(crate::config::PlantedBug::ReadPastHighWatermark) {
            return self.log.read(offset, max_bytes, self.log.end_offset());
        }
        #[cfg(any(madsim, test))]
        if self.role() != Role::Leader
            && self.planted(crate::config::PlantedBug::FollowerReadPastHighWatermark)
        {
            return self.log.read(offset, max_bytes, self.log.end_offset());
        }
        self.log
            .read(offset, max_bytes, self.state.high_watermark())
    }

    /// DeleteRecords, first half: checks a request to move the log start to `offset` (`-1`: the
    /// high watermark) and says what to make durable before [`Partition::advance_log_start`].
    /// `Ok(None)`: the log already starts at or after it; nothing to do.
    pub fn delete_records_plan(
        &self,
        offset: i64,
    ) -> Result<Option<StartOffsetWrite>, DeleteRecordsError> {
        let target = self.state.delete_records_target(offset, self.ends())?;
        Ok(target.map(|target| self.log.start_offset_write(target)))
    }

    /// A follower adopts its leader's log start (Kafka's `maybeIncrementLogStartOffset` on a
    /// fetch answer): what to make durable before [`Partition::advance_log_start`] to move the
    /// log start to `leader_log_start`, capped at the high watermark (what this replica holds
    /// as the leader's); `None` when the log already starts there or this is no follower.
    pub fn follower_log_start_plan(&self, leader_log_start: i64) -> Option<StartOffsetWrite> {
        if self.role() != Role::Follower {
            return None;
        }
        let target = leader_log_start.min(self.state.high_watermark());
        (target > self.log.start_offset()).then(|| self.log.start_offset_write(target))
    }

    /// DeleteRecords, second half, once the plan's write is durable: the log now starts at
    /// `offset`; whole segments below it are deleted.
    pub fn advance_log_start(&mut self, offset: i64) -> io::Result<()> {
        assert!(
            offset <= self.state.high_watermark(),
            "log start past the high watermark"
        );
        self.log.advance_start_offset(offset)?;
        let ends = self.ends();
        self.state.log_start_moved(ends);
        Ok(())
    }

    /// A log-cleaner pass over this partition, when its policy compacts and one is due. It
    /// never reaches the last stable offset (an open transaction's data is not yet decided),
    /// keeps every active producer's last batch, and never lets an aborted transaction's
    /// record shadow its key's older value.
    pub fn clean_job(&self, now_ms: i64) -> io::Result<Option<CleanJob>> {
        let config = self.state.config();
        if !config.is_compacted() {
            return Ok(None);
        }
        let c = config.compaction();
        let policy = CleanPolicy {
            min_dirty_ratio: c.min_cleanable_dirty_ratio,
            min_lag_ms: c.min_compaction_lag_ms,
            max_lag_ms: c.max_compaction_lag_ms,
            delete_retention_ms: c.delete_retention_ms,
            segment_bytes: config.segment_bytes,
        };
        let job = self.log.clean_job(
            self.last_stable_offset(),
            self.state.producers().last_batch_offsets(),
            policy,
            now_ms,
        )?;
        Ok(job.map(|mut job| {
            job.aborted = self
                .state
                .producers()
                .aborted_between(self.log.start_offset(), i64::MAX)
                .into_iter()
                .map(|a| AbortedRange {
                    producer_id: a.producer_id,
                    first_offset: a.first_offset,
                    last_offset: a.last_offset,
                })
                .collect();
            job
        }))
    }

    /// Swaps a finished pass in (see [`Log::install_cleaned`]). Compaction moves no offset:
    /// the log start, log end and high watermark are the same afterwards.
    pub fn install_cleaned(&mut self, cleaned: &Cleaned) -> io::Result<CleanerCheckpoint> {
        let before = (self.ends(), self.state.high_watermark());
        let checkpoint = self.log.install_cleaned(cleaned)?;
        let after = (self.ends(), self.state.high_watermark());
        assert_eq!(
            (before.0.start, before.0.end, before.1),
            (after.0.start, after.0.end, after.1),
            "compaction never moves offsets"
        );
        self.state.check_invariants(after.0);
        Ok(checkpoint)
    }

    /// Applies retention; returns how many segments were deleted.
    pub fn apply_retention(&mut self, now_ms: i64) -> io::Result<usize> {
        let config = self.state.config();
        if config.cleanup_policy == crate::config::CleanupPolicy::Compact {
            return Ok(0);
        }
        #[allow(unused_mut)]
        let mut upper_bound = self.state.high_watermark();
        #[cfg(any(madsim, test))]
        if self.planted(crate::config::PlantedBug::RetentionPastHighWatermark) {
            upper_bound = i64::MAX;
        }
        let deleted = self.log.apply_retention(
            config.retention_ms,
            config.retention_bytes,
            now_ms,
            upper_bound,
        )?;
        // Retention stops below the high watermark, which therefore stays inside the log.
        let ends = self.ends();
        self.state.log_start_moved(ends);
        Ok(deleted)
    }
}

/// The framing a produced batch must have before anything else is looked at: exactly one
/// whole, CRC-valid v2 batch within `max.message.bytes`, dense, not empty, not a control
/// batch, no cleaner-only attribute, a producer id when transactional.
fn check_client_batch(
    records: &[u8],
    config: &TopicConfig,
) -> Result<batch::BatchHeader, ProduceError> {
    let header = match batch::check(records) {
        Ok(h) => h,
        Err(e @ (BatchError::CrcMismatch { .. } | BatchError::Truncated { .. })) => {
            return Err(ProduceError::Corrupt(e.to_string()))
        }
        Err(e) => return Err(ProduceError::InvalidRecord(e.to_string())),
    };
    if header.total_len() != records.len() {
        return Err(ProduceError::InvalidRecord(
            "a produce must carry exactly one record batch per partition".into(),
        ));
    }
    if records.len() > config.max_message_bytes.max(0) as usize {
        return Err(ProduceError::MessageTooLarge {
            size: records.len(),
            max: config.max_message_bytes,
        });
    }
    if header.record_count == 0 {
        return Err(ProduceError::InvalidRecord("empty record batch".into()));
    }
    if !header.is_dense() {
        return Err(ProduceError::InvalidRecord(
            "record count does not match last offset delta".into(),
        ));
    }
    if header.has_delete_horizon() {
        return Err(ProduceError::InvalidRecord(
            "the delete-horizon attribute is set only by the log cleaner".into(),
        ));
    }
    if header.is_control() {
        // Markers come from the transaction coordinator (WriteTxnMarkers), never a client.
        return Err(ProduceError::InvalidRecord(
            "clients may not write control batches".into(),
        ));
    }
    if header.is_transactional() && !header.is_idempotent() {
        return Err(ProduceError::InvalidRecord(
            "a transactional batch needs a producer id".into(),
        ));
    }
    Ok(header)
}

/// The offsets of `log` the state core steps with.
fn ends_of(log: &Log) -> LogEnds {
    let end = log.end_offset();
    LogEnds {
        start: log.start_offset(),
        end,
        durable: log.recovery_point().min(end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::memdisk::MemDisk;
    use crate::log::batch::testing::batch;

    fn open(disk: &MemDisk) -> Partition {
        let config = crate::config::ServerConfig::default_single_node().topic_defaults;
        let open = Partition::open(
            Arc::new(disk.clone()),
            Path::new("/data/t-0"),
            "t",
            0,
            config,
            Default::default(),
            0,
        );
        crate::io::memdisk::block_on(open).unwrap().0
    }

    /// A clock for cleaner passes without a throttle (it never sleeps).
    struct StillClock;

    impl crate::io::Clock for StillClock {
        fn monotonic(&self) -> std::time::Duration {
            std::time::Duration::ZERO
        }
        fn wall_ms(&self) -> i64 {
            0
        }
        fn sleep(&self, _: std::time::Duration) -> crate::io::BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    fn keyed(key: &str, value: &str, producer: (i64, i16, i32)) -> Vec<u8> {
        let mut b = crate::log::batch::BatchBuilder::new(10);
        b.push(Some(key.as_bytes()), Some(value.as_bytes()), 10);
        b.finish(producer.0, producer.1, producer.2)
    }

    #[test]
    fn compaction_keeps_each_producers_last_batch_so_its_retry_is_still_a_duplicate() {
        use crate::io::memdisk::block_on;
        let disk = MemDisk::new(9);
        block_on(crate::io::create_dir_all_durable(&disk, Path::new("/data"))).unwrap();
        let mut config = crate::config::ServerConfig::default_single_node().topic_defaults;
        config.cleanup_policy = crate::config::CleanupPolicy::Compact;
        config.segment_bytes = 300;
        let open = |config: &TopicConfig| {
            block_on(Partition::open(
                Arc::new(disk.clone()),
                Path::new("/data/c-0"),
                "c",
                0,
                config.clone(),
                Default::default(),
                0,
            ))
            .unwrap()
            .0
        };
        let mut p = open(&config);
        // Producer 5 writes key "a" once; producer 6 then overwrites "a" many times.
        let last_of_5 = keyed("a", "from-5", (5, 0, 0));
        assert_eq!(p.append(&last_of_5, 1).unwrap().base_offset, 0);
        for i in 0..20 {
            p.append(&keyed("a", &format!("v{i}"), (6, 0, i)), 1)
                .unwrap();
        }
        let plan = p.log().flush_plan();
        block_on(Log::sync_files(&plan)).unwrap();
        p.flushed(&plan, 1);
        let job = p.clean_job(100).unwrap().expect("a pass is due");
        let mut throttle = crate::log::cleaner::Throttle::new(f64::MAX, std::time::Duration::ZERO);
        let cleaned = block_on(job.run(1 << 20, 100, &StillClock, &mut throttle))
            .unwrap()
            .unwrap();
        block_on(cleaned.write_intent()).unwrap();
        let checkpoint = p.install_cleaned(&cleaned).unwrap();
        block_on(cleaned.commit(checkpoint)).unwrap();
        assert!(cleaned.stats.batches_dropped > 0);
        // Producer 5's only batch lost its record but its header stays, at offset 0.
        let data = p.read(0, 1 << 20).unwrap();
        let (_, first) = crate::log::batch::iter(&data).next().unwrap().unwrap();
        assert_eq!(
            (first.base_offset, first.producer_id, first.record_count),
            (0, 5, 0)
        );
        // Rebuilt from the log alone (no snapshot), a retry of that batch is still known.
        drop(p);
        disk.process_crash();
        let _ = disk.remove_file(Path::new("/data/c-0/producer-state"));
        let mut p = open(&config);
        let retry = p.append(&last_of_5, 2).unwrap();
        assert!(retry.duplicate, "the retry was appended again");
        assert_eq!(retry.base_offset, 0);
    }

    #[test]
    fn idempotent_retry_gets_original_offset_and_survives_restart() {
        let disk = MemDisk::new(1);
        crate::io::memdisk::block_on(crate::io::create_dir_all_durable(&disk, Path::new("/data")))
            .unwrap();
        let mut p = open(&disk);
        let first = batch(&[b"a", b"b"], 10, Some((5, 0, 0)));
        let second = batch(&[b"c"], 10, Some((5, 0, 2)));
        assert_eq!(p.append(&first, 1).unwrap().base_offset, 0);
        assert_eq!(p.append(&second, 1).unwrap().base_offset, 2);
        let retry = p.append(&first, 1).unwrap();
        assert!(retry.duplicate);
        assert_eq!(retry.base_offset, 0);
        assert_eq!(p.log_end_offset(), 3);
        let gap = batch(&[b"d"], 10, Some((5, 0, 9)));
        assert!(matches!(
            p.append(&gap, 1),
            Err(ProduceError::OutOfOrderSequence { expected: 3, .. })
        ));
        drop(p);
        disk.process_crash();
        let mut p = open(&disk);
        assert!(p.append(&second, 1).unwrap().duplicate);
        assert_eq!(p.log_end_offset(), 3);
    }

    #[test]
    fn producer_state_comes_back_from_snapshot_plus_log() {
        let disk = MemDisk::new(2);
        crate::io::memdisk::block_on(crate::io::create_dir_all_durable(&disk, Path::new("/data")))
            .unwrap();
        let mut p = open(&disk);
        let first = batch(&[b"a"], 10, Some((9, 0, 0)));
        let second = batch(&[b"b"], 10, Some((9, 0, 1)));
        p.append(&first, 1).unwrap();
        let (path, snapshot) = p.producer_snapshot();
        crate::io::memdisk::block_on(crate::io::write_file_atomic(&disk, &path, &snapshot))
            .unwrap();
        p.append(&second, 1).unwrap();
        drop(p);
        disk.process_crash();
        let mut p = open(&disk);
        // One batch from the snapshot, one from the log after it: both are known retries.
        assert!(p.append(&first, 1).unwrap().duplicate);
        assert!(p.append(&second, 1).unwrap().duplicate);
        // A damaged snapshot is ignored and the state rebuilt from the whole log.
        drop(p);
        assert!(Snapshot::load(&disk, Path::new("/data/t-0")).is_some());
        disk.flip_bit(&path, 20, 1).unwrap();
        assert!(Snapshot::load(&disk, Path::new("/data/t-0")).is_none());
        disk.process_crash();
        let mut p = open(&disk);
        assert!(p.append(&first, 1).unwrap().duplicate);
        assert_eq!(p.log_end_offset(), 2);
    }

    #[test]
    fn a_retry_under_log_append_time_gets_the_original_time() {
        let disk = MemDisk::new(4);
        disk.create_dir_all(Path::new("/data")).unwrap();
        let mut p = open(&disk);
        let mut config = p.config().clone();
        config.message_timestamp_type = TimestampType::LogAppendTime;
        p.set_config(config);
        let first = batch(&[b"a"], 10, Some((3, 0, 0)));
        let original = p.append(&first, 1_000).unwrap();
        assert_eq!(original.log_append_time, 1_000);
        let retry = p.append(&first, 2_000).unwrap();
        assert!(retry.duplicate);
        assert_eq!(retry.log_append_time, 1_000);
        // Also once the producer state was rebuilt from the log.
        drop(p);
        disk.process_crash();
        let mut p = open(&disk);
        let mut config = p.config().clone();
        config.message_timestamp_type = TimestampType::LogAppendTime;
        p.set_config(config);
        let retry = p.append(&first, 3_000).unwrap();
        assert!(retry.duplicate);
        assert_eq!(retry.log_append_time, 1_000);
        // Under CreateTime there is no append time to report.
        let mut config = p.config().clone();
        config.message_timestamp_type = TimestampType::CreateTime;
        p.set_config(config);
        assert_eq!(p.append(&first, 3_000).unwrap().log_append_time, -1);
    }

    #[test]
    fn idle_producers_expire_live_and_after_a_rebuild() {
        let disk = MemDisk::new(5);
        disk.create_dir_all(Path::new("/data")).unwrap();
        let mut p = open(&disk);
        // Batch timestamps 10 (the rebuild's stand-in), appended at broker time 1 000.
        p.append(&batch(&[b"a"], 10, Some((1, 0, 0))), 1_000)
            .unwrap();
        p.append(&batch(&[b"b"], 10, Some((2, 0, 0))), 5_000)
            .unwrap();
        assert_eq!(p.expire_producers(10_999, 10_000), 0);
        assert_eq!(p.expire_producers(11_000, 10_000), 1);
        assert_eq!(p.producer_count(), 1);
        // Snapshot (producer 2 only), then a restart: still one producer.
        let (path, snapshot) = p.producer_snapshot();
        crate::io::memdisk::block_on(crate::io::write_file_atomic(&disk, &path, &snapshot))
            .unwrap();
        drop(p);
        disk.process_crash();
        let mut p = open(&disk);
        assert_eq!(p.producer_count(), 1);
        assert_eq!(p.expire_producers(15_000, 10_000), 1);
        // Rebuilt from the log alone, both come back with their batch timestamps (10).
        drop(p);
        disk.remove_file(&path).unwrap();
        disk.process_crash();
        let mut p = open(&disk);
        assert_eq!(p.producer_count(), 2);
        assert_eq!(p.expire_producers(10_009, 10_000), 0);
        assert_eq!(p.expire_producers(10_010, 10_000), 2);
    }

    #[test]
    fn appends_are_stamped_with_the_leader_epoch_and_start_it_in_the_cache() {
        let disk = MemDisk::new(6);
        disk.create_dir_all(Path::new("/data")).unwrap();
        let mut p = open(&disk);
        // A broker on its own leads epoch 0 without an election.
        p.append(&batch(&[b"a"], 10, None), 1).unwrap();
        let entry = |p: &Partition| {
            let e = p.log().epochs().latest().unwrap();
            (e.epoch, e.start_offset)
        };
        assert_eq!(entry(&p), (0, 0));
        p.become_leader(LeaderView::sole(1, 2), 1).unwrap();
        p.append(&batch(&[b"b"], 10, None), 1).unwrap();
        p.append(&batch(&[b"c"], 10, None), 1).unwrap();
        assert_eq!(entry(&p), (2, 1));
        let stored = p.log().read(2, 1, i64::MAX).unwrap();
        assert_eq!(batch::check(&stored).unwrap().partition_leader_epoch, 2);
        assert_eq!(p.log().epochs().entries().len(), 2);
        assert_eq!(
            p.high_watermark(),
            3,
            "a leader on its own moves its HW on append"
        );
    }

    #[test]
    fn rejects_bad_batches() {
        let disk = MemDisk::new(1);
        crate::io::memdisk::block_on(crate::io::create_dir_all_durable(&disk, Path::new("/data")))
            .unwrap();
        let mut p = open(&disk);
        let mut b = batch(&[b"a"], 10, None);
        let two = [b.clone(), b.clone()].concat();
        assert!(matches!(
            p.append(&two, 1),
            Err(ProduceError::InvalidRecord(_))
        ));
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert!(matches!(p.append(&b, 1), Err(ProduceError::Corrupt(_))));
        assert!(matches!(
            p.append(&b[..10], 1),
            Err(ProduceError::Corrupt(_))
        ));
        assert_eq!(p.log_end_offset(), 0);
    }
}
