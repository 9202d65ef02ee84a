//! The active controller's broker sessions (KIP-631): the pure [`BrokerSessions`] of the
//! current leadership term (a new leader starts them afresh, as Kafka's does) and the
//! controller writes that decide registrations, heartbeats and expiries against the committed
//! image. The requests arrive through `handlers::inter_node::broker_rpc` (or from this node
//! itself); the controller timer (`controller_timer`) calls
//! [`Broker::tick_broker_sessions`] to fence brokers silent for `broker.session.timeout.ms`.

use std::sync::Mutex;

use crate::broker::{Broker, CommitError};
use crate::controller::brokers::{
    BrokerSessions, HeartbeatReply, HeartbeatRequest, RegistrationRequest,
};

/// The sessions and the quorum epoch they belong to (none before the first use).
#[derive(Default)]
pub(crate) struct ControllerSessions {
    current: Mutex<Option<(u32, BrokerSessions)>>,
}

impl ControllerSessions {
    /// Runs `f` on the sessions of quorum epoch `epoch`, started afresh (sessions time out
    /// after `timeout_ms`) when the epoch changed.
    fn with<T>(&self, epoch: u32, timeout_ms: i64, f: impl FnOnce(&mut BrokerSessions) -> T) -> T {
        let mut current = self.current.lock().unwrap();
        if current.as_ref().is_none_or(|(e, _)| *e != epoch) {
            *current = Some((epoch, BrokerSessions::new(timeout_ms.max(1))));
        }
        let (held, sessions) = current.as_mut().expect("set above");
        assert_eq!(*held, epoch, "sessions of another leadership term");
        f(sessions)
    }
}

impl Broker {
    /// The time broker sessions are measured in: monotonic, as Kafka's heartbeat manager
    /// measures them. A wall clock stepped back would keep every session that heartbeated
    /// before the step "live" for the whole step (`touch` keeps the latest contact): no dead
    /// broker fenced, its partitions left on it, and its restart refused as a duplicate
    /// registration (replication-5-mixed seed 52: a 50 s step, 5 acknowledged writes lost).
    fn session_clock_ms(&self) -> i64 {
        self.io.clock.monotonic().as_millis().min(i64::MAX as u128) as i64
    }

    /// The sessions of this leadership term (afresh when the quorum epoch changed).
    fn with_sessions<T>(&self, f: impl FnOnce(&mut BrokerSessions) -> T) -> T {
        let epoch = self.quorum.status().epoch;
        let timeout = self.config.broker_session_timeout_ms.min(i64::MAX as u64) as i64;
        self.sessions.with(epoch, timeout, f)
    }

    /// Registers a broker and returns its epoch (the offset of its registration record).
    pub(crate) async fn register_broker(
        &self,
        request: &RegistrationRequest,
    ) -> Result<i64, CommitError> {
        let now = self.session_clock_ms();
        self.change_metadata(false, |controller, image| {
            let records = self.with_sessions(|s| {
                s.register(image, request, now, &|t| {
                    controller.election_config(image, t)
                })
            })?;
            Ok((records, ()))
        })
        .await?;
        crate::controller::brokers::registered_epoch(&self.image(), request.id, request.incarnation)
            .ok_or(CommitError::NotController)
    }

    pub(crate) async fn broker_heartbeat(
        &self,
        request: &HeartbeatRequest,
    ) -> Result<HeartbeatReply, CommitError> {
        let now = self.session_clock_ms();
        self.change_metadata(false, |controller, image| {
            let decision = self.with_sessions(|s| {
                s.heartbeat(image, request, now, &|t| {
                    controller.election_config(image, t)
                })
            })?;
            Ok((decision.records, decision.reply))
        })
        .await
    }

    /// On the active controller of a cluster: fences a broker whose session expired (a single
    /// node runs no session with itself).
    pub(crate) async fn tick_broker_sessions(&self) {
        if !self.config.is_clustered() || !self.is_active_controller() {
            return;
        }
        let now = self.session_clock_ms();
        let result = self
            .change_metadata(false, |controller, image| {
                let records = self.with_sessions(|s| {
                    s.tick(image, now, &|t| controller.election_config(image, t))
                });
                Ok((records, ()))
            })
            .await;
        if let Err(e) = result {
            tracing::debug!(error = %e, "broker session tick did not commit");
        }
    }
}
