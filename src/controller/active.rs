//! The active controller's own state and timers as a pure core (Kafka's `QuorumController`
//! keeps the same in its `BrokerHeartbeatManager`, `ProducerIdControlManager` and periodic
//! tasks): the broker sessions of the current leadership term, the producer-id cursor, and
//! when the periodic work is next due. Events come in with `now` (monotonic ms); actions go
//! out for the driver (`broker::drivers::active_controller`) to carry out.
//!
//! Each decision is one controller write, made against the committed image and serial with
//! every other: a request or a [`Event::Tick`] yields at most one [`Action::Propose`], and the
//! driver reports its end ([`Event::Committed`] with the image holding it, or
//! [`Event::NotCommitted`]) before the next decision. An answer that depends on the write is
//! given once it committed; one that writes nothing is given at once.
//!
//! The periodic work, on [`Event::Tick`] once [`ActiveController::next_deadline`] has passed,
//! one write per tick in this order:
//! - fence the unfenced broker silent the longest past `broker.session.timeout.ms`
//!   (`BrokerSessions::tick`: out of every ISR, its leaderships elected elsewhere);
//! - every `leaderless_retry_ms`: elect leaderless partitions again (a replica may be back, or
//!   a topic may now allow unclean election), and every `rebalance_every_ms` (with
//!   `auto.leader.rebalance.enable`) also restore preferred leaders
//!   (`Controller::periodic_elections`, bounded by `MAX_PERIODIC_ELECTIONS`).
//!
//! A timer write that did not commit is tried again `retry_ms` later, not at once.
//!
//! Invariants (checked after every step): with a term, its sessions are exactly the image's
//! brokers whenever no write is in flight; the image never goes back within a term; the
//! producer-id cursor never goes back, and a term's cursor is at or past the blocks reserved
//! before it began; an answer waits only on a write in flight; a tick leaves nothing due.

use std::sync::Arc;

use uuid::Uuid;

use super::brokers::{
    registered_epoch, BrokerSessions, HeartbeatReply, HeartbeatRequest, RegistrationRequest,
};
use super::{Controller, ControllerError, MetadataImage, MetadataRecord};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveConfig {
    /// `broker.session.timeout.ms`: a broker silent this long is fenced.
    pub session_timeout_ms: i64,
    /// How often leaderless partitions are elected again.
    pub leaderless_retry_ms: i64,
    /// `leader.imbalance.check.interval.seconds` in ms when `auto.leader.rebalance.enable`.
    pub rebalance_every_ms: Option<i64>,
    /// How long a timer write that did not commit waits before it is tried again.
    pub retry_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// This node became the active controller in quorum epoch `epoch`, with everything
    /// before the epoch applied in `image`. The sessions start afresh (every registered
    /// broker's at `now`), as a new Kafka controller's do.
    BecameActive {
        epoch: u32,
        image: Arc<MetadataImage>,
    },
    /// This node is no longer the active controller: the term's state goes.
    LostLeadership,
    /// The committed image the next decision is made against (other writers moved it on).
    Applied(Arc<MetadataImage>),
    /// A BrokerRegistration.
    Register(RegistrationRequest),
    /// A BrokerHeartbeat.
    Heartbeat(HeartbeatRequest),
    /// A new producer id (InitProducerId).
    AllocateProducerId,
    /// The driver's timer: do the periodic work that is due.
    Tick,
    /// The last [`Action::Propose`] committed; `image` has it applied.
    Committed(Arc<MetadataImage>),
    /// The last [`Action::Propose`] did not commit (refused, not the controller any more,
    /// timed out, abandoned).
    NotCommitted,
}

/// What the caller of a request is answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The broker epoch of a registration (the offset of its record); `None` when the
    /// committed image does not hold it (leadership moved).
    Registered(Option<i64>),
    Heartbeat(HeartbeatReply),
    ProducerId(i64),
    Refused(ControllerError),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Commit these records as one write; report [`Event::Committed`] or
    /// [`Event::NotCommitted`] before the next decision.
    Propose(Vec<MetadataRecord>),
    /// Answer the request being decided.
    Answer(Answer),
}

