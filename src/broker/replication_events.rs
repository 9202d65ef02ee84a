//! What the follower side did to a partition's log, told to an observer outside the broker as
//! it happens (the simulator's trace). A follower's truncation is local to its broker: neither
//! the metadata log nor any reply shows it, yet it is where KIP-101 and KIP-279 bugs lose data.
//! No observer: nothing is built or sent.

use std::sync::{Arc, OnceLock};

/// One replication step on a follower.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicationEvent {
    /// The follower cut its log from `from` (its log end) to `to`, durably, while following
    /// `leader_epoch`.
    Truncated {
        topic: String,
        partition: i32,
        leader_epoch: i32,
        from: i64,
        to: i64,
    },
}

/// Called synchronously on the broker's task: it must not block.
pub type ReplicationObserver = Arc<dyn Fn(&ReplicationEvent) + Send + Sync>;

/// The one observer of a broker, set at most once.
#[derive(Default)]
pub(crate) struct ReplicationEvents {
    observer: OnceLock<ReplicationObserver>,
}

impl ReplicationEvents {
    /// `false` when an observer was already set (the first one stays).
    pub(crate) fn set(&self, observer: ReplicationObserver) -> bool {
        self.observer.set(observer).is_ok()
    }

    /// Tells the observer, building the event only when there is one.
    pub(crate) fn emit(&self, event: impl FnOnce() -> ReplicationEvent) {
        if let Some(observer) = self.observer.get() {
            observer(&event());
        }
    }
}
