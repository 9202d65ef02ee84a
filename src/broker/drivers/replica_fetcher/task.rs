//! One fetcher's loop: read where each of its partitions stands, send one Fetch to the leader,
//! apply each partition's answer, repeat. Only this task appends to or truncates its
//! partitions' logs while they follow (a partition is in one fetcher at a time), and every
//! answer is checked against the partition's current state before it is applied: an answer
//! for an older position, epoch or fetcher is dropped.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchResponse, ListOffsetsRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::request::{self, FetchSettings, Position, FETCH_VERSION};
use super::response::{self, OutOfRangeAction, Outcome};
use super::{Fetcher, MAX_PARTITIONS_PER_FETCH};
use crate::broker::peer::{self, Link};
use crate::broker::replication_events::ReplicationEvent;
use crate::broker::{Broker, PartitionHandle};
use crate::replica::partition::{FollowerAppendError, Role, TruncateError};

/// How long a Fetch may take beyond the leader's long poll before it counts as lost.
const CALL_SLACK: Duration = Duration::from_millis(3000);
/// The longest idle wait before membership is looked at again.
const IDLE: Duration = Duration::from_millis(1000);
const LIST_OFFSETS_VERSION: i16 = 4;
/// File (planted `truncate-to-hw-on-restart` only) standing in for Kafka's
/// `replication-offset-checkpoint`: the follower's high watermark, for its next start.
const HW_CHECKPOINT: &str = "replication-offset-checkpoint";

type Key = (String, i32);

pub(super) async fn run(broker: Arc<Broker>, fetcher: Arc<Fetcher>) {
    let mut shutdown = broker.shutdown_signal();
    let mut link: Option<((String, u16), Link)> = None;
    let backoff = Duration::from_millis(broker.config.replica_fetch_backoff_ms);
    let mut cursor: Option<Key> = None;
    tracing::debug!(leader = fetcher.leader, "replica fetcher started");
    loop {
        if *shutdown.borrow() || fetcher.stopped() {
            tracing::debug!(leader = fetcher.leader, "replica fetcher stopped");
            return;
        }
        let now = broker.io.clock.monotonic();
        let (ready, next_retry) = ready_partitions(&fetcher, now, &mut cursor);
        let positions = positions(&broker, &fetcher, &ready).await;
        check_positions(&positions);
        if positions.is_empty() {
            let wait = next_retry.map_or(IDLE, |t| t.saturating_sub(now).min(IDLE));
            tokio::select! {
                biased;
                _ = shutdown.changed() => {}
                _ = fetcher.changed.notified() => {}
                _ = broker.io.clock.sleep(wait.max(Duration::from_millis(1))) => {}
            }
            continue;
        }
        let Some(endpoint) = leader_endpoint(&broker, fetcher.leader) else {
            tracing::debug!(leader = fetcher.leader, "no address for the leader yet");
            back_off_all(&fetcher, &positions, now + backoff);
            continue;
        };
        // Resolved when the leader's advertised endpoint is new, not on every fetch.
        if link.as_ref().is_none_or(|(e, _)| *e != endpoint) {
            match broker.io.net.resolve(&endpoint.0, endpoint.1).await {
                Ok(addr) => {
                    let new = Link::new(&broker.io, addr, broker.shutdown_signal());
                    link = Some((endpoint, new));
                }
                Err(e) => {
                    tracing::warn!(leader = fetcher.leader, host = %endpoint.0, error = %e,
                        "the leader's advertised host does not resolve");
                    back_off_all(&fetcher, &positions, now + backoff);
                    continue;
                }
            }
        }
        let link = &link.as_ref().expect("just set").1;
        let settings = settings(&broker);
        let req = request::build(&settings, &positions);
        // Diagnostics (`latency` target, see scripts/latency-breakdown).
        tracing::debug!(target: "latency", leader = fetcher.leader, "replica fetch sent");
        let answer = call_fetch(&broker, link, req, settings.max_wait_ms).await;
        tracing::debug!(target: "latency", leader = fetcher.leader, "replica fetch returned");
        let response = match answer {
            Ok(r) if r.error_code == 0 => r,
            Ok(r) => {
                tracing::debug!(
                    leader = fetcher.leader,
                    code = r.error_code,
                    "fetch refused"
                );
                back_off_all(&fetcher, &positions, now + backoff);
                continue;
            }
            Err(e) => {
                tracing::debug!(leader = fetcher.leader, error = %e, "fetch failed");
                back_off_all(&fetcher, &positions, now + backoff);
                continue;
            }
        };
        for topic in response.responses {
            for data in topic.partitions {
                let Some(pos) = positions
                    .iter()
                    .find(|p| p.topic_id == topic.topic_id && p.partition == data.partition_index)
                else {
                    continue;
                };
                let outcome = response::classify(&data);
                apply(&broker, &fetcher, link, pos, outcome, backoff).await;
            }
        }
    }
}

