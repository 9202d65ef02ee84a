//! Connection limits (Kafka's `ConnectionQuotas`): `max.connections` on the broker and
//! `max.connections.per.ip` (with `max.connections.per.ip.overrides`), counted across the
//! client listeners. A connection over either limit is refused at accept (the driver closes
//! it at once). Pure: opens and closes in, decisions out.
//!
//! Invariant (checked after every step): the total is the sum of the per-IP counts, and no
//! count exceeds its limit.

use std::collections::BTreeMap;
use std::net::IpAddr;

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
        assert!(self.total <= self.limits.max, "over max.connections");
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
        assert_eq!(
            ConnectionCounts::default().limits,
            ConnectionLimits::default()
        );
    }
}
