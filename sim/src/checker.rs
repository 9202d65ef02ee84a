//! Turns a history and the final read into Jepsen-style anomaly reports.
//!
//! - **lost**: acknowledged, yet absent from the final read of every partition.
//! - **duplicate**: one value stored at two offsets.
//! - **inconsistent**: one offset seen holding two values (acknowledgements and reads combined).
//! - **monotonic**: a consumer read offsets out of order or skipped some, with no reset between.
//! - **corrupt**: a client received a batch failing its CRC, or read a value no producer wrote.
//! - **liveness**: after healing, a produce and a fetch did not succeed within the bound.
//! - **lost-read**: a consumer read a value below the high watermark the broker reported with
//!   it (so the broker called it committed), and the final read no longer holds that value at
//!   that offset, though the offset is still inside the log. Reads are knowledge, as in
//!   Jepsen's Kafka workload: a committed record a later crash takes back is a lost write even
//!   if nobody acknowledged it and nothing else landed at its offset.
//! - **uncommitted**: a fetch returned a record at or past the high watermark it reported.
//! - **order**: within one idempotent producer session, two values are stored in the opposite
//!   order from the one they were sent in.
//! - **acked-offset**: an acknowledged value is not at its acknowledged offset in the final read
//!   although that offset is inside the read (moved elsewhere, replaced, or a hole), or it is
//!   stored at another offset. Acknowledged offsets never move, whichever broker leads later.
//! - **replicas** (`replica_check`): replicas disagree below their high watermarks.
//!
//! Errors after an append (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND, a dropped
//! connection) prove nothing either way (replication notes §2.5): the producer retries them,
//! and a batch it gives up on is a `Fail`, which is indeterminate here: its values may or may
//! not be in the log, and only a read below the high watermark makes them knowledge.
//!
//! Each finding also notes when its first evidence appeared (`evidence_ms`), so that a sweep
//! can tell which faults were active around it (fault coverage).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use crate::beyond_promise::BeyondPromise;
use crate::group_check::GroupEvent;
use crate::history::{Entry, Event};
use crate::scenario::Check;
use crate::validating_consumer::ConsumerEvent;

/// What the final read found in one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionRead {
    /// The log start offset when it was read: anything below may have gone to retention.
    pub start: i64,
    /// Where the read broke off before the high watermark (the broker could not serve a batch):
    /// the offsets from there on are unknown rather than gone.
    pub stopped_at: Option<i64>,
    /// (offset, value) in offset order.
    pub records: Vec<(i64, String)>,
}

/// What the final read found: for each partition, its start and its records.
pub type FinalRead = BTreeMap<i32, PartitionRead>;

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
    /// Committed reads taken back: "partition P offset O: read V (hw H), final F".
    pub lost_reads: Vec<String>,
    /// Records served at or past the reported high watermark.
    pub uncommitted: Vec<String>,
    /// Idempotent values stored out of order.
    pub misordered: Vec<String>,
    /// Admin changes missing or half done at the end (`metadata_check`).
    pub metadata: Vec<String>,
    /// Admin errors surfaced that a correct broker would not answer then (`admin_errors`):
    /// NOT_CONTROLLER and other wrong answers, time-outs in a quiet stretch.
    pub admin_errors: Vec<String>,
    /// Errors producers surfaced that a correct broker does not cause (`delivery_check`),
    /// filled in by the world.
    pub producer_errors: Vec<String>,
    /// Multi-node worlds: leader and committed-metadata conflicts (`quorum_check`).
    pub quorum: crate::quorum_check::QuorumFindings,
    /// Multi-node worlds: why no leader or no metadata commit came within the bound after
    /// healing.
    pub quorum_liveness: Option<String>,
    /// Values sent without an answer (acks=0) and neither failed nor stored at the end.
    pub sent_lost: Vec<String>,
    /// Acknowledged values not at their acknowledged offset at the end.
    pub acked_moved: Vec<String>,
    /// Multi-node worlds: replicas disagreeing below their high watermarks
    /// (`replica_check`), filled in by the world after the final read.
    pub replicas: Vec<String>,
    /// Records below an answered DeleteRecords' low watermark returned by a read that began
    /// after the answer (`delete_check`), filled in by the world.
    pub deleted_readable: Vec<String>,
    /// DeleteRecords the record deleter sent, and those answered without error.
    pub deletions_sent: usize,
    pub deletions_answered: usize,
    /// Consumer groups (`group_check`).
    pub groups: crate::group_check::GroupFindings,
    /// Transactions (`txn_check`).
    pub txn: crate::txn_check::TxnFindings,
    /// What failed of the post-heal probes of what users do (`probes`), filled in by the
    /// world.
    pub probes: ProbeFindings,
    /// Validating consumers (`validating_consumer`): log truncations their position
    /// validation detected (each moved the position back; not a violation by itself: a
    /// committed read taken back is a `lost-read`), positions validated after a leader change,
    /// and switches to a follower (KIP-392).
    pub truncations: Vec<String>,
    /// Errors the producers and admin clients handed to the application instead of retrying
    /// (non-retriable answers, retries or delivery time exhausted), by client and kind: what a
    /// user would see. Availability, not safety: no check fails on them.
    pub surfaced: BTreeMap<String, usize>,
    pub validations: usize,
    pub follower_switches: usize,
    /// Acknowledged writes lost beyond acks=all's promise (`beyond_promise`): notes, not
    /// violations.
    pub beyond_promise: Vec<String>,
    /// Run time (ms) of the first evidence of each violated check, where there is one.
    pub evidence_ms: BTreeMap<Check, u64>,
}

