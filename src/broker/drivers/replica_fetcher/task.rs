//! One fetcher's loop, carrying out its core's actions (`replica::fetcher`): read where the
//! ready partitions stand, send one Fetch to the leader, append, look up epochs, ask the
//! leader's offsets, truncate, and report each result back. Only this task appends to or
//! truncates its partitions' logs while they follow (a partition is in one fetcher at a time),
//! and every step is checked against the partition's current state before it is carried out:
//! one for an older position or epoch is reported stale and changes nothing.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchResponse, ListOffsetsRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::request::{self, FetchSettings, FETCH_VERSION};
use super::{core, Fetcher};
use crate::broker::peer::{self, Link};
use crate::broker::replication_events::ReplicationEvent;
use crate::broker::{Broker, PartitionHandle};
use crate::replica::fetcher::{Action, Event, Position, StepResult, ToRead};
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
/// The leader's endpoint (host, port) and the link to it.
type LinkSlot = Option<((String, u16), Link)>;

pub(super) async fn run(broker: Arc<Broker>, fetcher: Arc<Fetcher>) {
    let mut shutdown = broker.shutdown_signal();
    let mut link: LinkSlot = None;
    tracing::debug!(leader = fetcher.leader, "replica fetcher started");
    loop {
        if *shutdown.borrow() || fetcher.stopped() {
            tracing::debug!(leader = fetcher.leader, "replica fetcher stopped");
            return;
        }
        let mut queue: VecDeque<Action> = fetcher.step(clock(&broker), Event::Poll).into();
        if queue.is_empty() {
            let now = broker.io.clock.monotonic();
            let next = fetcher.core.lock().unwrap().next_deadline();
            let wait = next.map_or(IDLE, |t| t.saturating_sub(now).min(IDLE));
            tokio::select! {
                biased;
                _ = shutdown.changed() => {}
                _ = fetcher.changed.notified() => {}
                _ = broker.io.clock.sleep(wait.max(Duration::from_millis(1))) => {}
            }
            continue;
        }
        // Depth first: a step's follow-ups run before the next partition's step, so each
        // partition's answer is carried out to the end in the order the leader gave them.
        while let Some(action) = queue.pop_front() {
            let follow_ups = execute(&broker, &fetcher, &mut link, action).await;
            for a in follow_ups.into_iter().rev() {
                queue.push_front(a);
            }
        }
        assert!(
            !fetcher.core.lock().unwrap().round_open(),
            "a round left open after its actions ran"
        );
    }
}

fn clock(broker: &Broker) -> &dyn crate::io::Clock {
    broker.io.clock.as_ref()
}

/// Carries out one action and reports its result to the core; returns what the core asks next.
/// Every action that opens a step is answered, whatever happens, so no partition is left
/// waiting on a step that will never end.
async fn execute(
    broker: &Broker,
    fetcher: &Fetcher,
    link: &mut LinkSlot,
    action: Action,
) -> Vec<Action> {
    let event = match action {
        Action::ReadPositions(list) => Event::Positions(positions(broker, &list).await),
        Action::SendFetch(positions) => send_fetch(broker, fetcher, link, &positions).await,
        Action::Append {
            position,
            records,
            high_watermark,
        } => {
            let result = match handle_at(broker, &position) {
                Some(handle) => append(broker, &handle, &position, &records, high_watermark).await,
                None => StepResult::Stale,
            };
            done(&position.key(), position.leader_epoch, result)
        }
        Action::LookUpEpoch { position, epoch } => {
            let looked_up = handle_at(broker, &position).and_then(|handle| {
                let p = handle.lock_open()?;
                at_position(&p, &position)
                    .then(|| (p.log().end_offset_for_epoch(epoch), p.log_end_offset()))
            });
            match looked_up {
                Some((own, log_end)) => Event::EpochLookedUp {
                    key: position.key(),
                    leader_epoch: position.leader_epoch,
                    own,
                    log_end,
                },
                None => done(&position.key(), position.leader_epoch, StepResult::Stale),
            }
        }
        Action::AskLeaderOffsets { position } => {
            ask_leader_offsets(broker, fetcher, link, &position).await
        }
        Action::Truncate {
            key,
            leader_epoch,
            from,
            to,
        } => {
            let result = match broker.partition(&key.0, key.1) {
                Some(handle) => truncate(broker, &handle, leader_epoch, Some(from), to).await,
                None => StepResult::Stale,
            };
            done(&key, leader_epoch, result)
        }
        Action::BackOff { key, until } => {
            tracing::debug!(topic = %key.0, partition = key.1, ?until, "follower backs off");
            return Vec::new();
        }
        Action::Behind { key, leader_start } => {
            // Starting an emptied log at a later offset is not supported yet: this replica
            // stays behind (and out of the ISR) until an operator reassigns it.
            tracing::error!(topic = %key.0, partition = key.1, leader_start,
                "the leader no longer has what this follower misses");
            return Vec::new();
        }
    };
    fetcher.step(clock(broker), event)
}

fn done(key: &Key, leader_epoch: i32, result: StepResult) -> Event {
    Event::Done {
        key: key.clone(),
        leader_epoch,
        result,
    }
}

