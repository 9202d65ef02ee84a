//! One fetcher's loop, carrying out its core's actions (`replica::fetcher`): read where the
//! ready partitions stand, send one Fetch to the leader, append, look up epochs, ask the
//! leader's offsets, truncate, and report each result back. Only this task appends to or
//! truncates its partitions' logs while they follow (a partition is in one fetcher at a time),
//! and every step is checked against the partition's current state before it is carried out:
//! one for an older position or epoch is reported stale and changes nothing.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchResponse, ListOffsetsRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::local_log::{
    adopt_log_start, append, at_position, handle_at, positions, restart_at, truncate,
};
use super::request::{self, FetchSettings, FETCH_VERSION};
use super::state::Fetcher;
use crate::broker::handlers::records::replication_throttle::Side;
use crate::broker::peer::{self, Link};
use crate::broker::shared::Broker;
use crate::controller::MetadataImage;
use crate::replica::fetcher as core;
use crate::replica::fetcher::{Action, Event, Position, StepResult};

/// How long a Fetch may take beyond the leader's long poll before it counts as lost.
const CALL_SLACK: Duration = Duration::from_millis(3000);
/// The longest idle wait before membership is looked at again.
const IDLE: Duration = Duration::from_millis(1000);
const LIST_OFFSETS_VERSION: i16 = 4;

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
            log_start,
        } => {
            let result = match handle_at(broker, &position) {
                Some(handle) => {
                    match append(broker, &handle, &position, &records, high_watermark).await {
                        StepResult::Done => match log_start.filter(|_| adopts_log_start(broker)) {
                            Some(start) => adopt_log_start(broker, &handle, start).await,
                            None => StepResult::Done,
                        },
                        other => other,
                    }
                }
                None => StepResult::Stale,
            };
            // The position is done with: its topic name becomes the key (not a copy).
            done(
                (position.topic, position.partition),
                position.leader_epoch,
                result,
            )
        }
        Action::LookUpEpoch { position, epoch } => {
            let looked_up = handle_at(broker, &position).and_then(|handle| {
                let p = handle.lock_open()?;
                at_position(&p, &position)
                    .then(|| (p.log().end_offset_for_epoch(epoch), p.log_end_offset()))
            });
            let key = (position.topic, position.partition);
            match looked_up {
                Some((own, log_end)) => Event::EpochLookedUp {
                    key,
                    leader_epoch: position.leader_epoch,
                    own,
                    log_end,
                },
                None => done(key, position.leader_epoch, StepResult::Stale),
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
            done(key, leader_epoch, result)
        }
        Action::BackOff { key, until } => {
            tracing::debug!(topic = %key.0, partition = key.1, ?until, "follower backs off");
            return Vec::new();
        }
        Action::StartAt {
            key,
            leader_epoch,
            from,
            at,
        } => {
            let result = match broker.partition(&key.0, key.1) {
                Some(handle) => restart_at(broker, &handle, leader_epoch, from, at).await,
                None => StepResult::Stale,
            };
            done(key, leader_epoch, result)
        }
    };
    fetcher.step(clock(broker), event)
}

