//! A partition as the broker shares it between connections: the replica state machine behind a
//! short-held lock (never held across an await), plus the gates that serialise its fsyncs and
//! checkpoints and its log-start writes, and where the partition is in its life.
//!
//! The lifecycle changes only under the partition lock, and every check that decides what to do
//! with the partition reads it under that same lock ([`PartitionHandle::lock_open`],
//! [`PartitionHandle::lock_with_lifecycle`]): a delete or a shutdown cannot slip between the
//! check and the use. Work that leaves the lock to await (fsyncs, checkpoint writes) holds the
//! `flush_gate`, which a delete also takes before it removes the directory.
//!
//! The partition's delayed operations (`waiters`) hear of every change through the lock's
//! guard: a guard that was used mutably reports the partition's high watermark, log end and
//! log start to them as it is released, still under the lock. So whatever moves the high
//! watermark (an append, an fsync in durable mode, later a follower's fetch) wakes exactly
//! this partition's waiters, and nobody has to remember to notify. Moving the lifecycle
//! forward closes the waiters (shutdown, deletion).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use uuid::Uuid;

use super::delayed::{Closed, Observed, PartitionWaiters, WaitBudget};
use crate::replica::Partition;

/// Where a partition is in its life. It only moves forward (Open → Stopping → Deleted, or
/// Open → Deleted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Lifecycle {
    /// Serving appends.
    Open = 0,
    /// The broker is stopping: no more appends, but flushes and the closing checkpoint go on.
    Stopping = 1,
    /// The topic was deleted: its directory is (being) removed, so nothing touches its files.
    Deleted = 2,
}

impl Lifecycle {
    fn from_u8(raw: u8) -> Lifecycle {
        match raw {
            0 => Lifecycle::Open,
            1 => Lifecycle::Stopping,
            2 => Lifecycle::Deleted,
            other => unreachable!("lifecycle {other} is never stored"),
        }
    }
}

pub struct PartitionHandle {
    state: Mutex<Partition>,
    /// One fsync or checkpoint at a time; writers that queue here share the next fsync (group
    /// commit). A delete takes it too, so no write is in flight when the directory goes.
    pub(super) flush_gate: tokio::sync::Mutex<()>,
    /// One DeleteRecords start-offset write at a time, so the files land in the order the
    /// start offsets advance.
    pub(super) log_start_gate: tokio::sync::Mutex<()>,
    pub topic_id: Uuid,
    /// A [`Lifecycle`], written only while holding `state` (see the module doc).
    lifecycle: AtomicU8,
    /// Produces and fetches waiting on this partition (see `delayed`).
    pub waiters: Arc<PartitionWaiters>,
}

/// What the waiters key on, read from the partition.
fn observed(p: &Partition) -> Observed {
    Observed {
        high_watermark: p.high_watermark(),
        log_end: p.log_end_offset(),
        log_start: p.log_start_offset(),
        low_watermark: p.low_watermark().unwrap_or(-1),
        enough_replicas: p.enough_replicas_after_append(),
    }
}

/// The partition lock's guard. Released after a mutable use, it tells the partition's waiters
/// what changed (under the lock, so they see changes in order).
pub struct PartitionGuard<'a> {
    guard: MutexGuard<'a, Partition>,
    waiters: &'a PartitionWaiters,
    changed: bool,
}

impl Deref for PartitionGuard<'_> {
    type Target = Partition;
    fn deref(&self) -> &Partition {
        &self.guard
    }
}

impl DerefMut for PartitionGuard<'_> {
    fn deref_mut(&mut self) -> &mut Partition {
        self.changed = true;
        &mut self.guard
    }
}

impl Drop for PartitionGuard<'_> {
    fn drop(&mut self) {
        if self.changed {
            self.waiters.observe(observed(&self.guard));
        }
    }
}

impl PartitionHandle {
    /// A handle whose waiters count against `budget` (the broker's bound on all waiters).
    pub fn new(partition: Partition, topic_id: Uuid, budget: &Arc<WaitBudget>) -> PartitionHandle {
        let waiters = PartitionWaiters::new(budget.clone(), observed(&partition));
        PartitionHandle {
            state: Mutex::new(partition),
            flush_gate: tokio::sync::Mutex::new(()),
            log_start_gate: tokio::sync::Mutex::new(()),
            topic_id,
            lifecycle: AtomicU8::new(Lifecycle::Open as u8),
            waiters,
        }
    }

