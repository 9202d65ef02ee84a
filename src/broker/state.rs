//! A partition as the broker shares it between connections: the replica state machine behind a
//! short-held lock (never held across an await), plus the gates that serialise its fsyncs and its log-start writes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use uuid::Uuid;

use crate::replica::Partition;

pub struct PartitionHandle {
    state: Mutex<Partition>,
    /// One fsync at a time; writers that queue here share the next one (group commit).
    pub(super) flush_gate: tokio::sync::Mutex<()>,
    /// One DeleteRecords start-offset write at a time, so the files land in the order the
    /// start offsets advance.
    pub(super) log_start_gate: tokio::sync::Mutex<()>,
    pub topic_id: Uuid,
    /// Set when the topic is deleted or the broker stops: no more appends.
    closed: AtomicBool,
}

impl PartitionHandle {
    pub fn new(partition: Partition, topic_id: Uuid) -> PartitionHandle {
        PartitionHandle {
            state: Mutex::new(partition),
            flush_gate: tokio::sync::Mutex::new(()),
            log_start_gate: tokio::sync::Mutex::new(()),
            topic_id,
            closed: AtomicBool::new(false),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Partition> {
        // A panic while holding the lock is an invariant violation; poison would hide it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn mark_deleted(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}
