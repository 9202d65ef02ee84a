//! Followers fetching from their leaders: one fetcher task per source broker, serving every
//! partition this node follows from it (Kafka's `ReplicaFetcherThread`).
//!
//! Membership follows the image: reconciliation's `sync_role` calls [`Broker::follow_leader`]
//! for every hosted partition, which puts the partition in the fetcher of the broker the image
//! names leader (creating that fetcher, taking the partition out of any other one), or takes
//! it out when this node leads or nobody does. A new leader epoch re-arms a partition that was
//! backing off. A fetcher left without partitions stops.
//!
//! - [`request`]: the Fetch (pure), [`response`]: what each partition's answer means (pure),
//! - [`task`]: the loop: positions read under the partition locks, one request in flight,
//!   appends, truncations, high watermarks, backoff.
//!
//! Bounds: one fetcher per leader broker (at most the cluster's brokers), one request in flight
//! per fetcher, at most [`MAX_PARTITIONS_PER_FETCH`] partitions per request (taken round-robin),
//! and each partition backs off `replica.fetch.backoff.ms` after an error.

pub mod request;
pub mod response;
mod task;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uuid::Uuid;

use crate::broker::{Broker, Leadership};

/// Partitions one Fetch names at most; the rest wait for the next round.
pub const MAX_PARTITIONS_PER_FETCH: usize = 500;

/// A followed partition in its fetcher.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Assigned {
    topic_id: Uuid,
    /// The leader epoch the image named the leader at.
    leader_epoch: i32,
    /// Not fetched before this (monotonic clock): backing off after an error.
    retry_at: Option<Duration>,
    /// Planted `no-diverging-epoch-check`: after its one truncation, fetch without the epoch.
    epoch_unchecked: bool,
    /// Planted `truncate-to-hw-on-restart`: cut to the high watermark before fetching.
    truncate_to_hw: bool,
}

/// One fetcher's partitions, shared between the membership calls and its task.
struct Fetcher {
    leader: i32,
    partitions: Mutex<BTreeMap<(String, i32), Assigned>>,
    /// Woken when partitions are added or re-armed, or the fetcher stops.
    changed: tokio::sync::Notify,
    stopped: AtomicBool,
}

impl Fetcher {
    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    fn assigned(&self, key: &(String, i32)) -> Option<Assigned> {
        self.partitions.lock().unwrap().get(key).cloned()
    }

    /// Backs `key` off until `until`, if it is still at `leader_epoch` here.
    fn back_off(&self, key: &(String, i32), leader_epoch: i32, until: Duration) {
        if let Some(a) = self.partitions.lock().unwrap().get_mut(key) {
            if a.leader_epoch == leader_epoch {
                a.retry_at = Some(until);
            }
        }
    }

    fn update(&self, key: &(String, i32), leader_epoch: i32, f: impl FnOnce(&mut Assigned)) {
        if let Some(a) = self.partitions.lock().unwrap().get_mut(key) {
            if a.leader_epoch == leader_epoch {
                f(a);
            }
        }
    }
}

/// Every fetcher of this broker, by source (leader) broker id.
#[derive(Default)]
pub struct ReplicaFetchers {
    by_leader: Mutex<BTreeMap<i32, Arc<Fetcher>>>,
}

impl ReplicaFetchers {
    /// Takes `key` out of every fetcher but `except`'s; stops the fetchers left empty.
    fn remove_except(
        by_leader: &mut BTreeMap<i32, Arc<Fetcher>>,
        key: &(String, i32),
        except: i32,
    ) {
        let mut emptied = Vec::new();
        for (leader, fetcher) in by_leader.iter() {
            if *leader == except {
                continue;
            }
            let mut partitions = fetcher.partitions.lock().unwrap();
            if partitions.remove(key).is_some() && partitions.is_empty() {
                emptied.push(*leader);
            }
        }
        for leader in emptied {
            if let Some(f) = by_leader.remove(&leader) {
                f.stopped.store(true, Ordering::Release);
                f.changed.notify_one();
            }
        }
    }

    /// The partitions each fetcher holds (leader id → partitions), for tests and status.
    pub fn membership(&self) -> BTreeMap<i32, Vec<(String, i32)>> {
        self.by_leader
            .lock()
            .unwrap()
            .iter()
            .map(|(l, f)| (*l, f.partitions.lock().unwrap().keys().cloned().collect()))
            .collect()
    }
}

impl Broker {
    /// Puts `topic`-`index` in the fetcher of the broker the image names its leader, or takes
    /// it out of every fetcher when this node leads it, nobody does, or it is gone. Called by
    /// reconciliation after the role is synced; idempotent.
    pub(crate) fn follow_leader(&self, topic: &str, index: i32) {
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
        let mut by_leader = self.replica_fetchers.by_leader.lock().unwrap();
        let Some((leader, leader_epoch, topic_id)) = target else {
            ReplicaFetchers::remove_except(&mut by_leader, &key, -1);
            return;
        };
        ReplicaFetchers::remove_except(&mut by_leader, &key, leader);
        let fetcher = match by_leader.get(&leader) {
            Some(f) => f.clone(),
            None => {
                let Some(this) = self.this.upgrade() else {
                    return;
                };
                let f = Arc::new(Fetcher {
                    leader,
                    partitions: Mutex::new(BTreeMap::new()),
                    changed: tokio::sync::Notify::new(),
                    stopped: AtomicBool::new(false),
                });
                by_leader.insert(leader, f.clone());
                self.io.spawn(task::run(this, f.clone()));
                f
            }
        };
        let mut partitions = fetcher.partitions.lock().unwrap();
        let fresh = partitions
            .get(&key)
            .is_none_or(|a| a.leader_epoch != leader_epoch || a.topic_id != topic_id);
        if fresh {
            partitions.insert(
                key,
                Assigned {
                    topic_id,
                    leader_epoch,
                    retry_at: None,
                    epoch_unchecked: false,
                    truncate_to_hw: crate::planted!(self.config, TruncateToHwOnRestart),
                },
            );
            drop(partitions);
            fetcher.changed.notify_one();
        }
    }

    /// Takes a partition this node no longer hosts out of its fetcher.
    pub(crate) fn stop_following(&self, topic: &str, index: i32) {
        let key = (topic.to_string(), index);
        let mut by_leader = self.replica_fetchers.by_leader.lock().unwrap();
        ReplicaFetchers::remove_except(&mut by_leader, &key, -1);
    }

    /// Which partitions this node fetches from which leader.
    pub fn replica_fetcher_membership(&self) -> BTreeMap<i32, Vec<(String, i32)>> {
        self.replica_fetchers.membership()
    }
}