/// The partitions not backing off, at most [`MAX_PARTITIONS_PER_FETCH`], starting after
/// `cursor` (round-robin), and the earliest time one backing off is due.
fn ready_partitions(
    fetcher: &Fetcher,
    now: Duration,
    cursor: &mut Option<Key>,
) -> (Vec<(Key, super::Assigned)>, Option<Duration>) {
    let partitions = fetcher.partitions.lock().unwrap();
    let mut next_retry: Option<Duration> = None;
    let mut ready = Vec::new();
    let start = cursor.clone();
    let after = partitions
        .iter()
        .filter(|(k, _)| start.as_ref().is_none_or(|c| *k > c));
    let before = partitions
        .iter()
        .filter(|(k, _)| start.as_ref().is_some_and(|c| *k <= c));
    for (key, a) in after.chain(before) {
        match a.retry_at {
            Some(t) if t > now => {
                next_retry = Some(next_retry.map_or(t, |n| n.min(t)));
            }
            _ => {
                if ready.len() < MAX_PARTITIONS_PER_FETCH {
                    ready.push((key.clone(), a.clone()));
                }
            }
        }
    }
    if ready.len() == MAX_PARTITIONS_PER_FETCH {
        *cursor = ready.last().map(|(k, _)| k.clone());
    } else {
        *cursor = None;
    }
    (ready, next_retry)
}

/// Where each ready partition stands, read under its lock. A partition not (yet) a follower at
/// the fetcher's epoch, or with a truncation not yet durable, is left out this round.
async fn positions(
    broker: &Broker,
    fetcher: &Fetcher,
    ready: &[(Key, super::Assigned)],
) -> Vec<Position> {
    let mut out = Vec::with_capacity(ready.len());
    for (key, a) in ready {
        let Some(handle) = broker
            .partition(&key.0, key.1)
            .filter(|h| h.topic_id == a.topic_id)
        else {
            continue;
        };
        if a.truncate_to_hw {
            // Planted: the pre-KIP-101 follower cuts its log to its high watermark when it
            // starts following (on restart, to the one it checkpointed).
            fetcher.update(key, a.leader_epoch, |a| a.truncate_to_hw = false);
            let target = planted_checkpointed_hw(broker, &handle, key);
            truncate(broker, &handle, target).await;
        }
        if broker.config.fsync_before_ack {
            // Durable mode: the fetch offset tells the leader what is held here durably, so
            // what an earlier append left unsynced (its flush failed) is synced first.
            let (durable, end) = {
                let p = handle.lock();
                (p.durable_log_end(), p.log_end_offset())
            };
            if durable < end && broker.flush_partition(&handle, end).await.is_err() {
                continue;
            }
        }
        let Some(p) = handle.lock_open() else {
            continue;
        };
        if broker.config.fsync_before_ack && p.durable_log_end() < p.log_end_offset() {
            continue;
        }
        if p.role() != Role::Follower
            || p.leader_epoch() != a.leader_epoch
            || p.pending_truncation().is_some()
        {
            continue;
        }
        let last_fetched_epoch = if a.epoch_unchecked {
            -1
        } else {
            p.log().latest_epoch()
        };
        out.push(Position {
            topic: key.0.clone(),
            topic_id: a.topic_id,
            partition: key.1,
            leader_epoch: a.leader_epoch,
            fetch_offset: p.log_end_offset(),
            last_fetched_epoch,
            log_start_offset: p.log_start_offset(),
        });
    }
    out
}

/// A round's fetch positions: at most [`MAX_PARTITIONS_PER_FETCH`], each partition once, each
/// inside its log (`0 <= log start <= fetch offset`, the fetch offset being the log end).
fn check_positions(positions: &[Position]) {
    assert!(
        positions.len() <= MAX_PARTITIONS_PER_FETCH,
        "{} partitions in one fetch",
        positions.len()
    );
    let mut seen = std::collections::BTreeSet::new();
    for p in positions {
        assert!(
            seen.insert((p.topic_id, p.partition)),
            "{}-{} fetched twice in one request",
            p.topic,
            p.partition
        );
        assert!(
            0 <= p.log_start_offset && p.log_start_offset <= p.fetch_offset,
            "{}-{}: fetch offset {} below log start {}",
            p.topic,
            p.partition,
            p.fetch_offset,
            p.log_start_offset
        );
    }
}

