//! The history as a file: one JSON object a line, so that a run outside the simulator (the
//! real-process fault suite, `jepsen`) hands the simulator's checker the very events a
//! simulated run records. The record-level events only (produce invoked, acknowledged, failed;
//! reads, resets, corrupt reads; faults, heals, notes), consumer-group steps (`group`, the
//! events of `group_check`, tagged by `kind`) and admin changes (`admin_invoke` with the change
//! tagged by `kind`, `admin_ack`, `admin_fail`), then the final read, the admin topics' final
//! metadata, what the group checks expect, and the liveness verdict. Partition traces and
//! the simulator's schedule entries have no line.
//!
//! `{"at_ms":12,"type":"invoke","op":3,"partition":0,"session":1,"values":["p0-0-0"]}`
//! `{"type":"final","partition":0,"start":0,"stopped_at":null,"records":[[0,"p0-0-0"]]}`
//! `{"type":"liveness","failure":null}`
//! `{"type":"group","at_ms":40,"event":{"kind":"commit_ack","op":9}}`
//! `{"type":"admin_invoke","at_ms":50,"op":1,"change":{"kind":"delete_topic","topic":"admin-1"}}`
//! `{"type":"final_metadata","topics":{"admin-2":[3,{"retention.ms":"3600000"}]}}`
//! `{"type":"groups","groups":2,"members":2,"partitions":3,"settle_bound_ms":30000}`

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::checker::{FinalRead, PartitionRead};
use crate::group_check::{self, GroupEvent};
use crate::history::{AdminChange, Entry, Event};
use crate::metadata_check::FinalMetadata;

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
        /// Absent in files written before delivery reports carried a code.
        #[serde(default)]
        code: i16,
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
    Group {
        at_ms: u64,
        event: GroupEvent,
    },
    Txn {
        at_ms: u64,
        event: crate::txn_check::TxnEvent,
    },
    AdminInvoke {
        at_ms: u64,
        op: u64,
        change: AdminChange,
    },
    AdminAck {
        at_ms: u64,
        op: u64,
    },
    AdminFail {
        at_ms: u64,
        op: u64,
        definite: bool,
        error: String,
    },
    FinalMetadata {
        topics: FinalMetadata,
    },
    Groups {
        groups: u32,
        members: u32,
        partitions: i32,
        settle_bound_ms: u64,
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

/// What a history file holds: the events, the final read and the liveness verdict; with an
/// admin client, the admin topics' metadata at the end; with group consumers, what the group
/// checks expect of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryFile {
    pub entries: Vec<Entry>,
    pub final_read: FinalRead,
    pub liveness: Option<String>,
    pub final_metadata: Option<FinalMetadata>,
    pub groups: Option<group_check::Expected>,
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
        Event::Fail { op, code, error } => Line::Fail {
            at_ms,
            op,
            code,
            error,
        },
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
        Event::Group(event) => Line::Group { at_ms, event },
        Event::Txn(event) => Line::Txn { at_ms, event },
        Event::AdminInvoke { op, change } => Line::AdminInvoke { at_ms, op, change },
        Event::AdminAck { op } => Line::AdminAck { at_ms, op },
        Event::AdminFail {
            op,
            definite,
            error,
        } => Line::AdminFail {
            at_ms,
            op,
            definite,
            error,
        },
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
        Line::Fail {
            at_ms,
            op,
            code,
            error,
        } => (at_ms, Event::Fail { op, code, error }),
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
        Line::Group { at_ms, event } => (at_ms, Event::Group(event)),
        Line::Txn { at_ms, event } => (at_ms, Event::Txn(event)),
        Line::AdminInvoke { at_ms, op, change } => (at_ms, Event::AdminInvoke { op, change }),
        Line::AdminAck { at_ms, op } => (at_ms, Event::AdminAck { op }),
        Line::AdminFail {
            at_ms,
            op,
            definite,
            error,
        } => (
            at_ms,
            Event::AdminFail {
                op,
                definite,
                error,
            },
        ),
        Line::Final { .. }
        | Line::Liveness { .. }
        | Line::FinalMetadata { .. }
        | Line::Groups { .. } => return None,
    };
    Some(Entry { at_ms, event })
}

