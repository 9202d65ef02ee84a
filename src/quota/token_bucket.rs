//! A token bucket, as Kafka's `TokenBucket` stat measures the controller mutation rate
//! (KIP-599): it holds at most a burst of `rate × samples × window` tokens, refills at `rate`
//! per second, and each mutation takes its partitions out, possibly below zero. While it is
//! below zero the client is over its quota, for `−tokens / rate` seconds.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    updated: Duration,
}

impl TokenBucket {
    /// A full bucket at `now` (Kafka's starts empty at time 0, so it is full when first used).
    pub fn new(now: Duration, burst: f64) -> TokenBucket {
        TokenBucket {
            tokens: burst,
            updated: now,
        }
    }

    /// The tokens left at `now` with `rate` and `burst` (refilled, never above the burst).
    pub fn tokens(&mut self, now: Duration, rate: f64, burst: f64) -> f64 {
        let elapsed = now.saturating_sub(self.updated).as_secs_f64();
        self.tokens = (self.tokens + rate * elapsed).min(burst);
        self.updated = self.updated.max(now);
        assert!(self.tokens.is_finite(), "tokens not finite");
        self.tokens
    }

    /// Takes `amount` at `now`.
    pub fn take(&mut self, now: Duration, rate: f64, burst: f64, amount: f64) {
        let left = self.tokens(now, rate, burst);
        self.tokens = (left - amount).min(burst);
    }

    /// How long until the bucket is back at zero (Kafka's `throttleTimeMs`: −tokens / rate).
    pub fn deficit(&mut self, now: Duration, rate: f64, burst: f64) -> Duration {
        let left = self.tokens(now, rate, burst);
        if left >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((-left / rate).min(1e9))
        }
    }

    /// Whether the bucket is full at `now` (it can be forgotten: a new one starts full).
    pub fn is_full(&mut self, now: Duration, rate: f64, burst: f64) -> bool {
        self.tokens(now, rate, burst) >= burst
    }
}
