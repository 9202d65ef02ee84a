//! The active controller's state as `Broker` holds it: the core behind its lock and the
//! timer's wake-up. Kept apart from the driver (`super`), which takes the broker, so that the
//! broker's definition (`shared`) holds it without importing the driver.

use std::sync::Mutex;

use tokio::sync::Notify;

use crate::config::ServerConfig;
use crate::controller::active::{ActiveConfig, ActiveController};
use crate::controller::Controller;

/// How often leaderless partitions are elected again.
const LEADERLESS_RETRY_MS: i64 = 1000;

/// The core and the timer's wake-up.
pub(crate) struct ActiveControllerState {
    pub(super) core: Mutex<ActiveController>,
    /// Poked after a request's step (it may have moved the deadline): the timer reads it again.
    pub(super) wake: Notify,
}

impl ActiveControllerState {
    pub(crate) fn new(config: &ServerConfig, rules: Controller) -> ActiveControllerState {
        let timeout = config.broker_session_timeout_ms.clamp(1, i64::MAX as u64) as i64;
        let rebalance_ms = config
            .leader_imbalance_check_interval_seconds
            .clamp(1, i64::MAX as u64 / 1000) as i64
            * 1000;
        let active = ActiveConfig {
            session_timeout_ms: timeout,
            leaderless_retry_ms: LEADERLESS_RETRY_MS,
            rebalance_every_ms: config.auto_leader_rebalance_enable.then_some(rebalance_ms),
            // A failed fence is tried again an eighth of the session timeout later, within
            // 10..=250 ms.
            retry_ms: (timeout / 8).clamp(10, 250),
        };
        ActiveControllerState {
            core: Mutex::new(ActiveController::new(active, rules)),
            wake: Notify::new(),
        }
    }
}
