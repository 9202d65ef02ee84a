//! Produce and InitProducerId. The records of a produce are slices of the request frame; the
//! partition checks and appends them, and with `weir.fsync.before.ack` (or a due
//! `flush.messages`) the answer waits for a shared fsync.
//!
//! acks as Kafka: 0 gets no answer, 1 is answered after the leader's append (and the fsync the
//! operator asked for), -1 (all) once the partition's high watermark passes the batch. That
//! wait is the partition's delayed produce (`delayed`): the high watermark moves at the append
//! on a single node, after the fsync in durable mode, and with replication when the in-sync
//! followers have it; only that partition's events complete the wait. It ends with
//! REQUEST_TIMED_OUT after the request's `timeout_ms`, NOT_LEADER_OR_FOLLOWER if leadership
//! moves, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the in-sync set shrank below
//! `min.insync.replicas` meanwhile. Any other acks is INVALID_REQUIRED_ACKS.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse, ProducerId,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::delayed::{self, Closed, Committed, ProduceWait, WaitError};
use crate::broker::{errors, shared::Broker, state::PartitionHandle};
use crate::log::batch;
use crate::replica::producer::Verification;
use crate::replica::validation::{self, RecordError};
use crate::replica::{Appended, ProduceError};
use crate::txn::TopicPartition;

struct Outcome {
    index: i32,
    result: Result<Appended, Failure>,
    /// With acks=all: the wait for the high watermark to pass the batch.
    wait: Option<ProduceWait>,
}

/// Why a partition's produce failed: the code, a message, and (Produce v8+) the records refused.
struct Failure {
    code: ResponseError,
    message: String,
    record_errors: Vec<RecordError>,
}

impl Failure {
    fn new(code: ResponseError, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            record_errors: Vec::new(),
        }
    }
}

/// The lowest Produce version that may carry zstd batches (KIP-110).
const ZSTD_MIN_PRODUCE_VERSION: i16 = 7;

pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ProduceRequest,
) -> Option<ProduceResponse> {
    let acks = req.acks;
    // The acks=all wait ends at the request's timeout, counted from its arrival.
    let deadline = broker.io.clock.monotonic()
        + std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut topics = Vec::with_capacity(req.topic_data.len());
    let mut to_flush: Vec<(Arc<PartitionHandle>, i64)> = Vec::new();
    let now = broker.io.clock.wall_ms();
    let authz = broker.authz(ctx);
    // KIP-890: the coordinator is asked once for every partition this produce would open the
    // producer's transaction on, before anything is appended.
    let mut verdicts = if matches!(acks, -1..=1)
        && req
            .transactional_id
            .as_ref()
            .is_none_or(|id| authz.transactional_id(id))
    {
        verify_transactional(broker, ctx.version, &req, |t| {
            authz.topic(Operation::Write, t)
        })
        .await
    } else {
        BTreeMap::new()
    };
    for topic in req.topic_data {
        let name = topic.name.to_string();
        let writable = authz.topic(Operation::Write, &name);
        let mut outcomes = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let mut wait = None;
            let verdict = verdicts
                .remove(&(name.clone(), data.index))
                .unwrap_or(Ok(Verification::Skipped));
            let result = if !matches!(acks, -1..=1) {
                Err(Failure::new(
                    ResponseError::InvalidRequiredAcks,
                    format!("acks={acks} is not -1, 0 or 1"),
                ))
            } else if req
                .transactional_id
                .as_ref()
                .is_some_and(|id| !authz.transactional_id(id))
            {
                Err(Failure::new(
                    ResponseError::TransactionalIdAuthorizationFailed,
                    "Transactional Id authorization failed.",
                ))
            } else if let Err(failure) = verdict {
                Err(failure)
            } else if !writable {
                Err(Failure::new(
                    ResponseError::TopicAuthorizationFailed,
                    "Topic authorization failed.",
                ))
            } else if ctx.version < ZSTD_MIN_PRODUCE_VERSION
                && data.records.as_deref().is_some_and(is_zstd)
            {
                Err(Failure::new(
                    ResponseError::UnsupportedCompressionType,
                    format!("zstd batches need Produce v{ZSTD_MIN_PRODUCE_VERSION} or later"),
                ))
            } else {
                append_one(
                    broker,
                    &name,
                    data.index,
                    data.records.as_deref(),
                    (acks, verdict.unwrap_or(Verification::Skipped)),
                    now,
                    &mut to_flush,
                )
                .map(|(appended, w)| {
                    wait = w;
                    appended
                })
            };
            outcomes.push(Outcome {
                index: data.index,
                result,
                wait,
            });
        }
        topics.push((name, outcomes));
    }
    // acks=all waits for the high watermark, which the fsync moves in durable mode: the fsync
    // runs on its own, so the wait (and the request's timeout) covers it, and a failed one
    // takes the directory offline, which ends the wait with a storage error.
    if acks == -1 {
        if let Some(this) = broker.this.upgrade() {
            for (handle, up_to) in std::mem::take(&mut to_flush) {
                let broker = this.clone();
                this.io.spawn(async move {
                    if let Err(e) = broker.flush_partition(&handle, up_to).await {
                        tracing::error!(error = %e, "fsync before acknowledging failed");
                    }
                });
            }
        }
    }
    // Otherwise flush before answering (the durability the operator asked for); a failed fsync
    // turns that partition's answer into a storage error: the client must not believe it is
    // durable.
    let flushes = to_flush
        .iter()
        .map(|(handle, up_to)| broker.flush_partition(handle, *up_to))
        .collect();
    let results = crate::io::join_all(flushes).await;
    for ((handle, _), result) in to_flush.iter().zip(results) {
        if let Err(e) = result {
            tracing::error!(error = %e, "fsync before acknowledging failed");
            let (topic, index) = {
                let p = handle.lock();
                (p.topic().to_string(), p.index())
            };
            for (name, outcomes) in topics.iter_mut() {
                for o in outcomes.iter_mut() {
                    if *name == topic && o.index == index {
                        o.result = Err(Failure::new(
                            ResponseError::KafkaStorageError,
                            e.to_string(),
                        ));
                        o.wait = None;
                    }
                }
            }
        }
    }
    // Diagnostics (`latency` target, see scripts/latency-breakdown).
    tracing::debug!(target: "latency", acks, "produce appended");
    await_high_watermarks(broker, ctx, &mut topics, deadline).await;
    tracing::debug!(target: "latency", acks, "produce answered");
    if acks == 0 {
        return None;
    }
    let responses = topics
        .into_iter()
        .map(|(name, outcomes)| {
            let partitions = outcomes
                .into_iter()
                .map(|o| partition_response(ctx.version, o))
                .collect();
            TopicProduceResponse::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(
                    name,
                )))
                .with_partition_responses(partitions)
        })
        .collect();
    Some(ProduceResponse::default().with_responses(responses))
}

