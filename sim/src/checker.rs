//! Turns a history and the final read into Jepsen-style anomaly reports.
//!
//! - **lost**: acknowledged, yet absent from the final read of every partition.
//! - **duplicate**: one value stored at two offsets.
//! - **inconsistent**: one offset seen holding two values (acknowledgements and reads combined).
//! - **monotonic**: a consumer read offsets out of order or skipped some, with no reset between.
//! - **corrupt**: a client received a batch failing its CRC, or read a value no producer wrote.
//! - **liveness**: after healing, a produce and a fetch did not succeed within the bound.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{Entry, Event};
use crate::scenario::Check;

/// What the final read found: for each partition, (offset, value) in offset order.
pub type FinalRead = BTreeMap<i32, Vec<(i64, String)>>;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub invoked: usize,
    pub acked: usize,
    pub failed: usize,
    pub reads: usize,
    /// Values acknowledged but missing at the end.
    pub lost: Vec<String>,
    /// Values stored at more than one offset.
    pub duplicated: Vec<String>,
    /// (partition, offset, values seen there).
    pub inconsistent: Vec<(i32, i64, Vec<String>)>,
    /// Human-readable descriptions of ordering violations.
    pub nonmonotonic: Vec<String>,
    pub corrupt: Vec<String>,
    pub liveness: Option<String>,
}

/// Bound on how many examples of one anomaly are kept for the report.
const EXAMPLES: usize = 20;

impl Findings {
    /// The anomaly classes that were checked and found.
    pub fn violations(&self, checks: &[Check]) -> Vec<String> {
        let mut out = Vec::new();
        let mut add = |check: Check, count: usize, what: &str| {
            if checks.contains(&check) && count > 0 {
                out.push(format!("{count} {what}"));
            }
        };
        add(Check::Lost, self.lost.len(), "lost acknowledged writes");
        add(Check::Duplicate, self.duplicated.len(), "duplicated values");
        add(
            Check::Inconsistent,
            self.inconsistent.len(),
            "inconsistent offsets",
        );
        add(
            Check::Monotonic,
            self.nonmonotonic.len(),
            "non-monotonic or skipping reads",
        );
        add(
            Check::Corrupt,
            self.corrupt.len(),
            "corrupt or phantom reads",
        );
        if checks.contains(&Check::Liveness) {
            if let Some(why) = &self.liveness {
                out.push(format!("liveness: {why}"));
            }
        }
        out
    }
}

