//! The history of one run: every produce (invoked, acknowledged with its offset, failed), every
//! read, every fault, in simulated-time order. The checker reads it; its hash is the run's
//! fingerprint (`trace_hash`): the same scenario and seed must give the same hash every time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::scenario::{FaultKind, TimedFault};

/// A produced value is `p{producer}-{batch}-{record}`: unique across the run, so the checker can
/// tell every write apart.
pub fn value(producer: u32, batch: u64, record: u32) -> String {
    // By hand rather than `format!` (~1,200 instructions a record, 1 % of a 3-broker run).
    let mut out = String::with_capacity(24);
    out.push('p');
    // Writing to a `String` cannot fail.
    let _ = uint(&mut out, producer.into());
    out.push('-');
    let _ = uint(&mut out, batch);
    out.push('-');
    let _ = uint(&mut out, record.into());
    out
}

/// A metadata change an admin client asks for (on its own topics, never the workload's).
/// Serialized for history files (`history_file`), tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AdminChange {
    CreateTopic {
        topic: String,
        partitions: i32,
        configs: BTreeMap<String, String>,
    },
    DeleteTopic {
        topic: String,
    },
    /// Grow to `count` partitions in total.
    CreatePartitions {
        topic: String,
        count: i32,
    },
    /// Set (`Some`) or remove (`None`) overrides, all or none.
    AlterConfigs {
        topic: String,
        changes: BTreeMap<String, Option<String>>,
    },
}

impl AdminChange {
    pub fn topic(&self) -> &str {
        match self {
            AdminChange::CreateTopic { topic, .. }
            | AdminChange::DeleteTopic { topic }
            | AdminChange::CreatePartitions { topic, .. }
            | AdminChange::AlterConfigs { topic, .. } => topic,
        }
    }

