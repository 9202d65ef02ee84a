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
//!
//! A second latch, later, gates the client listener (Kafka's BrokerServer enables request
//! processing only after the controller acknowledged it caught up and unfenced it): a node
//! whose image does not yet show itself registered and unfenced would answer Metadata with a
//! controller and no brokers, which librdkafka reads as a partial cluster and backs off from.
//! Until then the client port is not bound (as Kafka defers opening a fixed port), so a
//! process that listens is one that serves.

pub(crate) mod state;

use std::sync::atomic::Ordering;

use super::shared::Broker;

/// The client gate's rule, pure: past the registration, and the image lists this broker
/// unfenced (so Metadata names it among the brokers).
pub fn ready_for_clients(serving_partitions: bool, unfenced_in_image: bool) -> bool {
    serving_partitions && unfenced_in_image
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

impl Broker {
    /// Whether clients may be served: always for a single node and a pure controller; a
    /// clustered broker once its image shows it registered, caught up and unfenced.
    pub fn ready_for_clients(&self) -> bool {
        if *self.startup_gate.clients.borrow() {
            return true;
        }
        if !(self.config.is_clustered() && self.config.is_broker()) {
            return true;
        }
        let unfenced = self
            .image()
            .broker(self.config.node_id)
            .is_some_and(|b| !b.fenced);
        ready_for_clients(self.serving_partitions(), unfenced)
    }

    /// Re-checks the client gate (after the image or the registration changed) and latches
    /// it open, waking [`Broker::wait_ready_for_clients`].
    pub(super) fn note_client_readiness(&self) {
        if *self.startup_gate.clients.borrow() || !self.ready_for_clients() {
            return;
        }
        self.startup_gate.clients.send_replace(true);
        tracing::info!(
            applied = self.image().applied(),
            "registered, caught up and unfenced: serving clients"
        );
    }

    /// Resolves once clients may be served (at once when they may already); `false` if the
    /// broker shuts down first.
    pub(super) async fn wait_ready_for_clients(&self) -> bool {
        self.note_client_readiness();
        let mut ready = self.startup_gate.clients.subscribe();
        let mut shutdown = self.shutdown_signal();
        if self.ready_for_clients() {
            return true;
        }
        tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => false,
            r = ready.wait_for(|open| *open) => r.is_ok(),
        }
    }
}

#[cfg(test)]
mod tests;