/// acks=all: waits (one deadline for the request) until every appended partition's high
/// watermark passes its batch, and turns the waits that failed into the partitions' errors.
async fn await_high_watermarks(
    broker: &Broker,
    ctx: &RequestContext,
    topics: &mut [(String, Vec<Outcome>)],
    deadline: std::time::Duration,
) {
    if crate::planted!(broker.config, AcksAllStuckAfterIsrChange) {
        plant_stuck_after_isr_change(broker, topics, deadline).await;
    }
    let waiting: Vec<&mut Outcome> = topics
        .iter_mut()
        .flat_map(|(_, outcomes)| outcomes.iter_mut())
        .filter(|o| o.wait.is_some())
        .collect();
    if waiting.is_empty() {
        return;
    }
    let mut waiting = waiting;
    let mut waits: Vec<ProduceWait> = waiting
        .iter_mut()
        .map(|o| o.wait.take().expect("filtered on a wait"))
        .collect();
    let results =
        delayed::wait_produce(broker.io.clock.as_ref(), &mut waits, deadline, &ctx.gone).await;
    for (o, result) in waiting.into_iter().zip(results) {
        if let Some(mut failure) = wait_failure(result) {
            if crate::planted!(broker.config, NotLeaderAnsweredUnknownServerError)
                && failure.code == ResponseError::NotLeaderOrFollower
            {
                failure.code = ResponseError::UnknownServerError;
            }
            o.result = Err(failure);
        }
    }
}

/// A produce wait's outcome as the partition's error (none when committed in sync).
fn wait_failure(result: Result<Committed, WaitError>) -> Option<Failure> {
    let (code, message) = match result {
        Ok(Committed::InSync) => return None,
        Ok(Committed::BelowMinIsr) => (
            ResponseError::NotEnoughReplicasAfterAppend,
            "appended, but the in-sync set shrank below min.insync.replicas before it was \
             replicated"
                .to_string(),
        ),
        Err(WaitError::TimedOut) => (
            ResponseError::RequestTimedOut,
            "appended, but not replicated within the request's timeout".to_string(),
        ),
        Err(WaitError::NotLeader) => (
            ResponseError::NotLeaderOrFollower,
            "leadership moved before the records were replicated".to_string(),
        ),
        Err(WaitError::Closed(Closed::Offline)) => (
            ResponseError::KafkaStorageError,
            "the log directory went offline".to_string(),
        ),
        Err(WaitError::Closed(Closed::Deleted)) => (
            ResponseError::NotLeaderOrFollower,
            "the partition was deleted".to_string(),
        ),
        Err(WaitError::Closed(Closed::ShuttingDown)) => (
            ResponseError::NotLeaderOrFollower,
            "the broker is shutting down".to_string(),
        ),
        // Nobody reads this answer; a code is still needed.
        Err(WaitError::Cancelled) => (
            ResponseError::RequestTimedOut,
            "the connection went away".to_string(),
        ),
        Err(WaitError::Full(why)) => (ResponseError::RequestTimedOut, why),
    };
    Some(Failure::new(code, message))
}