/// Why each post-heal probe (`probes`) failed (`None`: it succeeded, or did not run).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeFindings {
    /// `admin-liveness`: CreateTopics, CreatePartitions, IncrementalAlterConfigs, DeleteTopics.
    pub admin: Option<String>,
    /// `group-liveness`: a join to a stable generation with a commit.
    pub group: Option<String>,
    /// `txn-liveness`: a transaction committed and read back read_committed.
    pub txn: Option<String>,
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
        add(
            Check::LostRead,
            self.lost_reads.len(),
            "committed reads taken back",
        );
        add(
            Check::Uncommitted,
            self.uncommitted.len(),
            "records served past the high watermark",
        );
        add(
            Check::Order,
            self.misordered.len(),
            "idempotent values stored out of order",
        );
        add(
            Check::Metadata,
            self.metadata.len(),
            "admin changes lost or half done",
        );
        add(
            Check::AdminAvailability,
            self.admin_errors.len(),
            "admin errors surfaced that a correct broker would not answer then (librdkafka surfaces them)",
        );
        add(
            Check::ProducerAvailability,
            self.producer_errors.len(),
            "producer errors a correct broker does not cause (surfaced, or delivery timed out with a leader and no fault)",
        );
        add(
            Check::OneLeader,
            self.quorum.leader_conflicts,
            "conflicting leader claims for an epoch",
        );
        add(
            Check::CommittedPrefix,
            self.quorum.committed_conflicts,
            "committed metadata conflicts",
        );
        add(
            Check::Sent,
            self.sent_lost.len(),
            "sent writes (never answered) lost",
        );
        add(
            Check::AckedOffset,
            self.acked_moved.len(),
            "acknowledged values not at their acknowledged offset",
        );
        add(
            Check::Deleted,
            self.deleted_readable.len(),
            "reads (per reader and partition) of deleted records: deleted records readable again",
        );
        add(
            Check::Replicas,
            self.replicas.len(),
            "replica divergences below the high watermark",
        );
        let g = &self.groups;
        add(
            Check::GroupOwnership,
            g.ownership.len(),
            "partitions owned twice (one generation, or a commit after a handover)",
        );
        add(
            Check::GroupOffsets,
            g.offsets.len(),
            "committed offsets gone backwards",
        );
        add(
            Check::GroupDelivery,
            g.undelivered,
            "acknowledged records a group never processed",
        );
        add(Check::GroupSettle, g.unsettled.len(), "groups not settled");
        let t = &self.txn;
        add(
            Check::Transactions,
            t.aborted_reads.len(),
            "read_committed reads of aborted or undone values",
        );
        add(Check::Transactions, t.torn.len(), "torn transactions");
        add(
            Check::Transactions,
            t.lost.len(),
            "acknowledged commits with values missing",
        );
        add(
            Check::Transactions,
            t.duplicated.len(),
            "transactional values stored twice or aborted yet stored",
        );
        add(
            Check::Transactions,
            t.unsettled.len(),
            "partitions with a transaction left hanging",
        );
        add(
            Check::Transactions,
            t.intermediate.len(),
            "read_committed reads of part of a transaction (intermediate reads)",
        );
        add(
            Check::Transactions,
            t.offsets.len(),
            "committed offsets not matching what committed transactions consumed",
        );
        add(
            Check::Transactions,
            t.misdirected.len(),
            "late EndTxns that ended a later transaction (KAFKA-17754)",
        );
        add(
            Check::Transactions,
            t.stale_offset_commits.len(),
            "stale offset commits: an abandoned TxnOffsetCommit accepted in a later transaction \
             of the same epoch (Kafka's transactions v1 limit, fixed by transactions v2)",
        );
        if checks.contains(&Check::Liveness) {
            if let Some(why) = &self.liveness {
                out.push(format!("liveness: {why}"));
            }
        }
        if checks.contains(&Check::QuorumLiveness) {
            if let Some(why) = &self.quorum_liveness {
                out.push(format!("quorum liveness: {why}"));
            }
        }
        for (check, what, failed) in [
            (Check::AdminLiveness, "admin", &self.probes.admin),
            (Check::GroupLiveness, "group", &self.probes.group),
            (Check::TxnLiveness, "transaction", &self.probes.txn),
        ] {
            if let Some(why) = failed.as_ref().filter(|_| checks.contains(&check)) {
                out.push(format!("{what} liveness after healing: {why}"));
            }
        }
        out
    }

    /// The earliest evidence among the violated checks in `checks`, if any has a time.
    pub fn first_evidence_ms(&self, checks: &[Check]) -> Option<u64> {
        self.evidence_ms
            .iter()
            .filter(|(c, _)| checks.contains(c))
            .map(|(_, &t)| t)
            .min()
    }

    fn evidence(&mut self, check: Check, at_ms: u64) {
        let t = self.evidence_ms.entry(check).or_insert(at_ms);
        *t = (*t).min(at_ms);
    }
}

/// An error's kind without its details: `broker error: NOT_ENOUGH_REPLICAS`, `timed out`,
/// `i/o`, `retries exhausted`.
fn error_kind(error: &str) -> &str {
    // The admin client's errors start with their code (`admin_errors::describe`).
    let error = match error.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((_, rest)) => rest,
        None => error,
    };
    let mut cut = error.match_indices(": ").map(|(i, _)| i);
    let end = if error.starts_with("broker error: ") {
        cut.nth(1)
    } else {
        cut.next()
    };
    &error[..end.unwrap_or(error.len())]
}

fn push_example(list: &mut Vec<String>, example: impl FnOnce() -> String) {
    if list.len() < EXAMPLES {
        list.push(example());
    }
}

/// A multiply-rotate hash (FxHash's) for the checker's lookup tables, keyed by short values and
/// offsets: cheaper than a B-tree's string comparisons (the checker was a tenth of a run's work),
/// a word at a time (FNV-1a's byte at a time was 1 % of a run) and the same in every process.
/// Nothing is reported in a table's order: what is reported is sorted first.
#[derive(Default)]
struct Fnv(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Fnv {
    fn word(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        // The table takes its bucket from the low bits: fold the high ones in.
        self.0 ^ (self.0 >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.word(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 56));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.word(n.into());
    }

    fn write_u32(&mut self, n: u32) {
        self.word(n.into());
    }

    fn write_i32(&mut self, n: i32) {
        self.word(n as u32 as u64);
    }

    fn write_u64(&mut self, n: u64) {
        self.word(n);
    }

    fn write_i64(&mut self, n: i64) {
        self.word(n as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.word(n as u64);
    }
}

type Table<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// A table sized for `n` keys up front: the checker's tables hold tens of thousands of keys,
/// and growing them by doubling rehashed every key about twice (~1 % of a run's work).
fn table<K, V>(n: usize) -> Table<K, V> {
    Table::with_capacity_and_hasher(n, BuildHasherDefault::default())
}

/// The records of the final read, all partitions together.
fn final_records(final_read: &FinalRead) -> usize {
    final_read.values().map(|r| r.records.len()).sum()
}

/// How many produce operations, produced values and served reads a history has: what the
/// checker's tables are sized by.
fn sizes(entries: &[Entry]) -> (usize, usize, usize) {
    let (mut ops, mut values, mut reads) = (0, 0, 0);
    for entry in entries {
        match &entry.event {
            Event::Invoke { values: v, .. } => {
                ops += 1;
                values += v.len();
            }
            Event::Read { .. } | Event::Group(GroupEvent::ReadServed { .. }) => reads += 1,
            _ => {}
        }
    }
    (ops, values, reads)
}

/// The values seen at one offset: almost always one, which needs no set of its own.
#[derive(Default)]
struct Seen<'a> {
    first: Option<&'a str>,
    others: BTreeSet<&'a str>,
}

impl<'a> Seen<'a> {
    fn insert(&mut self, value: &'a str) {
        match self.first {
            None => self.first = Some(value),
            Some(first) if first == value => {}
            Some(_) => {
                self.others.insert(value);
            }
        }
    }

    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.others.len()
    }

    /// In order, each once.
    fn values(self) -> BTreeSet<&'a str> {
        let mut all = self.others;
        all.extend(self.first);
        all
    }
}

