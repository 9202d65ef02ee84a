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

use crate::log::batch::BatchHeader;

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
}

fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

impl ProducerStates {
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
        let pid = header.producer_id;
        if !self.producers.contains_key(&pid) && self.producers.len() >= MAX_PRODUCERS {
            self.evict_least_recent();
        }
        let entry = self.producers.entry(pid).or_insert_with(|| Entry {
            epoch: header.producer_epoch,
            batches: VecDeque::with_capacity(BATCHES_KEPT + 1),
            last_activity_ms: i64::MIN,
        });
        if entry.last_activity_ms != i64::MIN {
            let removed = self.by_activity.remove(&(entry.last_activity_ms, pid));
            assert!(removed, "the activity index covers every producer");
        }
        // A clock that steps back must not make an active producer look idle.
        entry.last_activity_ms = entry.last_activity_ms.max(now_ms);
        self.by_activity.insert((entry.last_activity_ms, pid));
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
        #[cfg(madsim)]
        if crate::config::planted::active(crate::config::PlantedBug::DedupWindowFour) {
            kept = BATCHES_KEPT - 1;
        }
        while entry.batches.len() > kept {
            entry.batches.pop_front();
        }
        assert!(self.producers.len() <= MAX_PRODUCERS);
        assert_eq!(self.by_activity.len(), self.producers.len());
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
        if !header.is_idempotent() {
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
        let mut expired = 0;
        // Bounded: each step removes one of at most MAX_PRODUCERS entries.
        while let Some(&(last, pid)) = self.by_activity.first() {
            if last > cutoff {
                break;
            }
            self.by_activity.pop_first();
            let removed = self.producers.remove(&pid);
            assert!(
                removed.is_some(),
                "the activity index names only known producers"
            );
            expired += 1;
        }
        assert_eq!(self.by_activity.len(), self.producers.len());
        expired
    }

    fn evict_least_recent(&mut self) {
        let (_, pid) = self
            .by_activity
            .pop_first()
            .expect("a full producer table is not empty");
        assert!(self.producers.remove(&pid).is_some());
    }

    /// Rebuilds the derived activity index after deserialising, and applies the count bound
    /// (a snapshot may come from a build with a larger one).
    pub fn reindex(&mut self) {
        self.by_activity = self
            .producers
            .iter()
            .map(|(&pid, e)| (e.last_activity_ms, pid))
            .collect();
        while self.producers.len() > MAX_PRODUCERS {
            self.evict_least_recent();
        }
        assert_eq!(self.by_activity.len(), self.producers.len());
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
    fn sequence_wraps() {
        let mut s = ProducerStates::default();
        s.record(&header(1, 0, i32::MAX - 1, 2, 0), 0);
        assert_eq!(s.check(&header(1, 0, 0, 1, 0)), SequenceCheck::Append);
    }
}