fn done(key: Key, leader_epoch: i32, result: StepResult) -> Event {
    Event::Done {
        key,
        leader_epoch,
        result,
    }
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
    // Replication throttle (KIP-73), follower side: while over the rate, this replica's
    // throttled partitions that are out of the ISR are left out (asked again next time).
    let image = broker.image();
    let me = broker.config.node_id;
    let throttled: BTreeSet<(Uuid, i32)> = positions
        .iter()
        .filter(|p| broker.replication_throttled(&image, Side::Follower, &p.topic, p.partition))
        .map(|p| (p.topic_id, p.partition))
        .collect();
    let over = !throttled.is_empty() && broker.replication_quota_exceeded(&image, Side::Follower);
    // Copied only when some are left out (under the throttle); else the positions as given.
    let sent: std::borrow::Cow<'_, [Position]> = match over {
        false => std::borrow::Cow::Borrowed(positions),
        true => positions
            .iter()
            .filter(|p| {
                !(throttled.contains(&(p.topic_id, p.partition))
                    && broker.out_of_isr(&image, &p.topic, p.partition, me))
            })
            .cloned()
            .collect(),
    };
    if sent.is_empty() {
        clock(broker)
            .sleep(Duration::from_millis(settings.max_wait_ms.max(1) as u64))
            .await;
        return Event::Fetched(Vec::new());
    }
    let req = request::build(&settings, &sent);
    // Diagnostics (`latency` target, see scripts/latency-breakdown).
    tracing::debug!(target: "latency", leader = fetcher.leader, "replica fetch sent");
    let answer = call_fetch(broker, fetcher, link, req, settings.max_wait_ms).await;
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
            if throttled.contains(&(topic.topic_id, data.partition_index)) {
                let bytes = data.records.as_ref().map_or(0, |r| r.len());
                broker.record_replication(Side::Follower, bytes);
            }
            let answer = super::response::classify(&data);
            #[cfg(any(madsim, test))]
            let answer = super::fault_point::catch_up_answer_lost(
                broker,
                &image,
                &sent,
                (topic.topic_id, data.partition_index),
                answer,
            );
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
    let image = broker.image();
    let Some(endpoint) = leader_endpoint(broker, &image, fetcher.leader) else {
        tracing::debug!(leader = fetcher.leader, "no address for the leader yet");
        return None;
    };
    // Compared borrowed; copied only when it changed.
    if slot
        .as_ref()
        .is_none_or(|(e, _)| (e.0.as_str(), e.1) != endpoint)
    {
        let endpoint = (endpoint.0.to_string(), endpoint.1);
        drop(image);
        match broker.io.net.resolve(&endpoint.0, endpoint.1).await {
            Ok(addr) => {
                let new = broker.inter_broker_link(addr, &endpoint.0);
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
fn leader_endpoint<'i>(
    broker: &Broker,
    image: &'i MetadataImage,
    leader: i32,
) -> Option<(&'i str, u16)> {
    let registration = image.broker(leader)?;
    let endpoint = registration
        .endpoint(&broker.config.inter_broker_listener_name)
        .or_else(|| registration.listeners.first())?;
    Some((endpoint.host.as_str(), endpoint.port))
}

async fn call(
    broker: &Broker,
    fetcher: &Fetcher,
    link: &Link,
    key: ApiKey,
    version: i16,
    body: RequestKind,
    limit: Duration,
) -> Result<ResponseKind, String> {
    let frame =
        peer::encode_request(key, version, &fetcher.client_id, &body).map_err(|e| e.to_string())?;
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
    fetcher: &Fetcher,
    link: &Link,
    req: kafka_protocol::messages::FetchRequest,
    max_wait_ms: i32,
) -> Result<FetchResponse, String> {
    let limit = Duration::from_millis(max_wait_ms.max(0) as u64) + CALL_SLACK;
    match call(
        broker,
        fetcher,
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
            leader_offset(broker, fetcher, link, pos, EARLIEST).await,
            leader_offset(broker, fetcher, link, pos, LATEST).await,
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
        None => done(pos.key(), pos.leader_epoch, StepResult::Stale),
    }
}

/// ListOffsets to the leader as a replica (which answers with its log end for LATEST).
async fn leader_offset(
    broker: &Broker,
    fetcher: &Fetcher,
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
        fetcher,
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

/// Whether a follower adopts its leader's log start from fetch answers (always; planted
/// `follower-ignores-log-start`: never, the bug of 518a673..7416dcf).
fn adopts_log_start(broker: &Broker) -> bool {
    #[cfg(any(madsim, test))]
    if crate::planted!(broker.config, FollowerIgnoresLogStart) {
        return false;
    }
    let _ = broker;
    true
}
