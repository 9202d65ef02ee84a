//! Idempotent-producer state of one partition: for each producer id, its epoch and the last
//! five batches it wrote (Kafka keeps five, matching `max.in.flight.requests.per.connection`).
//! A retried batch is recognised and answered with its original offset; a gap in sequence
//! numbers is refused. The state is rebuilt from batch headers when the log is opened.
//!
//! The state does not grow without bound: a producer idle for `producer.id.expiration.ms` is
//! forgotten (as Kafka does), and past [`MAX_PRODUCERS`] per partition the least recently active
//! one is. A forgotten producer is treated as a new one: its next batch is accepted whatever its
//! sequence, so only duplicate detection for it is lost.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::transactions::{AbortedTxn, Transactions};
use crate::log::batch::BatchHeader;
use crate::log::control::Marker;

/// How many recent batches per producer are remembered for duplicate detection.
pub const BATCHES_KEPT: usize = 5;

/// How many producers one partition remembers. Kafka bounds them only by time; a count bound
/// keeps a flood of short-lived producers (one per request, say) from exhausting memory before
/// `producer.id.expiration.ms` passes. Each entry is a few hundred bytes.
pub const MAX_PRODUCERS: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchMeta {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
    /// When this producer last wrote (ms): the broker's clock for a live append, the batch's
    /// max timestamp for one found in the log (as Kafka does). Older snapshots lack it: 0 makes
    /// such an entry the first to go, which costs at most one missed retry detection.
    #[serde(default)]
    last_activity_ms: i64,
    /// The first offset of this producer's open transaction here (Kafka's
    /// `currentTxnFirstOffset`): set by its first transactional batch, cleared by a marker.
    #[serde(default)]
    txn_first_offset: Option<i64>,
    /// The coordinator epoch of the last marker written for it: an older coordinator's marker
    /// is refused (TRANSACTION_COORDINATOR_FENCED).
    #[serde(default = "no_coordinator_epoch")]
    coordinator_epoch: i32,
}

fn no_coordinator_epoch() -> i32 {
    -1
}

/// KIP-890 part 1's verification guard (Kafka's `VerificationGuard`): handed out when a
/// producer with no transaction open here is about to be verified with its coordinator, and
/// required at the append. The producer's next transactional batch or marker ends it, so a
/// coordinator's "yes" that arrives after the transaction ended (an abort marker came in
/// between, and maybe a new transaction began) cannot open a hanging transaction: the ABA case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerificationGuard(u64);

/// What a client's append carries from KIP-890 part 1's verification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verification {
    /// Not checked: `transaction.partition.verification.enable=false`, or a write that is not
    /// a client's (tests, internal topics).
    Skipped,
    /// The guard handed out before the coordinator was asked (`None`: none was, as the producer
    /// had a transaction open here). A transactional batch that would open a transaction is
    /// appended only with the guard still held for its producer.
    Guarded(Option<VerificationGuard>),
}

/// Why a transactional or marker write is refused by the producer state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnRefusal {
    /// A non-transactional batch from a producer with an open transaction here, or a
    /// transactional batch that would open one without a live verification guard.
    InvalidTxnState,
    /// A marker older than the producer's epoch.
    StaleEpoch { current: i16 },
    /// A marker from a coordinator older than the last one that wrote here.
    CoordinatorFenced { current: i32 },
}

