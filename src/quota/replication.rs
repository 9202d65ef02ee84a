//! Replication throttles (Kafka's `ReplicationQuotaManager`, KIP-73), as a pure core: which
//! replicas are throttled, and whether a side's byte rate is over its limit at `now`.
//!
//! Kafka's keys (notes operations §3.2):
//! - topic `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`:
//!   `partition:broker,…` or `*`; a broker keeps the entries naming itself;
//! - broker (dynamic) `leader.replication.throttled.rate` /
//!   `follower.replication.throttled.rate`: bytes/s, unlimited when unset.
//!
//! The leader counts the bytes it serves followers of its leader-throttled partitions, and
//! while that rate is over its limit answers a throttled partition's fetch by a follower *not
//! in the ISR* with no records. The follower counts the bytes it receives for its
//! follower-throttled partitions, and while over its limit leaves its out-of-ISR throttled
//! partitions out of its fetches. Replicas in the ISR are never held back (Kafka's rule: a
//! throttle must not shrink the ISR). Rates use `replication.quota.window.num` (11) windows
//! of `replication.quota.window.size.seconds` (1 s).

use std::time::Duration;

use super::rate::SampledRate;

pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";
pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";

/// Kafka's `replication.quota.window.num` and `replication.quota.window.size.seconds`.
const WINDOWS: u32 = 11;
const WINDOW: Duration = Duration::from_secs(1);

/// Whether a throttled-replicas list (`0:1,1:2`, or `*`) names `partition` on `broker`.
/// Malformed entries name nothing (Kafka's validator refuses them at alter time).
pub fn lists(value: &str, partition: i32, broker: i32) -> bool {
    let value = value.trim();
    if value == "*" {
        return true;
    }
    value.split(',').any(|entry| {
        let mut parts = entry.trim().splitn(2, ':');
        let p = parts.next().and_then(|p| p.trim().parse::<i32>().ok());
        let b = parts.next().and_then(|b| b.trim().parse::<i32>().ok());
        p == Some(partition) && b == Some(broker)
    })
}

/// A rate limit as configured: a non-negative whole number of bytes/s, else unlimited.
pub fn parse_rate(value: Option<&str>) -> Option<u64> {
    value.and_then(|v| v.trim().parse::<u64>().ok())
}

/// One side's (leader or follower) throttle: its limit and its measured rate.
#[derive(Clone, Debug)]
pub struct ReplicationQuota {
    rate: SampledRate,
}

impl Default for ReplicationQuota {
    fn default() -> ReplicationQuota {
        ReplicationQuota {
            rate: SampledRate::new(WINDOWS, WINDOW),
        }
    }
}

impl ReplicationQuota {
    /// Counts `bytes` moved for a throttled replica at `now` (monotonic, never going back).
    pub fn record(&mut self, now: Duration, bytes: usize) {
        self.rate.record(now, bytes as f64);
    }

    /// Whether the rate at `now` is over `limit` (never when there is none).
    pub fn exceeded(&mut self, now: Duration, limit: Option<u64>) -> bool {
        match limit {
            None => false,
            Some(limit) => self.rate.measure(now) > limit as f64,
        }
    }
}

/// The broker's two sides.
#[derive(Clone, Debug, Default)]
pub struct ReplicationThrottles {
    pub leader: ReplicationQuota,
    pub follower: ReplicationQuota,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_name_partitions_on_brokers() {
        assert!(lists("0:1, 1:2", 1, 2));
        assert!(lists("0:1,1:2", 0, 1));
        assert!(!lists("0:1,1:2", 0, 2));
        assert!(lists(" * ", 7, 9));
        assert!(!lists("", 0, 0));
        assert!(!lists("x:1,0:", 0, 1));
    }

    #[test]
    fn rates_parse_or_mean_unlimited() {
        assert_eq!(parse_rate(Some("1048576")), Some(1_048_576));
        assert_eq!(parse_rate(Some("-1")), None);
        assert_eq!(parse_rate(None), None);
    }

    #[test]
    fn a_side_is_over_its_limit_only_while_its_rate_is() {
        let mut q = ReplicationQuota::default();
        let s = Duration::from_secs;
        assert!(!q.exceeded(s(0), Some(100)));
        // 10 s of span at least: 1,000 bytes is 100 B/s, at the limit, not over it.
        q.record(s(0), 1_000);
        assert!(!q.exceeded(s(0), Some(100)));
        q.record(s(1), 1);
        assert!(q.exceeded(s(1), Some(100)));
        assert!(!q.exceeded(s(1), None), "no limit: never over");
        // Once the windows age out, the rate is back under.
        assert!(!q.exceeded(s(30), Some(100)));
    }
}