/// Two or more values seen at one offset (`at`), beyond what `beyond` excuses: an offset whose
/// acknowledged write was lost beyond the promise, or a value read there that was lost with
/// such writes (not counted as one of the two).
fn inconsistent(seen: &Seen, at: (i32, i64), beyond: &BeyondPromise) -> bool {
    if seen.len() < 2 || beyond.covers(at.0, at.1) {
        return false;
    }
    if beyond.is_empty() {
        return true;
    }
    let kept = seen
        .first
        .iter()
        .chain(&seen.others)
        .filter(|v| !beyond.covers_read(at.0, at.1, v))
        .count();
    kept > 1
}

/// What the checker knows about one produced value.
struct Written {
    op: u64,
    session: u32,
    partition: i32,
    /// Position in its batch.
    index: usize,
    acked_ms: Option<u64>,
}

pub fn check(entries: &[Entry], final_read: &FinalRead, liveness: Option<String>) -> Findings {
    check_beyond(entries, final_read, liveness, &BeyondPromise::default())
}

/// [`check`], with the acknowledged offsets lost beyond acks=all's promise (`beyond_promise`)
/// left out of `lost`, `inconsistent`, `lost-read` and `acked-offset` and noted instead.
pub fn check_beyond(
    entries: &[Entry],
    final_read: &FinalRead,
    liveness: Option<String>,
    beyond: &BeyondPromise,
) -> Findings {
    let mut findings = Findings {
        liveness,
        ..Findings::default()
    };
    // Everything borrows from the history and the final read: a run has tens of thousands of
    // values, and cloning each into several maps would dominate the checker's time.
    // Sized up front (an upper bound each, or close): no table grows while it fills.
    let (n_ops, n_values, n_reads) = sizes(entries);
    let n_final = final_records(final_read);
    let mut ops: Table<u64, (i32, &[String])> = table(n_ops);
    let mut written: Table<&str, Written> = table(n_values);
    // (partition, offset) → values observed there.
    let mut observed: Table<(i32, i64), Seen> = table(n_values.max(n_final));
    // (value, partition, acknowledged offset, time).
    let mut acked_at: Vec<(&str, i32, i64, u64)> = Vec::with_capacity(n_values);
    // (partition, offset) → (value, high watermark, time) of reads below the high watermark.
    let mut committed_reads: Table<(i32, i64), (&str, i64, u64)> =
        table(n_reads.min(n_values.max(n_final)));
    // (consumer, partition) → last offset read in the current session.
    let mut positions: BTreeMap<(u32, i32), i64> = BTreeMap::new();
    let mut failed_ops: BTreeSet<u64> = BTreeSet::new();
    // What DeleteRecords may have removed: acknowledged records below are not `lost`.
    let mut deletions = crate::delete_check::Deletions::default();
    for entry in entries {
        let at_ms = entry.at_ms;
        match &entry.event {
            Event::Invoke {
                op,
                partition,
                session,
                values,
            } => {
                findings.invoked += 1;
                for (index, v) in values.iter().enumerate() {
                    written.insert(
                        v.as_str(),
                        Written {
                            op: *op,
                            session: *session,
                            partition: *partition,
                            index,
                            acked_ms: None,
                        },
                    );
                }
                ops.insert(*op, (*partition, values.as_slice()));
            }
            Event::Ack { op, offset } => {
                findings.acked += 1;
                if let Some((partition, values)) = ops.get(op) {
                    for (i, v) in values.iter().enumerate() {
                        let at = (*partition, offset + i as i64);
                        let seen = observed.entry(at).or_default();
                        seen.insert(v.as_str());
                        if inconsistent(seen, at, beyond) {
                            findings.evidence(Check::Inconsistent, at_ms);
                        }
                        acked_at.push((v.as_str(), at.0, at.1, at_ms));
                        if let Some(w) = written.get_mut(v.as_str()) {
                            w.acked_ms.get_or_insert(at_ms);
                        }
                    }
                }
            }
            Event::Fail { op, code, .. } => {
                findings.failed += 1;
                *findings
                    .surfaced
                    .entry(format!("producer: {}", crate::produce_errors::name(*code)))
                    .or_default() += 1;
                failed_ops.insert(*op);
            }
            Event::Read {
                consumer,
                partition,
                offset,
                value,
                high_watermark,
            } => {
                let served = Served::new(*partition, *offset, value, *high_watermark, at_ms);
                let reads = (&mut committed_reads, &mut observed);
                judge_served(&served, &written, reads, beyond, &mut findings, || {
                    format!("consumer {consumer}")
                });
                if let Some(prev) = positions.insert((*consumer, *partition), *offset) {
                    if *offset != prev + 1 {
                        findings.evidence(Check::Monotonic, at_ms);
                        push_example(&mut findings.nonmonotonic, || {
                            format!(
                            "consumer {consumer} partition {partition}: read offset {offset} after {prev}"
                        )
                        });
                    }
                }
            }
            Event::Group(GroupEvent::ReadServed {
                member,
                partition,
                offset,
                value,
                high_watermark,
                ..
            }) => {
                // A group member's read: judged as any consumer's, except for `monotonic`
                // (a member's positions jump with every assignment).
                let served = Served::new(*partition, *offset, value, *high_watermark, at_ms);
                let reads = (&mut committed_reads, &mut observed);
                judge_served(&served, &written, reads, beyond, &mut findings, || {
                    format!("group member {member}")
                });
            }
            Event::Reset {
                consumer,
                partition,
                to,
                ..
            } => {
                positions.insert((*consumer, *partition), to - 1);
            }
            Event::Consumer(ConsumerEvent::Truncated {
                consumer,
                partition,
                from,
                to,
                epoch,
                end,
            }) => {
                // The consumer knows its position moved back: reads go on from `to`.
                positions.insert((*consumer, *partition), to - 1);
                findings.truncations.push(format!(
                    "consumer {consumer} partition {partition}: position {from} → {to} (leader: epoch {epoch} ends at {end})"
                ));
            }
            Event::Consumer(ConsumerEvent::Validated { .. }) => findings.validations += 1,
            Event::Consumer(ConsumerEvent::ReadFrom { follower, .. }) => {
                findings.follower_switches += usize::from(*follower);
            }
            Event::CorruptRead {
                consumer,
                partition,
                offset,
                error,
            } => {
                findings.evidence(Check::Corrupt, at_ms);
                push_example(&mut findings.corrupt, || {
                    format!("consumer {consumer} partition {partition} offset {offset}: {error}")
                });
            }
            Event::AdminFail { error, .. } => {
                *findings
                    .surfaced
                    .entry(format!("admin: {}", error_kind(error)))
                    .or_default() += 1;
            }
            Event::Delete(d) => {
                deletions.record(at_ms, d);
                match d {
                    crate::delete_check::DeleteEvent::Sent { .. } => findings.deletions_sent += 1,
                    crate::delete_check::DeleteEvent::Deleted { .. } => {
                        findings.deletions_answered += 1
                    }
                    crate::delete_check::DeleteEvent::Failed { error, .. } => {
                        *findings
                            .surfaced
                            .entry(format!("deleter: {}", error_kind(error)))
                            .or_default() += 1;
                    }
                }
            }
            Event::AdminInvoke { .. }
            | Event::AdminAck { .. }
            | Event::Inject(_)
            | Event::Scheduled(_)
            | Event::Fault(_)
            | Event::Heal(_)
            | Event::Note(_)
            | Event::Group(_)
            | Event::Txn(_)
            | Event::Partition(_) => {}
        }
    }
    let end_ms = entries.last().map_or(0, |e| e.at_ms);
    let mut stored: Table<&str, usize> = table(n_final);
    for (partition, read) in final_read {
        for (offset, value) in &read.records {
            let seen = observed.entry((*partition, *offset)).or_default();
            seen.insert(value.as_str());
            if inconsistent(seen, (*partition, *offset), beyond) {
                findings.evidence(Check::Inconsistent, end_ms);
            }
            *stored.entry(value.as_str()).or_default() += 1;
            if !written.contains_key(value.as_str()) {
                findings.evidence(Check::Corrupt, end_ms);
                push_example(&mut findings.corrupt, || {
                    format!("partition {partition} offset {offset}: phantom value {value:?}")
                });
            }
        }
    }
    for &(v, partition, offset, acked_ms) in &acked_at {
        if !stored.contains_key(v)
            && !beyond.covers(partition, offset)
            && !deletions.excuses(partition, offset)
        {
            findings.evidence(Check::Lost, acked_ms);
            findings.lost.push(v.to_string());
        }
    }
    // Sent and never answered: what a fire-and-forget producer reports as sent. (A producer
    // that waits for answers ends every batch with an ack or a failure; the liveness probe's
    // unanswered batches are liveness's business.)
    let mut sent_lost: Vec<&str> = written
        .iter()
        .filter(|(v, w)| {
            let liveness = w.op >> 40 == (u32::MAX as u64) >> 8;
            w.acked_ms.is_none()
                && !liveness
                && !failed_ops.contains(&w.op)
                && !stored.contains_key(*v)
        })
        .map(|(v, _)| *v)
        .collect();
    sent_lost.sort_unstable();
    for v in sent_lost {
        findings.evidence(Check::Sent, end_ms);
        push_example(&mut findings.sent_lost, || v.to_string());
    }
    // The liveness probe retries without idempotence (a time-out may hide an append), so
    // two copies of its record are allowed.
    let mut duplicated: Vec<&str> = stored
        .iter()
        .filter(|(v, &n)| n > 1 && !v.starts_with("liveness-"))
        .map(|(v, _)| *v)
        .collect();
    duplicated.sort_unstable();
    findings.duplicated = duplicated.into_iter().map(str::to_string).collect();
    if !findings.duplicated.is_empty() {
        findings.evidence(Check::Duplicate, end_ms);
    }
    let mut inconsistent: Vec<((i32, i64), Seen)> = observed
        .into_iter()
        .filter(|(at, values)| inconsistent(values, *at, beyond))
        .collect();
    inconsistent.sort_unstable_by_key(|(at, _)| *at);
    findings.inconsistent = inconsistent
        .into_iter()
        .map(|((p, o), values)| {
            let values = values.values().into_iter().map(str::to_string).collect();
            (p, o, values)
        })
        .collect();
    check_committed_reads(&committed_reads, final_read, beyond, &mut findings);
    check_order(&written, final_read, end_ms, &mut findings);
    check_acked_offsets(&acked_at, final_read, beyond, &mut findings);
    findings.beyond_promise = beyond.notes.clone();
    findings
}