/// One producer as DescribeProducers (KIP-664) shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last sequence of its last batch kept, -1 if none (a marker bumped the epoch).
    pub last_sequence: i32,
    /// When it last wrote (data or marker), ms; -1 if unknown.
    pub last_timestamp: i64,
    /// The coordinator epoch of its last marker here, -1 if none.
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction here.
    pub txn_start_offset: Option<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not idempotent, a new producer, or the next batch in sequence: append it.
    Append,
    /// A retry of a batch already in the log.
    Duplicate(BatchMeta),
    /// Sequence numbers skip or go back.
    OutOfOrder { expected: i32, found: i32 },
    /// The epoch is older than the producer's current one: a zombie.
    StaleEpoch { current: i16 },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerStates {
    producers: BTreeMap<i64, Entry>,
    /// (last activity, producer id) for every entry: what to expire or evict first. Derived,
    /// so not written to snapshots; [`ProducerStates::reindex`] rebuilds it after loading.
    #[serde(skip)]
    by_activity: BTreeSet<(i64, i64)>,
    /// Open and recently ended transactions, and the aborted index.
    #[serde(default)]
    transactions: Transactions,
    /// KIP-890 verification guards by producer id, with when each was handed out (ms): kept
    /// in memory only (a restart or truncation drops them; the client's retry verifies again),
    /// as Kafka keeps its `VerificationStateEntry`s.
    #[serde(skip)]
    verifications: BTreeMap<i64, (VerificationGuard, i64)>,
    /// The last guard handed out (each one is new, never reused).
    #[serde(skip)]
    last_guard: u64,
    /// Simulator and tests: the bug planted here (`DedupWindowFour`), from the partition's log
    /// config; not in snapshots.
    #[cfg(any(madsim, test))]
    #[serde(skip)]
    planted: crate::config::planted::Planted,
}

fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

impl ProducerStates {
    /// Simulator and tests: plants a bug (the partition does, from its log config).
    #[cfg(any(madsim, test))]
    pub fn set_planted(&mut self, planted: crate::config::planted::Planted) {
        self.planted = planted;
    }

