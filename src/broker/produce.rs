//! Produce and InitProducerId. The records of a produce are slices of the request frame; the
//! partition checks and appends them, and with `weir.fsync.before.ack` (or a due
//! `flush.messages`) the answer waits for a shared fsync.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse, ProducerId,
};
use kafka_protocol::protocol::StrBytes;

use super::server::RequestContext;
use super::{errors, Broker, PartitionHandle};
use crate::log::batch;
use crate::replica::validation::{self, RecordError};
use crate::replica::{Appended, ProduceError};

struct Outcome {
    index: i32,
    result: Result<Appended, Failure>,
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

pub(super) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ProduceRequest,
) -> Option<ProduceResponse> {
    let acks = req.acks;
    let mut topics = Vec::with_capacity(req.topic_data.len());
    let mut to_flush: Vec<(Arc<PartitionHandle>, i64)> = Vec::new();
    let now = broker.io.clock.wall_ms();
    let mut appended_any = false;
    for topic in req.topic_data {
        let name = topic.name.to_string();
        let mut outcomes = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let result = if !matches!(acks, -1..=1) {
                Err(Failure::new(
                    ResponseError::InvalidRequiredAcks,
                    format!("acks={acks} is not -1, 0 or 1"),
                ))
            } else if req.transactional_id.is_some() {
                Err(Failure::new(
                    ResponseError::TransactionalIdAuthorizationFailed,
                    "transactions are not supported",
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
                    acks,
                    now,
                    &mut to_flush,
                )
            };
            appended_any |= result.as_ref().is_ok_and(|a| !a.duplicate);
            outcomes.push(Outcome {
                index: data.index,
                result,
            });
        }
        topics.push((name, outcomes));
    }
    if appended_any {
        broker.appended.notify_waiters();
    }
    // Flush before answering (the durability the operator asked for); a failed fsync turns that
    // partition's answer into a storage error: the client must not believe it is durable.
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
                    }
                }
            }
        }
    }
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

fn append_one(
    broker: &Broker,
    topic: &str,
    index: i32,
    records: Option<&[u8]>,
    acks: i16,
    now: i64,
    to_flush: &mut Vec<(Arc<PartitionHandle>, i64)>,
) -> Result<Appended, Failure> {
    if topic == crate::group::OFFSETS_TOPIC {
        return Err(Failure::new(
            ResponseError::InvalidTopicException,
            format!("cannot append to the internal topic {topic}"),
        ));
    }
    if let super::Leadership::NotLeader { leader, .. } = broker.leadership(topic, index) {
        return Err(Failure::new(
            ResponseError::NotLeaderOrFollower,
            format!("this broker does not lead {topic}-{index} (the leader is {leader})"),
        ));
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
    if broker.is_storage_offline() {
        return Err(Failure::new(
            ResponseError::KafkaStorageError,
            "the log directory is offline",
        ));
    }
    // With one replica the ISR is just this broker.
    let isr = 1;
    if acks == -1 && partition.config().min_insync_replicas > isr {
        return Err(Failure::new(
            ResponseError::NotEnoughReplicas,
            format!(
                "min.insync.replicas={} but the in-sync set has {isr}",
                partition.config().min_insync_replicas
            ),
        ));
    }
    let appended = partition.append(records, now).map_err(|e| match e {
        ProduceError::RecordErrors(record_errors) => Failure {
            code: ResponseError::InvalidRecord,
            message: validation::summary(&record_errors),
            record_errors,
        },
        e => Failure::new(errors::produce(&e), format!("{e:?}")),
    })?;
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
    Ok(appended)
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
pub(super) async fn init_producer_id(
    broker: &Broker,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    if req.transactional_id.is_some() {
        return InitProducerIdResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
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

/// Whether a produce's records are a zstd batch (read from the header; checked fully later).
fn is_zstd(records: &[u8]) -> bool {
    batch::BatchHeader::parse(records).is_ok_and(|h| h.compression() == 4)
}