/// One record a consumer was served, with the serving replica's high watermark.
struct Served<'a> {
    partition: i32,
    offset: i64,
    value: &'a String,
    high_watermark: i64,
    at_ms: u64,
}

impl<'a> Served<'a> {
    fn new(
        partition: i32,
        offset: i64,
        value: &'a String,
        high_watermark: i64,
        at_ms: u64,
    ) -> Served<'a> {
        Served {
            partition,
            offset,
            value,
            high_watermark,
            at_ms,
        }
    }
}

/// The committed reads (value, high watermark, time) and the values seen, per offset.
type ReadTables<'t, 'a> = (
    &'t mut Table<(i32, i64), (&'a str, i64, u64)>,
    &'t mut Table<(i32, i64), Seen<'a>>,
);

/// What every read is judged for: a value nobody wrote (`corrupt`), a record at or past the
/// high watermark (`uncommitted`), else knowledge for `lost-read`; and two values at one
/// offset (`inconsistent`). `who` names the reader in examples.
fn judge_served<'a>(
    r: &Served<'a>,
    written: &Table<&'a str, Written>,
    (committed_reads, observed): ReadTables<'_, 'a>,
    beyond: &BeyondPromise,
    findings: &mut Findings,
    who: impl Fn() -> String,
) {
    findings.reads += 1;
    let (partition, offset, value, hw) = (r.partition, r.offset, r.value, r.high_watermark);
    // A value is always invoked before anyone can read it.
    if !written.contains_key(value.as_str()) {
        findings.evidence(Check::Corrupt, r.at_ms);
        push_example(&mut findings.corrupt, || {
            format!(
                "{} partition {partition} offset {offset}: phantom value {value:?}",
                who()
            )
        });
    }
    if offset >= hw {
        findings.evidence(Check::Uncommitted, r.at_ms);
        push_example(&mut findings.uncommitted, || {
            format!(
                "{} partition {partition}: read offset {offset} with high watermark {hw}",
                who()
            )
        });
    } else {
        committed_reads
            .entry((partition, offset))
            .or_insert((value.as_str(), hw, r.at_ms));
    }
    let seen = observed.entry((partition, offset)).or_default();
    seen.insert(value.as_str());
    if inconsistent(seen, (partition, offset), beyond) {
        findings.evidence(Check::Inconsistent, r.at_ms);
    }
}