/// Writes `h`; events without a line (partition traces, schedule entries) are left out.
/// Returns how many events were.
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
    if let Some(topics) = &h.final_metadata {
        put(
            &Line::FinalMetadata {
                topics: topics.clone(),
            },
            out,
        )?;
    }
    if let Some(g) = h.groups {
        put(
            &Line::Groups {
                groups: g.groups,
                members: g.members,
                partitions: g.partitions,
                settle_bound_ms: g.settle_bound_ms,
            },
            out,
        )?;
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
            Line::FinalMetadata { topics } => h.final_metadata = Some(topics),
            Line::Groups {
                groups,
                members,
                partitions,
                settle_bound_ms,
            } => {
                h.groups = Some(group_check::Expected {
                    groups,
                    members,
                    partitions,
                    settle_bound_ms,
                })
            }
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
                        code: -192,
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
                at(
                    10,
                    Event::Group(GroupEvent::Commit {
                        op: 3,
                        group: 1,
                        member: "m0".into(),
                        generation: 4,
                        offsets: vec![(0, 12), (2, 7)],
                    }),
                ),
                at(
                    11,
                    Event::Group(GroupEvent::Final {
                        group: 1,
                        member: "m0".into(),
                        generation: None,
                        partitions: vec![0, 2],
                    }),
                ),
                at(
                    12,
                    Event::AdminInvoke {
                        op: 1,
                        change: AdminChange::AlterConfigs {
                            topic: "admin-1".into(),
                            changes: [
                                ("retention.ms".to_string(), Some("1000".to_string())),
                                ("segment.ms".to_string(), None),
                            ]
                            .into(),
                        },
                    },
                ),
                at(13, Event::AdminAck { op: 1 }),
                at(
                    14,
                    Event::AdminFail {
                        op: 2,
                        definite: true,
                        error: "InvalidPartitions".into(),
                    },
                ),
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
            final_metadata: Some(FinalMetadata::from([(
                "admin-2".to_string(),
                (3, [("retention.ms".to_string(), "5".to_string())].into()),
            )])),
            groups: Some(group_check::Expected {
                groups: 2,
                members: 2,
                partitions: 3,
                settle_bound_ms: 30_000,
            }),
        };
        let mut bytes = Vec::new();
        assert_eq!(write(&h, &mut bytes).unwrap(), 0);
        let back = read(bytes.as_slice()).unwrap();
        assert_eq!(back, h);
    }

    /// The lines the Python and node clients write, as they write them.
    #[test]
    fn reads_the_foreign_clients_lines() {
        let text = [
            r#"{"type": "group", "event": {"kind": "read", "group": 0, "member": "m1", "generation": 3, "partition": 2, "offset": 5, "value": "p0-1-0"}, "at_ms": 7}"#,
            r#"{"type": "group", "event": {"kind": "owns", "group": 1, "member": "m0", "member_id": "x", "epoch": 2, "partitions": [0, 1]}, "at_ms": 8}"#,
            r#"{"type": "admin_invoke", "op": 1, "change": {"kind": "create_topic", "topic": "admin-1", "partitions": 2, "configs": {}}, "at_ms": 9}"#,
            r#"{"type": "admin_fail", "op": 1, "definite": false, "error": "_TIMED_OUT", "at_ms": 10}"#,
            r#"{"type": "reset", "consumer": 1000, "partition": 0, "to": 3, "from": 9, "at_ms": 11}"#,
            r#"{"type": "final_metadata", "topics": {"admin-1": [2, {}]}}"#,
        ]
        .join("\n");
        let h = read(text.as_bytes()).unwrap();
        assert_eq!(h.entries.len(), 5);
        assert_eq!(h.final_metadata.unwrap()["admin-1"].0, 2);
        assert!(matches!(
            &h.entries[2].event,
            Event::AdminInvoke {
                change: AdminChange::CreateTopic { partitions: 2, .. },
                ..
            }
        ));
    }

    #[test]
    fn a_malformed_line_names_its_number() {
        let text = "{\"type\":\"liveness\",\"failure\":null}\n{\"type\":\"nope\"}\n";
        let e = read(text.as_bytes()).unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }
}
