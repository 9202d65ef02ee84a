//! Followers fetching from their leaders: one fetcher task per source broker, serving every
//! partition this node follows from it (Kafka's `ReplicaFetcherThread`).
//!
//! Membership follows the image: reconciliation's `sync_role` calls [`Broker::follow_leader`]
//! for every hosted partition, which puts the partition in the fetcher of the broker the image
//! names leader (creating that fetcher, taking the partition out of any other one), or takes
//! it out when this node leads or nobody does. A new leader epoch re-arms a partition that was
//! backing off. A fetcher left without partitions stops.
//!
//! Every decision (which partitions to fetch, backoff, what each answer means, where to
//! truncate) is the follower core's, `replica::fetcher`; this driver does its I/O:
//! - [`request`]: the Fetch (pure), [`response`]: decoding each partition's answer (pure),
//! - [`task`]: the loop carrying out the core's actions: positions read under the partition
//!   locks, the Fetch and ListOffsets calls, appends, truncations, high watermarks.
//!
//! Bounds: one fetcher per leader broker (at most the cluster's brokers), one request in flight
//! per fetcher, at most [`MAX_PARTITIONS_PER_FETCH`] partitions per request (taken round-robin),
//! and each partition backs off `replica.fetch.backoff.ms` after an error.

#[cfg(any(madsim, test))]
mod fault_point;
mod local_log;
pub mod request;
pub mod response;
pub(crate) mod state;
mod task;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::broker::{drivers::reconcile::Leadership, shared::Broker};
use crate::replica::fetcher as core;
use state::{Fetcher, ReplicaFetchers};

/// Partitions one Fetch names at most; the rest wait for the next round.
pub const MAX_PARTITIONS_PER_FETCH: usize = 500;

impl Broker {
    /// Puts `topic`-`index` in the fetcher of the broker the image names its leader, or takes
    /// it out of every fetcher when this node leads it, nobody does, or it is gone. Called by
    /// reconciliation after the role is synced; idempotent.
    pub(crate) fn follow_leader(&self, topic: &str, index: i32) {
        if self.dirs.is_offline(topic, index) {
            // Its log directory failed: nothing can be appended to it.
            self.stop_following(topic, index);
            return;
        }
        let key = (topic.to_string(), index);
        let node = self.config.node_id;
        let handle = self.partition(topic, index);
        let target = match (self.leadership(topic, index), &handle) {
            (
                Leadership::NotLeader {
                    leader,
                    leader_epoch,
                },
                Some(h),
            ) if leader >= 0 && leader != node => Some((leader, leader_epoch, h.topic_id)),
            _ => None,
        };
        let clock = self.io.clock.as_ref();
        let mut by_leader = self.replica_fetchers.by_leader.lock().unwrap();
        let Some((leader, leader_epoch, topic_id)) = target else {
            ReplicaFetchers::remove_except(&mut by_leader, clock, &key, -1);
            return;
        };
        ReplicaFetchers::remove_except(&mut by_leader, clock, &key, leader);
        let fetcher = match by_leader.get(&leader) {
            Some(f) => f.clone(),
            None => {
                let Some(this) = self.this.upgrade() else {
                    return;
                };
                let f = Arc::new(Fetcher {
                    leader,
                    client_id: format!("weir-replica-fetcher-{node}"),
                    core: Mutex::new(core::Fetcher::new(self.fetcher_config())),
                    changed: tokio::sync::Notify::new(),
                    stopped: AtomicBool::new(false),
                });
                by_leader.insert(leader, f.clone());
                self.io.spawn(task::run(this, f.clone()));
                f
            }
        };
        let before = fetcher.core.lock().unwrap().leader_epoch(&key);
        if before == Some((topic_id, leader_epoch)) {
            return;
        }
        let assign = core::Event::Assign {
            key: key.clone(),
            topic_id,
            leader_epoch,
        };
        let actions = fetcher.step(clock, assign);
        assert!(actions.is_empty(), "membership asks for no I/O");
        assert_eq!(
            fetcher.core.lock().unwrap().leader_epoch(&key),
            Some((topic_id, leader_epoch)),
            "{key:?} assigned"
        );
        fetcher.changed.notify_one();
    }

    /// The follower core's configuration, from `replica.fetch.backoff.ms`.
    fn fetcher_config(&self) -> core::FetcherConfig {
        core::FetcherConfig {
            backoff: Duration::from_millis(self.config.replica_fetch_backoff_ms),
            max_partitions: MAX_PARTITIONS_PER_FETCH,
            #[cfg(any(madsim, test))]
            planted: crate::config::planted::Planted::new(self.config.planted_bug),
        }
    }

    /// Takes a partition this node no longer hosts out of its fetcher.
    pub(crate) fn stop_following(&self, topic: &str, index: i32) {
        let key = (topic.to_string(), index);
        let mut by_leader = self.replica_fetchers.by_leader.lock().unwrap();
        ReplicaFetchers::remove_except(&mut by_leader, self.io.clock.as_ref(), &key, -1);
    }

    /// Which partitions this node fetches from which leader.
    pub fn replica_fetcher_membership(&self) -> BTreeMap<i32, Vec<(String, i32)>> {
        self.replica_fetchers.membership()
    }
}