/// The write in flight, and what it answers once committed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Writing {
    Registration {
        id: i32,
        incarnation: Uuid,
    },
    Heartbeat(HeartbeatReply),
    ProducerId(i64),
    /// The timer's work: a fence or elections.
    Timer,
}

/// One leadership term.
#[derive(Clone, Debug)]
struct Term {
    epoch: u32,
    image: Arc<MetadataImage>,
    sessions: BrokerSessions,
    writing: Option<Writing>,
    /// When leaderless partitions are next elected again.
    next_leaderless_ms: i64,
    /// When preferred leaders are next restored (`None`: never).
    next_rebalance_ms: Option<i64>,
    /// A timer write failed: no timer work before this.
    retry_at_ms: Option<i64>,
    /// The producer-id blocks reserved before the term began.
    reserved_at_start: i64,
}

pub struct ActiveController {
    config: ActiveConfig,
    /// The controller's rules (elections per topic, periodic elections, producer-id blocks):
    /// the broker's own, cloned.
    rules: Controller,
    now: i64,
    term: Option<Term>,
    /// The next producer id to hand out: never back, across terms too.
    next_producer_id: i64,
    actions: Vec<Action>,
}

impl ActiveController {
    pub fn new(config: ActiveConfig, rules: Controller) -> ActiveController {
        assert!(config.session_timeout_ms > 0, "{config:?}");
        assert!(config.leaderless_retry_ms > 0, "{config:?}");
        assert!(config.retry_ms > 0, "{config:?}");
        assert!(
            config.rebalance_every_ms.is_none_or(|ms| ms > 0),
            "{config:?}"
        );
        ActiveController {
            config,
            rules,
            now: 0,
            term: None,
            next_producer_id: 0,
            actions: Vec::new(),
        }
    }

    /// The quorum epoch of the current term, if this node is the active controller.
    pub fn epoch(&self) -> Option<u32> {
        self.term.as_ref().map(|t| t.epoch)
    }

    /// The offset after the image the term's decisions are made against.
    pub fn image_applied(&self) -> Option<i64> {
        self.term.as_ref().map(|t| t.image.applied())
    }

    /// When the periodic work is next due (`None`: not active). While a timer write that
    /// failed waits, not before its retry.
    pub fn next_deadline(&self) -> Option<i64> {
        let term = self.term.as_ref()?;
        let due = [
            term.sessions.next_expiry(&term.image),
            Some(term.next_leaderless_ms),
            term.next_rebalance_ms,
        ]
        .into_iter()
        .flatten()
        .min()?;
        Some(term.retry_at_ms.map_or(due, |retry| due.max(retry)))
    }

    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    pub fn step(&mut self, now: i64, event: Event) {
        assert!(now >= self.now, "time went back: {now} < {}", self.now);
        self.now = now;
        let producer_id_before = self.next_producer_id;
        match event {
            Event::BecameActive { epoch, image } => self.become_active(epoch, image),
            Event::LostLeadership => self.term = None,
            Event::Applied(image) => {
                let term = self.term_mut("Applied");
                assert!(
                    term.writing.is_none(),
                    "a new image while a write is in flight"
                );
                Self::advance(term, image, now);
            }
            Event::Register(request) => self.register(request),
            Event::Heartbeat(request) => self.heartbeat(request),
            Event::AllocateProducerId => self.allocate_producer_id(),
            Event::Tick => self.tick(),
            Event::Committed(image) => self.committed(image),
            Event::NotCommitted => self.not_committed(),
        }
        assert!(
            self.next_producer_id >= producer_id_before,
            "the producer-id cursor went back: {} < {producer_id_before}",
            self.next_producer_id
        );
        self.check_invariants();
    }

    fn term_mut(&mut self, what: &str) -> &mut Term {
        self.term
            .as_mut()
            .unwrap_or_else(|| panic!("{what} while not the active controller"))
    }

