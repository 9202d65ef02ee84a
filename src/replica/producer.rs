//! Idempotent-producer state of one partition: for each producer id, its epoch and the last
//! five batches it wrote (Kafka keeps five, matching `max.in.flight.requests.per.connection`).
//! A retried batch is recognised and answered with its original offset; a gap in sequence
//! numbers is refused. The state is rebuilt from batch headers when the log is opened.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::log::batch::BatchHeader;

/// How many recent batches per producer are remembered for duplicate detection.
pub const BATCHES_KEPT: usize = 5;

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

    /// Records a batch that is now in the log (its header carries its real offsets).
    pub fn record(&mut self, header: &BatchHeader) {
        if !header.is_idempotent() {
            return;
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| Entry {
                epoch: header.producer_epoch,
                batches: VecDeque::with_capacity(BATCHES_KEPT + 1),
            });
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
        s.record(&header(7, 0, 0, 3, 0));
        assert_eq!(s.check(&header(7, 0, 3, 2, 0)), SequenceCheck::Append);
        s.record(&header(7, 0, 3, 2, 3));
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
        s.record(&header(1, 3, 0, 1, 0));
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
            s.record(&header(1, 0, i, 1, i as i64));
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
    fn sequence_wraps() {
        let mut s = ProducerStates::default();
        s.record(&header(1, 0, i32::MAX - 1, 2, 0));
        assert_eq!(s.check(&header(1, 0, 0, 1, 0)), SequenceCheck::Append);
    }
}
