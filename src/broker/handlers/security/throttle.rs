//! Client quota enforcement on the request path (KIP-219): a Produce's request bytes and a
//! consumer Fetch's response bytes are recorded against the client's quota
//! (`crate::quota`, with the image's quotas); over it, the answer goes out at once with
//! `throttle_time_ms` and the connection loop then reads nothing more from that client until
//! the throttle ends (`server::serve_connection`: the channel is muted). A Produce is appended
//! anyway; a throttled Fetch returns its partitions without records, and the bytes it would
//! have sent are taken back. Followers' fetches and the controller listener's requests are
//! not client traffic and are never throttled.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{RequestKind, ResponseKind};

use crate::broker::api::RequestContext;
use crate::broker::handlers::records::fetch;
use crate::broker::Broker;
use crate::quota::QuotaKind;

/// What a request counts against its client's quota, read before its body goes to the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Charge {
    /// A Produce of this many request bytes.
    Produce(usize),
    /// A consumer's Fetch (charged by its response).
    Fetch,
    None,
}

impl Charge {
    pub(crate) fn of(body: &RequestKind, version: i16, frame_len: usize) -> Charge {
        match body {
            RequestKind::Produce(_) => Charge::Produce(frame_len),
            RequestKind::Fetch(r) if fetch::replica_id(r, version) < 0 => Charge::Fetch,
            _ => Charge::None,
        }
    }
}

/// The user a principal names (`User:alice` → `alice`), as quota entities name users.
fn user_of(principal: &str) -> &str {
    principal.strip_prefix("User:").unwrap_or(principal)
}

/// Records what the request used and answers how long its connection stays muted; sets the
/// response's `throttle_time_ms` (the larger of its own and the quota's), and empties a
/// throttled Fetch. `response` is `None` for a request answered with nothing (acks=0).
pub(crate) fn apply(
    broker: &Broker,
    ctx: &RequestContext,
    charge: Charge,
    response: Option<&mut ResponseKind>,
) -> Duration {
    if charge == Charge::None || ctx.trusted {
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
    let throttle = match (charge, response) {
        (Charge::Produce(bytes), response) => {
            let t = core.record(now, quotas, QuotaKind::Produce, who, bytes as f64);
            if let Some(ResponseKind::Produce(r)) = response {
                r.throttle_time_ms = r.throttle_time_ms.max(millis(t));
            }
            t
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
                for p in r.responses.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                    if p.records.is_some() {
                        p.records = Some(Bytes::new());
                    }
                }
                r.throttle_time_ms = r.throttle_time_ms.max(millis(t));
            }
            t
        }
        _ => Duration::ZERO,
    };
    if !throttle.is_zero() {
        tracing::debug!(
            ?charge,
            user = who.0,
            client = who.1,
            ?throttle,
            "client quota exceeded"
        );
    }
    throttle
}

fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}