/// Where each partition to read stands, read under its lock. A partition not (yet) a follower
/// at the fetcher's epoch, or with a truncation not yet durable, is left out this round.
async fn positions(broker: &Broker, list: &[ToRead]) -> Vec<Position> {
    let mut out = Vec::with_capacity(list.len());
    for r in list {
        let key = &r.key;
        let Some(handle) = broker
            .partition(&key.0, key.1)
            .filter(|h| h.topic_id == r.topic_id)
        else {
            continue;
        };
        if r.truncate_to_hw_first {
            // Planted: the pre-KIP-101 follower cuts its log to its high watermark when it
            // starts following (on restart, to the one it checkpointed).
            let target = planted_checkpointed_hw(broker, &handle, key);
            truncate(broker, &handle, r.leader_epoch, None, target).await;
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
            || p.leader_epoch() != r.leader_epoch
            || p.pending_truncation().is_some()
        {
            continue;
        }
        out.push(Position {
            topic: key.0.clone(),
            topic_id: r.topic_id,
            partition: key.1,
            leader_epoch: r.leader_epoch,
            fetch_offset: p.log_end_offset(),
            last_fetched_epoch: p.log().latest_epoch(),
            log_start_offset: p.log_start_offset(),
        });
    }
    out
}

/// Sends one Fetch for `positions` and sorts the leader's answer per partition.
async fn send_fetch(
    broker: &Broker,
    fetcher: &Fetcher,
    link: &mut LinkSlot,
    positions: &[Position],
) -> Event {
    let Some(link) = link_to_leader(broker, fetcher, link).await else {
        return Event::FetchFailed;
    };
    let settings = settings(broker);
    let req = request::build(&settings, positions);
    // Diagnostics (`latency` target, see scripts/latency-breakdown).
    tracing::debug!(target: "latency", leader = fetcher.leader, "replica fetch sent");
    let answer = call_fetch(broker, link, req, settings.max_wait_ms).await;
    tracing::debug!(target: "latency", leader = fetcher.leader, "replica fetch returned");
    let response = match answer {
        Ok(r) if r.error_code == 0 => r,
        Ok(r) => {
            tracing::debug!(
                leader = fetcher.leader,
                code = r.error_code,
                "fetch refused"
            );
            return Event::FetchFailed;
        }
        Err(e) => {
            tracing::debug!(leader = fetcher.leader, error = %e, "fetch failed");
            return Event::FetchFailed;
        }
    };
    let mut answers = Vec::new();
    for topic in response.responses {
        for data in topic.partitions {
            let answer = super::response::classify(&data);
            if let core::Answer::WaitForMetadata(code) | core::Answer::Retry(code) = answer {
                tracing::debug!(
                    leader = fetcher.leader,
                    partition = data.partition_index,
                    code,
                    "follower fetch error"
                );
            }
            answers.push((topic.topic_id, data.partition_index, answer));
        }
    }
    Event::Fetched(answers)
}

/// The link to the fetcher's leader, resolved when its advertised endpoint is new (not on
/// every fetch). `None`: no address for it yet, or it does not resolve.
async fn link_to_leader<'a>(
    broker: &Broker,
    fetcher: &Fetcher,
    slot: &'a mut LinkSlot,
) -> Option<&'a Link> {
    let Some(endpoint) = leader_endpoint(broker, fetcher.leader) else {
        tracing::debug!(leader = fetcher.leader, "no address for the leader yet");
        return None;
    };
    if slot.as_ref().is_none_or(|(e, _)| *e != endpoint) {
        match broker.io.net.resolve(&endpoint.0, endpoint.1).await {
            Ok(addr) => {
                let new = Link::new(&broker.io, addr, broker.shutdown_signal());
                *slot = Some((endpoint, new));
            }
            Err(e) => {
                tracing::warn!(leader = fetcher.leader, host = %endpoint.0, error = %e,
                    "the leader's advertised host does not resolve");
                return None;
            }
        }
    }
    slot.as_ref().map(|(_, link)| link)
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

/// The partition's handle if it is still open under the position's topic id.
fn handle_at(broker: &Broker, pos: &Position) -> Option<Arc<PartitionHandle>> {
    broker
        .partition(&pos.topic, pos.partition)
        .filter(|h| h.topic_id == pos.topic_id)
}

/// Whether the partition is still where `pos` says (a follower at that epoch, same log end).
fn at_position(p: &crate::replica::Partition, pos: &Position) -> bool {
    p.role() == Role::Follower
        && p.leader_epoch() == pos.leader_epoch
        && p.log_end_offset() == pos.fetch_offset
        && p.pending_truncation().is_none()
}