    /// The term, for a new decision: none may be in flight.
    fn deciding(&mut self, what: &str) -> &mut Term {
        let term = self.term_mut(what);
        assert!(
            term.writing.is_none(),
            "{what} while a write is in flight: {:?}",
            term.writing
        );
        term
    }

    fn become_active(&mut self, epoch: u32, image: Arc<MetadataImage>) {
        if let Some(old) = &self.term {
            assert!(epoch > old.epoch, "term {epoch} after term {}", old.epoch);
        }
        let now = self.now;
        let mut sessions = BrokerSessions::new(self.config.session_timeout_ms);
        sessions.sync(&image, now);
        let reserved = image.producer_ids_reserved();
        self.next_producer_id = self.next_producer_id.max(reserved);
        self.term = Some(Term {
            epoch,
            image,
            sessions,
            writing: None,
            next_leaderless_ms: now.saturating_add(self.config.leaderless_retry_ms),
            next_rebalance_ms: self
                .config
                .rebalance_every_ms
                .map(|ms| now.saturating_add(ms)),
            retry_at_ms: None,
            reserved_at_start: reserved,
        });
    }

    /// A newer committed image (never an older one within a term); sessions follow its
    /// brokers.
    fn advance(term: &mut Term, image: Arc<MetadataImage>, now: i64) {
        assert!(
            image.applied() >= term.image.applied(),
            "the image went back: {} < {}",
            image.applied(),
            term.image.applied()
        );
        term.sessions.sync(&image, now);
        term.image = image;
    }

    /// Proposes `records` with `writing` to answer once they commit, or answers at once
    /// (`answer`) when there is nothing to write.
    fn write_or_answer(&mut self, records: Vec<MetadataRecord>, writing: Writing, answer: Answer) {
        if records.is_empty() {
            self.actions.push(Action::Answer(answer));
            return;
        }
        self.term_mut("a write").writing = Some(writing);
        self.actions.push(Action::Propose(records));
    }

    fn register(&mut self, request: RegistrationRequest) {
        let now = self.now;
        let rules = &self.rules;
        let term = self
            .term
            .as_mut()
            .expect("Register while not the active controller");
        assert!(
            term.writing.is_none(),
            "Register while a write is in flight"
        );
        let image = &term.image;
        let decided = term
            .sessions
            .register(image, &request, now, &|t| rules.election_config(image, t));
        match decided {
            Err(e) => self.actions.push(Action::Answer(Answer::Refused(e))),
            Ok(records) => {
                let epoch = registered_epoch(image, request.id, request.incarnation);
                self.write_or_answer(
                    records,
                    Writing::Registration {
                        id: request.id,
                        incarnation: request.incarnation,
                    },
                    Answer::Registered(epoch),
                )
            }
        }
    }

    fn heartbeat(&mut self, request: HeartbeatRequest) {
        let now = self.now;
        let rules = &self.rules;
        let term = self
            .term
            .as_mut()
            .expect("Heartbeat while not the active controller");
        assert!(
            term.writing.is_none(),
            "Heartbeat while a write is in flight"
        );
        let image = &term.image;
        let decided = term
            .sessions
            .heartbeat(image, &request, now, &|t| rules.election_config(image, t));
        match decided {
            Err(e) => self.actions.push(Action::Answer(Answer::Refused(e))),
            Ok(d) => self.write_or_answer(
                d.records,
                Writing::Heartbeat(d.reply),
                Answer::Heartbeat(d.reply),
            ),
        }
    }

    /// The next id; a new block is reserved first when the id is past the reserved ones (the
    /// cursor moves on even if that write fails: an id is never handed out twice).
    fn allocate_producer_id(&mut self) {
        let id = self.next_producer_id;
        self.next_producer_id = id.checked_add(1).expect("producer ids exhausted");
        let image = self.deciding("AllocateProducerId").image.clone();
        let reserve = self.rules.reserve_producer_ids(&image, id);
        if reserve.is_none() {
            assert!(id < image.producer_ids_reserved(), "id {id} not reserved");
        }
        self.write_or_answer(
            reserve.into_iter().collect(),
            Writing::ProducerId(id),
            Answer::ProducerId(id),
        );
    }