/// The planted bug `AcksAllStuckAfterIsrChange`: a partition whose registration changed
/// without an election (partition epoch past leader epoch) never has its acks=all wait
/// completed; the request is held to its deadline and the partition answered REQUEST_TIMED_OUT.
async fn plant_stuck_after_isr_change(
    broker: &Broker,
    topics: &mut [(String, Vec<Outcome>)],
    deadline: std::time::Duration,
) {
    let image = broker.image();
    let mut stuck = false;
    for (name, outcomes) in topics.iter_mut() {
        let Some(id) = image.topic(name).map(|t| t.id) else {
            continue;
        };
        for o in outcomes.iter_mut() {
            let changed = image
                .partition(id, o.index)
                .is_some_and(|p| p.partition_epoch > p.leader_epoch);
            if o.wait.is_some() && changed {
                o.wait = None;
                o.result = Err(Failure::new(
                    ResponseError::RequestTimedOut,
                    "appended, but not replicated within the request's timeout",
                ));
                stuck = true;
            }
        }
    }
    if stuck {
        let left = deadline.saturating_sub(broker.io.clock.monotonic());
        broker.io.clock.sleep(left).await;
    }
}

/// A produce to a partition another broker leads (`leader`, -1 for none).
fn not_leader(broker: &Broker, topic: &str, index: i32, leader: i32) -> Failure {
    let code = if crate::planted!(broker.config, NotLeaderAnsweredUnknownServerError) {
        ResponseError::UnknownServerError
    } else {
        ResponseError::NotLeaderOrFollower
    };
    let _ = broker;
    Failure::new(
        code,
        format!("this broker does not lead {topic}-{index} (the leader is {leader})"),
    )
}

fn append_one(
    broker: &Broker,
    topic: &str,
    index: i32,
    records: Option<&[u8]>,
    (acks, verification): (i16, Verification),
    now: i64,
    to_flush: &mut Vec<(Arc<PartitionHandle>, i64)>,
) -> Result<(Appended, Option<ProduceWait>), Failure> {
    if topic == crate::group::OFFSETS_TOPIC {
        return Err(Failure::new(
            ResponseError::InvalidTopicException,
            format!("cannot append to the internal topic {topic}"),
        ));
    }
    if let crate::broker::drivers::reconcile::Leadership::NotLeader { leader, .. } =
        broker.leadership(topic, index)
    {
        return Err(not_leader(broker, topic, index, leader));
    }
    let Some(handle) = broker.partition(topic, index) else {
        return Err(Failure::new(
            ResponseError::UnknownTopicOrPartition,
            format!("unknown partition {topic}-{index}"),
        ));
    };
    let Some(records) = records else {
        return Err(Failure::new(ResponseError::InvalidRecord, "null records"));
    };
    // Checked and used under one lock: a delete or shutdown cannot come in between.
    let Some(mut partition) = handle.lock_open() else {
        return Err(Failure::new(
            ResponseError::NotLeaderOrFollower,
            "partition is closing",
        ));
    };
    if broker.is_partition_offline(topic, index) {
        return Err(Failure::new(
            ResponseError::KafkaStorageError,
            "the log directory is offline",
        ));
    }
    // Replicated: the committed ISR against min(min.insync.replicas, replication factor), as
    // Kafka >= 3.7. A partition on its own keeps the brief's stricter rule (min.insync.replicas
    // itself), so a single node with min.insync.replicas=2 refuses acks=all.
    if acks == -1 {
        if let Err(e) = partition.check_min_isr() {
            return Err(Failure::new(
                ResponseError::NotEnoughReplicas,
                format!(
                    "the in-sync set has {} replicas, fewer than the {} required",
                    e.isr, e.required
                ),
            ));
        }
    }
    // The waiter's slot is taken before the append: a full list refuses the produce with
    // nothing written.
    let reservation = if acks == -1 {
        Some(handle.waiters.reserve_produce().map_err(|e| match e {
            WaitError::Closed(Closed::Offline) => Failure::new(
                ResponseError::KafkaStorageError,
                "the log directory is offline",
            ),
            WaitError::Full(why) => Failure::new(
                ResponseError::RequestTimedOut,
                format!("not appended: {why}"),
            ),
            other => Failure::new(
                ResponseError::NotLeaderOrFollower,
                format!("partition is closing ({other:?})"),
            ),
        })?)
    } else {
        None
    };
    let appended = match partition.append_verified(records, now, verification) {
        Ok(appended) => appended,
        Err(ProduceError::Storage(e)) => {
            // The directory is not to be trusted any more (KIP-858: only this one's
            // partitions go offline); reported once the partition lock is released.
            drop(partition);
            broker.partition_storage_failed(topic, index, "an append", &e);
            return Err(Failure::new(
                ResponseError::KafkaStorageError,
                e.to_string(),
            ));
        }
        Err(ProduceError::RecordErrors(record_errors)) => {
            return Err(Failure {
                code: ResponseError::InvalidRecord,
                message: validation::summary(&record_errors),
                record_errors,
            })
        }
        Err(e) => return Err(Failure::new(errors::produce(&e), format!("{e:?}"))),
    };
    let config = partition.config();
    let flush = broker.config.fsync_before_ack
        || partition
            .log()
            .flush_due(config.flush_messages, config.flush_ms, now);
    if flush {
        // The planted off-by-one-batch bug syncs only what came before this batch.
        let up_to = if crate::planted!(broker.config, AckBeforeFsync) {
            appended.base_offset
        } else {
            appended.last_offset + 1
        };
        to_flush.push((handle.clone(), up_to));
    }
    // Registered under the append's lock: the high-watermark change its release reports (a
    // single node without fsync) reaches this waiter. A retried duplicate waits for its
    // original offsets.
    // The planted off-by-one-batch bug acknowledges once what came before the batch is in.
    let required = if crate::planted!(broker.config, AckBeforeFsync) {
        appended.base_offset
    } else {
        appended.last_offset + 1
    };
    let wait = reservation.map(|r| r.wait_for(required));
    Ok((appended, wait))
}