    /// The partition, whatever its lifecycle: for reads and for work that is harmless on a
    /// closed partition.
    pub fn lock(&self) -> PartitionGuard<'_> {
        // A panic while holding the lock is an invariant violation; poison would hide it.
        PartitionGuard {
            guard: self.state.lock().unwrap_or_else(|e| e.into_inner()),
            waiters: &self.waiters,
            changed: false,
        }
    }

    /// The partition and its lifecycle, read under the lock.
    pub fn lock_with_lifecycle(&self) -> (PartitionGuard<'_>, Lifecycle) {
        let guard = self.lock();
        let lifecycle = Lifecycle::from_u8(self.lifecycle.load(Ordering::SeqCst));
        (guard, lifecycle)
    }

    /// The partition if it still takes appends; `None` once it is stopping or deleted. The
    /// guard is held, so it cannot close while the caller uses it.
    pub fn lock_open(&self) -> Option<PartitionGuard<'_>> {
        match self.lock_with_lifecycle() {
            (guard, Lifecycle::Open) => Some(guard),
            _ => None,
        }
    }

    /// Moves the lifecycle forward (never back), under the lock. A stopping or deleted
    /// partition ends its waits: produces are answered with the reason, fetches re-read.
    pub fn set_lifecycle(&self, to: Lifecycle) {
        let (_guard, now) = self.lock_with_lifecycle();
        if to > now {
            self.lifecycle.store(to as u8, Ordering::SeqCst);
            self.waiters.close(match to {
                Lifecycle::Stopping => Closed::ShuttingDown,
                _ => Closed::Deleted,
            });
        }
    }

    /// This broker stopped leading the partition (for the replication layer to call when it
    /// makes the partition a follower): waiting acks=all produces fail with
    /// NOT_LEADER_OR_FOLLOWER and waiting fetches re-read.
    pub fn leadership_lost(&self) {
        let _guard = self.lock();
        self.waiters.leadership_lost();
    }

    pub fn lifecycle(&self) -> Lifecycle {
        self.lock_with_lifecycle().1
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::io::memdisk::{block_on, MemDisk};

    fn handle() -> PartitionHandle {
        let disk = MemDisk::new(1);
        let config = crate::config::ServerConfig::default_single_node().topic_defaults;
        let open = Partition::open(
            Arc::new(disk),
            Path::new("/d/t-0"),
            "t",
            0,
            config,
            Default::default(),
            0,
        );
        let budget = WaitBudget::new(10);
        PartitionHandle::new(block_on(open).unwrap().0, Uuid::nil(), &budget)
    }

    #[test]
    fn a_changed_partition_tells_its_waiters_and_a_read_does_not() {
        use crate::broker::delayed::{FetchWake, Isolation};
        let h = handle();
        let wake = FetchWake::new();
        let _r = h
            .waiters
            .register_fetch(0, Isolation::HighWatermark, &wake)
            .unwrap();
        // Only looked at: nothing reported.
        let _ = h.lock().high_watermark();
        assert_eq!(h.waiters.counts().fetch_wakes, 0);
        let mut b = crate::log::batch::BatchBuilder::new(1);
        b.push(None, Some(b"v"), 1);
        h.lock().append(&b.finish(-1, -1, -1), 1).unwrap();
        assert_eq!(
            h.waiters.counts().fetch_wakes,
            1,
            "the append moved the high watermark"
        );
        // A lifecycle move closes the waiters.
        let _wait = h.waiters.reserve_produce().unwrap().wait_for(5);
        assert_eq!(h.waiters.counts().produce, 1);
        h.set_lifecycle(Lifecycle::Stopping);
        assert_eq!(h.waiters.counts().produce, 0, "answered at the close");
        assert!(h.waiters.reserve_produce().is_err());
    }

    #[test]
    fn lifecycle_only_moves_forward() {
        let h = handle();
        assert!(h.lock_open().is_some());
        h.set_lifecycle(Lifecycle::Stopping);
        assert!(h.lock_open().is_none());
        assert_eq!(h.lifecycle(), Lifecycle::Stopping);
        h.set_lifecycle(Lifecycle::Deleted);
        h.set_lifecycle(Lifecycle::Open);
        assert_eq!(h.lifecycle(), Lifecycle::Deleted);
    }

    #[test]
    fn a_close_waits_for_a_holder_of_the_open_guard() {
        let h = Arc::new(handle());
        let guard = h.lock_open().expect("open");
        let closer = {
            let h = h.clone();
            std::thread::spawn(move || h.set_lifecycle(Lifecycle::Deleted))
        };
        // The closer blocks on the lock while the guard lives: the append it protects completes
        // before the partition counts as deleted.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!closer.is_finished());
        drop(guard);
        closer.join().unwrap();
        assert!(h.lock_open().is_none());
    }
}