/// Appends the leader's batches and follows its high watermark.
async fn append(
    broker: &Broker,
    handle: &PartitionHandle,
    pos: &Position,
    records: &[u8],
    leader_high_watermark: i64,
) -> StepResult {
    let mut appended_to = None;
    // Twice at most: once more after the log was made to accept offset gaps.
    for _ in 0..2 {
        let marker = {
            let Some(mut p) = handle.lock_open() else {
                return StepResult::Stale;
            };
            if !at_position(&p, pos) {
                return StepResult::Stale;
            }
            match p.append_as_follower(records, broker.io.clock.wall_ms()) {
                Ok(done) => {
                    appended_to = done.map(|a| a.last_offset + 1);
                    p.follow_high_watermark(leader_high_watermark);
                    // The driver's bookkeeping: the log only grew from the fetch offset, and
                    // the high watermark followed no further than it.
                    assert!(
                        p.log_end_offset() >= pos.fetch_offset,
                        "an append shrank the log"
                    );
                    assert!(p.high_watermark() <= p.log_end_offset());
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
                    return StepResult::Failed;
                }
                Err(e) => {
                    tracing::warn!(topic = %pos.topic, partition = pos.partition, error = %e,
                        "the leader's batches were refused");
                    return StepResult::Failed;
                }
            }
        };
        let Some((marker, dir)) = marker else { break };
        // The first gap (a compacted leader): recovery must accept gaps before any gapped
        // batch can be on disk.
        let _gate = handle.flush_gate.lock().await;
        if let Err(e) = marker.write(broker.io.disk.as_ref(), &dir).await {
            broker.storage_failed("the follower's gap marker", &e);
            return StepResult::Failed;
        }
        match handle.lock_open() {
            Some(mut p) => p.log_mut().allow_gaps(),
            None => return StepResult::Stale,
        }
    }
    if let Some(end) = appended_to {
        if broker.config.fsync_before_ack {
            // Durable mode: the next fetch offset (which the leader counts towards its high
            // watermark) covers only what is fsynced here.
            if let Err(e) = broker.flush_partition(handle, end).await {
                tracing::warn!(topic = %pos.topic, partition = pos.partition, error = %e,
                    "follower flush failed");
                return StepResult::Failed;
            }
        }
    }
    StepResult::Done
}

/// Cuts the log to `to` if it is still a follower at `leader_epoch` ending at `from` (`None`:
/// the planted cut, unchecked), and makes the cut durable (under the flush gate, so no
/// checkpoint of the old state lands after it) before anything is appended again.
async fn truncate(
    broker: &Broker,
    handle: &PartitionHandle,
    leader_epoch: i32,
    expected_end: Option<i64>,
    to: i64,
) -> StepResult {
    let _gate = handle.flush_gate.lock().await;
    let (plan, from) = {
        let Some(mut p) = handle.lock_open() else {
            return StepResult::Stale;
        };
        let from = p.log_end_offset();
        if expected_end.is_some_and(|end| {
            p.role() != Role::Follower
                || p.leader_epoch() != leader_epoch
                || from != end
                || p.pending_truncation().is_some()
        }) {
            return StepResult::Stale;
        }
        tracing::info!(
            topic = p.topic(),
            partition = p.index(),
            from,
            to,
            "log diverges from the leader's; truncating"
        );
        match p.truncate_to(to) {
            Ok(Some(plan)) => (plan, from),
            Ok(None) => return StepResult::Done,
            Err(TruncateError::Storage(e)) => {
                drop(p);
                broker.storage_failed("a follower truncation", &e);
                return StepResult::Failed;
            }
            Err(e) => {
                tracing::warn!(topic = p.topic(), partition = p.index(), to, error = %e,
                    "truncation refused");
                return StepResult::Failed;
            }
        }
    };
    if let Err(e) = plan.make_durable().await {
        broker.storage_failed("a follower truncation", &e);
        return StepResult::Failed;
    }
    {
        let mut p = handle.lock();
        p.truncation_durable(&plan, broker.io.clock.wall_ms());
        // The driver's bookkeeping: a truncation never lengthens the log.
        assert!(
            p.log_end_offset() <= from,
            "a truncation lengthened the log"
        );
    }
    broker.replication_events.emit(|| {
        let p = handle.lock();
        ReplicationEvent::Truncated {
            topic: p.topic().to_string(),
            partition: p.index(),
            leader_epoch,
            from,
            to,
        }
    });
    StepResult::Done
}

/// OFFSET_OUT_OF_RANGE: asks the leader for its log start and end, and reads our log end.
async fn ask_leader_offsets(
    broker: &Broker,
    fetcher: &Fetcher,
    link: &mut LinkSlot,
    pos: &Position,
) -> Event {
    const EARLIEST: i64 = -2;
    const LATEST: i64 = -1;
    let offsets = match link_to_leader(broker, fetcher, link).await {
        Some(link) => match (
            leader_offset(broker, link, pos, EARLIEST).await,
            leader_offset(broker, link, pos, LATEST).await,
        ) {
            (Some(start), Some(end)) => Some((start, end)),
            _ => None,
        },
        None => None,
    };
    let local_end = handle_at(broker, pos).and_then(|handle| {
        let p = handle.lock_open()?;
        at_position(&p, pos).then(|| p.log_end_offset())
    });
    match local_end {
        Some(local_end) => Event::LeaderOffsets {
            key: pos.key(),
            leader_epoch: pos.leader_epoch,
            offsets,
            local_end,
        },
        None => done(&pos.key(), pos.leader_epoch, StepResult::Stale),
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