    /// One line: "create admin-3 (2 partitions)", "delete admin-3", ...
    pub fn describe(&self) -> String {
        match self {
            AdminChange::CreateTopic {
                topic, partitions, ..
            } => format!("create {topic} ({partitions} partitions)"),
            AdminChange::DeleteTopic { topic } => format!("delete {topic}"),
            AdminChange::CreatePartitions { topic, count } => {
                format!("grow {topic} to {count} partitions")
            }
            AdminChange::AlterConfigs { topic, .. } => format!("alter configs of {topic}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A producer sent a batch (first attempt). `session` counts the producer's idempotent
    /// identities (a new producer id after a failure starts a new one): Kafka promises order
    /// only within one.
    Invoke {
        op: u64,
        partition: i32,
        session: u32,
        values: Vec<String>,
    },
    /// The broker acknowledged the batch at `offset` (its first record).
    Ack { op: u64, offset: i64 },
    /// The producer gave up on the batch; it may or may not have been written. `code`: the
    /// error its delivery report carries, as librdkafka's: Kafka's code, or a local (negative)
    /// one such as `_MSG_TIMED_OUT`; 0 for none an application sees (`produce_errors`).
    Fail { op: u64, code: i16, error: String },
    /// A consumer read `value` at `offset`, in a response that reported `high_watermark`.
    Read {
        consumer: u32,
        partition: i32,
        offset: i64,
        value: String,
        high_watermark: i64,
    },
    /// A consumer's position was reset (offset out of range after data loss).
    Reset {
        consumer: u32,
        partition: i32,
        from: i64,
        to: i64,
    },
    /// A consumer saw a batch with a bad CRC or malformed records.
    CorruptRead {
        consumer: u32,
        partition: i32,
        offset: i64,
        error: String,
    },
    /// An admin client sent a metadata change.
    AdminInvoke { op: u64, change: AdminChange },
    /// The broker acknowledged it: it must hold after the faults heal.
    AdminAck { op: u64 },
    /// The broker refused it (`definite`: it did not happen), or the answer never came.
    AdminFail {
        op: u64,
        definite: bool,
        error: String,
    },
    /// The nemesis is about to inject a fault of this kind (for fault coverage); a `Fault`
    /// note saying what exactly follows.
    Inject(FaultKind),
    /// The nemesis starts this fault: kind, node, time and how long it lasts. These entries are
    /// the run's fault schedule, explicit: `shrink` replays and cuts them, `--html` draws them.
    Scheduled(TimedFault),
    /// The nemesis injected a fault.
    Fault(String),
    /// A fault ended (or a stopped broker came back).
    Heal(String),
    /// Something about the run itself (start, heal, final read, liveness).
    Note(String),
    /// A consumer group member's or the group observer's step (`group_check.rs`).
    Group(crate::group_check::GroupEvent),
    /// A partition-level step of the workload topic: a leader or ISR/ELR change committed, a
    /// broker back as a new incarnation, a follower's truncation (`partition_trace.rs`).
    Partition(crate::partition_trace::PartitionEvent),
    /// A step of the transactional workload (`txn_check.rs`).
    Txn(crate::txn_check::TxnEvent),
    /// A validating consumer's truncation, validation or read-replica switch
    /// (`validating_consumer.rs`).
    Consumer(crate::validating_consumer::ConsumerEvent),
    /// A step of the record deleter (`record_deleter.rs`, judged by `delete_check.rs`).
    Delete(crate::delete_check::DeleteEvent),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub at_ms: u64,
    pub event: Event,
}

#[derive(Clone, Default)]
pub struct History {
    entries: Arc<Mutex<Vec<Entry>>>,
}

/// Bound on recorded events: a run that records more has a workload out of proportion.
pub const MAX_EVENTS: usize = 5_000_000;

impl History {
    pub fn record(&self, at_ms: u64, event: Event) {
        let mut entries = self.lock();
        assert!(
            entries.len() < MAX_EVENTS,
            "history exceeds {MAX_EVENTS} events"
        );
        entries.push(Entry { at_ms, event });
    }

    /// Takes the recorded entries out (at the end of a run).
    pub fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.lock())
    }

    /// A panic elsewhere in the run (a broker assertion) may poison the lock; the entries are
    /// still whole (each push is one step), and they are the evidence of that very panic.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The time of the last recorded event (where a run that panicked stopped).
    pub fn last_ms(&self) -> u64 {
        self.lock().last().map_or(0, |e| e.at_ms)
    }
}

/// FNV-1a, fed through `fmt::Write` so that hashing an event allocates nothing.
struct Fnv(u64);

impl Fnv {
    fn eat(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

impl std::fmt::Write for Fnv {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.eat(s.as_bytes());
        Ok(())
    }
}

/// FNV-1a over a canonical rendering of every entry: stable across builds and platforms.
pub fn trace_hash(entries: &[Entry]) -> u64 {
    let mut hash = Fnv(0xcbf2_9ce4_8422_2325);
    for entry in entries {
        hash.eat(&entry.at_ms.to_le_bytes());
        let _ = render(&mut hash, &entry.event);
        hash.eat(b"\n");
    }
    hash.0
}

/// Writes `event` exactly as `{:?}` does (the trace hash is defined on that rendering), by hand
/// for the events that make up most of a history (reads — the consumers', group members' and
/// read_committed readers' —, produces, acknowledgements): through `fmt` they were a tenth of a
/// run's work. Everything else goes through `Debug`.
fn render<W: std::fmt::Write>(out: &mut W, event: &Event) -> std::fmt::Result {
    match event {
        Event::Read {
            consumer,
            partition,
            offset,
            value,
            high_watermark,
        } => {
            out.write_str("Read { consumer: ")?;
            uint(out, u64::from(*consumer))?;
            out.write_str(", ")?;
            partition_offset_value(out, *partition, *offset, value)?;
            out.write_str(", high_watermark: ")?;
            int(out, *high_watermark)?;
            out.write_str(" }")
        }
        Event::Invoke {
            op,
            partition,
            session,
            values,
        } => {
            out.write_str("Invoke { op: ")?;
            uint(out, *op)?;
            out.write_str(", partition: ")?;
            int(out, i64::from(*partition))?;
            out.write_str(", session: ")?;
            uint(out, u64::from(*session))?;
            out.write_str(", values: [")?;
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    out.write_str(", ")?;
                }
                string(out, v)?;
            }
            out.write_str("] }")
        }
        Event::Ack { op, offset } => {
            out.write_str("Ack { op: ")?;
            uint(out, *op)?;
            out.write_str(", offset: ")?;
            int(out, *offset)?;
            out.write_str(" }")
        }
        // Group members' and read_committed readers' reads: most of a group or transactional
        // scenario's history.
        Event::Group(crate::group_check::GroupEvent::Read {
            group,
            member,
            generation,
            partition,
            offset,
            value,
        }) => {
            out.write_str("Group(Read { group: ")?;
            uint(out, u64::from(*group))?;
            out.write_str(", member: ")?;
            string(out, member)?;
            out.write_str(", generation: ")?;
            int(out, i64::from(*generation))?;
            out.write_str(", ")?;
            partition_offset_value(out, *partition, *offset, value)?;
            out.write_str(" })")
        }
        Event::Txn(crate::txn_check::TxnEvent::Read {
            partition,
            offset,
            value,
            upto,
        }) => {
            out.write_str("Txn(Read { ")?;
            partition_offset_value(out, *partition, *offset, value)?;
            out.write_str(", upto: ")?;
            int(out, *upto)?;
            out.write_str(" })")
        }
        other => write!(out, "{other:?}"),
    }
}