    pub fn check(&self, header: &BatchHeader) -> SequenceCheck {
        if !header.is_idempotent() {
            return SequenceCheck::Append;
        }
        let Some(entry) = self.producers.get(&header.producer_id) else {
            // Unknown producer (new, or its batches were all removed by retention): Kafka
            // accepts any sequence here.
            return SequenceCheck::Append;
        };
        if header.producer_epoch < entry.epoch {
            return SequenceCheck::StaleEpoch {
                current: entry.epoch,
            };
        }
        if header.producer_epoch > entry.epoch {
            // A bumped epoch restarts its sequence at zero.
            return if header.base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder {
                    expected: 0,
                    found: header.base_sequence,
                }
            };
        }
        let last_sequence = header.last_sequence();
        if let Some(meta) = entry
            .batches
            .iter()
            .find(|b| b.first_sequence == header.base_sequence && b.last_sequence == last_sequence)
        {
            return SequenceCheck::Duplicate(*meta);
        }
        let expected = entry
            .batches
            .back()
            .map(|b| next_sequence(b.last_sequence))
            .unwrap_or(0);
        if header.base_sequence == expected {
            SequenceCheck::Append
        } else {
            SequenceCheck::OutOfOrder {
                expected,
                found: header.base_sequence,
            }
        }
    }

    /// Records a batch that is now in the log (its header carries its real offsets), written
    /// at `now_ms`: the broker's clock for an append, the batch's max timestamp on a rebuild.
    pub fn record(&mut self, header: &BatchHeader, now_ms: i64) {
        if !header.is_idempotent() {
            return;
        }
        assert!(!header.is_control(), "markers go through record_marker");
        let pid = header.producer_id;
        if header.is_transactional() {
            // The transaction is open here now (or already was): its guard has done its job.
            self.verifications.remove(&pid);
        }
        let entry = self.touch(pid, header.producer_epoch, now_ms);
        if header.is_transactional() && entry.txn_first_offset.is_none() {
            entry.txn_first_offset = Some(header.base_offset);
            self.transactions.opened(pid, header.base_offset);
        }
        let entry = self.producers.get_mut(&pid).expect("just touched");
        if header.producer_epoch > entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        assert!(
            header.producer_epoch >= entry.epoch,
            "producer epochs never go back"
        );
        entry.batches.push_back(BatchMeta {
            first_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
        });
        #[allow(unused_mut)]
        let mut kept = BATCHES_KEPT;
        #[cfg(any(madsim, test))]
        if (self.planted).is(crate::config::PlantedBug::DedupWindowFour) {
            kept = BATCHES_KEPT - 1;
        }
        while entry.batches.len() > kept {
            entry.batches.pop_front();
        }
        assert!(self.producers.len() <= MAX_PRODUCERS);
        assert_eq!(self.by_activity.len(), self.producers.len());
    }

    /// The entry of `pid` (created at `epoch` if new, evicting the least recent producer when
    /// full), its activity moved to `now_ms`.
    fn touch(&mut self, pid: i64, epoch: i16, now_ms: i64) -> &mut Entry {
        if !self.producers.contains_key(&pid) && self.producers.len() >= MAX_PRODUCERS {
            self.evict_least_recent();
        }
        let entry = self.producers.entry(pid).or_insert_with(|| Entry {
            epoch,
            batches: VecDeque::with_capacity(BATCHES_KEPT + 1),
            last_activity_ms: i64::MIN,
            txn_first_offset: None,
            coordinator_epoch: -1,
        });
        if entry.last_activity_ms != i64::MIN {
            let removed = self.by_activity.remove(&(entry.last_activity_ms, pid));
            assert!(removed, "the activity index covers every producer");
        }
        // A clock that steps back must not make an active producer look idle.
        entry.last_activity_ms = entry.last_activity_ms.max(now_ms);
        self.by_activity.insert((entry.last_activity_ms, pid));
        entry
    }

    /// Checks a data batch against the producer's transaction here (after [`Self::check`]):
    /// a non-transactional batch while a transaction is open is refused (INVALID_TXN_STATE),
    /// and so is a transactional one that would open a transaction without the verification
    /// guard still held for its producer (KIP-890 part 1, when `verification` asks for it).
    pub fn check_transaction(
        &self,
        header: &BatchHeader,
        verification: Verification,
    ) -> Result<(), TxnRefusal> {
        let open = self.has_open_transaction(header.producer_id);
        if header.is_idempotent() && !header.is_transactional() && open {
            return Err(TxnRefusal::InvalidTxnState);
        }
        if let Verification::Guarded(guard) = verification {
            let held = self.verifications.get(&header.producer_id).map(|v| v.0);
            let open_here = self.has_open_transaction_at(header.producer_id, header.producer_epoch);
            if header.is_transactional() && !open_here && (guard.is_none() || guard != held) {
                return Err(TxnRefusal::InvalidTxnState);
            }
        }
        Ok(())
    }

    /// Begins KIP-890 part 1's verification of `producer_id`'s transactional write at
    /// `producer_epoch`: `None` if it has a transaction open here at that epoch (nothing to
    /// verify), else its guard — the one already handed out if a verification is under way (a
    /// retry shares it), else a new one.
    pub fn start_verification(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        now_ms: i64,
    ) -> Option<VerificationGuard> {
        if self.has_open_transaction_at(producer_id, producer_epoch) {
            return None;
        }
        let last = &mut self.last_guard;
        let (guard, _) = self.verifications.entry(producer_id).or_insert_with(|| {
            *last += 1;
            (VerificationGuard(*last), now_ms)
        });
        Some(*guard)
    }

    /// Whether `producer_id` has a transaction open here (a transactional batch without one
    /// needs the coordinator's word first, KIP-890).
    pub fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.txn_first_offset.is_some())
    }

    /// Whether `producer_id` has a transaction open here at `producer_epoch` (Kafka's
    /// `hasOngoingTransaction(producerId, producerEpoch)`): under transactions v2 a write at a
    /// newer epoch belongs to the next transaction, whose coordinator must be asked even while
    /// the previous one's marker has not reached this partition yet.
    pub fn has_open_transaction_at(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.txn_first_offset.is_some() && e.epoch == producer_epoch)
    }

    /// Checks a marker from a leader's coordinator (Kafka's `appendEndTxnMarker` checks).
    /// Transactions v1 (`v2` false, and every marker Admin sends): the marker epoch may equal
    /// the producer's. Transactions v2 (KIP-1228): the coordinator bumped the epoch at the
    /// end, so the marker's must be above the data's — one at the producer's epoch while a
    /// transaction is open here is a late or duplicate marker of the previous transaction and
    /// must not close this one; at that epoch with nothing open it is a retry of a marker
    /// already written (a lost answer, a reloaded coordinator) and is accepted (KAFKA-19999).
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        marker: Marker,
        v2: bool,
    ) -> Result<(), TxnRefusal> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        let late =
            epoch < entry.epoch || (v2 && epoch == entry.epoch && entry.txn_first_offset.is_some());
        if late {
            return Err(TxnRefusal::StaleEpoch {
                current: entry.epoch,
            });
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Err(TxnRefusal::CoordinatorFenced {
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records a marker now in the log at `header.base_offset`: it closes the producer's open
    /// transaction here (an ABORT enters the aborted index), if there is one. Replicas and
    /// replays call it unchecked, as they do [`Self::record_replicated`]. `high_watermark`
    /// retires completions it has passed.
    pub fn record_marker(
        &mut self,
        header: &BatchHeader,
        marker: Marker,
        now_ms: i64,
        high_watermark: i64,
    ) {
        assert!(header.is_control() && header.is_idempotent());
        let pid = header.producer_id;
        let offset = header.base_offset;
        // The transaction is over: a verification begun for it must not open the next one.
        self.verifications.remove(&pid);
        let entry = self.touch(pid, header.producer_epoch, now_ms);
        if header.producer_epoch != entry.epoch {
            // A marker at a bumped epoch (the coordinator fenced the producer) restarts the
            // sequence window, as Kafka's `maybeUpdateProducerEpoch` does.
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = marker.coordinator_epoch;
        if let Some(first) = entry.txn_first_offset.take() {
            self.transactions
                .ended(pid, first, offset, !marker.commit, high_watermark);
        } else {
            self.transactions.retire(high_watermark);
        }
        self.check_transactions();
    }

    /// The last stable offset, given the partition's log start and high watermark.
    pub fn last_stable_offset(&self, log_start: i64, high_watermark: i64) -> i64 {
        #[cfg(any(madsim, test))]
        if (self.planted).is(crate::config::PlantedBug::LsoPastOpenTransaction) {
            return high_watermark;
        }
        self.transactions
            .last_stable_offset(log_start, high_watermark)
    }

    /// The aborted transactions a `read_committed` fetch from `fetch_offset` whose data ends
    /// before `upper_bound` reports.
    pub fn aborted_between(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        self.transactions.aborted_between(fetch_offset, upper_bound)
    }

    /// The log start moved (retention, DeleteRecords): aborted-index entries below it go.
    /// Producer entries stay (KIP-360 expects them kept).
    pub fn log_start_moved(&mut self, log_start: i64) {
        self.transactions.log_start_moved(log_start);
    }

    /// How many transactions are open here.
    pub fn open_transactions(&self) -> usize {
        self.transactions.open_count()
    }

    /// Every open transaction belongs to a remembered producer that names it.
    fn check_transactions(&self) {
        debug_assert!(self.transactions.ongoing().all(|(first, pid)| self
            .producers
            .get(&pid)
            .is_some_and(|e| e.txn_first_offset == Some(first))));
    }

    /// The last offset of every remembered producer's last batch: the log cleaner keeps those
    /// batches (emptied if need be), so that the state rebuilt from the log after compaction
    /// still knows each producer's last sequence.
    pub fn last_batch_offsets(&self) -> BTreeSet<i64> {
        self.producers
            .values()
            .filter_map(|e| e.batches.back().map(|b| b.last_offset))
            .collect()
    }

    /// Records a batch taken from the log or from the leader (replication, rebuilds): no
    /// sequence checks, and a producer epoch that goes back (a zombie's batch the leader
    /// accepted before it was fenced) restarts the window at that epoch, as Kafka's
    /// replication appends do. Producer state is thus a pure function of the log. Returns the
    /// epoch it replaced when the batch's went back: Kafka warns then, and so does the caller.
    #[must_use = "an epoch that went back is worth a warning"]
    pub fn record_replicated(&mut self, header: &BatchHeader, now_ms: i64) -> Option<i16> {
        if !header.is_idempotent() || header.is_control() {
            return None;
        }
        let mut went_back = None;
        if let Some(entry) = self.producers.get_mut(&header.producer_id) {
            if header.producer_epoch < entry.epoch {
                went_back = Some(entry.epoch);
                entry.epoch = header.producer_epoch;
                entry.batches.clear();
            }
        }
        self.record(header, now_ms);
        went_back
    }

    /// Every remembered producer, by id (DescribeProducers).
    pub fn active(&self) -> Vec<ActiveProducer> {
        self.producers
            .iter()
            .map(|(&producer_id, e)| ActiveProducer {
                producer_id,
                epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_sequence),
                last_timestamp: if e.last_activity_ms == i64::MIN {
                    -1
                } else {
                    e.last_activity_ms
                },
                coordinator_epoch: e.coordinator_epoch,
                txn_start_offset: e.txn_first_offset,
            })
            .collect()
    }

    /// How many producers are remembered.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Forgets every producer idle for at least `expiration_ms` (`producer.id.expiration.ms`)
    /// at `now_ms`. Returns how many were forgotten.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        assert!(expiration_ms > 0);
        let cutoff = now_ms.saturating_sub(expiration_ms);
        // A producer with an open transaction here is never forgotten (Kafka's
        // `isProducerExpired`): its transaction's first offset holds the LSO.
        let idle: Vec<i64> = self
            .by_activity
            .range(..(cutoff.saturating_add(1), i64::MIN))
            .map(|&(_, pid)| pid)
            .filter(|pid| !self.has_open_transaction(*pid))
            .collect();
        let expired = idle.len();
        // Verifications never completed (Kafka drops them with the same expiration).
        self.verifications
            .retain(|_, &mut (_, started)| started > cutoff);
        for pid in idle {
            let entry = self
                .producers
                .remove(&pid)
                .expect("the activity index names only known producers");
            assert!(self.by_activity.remove(&(entry.last_activity_ms, pid)));
        }
        assert_eq!(self.by_activity.len(), self.producers.len());
        expired
    }

    fn evict_least_recent(&mut self) {
        // The least recent producer without an open transaction (one with an open transaction
        // holds the LSO and must stay); if every one has one, the least recent goes anyway.
        let victim = self
            .by_activity
            .iter()
            .find(|(_, pid)| !self.has_open_transaction(*pid))
            .or_else(|| self.by_activity.first())
            .copied()
            .expect("a full producer table is not empty");
        self.by_activity.remove(&victim);
        let entry = self.producers.remove(&victim.1).expect("indexed");
        if let Some(first) = entry.txn_first_offset {
            self.transactions.forget_open(first);
        }
    }

    /// Rebuilds the derived activity index after deserialising, and applies the count bound
    /// (a snapshot may come from a build with a larger one).
    pub fn reindex(&mut self) {
        self.by_activity = self
            .producers
            .iter()
            .map(|(&pid, e)| (e.last_activity_ms, pid))
            .collect();
        self.transactions.reindex(
            self.producers
                .iter()
                .filter_map(|(&pid, e)| e.txn_first_offset.map(|f| (pid, f))),
        );
        while self.producers.len() > MAX_PRODUCERS {
            self.evict_least_recent();
        }
        assert_eq!(self.by_activity.len(), self.producers.len());
        self.check_transactions();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, count: i32, base_offset: i64) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 100,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: count,
        }
    }

    #[test]
    fn sequences_duplicates_and_gaps() {
        let mut s = ProducerStates::default();
        assert_eq!(s.check(&header(7, 0, 0, 3, 0)), SequenceCheck::Append);
        s.record(&header(7, 0, 0, 3, 0), 0);
        assert_eq!(s.check(&header(7, 0, 3, 2, 0)), SequenceCheck::Append);
        s.record(&header(7, 0, 3, 2, 3), 0);
        match s.check(&header(7, 0, 0, 3, 99)) {
            SequenceCheck::Duplicate(meta) => assert_eq!(meta.first_offset, 0),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            s.check(&header(7, 0, 6, 1, 0)),
            SequenceCheck::OutOfOrder {
                expected: 5,
                found: 6
            }
        );
        assert_eq!(s.check(&header(7, 0, 5, 1, 0)), SequenceCheck::Append);
    }

    #[test]
    fn epochs() {
        let mut s = ProducerStates::default();
        s.record(&header(1, 3, 0, 1, 0), 0);
        assert_eq!(
            s.check(&header(1, 2, 1, 1, 0)),
            SequenceCheck::StaleEpoch { current: 3 }
        );
        assert_eq!(s.check(&header(1, 4, 0, 1, 0)), SequenceCheck::Append);
        assert!(matches!(
            s.check(&header(1, 4, 1, 1, 0)),
            SequenceCheck::OutOfOrder { .. }
        ));
    }

    #[test]
    fn keeps_only_five_batches() {
        let mut s = ProducerStates::default();
        for i in 0..10 {
            s.record(&header(1, 0, i, 1, i as i64), 0);
        }
        assert!(matches!(
            s.check(&header(1, 0, 4, 1, 0)),
            SequenceCheck::OutOfOrder { .. }
        ));
        assert!(matches!(
            s.check(&header(1, 0, 5, 1, 0)),
            SequenceCheck::Duplicate(_)
        ));
    }

    #[test]
    fn idle_producers_expire() {
        let mut s = ProducerStates::default();
        s.record(&header(1, 0, 0, 1, 0), 1_000);
        s.record(&header(2, 0, 0, 1, 1), 5_000);
        s.record(&header(1, 0, 1, 1, 2), 9_000);
        // Producer 2 last wrote at 5 000: idle for 10 000 ms at 15 000; producer 1 is not.
        assert_eq!(s.expire(14_999, 10_000), 0);
        assert_eq!(s.expire(15_000, 10_000), 1);
        assert_eq!(s.len(), 1);
        // A forgotten producer is a new one: any sequence is accepted again.
        assert_eq!(s.check(&header(2, 0, 7, 1, 0)), SequenceCheck::Append);
        assert!(matches!(
            s.check(&header(1, 0, 2, 1, 0)),
            SequenceCheck::Append
        ));
        assert!(matches!(
            s.check(&header(1, 0, 1, 1, 0)),
            SequenceCheck::Duplicate(_)
        ));
        // A clock stepping back does not make producer 1 look idle.
        s.record(&header(1, 0, 2, 1, 3), 100);
        assert_eq!(s.expire(18_999, 10_000), 0);
        assert_eq!(s.expire(19_000, 10_000), 1);
        assert!(s.is_empty());
    }

    #[test]
    fn the_least_recent_producer_goes_first_when_full() {
        let mut s = ProducerStates::default();
        for pid in 0..MAX_PRODUCERS as i64 {
            s.record(&header(pid, 0, 0, 1, pid), pid);
        }
        // Producer 0 writes again, so producer 1 is now the least recently active.
        s.record(&header(0, 0, 1, 1, 0), MAX_PRODUCERS as i64);
        s.record(
            &header(MAX_PRODUCERS as i64 + 5, 0, 0, 1, 0),
            MAX_PRODUCERS as i64,
        );
        assert_eq!(s.len(), MAX_PRODUCERS);
        assert!(matches!(
            s.check(&header(0, 0, 1, 1, 0)),
            SequenceCheck::Duplicate(_)
        ));
        assert!(matches!(
            s.check(&header(2, 0, 0, 1, 0)),
            SequenceCheck::Duplicate(_)
        ));
        assert_eq!(s.check(&header(1, 0, 5, 1, 0)), SequenceCheck::Append);
    }

    #[test]
    fn snapshot_round_trip_rebuilds_the_index() {
        let mut s = ProducerStates::default();
        s.record(&header(1, 0, 0, 1, 0), 10);
        s.record(&header(2, 0, 0, 1, 1), 20);
        let json = serde_json::to_vec(&s).unwrap();
        let mut back: ProducerStates = serde_json::from_slice(&json).unwrap();
        back.reindex();
        assert_eq!(back, s);
        assert_eq!(back.expire(30, 15), 1);
        // A snapshot written before activity was tracked loads with activity 0.
        let old = br#"{"producers":{"7":{"epoch":0,"batches":[]}}}"#;
        let mut old: ProducerStates = serde_json::from_slice(old).unwrap();
        old.reindex();
        assert_eq!(old.len(), 1);
        assert_eq!(old.expire(1, 1), 1);
    }

    #[test]
    fn replicated_batches_skip_the_checks() {
        let mut s = ProducerStates::default();
        assert_eq!(s.record_replicated(&header(1, 3, 0, 2, 0), 0), None);
        // A gap and an older epoch are the leader's business: both are taken as they come.
        assert_eq!(s.record_replicated(&header(1, 3, 9, 1, 2), 0), None);
        assert!(
            matches!(s.check(&header(1, 3, 9, 1, 7)), SequenceCheck::Duplicate(m) if m.first_offset == 2)
        );
        assert_eq!(s.record_replicated(&header(1, 2, 4, 1, 3), 0), Some(3));
        assert!(
            matches!(s.check(&header(1, 2, 4, 1, 7)), SequenceCheck::Duplicate(m) if m.first_offset == 3)
        );
        assert_eq!(s.check(&header(1, 2, 5, 1, 7)), SequenceCheck::Append);
    }

    #[test]
    fn a_producer_with_an_open_transaction_never_expires() {
        let mut s = ProducerStates::default();
        let mut txn = header(1, 0, 0, 1, 0);
        txn.attributes = 0x10;
        s.record(&txn, 1_000);
        s.record(&header(2, 0, 0, 1, 1), 1_000);
        assert_eq!(s.expire(100_000, 10_000), 1);
        assert_eq!((s.len(), s.open_transactions()), (1, 1));
        assert_eq!(s.last_stable_offset(0, 5), 0);
        let mut marker = header(1, 0, -1, 1, 2);
        marker.attributes = 0x30;
        let m = Marker {
            commit: true,
            coordinator_epoch: 0,
        };
        s.record_marker(&marker, m, 2_000, 3);
        assert_eq!(s.last_stable_offset(0, 3), 3);
        assert_eq!(s.expire(100_000, 10_000), 1);
        assert!(s.is_empty());
    }

    #[test]
    fn a_verification_never_completed_expires_with_idle_producers() {
        let mut s = ProducerStates::default();
        let mut txn = header(1, 0, 0, 1, 0);
        txn.attributes = 0x10;
        let g = s.start_verification(1, 0, 1_000).unwrap();
        assert_eq!(
            s.check_transaction(&txn, Verification::Guarded(Some(g))),
            Ok(())
        );
        assert_eq!(s.expire(10_999, 10_000), 0);
        assert_eq!(
            s.check_transaction(&txn, Verification::Guarded(Some(g))),
            Ok(())
        );
        s.expire(11_000, 10_000);
        assert_eq!(
            s.check_transaction(&txn, Verification::Guarded(Some(g))),
            Err(TxnRefusal::InvalidTxnState)
        );
        // A new one is a new guard.
        assert_ne!(s.start_verification(1, 0, 11_000), Some(g));
    }

    #[test]
    fn sequence_wraps() {
        let mut s = ProducerStates::default();
        s.record(&header(1, 0, i32::MAX - 1, 2, 0), 0);
        assert_eq!(s.check(&header(1, 0, 0, 1, 0)), SequenceCheck::Append);
    }
}
