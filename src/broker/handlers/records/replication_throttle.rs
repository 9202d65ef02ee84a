//! The replication throttles on this broker (`quota::replication`): which replicas the image's
//! topic configs throttle here, the rates its dynamic broker configs set (this broker's, else
//! the cluster default), and the two measured sides. The leader side is applied in Fetch
//! (`fetch`), the follower side in the replica fetcher (`drivers::replica_fetcher`).

use crate::broker::shared::Broker;
use crate::controller::{ConfigResource, MetadataImage};
use crate::quota::replication::{self, ReplicationQuota};

/// Which side of a throttle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Leader,
    Follower,
}

impl Side {
    fn keys(self) -> (&'static str, &'static str) {
        match self {
            Side::Leader => (replication::LEADER_REPLICAS, replication::LEADER_RATE),
            Side::Follower => (replication::FOLLOWER_REPLICAS, replication::FOLLOWER_RATE),
        }
    }
}

impl Broker {
    /// Whether `topic`-`partition` is throttled on this broker as `side` (its bytes count
    /// toward the side's rate).
    pub(crate) fn replication_throttled(
        &self,
        image: &MetadataImage,
        side: Side,
        topic: &str,
        partition: i32,
    ) -> bool {
        image
            .topic(topic)
            .and_then(|t| t.configs.get(side.keys().0))
            .is_some_and(|list| replication::lists(list, partition, self.config.node_id))
    }

    /// Whether `replica` is outside the ISR of `topic`-`partition`: only such a replica is
    /// ever held back by a throttle (Kafka's rule: a throttle must not shrink the ISR).
    pub(crate) fn out_of_isr(
        &self,
        image: &MetadataImage,
        topic: &str,
        partition: i32,
        replica: i32,
    ) -> bool {
        image
            .topic(topic)
            .and_then(|t| image.partition(t.id, partition))
            .is_some_and(|p| !p.isr.contains(&replica))
    }

    /// The side's rate limit: this broker's dynamic config, else the cluster default.
    fn replication_rate(&self, image: &MetadataImage, side: Side) -> Option<u64> {
        let key = side.keys().1;
        let own = image.resource_configs(&ConfigResource::Broker(self.config.node_id.to_string()));
        let default = image.resource_configs(&ConfigResource::Broker(String::new()));
        replication::parse_rate(
            own.get(key)
                .or_else(|| default.get(key))
                .map(String::as_str),
        )
    }

    fn with_side<T>(&self, side: Side, f: impl FnOnce(&mut ReplicationQuota) -> T) -> T {
        let mut throttles = self.replication_throttles.lock().unwrap();
        f(match side {
            Side::Leader => &mut throttles.leader,
            Side::Follower => &mut throttles.follower,
        })
    }

    /// Whether the side is over its rate now (never without a limit).
    pub(crate) fn replication_quota_exceeded(&self, image: &MetadataImage, side: Side) -> bool {
        let limit = self.replication_rate(image, side);
        if limit.is_none() {
            return false;
        }
        let now = self.io.clock.monotonic();
        self.with_side(side, |q| q.exceeded(now, limit))
    }

    /// Counts bytes moved for a throttled replica on the side.
    pub(crate) fn record_replication(&self, side: Side, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let now = self.io.clock.monotonic();
        self.with_side(side, |q| q.record(now, bytes));
    }
}
