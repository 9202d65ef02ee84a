//! The intra-broker mover as `Broker` holds it: its core, the actions waiting for the task,
//! and what DescribeLogDirs shows of each future log. Kept apart from the driver (`super`),
//! which takes the broker, so that the broker's definition (`shared`) holds it without
//! importing the driver.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use uuid::Uuid;

use crate::replica::dir_move::{Action, DirMover, Key, MoveConfig};

/// A future log as DescribeLogDirs shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FutureView {
    pub(crate) dest: Uuid,
    pub(crate) size: u64,
    pub(crate) end: i64,
}

pub(crate) struct DirMoves {
    pub(super) core: Mutex<DirMover>,
    /// Actions the request path produced, for the task to carry out in order.
    pub(super) queue: Mutex<VecDeque<Action>>,
    /// Woken when actions are queued or the throttle may have changed.
    pub(super) changed: tokio::sync::Notify,
    /// The future logs open now.
    pub(super) futures: Mutex<BTreeMap<Key, FutureView>>,
}

impl DirMoves {
    pub(crate) fn new(chunk_bytes: usize, retry_backoff: Duration) -> DirMoves {
        DirMoves {
            core: Mutex::new(DirMover::new(MoveConfig {
                chunk_bytes: chunk_bytes.max(1),
                retry_backoff,
            })),
            queue: Mutex::new(VecDeque::new()),
            changed: tokio::sync::Notify::new(),
            futures: Mutex::new(BTreeMap::new()),
        }
    }

    /// Queues `actions` for the task and wakes it.
    pub(super) fn enqueue(&self, actions: Vec<Action>) {
        if actions.is_empty() {
            return;
        }
        self.queue.lock().unwrap().extend(actions);
        self.changed.notify_one();
    }

    /// The future logs as DescribeLogDirs shows them.
    pub(crate) fn views(&self) -> Vec<(Key, FutureView)> {
        let futures = self.futures.lock().unwrap();
        futures
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}