/// Acknowledged offsets never move: a value acknowledged at `o` is read back at `o` whenever
/// `o` is inside the final read (at or above its start, below where it broke off and below its
/// last record); found only at another offset of its partition, it moved. A value missing
/// altogether past the read's end is `lost`'s business only.
fn check_acked_offsets(
    acked_at: &[(&str, i32, i64, u64)],
    final_read: &FinalRead,
    beyond: &BeyondPromise,
    findings: &mut Findings,
) {
    let at_offset = FinalAt::new(final_read);
    // (partition, value) → its first offset in the final read: needed only for a value not found
    // at its acknowledged offset, so built only when the first such value turns up (a healthy
    // run never builds it).
    let mut offset_of: Option<Table<(i32, &str), i64>> = None;
    for &(value, partition, offset, at_ms) in acked_at {
        let Some(read) = final_read.get(&partition) else {
            continue;
        };
        if offset < read.start
            || read.stopped_at.is_some_and(|s| offset >= s)
            || beyond.covers(partition, offset)
        {
            continue;
        }
        let end = read.records.last().map_or(read.start, |(o, _)| o + 1);
        let here = at_offset.get(partition, offset);
        // Stored at its offset: a second copy elsewhere is `duplicate`'s business.
        if here == Some(value) {
            continue;
        }
        let offset_of = offset_of.get_or_insert_with(|| {
            let mut offset_of = table(final_records(final_read));
            for (p, r) in final_read {
                for (o, v) in &r.records {
                    offset_of.entry((*p, v.as_str())).or_insert(*o);
                }
            }
            offset_of
        });
        let elsewhere = offset_of
            .get(&(partition, value))
            .copied()
            .filter(|&o| o != offset);
        if here.is_none() && offset >= end && elsewhere.is_none() {
            continue;
        }
        findings.evidence(Check::AckedOffset, at_ms);
        push_example(&mut findings.acked_moved, || {
            format!(
                "partition {partition}: {value:?} acknowledged at offset {offset}, final read has {} there{}",
                here.map_or("nothing".to_string(), |v| format!("{v:?}")),
                elsewhere.map_or(String::new(), |o| format!(" and {value:?} at {o}"))
            )
        });
    }
}

/// In a cluster, a partition the final read could not read at all (no leader came back) is
/// unavailable, not known to be empty: its values are dropped from `lost` and `sent` (liveness
/// reports the partition). A single broker keeps the stricter rule: what it cannot serve is
/// gone.
pub fn forget_unread(findings: &mut Findings, entries: &[Entry], final_read: &FinalRead) {
    // Nothing to forget (every run that loses nothing): no table of every produced value.
    if findings.lost.is_empty() && findings.sent_lost.is_empty() {
        findings.evidence_ms.remove(&Check::Lost);
        findings.evidence_ms.remove(&Check::Sent);
        return;
    }
    let mut partition_of: Table<&str, i32> = table(sizes(entries).1);
    for e in entries {
        if let Event::Invoke {
            partition, values, ..
        } = &e.event
        {
            for v in values {
                partition_of.insert(v.as_str(), *partition);
            }
        }
    }
    let read = |v: &String| {
        partition_of
            .get(v.as_str())
            .is_none_or(|p| final_read.contains_key(p))
    };
    findings.lost.retain(read);
    findings.sent_lost.retain(read);
    if findings.lost.is_empty() {
        findings.evidence_ms.remove(&Check::Lost);
    }
    if findings.sent_lost.is_empty() {
        findings.evidence_ms.remove(&Check::Sent);
    }
}

/// The final read's value at (partition, offset). A partition's records are in offset order
/// (`PartitionRead::records`), so a look-up is a binary search in them instead of a table of
/// every final record built for it (two such tables were ~1 % of a run's work). Should a read
/// ever come out of order, a table is built as before (the last record at an offset wins, as a
/// table's insert did), so the answer never depends on the order.
struct FinalAt<'a> {
    final_read: &'a FinalRead,
    unordered: Option<Table<(i32, i64), &'a str>>,
}

impl<'a> FinalAt<'a> {
    fn new(final_read: &'a FinalRead) -> FinalAt<'a> {
        let ordered = final_read
            .values()
            .all(|r| r.records.windows(2).all(|w| w[0].0 < w[1].0));
        let unordered = (!ordered).then(|| {
            let mut at: Table<(i32, i64), &str> = table(final_records(final_read));
            for (p, r) in final_read {
                for (o, v) in &r.records {
                    at.insert((*p, *o), v.as_str());
                }
            }
            at
        });
        FinalAt {
            final_read,
            unordered,
        }
    }

    fn get(&self, partition: i32, offset: i64) -> Option<&'a str> {
        if let Some(at) = &self.unordered {
            return at.get(&(partition, offset)).copied();
        }
        let records = &self.final_read.get(&partition)?.records;
        // A log without gaps has its records at consecutive offsets: try that place first.
        let first = records.first()?.0;
        let guess = usize::try_from(offset - first).ok();
        if let Some((o, v)) = guess.and_then(|i| records.get(i)) {
            if *o == offset {
                return Some(v.as_str());
            }
        }
        let i = records.binary_search_by_key(&offset, |(o, _)| *o).ok()?;
        Some(records[i].1.as_str())
    }
}

