//! The group coordinator's state as `Broker` holds it: the core and the driver's bookkeeping
//! behind one short-held lock, and the timer's wake-up. Kept apart from the driver (`super`),
//! which takes the broker, so that the broker's definition (`shared`) holds it without
//! importing the driver.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    /// Woken whenever what this node holds of the offsets topic may have changed (a role
    /// sync, a finished load): commits held while their partition loads look again.
    pub(super) load_change: Notify,
    /// Commits held now while their partition loads (bounded by [`MAX_HELD`]).
    held: AtomicUsize,
    /// Held for a whole role sync (reconcile, the timer loop and publish effects call it on
    /// several threads): each reads the image under it, so a sync that read an older image
    /// cannot load a partition a later sync has just unloaded.
    roles: Mutex<()>,
}

/// Bound on offset commits held at once while their partition loads; past it a commit is
/// answered COORDINATOR_LOAD_IN_PROGRESS at once, as before.
const MAX_HELD: usize = 10_000;

/// One held commit, counted while it lives.
pub(super) struct Held<'a>(&'a AtomicUsize);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
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
            load_change: Notify::new(),
            held: AtomicUsize::new(0),
            roles: Mutex::new(()),
        }
    }

    /// Serializes role syncs (see the field).
    pub(super) fn roles(&self) -> MutexGuard<'_, ()> {
        self.roles.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic under the lock is an invariant violation; poison would only hide it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more held commit, unless [`MAX_HELD`] are held already.
    pub(super) fn hold(&self) -> Option<Held<'_>> {
        if self.held.fetch_add(1, Ordering::Relaxed) >= MAX_HELD {
            self.held.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Held(&self.held))
    }

    /// Read-only access for queries that never park (OffsetFetch, ListGroups, DescribeGroups).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Coordinator) -> T) -> T {
        f(&self.lock().core)
    }
}
