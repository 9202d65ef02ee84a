//! Client quota enforcement (Kafka's `ClientQuotaManager`, KIP-13/55/124/219), as a pure core:
//! what a client used comes in with `now` and the quotas the image holds; out comes how long
//! the client is throttled. No clock, no I/O: the broker's request path
//! (`broker::handlers::quota_throttle`) calls it and mutes the connection for the answer.
//!
//! The quota that applies to (user, client id) is the most specific configured for the key,
//! in Kafka's order: user+client, user+default client, user, default user+client, default
//! user+default client, default user, client, default client. Connections matching the same
//! quota share one rate, named by Kafka's metric tags: a default matched stands for each
//! user or client id on its own (every user gets the default, each its own rate).
//!
//! Invariants (checked after every step): every rate's windows are consistent (`rate`) and
//! its measure finite; a throttle is zero when no quota applies.

pub mod connections;
pub mod rate;
pub mod replication;
pub mod token_bucket;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::controller::image::quotas::{ClientQuotas, EntityName, QuotaEntity};
use rate::SampledRate;
use token_bucket::TokenBucket;

/// What is measured, each against its own quota key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QuotaKind {
    /// Produce request bytes per second (`producer_byte_rate`).
    Produce,
    /// Fetch response bytes per second (`consumer_byte_rate`).
    Fetch,
    /// Percent of one thread's time spent on the client's requests (`request_percentage`).
    Request,
    /// Partitions created or deleted per second (`controller_mutation_rate`, KIP-599).
    ControllerMutation,
}

impl QuotaKind {
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
            QuotaKind::Request => "request_percentage",
            QuotaKind::ControllerMutation => "controller_mutation_rate",
        }
    }
}

/// How rates are measured: `quota.window.num` windows of `quota.window.size.seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaWindows {
    pub samples: u32,
    pub window: Duration,
}

impl Default for QuotaWindows {
    fn default() -> QuotaWindows {
        QuotaWindows {
            samples: 11,
            window: Duration::from_secs(1),
        }
    }
}

/// The quota that applies and the group that shares its rate: (limit, user tag, client tag).
pub type Matched = (f64, String, String);

/// The quota for `kind` that applies to a client, by Kafka's precedence.
pub fn resolve(
    quotas: &ClientQuotas,
    kind: QuotaKind,
    user: &str,
    client: &str,
) -> Option<Matched> {
    if quotas.is_empty() {
        return None;
    }
    let named = |s: &str| EntityName::Named(s.to_string());
    let d = || EntityName::Default;
    let (u, c, none) = (user, client, "");
    // (entity, user tag, client tag)
    let order = [
        (QuotaEntity::user_client(named(user), named(client)), u, c),
        (QuotaEntity::user_client(named(user), d()), u, c),
        (QuotaEntity::user(named(user)), u, none),
        (QuotaEntity::user_client(d(), named(client)), u, c),
        (QuotaEntity::user_client(d(), d()), u, c),
        (QuotaEntity::user(d()), u, none),
        (QuotaEntity::client(named(client)), none, c),
        (QuotaEntity::client(d()), none, c),
    ];
    order.into_iter().find_map(|(entity, ut, ct)| {
        quotas
            .get(&entity, kind.key())
            .map(|limit| (limit, ut.to_string(), ct.to_string()))
    })
}

/// What a controller mutation is told ([`ClientQuotaCore::mutate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Carried out; the client is then throttled this long (zero within its quota).
    Admitted(Duration),
    /// Refused THROTTLING_QUOTA_EXCEEDED; the client is throttled this long.
    Refused(Duration),
}

/// The rates of every client group with a quota, and how they are measured.
#[derive(Clone, Debug)]
pub struct ClientQuotaCore {
    windows: QuotaWindows,
    rates: BTreeMap<(QuotaKind, String, String), SampledRate>,
    /// Controller mutation buckets by (user tag, client tag), with the limit last applied.
    buckets: BTreeMap<(String, String), (TokenBucket, f64)>,
    /// When idle rates were last forgotten.
    swept: Duration,
}

impl ClientQuotaCore {
    pub fn new(windows: QuotaWindows) -> ClientQuotaCore {
        assert!(windows.samples >= 1 && !windows.window.is_zero());
        ClientQuotaCore {
            windows,
            rates: BTreeMap::new(),
            buckets: BTreeMap::new(),
            swept: Duration::ZERO,
        }
    }