/// Lost reads: every read below its reported high watermark must still be there at the end,
/// unless retention has since moved the log start past it.
fn check_committed_reads(
    committed_reads: &Table<(i32, i64), (&str, i64, u64)>,
    final_read: &FinalRead,
    beyond: &BeyondPromise,
    findings: &mut Findings,
) {
    let finals = FinalAt::new(final_read);
    // In (partition, offset) order, as reported.
    let mut reads: Vec<_> = committed_reads.iter().collect();
    reads.sort_unstable_by_key(|(at, _)| **at);
    for (&(partition, offset), &(value, hw, at_ms)) in reads {
        let Some(read) = final_read.get(&partition) else {
            // The final read could not read this partition at all: liveness reports that.
            continue;
        };
        if offset < read.start
            || read.stopped_at.is_some_and(|s| offset >= s)
            || beyond.covers(partition, offset)
            || beyond.covers_read(partition, offset, value)
        {
            continue;
        }
        let now = finals.get(partition, offset);
        if now != Some(value) {
            findings.evidence(Check::LostRead, at_ms);
            findings.lost_reads.push(format!(
                "partition {partition} offset {offset}: read {value:?} (high watermark {hw}), final read has {}",
                now.map_or("nothing".to_string(), |v| format!("{v:?}"))
            ));
        }
    }
}

