//! Client quota enforcement on the request path (KIP-219): a Produce's request bytes and a
//! consumer Fetch's response bytes are recorded against the client's byte-rate quota
//! (`crate::quota`, with the image's quotas), and every request's handler time against its
//! `request_percentage` (Kafka's `ClientRequestQuotaManager`); over either, the answer goes out
//! at once with `throttle_time_ms` (the largest throttle) and the connection loop then reads
//! nothing more from that client until the throttle ends (`server::serve_connection`: the
//! channel is muted). A Produce is appended anyway; a throttled Fetch returns its partitions
//! without records, and the bytes it would have sent are taken back.
//!
//! Exempt, as Kafka exempts them: followers' fetches, the inter-node traffic of the controller
//! listener, WriteTxnMarkers (cluster actions), and acks=0 produces from the request quota.
//! A client request another broker relayed (Envelope) is charged here, on the controller, as
//! Kafka's controller charges it: its answer carries the throttle, and the relaying broker
//! mutes its client's connection for it ([`relayed`]); the envelope's own connection is never
//! muted.
//!
//! Controller mutations (KIP-599): CreateTopics, CreatePartitions and DeleteTopics take their
//! partitions from the client's `controller_mutation_rate` bucket, topic by topic, where the
//! controller decides ([`MutationQuota`]): strict versions get THROTTLING_QUOTA_EXCEEDED for
//! the topics over it, older ones are carried out and throttled.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use super::throttle_field;
use crate::broker::api::RequestContext;
use crate::broker::handlers::records::fetch;
use crate::broker::{peer, shared::Broker};
use crate::controller::ControllerError;
use crate::quota::{Mutation, QuotaKind};

/// What a request counts against its client's quotas, read before its body goes to the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Charge {
    /// A Produce of this many request bytes (`acks`: 0 is exempt from the request quota).
    Produce(usize, i16),
    /// A consumer's Fetch (charged by its response).
    Fetch,
    /// Handler time only.
    Time,
    /// Nothing (a follower's fetch, a cluster action).
    Exempt,
}

impl Charge {
    pub(crate) fn of(body: &RequestKind, version: i16, frame_len: usize) -> Charge {
        match body {
            RequestKind::Produce(r) => Charge::Produce(frame_len, r.acks),
            RequestKind::Fetch(r) if fetch::replica_id(r, version) < 0 => Charge::Fetch,
            RequestKind::Fetch(_) | RequestKind::WriteTxnMarkers(_) => Charge::Exempt,
            _ => Charge::Time,
        }
    }
}

/// The user a principal names (`User:alice` → `alice`), as quota entities name users.
fn user_of(principal: &str) -> &str {
    principal.strip_prefix("User:").unwrap_or(principal)
}

/// Whether the request is inter-node traffic, never charged.
fn exempt(ctx: &RequestContext, charge: Charge) -> bool {
    charge == Charge::Exempt || (ctx.trusted && !ctx.forwarded)
}

/// Records what the request used (`spent`: its handler's time) and answers how long its
/// connection stays muted; sets the response's `throttle_time_ms` to the largest throttle
/// (its own, a controller mutation's, the quotas'), and empties a throttled Fetch.
/// `response` is `None` for a request answered with nothing (acks=0).
pub(crate) fn apply(
    broker: &Broker,
    ctx: &RequestContext,
    charge: Charge,
    spent: Duration,
    response: Option<&mut ResponseKind>,
) -> Duration {
    if exempt(ctx, charge) {
        return Duration::ZERO;
    }
    let image = broker.image();
    let quotas = image.quotas();
    if quotas.is_empty() {
        return Duration::ZERO;
    }
    let now = broker.io.clock.monotonic();
    let who = (user_of(&ctx.principal), ctx.client_id.as_str());
    let mut core = broker.quotas.lock().unwrap();
    // Kafka records nanoseconds × 100 / 1e9: percent of a thread over one second.
    let percent = spent.as_secs_f64() * 100.0;
    let acks0 = matches!(charge, Charge::Produce(_, 0));
    let request = if acks0 {
        Duration::ZERO
    } else {
        core.record(now, quotas, QuotaKind::Request, who, percent)
    };
    let bytes = match (charge, response.as_deref()) {
        (Charge::Produce(bytes, _), _) => {
            core.record(now, quotas, QuotaKind::Produce, who, bytes as f64)
        }
        (Charge::Fetch, Some(ResponseKind::Fetch(r))) => {
            let bytes: usize = r
                .responses
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| p.records.as_ref().map_or(0, Bytes::len))
                .sum();
            let t = core.record(now, quotas, QuotaKind::Fetch, who, bytes as f64);
            if !t.is_zero() {
                core.unrecord(now, quotas, QuotaKind::Fetch, who, bytes as f64);
            }
            t
        }
        _ => Duration::ZERO,
    };
    drop(core);
    let mut throttle = request.max(bytes);
    if let Some(response) = response {
        if let ResponseKind::Fetch(r) = response {
            if !bytes.is_zero() {
                for p in r.responses.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                    if p.records.is_some() {
                        p.records = Some(Bytes::new());
                    }
                }
            }
        }
        // A controller mutation's throttle, set by its handler.
        let own = Duration::from_millis(throttle_field::get(response).max(0) as u64);
        throttle = throttle.max(own);
        throttle_field::set(response, millis(throttle));
    }
    if !throttle.is_zero() {
        tracing::debug!(
            ?charge,
            user = who.0,
            client = who.1,
            ?request,
            ?bytes,
            ?throttle,
            "client quota exceeded"
        );
    }
    throttle
}

