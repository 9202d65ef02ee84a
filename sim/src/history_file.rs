//! The history as a file: one JSON object a line, so that a run outside the simulator (the
//! real-process fault suite, `jepsen`) hands the simulator's checker the very events a
//! simulated run records. The record-level events only (produce invoked, acknowledged, failed;
//! reads, resets, corrupt reads; faults, heals, notes), then the final read and the liveness
//! verdict; groups, admin changes and partition traces have no line here (yet).
//!
//! `{"at_ms":12,"type":"invoke","op":3,"partition":0,"session":1,"values":["p0-0-0"]}`
//! `{"type":"final","partition":0,"start":0,"stopped_at":null,"records":[[0,"p0-0-0"]]}`
//! `{"type":"liveness","failure":null}`

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::checker::{FinalRead, PartitionRead};
use crate::history::{Entry, Event};

#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Invoke {
        at_ms: u64,
        op: u64,
        partition: i32,
        session: u32,
        values: Vec<String>,
    },
    Ack {
        at_ms: u64,
        op: u64,
        offset: i64,
    },
    Fail {
        at_ms: u64,
        op: u64,
        error: String,
    },
    Read {
        at_ms: u64,
        consumer: u32,
        partition: i32,
        offset: i64,
        value: String,
        high_watermark: i64,
    },
    Reset {
        at_ms: u64,
        consumer: u32,
        partition: i32,
        from: i64,
        to: i64,
    },
    CorruptRead {
        at_ms: u64,
        consumer: u32,
        partition: i32,
        offset: i64,
        error: String,
    },
    Fault {
        at_ms: u64,
        what: String,
    },
    Heal {
        at_ms: u64,
        what: String,
    },
    Note {
        at_ms: u64,
        what: String,
    },
    Final {
        partition: i32,
        start: i64,
        stopped_at: Option<i64>,
        records: Vec<(i64, String)>,
    },
    Liveness {
        failure: Option<String>,
    },
}

/// What a history file holds: the events, the final read and the liveness verdict.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryFile {
    pub entries: Vec<Entry>,
    pub final_read: FinalRead,
    pub liveness: Option<String>,
}

fn line_of(entry: &Entry) -> Option<Line> {
    let at_ms = entry.at_ms;
    Some(match entry.event.clone() {
        Event::Invoke {
            op,
            partition,
            session,
            values,
        } => Line::Invoke {
            at_ms,
            op,
            partition,
            session,
            values,
        },
        Event::Ack { op, offset } => Line::Ack { at_ms, op, offset },
        Event::Fail { op, error } => Line::Fail { at_ms, op, error },
        Event::Read {
            consumer,
            partition,
            offset,
            value,
            high_watermark,
        } => Line::Read {
            at_ms,
            consumer,
            partition,
            offset,
            value,
            high_watermark,
        },
        Event::Reset {
            consumer,
            partition,
            from,
            to,
        } => Line::Reset {
            at_ms,
            consumer,
            partition,
            from,
            to,
        },
        Event::CorruptRead {
            consumer,
            partition,
            offset,
            error,
        } => Line::CorruptRead {
            at_ms,
            consumer,
            partition,
            offset,
            error,
        },
        Event::Fault(what) => Line::Fault { at_ms, what },
        Event::Heal(what) => Line::Heal { at_ms, what },
        Event::Note(what) => Line::Note { at_ms, what },
        _ => return None,
    })
}

