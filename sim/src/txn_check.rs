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
//!   healing (a transaction left hanging);
//! - misdirected: an EndTxn of transaction n, held in the network until the producer's next
//!   transaction had written, was accepted — it ended a transaction the client did not end
//!   (KAFKA-17754; transactions v2's epoch bump fences it, v1 accepts it by design);
//! - stale offset commit: a pipeline task's group offset is the one a TxnOffsetCommit of its
//!   transaction n sent in an attempt the client abandoned (timed out, sent again on a new
//!   connection), where the last committed transaction m > n at the same producer epoch had
//!   committed another: the abandoned request reached the group coordinator inside m and
//!   replaced m's offsets. Transactions v1 cannot tell two transactions of one epoch apart
//!   (Kafka's too); v2's per-transaction epoch bump fences it.

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
        /// It speaks transactions v2 (KIP-890 part 2).
        #[serde(default)]
        v2: bool,
        /// It named its previous producer id and epoch (KIP-360, InitProducerId v5).
        #[serde(default)]
        resumed: bool,
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
    /// The EndTxn of `producer`'s transaction `txn`, held in the network, reached the
    /// coordinator late and was answered: `error` none = accepted. `during`: the later
    /// transaction whose acknowledged write released it at `released_ms` (none: released by
    /// the time limit).
    LateEnd {
        producer: u32,
        txn: u64,
        commit: bool,
        producer_id: i64,
        epoch: i16,
        during: Option<u64>,
        released_ms: u64,
        /// The producer id and epoch an accepted EndTxn v5 answered (none before v5): one
        /// epoch above the request's is the answer to a retry of transaction n's own end,
        /// which changes nothing (a coordinator that has not yet learned it lost the id
        /// answers so from what it last knew).
        #[serde(default)]
        answered: Option<(i64, i16)>,
        error: Option<String>,
    },
    /// A live read_committed consumer returned `value` at `offset`, in a Fetch that moved its
    /// position to `upto`.
    Read {
        partition: i32,
        offset: i64,
        value: String,
        #[serde(default)]
        upto: i64,
    },
    /// Consume-transform-produce (`txn_pipeline`): `task`'s transaction `txn` consumed
    /// `inputs` of input `partition`, from `from` (its position) up to `to` (the offset it
    /// commits); its outputs are its `Send`s.
    Consumed {
        task: u32,
        txn: u64,
        partition: i32,
        from: i64,
        to: i64,
        inputs: Vec<(i64, String)>,
    },
    /// A pipeline task's TxnOffsetCommit attempt in its transaction `txn`: `offset` of input
    /// `partition` at (`producer_id`, `epoch`). `abandoned`: no answer within the client's
    /// request time-out, so the client gave up on it and sent it again on a new connection —
    /// the request itself may still reach the group coordinator later; else `error` none =
    /// accepted.
    OffsetCommit {
        task: u32,
        txn: u64,
        partition: i32,
        offset: i64,
        producer_id: i64,
        epoch: i16,
        abandoned: bool,
        error: Option<String>,
    },
    /// `task` (re)started from the group's committed `offset` of input `partition`.
    Restarted {
        task: u32,
        partition: i32,
        offset: i64,
    },
    /// The group's committed offset of input `partition` after the final read (`None`: the
    /// coordinator never answered).
    Committed { partition: i32, offset: Option<i64> },
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
    /// A live read returned part of a transaction's records on a partition, stopping right
    /// at the next record of that decided transaction (Jepsen's intermediate read).
    pub intermediate: Vec<String>,
    /// Consume-transform-produce: committed offsets that do not match what the committed
    /// transactions consumed (a gap or an overlap between them, a restart or the final offset
    /// elsewhere than where the last committed transaction ended).
    pub offsets: Vec<String>,
    /// Late EndTxns accepted after the later transaction that released them had written (and
    /// before it ended): they ended a transaction the client did not end.
    pub misdirected: Vec<String>,
    /// Group offsets that an abandoned TxnOffsetCommit of an earlier transaction set inside a
    /// later committed transaction of the same producer epoch (Kafka's transactions v1 limit).
    pub stale_offset_commits: Vec<String>,
    /// TxnOffsetCommit attempts the clients abandoned (timed out).
    pub abandoned_offset_commits: usize,
    /// Late (held) EndTxns delivered, and how many of them were accepted.
    pub late_ends: usize,
    pub late_ends_accepted: usize,
    /// Consume-transform-produce transactions and restarts seen.
    pub pipeline_transactions: usize,
    pub restarts: usize,
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
            + self.intermediate.len()
            + self.offsets.len()
            + self.misdirected.len()
            + self.stale_offset_commits.len()
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

