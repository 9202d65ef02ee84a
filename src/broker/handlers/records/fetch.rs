//! Fetch (with long polling on `max_wait_ms` / `min_bytes`) and ListOffsets. Fetched records are
//! the stored batch bytes, handed to the encoder as they are.
//!
//! Consumers on Fetch v11+ may be served by a follower (KIP-392), up to the high watermark it
//! learned from its leader, with the leader-epoch checks made against its own epoch; with
//! `replica.selector.class` set, a leader answers a consumer whose `rack_id` names another
//! replica's rack with only `preferred_read_replica` (`preferred_read_replica` below).
//! ListOffsets stays leader-only, as in Kafka.
//!
//! A long poll is a delayed fetch (`delayed`): when the first read finds less than `min_bytes`,
//! the request registers a waiter on every partition it reads, at its fetch offset, and sleeps
//! on its own wake-up. Only those partitions' events wake it (the high watermark passing the
//! offset for a consumer, the log end for a follower, a truncation, a close); it then reads
//! them all again and answers once `min_bytes` is reached across them, or at `max_wait_ms`.

use std::time::Duration;

use bytes::Bytes;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, ProducerId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::replication_throttle::Side;
use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::delayed::{self, FetchRegistration, FetchWake, Isolation, WaitError};
use crate::broker::{errors, shared::Broker};
use crate::config::ServerConfig;

/// Longest long poll honoured, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

/// One partition the request asked for, resolved to a name.
struct Wanted {
    topic: Option<String>,
    topic_id: Uuid,
    partition: i32,
    offset: i64,
    /// A follower's log start (-1: not sent, before v5).
    log_start_offset: i64,
    max_bytes: usize,
    /// -1: not sent (before v9), no fencing check.
    current_leader_epoch: i32,
    /// -1: not sent (before v12), no divergence check.
    last_fetched_epoch: i32,
    /// A consumer asking a broker that does not lead the partition (and may not serve it as a
    /// follower), or a replica fetch the image refuses (not a replica of it, or a stale broker
    /// epoch: KIP-903).
    not_leader: bool,
    /// A consumer without READ on the topic (TOPIC_AUTHORIZATION_FAILED).
    unauthorized: bool,
}

/// What a consumer's Fetch v11+ brings (Kafka's `ClientMetadata`, KIP-392): it may be served by
/// any replica, and its rack lets the leader point it at a replica near it.
struct ClientMetadata {
    /// `rack_id`; empty when the client set no `client.rack`.
    rack: String,
}

/// The first Fetch version with `rack_id` and `preferred_read_replica` (KIP-392).
const FOLLOWER_FETCH_MIN_VERSION: i16 = 11;

/// The broker asking, when a follower fetches (Kafka's `ReplicaState`).
#[derive(Clone, Copy)]
struct Replica {
    id: i32,
    /// -1: not sent (before v15), no check.
    broker_epoch: i64,
}

/// Whether the image lets `replica` fetch `topic_id`-`partition` as a follower: it must be one
/// of its replicas, and the broker epoch it sends (-1: none) not older than the image's
/// (a stale incarnation must not be counted, notes §1.2).
fn replica_allowed(
    image: &crate::controller::MetadataImage,
    topic_id: Uuid,
    partition: i32,
    replica: Replica,
) -> bool {
    let Some(registration) = image.partition(topic_id, partition) else {
        // Unknown here: the read reports it.
        return true;
    };
    if !registration.replicas.contains(&replica.id) {
        return false;
    }
    let current = image.broker(replica.id).map(|b| b.epoch);
    !(replica.broker_epoch >= 0 && current.is_some_and(|c| replica.broker_epoch < c))
}

/// What a fetch may carry: (per partition, whole response) in bytes. Clients may ask for up
/// to 2 GiB; the broker caps the response at `fetch.max.bytes` as Kafka does, and a follower's
/// fetch also at its own `replica.fetch.*` limits. Either may still be exceeded by the first
/// batch, which is always returned whole (KIP-74).
fn fetch_limits(config: &ServerConfig, req: &FetchRequest, version: i16) -> (usize, usize) {
    let replica_id = replica_id(req, version);
    let mut partition_max = usize::MAX;
    let mut response_max = req.max_bytes.max(0) as usize;
    response_max = response_max.min(config.fetch_max_bytes);
    if replica_id >= 0 {
        partition_max = config.replica_fetch_max_bytes;
        response_max = response_max.min(config.replica_fetch_response_max_bytes);
    }
    (partition_max, response_max)
}