fn partition_response(version: i16, outcome: Outcome) -> PartitionProduceResponse {
    let mut p = PartitionProduceResponse::default().with_index(outcome.index);
    match outcome.result {
        Ok(appended) => {
            p.base_offset = appended.base_offset;
            p.log_append_time_ms = appended.log_append_time;
            if version >= 5 {
                p.log_start_offset = appended.log_start_offset;
            }
        }
        Err(failure) => {
            p.error_code = failure.code.code();
            p.base_offset = -1;
            p.log_append_time_ms = -1;
            if version >= 5 {
                p.log_start_offset = -1;
            }
            if version >= 8 {
                p.error_message = Some(StrBytes::from_string(failure.message));
                p.record_errors = failure
                    .record_errors
                    .into_iter()
                    .map(|e| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(e.batch_index)
                            .with_batch_index_error_message(Some(StrBytes::from_string(e.message)))
                    })
                    .collect();
            }
        }
    }
    p
}

/// Idempotent producers get a fresh id every time (as Kafka does without a transactional id).
pub(crate) async fn init_producer_id(
    broker: &Broker,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    if req.transactional_id.is_some() {
        // The transaction coordinator's (the client sent it there).
        return crate::broker::handlers::transactions::init_producer_id(broker, ctx, req).await;
    }
    match broker.allocate_producer_id().await {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "could not reserve producer ids");
            InitProducerIdResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    }
}

/// What KIP-890 decided for one partition of a produce: refused, or appended with this
/// verification (its guard).
type Verdict = Result<Verification, Failure>;