pub fn check(entries: &[Entry], final_read: &FinalRead, liveness: Option<String>) -> Findings {
    let mut findings = Findings {
        liveness,
        ..Findings::default()
    };
    // Everything borrows from the history and the final read: a run has tens of thousands of
    // values, and cloning each into several maps would dominate the checker's time.
    let mut ops: BTreeMap<u64, (i32, &[String])> = BTreeMap::new();
    let mut written: BTreeSet<&str> = BTreeSet::new();
    // (partition, offset) → values observed there.
    let mut observed: BTreeMap<(i32, i64), BTreeSet<&str>> = BTreeMap::new();
    let mut acked_values: Vec<&str> = Vec::new();
    // (consumer, partition) → last offset read in the current session.
    let mut positions: BTreeMap<(u32, i32), i64> = BTreeMap::new();
    for entry in entries {
        match &entry.event {
            Event::Invoke {
                op,
                partition,
                values,
            } => {
                findings.invoked += 1;
                written.extend(values.iter().map(|v| v.as_str()));
                ops.insert(*op, (*partition, values.as_slice()));
            }
            Event::Ack { op, offset } => {
                findings.acked += 1;
                if let Some((partition, values)) = ops.get(op) {
                    for (i, v) in values.iter().enumerate() {
                        observed
                            .entry((*partition, offset + i as i64))
                            .or_default()
                            .insert(v.as_str());
                        acked_values.push(v.as_str());
                    }
                }
            }
            Event::Fail { .. } => findings.failed += 1,
            Event::Read {
                consumer,
                partition,
                offset,
                value,
            } => {
                findings.reads += 1;
                // A value is always invoked before anyone can read it.
                if !written.contains(value.as_str()) && findings.corrupt.len() < EXAMPLES {
                    findings.corrupt.push(format!(
                        "consumer {consumer} partition {partition} offset {offset}: phantom value {value:?}"
                    ));
                }
                observed
                    .entry((*partition, *offset))
                    .or_default()
                    .insert(value.as_str());
                if let Some(prev) = positions.insert((*consumer, *partition), *offset) {
                    if *offset != prev + 1 && findings.nonmonotonic.len() < EXAMPLES {
                        findings.nonmonotonic.push(format!(
                            "consumer {consumer} partition {partition}: read offset {offset} after {prev}"
                        ));
                    }
                }
            }
            Event::Reset {
                consumer,
                partition,
                to,
                ..
            } => {
                positions.insert((*consumer, *partition), to - 1);
            }
            Event::CorruptRead {
                consumer,
                partition,
                offset,
                error,
            } => {
                if findings.corrupt.len() < EXAMPLES {
                    findings.corrupt.push(format!(
                        "consumer {consumer} partition {partition} offset {offset}: {error}"
                    ));
                }
            }
            Event::Fault(_) | Event::Heal(_) | Event::Note(_) => {}
        }
    }
    let mut stored: BTreeMap<&str, usize> = BTreeMap::new();
    for (partition, records) in final_read {
        for (offset, value) in records {
            observed
                .entry((*partition, *offset))
                .or_default()
                .insert(value.as_str());
            *stored.entry(value.as_str()).or_default() += 1;
            if !written.contains(value.as_str()) && findings.corrupt.len() < EXAMPLES {
                findings.corrupt.push(format!(
                    "partition {partition} offset {offset}: phantom value {value:?}"
                ));
            }
        }
    }
    findings.lost = acked_values
        .iter()
        .filter(|v| !stored.contains_key(*v))
        .map(|v| v.to_string())
        .collect();
    findings.duplicated = stored
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(v, _)| v.to_string())
        .collect();
    findings.inconsistent = observed
        .into_iter()
        .filter(|(_, values)| values.len() > 1)
        .map(|((p, o), values)| (p, o, values.into_iter().map(str::to_string).collect()))
        .collect();
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(event: Event) -> Entry {
        Entry { at_ms: 0, event }
    }

    fn read(consumer: u32, partition: i32, offset: i64, value: &str) -> Entry {
        at(Event::Read {
            consumer,
            partition,
            offset,
            value: value.into(),
        })
    }

    fn invoke(op: u64, values: &[&str]) -> Entry {
        at(Event::Invoke {
            op,
            partition: 0,
            values: values.iter().map(|v| v.to_string()).collect(),
        })
    }

    #[test]
    fn clean_history_has_no_findings() {
        let entries = vec![
            invoke(1, &["a", "b"]),
            at(Event::Ack { op: 1, offset: 0 }),
            read(0, 0, 0, "a"),
            read(0, 0, 1, "b"),
        ];
        let final_read = FinalRead::from([(0, vec![(0, "a".into()), (1, "b".into())])]);
        let f = check(&entries, &final_read, None);
        assert!(
            f.violations(&crate::scenario::Check::all()).is_empty(),
            "{f:?}"
        );
        assert_eq!((f.invoked, f.acked, f.reads), (1, 1, 2));
    }

    #[test]
    fn finds_each_anomaly() {
        let entries = vec![
            invoke(1, &["a", "b"]),
            at(Event::Ack { op: 1, offset: 0 }),
            invoke(2, &["c"]),
            at(Event::Ack { op: 2, offset: 2 }),
            read(0, 0, 0, "a"),
            read(0, 0, 2, "x"),
        ];
        // "b" lost, "c" stored twice, offset 2 seen as "x" and "c", "x" never written.
        let final_read =
            FinalRead::from([(0, vec![(0, "a".into()), (1, "c".into()), (2, "c".into())])]);
        let f = check(&entries, &final_read, Some("no produce after heal".into()));
        assert_eq!(f.lost, vec!["b".to_string()]);
        assert_eq!(f.duplicated, vec!["c".to_string()]);
        assert!(f.inconsistent.iter().any(|(_, o, _)| *o == 2));
        assert!(f.inconsistent.iter().any(|(_, o, _)| *o == 1));
        assert_eq!(f.nonmonotonic.len(), 1);
        assert!(!f.corrupt.is_empty());
        assert_eq!(f.violations(&crate::scenario::Check::all()).len(), 6);
        assert!(f.violations(&[]).is_empty());
    }

    #[test]
    fn a_reset_starts_a_new_read_session() {
        let entries = vec![
            read(0, 0, 5, "a"),
            at(Event::Reset {
                consumer: 0,
                partition: 0,
                from: 6,
                to: 0,
            }),
            read(0, 0, 0, "b"),
        ];
        let f = check(&entries, &FinalRead::new(), None);
        assert!(f.nonmonotonic.is_empty());
    }
}