/// Order: in each partition's final read, the values of one idempotent session (session > 0)
/// must appear in the order they were sent: by batch (op), then by position in the batch.
fn check_order(
    written: &Table<&str, Written>,
    final_read: &FinalRead,
    end_ms: u64,
    findings: &mut Findings,
) {
    for (partition, read) in final_read {
        // (producer, session) → (op, index, offset) of the last value seen.
        let mut last: BTreeMap<(u64, u32), (u64, usize, i64)> = BTreeMap::new();
        for (offset, value) in &read.records {
            let Some(w) = written.get(value.as_str()) else {
                continue;
            };
            if w.session == 0 || w.partition != *partition {
                continue;
            }
            let producer = w.op >> 40;
            let here = (w.op, w.index, *offset);
            // One search per record (the entry), not a look-up and then an insert.
            match last.entry((producer, w.session)) {
                std::collections::btree_map::Entry::Occupied(mut seen) => {
                    let (op, index, at) = *seen.get();
                    if (w.op, w.index) < (op, index) {
                        findings.evidence(Check::Order, w.acked_ms.unwrap_or(end_ms));
                        push_example(&mut findings.misordered, || {
                            format!(
                                "partition {partition}: {value:?} at offset {offset} after batch {} record {index} at {at}",
                                op & ((1 << 40) - 1)
                            )
                        });
                        continue;
                    }
                    *seen.get_mut() = here;
                }
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(here);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(event: Event) -> Entry {
        Entry { at_ms: 0, event }
    }

    /// A read in a response that reported high watermark `hw`.
    fn read_hw(consumer: u32, partition: i32, offset: i64, value: &str, hw: i64) -> Entry {
        at(Event::Read {
            consumer,
            partition,
            offset,
            value: value.into(),
            high_watermark: hw,
        })
    }

    fn read(consumer: u32, partition: i32, offset: i64, value: &str) -> Entry {
        read_hw(consumer, partition, offset, value, i64::MAX)
    }

    fn invoke_in(op: u64, session: u32, values: &[&str]) -> Entry {
        at(Event::Invoke {
            op,
            partition: 0,
            session,
            values: values.iter().map(|v| v.to_string()).collect(),
        })
    }

    fn invoke(op: u64, values: &[&str]) -> Entry {
        invoke_in(op, 0, values)
    }

    fn final_read(start: i64, records: &[(i64, &str)]) -> FinalRead {
        FinalRead::from([(
            0,
            PartitionRead {
                start,
                stopped_at: None,
                records: records.iter().map(|(o, v)| (*o, v.to_string())).collect(),
            },
        )])
    }

    #[test]
    fn clean_history_has_no_findings() {
        let entries = vec![
            invoke(1, &["a", "b"]),
            at(Event::Ack { op: 1, offset: 0 }),
            read_hw(0, 0, 0, "a", 2),
            read_hw(0, 0, 1, "b", 2),
        ];
        let f = check(&entries, &final_read(0, &[(0, "a"), (1, "b")]), None);
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
        let f = check(
            &entries,
            &final_read(0, &[(0, "a"), (1, "c"), (2, "c")]),
            Some("no produce after heal".into()),
        );
        assert_eq!(f.lost, vec!["b".to_string()]);
        assert_eq!(f.duplicated, vec!["c".to_string()]);
        assert!(f.inconsistent.iter().any(|(_, o, _)| *o == 2));
        assert!(f.inconsistent.iter().any(|(_, o, _)| *o == 1));
        assert_eq!(f.nonmonotonic.len(), 1);
        assert!(!f.corrupt.is_empty());
        // The read of "x" at 2 was below its high watermark, and 2 holds "c" at the end.
        assert_eq!(f.lost_reads.len(), 1);
        // "b" acknowledged at 1 where the final read has "c": not at its offset either.
        assert_eq!(f.acked_moved.len(), 1);
        assert_eq!(f.violations(&crate::scenario::Check::all()).len(), 8);
        assert!(f.violations(&[]).is_empty());
        assert!(f
            .first_evidence_ms(&crate::scenario::Check::all())
            .is_some());
    }

    fn delete(op: u64, offset: i64) -> Entry {
        at(Event::Delete(crate::delete_check::DeleteEvent::Sent {
            op,
            partition: 0,
            offset,
        }))
    }

    #[test]
    fn acknowledged_writes_below_a_deletion_are_not_lost() {
        // "a".."d" acknowledged at 0..3; records below 2 deleted (answered), the final read
        // starts at 2.
        let entries = vec![
            invoke(1, &["a", "b", "c", "d"]),
            at(Event::Ack { op: 1, offset: 0 }),
            read_hw(0, 0, 0, "a", 4),
            delete(1, 2),
            at(Event::Delete(crate::delete_check::DeleteEvent::Deleted {
                op: 1,
                low_watermark: 2,
            })),
        ];
        let f = check(&entries, &final_read(2, &[(2, "c"), (3, "d")]), None);
        assert!(f.violations(&Check::all()).is_empty(), "{f:?}");
        // At or past the deletion's offset everything is still judged: "c" missing is lost.
        let f = check(&entries, &final_read(2, &[(3, "d")]), None);
        assert_eq!(f.lost, vec!["c".to_string()]);
        // Without the deletion, "a" and "b" missing are lost writes.
        let f = check(&entries[..3], &final_read(2, &[(2, "c"), (3, "d")]), None);
        assert_eq!(f.lost, vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn an_unanswered_deletion_excuses_only_absence_below_its_offset() {
        // A DeleteRecords below 3 never answered: it may or may not have happened.
        let base = vec![
            invoke(1, &["a", "b", "c", "d"]),
            at(Event::Ack { op: 1, offset: 0 }),
            delete(1, 3),
            at(Event::Delete(crate::delete_check::DeleteEvent::Failed {
                op: 1,
                error: "timed out".into(),
            })),
        ];
        // Taken effect: nothing lost.
        let f = check(&base, &final_read(3, &[(3, "d")]), None);
        assert!(f.violations(&Check::all()).is_empty(), "{f:?}");
        // Not taken effect: nothing lost either.
        let all = [(0, "a"), (1, "b"), (2, "c"), (3, "d")];
        let f = check(&base, &final_read(0, &all), None);
        assert!(f.violations(&Check::all()).is_empty(), "{f:?}");
        // Another value where "b" was acknowledged is still judged.
        let f = check(
            &base,
            &final_read(0, &[(0, "a"), (1, "x"), (2, "c"), (3, "d")]),
            None,
        );
        assert!(!f.inconsistent.is_empty(), "{f:?}");
        assert_eq!(f.acked_moved.len(), 1, "{f:?}");
    }

    #[test]
    fn a_fire_and_forget_write_missing_at_the_end_is_sent_and_lost() {
        // Batch 1 was never answered (acks=0), batch 2 failed, batch 3 was answered: only the
        // missing value of batch 1 counts, and only under the `sent` check.
        let entries = vec![
            invoke(1, &["a", "b"]),
            invoke(2, &["c"]),
            at(Event::Fail {
                op: 2,
                code: -192,
                error: "timed out".into(),
            }),
            invoke(3, &["d"]),
            at(Event::Ack { op: 3, offset: 1 }),
        ];
        let f = check(&entries, &final_read(0, &[(0, "a"), (1, "d")]), None);
        assert_eq!(f.sent_lost, vec!["b".to_string()]);
        assert!(f.violations(&Check::all()).is_empty(), "{f:?}");
        assert_eq!(
            f.violations(&[Check::Sent]),
            vec!["1 sent writes (never answered) lost".to_string()]
        );
    }

    #[test]
    fn a_detected_truncation_moves_the_position_and_an_undetected_one_is_caught() {
        let truncated = at(Event::Consumer(ConsumerEvent::Truncated {
            consumer: 0,
            partition: 0,
            from: 3,
            to: 1,
            epoch: 2,
            end: 1,
        }));
        let entries = vec![
            invoke(1, &["a", "b", "c", "d"]),
            read_hw(0, 0, 0, "a", 1),
            read_hw(0, 0, 1, "b", 2),
            read_hw(0, 0, 2, "c", 2),
            truncated,
            read_hw(0, 0, 1, "d", 2),
        ];
        let last = final_read(0, &[(0, "a"), (1, "d")]);
        let f = check(&entries, &last, None);
        assert!(f.nonmonotonic.is_empty(), "{f:?}");
        assert_eq!(f.truncations.len(), 1);
        // "b" was read below the high watermark the replica reported, and is gone.
        assert_eq!(f.lost_reads.len(), 1, "{f:?}");
        // Without the validation's event, going back to offset 1 is a skip as well.
        let mut undetected = entries.clone();
        undetected.remove(4);
        let f = check(&undetected, &last, None);
        assert_eq!(f.nonmonotonic.len(), 1, "{f:?}");
        assert!(f.truncations.is_empty());
    }

    #[test]
    fn surfaced_errors_are_counted_by_kind() {
        assert_eq!(
            error_kind("broker error: NotEnoughReplicas: topic t"),
            "broker error: NotEnoughReplicas"
        );
        assert_eq!(error_kind("i/o: connection reset"), "i/o");
        assert_eq!(error_kind("retries exhausted"), "retries exhausted");
        let entries = vec![
            invoke(1, &["a"]),
            at(Event::Fail {
                op: 1,
                code: 19,
                error: "retries exhausted".into(),
            }),
            at(Event::AdminFail {
                op: 2,
                definite: true,
                error: "broker error: NotController: x".into(),
            }),
        ];
        let f = check(&entries, &final_read(0, &[]), None);
        assert_eq!(f.surfaced["producer: NotEnoughReplicas"], 1);
        assert_eq!(f.surfaced["admin: broker error: NotController"], 1);
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

    #[test]
    fn a_committed_read_taken_back_is_a_lost_read() {
        // Never acknowledged (the producer gave up), but read below the high watermark; the
        // final log is shorter. Nothing else landed at offset 1, so only the read knows.
        let entries = vec![
            invoke(1, &["a", "b"]),
            at(Event::Fail {
                op: 1,
                code: -192,
                error: "timed out".into(),
            }),
            read_hw(0, 0, 0, "a", 2),
            read_hw(0, 0, 1, "b", 2),
        ];
        let f = check(&entries, &final_read(0, &[(0, "a")]), None);
        assert_eq!(f.lost_reads.len(), 1, "{f:?}");
        assert!(f.lost.is_empty() && f.inconsistent.is_empty());
        assert_eq!(
            f.violations(&[Check::LostRead]),
            vec!["1 committed reads taken back".to_string()]
        );
    }

    #[test]
    fn reads_below_the_log_start_or_past_the_high_watermark_are_not_knowledge() {
        let entries = vec![
            invoke(1, &["a", "b"]),
            read_hw(0, 0, 0, "a", 2),
            // Served past the high watermark it reported: a violation of its own...
            read_hw(1, 0, 1, "b", 1),
        ];
        // ...but not a lost read; "a" went to retention (start 1).
        let f = check(&entries, &final_read(1, &[]), None);
        assert!(f.lost_reads.is_empty(), "{f:?}");
        assert_eq!(f.uncommitted.len(), 1);
    }

    #[test]
    fn order_holds_within_an_idempotent_session_only() {
        let op = |producer: u64, batch: u64| (producer << 40) | batch;
        let entries = vec![
            invoke_in(op(0, 0), 1, &["p0-0-0", "p0-0-1"]),
            invoke_in(op(0, 1), 1, &["p0-1-0"]),
            invoke_in(op(0, 2), 2, &["p0-2-0"]),
            invoke_in(op(1, 0), 0, &["p1-0-0"]),
            invoke_in(op(1, 1), 0, &["p1-1-0"]),
        ];
        // Session 1 reordered (batch 1 before batch 0); session 2 may come before session 1;
        // session 0 (not idempotent) promises nothing.
        let stored = final_read(
            0,
            &[
                (0, "p0-2-0"),
                (1, "p0-1-0"),
                (2, "p0-0-0"),
                (3, "p0-0-1"),
                (4, "p1-1-0"),
                (5, "p1-0-0"),
            ],
        );
        let f = check(&entries, &stored, None);
        // p0-0-0 and p0-0-1 both come after batch 1 of the same session.
        assert_eq!(f.misordered.len(), 2, "{f:?}");
        assert!(f.misordered[0].contains("p0-0-0"));
    }

    #[test]
    fn an_acknowledged_value_read_back_elsewhere_moved() {
        // "a" acknowledged at 1 by a leader whose log a later leader does not share: the final
        // log holds "a" at 0 (a retry's copy) and ends there. Neither lost nor inconsistent.
        let entries = vec![invoke(1, &["a"]), at(Event::Ack { op: 1, offset: 1 })];
        let f = check(&entries, &final_read(0, &[(0, "a")]), None);
        assert!(f.lost.is_empty() && f.inconsistent.is_empty(), "{f:?}");
        assert_eq!(f.acked_moved.len(), 1, "{f:?}");
        assert_eq!(
            f.violations(&[Check::AckedOffset]),
            vec!["1 acknowledged values not at their acknowledged offset".to_string()]
        );
        // A hole inside the read where an acknowledged value was: moved too (and lost).
        let entries = vec![
            invoke(1, &["a"]),
            at(Event::Ack { op: 1, offset: 1 }),
            invoke(2, &["b"]),
            at(Event::Ack { op: 2, offset: 2 }),
        ];
        let f = check(&entries, &final_read(0, &[(2, "b")]), None);
        assert_eq!((f.acked_moved.len(), f.lost.len()), (1, 1), "{f:?}");
    }

    #[test]
    fn acknowledged_offsets_past_the_read_or_with_a_second_copy_are_not_moved() {
        // Acknowledged at 3, and a retry's copy at 0 as well: a duplicate, not a move.
        let entries = vec![
            invoke(1, &["a"]),
            at(Event::Ack { op: 1, offset: 3 }),
            invoke(2, &["b"]),
            at(Event::Ack { op: 2, offset: 5 }),
        ];
        let stored = final_read(0, &[(0, "a"), (1, "x"), (2, "y"), (3, "a")]);
        let f = check(&entries, &stored, None);
        assert!(f.acked_moved.is_empty(), "{f:?}");
        // "b" at 5, past the read's end and nowhere else: lost only.
        assert_eq!(f.lost, vec!["b".to_string()]);
        assert_eq!(f.duplicated, vec!["a".to_string()]);
    }

    #[test]
    fn errors_after_an_append_are_indeterminate() {
        // Notes §2.5: a batch failed with NOT_ENOUGH_REPLICAS_AFTER_APPEND (or timed out, or
        // lost its connection) may or may not be in the log; present or absent, no violation.
        let failed = |op: u64, error: &str| {
            at(Event::Fail {
                op,
                code: 7,
                error: error.into(),
            })
        };
        let entries = vec![
            invoke(1, &["a"]),
            failed(1, "broker error: NOT_ENOUGH_REPLICAS_AFTER_APPEND"),
            invoke(2, &["b"]),
            failed(2, "broker error: REQUEST_TIMED_OUT"),
            invoke(3, &["c"]),
            failed(3, "i/o: connection reset"),
            invoke(4, &["d"]),
            at(Event::Ack { op: 4, offset: 1 }),
        ];
        let f = check(
            &entries,
            &final_read(0, &[(0, "a"), (1, "d"), (2, "c")]),
            None,
        );
        assert!(f.violations(&Check::all()).is_empty(), "{f:?}");
        let f = check(&entries, &final_read(0, &[(0, "x0"), (1, "d")]), None);
        // Only the phantom "x0" is wrong: "a", "b" and "c" may be missing.
        assert_eq!(
            f.violations(&Check::all()),
            vec!["1 corrupt or phantom reads".to_string()]
        );
        // ...but a failed value a consumer read below the high watermark is knowledge.
        let mut read_it = entries.clone();
        read_it.push(read_hw(0, 0, 0, "a", 2));
        let f = check(&read_it, &final_read(0, &[(1, "d")]), None);
        assert_eq!(f.lost_reads.len(), 1, "{f:?}");
    }

    #[test]
    fn an_unread_partition_of_a_cluster_is_unknown_not_lost() {
        let entries = vec![
            invoke(1, &["a"]),
            at(Event::Ack { op: 1, offset: 0 }),
            at(Event::Invoke {
                op: 2,
                partition: 1,
                session: 0,
                values: vec!["b".into()],
            }),
            at(Event::Ack { op: 2, offset: 0 }),
        ];
        // Partition 1 was not read (no leader); partition 0 was, and lost "a".
        let stored = final_read(0, &[]);
        let mut f = check(&entries, &stored, None);
        assert_eq!(f.lost.len(), 2);
        forget_unread(&mut f, &entries, &stored);
        assert_eq!(f.lost, vec!["a".to_string()]);
    }
}
