//! The group coordinator's state as `Broker` holds it: the core and the driver's bookkeeping
//! behind one short-held lock, and the timer's wake-up. Kept apart from the driver (`super`),
//! which takes the broker, so that the broker's definition (`shared`) holds it without
//! importing the driver.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::{oneshot, Notify};

use crate::group::{Coordinator, GroupConfig, RequestId, Response};

pub(super) struct Inner {
    pub(super) core: Coordinator,
    pub(super) waiting: BTreeMap<RequestId, oneshot::Sender<Response>>,
    pub(super) next_request: RequestId,
    /// When the timer task will next look (it is woken if a deadline comes earlier).
    pub(super) timer_planned: i64,
    /// The load under way per offsets partition: a replay whose id is no longer here was
    /// superseded (the partition was unloaded, perhaps loaded again) and stops.
    pub(super) loads: BTreeMap<i32, u64>,
    pub(super) next_load: u64,
}

pub(crate) struct Groups {
    inner: Mutex<Inner>,
    pub(super) timer_wake: Notify,
}

impl Groups {
    pub(crate) fn new(config: GroupConfig) -> Groups {
        Groups {
            inner: Mutex::new(Inner {
                core: Coordinator::new(config),
                waiting: BTreeMap::new(),
                next_request: 1,
                timer_planned: i64::MAX,
                loads: BTreeMap::new(),
                next_load: 1,
            }),
            timer_wake: Notify::new(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic under the lock is an invariant violation; poison would only hide it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read-only access for queries that never park (OffsetFetch, ListGroups, DescribeGroups).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Coordinator) -> T) -> T {
        f(&self.lock().core)
    }
}
