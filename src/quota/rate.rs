//! A rate over sampled windows, as Kafka's `Rate` over a `SampledStat` measures it: `samples`
//! windows of `window` each; a window starts at the first record after the previous one
//! ended; a window older than `samples × window` counts nothing. The rate divides the total
//! by the time covered, but never by less than `samples − 1` whole windows (so a client's
//! first burst is measured against the full span, not its own few milliseconds).

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    start: Duration,
    total: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SampledRate {
    samples: Vec<Sample>,
    /// The sample being filled.
    current: usize,
    /// How many samples are kept (Kafka's `quota.window.num`).
    capacity: usize,
    window: Duration,
}

impl SampledRate {
    pub fn new(capacity: u32, window: Duration) -> SampledRate {
        assert!(capacity >= 1 && !window.is_zero(), "a rate needs windows");
        SampledRate {
            samples: Vec::new(),
            current: 0,
            capacity: capacity as usize,
            window,
        }
    }

    /// Adds `amount` at `now` (which never goes back).
    pub fn record(&mut self, now: Duration, amount: f64) {
        self.purge(now);
        match self.samples.get(self.current) {
            None => self.samples.push(Sample {
                start: now,
                total: 0.0,
            }),
            Some(s) if now >= s.start + self.window => {
                self.current = (self.current + 1) % self.capacity;
                let fresh = Sample {
                    start: now,
                    total: 0.0,
                };
                if self.current == self.samples.len() {
                    self.samples.push(fresh);
                } else {
                    self.samples[self.current] = fresh;
                }
            }
            Some(_) => {}
        }
        self.samples[self.current].total += amount;
        self.check();
    }

    /// Per second, at `now`.
    pub fn measure(&mut self, now: Duration) -> f64 {
        self.purge(now);
        let total: f64 = self.samples.iter().map(|s| s.total).sum();
        total / self.span(now).as_secs_f64()
    }

    /// The time the rate is taken over (Kafka's `Rate.windowSize`): from the oldest window's
    /// start, at least `samples − 1` windows, at least 1 ms.
    pub fn span(&self, now: Duration) -> Duration {
        let oldest = self.samples.iter().map(|s| s.start).min().unwrap_or(now);
        let elapsed = now.saturating_sub(oldest);
        let min_full = self.capacity as u32 - 1;
        let full = (elapsed.as_nanos() / self.window.as_nanos()) as u32;
        let elapsed = if full < min_full {
            elapsed + self.window * (min_full - full)
        } else {
            elapsed
        };
        elapsed.max(Duration::from_millis(1))
    }

    /// Whether nothing recorded is still counted at `now` (the rate can be forgotten).
    pub fn is_idle(&self, now: Duration) -> bool {
        let expiry = self.window * self.capacity as u32;
        self.samples
            .iter()
            .all(|s| now.saturating_sub(s.start) >= expiry)
    }

    /// Windows older than `samples × window` count nothing from `now` on (Kafka resets them).
    fn purge(&mut self, now: Duration) {
        let expiry = self.window * self.capacity as u32;
        for s in &mut self.samples {
            if now.saturating_sub(s.start) >= expiry {
                *s = Sample {
                    start: now,
                    total: 0.0,
                };
            }
        }
    }

    fn check(&self) {
        assert!(self.samples.len() <= self.capacity, "too many samples");
        assert!(self.current < self.samples.len(), "current sample missing");
    }
}