/// How long to mute the client of a request relayed to the controller: the throttle its
/// answer (`frame`, size prefix included) carries (Kafka's `sendForwardedResponse`).
pub(crate) fn relayed(broker: &Broker, key: ApiKey, version: i16, frame: &[u8]) -> Duration {
    if key == ApiKey::DescribeQuorum || frame.len() < 4 || broker.image().quotas().is_empty() {
        return Duration::ZERO;
    }
    match peer::decode_response(key, version, Bytes::copy_from_slice(&frame[4..])) {
        Ok(response) => Duration::from_millis(throttle_field::get(&response).max(0) as u64),
        Err(_) => Duration::ZERO,
    }
}

/// A request's controller mutation quota (Kafka's `ControllerMutationQuota`): charged topic by
/// topic where the controller decides, and the throttle its answer carries.
pub(crate) struct MutationQuota {
    who: Option<(String, String)>,
    strict: bool,
    /// The last throttle and when it was taken (reduced by the time since, as Kafka does for
    /// a request that waited before its answer).
    throttle: Mutex<(Duration, Duration)>,
}

impl MutationQuota {
    /// For a request of `ctx`, strict from version `strict_since` on (CreateTopics 6,
    /// CreatePartitions 3, DeleteTopics 5). Inter-node requests are not charged.
    pub(crate) fn new(ctx: &RequestContext, strict_since: i16) -> MutationQuota {
        let who = (!ctx.trusted || ctx.forwarded).then(|| {
            (
                user_of(&ctx.principal).to_string(),
                ctx.client_id.to_string(),
            )
        });
        MutationQuota {
            who,
            strict: ctx.version >= strict_since,
            throttle: Mutex::new((Duration::ZERO, Duration::ZERO)),
        }
    }

    /// Takes `partitions` from the client's bucket; refused THROTTLING_QUOTA_EXCEEDED when
    /// strict and the bucket is already below zero.
    pub(crate) fn charge(&self, broker: &Broker, partitions: usize) -> Result<(), ControllerError> {
        let Some((user, client)) = &self.who else {
            return Ok(());
        };
        let image = broker.image();
        let quotas = image.quotas();
        if quotas.is_empty() {
            return Ok(());
        }
        let now = broker.io.clock.monotonic();
        let who = (user.as_str(), client.as_str());
        let outcome =
            broker
                .quotas
                .lock()
                .unwrap()
                .mutate(now, quotas, who, partitions as f64, self.strict);
        let (refused, throttle) = match outcome {
            Mutation::Admitted(t) => (false, t),
            Mutation::Refused(t) => (true, t),
        };
        if !throttle.is_zero() {
            *self.throttle.lock().unwrap() = (throttle, now);
        }
        if refused {
            tracing::debug!(
                user,
                client,
                partitions,
                ?throttle,
                "controller mutation quota exceeded"
            );
            return Err(ControllerError::ThrottlingQuotaExceeded(throttle));
        }
        Ok(())
    }

    /// The throttle for the answer, in ms: the last one taken less the time since.
    pub(crate) fn throttle_ms(&self, broker: &Broker) -> i32 {
        let (throttle, at) = *self.throttle.lock().unwrap();
        let since = broker.io.clock.monotonic().saturating_sub(at);
        millis(throttle.saturating_sub(since))
    }
}

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}
