//! Deleted records stay deleted (`deleted`), and deleted records are not lost.
//!
//! The record deleter (`record_deleter`) sends DeleteRecords for a workload partition up to an
//! offset at or below its high watermark. A DeleteRecords answered without error with low
//! watermark `L` promises that every replica that may lead the partition starts at or past `L`:
//! no read that starts after the answer (a consumer's fetch, a group member's, the final read)
//! may return a record below `L`, not after a kill, a power loss or a leader change. A record
//! below `L` returned by such a read is a violation ("deleted records readable again"). A read
//! at or past `L` is judged by the other checks as usual.
//!
//! A read's start is not in the history (its `Read` entries are written when the answer came),
//! but every fetch is bounded by its client's time-out: a read recorded more than that bound
//! after the answer started after it. Reads closer to the answer are not judged.
//!
//! The other half ([`Deletions::excuses`], used by `lost`): an acknowledged record below the
//! offset of any deletion sent for its partition may be absent at the end. A deletion that failed
//! or was never answered may or may not have taken effect, as an unacknowledged write; so its
//! offset excuses absence too, and judges nothing else. Records at or past every deletion's
//! offset are judged in full.

use std::collections::BTreeMap;

use crate::checker::FinalRead;
use crate::group_check::GroupEvent;
use crate::history::{Entry, Event};

/// One step of the record deleter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteEvent {
    /// DeleteRecords for `partition` below `offset` was sent (its first attempt).
    Sent {
        op: u64,
        partition: i32,
        offset: i64,
    },
    /// The leader answered without error, with the partition's low watermark.
    Deleted { op: u64, low_watermark: i64 },
    /// The deleter gave up (the last attempt's error): it may or may not have taken effect.
    Failed { op: u64, error: String },
}

/// The deletions of a history, per partition.
#[derive(Clone, Debug, Default)]
pub struct Deletions {
    /// op → (partition, requested offset).
    sent: BTreeMap<u64, (i32, i64)>,
    /// partition → (answer time, the highest low watermark answered so far), in time order.
    answered: BTreeMap<i32, Vec<(u64, i64)>>,
    /// partition → the highest offset a deletion sent for it may have deleted below.
    may_have_deleted: BTreeMap<i32, i64>,
}

impl Deletions {
    pub fn of(entries: &[Entry]) -> Deletions {
        let mut d = Deletions::default();
        for e in entries {
            if let Event::Delete(event) = &e.event {
                d.record(e.at_ms, event);
            }
        }
        d
    }

    /// Takes one deleter step (entries in history order).
    pub fn record(&mut self, at_ms: u64, event: &DeleteEvent) {
        match event {
            DeleteEvent::Sent {
                op,
                partition,
                offset,
            } => {
                self.sent.insert(*op, (*partition, *offset));
                let below = self.may_have_deleted.entry(*partition).or_insert(*offset);
                *below = (*below).max(*offset);
            }
            DeleteEvent::Deleted { op, low_watermark } => {
                let Some(&(partition, _)) = self.sent.get(op) else {
                    return;
                };
                let list = self.answered.entry(partition).or_default();
                let highest = list
                    .last()
                    .map_or(*low_watermark, |&(_, l)| l.max(*low_watermark));
                list.push((at_ms, highest));
                let below = self.may_have_deleted.entry(partition).or_insert(highest);
                *below = (*below).max(highest);
            }
            DeleteEvent::Failed { .. } => {}
        }
    }

    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    /// Whether an acknowledged record at `offset` of `partition` may be absent because a
    /// deletion (answered or not) removed it.
    pub fn excuses(&self, partition: i32, offset: i64) -> bool {
        self.may_have_deleted
            .get(&partition)
            .is_some_and(|&below| offset < below)
    }

    /// The highest low watermark of `partition` answered before `ms` (strictly), with its
    /// answer's time.
    fn floor_before(&self, partition: i32, ms: u64) -> Option<(i64, u64)> {
        let list = self.answered.get(&partition)?;
        let n = list.partition_point(|&(at, _)| at < ms);
        let &(at, low) = list.get(n.checked_sub(1)?)?;
        Some((low, at))
    }
}

/// Bound on examples kept per kind of reader.
const EXAMPLES: usize = 20;

