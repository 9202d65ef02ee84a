//! This broker's session state as `Broker` holds it (what the session task and
//! `Broker::shutdown` share). Kept apart from the driver (`super`), which takes the broker, so
//! that the broker's definition (`shared`) holds it without importing the driver.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use crate::sync::watch;

/// What the session task and `Broker::shutdown` share.
pub struct SessionState {
    pub(super) want_shutdown: AtomicBool,
    /// True once the controller allowed this broker to stop.
    pub(super) granted: watch::Sender<bool>,
    /// The last heartbeat's answer: fenced or not.
    pub(super) fenced: AtomicBool,
    /// The epoch of this process's registration (-1: not registered yet).
    pub(super) epoch: AtomicI64,
    /// The epoch the last clean stop recorded (-1: none).
    pub(super) previous_epoch: AtomicI64,
}

impl Default for SessionState {
    fn default() -> Self {
        SessionState {
            want_shutdown: AtomicBool::new(false),
            granted: watch::channel(false).0,
            fenced: AtomicBool::new(true),
            epoch: AtomicI64::new(-1),
            previous_epoch: AtomicI64::new(-1),
        }
    }
}

impl SessionState {
    /// Whether the controller allowed this broker to stop (controlled shutdown).
    pub fn shutdown_granted(&self) -> bool {
        *self.granted.borrow()
    }

    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::Acquire)
    }

    /// The broker epoch of this process's registration, once registered.
    pub fn epoch(&self) -> Option<i64> {
        Some(self.epoch.load(Ordering::Acquire)).filter(|e| *e >= 0)
    }

    /// As if the controller had accepted this process's registration at `epoch` (tests of
    /// what waits on it, without a controller).
    #[cfg(test)]
    pub(crate) fn set_registered_for_test(&self, epoch: i64) {
        self.epoch.store(epoch, Ordering::Release);
    }
}
