//! The driver of the active controller's core (`controller::active`): it feeds the core the
//! quorum's leadership, the committed image, the brokers' registrations and heartbeats (from
//! `handlers::inter_node::broker_rpc`, or this node itself), producer-id requests and its
//! timer, and carries out what the core decides: each proposal is one controller write,
//! committed through the quorum under the metadata lock (serial with every other write), its
//! end reported back before the lock is released.
//!
//! Time is monotonic, as Kafka's heartbeat manager measures it: a wall clock stepped back
//! would keep every session that heartbeated before the step "live" for the whole step (no
//! dead broker fenced, its restart refused as a duplicate registration; replication-5-mixed
//! seed 52 lost acknowledged writes that way).

pub(crate) mod state;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::broker::{errors::CommitError, shared::Broker};
use crate::controller::active::{Action, Answer, Event};
use crate::controller::brokers::{HeartbeatReply, HeartbeatRequest, RegistrationRequest};

/// Reports a write the driver stopped waiting for (its future dropped) as not committed, so
/// the core never keeps a write in flight that nobody will report.
struct InFlight<'a> {
    broker: &'a Broker,
    reported: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.reported {
            self.broker.feed_active(Event::NotCommitted);
        }
    }
}

/// The timer: waits for the core's next deadline, a leadership change or a request that may
/// have moved the deadline, then ticks. Only a cluster runs it (a single node is its own only
/// broker: no session with itself, nobody else to elect).
pub(crate) async fn run(broker: Arc<Broker>) {
    if !broker.config.is_clustered() {
        return;
    }
    let mut shutdown = broker.shutdown_signal();
    let mut leadership = broker.quorum.controller_changes();
    loop {
        if broker.is_storage_offline() {
            // Nothing is written any more; the process waits to be restarted.
            let _ = shutdown.wait_for(|stop| *stop).await;
            return;
        }
        let deadline = broker
            .active_controller
            .core
            .lock()
            .unwrap()
            .next_deadline();
        let wait = deadline.map(|at| {
            let ms = at.saturating_sub(broker.controller_clock_ms()).max(0);
            Duration::from_millis(ms as u64)
        });
        // A leadership change is carried into the core at once (under the metadata lock); a
        // request's wake-up only makes the deadline be read again.
        let leadership_changed = tokio::select! {
            biased;
            _ = shutdown.changed() => false,
            changed = leadership.changed() => {
                if changed.is_err() {
                    return;
                }
                true
            }
            _ = broker.active_controller.wake.notified() => false,
            _ = broker.io.clock.sleep(wait.unwrap_or_default()), if wait.is_some() => false,
        };
        if *shutdown.borrow() {
            return;
        }
        let deadline = broker
            .active_controller
            .core
            .lock()
            .unwrap()
            .next_deadline();
        let due = deadline.is_some_and(|at| at <= broker.controller_clock_ms());
        if (leadership_changed || due) && !broker.is_storage_offline() {
            broker.tick_active_controller().await;
        }
    }
}

impl Broker {
    fn controller_clock_ms(&self) -> i64 {
        self.io.clock.monotonic().as_millis().min(i64::MAX as u128) as i64
    }

    /// One step of the core, with `now` read under its lock (so steps never go back in time).
    fn feed_active(&self, event: Event) -> Vec<Action> {
        let mut core = self.active_controller.core.lock().unwrap();
        core.step(self.controller_clock_ms(), event);
        core.take_actions()
    }

    /// Brings the core in line with the quorum (a new term, or none) and the committed image,
    /// then steps `event`. The caller holds the metadata lock.
    fn decide_active(&self, event: Option<Event>) -> Result<Vec<Action>, CommitError> {
        let image = self.image();
        let active = self.quorum.active_epoch();
        let mut core = self.active_controller.core.lock().unwrap();
        let now = self.controller_clock_ms();
        let Some(epoch) = active else {
            if core.epoch().is_some() {
                core.step(now, Event::LostLeadership);
            }
            return Err(CommitError::NotController);
        };
        if core.epoch() != Some(epoch) {
            core.step(now, Event::BecameActive { epoch, image });
        } else if core.image_applied() != Some(image.applied()) {
            core.step(now, Event::Applied(image));
        }
        if let Some(event) = event {
            core.step(now, event);
        }
        Ok(core.take_actions())
    }

