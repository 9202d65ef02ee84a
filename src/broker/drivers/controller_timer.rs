//! The active controller's timer (the periodic work of Kafka's `QuorumController`), run on
//! every node of a cluster and acting only while the node is the active controller:
//!
//! - every tick: fence the broker silent the longest past `broker.session.timeout.ms`, if
//!   any (out of every ISR, its leaderships elected elsewhere: `BrokerSessions::tick`);
//! - every [`LEADERLESS_RETRY`]: elect leaderless partitions again (a replica may be back, or
//!   a topic may now allow unclean election);
//! - every `leader.imbalance.check.interval.seconds`, with `auto.leader.rebalance.enable`:
//!   preferred-leader elections for partitions not led by their first replica.
//!
//! Each step is one controller write (`change_metadata`), serial with every other, so a
//! decision is always made against the committed image. A tick is bounded: at most one broker
//! fenced, at most [`MAX_PERIODIC_ELECTIONS`](crate::controller::MAX_PERIODIC_ELECTIONS)
//! partitions elected.

use std::sync::Arc;
use std::time::Duration;

use crate::broker::Broker;

/// How often leaderless partitions are elected again.
const LEADERLESS_RETRY: Duration = Duration::from_millis(1000);

/// The tick: fine enough that a broker is fenced soon after its session expires, at most
/// every 250 ms (an eighth of the session timeout when that is shorter, at least 10 ms).
fn tick(session_timeout_ms: u64) -> Duration {
    Duration::from_millis((session_timeout_ms / 8).clamp(10, 250))
}

pub(crate) async fn run(broker: Arc<Broker>) {
    if !broker.config.is_clustered() {
        // A single node is its own only broker (it runs no session with itself): nothing to
        // fence, nobody else to elect.
        return;
    }
    let mut shutdown = broker.shutdown_signal();
    let every = tick(broker.config.broker_session_timeout_ms);
    let rebalance_every =
        Duration::from_secs(broker.config.leader_imbalance_check_interval_seconds.max(1));
    let mut since_leaderless = Duration::ZERO;
    let mut since_rebalance = Duration::ZERO;
    loop {
        tokio::select! {
            biased;
            _ = broker.io.clock.sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        if broker.is_storage_offline() || !broker.is_active_controller() {
            // A new active controller starts its intervals afresh.
            since_leaderless = Duration::ZERO;
            since_rebalance = Duration::ZERO;
            continue;
        }
        broker.tick_broker_sessions().await;
        since_leaderless += every;
        since_rebalance += every;
        let rebalance =
            broker.config.auto_leader_rebalance_enable && since_rebalance >= rebalance_every;
        if since_leaderless >= LEADERLESS_RETRY || rebalance {
            since_leaderless = Duration::ZERO;
            if rebalance {
                since_rebalance = Duration::ZERO;
            }
            broker.periodic_elections(rebalance).await;
        }
    }
}

impl Broker {
    /// Leaderless partitions elected again and, with `rebalance`, preferred leaders restored.
    pub(crate) async fn periodic_elections(&self, rebalance: bool) {
        let result = self
            .change_metadata(false, |controller, image| {
                Ok((controller.periodic_elections(image, rebalance), ()))
            })
            .await;
        if let Err(e) = result {
            tracing::debug!(error = %e, "periodic elections did not commit");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tick_follows_the_session_timeout_within_bounds() {
        assert_eq!(tick(9000), Duration::from_millis(250));
        assert_eq!(tick(800), Duration::from_millis(100));
        assert_eq!(tick(1), Duration::from_millis(10));
    }
}
