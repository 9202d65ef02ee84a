//! The start-up gate (Kafka's BrokerServer waiting on BrokerLifecycleManager's
//! initialCatchUpFuture before it starts the replica manager): a clustered broker takes no
//! partition role — no leader, no follower, no fetcher, no produce or fetch served — until the
//! controller accepted its registration and its image has applied that registration record.
//!
//! Why: a broker back from a power loss has lost its log's unfsynced suffix, but the image it
//! starts from (and the controller's, while the old session lives) may still name it leader at
//! the old epoch. Leading from that image would let followers truncate to its shortened log,
//! losing acknowledged writes. Its registration is refused while the old session is live
//! (DUPLICATE_BROKER_REGISTRATION); once accepted, the same commit that registers it (after an
//! unclean shutdown) takes it out of every ISR and ELR and elects away from it (KIP-966), so an
//! image that has applied its registration no longer names it leader of anything it lost.
//!
//! The gate latches open: once past its registration, the image never goes back before it, and
//! a later re-registration of the same process (a stale broker epoch) lost no data.

use std::sync::atomic::{AtomicBool, Ordering};

use super::Broker;

/// Whether the gate is open (latched).
#[derive(Default)]
pub struct StartupGate {
    open: AtomicBool,
}

/// The gate's rule, pure: open once the broker is registered at `epoch` (the offset of its
/// registration record) and the image has applied up to `applied` (the offset after its last
/// record) past it.
pub fn caught_up_past_registration(epoch: Option<i64>, applied: i64) -> bool {
    epoch.is_some_and(|e| applied > e)
}

impl Broker {
    /// Whether this node may act on its partitions' roles. Always for a single node and a
    /// pure controller (no registration); a clustered broker once past its registration.
    pub fn serving_partitions(&self) -> bool {
        if !(self.config.is_clustered() && self.config.is_broker()) {
            return true;
        }
        if self.startup_gate.open.load(Ordering::Acquire) {
            return true;
        }
        if caught_up_past_registration(self.session.epoch(), self.image().applied()) {
            self.startup_gate.open.store(true, Ordering::Release);
            tracing::info!(
                epoch = ?self.session.epoch(),
                applied = self.image().applied(),
                "metadata caught up past this broker's registration: serving partitions"
            );
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests;