/// Reads of deleted records: (time of the first evidence, description). `fetch_bound_ms`: the
/// longest a consumer's or group member's fetch may take (its client's time-out). The final
/// read (which starts after every deletion was answered or given up) is judged whole.
pub fn check(
    entries: &[Entry],
    final_read: Option<&FinalRead>,
    fetch_bound_ms: u64,
) -> Vec<(u64, String)> {
    let deletions = Deletions::of(entries);
    let mut out = Vec::new();
    if deletions.answered.is_empty() {
        return out;
    }
    // (reader, partition) → how many reads below the floor, the first one.
    let mut readers: BTreeMap<(String, i32), (usize, u64, String)> = BTreeMap::new();
    for e in entries {
        let (who, partition, offset, value) = match &e.event {
            Event::Read {
                consumer,
                partition,
                offset,
                value,
                ..
            } => (format!("consumer {consumer}"), *partition, *offset, value),
            Event::Group(GroupEvent::ReadServed {
                member,
                partition,
                offset,
                value,
                ..
            }) => (format!("group member {member}"), *partition, *offset, value),
            _ => continue,
        };
        // The fetch began at or after `at_ms - fetch_bound_ms`; a deletion answered before
        // that binds it.
        let Some(began) = e.at_ms.checked_sub(fetch_bound_ms) else {
            continue;
        };
        let Some((low, answered_ms)) = deletions.floor_before(partition, began) else {
            continue;
        };
        if offset >= low {
            continue;
        }
        let entry = readers.entry((who, partition)).or_insert_with(|| {
            let first = format!(
                "offset {offset} ({value:?}) at {} ms, low watermark {low} answered at {answered_ms} ms",
                e.at_ms
            );
            (0, e.at_ms, first)
        });
        entry.0 += 1;
    }
    for ((who, partition), (n, at, first)) in readers.into_iter().take(EXAMPLES) {
        out.push((
            at,
            format!("{who} partition {partition}: {n} deleted records read again, first {first}"),
        ));
    }
    let end_ms = entries.last().map_or(0, |e| e.at_ms);
    for (partition, read) in final_read.into_iter().flatten() {
        let Some((low, answered_ms)) = deletions.floor_before(*partition, u64::MAX) else {
            continue;
        };
        let below: Vec<&(i64, String)> = read.records.iter().filter(|(o, _)| *o < low).collect();
        if let Some((first, value)) = below.first() {
            out.push((
                end_ms,
                format!(
                    "final read partition {partition}: {} deleted records readable again (log start {}), first offset {first} ({value:?}); low watermark {low} answered at {answered_ms} ms",
                    below.len(),
                    read.start
                ),
            ));
        }
    }
    out.sort_by_key(|(at, _)| *at);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::PartitionRead;

    fn at(at_ms: u64, event: Event) -> Entry {
        Entry { at_ms, event }
    }

    fn delete(at_ms: u64, op: u64, partition: i32, offset: i64) -> Entry {
        at(
            at_ms,
            Event::Delete(DeleteEvent::Sent {
                op,
                partition,
                offset,
            }),
        )
    }

    fn deleted(at_ms: u64, op: u64, low_watermark: i64) -> Entry {
        at(
            at_ms,
            Event::Delete(DeleteEvent::Deleted { op, low_watermark }),
        )
    }

    fn read(at_ms: u64, partition: i32, offset: i64) -> Entry {
        at(
            at_ms,
            Event::Read {
                consumer: 0,
                partition,
                offset,
                value: format!("v{offset}"),
                high_watermark: 100,
            },
        )
    }

    fn final_read(partition: i32, start: i64, offsets: std::ops::Range<i64>) -> FinalRead {
        FinalRead::from([(
            partition,
            PartitionRead {
                start,
                stopped_at: None,
                records: offsets.map(|o| (o, format!("v{o}"))).collect(),
            },
        )])
    }

    #[test]
    fn a_final_read_below_an_answered_deletion_is_a_violation() {
        let h = vec![delete(1_000, 1, 0, 5), deleted(1_200, 1, 5)];
        // The log starts at the low watermark: fine.
        assert!(check(&h, Some(&final_read(0, 5, 5..10)), 5_000).is_empty());
        // Another partition's records below 5 are not judged.
        assert!(check(&h, Some(&final_read(1, 0, 0..10)), 5_000).is_empty());
        // The records came back (a new leader that never adopted the log start).
        let v = check(&h, Some(&final_read(0, 0, 0..10)), 5_000);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].1.contains("5 deleted records readable again"), "{v:?}");
        assert!(v[0].1.contains("first offset 0"), "{v:?}");
    }

    #[test]
    fn a_failed_or_unanswered_deletion_judges_no_read() {
        let h = vec![
            delete(1_000, 1, 0, 5),
            at(
                7_000,
                Event::Delete(DeleteEvent::Failed {
                    op: 1,
                    error: "broker error: REQUEST_TIMED_OUT".into(),
                }),
            ),
            delete(8_000, 2, 0, 8),
            read(20_000, 0, 3),
        ];
        assert!(check(&h, Some(&final_read(0, 0, 0..10)), 5_000).is_empty());
    }

    #[test]
    fn only_reads_that_began_after_the_answer_are_judged() {
        let h = vec![
            delete(1_000, 1, 0, 5),
            deleted(1_200, 1, 6),
            // Within the fetch bound of the answer: may have been served before it.
            read(6_000, 0, 2),
            // At or past the low watermark: fine.
            read(9_000, 0, 6),
            // Began after the answer, below it: a violation.
            read(9_000, 0, 4),
            read(9_500, 0, 5),
        ];
        let v = check(&h, None, 5_000);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].0, 9_000);
        assert!(
            v[0].1
                .contains("consumer 0 partition 0: 2 deleted records read again"),
            "{v:?}"
        );
        assert!(v[0].1.contains("offset 4"), "{v:?}");
    }

    #[test]
    fn the_floor_is_the_highest_low_watermark_answered_so_far() {
        let h = vec![
            delete(1_000, 1, 0, 7),
            deleted(1_100, 1, 7),
            // A later, lower request answers a lower watermark (a new leader): the first
            // promise still holds.
            delete(2_000, 2, 0, 3),
            deleted(2_100, 2, 3),
        ];
        let v = check(&h, Some(&final_read(0, 3, 3..10)), 5_000);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].1.contains("4 deleted records"), "{v:?}");
    }

    #[test]
    fn any_deletion_sent_excuses_absence_below_its_offset() {
        let h = vec![
            delete(1_000, 1, 0, 5),
            delete(2_000, 2, 1, 3),
            deleted(2_100, 2, 4),
        ];
        let d = Deletions::of(&h);
        // Unanswered: may have happened.
        assert!(d.excuses(0, 4));
        assert!(!d.excuses(0, 5));
        // Answered with a higher low watermark than asked.
        assert!(d.excuses(1, 3));
        assert!(!d.excuses(1, 4));
        assert!(!d.excuses(2, 0));
    }
}