fn settings(broker: &Broker) -> FetchSettings {
    let c = &broker.config;
    let image = broker.image();
    FetchSettings {
        replica_id: c.node_id,
        broker_epoch: image.broker(c.node_id).map_or(-1, |b| b.epoch),
        max_wait_ms: c.replica_fetch_wait_max_ms.min(i32::MAX as u64) as i32,
        min_bytes: c.replica_fetch_min_bytes,
        response_max_bytes: c.replica_fetch_response_max_bytes.min(i32::MAX as usize) as i32,
        partition_max_bytes: c.replica_fetch_max_bytes.min(i32::MAX as usize) as i32,
    }
}

/// The leader's endpoint (host, port) on the inter-broker listener, from the image.
fn leader_endpoint(broker: &Broker, leader: i32) -> Option<(String, u16)> {
    let image = broker.image();
    let registration = image.broker(leader)?;
    let endpoint = registration
        .endpoint(&broker.config.inter_broker_listener_name)
        .or_else(|| registration.listeners.first())?;
    Some((endpoint.host.clone(), endpoint.port))
}

fn back_off_all(fetcher: &Fetcher, positions: &[Position], until: Duration) {
    for p in positions {
        fetcher.back_off(&(p.topic.clone(), p.partition), p.leader_epoch, until);
    }
}

async fn call(
    broker: &Broker,
    link: &Link,
    key: ApiKey,
    version: i16,
    body: RequestKind,
    limit: Duration,
) -> Result<ResponseKind, String> {
    let client_id = format!("weir-replica-fetcher-{}", broker.config.node_id);
    let frame = peer::encode_request(key, version, &client_id, &body).map_err(|e| e.to_string())?;
    let rx = link.call(frame);
    let mut shutdown = broker.shutdown_signal();
    let reply = tokio::select! {
        biased;
        _ = shutdown.changed() => return Err("shutting down".into()),
        r = broker.io.timeout(limit, rx) => r,
    };
    match reply {
        Some(Ok(Ok(frame))) => {
            peer::decode_response(key, version, frame).map_err(|e| e.to_string())
        }
        Some(Ok(Err(e))) => Err(e.to_string()),
        Some(Err(_)) => Err("the link dropped the call".into()),
        None => Err("no answer in time".into()),
    }
}

async fn call_fetch(
    broker: &Broker,
    link: &Link,
    req: kafka_protocol::messages::FetchRequest,
    max_wait_ms: i32,
) -> Result<FetchResponse, String> {
    let limit = Duration::from_millis(max_wait_ms.max(0) as u64) + CALL_SLACK;
    match call(
        broker,
        link,
        ApiKey::Fetch,
        FETCH_VERSION,
        RequestKind::Fetch(req),
        limit,
    )
    .await?
    {
        ResponseKind::Fetch(r) => Ok(r),
        _ => Err("not a fetch response".into()),
    }
}

/// The partition handle if the answer still applies: the partition is still in this fetcher
/// at the position's epoch, and still open.
fn current(broker: &Broker, fetcher: &Fetcher, pos: &Position) -> Option<Arc<PartitionHandle>> {
    let key = (pos.topic.clone(), pos.partition);
    let a = fetcher.assigned(&key)?;
    if a.leader_epoch != pos.leader_epoch || a.topic_id != pos.topic_id || fetcher.stopped() {
        return None;
    }
    broker
        .partition(&pos.topic, pos.partition)
        .filter(|h| h.topic_id == pos.topic_id)
}