    /// Records `amount` used by (user, client) at `now` and answers how long the client is
    /// throttled: zero within its quota (or with none); else (Kafka's `QuotaUtils.throttleTime`)
    /// `(rate − limit) / limit × span`, the time the rate takes to fall back to the limit. The
    /// request quota's throttle is at most one window (Kafka's `ClientRequestQuotaManager`
    /// bounds it so: a long request does not mute its client for many seconds).
    pub fn record(
        &mut self,
        now: Duration,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        (user, client): (&str, &str),
        amount: f64,
    ) -> Duration {
        self.sweep(now);
        let Some((limit, ut, ct)) = resolve(quotas, kind, user, client) else {
            return Duration::ZERO;
        };
        let windows = self.windows;
        let rate = self
            .rates
            .entry((kind, ut, ct))
            .or_insert_with(|| SampledRate::new(windows.samples, windows.window));
        rate.record(now, amount.max(0.0));
        let observed = rate.measure(now);
        let throttle = if observed > limit {
            let span = rate.span(now).as_secs_f64();
            Duration::from_secs_f64(((observed - limit) / limit * span).min(1e9))
        } else {
            Duration::ZERO
        };
        assert!(observed.is_finite(), "rate of {kind:?} not finite");
        match kind {
            QuotaKind::Request => throttle.min(windows.window),
            _ => throttle,
        }
    }

    /// A controller mutation of `partitions` partitions by (user, client) at `now` (KIP-599,
    /// Kafka's `ControllerMutationQuotaManager`). `strict` (CreateTopics v6+, CreatePartitions
    /// v3+, DeleteTopics v5+): refused while the client's bucket is below zero, with the time
    /// until it is back; else taken from the bucket, which may go below zero (a request is
    /// never cut in the middle of a topic). Not strict (older versions): always taken, and
    /// the throttle is the time the bucket needs to be back at zero.
    pub fn mutate(
        &mut self,
        now: Duration,
        quotas: &ClientQuotas,
        (user, client): (&str, &str),
        partitions: f64,
        strict: bool,
    ) -> Mutation {
        self.sweep(now);
        let Some((limit, ut, ct)) = resolve(quotas, QuotaKind::ControllerMutation, user, client)
        else {
            return Mutation::Admitted(Duration::ZERO);
        };
        let burst = limit * self.windows.samples as f64 * self.windows.window.as_secs_f64();
        let (bucket, last) = self
            .buckets
            .entry((ut, ct))
            .or_insert_with(|| (TokenBucket::new(now, burst), limit));
        *last = limit;
        if strict {
            let deficit = bucket.deficit(now, limit, burst);
            if !deficit.is_zero() {
                return Mutation::Refused(deficit);
            }
            bucket.take(now, limit, burst, partitions.max(0.0));
            Mutation::Admitted(Duration::ZERO)
        } else {
            bucket.take(now, limit, burst, partitions.max(0.0));
            Mutation::Admitted(bucket.deficit(now, limit, burst))
        }
    }

    /// Takes back what a throttled Fetch recorded but did not send (Kafka's
    /// `unrecordQuotaSensor`): its bytes are not counted against the client.
    pub fn unrecord(
        &mut self,
        now: Duration,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        (user, client): (&str, &str),
        amount: f64,
    ) {
        if let Some((_, ut, ct)) = resolve(quotas, kind, user, client) {
            if let Some(rate) = self.rates.get_mut(&(kind, ut, ct)) {
                rate.record(now, -amount.max(0.0));
            }
        }
    }

    /// The rate (per second) of the group (user, client) falls in, if it has a quota.
    pub fn rate_of(
        &mut self,
        now: Duration,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        (user, client): (&str, &str),
    ) -> Option<f64> {
        let (_, ut, ct) = resolve(quotas, kind, user, client)?;
        self.rates.get_mut(&(kind, ut, ct)).map(|r| r.measure(now))
    }

    /// Rates with nothing left in their windows are forgotten (at most once per window), so
    /// clients that come and go leave nothing behind.
    fn sweep(&mut self, now: Duration) {
        if now.saturating_sub(self.swept) < self.windows.window {
            return;
        }
        self.swept = now;
        self.rates.retain(|_, r| !r.is_idle(now));
        let windows = self.windows;
        self.buckets.retain(|_, (bucket, limit)| {
            let burst = *limit * windows.samples as f64 * windows.window.as_secs_f64();
            !bucket.is_full(now, *limit, burst)
        });
    }

    pub fn tracked(&self) -> usize {
        self.rates.len() + self.buckets.len()
    }
}

#[cfg(test)]
mod tests;
