//! Connection limits (Kafka's `ConnectionQuotas`): `max.connections` on the broker and
//! `max.connections.per.ip` (with `max.connections.per.ip.overrides`), counted across the
//! client listeners. A connection over either limit is refused at accept (the driver closes
//! it at once). Creation rates ([`CreationRates`]): over `max.connection.creation.rate`
//! (broker-wide, or the listener's own) the acceptor waits before taking the next
//! connection; over its IP's `connection_creation_rate` quota a connection is closed after
//! the throttle, unserved. Pure: opens, closes and `now` in, decisions out.
//!
//! Limits change at run time (dynamic broker configs): a lowered limit refuses new
//! connections and leaves the open ones, as Kafka does.
//!
//! Invariant (checked after every step): the total is the sum of the per-IP counts, and no
//! count grew past its limit (a count over it is one a lowered limit left).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use super::rate::SampledRate;
use super::QuotaWindows;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub max: u32,
    pub per_ip: u32,
    pub overrides: BTreeMap<IpAddr, u32>,
}

impl Default for ConnectionLimits {
    /// Kafka's defaults: no limit (Int.MAX).
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            max: i32::MAX as u32,
            per_ip: i32::MAX as u32,
            overrides: BTreeMap::new(),
        }
    }
}

impl ConnectionLimits {
    fn of_ip(&self, ip: IpAddr) -> u32 {
        self.overrides.get(&ip).copied().unwrap_or(self.per_ip)
    }
}

/// Why a connection was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `max.connections` reached.
    Broker,
    /// `max.connections.per.ip` (or its override) reached for this address.
    PerIp,
}

#[derive(Clone, Debug, Default)]
pub struct ConnectionCounts {
    limits: ConnectionLimits,
    total: u32,
    by_ip: BTreeMap<IpAddr, u32>,
}

impl ConnectionCounts {
    pub fn new(limits: ConnectionLimits) -> ConnectionCounts {
        ConnectionCounts {
            limits,
            total: 0,
            by_ip: BTreeMap::new(),
        }
    }

    /// New limits (a dynamic config changed): they apply to the next connections.
    pub fn set_limits(&mut self, limits: ConnectionLimits) {
        self.limits = limits;
    }

    /// Counts a new connection from `ip`, or refuses it.
    pub fn open(&mut self, ip: IpAddr) -> Result<(), Refused> {
        let of_ip = self.by_ip.get(&ip).copied().unwrap_or(0);
        if of_ip >= self.limits.of_ip(ip) {
            return Err(Refused::PerIp);
        }
        if self.total >= self.limits.max {
            return Err(Refused::Broker);
        }
        self.total += 1;
        *self.by_ip.entry(ip).or_default() += 1;
        self.check();
        assert!(self.total <= self.limits.max, "grew over max.connections");
        Ok(())
    }

    /// A counted connection from `ip` closed.
    pub fn close(&mut self, ip: IpAddr) {
        let count = self
            .by_ip
            .get_mut(&ip)
            .unwrap_or_else(|| panic!("close of a connection never opened from {ip}"));
        *count -= 1;
        if *count == 0 {
            self.by_ip.remove(&ip);
        }
        self.total -= 1;
        self.check();
    }

    pub fn total(&self) -> u32 {
        self.total
    }

    fn check(&self) {
        assert_eq!(
            self.total,
            self.by_ip.values().sum::<u32>(),
            "counts disagree"
        );
    }
}

/// `max.connection.creation.rate`: broker-wide and per listener (connections per second;
/// Kafka's default Int.MAX is no limit).
#[derive(Clone, Debug, PartialEq)]
pub struct CreationLimits {
    pub broker: f64,
    pub listeners: BTreeMap<String, f64>,
}

impl Default for CreationLimits {
    fn default() -> CreationLimits {
        CreationLimits {
            broker: i32::MAX as f64,
            listeners: BTreeMap::new(),
        }
    }
}

/// Connection creation rates over the quota windows, as Kafka's connection rate sensors.
#[derive(Clone, Debug)]
pub struct CreationRates {
    windows: QuotaWindows,
    broker: SampledRate,
    listeners: BTreeMap<String, SampledRate>,
    ips: BTreeMap<IpAddr, SampledRate>,
    /// When idle IP rates were last forgotten.
    swept: Duration,
}