async fn apply(
    broker: &Broker,
    fetcher: &Fetcher,
    link: &Link,
    pos: &Position,
    outcome: Outcome,
    backoff: Duration,
) {
    let Some(handle) = current(broker, fetcher, pos) else {
        return;
    };
    let key = (pos.topic.clone(), pos.partition);
    let retry_later = || {
        fetcher.back_off(
            &key,
            pos.leader_epoch,
            broker.io.clock.monotonic() + backoff,
        )
    };
    match outcome {
        Outcome::Records {
            records,
            high_watermark,
            ..
        } => {
            if !append(broker, &handle, pos, &records, high_watermark).await {
                retry_later();
            }
        }
        Outcome::Diverging(end) => {
            let target = {
                let Some(p) = handle.lock_open() else { return };
                if !at_position(&p, pos) {
                    return;
                }
                if crate::planted!(broker.config, NoDivergingEpochCheck) {
                    // Planted (pre-KIP-279): trust the leader's end offset without looking up
                    // our own end of its epoch, then fetch on without epoch checks.
                    fetcher.update(&key, pos.leader_epoch, |a| a.epoch_unchecked = true);
                    end.end_offset.min(p.log_end_offset())
                } else {
                    p.divergence_truncation_offset(end)
                }
            };
            tracing::info!(topic = %pos.topic, partition = pos.partition, epoch = end.epoch,
                end_offset = end.end_offset, target, "log diverges from the leader's; truncating");
            if !truncate(broker, &handle, target).await {
                retry_later();
            }
        }
        Outcome::OutOfRange => {
            if !out_of_range(broker, link, &handle, pos).await {
                retry_later();
            }
        }
        Outcome::WaitForMetadata(code) => {
            tracing::debug!(topic = %pos.topic, partition = pos.partition,
                error = ?ResponseError::try_from_code(code), "follower waits for new metadata");
            retry_later();
        }
        Outcome::Retry(code) => {
            tracing::debug!(topic = %pos.topic, partition = pos.partition,
                error = ?ResponseError::try_from_code(code), code, "follower fetch error; backing off");
            retry_later();
        }
    }
}

/// Whether the partition is still where `pos` says (a follower at that epoch, same log end).
fn at_position(p: &crate::replica::Partition, pos: &Position) -> bool {
    p.role() == Role::Follower
        && p.leader_epoch() == pos.leader_epoch
        && p.log_end_offset() == pos.fetch_offset
        && p.pending_truncation().is_none()
}

/// Appends the leader's batches and follows its high watermark. `false`: back off.
async fn append(
    broker: &Broker,
    handle: &PartitionHandle,
    pos: &Position,
    records: &[u8],
    leader_high_watermark: i64,
) -> bool {
    let mut appended_to = None;
    // Twice at most: once more after the log was made to accept offset gaps.
    for _ in 0..2 {
        let marker = {
            let Some(mut p) = handle.lock_open() else {
                return true;
            };
            if !at_position(&p, pos) {
                return true;
            }
            match p.append_as_follower(records, broker.io.clock.wall_ms()) {
                Ok(done) => {
                    appended_to = done.map(|a| a.last_offset + 1);
                    p.follow_high_watermark(leader_high_watermark);
                    #[cfg(any(madsim, test))]
                    if crate::planted!(broker.config, TruncateToHwOnRestart) {
                        planted_note_hw(broker, &p);
                    }
                    None
                }
                Err(FollowerAppendError::NeedsGapMarker) => {
                    Some((p.log().gap_marker(), p.log().dir().to_path_buf()))
                }
                Err(FollowerAppendError::Storage(e)) => {
                    drop(p);
                    broker.storage_failed("a follower append", &e);
                    return false;
                }
                Err(e) => {
                    tracing::warn!(topic = %pos.topic, partition = pos.partition, error = %e,
                        "the leader's batches were refused");
                    return false;
                }
            }
        };
        let Some((marker, dir)) = marker else { break };
        // The first gap (a compacted leader): recovery must accept gaps before any gapped
        // batch can be on disk.
        let _gate = handle.flush_gate.lock().await;
        if let Err(e) = marker.write(broker.io.disk.as_ref(), &dir).await {
            broker.storage_failed("the follower's gap marker", &e);
            return false;
        }
        match handle.lock_open() {
            Some(mut p) => p.log_mut().allow_gaps(),
            None => return true,
        }
    }
    if let Some(end) = appended_to {
        if broker.config.fsync_before_ack {
            // Durable mode: the next fetch offset (which the leader counts towards its high
            // watermark) covers only what is fsynced here.
            if let Err(e) = broker.flush_partition(handle, end).await {
                tracing::warn!(topic = %pos.topic, partition = pos.partition, error = %e,
                    "follower flush failed");
                return false;
            }
        }
    }
    true
}

