//! The follower's fetchers as `Broker` holds them: one per leader broker, each with its core.
//! Kept apart from the membership calls (`super`) and the task (`task`), which take the
//! broker, so that the broker's definition (`shared`) holds them without importing either.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::replica::fetcher as core;

/// One fetcher: its core (the partitions it follows and every decision about them), shared
/// between the membership calls and its task.
pub(super) struct Fetcher {
    pub(super) leader: i32,
    /// The client id its requests carry (`weir-replica-fetcher-<node id>`), made once.
    pub(super) client_id: String,
    pub(super) core: Mutex<core::Fetcher>,
    /// Woken when partitions are added or re-armed, or the fetcher stops.
    pub(super) changed: tokio::sync::Notify,
    pub(super) stopped: AtomicBool,
}

impl Fetcher {
    pub(super) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Steps the core with `event`, reading the clock under its lock (so steps from the
    /// membership calls and the task see time in order), and returns what it asks for.
    pub(super) fn step(
        &self,
        clock: &dyn crate::io::Clock,
        event: core::Event,
    ) -> Vec<core::Action> {
        let mut c = self.core.lock().unwrap();
        c.step(clock.monotonic(), event);
        c.take_actions()
    }
}

/// Every fetcher of this broker, by source (leader) broker id.
#[derive(Default)]
pub struct ReplicaFetchers {
    pub(super) by_leader: Mutex<BTreeMap<i32, Arc<Fetcher>>>,
}

impl ReplicaFetchers {
    /// Takes `key` out of every fetcher but `except`'s; stops the fetchers left empty.
    pub(super) fn remove_except(
        by_leader: &mut BTreeMap<i32, Arc<Fetcher>>,
        clock: &dyn crate::io::Clock,
        key: &(String, i32),
        except: i32,
    ) {
        let mut emptied = Vec::new();
        for (leader, fetcher) in by_leader.iter() {
            if *leader == except || fetcher.core.lock().unwrap().leader_epoch(key).is_none() {
                continue;
            }
            let actions = fetcher.step(clock, core::Event::Unassign { key: key.clone() });
            assert!(actions.is_empty(), "membership asks for no I/O");
            if fetcher.core.lock().unwrap().is_empty() {
                emptied.push(*leader);
            }
        }
        for leader in emptied {
            if let Some(f) = by_leader.remove(&leader) {
                f.stopped.store(true, Ordering::Release);
                f.changed.notify_one();
            }
        }
        for (leader, fetcher) in by_leader.iter() {
            assert!(
                *leader == except || fetcher.core.lock().unwrap().leader_epoch(key).is_none(),
                "{key:?} followed from two leaders"
            );
        }
    }

    /// The partitions each fetcher holds (leader id → partitions), for tests and status.
    pub fn membership(&self) -> BTreeMap<i32, Vec<(String, i32)>> {
        self.by_leader
            .lock()
            .unwrap()
            .iter()
            .map(|(l, f)| (*l, f.core.lock().unwrap().keys()))
            .collect()
    }
}