/// Checks a produce's transactional batches before anything is appended. Transactional records
/// need a transactional id (as Kafka: an absent one is never authorized). KIP-890 part 1: a
/// producer's transactional batch on a partition where its transaction is not open yet (at
/// that epoch) takes the partition's verification guard, and the coordinator is asked once for
/// all such partitions of the request whether they are in the producer's ongoing transaction
/// (Produce v12, transactions v2: it adds them); each is appended only with a "yes" and its
/// guard still held, so a late write from an ended transaction cannot open a hanging one.
/// Partitions not named in the answer need no check (not transactional, or verification off).
async fn verify_transactional(
    broker: &Broker,
    version: i16,
    req: &ProduceRequest,
    writable: impl Fn(&str) -> bool,
) -> BTreeMap<(String, i32), Verdict> {
    let mut verdicts = BTreeMap::new();
    // Transactions v2 adds the partition whatever the key says: without it nothing would.
    let add = version >= 12;
    let verify = add || broker.txn_verification_enabled();
    let transactional_id = req.transactional_id.as_ref().map(|t| t.as_str());
    let now = broker.io.clock.wall_ms();
    // Partitions to ask about, by (producer id, epoch): a request has one producer in practice.
    let mut asks: BTreeMap<(i64, i16), Vec<(TopicPartition, Verification)>> = BTreeMap::new();
    for topic in &req.topic_data {
        let name = topic.name.as_str();
        if !writable(name) {
            continue;
        }
        for data in &topic.partition_data {
            let Some(header) = data
                .records
                .as_deref()
                .and_then(|r| batch::BatchHeader::parse(r).ok())
            else {
                continue;
            };
            if !header.is_transactional() {
                continue;
            }
            let key = (name.to_string(), data.index);
            if transactional_id.is_none() {
                verdicts.insert(
                    key,
                    Err(Failure::new(
                        ResponseError::TransactionalIdAuthorizationFailed,
                        "transactional records need a transactional id",
                    )),
                );
                continue;
            }
            if !verify {
                continue;
            }
            // A partition not led (or not open) here now is refused now, not left unverified:
            // the coordinators' asks below await, and an append after them could find it led
            // and open and take a transactional batch no guard checked (KIP-890).
            match broker.leadership(name, data.index) {
                crate::broker::drivers::reconcile::Leadership::Leader(_) => {}
                crate::broker::drivers::reconcile::Leadership::NotLeader { leader, .. } => {
                    verdicts.insert(key, Err(not_leader(broker, name, data.index, leader)));
                    continue;
                }
                crate::broker::drivers::reconcile::Leadership::Unknown => {
                    let unknown = Failure::new(
                        ResponseError::UnknownTopicOrPartition,
                        "unknown topic or partition",
                    );
                    verdicts.insert(key, Err(unknown));
                    continue;
                }
            }
            let Some(handle) = broker.partition(name, data.index) else {
                // Led in the image, not opened here yet.
                let failure = Failure::new(
                    ResponseError::NotLeaderOrFollower,
                    format!("{name}-{} is not open on this broker yet", data.index),
                );
                verdicts.insert(key, Err(failure));
                continue;
            };
            let guard = handle.lock().start_txn_verification(
                header.producer_id,
                header.producer_epoch,
                now,
            );
            let verification = Verification::Guarded(guard);
            match guard {
                // Open here at this epoch: the coordinator knew of it; the append rechecks.
                None => {
                    verdicts.insert(key, Ok(verification));
                }
                Some(_) => asks
                    .entry((header.producer_id, header.producer_epoch))
                    .or_default()
                    .push((TopicPartition::new(name, data.index), verification)),
            }
        }
    }
    let Some(transactional_id) = transactional_id else {
        return verdicts;
    };
    for (producer, partitions) in asks {
        let names: Vec<TopicPartition> = partitions.iter().map(|(tp, _)| tp.clone()).collect();
        let results = broker
            .txn_partitions_at_coordinator(transactional_id, producer, &names, add)
            .await;
        for ((tp, verification), result) in partitions.into_iter().zip(results) {
            let verdict = match result {
                Ok(()) => Ok(verification),
                Err(e) => Err(verification_failure(e, version)),
            };
            verdicts.insert((tp.topic, tp.partition), verdict);
        }
    }
    verdicts
}

/// A coordinator's "no" as the producer's version expects it (Kafka's `ReplicaManager`).
fn verification_failure(e: crate::txn::TxnError, version: i16) -> Failure {
    use crate::txn::TxnError;
    match e {
        TxnError::NotInTransaction | TxnError::InvalidProducerIdMapping => Failure::new(
            if version >= 11 {
                ResponseError::TransactionAbortable
            } else {
                ResponseError::InvalidTxnState
            },
            "the partition is not in the producer's transaction",
        ),
        TxnError::InvalidTxnState => Failure::new(
            ResponseError::InvalidTxnState,
            "the transaction coordinator refused to verify the write",
        ),
        TxnError::ProducerFenced => Failure::new(
            ResponseError::InvalidProducerEpoch,
            "the producer was fenced",
        ),
        // Retriable for every client (Kafka's mapping of coordinator trouble).
        _ => Failure::new(
            ResponseError::NotEnoughReplicas,
            "the transaction coordinator could not verify the write",
        ),
    }
}

/// Whether a produce's records are a zstd batch (read from the header; checked fully later).
fn is_zstd(records: &[u8]) -> bool {
    batch::BatchHeader::parse(records).is_ok_and(|h| h.compression() == 4)
}

#[cfg(test)]
mod tests;