/// Cuts the log to `target` and makes the cut durable (under the flush gate, so no checkpoint
/// of the old state lands after it) before anything is appended again. `false`: back off.
async fn truncate(broker: &Broker, handle: &PartitionHandle, target: i64) -> bool {
    let _gate = handle.flush_gate.lock().await;
    let (plan, from, leader_epoch) = {
        let Some(mut p) = handle.lock_open() else {
            return true;
        };
        let (from, leader_epoch) = (p.log_end_offset(), p.leader_epoch());
        match p.truncate_to(target) {
            Ok(Some(plan)) => (plan, from, leader_epoch),
            Ok(None) => return true,
            Err(TruncateError::Storage(e)) => {
                drop(p);
                broker.storage_failed("a follower truncation", &e);
                return false;
            }
            Err(e) => {
                tracing::warn!(topic = p.topic(), partition = p.index(), target, error = %e,
                    "truncation refused");
                return false;
            }
        }
    };
    if let Err(e) = plan.make_durable().await {
        broker.storage_failed("a follower truncation", &e);
        return false;
    }
    handle
        .lock()
        .truncation_durable(&plan, broker.io.clock.wall_ms());
    broker.replication_events.emit(|| {
        let p = handle.lock();
        ReplicationEvent::Truncated {
            topic: p.topic().to_string(),
            partition: p.index(),
            leader_epoch,
            from,
            to: target,
        }
    });
    true
}

/// OFFSET_OUT_OF_RANGE: asks the leader for its log start and end, then acts as Kafka's
/// follower does. `false`: back off.
async fn out_of_range(
    broker: &Broker,
    link: &Link,
    handle: &PartitionHandle,
    pos: &Position,
) -> bool {
    const EARLIEST: i64 = -2;
    const LATEST: i64 = -1;
    let (Some(start), Some(end)) = (
        leader_offset(broker, link, pos, EARLIEST).await,
        leader_offset(broker, link, pos, LATEST).await,
    ) else {
        return false;
    };
    let local_end = {
        let Some(p) = handle.lock_open() else {
            return true;
        };
        if !at_position(&p, pos) {
            return true;
        }
        p.log_end_offset()
    };
    match response::out_of_range(local_end, start, end) {
        OutOfRangeAction::TruncateTo(offset) => {
            tracing::warn!(topic = %pos.topic, partition = pos.partition, local_end, leader_end = end,
                "the leader's log ends before ours (unclean election?); truncating to it");
            truncate(broker, handle, offset).await
        }
        OutOfRangeAction::StartAt(offset) => {
            // Starting an emptied log at a later offset is not supported yet: this replica
            // stays behind (and out of the ISR) until an operator reassigns it.
            tracing::error!(topic = %pos.topic, partition = pos.partition, local_end,
                leader_start = offset, "the leader no longer has what this follower misses");
            false
        }
        OutOfRangeAction::Retry => false,
    }
}

/// ListOffsets to the leader as a replica (which answers with its log end for LATEST).
async fn leader_offset(
    broker: &Broker,
    link: &Link,
    pos: &Position,
    timestamp: i64,
) -> Option<i64> {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(broker.config.node_id))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(pos.topic.clone())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(pos.partition)
                .with_current_leader_epoch(pos.leader_epoch)
                .with_timestamp(timestamp)])]);
    let answer = call(
        broker,
        link,
        ApiKey::ListOffsets,
        LIST_OFFSETS_VERSION,
        RequestKind::ListOffsets(req),
        CALL_SLACK,
    )
    .await;
    let ResponseKind::ListOffsets(r) = answer.ok()? else {
        return None;
    };
    let p = r.topics.first()?.partitions.first()?;
    (p.error_code == 0 && p.offset >= 0).then_some(p.offset)
}

/// Planted `truncate-to-hw-on-restart`: the high watermark this follower checkpointed (none:
/// no cut), capped at its log end.
fn planted_checkpointed_hw(broker: &Broker, handle: &PartitionHandle, key: &Key) -> i64 {
    let end = handle.lock().log_end_offset();
    let path = broker.partition_dir(&key.0, key.1).join(HW_CHECKPOINT);
    let stored = crate::io::read_file(broker.io.disk.as_ref(), &path)
        .ok()
        .and_then(|raw| String::from_utf8(raw).ok())
        .and_then(|s| s.trim().parse::<i64>().ok());
    stored.unwrap_or(end).min(end)
}

/// Planted `truncate-to-hw-on-restart`: checkpoints the follower's high watermark (page cache
/// only, as Kafka's periodic checkpoint lags the truth).
#[cfg(any(madsim, test))]
fn planted_note_hw(broker: &Broker, p: &crate::replica::Partition) {
    let path = p.log().dir().join(HW_CHECKPOINT);
    let text = p.high_watermark().to_string();
    let written = broker
        .io
        .disk
        .open(&path, crate::io::OpenMode::Create)
        .and_then(|f| {
            f.set_len(0)?;
            f.write_at(0, text.as_bytes())
        });
    if let Err(e) = written {
        tracing::debug!(error = %e, "planted HW checkpoint not written");
    }
}