/// The fetching replica's id (-1 for consumers); it moved into ReplicaState in v15.
pub(crate) fn replica_id(req: &FetchRequest, version: i16) -> i32 {
    if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    }
}

pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: FetchRequest,
) -> FetchResponse {
    let (partition_cap, max_bytes) = fetch_limits(&broker.config, &req, ctx.version);
    let image = broker.image();
    let replica = replica_id(&req, ctx.version);
    let from_replica = replica >= 0;
    let replica = from_replica.then_some(Replica {
        id: replica,
        broker_epoch: if ctx.version >= 15 {
            req.replica_state.replica_epoch
        } else {
            -1
        },
    });
    // Kafka builds client metadata for every v11+ request; a follower's replication fetch
    // never uses it (it must reach the leader, and is never redirected).
    let client =
        (ctx.version >= FOLLOWER_FETCH_MIN_VERSION && !from_replica).then(|| ClientMetadata {
            rack: req.rack_id.to_string(),
        });
    let node = broker.config.node_id;
    let mut wanted = Vec::new();
    // A follower needs CLUSTER_ACTION on the cluster (Kafka's rule: the brokers' principal,
    // usually in super.users), and its replica id and broker epoch must be in the image; a
    // consumer needs READ on each topic. Either refusal is TOPIC_AUTHORIZATION_FAILED per
    // partition, as Kafka answers.
    let authz = broker.authz(ctx);
    let replica_refused = replica.is_some() && !authz.cluster(Operation::ClusterAction);
    for topic in &req.topics {
        let name = if ctx.version >= 13 {
            image.topic_by_id(topic.topic_id).map(|t| t.name.clone())
        } else {
            Some(topic.topic.to_string())
        };
        let unauthorized = replica_refused
            || (replica.is_none()
                && name
                    .as_deref()
                    .is_some_and(|t| !authz.topic(Operation::Read, t)));
        for p in &topic.partitions {
            wanted.push(Wanted {
                unauthorized,
                topic: name.clone(),
                topic_id: topic.topic_id,
                partition: p.partition,
                offset: p.fetch_offset,
                log_start_offset: if ctx.version >= 5 {
                    p.log_start_offset
                } else {
                    -1
                },
                max_bytes: (p.partition_max_bytes.max(0) as usize).min(partition_cap),
                current_leader_epoch: if ctx.version >= 9 {
                    p.current_leader_epoch
                } else {
                    -1
                },
                last_fetched_epoch: if ctx.version >= 12 {
                    p.last_fetched_epoch
                } else {
                    -1
                },
                // A broker whose start-up gate is closed leads nothing (`startup_gate`).
                not_leader: match replica {
                    Some(_) if !broker.serving_partitions() => true,
                    Some(r) => {
                        let id = name
                            .as_deref()
                            .and_then(|t| image.topic(t))
                            .map_or(topic.topic_id, |t| t.id);
                        !replica_allowed(&image, id, p.partition, r)
                    }
                    // A v11+ consumer may read from a follower (KIP-392): any replica the
                    // image places here, once the start-up gate is open.
                    None => name.as_deref().is_some_and(|t| {
                        matches!(
                            broker.leadership(t, p.partition),
                            crate::broker::drivers::reconcile::Leadership::NotLeader { .. }
                        ) && !(client.is_some()
                            && broker.serving_partitions()
                            && image.topic(t).is_some_and(|meta| {
                                image
                                    .partition(meta.id, p.partition)
                                    .is_some_and(|r| r.replicas.contains(&node))
                            }))
                    }),
                },
            });
        }
    }
    let max_wait = Duration::from_millis(req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    // Waiting for more than may be sent would always wait out max_wait (Kafka caps it too).
    let min_bytes = (req.min_bytes.max(0) as usize).min(max_bytes);
    let deadline = broker.io.clock.monotonic() + max_wait;
    // A follower's fetch waits for the log end; a consumer's for the high watermark.
    let isolation = if from_replica {
        Isolation::LogEnd
    } else {
        Isolation::HighWatermark
    };
    // READ_COMMITTED (v4+): up to the last stable offset, with the aborted transactions. Its
    // waiters wake on the high watermark: the LSO moves only when it does (a marker becomes
    // stable once the high watermark passes it).
    let read_committed = !from_replica && ctx.version >= 4 && req.isolation_level == 1;
    let wake = FetchWake::new();
    let mut registrations: Option<Vec<FetchRegistration>> = None;
    loop {
        let (partitions, bytes, answer_now) = read_all(
            broker,
            ctx,
            &wanted,
            max_bytes,
            replica,
            client.as_ref(),
            read_committed,
        );
        let done = bytes >= min_bytes
            || answer_now
            || wanted.is_empty()
            || broker.io.clock.monotonic() >= deadline;
        if done {
            if let Some(r) = replica {
                // `WEIR_LOG=info,latency=debug` times the acks=all path: these events feed
                // scripts/latency-breakdown (off by default, a level check when off).
                tracing::debug!(target: "latency", replica = r.id, bytes,
                    waited = registrations.is_some(), "replica fetch answered");
            }
            return response(ctx, &wanted, partitions);
        }
        let Some(_) = &registrations else {
            // Registered after the first read, then read again: an append in between is seen
            // by the second read, any later one wakes a waiter.
            match register(broker, &wanted, isolation, &wake) {
                Ok(r) => registrations = Some(r),
                Err(e) => {
                    tracing::warn!(reason = ?e, "fetch answered without waiting");
                    return response(ctx, &wanted, partitions);
                }
            }
            continue;
        };
        match delayed::wait_fetch(broker.io.clock.as_ref(), &wake, deadline, &ctx.gone).await {
            // Woken, or at the deadline: read again (and answer, at the deadline).
            Ok(()) | Err(WaitError::TimedOut) => {}
            // Nobody is left to read the answer.
            Err(_) => return response(ctx, &wanted, partitions),
        }
    }
}

/// A waiter on every partition the fetch reads, all waking `wake`. A partition that is gone
/// or closed gets none: the next read reports it.
fn register(
    broker: &Broker,
    wanted: &[Wanted],
    isolation: Isolation,
    wake: &FetchWake,
) -> Result<Vec<FetchRegistration>, WaitError> {
    let mut registrations = Vec::with_capacity(wanted.len());
    for w in wanted {
        let handle = w
            .topic
            .as_deref()
            .and_then(|t| broker.partition(t, w.partition));
        let Some(handle) = handle else { continue };
        match handle.waiters.register_fetch(w.offset, isolation, wake) {
            Ok(r) => registrations.push(r),
            Err(WaitError::Closed(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(registrations)
}

/// Reads every wanted partition: (answers, record bytes, whether to answer without waiting —
/// an error, a diverging epoch or a preferred read replica in some partition).
fn read_all(
    broker: &Broker,
    ctx: &RequestContext,
    wanted: &[Wanted],
    max_bytes: usize,
    replica: Option<Replica>,
    client: Option<&ClientMetadata>,
    read_committed: bool,
) -> (Vec<PartitionData>, usize, bool) {
    let mut out = Vec::with_capacity(wanted.len());
    let mut total = 0usize;
    let mut answer_now = false;
    // Only a follower's fetch looks at the replication throttles.
    let image = replica.map(|_| broker.image());
    for w in wanted {
        // Kafka answers every partition with records, empty on error, never null: librdkafka
        // rejects a whole response holding a null record set ("invalid MessageSetSize -1").
        let mut data = PartitionData::default()
            .with_partition_index(w.partition)
            .with_high_watermark(-1)
            .with_records(Some(Bytes::new()));
        if w.unauthorized {
            data.error_code = ResponseError::TopicAuthorizationFailed.code();
            answer_now = true;
            out.push(data);
            continue;
        }
        if w.not_leader {
            data.error_code = ResponseError::NotLeaderOrFollower.code();
            answer_now = true;
            out.push(data);
            continue;
        }
        let handle = w
            .topic
            .as_deref()
            .and_then(|t| broker.partition(t, w.partition));
        let Some(handle) = handle else {
            data.error_code = if ctx.version >= 13 && w.topic.is_none() {
                ResponseError::UnknownTopicId.code()
            } else {
                ResponseError::UnknownTopicOrPartition.code()
            };
            answer_now = true;
            out.push(data);
            continue;
        };
        let offline = w
            .topic
            .as_deref()
            .is_some_and(|t| broker.is_partition_offline(t, w.partition));
        if offline {
            // What the page cache shows may not be on disk: serve nothing until a restart.
            data.error_code = ResponseError::KafkaStorageError.code();
            answer_now = true;
            out.push(data);
            continue;
        }
        let mut partition = handle.lock();
        // Leader-epoch fencing and the KIP-320 divergence check come before any read; either
        // answers at once (no long poll). A diverging follower's fetch updates nothing (§1.2).
        // A v11+ consumer's epochs are checked against this replica's own, leader or not.
        match partition.check_read_position(
            w.current_leader_epoch,
            w.offset,
            w.last_fetched_epoch,
            client.is_none(),
        ) {
            Ok(None) => {}
            Ok(Some(end)) => {
                data.diverging_epoch = EpochEndOffset::default()
                    .with_epoch(end.epoch)
                    .with_end_offset(end.end_offset);
                data.high_watermark = partition.high_watermark();
                data.last_stable_offset = partition.last_stable_offset();
                data.log_start_offset = partition.log_start_offset();
                answer_now = true;
                out.push(data);
                continue;
            }
            Err(e) => {
                data.error_code = errors::epoch(&e).code();
                answer_now = true;
                out.push(data);
                continue;
            }
        }
        if let Some(preferred) =
            client.and_then(|c| preferred_read_replica(broker, &partition, c, w.offset))
        {
            // KIP-392: no records, only where to read them, answered at once (Kafka's
            // `hasPreferredReadReplica`); the offsets tell the consumer where the log stands.
            data.preferred_read_replica = BrokerId(preferred);
            data.high_watermark = partition.high_watermark();
            data.last_stable_offset = partition.last_stable_offset();
            data.log_start_offset = partition.log_start_offset();
            answer_now = true;
            out.push(data);
            continue;
        }
        if let Some(r) = replica {
            // The follower holds everything below its fetch offset: the leader's replica set
            // learns it (and may move the high watermark, which the guard's drop reports to
            // waiting produces) before the read, so the answer carries the new watermark.
            let now = broker.io.clock.wall_ms();
            let hw_before = partition.high_watermark();
            let fetched =
                partition.follower_fetched(r.id, w.offset, w.log_start_offset, r.broker_epoch, now);
            if partition.high_watermark() != hw_before {
                tracing::debug!(target: "latency", replica = r.id, partition = w.partition,
                    hw = partition.high_watermark(), "high watermark moved");
            }
            if let Err(refused) = fetched {
                data.error_code = fetch_refused(refused).code();
                answer_now = true;
                out.push(data);
                continue;
            }
        }
        let budget = w.max_bytes.min(max_bytes.saturating_sub(total));
        let first_with_data = total == 0;
        // Replication throttle (KIP-73): a leader-throttled partition's bytes count, and while
        // over the rate a follower out of the ISR gets no records.
        let (throttled, held_back) = match (replica, &image) {
            (Some(r), Some(image)) => {
                let topic = partition.topic();
                let throttled =
                    broker.replication_throttled(image, Side::Leader, topic, w.partition);
                let held_back = throttled
                    && broker.out_of_isr(image, topic, w.partition, r.id)
                    && broker.replication_quota_exceeded(image, Side::Leader);
                (throttled, held_back)
            }
            _ => (false, false),
        };
        if (budget > 0 || first_with_data) && !held_back {
            // A follower reads up to the log end, a consumer up to the high watermark.
            let read = match replica {
                Some(_) => partition.read_for_replica(w.offset, budget),
                None if read_committed => {
                    partition
                        .read_committed(w.offset, budget)
                        .map(|(records, aborted)| {
                            data.aborted_transactions = Some(
                                aborted
                                    .iter()
                                    .map(|a| {
                                        AbortedTransaction::default()
                                            .with_producer_id(ProducerId(a.producer_id))
                                            .with_first_offset(a.first_offset)
                                    })
                                    .collect(),
                            );
                            records
                        })
                }
                None => partition.read(w.offset, budget),
            };
            match read {
                // Only the first partition with data may overshoot by one batch (KIP-74); a
                // later one whose next batch does not fit gets none (librdkafka drops a
                // connection whose response exceeds the request's max_bytes).
                Ok(records) if !first_with_data && records.len() > budget => {
                    data.records = Some(Bytes::new());
                    if read_committed {
                        data.aborted_transactions = Some(Vec::new());
                    }
                }
                Ok(records) if ctx.version < ZSTD_MIN_FETCH_VERSION && holds_zstd(&records) => {
                    // As Kafka: a client too old to know zstd gets an error, not the batch.
                    data.error_code = ResponseError::UnsupportedCompressionType.code();
                    answer_now = true;
                    out.push(data);
                    continue;
                }
                Ok(records) => {
                    total += records.len();
                    if throttled {
                        broker.record_replication(Side::Leader, records.len());
                    }
                    data.records = Some(records);
                }
                Err(e) => {
                    if !matches!(e, crate::log::ReadError::OffsetOutOfRange { .. }) {
                        tracing::error!(topic = partition.topic(), partition = w.partition, error = ?e, "read failed");
                    }
                    // As Kafka: an errored partition carries no offsets (-1), only the error.
                    data.error_code = errors::read(&e).code();
                    answer_now = true;
                    out.push(data);
                    continue;
                }
            }
        }
        data.high_watermark = partition.high_watermark();
        data.last_stable_offset = partition.last_stable_offset();
        if ctx.version >= 5 {
            data.log_start_offset = partition.log_start_offset();
        }
        out.push(data);
    }
    (out, total, answer_now)
}

/// The replica the leader sends a consumer to (KIP-392), when `replica.selector.class` is set
/// and the selector picks a follower; `None`: read here. A broker's rack counts only while
/// clients can reach it (registered, unfenced, with an endpoint on the client listener), as
/// Kafka's metadata cache gives the selector `Node.noNode()` otherwise.
fn preferred_read_replica(
    broker: &Broker,
    partition: &crate::replica::Partition,
    client: &ClientMetadata,
    fetch_offset: i64,
) -> Option<i32> {
    let crate::config::ReplicaSelector::RackAware = broker.config.replica_selector?;
    if client.rack.is_empty() {
        return None;
    }
    let image = broker.image();
    let listener = crate::broker::handlers::topics::metadata::client_listener(broker);
    let rack_of = |id: i32| {
        image
            .broker(id)
            .filter(|b| !b.fenced && b.endpoint(&listener).is_some())
            .and_then(|b| b.rack.clone())
    };
    partition.preferred_read_replica(
        broker.config.node_id,
        &client.rack,
        fetch_offset,
        broker.io.clock.wall_ms(),
        rack_of,
    )
}

/// The error a refused follower fetch is answered with.
fn fetch_refused(refused: crate::replica::isr::FetchRefused) -> ResponseError {
    use crate::replica::isr::FetchRefused;
    match refused {
        FetchRefused::NotReplica | FetchRefused::StaleBrokerEpoch { .. } => {
            ResponseError::NotLeaderOrFollower
        }
        FetchRefused::PastLogEnd { .. } => ResponseError::OffsetOutOfRange,
    }
}

/// The lowest Fetch version that may be served zstd batches (KIP-110).
const ZSTD_MIN_FETCH_VERSION: i16 = 10;

/// Whether any batch in `records` (whole batches, as read) is zstd-compressed. Reads headers
/// only; the walk advances by at least a header per step, so it ends.
fn holds_zstd(records: &[u8]) -> bool {
    let mut at = 0;
    while let Some(rest) = records.get(at..).filter(|r| !r.is_empty()) {
        match crate::log::batch::BatchHeader::parse(rest) {
            Ok(header) if header.compression() == 4 => return true,
            Ok(header) => at += header.total_len(),
            Err(_) => return false,
        }
    }
    false
}

fn response(
    ctx: &RequestContext,
    wanted: &[Wanted],
    partitions: Vec<PartitionData>,
) -> FetchResponse {
    // Group the partitions back under their topics, in request order.
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for (w, data) in wanted.iter().zip(partitions) {
        let same_topic = topics.last().is_some_and(|t| {
            if ctx.version >= 13 {
                t.topic_id == w.topic_id
            } else {
                w.topic.as_deref() == Some(t.topic.as_str())
            }
        });
        if !same_topic {
            let mut t = FetchableTopicResponse::default();
            if ctx.version >= 13 {
                t.topic_id = w.topic_id;
            } else {
                t.topic = TopicName(StrBytes::from_string(w.topic.clone().unwrap_or_default()));
            }
            topics.push(t);
        }
        topics.last_mut().unwrap().partitions.push(data);
    }
    FetchResponse::default().with_responses(topics)
}

/// ListOffsets special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const EARLIEST_TIERED: i64 = -5;

const SPECIAL_TIMESTAMPS: [i64; 5] = [
    LATEST,
    EARLIEST,
    MAX_TIMESTAMP,
    EARLIEST_LOCAL,
    EARLIEST_TIERED,
];

/// A ListOffsets answer for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    offset: i64,
    timestamp: i64,
    leader_epoch: i32,
}

/// Looks `timestamp` (a time or one of the special values) up in `log`. The leader epoch
/// answered is Kafka's: the partition's current one for LATEST (`Partition.fetchOffsetForTimestamp`),
/// otherwise the epoch of the batch holding the offset found (`epochForOffset`). KIP-320
/// clients validate the position they reset to against it, so the current epoch for an old
/// offset would make them miss a truncation below it.
fn offset_lookup(
    log: &crate::log::Log,
    log_start: i64,
    latest: i64,
    current_epoch: i32,
    timestamp: i64,
) -> std::io::Result<Option<Found>> {
    let at = |offset: i64, timestamp: i64| Found {
        offset,
        timestamp,
        leader_epoch: log.epochs().epoch_for_offset(offset),
    };
    Ok(match timestamp {
        LATEST => Some(Found {
            offset: latest,
            timestamp: -1,
            leader_epoch: current_epoch,
        }),
        EARLIEST | EARLIEST_LOCAL | EARLIEST_TIERED => Some(at(log_start, -1)),
        MAX_TIMESTAMP => match log.max_timestamp() {
            max if max < 0 => None,
            max => log.offset_for_timestamp(max)?.map(|(o, ts)| at(o, ts)),
        },
        ts => log.offset_for_timestamp(ts)?.map(|(o, ts)| at(o, ts)),
    })
}

/// A client's lookup has no answer yet: this new leader's high watermark is still below the
/// start of its epoch, so the committed end it knows may lie below what the last leader
/// answered, and a consumer told that end would see the log shrink (KAFKA-7395). Retriable:
/// OFFSET_NOT_AVAILABLE from v5, LEADER_NOT_AVAILABLE before (Kafka's `KafkaApis`).
#[derive(Debug, PartialEq, Eq)]
struct HighWatermarkLagging;

/// What a lookup answers once `visible` (the high watermark, the last stable offset, or a
/// follower's log end) bounds it, as Kafka's `Partition.fetchOffsetForTimestamp`: LATEST is
/// refused while the high watermark `lags` the epoch start; a time or MAX_TIMESTAMP answers only
/// a record below `visible` (an uncommitted one is not found), and finding none is refused too
/// while it lags, as the record may be committed but not yet known to be; EARLIEST never is.
fn visible_answer(
    timestamp: i64,
    found: Option<Found>,
    visible: i64,
    lagging: bool,
) -> Result<Option<Found>, HighWatermarkLagging> {
    match timestamp {
        LATEST if lagging => Err(HighWatermarkLagging),
        LATEST | EARLIEST | EARLIEST_LOCAL | EARLIEST_TIERED => {
            Ok(found.filter(|f| f.offset <= visible))
        }
        _ => match found.filter(|f| f.offset < visible) {
            None if lagging => Err(HighWatermarkLagging),
            answer => Ok(answer),
        },
    }
}

pub(crate) fn list_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    // A follower asking its leader (Kafka's replica id ≥ 0) learns the log end, not the high
    // watermark: it needs it to resolve OFFSET_OUT_OF_RANGE.
    let from_replica = req.replica_id.0 >= 0;
    let read_committed = ctx.version >= 2 && req.isolation_level == 1;
    let authz = broker.authz(ctx);
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.to_string();
            let described = match from_replica {
                true => authz.cluster(Operation::ClusterAction),
                false => authz.topic(Operation::Describe, &name),
            };
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let mut r = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    if !described {
                        r.error_code = ResponseError::TopicAuthorizationFailed.code();
                        return r;
                    }
                    // Offsets come from the leader (Kafka: also for followers' own lookups).
                    if matches!(
                        broker.leadership(&name, p.partition_index),
                        crate::broker::drivers::reconcile::Leadership::NotLeader { .. }
                    ) {
                        r.error_code = ResponseError::NotLeaderOrFollower.code();
                        return r;
                    }
                    let Some(handle) = broker.partition(&name, p.partition_index) else {
                        r.error_code = ResponseError::UnknownTopicOrPartition.code();
                        return r;
                    };
                    if broker.is_partition_offline(&name, p.partition_index) {
                        r.error_code = ResponseError::KafkaStorageError.code();
                        return r;
                    }
                    let partition = handle.lock();
                    // The image may name this node before its replica has taken the leadership
                    // up (`sync_role`): until then it holds a follower's watermark.
                    if partition.role() != crate::replica::Role::Leader {
                        r.error_code = ResponseError::NotLeaderOrFollower.code();
                        return r;
                    }
                    // READ_COMMITTED (v2+) sees up to the last stable offset.
                    let visible = if from_replica {
                        partition.log_end_offset()
                    } else if read_committed {
                        partition.last_stable_offset()
                    } else {
                        partition.high_watermark()
                    };
                    if p.timestamp < 0 && !SPECIAL_TIMESTAMPS.contains(&p.timestamp) {
                        r.error_code = ResponseError::InvalidRequest.code();
                        return r;
                    }
                    let found = offset_lookup(
                        partition.log(),
                        partition.log_start_offset(),
                        visible,
                        partition.leader_epoch(),
                        p.timestamp,
                    );
                    // Only a client's lookup waits for the high watermark (a follower asks
                    // for the log end).
                    let lagging = !from_replica
                        && partition.replica_set().is_some_and(|set| {
                            set.epoch_start_offset() > partition.high_watermark()
                        });
                    match found.map(|f| visible_answer(p.timestamp, f, visible, lagging)) {
                        Ok(Ok(Some(found))) => {
                            r.offset = found.offset;
                            r.timestamp = found.timestamp;
                            if ctx.version >= 4 {
                                r.leader_epoch = found.leader_epoch;
                            }
                        }
                        Ok(Ok(None)) => {}
                        Ok(Err(HighWatermarkLagging)) => {
                            r.error_code = match ctx.version >= 5 {
                                true => ResponseError::OffsetNotAvailable.code(),
                                false => ResponseError::LeaderNotAvailable.code(),
                            };
                        }
                        Err(e) => {
                            tracing::error!(topic = %name, error = %e, "offset lookup failed");
                            r.error_code = ResponseError::KafkaStorageError.code();
                        }
                    }
                    r
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(TopicName(StrBytes::from_string(name)))
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::fetch_request::ReplicaState;

    use super::*;

    /// A log of epoch 1 at 0..4 (timestamps 1000..), 2 at 4..8 (2000..), 3 at 8..12 (3000..).
    fn three_epoch_log() -> crate::log::Log {
        use crate::io::memdisk::{block_on, MemDisk};
        use crate::log::batch::{self, testing::batch};
        let config = crate::log::LogConfig {
            segment_bytes: 1 << 20,
            segment_ms: i64::MAX,
            index_interval_bytes: 64,
            planted: Default::default(),
        };
        let disk = std::sync::Arc::new(MemDisk::new(1));
        let dir = std::path::Path::new("/data/t-0");
        let (mut log, _) = block_on(crate::log::Log::open(disk, dir, config, 0)).unwrap();
        for epoch in 1..=3 {
            let mut bytes = batch(&[b"a", b"b", b"c", b"d"], 1000 * epoch as i64, None);
            batch::set_partition_leader_epoch(&mut bytes, epoch);
            let mut header = batch::check(&bytes).unwrap();
            log.append(&mut bytes, std::slice::from_mut(&mut header), 1)
                .unwrap();
        }
        log
    }

    #[test]
    fn list_offsets_answers_the_epoch_of_the_batch_found() {
        let log = three_epoch_log();
        let lookup = |ts| offset_lookup(&log, 0, 12, 5, ts).unwrap().unwrap();
        let found = |offset, timestamp, leader_epoch| Found {
            offset,
            timestamp,
            leader_epoch,
        };
        assert_eq!(lookup(EARLIEST), found(0, -1, 1));
        assert_eq!(lookup(2001), found(5, 2001, 2));
        assert_eq!(lookup(1003), found(3, 1003, 1));
        assert_eq!(lookup(MAX_TIMESTAMP), found(11, 3003, 3));
        // LATEST: the partition's current leader epoch (5 here), as Kafka's Partition answers.
        assert_eq!(lookup(LATEST), found(12, -1, 5));
        assert_eq!(offset_lookup(&log, 0, 12, 5, 9999).unwrap(), None);
        // A log start inside epoch 2: EARLIEST answers 2.
        let mut moved = log;
        crate::io::memdisk::block_on(moved.start_offset_write(6).write()).unwrap();
        moved.advance_start_offset(6).unwrap();
        assert_eq!(
            offset_lookup(&moved, 6, 12, 5, EARLIEST).unwrap(),
            Some(found(6, -1, 2))
        );
    }

    #[test]
    fn a_lagging_high_watermark_refuses_what_it_cannot_answer_yet() {
        let at = |offset| Found {
            offset,
            timestamp: 5,
            leader_epoch: 1,
        };
        let latest = Some(at(10));
        // Caught up: LATEST is the visible end; a record at the end is not committed yet.
        assert_eq!(visible_answer(LATEST, latest, 10, false), Ok(latest));
        assert_eq!(visible_answer(5, Some(at(9)), 10, false), Ok(Some(at(9))));
        assert_eq!(visible_answer(5, Some(at(10)), 10, false), Ok(None));
        assert_eq!(visible_answer(5, None, 10, false), Ok(None));
        assert_eq!(
            visible_answer(MAX_TIMESTAMP, Some(at(10)), 10, false),
            Ok(None)
        );
        // Lagging: LATEST and an unanswerable time are refused; a found record and EARLIEST stand.
        assert_eq!(
            visible_answer(LATEST, latest, 10, true),
            Err(HighWatermarkLagging)
        );
        assert_eq!(visible_answer(5, Some(at(9)), 10, true), Ok(Some(at(9))));
        assert_eq!(
            visible_answer(5, Some(at(10)), 10, true),
            Err(HighWatermarkLagging)
        );
        assert_eq!(visible_answer(5, None, 10, true), Err(HighWatermarkLagging));
        assert_eq!(
            visible_answer(EARLIEST, Some(at(0)), 10, true),
            Ok(Some(at(0)))
        );
    }

    #[test]
    fn fetch_limits_follow_the_broker_keys() {
        let mut config = ServerConfig::default_single_node();
        config.fetch_max_bytes = 5_000;
        config.replica_fetch_max_bytes = 700;
        config.replica_fetch_response_max_bytes = 3_000;
        let consumer = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_bytes(i32::MAX);
        assert_eq!(fetch_limits(&config, &consumer, 12), (usize::MAX, 5_000));
        let small = consumer.clone().with_max_bytes(100);
        assert_eq!(fetch_limits(&config, &small, 12), (usize::MAX, 100));
        let negative = consumer.clone().with_max_bytes(-4);
        assert_eq!(fetch_limits(&config, &negative, 12), (usize::MAX, 0));
        let follower = consumer.clone().with_replica_id(BrokerId(2));
        assert_eq!(fetch_limits(&config, &follower, 12), (700, 3_000));
        // From v15 on the replica id moved into ReplicaState.
        assert_eq!(fetch_limits(&config, &follower, 15), (usize::MAX, 5_000));
        let follower15 = consumer
            .clone()
            .with_replica_state(ReplicaState::default().with_replica_id(BrokerId(2)));
        assert_eq!(fetch_limits(&config, &follower15, 15), (700, 3_000));
    }
}
