//! The start-up gate's latches as `Broker` holds them. Kept apart from the gate's logic
//! (`super`), which takes the broker, so that the broker's definition (`shared`) holds them
//! without importing it.

use std::sync::atomic::AtomicBool;

use crate::sync::watch;

/// Whether the gates are open (both latched).
pub struct StartupGate {
    pub(super) open: AtomicBool,
    /// Ready for clients: serving partitions and unfenced in its own image.
    pub(super) clients: watch::Sender<bool>,
}

impl Default for StartupGate {
    fn default() -> Self {
        StartupGate {
            open: AtomicBool::new(false),
            clients: watch::channel(false).0,
        }
    }
}