/// The output of consume-transform-produce `task`'s transaction `txn` for the input record
/// at `offset`.
pub fn output_value(task: u32, txn: u64, offset: i64) -> String {
    format!("y{task}-{txn}-{offset}")
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
    let mut reads: Vec<(u64, i32, i64, String, i64)> = Vec::new();
    let mut pipeline: Vec<&Entry> = Vec::new();
    let mut committed_offsets: BTreeMap<i32, (u64, Option<i64>)> = BTreeMap::new();
    let mut finals: BTreeMap<i32, (u64, &Stored)> = BTreeMap::new();
    // When each transaction ended or was abandoned, and the late EndTxns accepted.
    let mut finished: BTreeMap<TxnKey, u64> = BTreeMap::new();
    let mut accepted_late: Vec<(u64, &TxnEvent)> = Vec::new();
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
            } => {
                txns.entry((*producer, *txn)).or_default().ended = Some(*commit);
                finished.entry((*producer, *txn)).or_insert(e.at_ms);
            }
            TxnEvent::Abandoned { producer, txn, .. } => {
                finished.entry((*producer, *txn)).or_insert(e.at_ms);
            }
            TxnEvent::LateEnd { error, .. } => {
                f.late_ends += 1;
                if error.is_none() {
                    f.late_ends_accepted += 1;
                    accepted_late.push((e.at_ms, t));
                }
            }
            TxnEvent::Read {
                partition,
                offset,
                value,
                upto,
            } => reads.push((e.at_ms, *partition, *offset, value.clone(), *upto)),
            TxnEvent::OffsetCommit { abandoned, .. } => {
                f.abandoned_offset_commits += usize::from(*abandoned);
                pipeline.push(e);
            }
            TxnEvent::Consumed { .. } | TxnEvent::Restarted { .. } => pipeline.push(e),
            TxnEvent::Committed { partition, offset } => {
                committed_offsets.insert(*partition, (e.at_ms, *offset));
            }
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
    for (at, late) in accepted_late {
        let TxnEvent::LateEnd {
            producer,
            txn,
            commit,
            producer_id,
            epoch,
            during: Some(m),
            released_ms,
            answered,
            ..
        } = late
        else {
            continue;
        };
        if *answered == Some((*producer_id, epoch.saturating_add(1))) {
            continue; // the answer to a retry of transaction n's end: nothing was ended
        }
        // Released by an acknowledged write of a later transaction m, so the coordinator had
        // m open (its partition added) before the request arrived. Under v2 the answer to the
        // retried EndTxn moved the epoch past this request's, so a coordinator must fence it
        // whatever happened since; accepted, it ended m (or what followed m at the same
        // epoch), which v1 does by design. Not judged: a release by the time limit, or one
        // after m had already ended.
        let open_at_release = finished
            .get(&(*producer, *m))
            .is_none_or(|ended| ended > released_ms);
        if m > txn && open_at_release {
            evident(&mut f, at);
            let what = if *commit { "commit" } else { "abort" };
            push(
                &mut f.misdirected,
                format!(
                    "producer {producer}: the late EndTxn({what}) of transaction {txn} was \
                     accepted after its transaction {m} had written"
                ),
            );
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
    for (at, partition, offset, v, upto) in reads {
        // Intermediate read: the Fetch that returned this record stopped right at a record of
        // the same transaction (it was decided, so the last stable offset and the high
        // watermark were past its marker: nothing could stop a read there). A stop earlier, at
        // another transaction's record, is Kafka's: a transaction still open there holds the
        // LSO, and the decided ones interleaved with it show in part until it is decided.
        // `upto` is 0 in histories from before it was recorded.
        if let Some(t) = owner
            .get(&v)
            .and_then(|k| txns.get(k))
            .filter(|_| upto > offset)
        {
            let later = t
                .values
                .iter()
                .flat_map(|w| stored.get(w.as_str()))
                .flatten()
                .find(|&&(p, o)| p == partition && o == upto);
            if let Some((_, o)) = later {
                evident(&mut f, at);
                push(
                    &mut f.intermediate,
                    format!(
                        "{v} read at {partition}/{offset} by a Fetch that ended at {upto}, \
                         its transaction's record at {o} not with it"
                    ),
                );
            }
        }
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
    check_pipeline(
        &mut f,
        &txns,
        &stored,
        &finals,
        &pipeline,
        &committed_offsets,
        end,
    );
    f
}

/// (producer or task, transaction).
type TxnKey = (u32, u64);

/// A task's TxnOffsetCommit attempts: the abandoned ones (transaction, offset, producer id and
/// epoch) and, per transaction, the producer id and epoch of an accepted one.
#[derive(Default)]
struct Attempts {
    abandoned: Vec<(u64, i64, (i64, i16))>,
    accepted: BTreeMap<u64, (i64, i16)>,
}

/// Per task, its TxnOffsetCommit attempts.
type Commits = BTreeMap<u32, Attempts>;

/// The group's offset for `task` is `found` where its last committed transaction `last`
/// committed `expected`: a stale offset commit if an attempt of an earlier transaction at
/// `last`'s producer id and epoch sent `found` and was abandoned by the client.
fn stale_commit(
    f: &mut TxnFindings,
    commits: &Commits,
    task: u32,
    last: u64,
    found: i64,
    expected: i64,
) {
    let Some(attempts) = commits.get(&task) else {
        return;
    };
    let Some(&at) = attempts.accepted.get(&last) else {
        return;
    };
    let stale = attempts
        .abandoned
        .iter()
        .find(|&&(n, offset, producer)| n < last && offset == found && producer == at);
    if let Some((n, _, (pid, epoch))) = stale {
        let what = format!(
            "task {task}: the abandoned TxnOffsetCommit({found}) of transaction {n} was \
                 accepted inside transaction {last} of the same producer {pid} epoch {epoch}, \
                 replacing its {expected} (Kafka's transactions v1 limit; v2 fences it)"
        );
        if !f.stale_offset_commits.contains(&what) {
            push(&mut f.stale_offset_commits, what);
        }
    }
}
/// What a pipeline transaction consumed: input partition, from, to, the inputs.
type Consumption<'a> = (i32, i64, i64, &'a [(i64, String)]);

/// Consume-transform-produce, exactly once: the committed transactions of each input
/// partition consumed one contiguous run from offset 0 to the committed offset, each restart
/// began where the last committed transaction ended, every committed input below the committed
/// offset has exactly one committed output, and every committed output is of a committed
/// input (its value as the final read holds it).
fn check_pipeline(
    f: &mut TxnFindings,
    txns: &BTreeMap<(u32, u64), Txn>,
    stored: &BTreeMap<&str, Vec<(i32, i64)>>,
    finals: &BTreeMap<i32, (u64, &Stored)>,
    pipeline: &[&Entry],
    committed_offsets: &BTreeMap<i32, (u64, Option<i64>)>,
    end: u64,
) {
    // (task, txn) → (input partition, from, to, inputs), and whether its outputs are visible.
    let mut consumed: BTreeMap<TxnKey, Consumption> = BTreeMap::new();
    let visible = |key: &(u32, u64)| {
        txns.get(key)
            .is_some_and(|t| t.values.iter().any(|v| stored.contains_key(v.as_str())))
    };
    // Per task, the `to` of its last visible transaction so far (in history order), and that
    // transaction.
    let mut last_end: BTreeMap<u32, (i64, u64)> = BTreeMap::new();
    let mut commits = Commits::default();
    for e in pipeline {
        let Event::Txn(t) = &e.event else { continue };
        match t {
            TxnEvent::OffsetCommit {
                task,
                txn,
                offset,
                producer_id,
                epoch,
                abandoned,
                error,
                ..
            } => {
                let attempts = commits.entry(*task).or_default();
                if *abandoned {
                    attempts
                        .abandoned
                        .push((*txn, *offset, (*producer_id, *epoch)));
                } else if error.is_none() {
                    attempts.accepted.insert(*txn, (*producer_id, *epoch));
                }
            }
            TxnEvent::Consumed {
                task,
                txn,
                partition,
                from,
                to,
                inputs,
            } => {
                f.pipeline_transactions += 1;
                consumed.insert((*task, *txn), (*partition, *from, *to, inputs));
                if visible(&(*task, *txn)) {
                    last_end.insert(*task, (*to, *txn));
                }
            }
            TxnEvent::Restarted {
                task,
                partition,
                offset,
            } => {
                f.restarts += 1;
                let (expected, last) = last_end.get(task).copied().unwrap_or((0, 0));
                if *offset != expected {
                    evident(f, e.at_ms);
                    stale_commit(f, &commits, *task, last, *offset, expected);
                    push(
                        &mut f.offsets,
                        format!(
                            "task {task} restarted on input {partition} from committed offset \
                             {offset}; its committed transactions consumed up to {expected}"
                        ),
                    );
                }
            }
            _ => {}
        }
    }
    if consumed.is_empty() {
        return;
    }
    // Input partition → its visible transactions by `from`.
    let mut chains: BTreeMap<i32, Vec<(i64, i64, TxnKey)>> = BTreeMap::new();
    // (input partition, input offset) → the visible outputs of it, with the value consumed.
    let mut outputs: BTreeMap<(i32, i64), Vec<(&str, TxnKey)>> = BTreeMap::new();
    for (key, &(partition, from, to, inputs)) in &consumed {
        if !visible(key) {
            continue;
        }
        chains.entry(partition).or_default().push((from, to, *key));
        for (offset, v) in inputs {
            let out = output_value(key.0, key.1, *offset);
            if stored.contains_key(out.as_str()) {
                outputs
                    .entry((partition, *offset))
                    .or_default()
                    .push((v, *key));
            }
        }
    }
    for (&partition, (_, input)) in finals
        .iter()
        .filter(|(p, _)| committed_offsets.contains_key(p))
    {
        let committed = match committed_offsets[&partition].1 {
            Some(o) => o,
            None => continue,
        };
        let mut chain = chains.remove(&partition).unwrap_or_default();
        chain.sort();
        let mut expected = 0;
        for (from, to, (task, txn)) in &chain {
            if *from != expected {
                evident(f, end);
                push(
                    &mut f.offsets,
                    format!(
                        "input {partition}: task {task} transaction {txn} consumed from {from}, \
                         the committed transactions before it up to {expected}"
                    ),
                );
            }
            expected = *to;
        }
        if committed != expected {
            evident(f, end);
            if let Some((_, _, (task, txn))) = chain.last() {
                stale_commit(f, &commits, *task, *txn, committed, expected);
            }
            push(
                &mut f.offsets,
                format!(
                    "input {partition}: committed offset {committed}, the committed \
                     transactions consumed up to {expected}"
                ),
            );
        }
        let held: BTreeMap<i64, &str> = input.iter().map(|(o, v)| (*o, v.as_str())).collect();
        for (&offset, &v) in held.range(..committed) {
            match outputs.get(&(partition, offset)).map_or(0, |o| o.len()) {
                1 => {}
                0 => {
                    evident(f, end);
                    push(
                        &mut f.lost,
                        format!(
                            "input {partition}/{offset} ({v}) below the committed offset has \
                             no committed output"
                        ),
                    );
                }
                n => {
                    evident(f, end);
                    push(
                        &mut f.duplicated,
                        format!("input {partition}/{offset} ({v}) has {n} committed outputs"),
                    );
                }
            }
        }
        for (&(p, offset), outs) in outputs.range((partition, i64::MIN)..=(partition, i64::MAX)) {
            for (v, (task, txn)) in outs {
                if held.get(&offset) != Some(v) {
                    evident(f, end);
                    push(
                        &mut f.aborted_reads,
                        format!(
                            "task {task} transaction {txn} consumed {v} at {p}/{offset}, which \
                             the final read_committed read does not hold there"
                        ),
                    );
                }
            }
        }
    }
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
                upto: 1,
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
                upto: 3,
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
                upto: 6,
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

    #[test]
    fn an_intermediate_read_is_caught() {
        // Transaction 1 wrote two records to partition 0 (offsets 0 and 1); a Fetch that
        // returned the first and left the reader at 1 read part of it.
        let mut h = vec![
            at(1, send(1, 0)),
            at(
                2,
                TxnEvent::Send {
                    producer: 0,
                    txn: 1,
                    partition: 0,
                    value: "second".into(),
                },
            ),
            at(3, ended(1, true)),
        ];
        let stored = |h: &mut Vec<Entry>| {
            h.push(at(
                10,
                TxnEvent::Final {
                    partition: 0,
                    values: vec![(0, value(0, 1, 0)), (1, "second".into())],
                    settled: true,
                    last_stable_offset: 3,
                    high_watermark: 3,
                },
            ))
        };
        let read = |upto| TxnEvent::Read {
            partition: 0,
            offset: 0,
            value: value(0, 1, 0),
            upto,
        };
        let mut whole = h.clone();
        whole.push(at(4, read(3)));
        stored(&mut whole);
        assert_eq!(check(&whole).count(), 0, "{:?}", check(&whole));
        h.push(at(4, read(1)));
        stored(&mut h);
        let f = check(&h);
        assert_eq!((f.intermediate.len(), f.count()), (1, 1), "{f:?}");
        assert_eq!(f.first_ms, Some(4));
    }

    fn late_end(txn: u64, during: Option<u64>, error: Option<&str>) -> TxnEvent {
        TxnEvent::LateEnd {
            producer: 0,
            txn,
            commit: true,
            producer_id: 7,
            epoch: 0,
            during,
            released_ms: 4,
            answered: None,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn a_late_end_txn_that_ends_the_next_transaction_is_caught() {
        // Transaction 1 commits (its EndTxn retried after the first was held); transaction 2
        // writes, which releases the held EndTxn of transaction 1; transaction 2 then commits.
        let history = |late: TxnEvent| {
            let mut h = vec![
                at(1, send(1, 0)),
                at(2, ended(1, true)),
                at(3, send(2, 1)),
                at(4, late),
                at(5, ended(2, true)),
                at(10, last(0, &[(0, 1)])),
                at(11, last(1, &[(0, 2)])),
            ];
            h.sort_by_key(|e| e.at_ms);
            h
        };
        // Fenced (transactions v2): clean, and counted.
        let f = check(&history(late_end(1, Some(2), Some("PRODUCER_FENCED"))));
        assert_eq!(f.count(), 0, "{f:?}");
        assert_eq!((f.late_ends, f.late_ends_accepted), (1, 0));
        // Accepted after transaction 2 had written: it ended transaction 2.
        let f = check(&history(late_end(1, Some(2), None)));
        assert_eq!((f.misdirected.len(), f.count()), (1, 1), "{f:?}");
        assert_eq!(f.first_ms, Some(4));
        // Answered as a retry of transaction 1's own end (v5: the epoch after it): nothing
        // ended; the same epoch back (no bump) is an end of transaction 2.
        let answered = |a| {
            let mut late = late_end(1, Some(2), None);
            if let TxnEvent::LateEnd { answered, .. } = &mut late {
                *answered = Some(a);
            }
            check(&history(late)).count()
        };
        assert_eq!((answered((7, 1)), answered((7, 0))), (0, 1));
        // Accepted but released by the time limit, or by a transaction that had ended before
        // the release: not judged (a retry may be answered NONE before the next transaction
        // began).
        assert_eq!(check(&history(late_end(1, None, None))).count(), 0);
        let mut late = late_end(1, Some(2), None);
        if let TxnEvent::LateEnd { released_ms, .. } = &mut late {
            *released_ms = 6;
        }
        let mut h = history(late);
        h[3].at_ms = 7;
        h.sort_by_key(|e| e.at_ms);
        assert_eq!(check(&h).count(), 0, "{:?}", check(&h));
    }

    const TASK: u32 = 100;

    fn consumed(txn: u64, from: i64, to: i64, inputs: &[(i64, &str)]) -> TxnEvent {
        TxnEvent::Consumed {
            task: TASK,
            txn,
            partition: 0,
            from,
            to,
            inputs: inputs.iter().map(|&(o, v)| (o, v.to_string())).collect(),
        }
    }

    fn output(txn: u64, input: i64) -> TxnEvent {
        TxnEvent::Send {
            producer: TASK,
            txn,
            partition: 1000 + (input % 2) as i32,
            value: output_value(TASK, txn, input),
        }
    }

    fn piped(txn: u64, commit: bool) -> TxnEvent {
        TxnEvent::Ended {
            producer: TASK,
            txn,
            commit,
        }
    }

    fn restarted(offset: i64) -> TxnEvent {
        TxnEvent::Restarted {
            task: TASK,
            partition: 0,
            offset,
        }
    }

    fn finals(
        input: &[(i64, &str)],
        out: &[(i32, Vec<(i64, String)>)],
        committed: i64,
    ) -> Vec<Entry> {
        let mut h = vec![at(
            50,
            TxnEvent::Final {
                partition: 0,
                values: input.iter().map(|&(o, v)| (o, v.to_string())).collect(),
                settled: true,
                last_stable_offset: 9,
                high_watermark: 9,
            },
        )];
        for (p, values) in out {
            h.push(at(
                51,
                TxnEvent::Final {
                    partition: *p,
                    values: values.clone(),
                    settled: true,
                    last_stable_offset: 9,
                    high_watermark: 9,
                },
            ));
        }
        h.push(at(
            52,
            TxnEvent::Committed {
                partition: 0,
                offset: Some(committed),
            },
        ));
        h
    }

    /// Input partition 0 holds a, b, c at 0, 1, 3 (a marker at 2). Transaction 1 consumes
    /// [0, 2) and commits; transaction 2 consumes [2, 4) and aborts; the task restarts from 2
    /// and transaction 3 consumes [2, 4) again and commits.
    fn pipeline_base() -> Vec<Entry> {
        let mut h = first_consumed();
        h.extend([
            at(5, piped(1, true)),
            at(6, consumed(2, 2, 4, &[(3, "c")])),
            at(7, output(2, 3)),
            at(8, piped(2, false)),
        ]);
        h
    }

    /// The start both pipeline histories share: input a, b, c committed to partition 0 (a
    /// marker at 2), the task started from 0, and transaction 1 consumed [0, 2) and wrote its
    /// two outputs (times 0 to 4).
    fn first_consumed() -> Vec<Entry> {
        let input = |txn, v: &str| TxnEvent::Send {
            producer: 0,
            txn,
            partition: 0,
            value: v.into(),
        };
        vec![
            at(0, input(1, "a")),
            at(0, input(2, "b")),
            at(0, input(3, "c")),
            at(0, ended(1, true)),
            at(0, ended(2, true)),
            at(0, ended(3, true)),
            at(1, restarted(0)),
            at(2, consumed(1, 0, 2, &[(0, "a"), (1, "b")])),
            at(3, output(1, 0)),
            at(4, output(1, 1)),
        ]
    }

    const INPUT: [(i64, &str); 3] = [(0, "a"), (1, "b"), (3, "c")];

    #[test]
    fn a_clean_pipeline_passes() {
        let mut h = pipeline_base();
        h.push(at(9, restarted(2)));
        h.push(at(10, consumed(3, 2, 4, &[(3, "c")])));
        h.push(at(11, output(3, 3)));
        h.push(at(12, piped(3, true)));
        h.extend(finals(
            &INPUT,
            &[
                (1000, vec![(0, output_value(TASK, 1, 0))]),
                (
                    1001,
                    vec![(0, output_value(TASK, 1, 1)), (2, output_value(TASK, 3, 3))],
                ),
            ],
            4,
        ));
        let f = check(&h);
        assert_eq!(f.count(), 0, "{f:?}");
        assert_eq!((f.pipeline_transactions, f.restarts), (3, 2));
        assert_eq!((f.transactions, f.committed, f.aborted), (6, 5, 1));
    }

    #[test]
    fn offsets_committed_on_abort_are_caught() {
        // The aborted transaction's offset 4 became the committed one: the restart skips c.
        let mut h = pipeline_base();
        h.push(at(9, restarted(4)));
        h.extend(finals(
            &INPUT,
            &[
                (1000, vec![(0, output_value(TASK, 1, 0))]),
                (1001, vec![(0, output_value(TASK, 1, 1))]),
            ],
            4,
        ));
        let f = check(&h);
        assert_eq!(f.offsets.len(), 2, "restart and final offset: {f:?}");
        assert_eq!(f.lost.len(), 1, "c has no output: {f:?}");
        assert_eq!(f.count(), 3);
        assert_eq!(f.first_ms, Some(9));
    }

    #[test]
    fn reprocessed_and_misread_inputs_are_caught() {
        // Transaction 3 consumed from 0 again (an overlap: a and b twice), and transaction 1
        // consumed a value the final read does not hold at 0.
        let mut h = pipeline_base();
        h[7] = at(2, consumed(1, 0, 2, &[(0, "aborted"), (1, "b")]));
        h.push(at(9, restarted(2)));
        h.push(at(10, consumed(3, 0, 4, &[(0, "a"), (1, "b"), (3, "c")])));
        h.push(at(11, output(3, 0)));
        h.push(at(12, output(3, 1)));
        h.push(at(13, output(3, 3)));
        h.push(at(14, piped(3, true)));
        let o = |txn, i| output_value(TASK, txn, i);
        h.extend(finals(
            &INPUT,
            &[
                (1000, vec![(0, o(1, 0)), (1, o(3, 0))]),
                (1001, vec![(0, o(1, 1)), (1, o(3, 1)), (2, o(3, 3))]),
            ],
            4,
        ));
        let f = check(&h);
        assert_eq!(f.offsets.len(), 1, "the overlap: {f:?}");
        assert_eq!(f.duplicated.len(), 2, "a and b twice: {f:?}");
        assert_eq!(f.aborted_reads.len(), 1, "the misread a: {f:?}");
        assert_eq!(f.count(), 4);
    }

    fn commit_attempt(txn: u64, offset: i64, epoch: i16, abandoned: bool) -> TxnEvent {
        TxnEvent::OffsetCommit {
            task: TASK,
            txn,
            partition: 0,
            offset,
            producer_id: 7,
            epoch,
            abandoned,
            error: abandoned.then(|| "timed out".into()),
        }
    }

    /// Transaction 1 consumes [0, 2): its first TxnOffsetCommit(2) is abandoned, the retry
    /// accepted, it commits; transaction 2 consumes [2, 4), commits 4 at `epoch` and commits;
    /// yet the task restarts from 2, the final offset 2.
    fn stale_history(epoch: i16) -> Vec<Entry> {
        let o = |txn, i| output_value(TASK, txn, i);
        let mut h = first_consumed();
        h.extend([
            at(5, commit_attempt(1, 2, 0, true)),
            at(6, commit_attempt(1, 2, 0, false)),
            at(7, piped(1, true)),
            at(8, consumed(2, 2, 4, &[(3, "c")])),
            at(9, output(2, 3)),
            at(10, commit_attempt(2, 4, epoch, false)),
            at(11, piped(2, true)),
            at(20, restarted(2)),
        ]);
        h.extend(finals(
            &INPUT,
            &[
                (1000, vec![(0, o(1, 0))]),
                (1001, vec![(0, o(1, 1)), (2, o(2, 3))]),
            ],
            2,
        ));
        h
    }

    #[test]
    fn a_stale_offset_commit_is_named() {
        // The abandoned TxnOffsetCommit(2) of transaction 1 reached the group coordinator
        // inside transaction 2 at the same epoch and replaced its 4.
        let f = check(&stale_history(0));
        assert_eq!(f.stale_offset_commits.len(), 1, "{f:?}");
        assert!(f.stale_offset_commits[0].contains("transaction 1"), "{f:?}");
        assert_eq!(f.offsets.len(), 2, "restart and final offset: {f:?}");
        assert_eq!(f.abandoned_offset_commits, 1);
        assert_eq!(f.count(), 3);
        assert_eq!(f.first_ms, Some(20));
        // At another epoch (v2 bumps it at every end) the abandoned request could not have
        // been accepted in transaction 2: the wrong offset is not put down to it.
        let f = check(&stale_history(1));
        assert!(f.stale_offset_commits.is_empty(), "{f:?}");
        assert_eq!(f.offsets.len(), 2, "{f:?}");
    }
}