    fn tick(&mut self) {
        let now = self.now;
        let config = self.config;
        let rules = &self.rules;
        let term = self
            .term
            .as_mut()
            .expect("Tick while not the active controller");
        assert!(term.writing.is_none(), "Tick while a write is in flight");
        if term.retry_at_ms.is_some_and(|retry| now < retry) {
            return;
        }
        term.retry_at_ms = None;
        let image = &term.image;
        let mut records = term
            .sessions
            .tick(image, now, &|t| rules.election_config(image, t));
        if records.is_empty() {
            let leaderless = now >= term.next_leaderless_ms;
            let rebalance = term.next_rebalance_ms.is_some_and(|at| now >= at);
            if leaderless || rebalance {
                term.next_leaderless_ms = now.saturating_add(config.leaderless_retry_ms);
                if rebalance {
                    term.next_rebalance_ms =
                        config.rebalance_every_ms.map(|ms| now.saturating_add(ms));
                }
                records = rules.periodic_elections(image, rebalance);
            }
        }
        if records.is_empty() {
            assert!(
                self.next_deadline().is_none_or(|at| at > now),
                "a tick at {now} left work due at {:?}",
                self.next_deadline()
            );
            return;
        }
        term.writing = Some(Writing::Timer);
        self.actions.push(Action::Propose(records));
    }

    fn committed(&mut self, image: Arc<MetadataImage>) {
        let now = self.now;
        let term = self.term_mut("Committed");
        let writing = term
            .writing
            .take()
            .expect("Committed with no write in flight");
        Self::advance(term, image, now);
        let image = &term.image;
        let answer = match writing {
            Writing::Registration { id, incarnation } => {
                Answer::Registered(registered_epoch(image, id, incarnation))
            }
            Writing::Heartbeat(reply) => Answer::Heartbeat(reply),
            Writing::ProducerId(id) => {
                assert!(
                    id < image.producer_ids_reserved(),
                    "producer id {id} handed out unreserved (reserved below {})",
                    image.producer_ids_reserved()
                );
                Answer::ProducerId(id)
            }
            Writing::Timer => return,
        };
        self.actions.push(Action::Answer(answer));
    }

    fn not_committed(&mut self) {
        let now = self.now;
        let retry = self.config.retry_ms;
        let term = self.term_mut("NotCommitted");
        let writing = term
            .writing
            .take()
            .expect("NotCommitted with no write in flight");
        // A registration that did not commit leaves no session behind.
        let image = term.image.clone();
        term.sessions.sync(&image, now);
        if writing == Writing::Timer {
            term.retry_at_ms = Some(now.saturating_add(retry));
        }
    }

    /// The invariants stated in the module doc.
    pub fn check_invariants(&self) {
        assert!(
            self.next_producer_id >= 0,
            "producer id {}",
            self.next_producer_id
        );
        let Some(term) = &self.term else {
            return;
        };
        assert!(
            self.next_producer_id >= term.reserved_at_start,
            "term {}: producer id {} below the blocks reserved before it ({})",
            term.epoch,
            self.next_producer_id,
            term.reserved_at_start
        );
        if term.writing.is_none() {
            let brokers: Vec<i32> = term.image.brokers().map(|b| b.id).collect();
            let sessions: Vec<i32> = term.sessions.ids().collect();
            assert_eq!(
                sessions, brokers,
                "term {}: sessions != brokers",
                term.epoch
            );
        }
        assert!(
            self.actions.iter().all(|a| match a {
                Action::Propose(records) => !records.is_empty() && term.writing.is_some(),
                Action::Answer(_) => true,
            }),
            "a proposal without its write in flight: {:?}",
            self.actions
        );
        assert!(
            self.actions
                .iter()
                .filter(|a| matches!(a, Action::Propose(_)))
                .count()
                <= 1,
            "more than one write at a time"
        );
    }
}

#[cfg(test)]
mod tests;