impl CreationRates {
    pub fn new(windows: QuotaWindows) -> CreationRates {
        CreationRates {
            windows,
            broker: SampledRate::new(windows.samples, windows.window),
            listeners: BTreeMap::new(),
            ips: BTreeMap::new(),
            swept: Duration::ZERO,
        }
    }

    /// Records one connection in `rate` and answers its throttle over `limit`, at most one
    /// window (Kafka's `recordAndGetThrottleTimeMs` with `boundedThrottleTime`).
    fn record(rate: &mut SampledRate, window: Duration, now: Duration, limit: f64) -> Duration {
        rate.record(now, 1.0);
        let observed = rate.measure(now);
        if observed <= limit {
            return Duration::ZERO;
        }
        let span = rate.span(now).as_secs_f64();
        Duration::from_secs_f64(((observed - limit) / limit * span).min(1e9)).min(window)
    }

    fn listener_rate(&mut self, listener: &str) -> &mut SampledRate {
        let w = self.windows;
        self.listeners
            .entry(listener.to_string())
            .or_insert_with(|| SampledRate::new(w.samples, w.window))
    }

    /// A connection accepted on `listener` at `now`: how long the acceptor waits before it
    /// takes it (Kafka's `waitForConnectionSlot`): the broker-wide rate's throttle, or the
    /// listener's own if longer. A `protected` listener (inter-node) counts only against its
    /// own listener rate, so clients never starve the nodes.
    pub fn accept(
        &mut self,
        now: Duration,
        listener: &str,
        protected: bool,
        limits: &CreationLimits,
    ) -> Duration {
        let window = self.windows.window;
        let broker = if protected {
            Duration::ZERO
        } else {
            Self::record(&mut self.broker, window, now, limits.broker)
        };
        let own = match limits.listeners.get(listener) {
            Some(&limit) => Self::record(self.listener_rate(listener), window, now, limit),
            None => Duration::ZERO,
        };
        broker.max(own)
    }

    /// The IP's `connection_creation_rate` quota (`limit`, `None`: no quota) for a
    /// connection accepted on `listener`: over it, `Err(throttle)`: the connection is closed
    /// after the throttle, unserved, and taken back from every rate it was counted in.
    pub fn admit_ip(
        &mut self,
        now: Duration,
        ip: IpAddr,
        limit: Option<f64>,
        (listener, protected): (&str, bool),
    ) -> Result<(), Duration> {
        self.sweep(now);
        let Some(limit) = limit else {
            return Ok(());
        };
        let w = self.windows;
        let rate = self
            .ips
            .entry(ip)
            .or_insert_with(|| SampledRate::new(w.samples, w.window));
        let throttle = Self::record(rate, w.window, now, limit);
        if throttle.is_zero() {
            return Ok(());
        }
        rate.record(now, -1.0);
        if !protected {
            self.broker.record(now, -1.0);
        }
        if let Some(rate) = self.listeners.get_mut(listener) {
            rate.record(now, -1.0);
        }
        Err(throttle)
    }

    /// IPs with nothing left in their windows are forgotten (at most once per window).
    fn sweep(&mut self, now: Duration) {
        if now.saturating_sub(self.swept) < self.windows.window {
            return;
        }
        self.swept = now;
        self.ips.retain(|_, r| !r.is_idle(now));
    }