fn entry_of(line: Line) -> Option<Entry> {
    let (at_ms, event) = match line {
        Line::Invoke {
            at_ms,
            op,
            partition,
            session,
            values,
        } => (
            at_ms,
            Event::Invoke {
                op,
                partition,
                session,
                values,
            },
        ),
        Line::Ack { at_ms, op, offset } => (at_ms, Event::Ack { op, offset }),
        Line::Fail { at_ms, op, error } => (at_ms, Event::Fail { op, error }),
        Line::Read {
            at_ms,
            consumer,
            partition,
            offset,
            value,
            high_watermark,
        } => (
            at_ms,
            Event::Read {
                consumer,
                partition,
                offset,
                value,
                high_watermark,
            },
        ),
        Line::Reset {
            at_ms,
            consumer,
            partition,
            from,
            to,
        } => (
            at_ms,
            Event::Reset {
                consumer,
                partition,
                from,
                to,
            },
        ),
        Line::CorruptRead {
            at_ms,
            consumer,
            partition,
            offset,
            error,
        } => (
            at_ms,
            Event::CorruptRead {
                consumer,
                partition,
                offset,
                error,
            },
        ),
        Line::Fault { at_ms, what } => (at_ms, Event::Fault(what)),
        Line::Heal { at_ms, what } => (at_ms, Event::Heal(what)),
        Line::Note { at_ms, what } => (at_ms, Event::Note(what)),
        Line::Final { .. } | Line::Liveness { .. } => return None,
    };
    Some(Entry { at_ms, event })
}

/// Writes `h`; events without a line (groups, admin, traces) are left out. Returns how many
/// events were.
pub fn write(h: &HistoryFile, out: &mut impl Write) -> std::io::Result<usize> {
    let mut left_out = 0;
    let put = |line: &Line, out: &mut dyn Write| -> std::io::Result<()> {
        let text = serde_json::to_string(line).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")
    };
    for e in &h.entries {
        match line_of(e) {
            Some(line) => put(&line, out)?,
            None => left_out += 1,
        }
    }
    for (&partition, r) in &h.final_read {
        let line = Line::Final {
            partition,
            start: r.start,
            stopped_at: r.stopped_at,
            records: r.records.clone(),
        };
        put(&line, out)?;
    }
    put(
        &Line::Liveness {
            failure: h.liveness.clone(),
        },
        out,
    )?;
    Ok(left_out)
}

/// Reads a history file back; a malformed line is an error naming its number.
pub fn read(input: impl BufRead) -> Result<HistoryFile, String> {
    let mut h = HistoryFile::default();
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line =
            serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))?;
        match parsed {
            Line::Final {
                partition,
                start,
                stopped_at,
                records,
            } => {
                h.final_read.insert(
                    partition,
                    PartitionRead {
                        start,
                        stopped_at,
                        records,
                    },
                );
            }
            Line::Liveness { failure } => h.liveness = failure,
            other => h.entries.extend(entry_of(other)),
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_line_kind() {
        let at = |at_ms, event| Entry { at_ms, event };
        let h = HistoryFile {
            entries: vec![
                at(
                    1,
                    Event::Invoke {
                        op: 7,
                        partition: 1,
                        session: 2,
                        values: vec!["p0-0-0".into(), "p0-0-1".into()],
                    },
                ),
                at(2, Event::Ack { op: 7, offset: 4 }),
                at(
                    3,
                    Event::Fail {
                        op: 8,
                        error: "timed out".into(),
                    },
                ),
                at(
                    4,
                    Event::Read {
                        consumer: 0,
                        partition: 1,
                        offset: 4,
                        value: "p0-0-0".into(),
                        high_watermark: 6,
                    },
                ),
                at(
                    5,
                    Event::Reset {
                        consumer: 0,
                        partition: 1,
                        from: 9,
                        to: 6,
                    },
                ),
                at(
                    6,
                    Event::CorruptRead {
                        consumer: 1,
                        partition: 0,
                        offset: 3,
                        error: "crc".into(),
                    },
                ),
                at(7, Event::Fault("kill node 2".into())),
                at(8, Event::Heal("restart node 2".into())),
                at(9, Event::Note("final read".into())),
            ],
            final_read: FinalRead::from([(
                1,
                PartitionRead {
                    start: 0,
                    stopped_at: Some(9),
                    records: vec![(4, "p0-0-0".into()), (5, "p0-0-1".into())],
                },
            )]),
            liveness: Some("partition 0: timed out".into()),
        };
        let mut bytes = Vec::new();
        assert_eq!(write(&h, &mut bytes).unwrap(), 0);
        let back = read(bytes.as_slice()).unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn a_malformed_line_names_its_number() {
        let text = "{\"type\":\"liveness\",\"failure\":null}\n{\"type\":\"nope\"}\n";
        let e = read(text.as_bytes()).unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }
}
