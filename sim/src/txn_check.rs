//! The transactional workload's checker (`txn_workload.rs` records the events). Ground truth
//! is the history: what each transaction sent where, how its EndTxn was answered, and what
//! `read_committed` readers returned, live and once everything settled. Judged (the issue's
//! I1, I3, I4 and I5 in `transactions.md` §5.1):
//! - aborted read: a value of a transaction whose abort was acknowledged, or one that the final
//!   read_committed read does not hold, was returned by a live read_committed read (it read
//!   past the last stable offset, or read what was later aborted);
//! - torn: the final read holds some but not all of one transaction's values;
//! - lost: a transaction whose EndTxn(commit) was acknowledged is missing from the final read;
//! - duplicated: a value at two offsets, or an aborted transaction's value in the final read;
//! - unsettled: a partition whose last stable offset never reached its high watermark after
//!   healing (a transaction left hanging).

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{Entry, Event};

/// One step of the transactional workload, serialized for history files by `kind`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TxnEvent {
    /// A producer got (producer id, epoch) for its transactional id.
    Init {
        producer: u32,
        producer_id: i64,
        epoch: i16,
    },
    /// Transaction `txn` of `producer` sent `value` to `partition` (acknowledged or not).
    Send {
        producer: u32,
        txn: u64,
        partition: i32,
        value: String,
    },
    /// Its EndTxn was acknowledged: committed or aborted.
    Ended {
        producer: u32,
        txn: u64,
        commit: bool,
    },
    /// The producer gave up on the transaction (outcome unknown to it: the coordinator aborts
    /// it when the producer re-initializes, unless its commit was already prepared).
    Abandoned {
        producer: u32,
        txn: u64,
        error: String,
    },
    /// A live read_committed consumer returned `value` at `offset`.
    Read {
        partition: i32,
        offset: i64,
        value: String,
    },
    /// The final read_committed read (after healing and the drain) of one partition.
    Final {
        partition: i32,
        values: Vec<(i64, String)>,
        /// It reached the high watermark with the last stable offset there.
        settled: bool,
        last_stable_offset: i64,
        high_watermark: i64,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnFindings {
    pub transactions: usize,
    pub committed: usize,
    pub aborted: usize,
    pub reads: usize,
    pub aborted_reads: Vec<String>,
    pub torn: Vec<String>,
    pub lost: Vec<String>,
    pub duplicated: Vec<String>,
    pub unsettled: Vec<String>,
    /// When each kind was first evident (ms), for the shrinker and the report.
    pub first_ms: Option<u64>,
}

impl TxnFindings {
    pub fn count(&self) -> usize {
        self.aborted_reads.len()
            + self.torn.len()
            + self.lost.len()
            + self.duplicated.len()
            + self.unsettled.len()
    }
}

const EXAMPLES: usize = 20;

/// A partition's final read: (offset, value).
type Stored = [(i64, String)];

/// Notes that an anomaly was evident at `at` ms.
fn evident(f: &mut TxnFindings, at: u64) {
    f.first_ms = Some(f.first_ms.map_or(at, |m| m.min(at)));
}

fn push(list: &mut Vec<String>, what: String) {
    if list.len() < EXAMPLES {
        list.push(what);
    }
}

/// The transaction a value belongs to: values are `x{producer}-{txn}-p{partition}`.
pub fn value(producer: u32, txn: u64, partition: i32) -> String {
    format!("x{producer}-{txn}-p{partition}")
}

#[derive(Default)]
struct Txn {
    values: BTreeSet<String>,
    /// `Some(true)`: commit acknowledged, `Some(false)`: abort acknowledged.
    ended: Option<bool>,
}

pub fn check(entries: &[Entry]) -> TxnFindings {
    let mut f = TxnFindings::default();
    let mut txns: BTreeMap<(u32, u64), Txn> = BTreeMap::new();
    let mut owner: BTreeMap<String, (u32, u64)> = BTreeMap::new();
    let mut reads: Vec<(u64, i32, i64, String)> = Vec::new();
    let mut finals: BTreeMap<i32, (u64, &Stored)> = BTreeMap::new();
    for e in entries {
        let Event::Txn(t) = &e.event else { continue };
        match t {
            TxnEvent::Init { .. } => {}
            TxnEvent::Send {
                producer,
                txn,
                value,
                ..
            } => {
                txns.entry((*producer, *txn))
                    .or_default()
                    .values
                    .insert(value.clone());
                owner.insert(value.clone(), (*producer, *txn));
            }
            TxnEvent::Ended {
                producer,
                txn,
                commit,
            } => txns.entry((*producer, *txn)).or_default().ended = Some(*commit),
            TxnEvent::Abandoned { .. } => {}
            TxnEvent::Read {
                partition,
                offset,
                value,
            } => reads.push((e.at_ms, *partition, *offset, value.clone())),
            TxnEvent::Final {
                partition,
                values,
                settled,
                last_stable_offset,
                high_watermark,
            } => {
                finals.insert(*partition, (e.at_ms, values));
                if !settled {
                    evident(&mut f, e.at_ms);
                    push(
                        &mut f.unsettled,
                        format!(
                            "partition {partition}: last stable offset {last_stable_offset} \
                             below high watermark {high_watermark} after healing"
                        ),
                    );
                }
            }
        }
    }
    f.transactions = txns.len();
    f.committed = txns.values().filter(|t| t.ended == Some(true)).count();
    f.aborted = txns.values().filter(|t| t.ended == Some(false)).count();
    f.reads = reads.len();
    if finals.is_empty() {
        return f; // The run ended before the final read: only live reads can be judged.
    }
    let end = finals.values().map(|(at, _)| *at).max().unwrap_or(0);
    // value → offsets in the final read.
    let mut stored: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
    for (&partition, (_, values)) in &finals {
        for (offset, v) in values.iter() {
            stored.entry(v).or_default().push((partition, *offset));
        }
    }
    for (v, at) in &stored {
        if at.len() > 1 {
            evident(&mut f, end);
            push(&mut f.duplicated, format!("{v} at {at:?}"));
        }
        match owner.get(*v).and_then(|k| txns.get(k)) {
            Some(t) if t.ended == Some(false) => {
                evident(&mut f, end);
                push(
                    &mut f.duplicated,
                    format!("{v} of an aborted transaction is stored"),
                );
            }
            Some(_) => {}
            None => {
                evident(&mut f, end);
                push(&mut f.duplicated, format!("{v}: a value nobody sent"));
            }
        }
    }
    for ((producer, txn), t) in &txns {
        let visible = t
            .values
            .iter()
            .filter(|v| stored.contains_key(v.as_str()))
            .count();
        if visible > 0 && visible < t.values.len() {
            evident(&mut f, end);
            push(
                &mut f.torn,
                format!(
                    "producer {producer} transaction {txn}: {visible} of {} values visible",
                    t.values.len()
                ),
            );
        }
        if t.ended == Some(true) && visible < t.values.len() {
            evident(&mut f, end);
            push(
                &mut f.lost,
                format!(
                    "producer {producer} transaction {txn}: commit acknowledged, {} of {} \
                     values missing",
                    t.values.len() - visible,
                    t.values.len()
                ),
            );
        }
    }
    for (at, partition, offset, v) in reads {
        let aborted = owner
            .get(&v)
            .and_then(|k| txns.get(k))
            .is_some_and(|t| t.ended == Some(false));
        let kept = stored
            .get(v.as_str())
            .is_some_and(|s| s.contains(&(partition, offset)));
        if aborted || !kept {
            evident(&mut f, at);
            let why = if aborted {
                "its transaction was aborted"
            } else {
                "the final read does not hold it there"
            };
            push(
                &mut f.aborted_reads,
                format!("{v} read at {partition}/{offset}: {why}"),
            );
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Entry;

    fn at(at_ms: u64, e: TxnEvent) -> Entry {
        Entry {
            at_ms,
            event: Event::Txn(e),
        }
    }

    fn send(txn: u64, partition: i32) -> TxnEvent {
        TxnEvent::Send {
            producer: 0,
            txn,
            partition,
            value: value(0, txn, partition),
        }
    }

    fn ended(txn: u64, commit: bool) -> TxnEvent {
        TxnEvent::Ended {
            producer: 0,
            txn,
            commit,
        }
    }

    fn last(partition: i32, values: &[(i64, u64)]) -> TxnEvent {
        TxnEvent::Final {
            partition,
            values: values
                .iter()
                .map(|&(o, txn)| (o, value(0, txn, partition)))
                .collect(),
            settled: true,
            last_stable_offset: 10,
            high_watermark: 10,
        }
    }

    /// Transaction 1 committed on partitions 0 and 1, transaction 2 aborted on partition 0.
    fn base() -> Vec<Entry> {
        vec![
            at(1, send(1, 0)),
            at(2, send(1, 1)),
            at(3, ended(1, true)),
            at(4, send(2, 0)),
            at(5, ended(2, false)),
        ]
    }

    #[test]
    fn a_clean_history_passes() {
        let mut h = base();
        h.push(at(
            6,
            TxnEvent::Read {
                partition: 0,
                offset: 0,
                value: value(0, 1, 0),
            },
        ));
        h.push(at(10, last(0, &[(0, 1)])));
        h.push(at(11, last(1, &[(0, 1)])));
        let f = check(&h);
        assert_eq!(f.count(), 0, "{f:?}");
        assert_eq!(
            (f.transactions, f.committed, f.aborted, f.reads),
            (2, 1, 1, 1)
        );
    }

    #[test]
    fn each_anomaly_is_caught() {
        // An aborted value read live and stored; the committed transaction torn and lost.
        let mut h = base();
        h.push(at(
            6,
            TxnEvent::Read {
                partition: 0,
                offset: 2,
                value: value(0, 2, 0),
            },
        ));
        h.push(at(10, last(0, &[(0, 1), (2, 2)])));
        h.push(at(11, last(1, &[])));
        let f = check(&h);
        assert_eq!(f.aborted_reads.len(), 1, "{f:?}");
        assert_eq!(f.torn.len(), 1);
        assert_eq!(f.lost.len(), 1);
        assert_eq!(f.duplicated.len(), 1, "the aborted value is stored");
        assert_eq!(f.first_ms, Some(6));
        // A read the final read does not hold there; a partition left unsettled.
        let mut h = base();
        h.push(at(
            6,
            TxnEvent::Read {
                partition: 1,
                offset: 5,
                value: value(0, 1, 1),
            },
        ));
        h.push(at(10, last(0, &[(0, 1)])));
        h.push(at(
            11,
            TxnEvent::Final {
                partition: 1,
                values: vec![(0, value(0, 1, 1))],
                settled: false,
                last_stable_offset: 1,
                high_watermark: 3,
            },
        ));
        let f = check(&h);
        assert_eq!((f.aborted_reads.len(), f.unsettled.len()), (1, 1), "{f:?}");
        assert_eq!(f.count(), 2);
    }
}