    pub fn tracked_ips(&self) -> usize {
        self.ips.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_refuse_at_accept_and_free_on_close() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        let mut counts = ConnectionCounts::new(ConnectionLimits {
            max: 4,
            per_ip: 2,
            overrides: BTreeMap::from([(b, 0), (c, 3)]),
        });
        // (op, ip, expected): op true opens, false closes.
        let steps: &[(bool, IpAddr, Result<(), Refused>)] = &[
            (true, a, Ok(())),
            (true, a, Ok(())),
            (true, a, Err(Refused::PerIp)),
            (true, b, Err(Refused::PerIp)), // override 0: never
            (true, c, Ok(())),
            (true, c, Ok(())),
            (true, c, Err(Refused::Broker)), // c may have 3, but the broker is full
            (false, a, Ok(())),
            (true, c, Ok(())),
            (true, c, Err(Refused::PerIp)),
        ];
        for (i, &(open, ip, expected)) in steps.iter().enumerate() {
            if open {
                assert_eq!(counts.open(ip), expected, "step {i}");
            } else {
                counts.close(ip);
            }
        }
        assert_eq!(counts.total(), 4);
        // Lowered at run time: the open ones stay, new ones are refused until under it.
        counts.set_limits(ConnectionLimits {
            max: 2,
            ..ConnectionLimits::default()
        });
        assert_eq!(counts.open(a), Err(Refused::Broker));
        counts.close(c);
        counts.close(c);
        assert_eq!(counts.open(a), Err(Refused::Broker));
        counts.close(c);
        assert_eq!(counts.open(a), Ok(()));
        assert_eq!(
            ConnectionCounts::default().limits,
            ConnectionLimits::default()
        );
    }

    #[test]
    fn creation_rates_delay_the_acceptor_and_throttle_an_ip() {
        let ms = Duration::from_millis;
        // 2 windows of 1 s: a span of at least 1 s.
        let windows = QuotaWindows {
            samples: 2,
            window: ms(1000),
        };
        let limits = CreationLimits {
            broker: 4.0,
            listeners: BTreeMap::from([("INTERNAL".to_string(), 2.0)]),
        };
        let mut rates = CreationRates::new(windows);
        // (at ms, listener, protected, expected delay ms)
        let steps: &[(u64, &str, bool, u64)] = &[
            (0, "EXTERNAL", false, 0),
            (0, "EXTERNAL", false, 0),
            (0, "EXTERNAL", false, 0),
            (0, "EXTERNAL", false, 0),   // 4 over 1 s: the limit
            (0, "EXTERNAL", false, 250), // 5: (5 − 4) / 4 × 1 s
            (0, "INTERNAL", true, 0),    // protected: the broker rate is not its
            (0, "INTERNAL", true, 0),
            (0, "INTERNAL", true, 500),   // 3 against its own 2
            (0, "EXTERNAL", false, 500),  // 6 against 4
            (0, "EXTERNAL", false, 750),  // 7
            (10, "EXTERNAL", false, 990), // 8 over 1.01 s: (7.92 − 4) / 4 × 1.01 s
        ];
        for (i, &(at, listener, protected, expected)) in steps.iter().enumerate() {
            let got = rates.accept(ms(at), listener, protected, &limits);
            assert_eq!(got, ms(expected), "step {i}");
        }
        for _ in 0..20 {
            rates.accept(ms(10), "EXTERNAL", false, &limits);
        }
        assert_eq!(
            rates.accept(ms(10), "EXTERNAL", false, &limits),
            ms(1000),
            "bounded at one window"
        );

        // An IP quota of 2/s: the third connection in a second is throttled, and taken back
        // (the fourth is measured as the third again).
        let ip: IpAddr = "10.0.0.9".parse().unwrap();
        let other: IpAddr = "10.0.0.8".parse().unwrap();
        let mut rates = CreationRates::new(windows);
        let at = (ip, Some(2.0), ("EXTERNAL", false));
        let admit = |rates: &mut CreationRates,
                     now: u64,
                     (ip, limit, l): (IpAddr, Option<f64>, (&str, bool))| {
            rates.admit_ip(ms(now), ip, limit, l)
        };
        assert_eq!(admit(&mut rates, 0, at), Ok(()));
        assert_eq!(admit(&mut rates, 0, at), Ok(()));
        assert_eq!(admit(&mut rates, 0, at), Err(ms(500)));
        assert_eq!(admit(&mut rates, 0, at), Err(ms(500)));
        assert_eq!(
            admit(&mut rates, 0, (other, Some(2.0), ("EXTERNAL", false))),
            Ok(())
        );
        assert_eq!(
            admit(&mut rates, 0, (other, None, ("EXTERNAL", false))),
            Ok(())
        );
        assert_eq!(rates.tracked_ips(), 2);
        // Once both windows have passed, the IPs are forgotten.
        assert_eq!(
            admit(&mut rates, 5000, (other, None, ("EXTERNAL", false))),
            Ok(())
        );
        assert_eq!(rates.tracked_ips(), 0);
    }
}