    /// Carries out one decision's actions (the caller holds the metadata lock): its proposal
    /// committed and the end reported, until the core answers or has nothing more to do.
    async fn carry_out(&self, mut actions: Vec<Action>) -> Result<Option<Answer>, CommitError> {
        let mut answer = None;
        loop {
            let mut proposal = None;
            for action in actions.drain(..) {
                match action {
                    Action::Answer(a) => {
                        assert!(answer.is_none(), "two answers to one request");
                        answer = Some(a);
                    }
                    Action::Propose(records) => {
                        assert!(proposal.is_none(), "two writes at once");
                        proposal = Some(records);
                    }
                }
            }
            let Some(records) = proposal else {
                return Ok(answer);
            };
            let mut in_flight = InFlight {
                broker: self,
                reported: false,
            };
            let result = self
                .commit_through_quorum(false, |_, _| Ok((records, ())))
                .await;
            in_flight.reported = true;
            actions = self.feed_active(match result {
                Ok(()) => Event::Committed(self.image()),
                Err(_) => Event::NotCommitted,
            });
            result?;
        }
    }

    /// A request to the active controller, answered once its write (if any) committed.
    async fn ask_active(&self, event: Event) -> Result<Answer, CommitError> {
        let _writer = self.metadata.lock().await;
        if self.quorum.is_active() {
            self.commit_bootstrap_records().await?;
        }
        let actions = self.decide_active(Some(event))?;
        self.active_controller.wake.notify_one();
        let answer = self.carry_out(actions).await?;
        Ok(answer.expect("the core answers every request"))
    }

    /// The periodic work that is due (a fence, elections), one write at a time.
    async fn tick_active_controller(&self) {
        let _writer = self.metadata.lock().await;
        if self.quorum.is_active() {
            if let Err(e) = self.commit_bootstrap_records().await {
                tracing::warn!(error = %e, "the bootstrap records did not commit; tried again");
                return;
            }
        }
        loop {
            let due = match self.decide_active(None) {
                Ok(actions) => {
                    assert!(
                        actions.is_empty(),
                        "a term or image change decided {actions:?}"
                    );
                    let deadline = self.active_controller.core.lock().unwrap().next_deadline();
                    deadline.is_some_and(|at| at <= self.controller_clock_ms())
                }
                Err(_) => false,
            };
            if !due {
                return;
            }
            let actions = self.feed_active(Event::Tick);
            if actions.is_empty() {
                return;
            }
            if let Err(e) = self.carry_out(actions).await {
                tracing::debug!(error = %e, "the active controller's periodic write did not commit");
                return;
            }
        }
    }

    /// Registers a broker and returns its epoch (the offset of its registration record).
    pub(crate) async fn register_broker(
        &self,
        request: &RegistrationRequest,
    ) -> Result<i64, CommitError> {
        match self.ask_active(Event::Register(request.clone())).await? {
            Answer::Registered(Some(epoch)) => Ok(epoch),
            Answer::Registered(None) => Err(CommitError::NotController),
            Answer::Refused(e) => Err(CommitError::Rejected(e)),
            other => unreachable!("a registration answered {other:?}"),
        }
    }

    pub(crate) async fn broker_heartbeat(
        &self,
        request: &HeartbeatRequest,
    ) -> Result<HeartbeatReply, CommitError> {
        match self.ask_active(Event::Heartbeat(request.clone())).await? {
            Answer::Heartbeat(reply) => Ok(reply),
            Answer::Refused(e) => Err(CommitError::Rejected(e)),
            other => unreachable!("a heartbeat answered {other:?}"),
        }
    }

    /// A new producer id, never handed out before: ids are reserved in blocks in the metadata
    /// log before any of them is given out.
    pub(crate) async fn allocate_producer_id(&self) -> io::Result<i64> {
        match self.ask_active(Event::AllocateProducerId).await {
            Ok(Answer::ProducerId(id)) => Ok(id),
            Ok(other) => unreachable!("a producer id answered {other:?}"),
            Err(CommitError::Storage(e)) => Err(e),
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    }
}