/// `partition: P, offset: O, value: "V"`, as `Debug` renders the three fields of a read.
fn partition_offset_value<W: std::fmt::Write>(
    out: &mut W,
    partition: i32,
    offset: i64,
    value: &str,
) -> std::fmt::Result {
    out.write_str("partition: ")?;
    int(out, i64::from(partition))?;
    out.write_str(", offset: ")?;
    int(out, offset)?;
    out.write_str(", value: ")?;
    string(out, value)
}

/// `n` in decimal, as `{}` writes it, through `itoa` (no formatting machinery: this runs three
/// times per produced value and per history event).
fn uint<W: std::fmt::Write>(out: &mut W, n: u64) -> std::fmt::Result {
    out.write_str(itoa::Buffer::new().format(n))
}

fn int<W: std::fmt::Write>(out: &mut W, n: i64) -> std::fmt::Result {
    if n < 0 {
        out.write_char('-')?;
    }
    uint(out, n.unsigned_abs())
}

/// A string as `{:?}` quotes it: printable ASCII other than `"` and a backslash stands for itself.
fn string<W: std::fmt::Write>(out: &mut W, s: &str) -> std::fmt::Result {
    if s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.write_char('"')?;
        out.write_str(s)?;
        out.write_char('"')
    } else {
        write!(out, "{s:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_as_display_writes_them() {
        let mut cases: Vec<u64> = (0..=1_000).collect();
        for e in 1..20 {
            let p = 10u64.pow(e);
            cases.extend([p - 1, p, p + 1, p + 9, p + 10, p + 99]);
        }
        cases.extend([u64::MAX, u64::MAX - 1, 1 << 40, (1 << 40) + 12_345]);
        for n in cases {
            let mut out = String::new();
            uint(&mut out, n).unwrap();
            assert_eq!(out, n.to_string());
            for i in [n as i64, (n as i64).wrapping_neg(), i64::MIN, i64::MAX] {
                let mut out = String::new();
                int(&mut out, i).unwrap();
                assert_eq!(out, i.to_string());
            }
        }
    }

    #[test]
    fn values_are_formatted_as_before() {
        for (p, b, r) in [
            (0, 0, 0),
            (1, 23, 4),
            (u32::MAX, u64::MAX, 10),
            (7, 100, 999),
        ] {
            assert_eq!(value(p, b, r), format!("p{p}-{b}-{r}"));
        }
    }

    #[test]
    fn hash_depends_on_order_time_and_content() {
        let a = Entry {
            at_ms: 1,
            event: Event::Note("a".into()),
        };
        let b = Entry {
            at_ms: 2,
            event: Event::Note("b".into()),
        };
        let h = trace_hash(&[a.clone(), b.clone()]);
        assert_eq!(h, trace_hash(&[a.clone(), b.clone()]));
        assert_ne!(h, trace_hash(&[b.clone(), a.clone()]));
        let mut later = b.clone();
        later.at_ms = 3;
        assert_ne!(h, trace_hash(&[a, later]));
    }

    /// The hand-written rendering is `Debug`'s, byte for byte (or every trace hash changes).
    #[test]
    fn rendering_is_debugs() {
        let strings = [
            "p1-2-3",
            "",
            "quote\" and \\ back",
            "tab\there",
            "é ünïcode",
            "'single'",
        ];
        let ints = [0i64, 1, -1, 9, 10, 12345, i64::MIN, i64::MAX];
        let mut events = vec![];
        for (i, &n) in ints.iter().enumerate() {
            let s = strings[i % strings.len()].to_string();
            events.push(Event::Read {
                consumer: n as u32,
                partition: n as i32,
                offset: n,
                value: s.clone(),
                high_watermark: n.wrapping_neg(),
            });
            events.push(Event::Ack {
                op: n as u64,
                offset: n,
            });
            events.push(Event::Group(crate::group_check::GroupEvent::Read {
                group: n as u32,
                member: strings[(i + 1) % strings.len()].to_string(),
                generation: n as i32,
                partition: -(n as i32),
                offset: n,
                value: s.clone(),
            }));
            events.push(Event::Txn(crate::txn_check::TxnEvent::Read {
                partition: n as i32,
                offset: n,
                value: s.clone(),
                upto: n.wrapping_neg(),
            }));
            events.push(Event::Invoke {
                op: n as u64,
                partition: -(n as i32),
                session: u32::MAX,
                values: strings[..i % (strings.len() + 1)]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            });
        }
        events.push(Event::Note("other events go through Debug".into()));
        for event in &events {
            let mut ours = String::new();
            render(&mut ours, event).unwrap();
            assert_eq!(ours, format!("{event:?}"));
        }
    }
}
