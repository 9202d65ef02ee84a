//! A simulated producer that behaves like librdkafka's: up to `max_in_flight` produce
//! requests pipelined on one connection, sequence numbers assigned when a batch is built, and
//! retries that resend every unanswered batch, in order, on a new connection while the old
//! connection's copies may still be on their way. That is what the broker's five-batch
//! deduplication window exists for.
//!
//! Giving up is librdkafka's too (`produce_errors.rs` holds its table): a batch is retried
//! until `delivery.timeout.ms` after it was produced (or `retries` attempts, when a scenario
//! sets them), each attempt bounded by `request.timeout.ms`, with exponential backoff between
//! `retry.backoff.ms` and `retry.backoff.max.ms`. Retriable errors (NOT_LEADER_OR_FOLLOWER,
//! NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, a broken connection, ...) are
//! retried; a permanent one (UNKNOWN_SERVER_ERROR, MESSAGE_TOO_LARGE, ...) fails the batch at
//! once, with its code, as the delivery report an application sees; the idempotent producer's
//! fatal errors (OUT_OF_ORDER_SEQUENCE_NUMBER at the head of the line, UNKNOWN_PRODUCER_ID on
//! a retry) fail every batch in flight and the application starts a new producer.
//!
//! Outcomes go to the history: `Invoke` when a batch is built, `Ack` with its offset, `Fail`
//! with the delivery report's code when the producer gives up (the batch may or may not be in
//! the log). After a failure an idempotent producer's sequence can no longer be trusted:
//! librdkafka bumps the epoch and renumbers the batches behind it; this producer fails them
//! instead (code `RENUMBERED`: no error an application sees, indeterminate) and the next
//! batch starts a new producer id (a new `session`).
//!
//! In a cluster (`bootstrap` not empty) a producer writes one partition and connects to its
//! leader, found in its cached leader map (`routing::Routes`): errors that say the leader may
//! have moved mark it stale, so the resend goes to whichever broker Metadata names then.
//! Errors after an append (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND) are retriable
//! too: with idempotence the new leader deduplicates; a batch given up on is indeterminate.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use weir::client::Client;
use weir::io::Io;
use weir::log::batch::BatchBuilder;

use crate::history::{value, Event, History};
use crate::produce_errors::{self as errors, Action};
use crate::routing::Routes;
use crate::workload::{connect, RunClock};

#[derive(Clone, Debug)]
pub struct ProducerSpec {
    pub id: u32,
    pub addr: SocketAddr,
    /// A cluster's brokers: when not empty, connect to the leader of `partition` (found
    /// through them) instead of `addr`.
    pub bootstrap: Vec<SocketAddr>,
    /// Write this partition only (in a cluster); else partition `batch mod partitions`.
    pub partition: Option<i32>,
    pub topic: String,
    pub partitions: i32,
    pub acks: i16,
    pub idempotent: bool,
    pub interval: Duration,
    pub batch_records: u32,
    /// `retries`: attempts after the first (librdkafka's default is unbounded).
    pub retries: u32,
    /// `request.timeout.ms`: one attempt's bound.
    pub timeout: Duration,
    /// `delivery.timeout.ms`: a batch's bound, from when it was produced.
    pub delivery_timeout: Duration,
    /// `retry.backoff.ms` and `retry.backoff.max.ms`.
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    /// `topic.metadata.refresh.interval.ms`: how long a cached leader is trusted.
    pub metadata_max_age: Duration,
    /// Requests kept in flight on the connection (1..=5 with idempotence).
    pub max_in_flight: u32,
    /// Stop starting new batches at this run time (ms).
    pub until_ms: u64,
}

/// Idempotent-producer identity: replaced (new id) whenever the sequence can't be trusted.
struct Identity {
    producer_id: i64,
    epoch: i16,
    sequences: Vec<i32>,
}

/// A batch built and not yet answered.
struct Pending {
    op: u64,
    partition: i32,
    /// Built once: every attempt resends the very same bytes (and sequence numbers).
    bytes: Bytes,
    /// Run time it was produced at: `delivery.timeout.ms` counts from here.
    produced_ms: u64,
    /// Sends so far.
    attempts: u32,
    /// The connection generation it was last sent on (`None`: not sent on the current one).
    sent_on: Option<u64>,
    /// The code of its last failed attempt (for a delivery report after retries run out).
    last_code: i16,
}

struct Producer {
    io: Io,
    spec: ProducerSpec,
    history: History,
    clock: RunClock,
    client: Option<Client>,
    /// Bumped on every new connection, so that batches know whether they were sent on it.
    generation: u64,
    identity: Option<Identity>,
    /// Identities so far (0 while not idempotent).
    session: u32,
    pending: VecDeque<Pending>,
    batch_number: u64,
    /// InitProducerId requests so far (which bootstrap broker to ask next).
    lookups: u64,
    /// The cached leader map (in a cluster).
    routes: Option<Routes>,
    /// Failed attempts in a row: the backoff's exponent; 0 after an answer.
    failures: u32,
    /// This identity retried a batch while later ones were in flight: a sequence error from
    /// now on may be a correct broker's (`errors::AFTER_RETRY_WITH_OTHERS_IN_FLIGHT`).
    retried_with_others: bool,
}

/// Bound on loop rounds: every round sends, receives or sleeps, so a run's simulated minutes
/// stay far below this; reaching it means a round that does none of these.
const MAX_ROUNDS: u64 = 10_000_000;

pub async fn run_producer(io: Io, spec: ProducerSpec, history: History, clock: RunClock) {
    assert!(spec.max_in_flight >= 1);
    assert!(!spec.idempotent || spec.max_in_flight <= 5);
    assert!(!spec.delivery_timeout.is_zero() && !spec.retry_backoff_max.is_zero());
    let routes = (!spec.bootstrap.is_empty()).then(|| {
        Routes::new(
            spec.bootstrap.clone(),
            spec.metadata_max_age,
            spec.id as u64,
        )
    });
    let mut p = Producer {
        io,
        spec,
        history,
        clock,
        client: None,
        generation: 0,
        identity: None,
        session: 0,
        pending: VecDeque::new(),
        batch_number: 0,
        lookups: 0,
        routes,
        failures: 0,
        retried_with_others: false,
    };
    let mut next_batch_ms = p.clock.now_ms();
    let mut rounds = 0u64;
    loop {
        rounds += 1;
        assert!(rounds <= MAX_ROUNDS, "producer {} spins", p.spec.id);
        let now = p.clock.now_ms();
        let producing = now < p.spec.until_ms;
        p.expire(now);
        if !producing && p.pending.is_empty() {
            return;
        }
        if !p.ready().await {
            if !producing {
                // Past the deadline and unable to reach the broker: the application purges
                // what is left as it stops.
                p.purge("stopped: broker unreachable at the deadline");
                return;
            }
            continue;
        }
        if !p.resend().await {
            continue;
        }
        // Top up the pipeline at the producer's rate.
        if producing && now >= next_batch_ms && p.pending.len() < p.spec.max_in_flight as usize {
            p.start_batch().await;
            next_batch_ms = next_batch_ms.max(now.saturating_sub(1_000)) + p.interval_ms();
            continue;
        }
        if p.pending.is_empty() {
            let wait = next_batch_ms.saturating_sub(now).max(1);
            p.io.clock.sleep(Duration::from_millis(wait)).await;
            continue;
        }
        if p.spec.acks == 0 {
            // Fire and forget: nothing comes back, so there is nothing to wait for.
            p.pending.clear();
            continue;
        }
        p.receive_front().await;
    }
}

impl Producer {
    fn interval_ms(&self) -> u64 {
        (self.spec.interval.as_millis() as u64).max(1)
    }

    /// Backs off before the next attempt: `retry.backoff.ms` doubled for every failure in a
    /// row, up to `retry.backoff.max.ms`.
    async fn backoff(&mut self) {
        let doubled = self
            .spec
            .retry_backoff
            .saturating_mul(1u32 << self.failures.min(16));
        self.failures += 1;
        let wait = doubled.min(self.spec.retry_backoff_max);
        self.io
            .clock
            .sleep(wait.max(Duration::from_millis(1)))
            .await;
    }

    /// Batches produced more than `delivery.timeout.ms` ago fail with `_MSG_TIMED_OUT`
    /// (possibly persisted: indeterminate). Batches are produced in order, so they are the
    /// oldest.
    fn expire(&mut self, now: u64) {
        let bound = self.spec.delivery_timeout.as_millis() as u64;
        while let Some(front) = self.pending.front() {
            if now < front.produced_ms + bound {
                return;
            }
            let waited = now - front.produced_ms;
            self.fail_front(
                errors::MSG_TIMED_OUT,
                format!(
                    "delivery.timeout.ms ({bound} ms) passed after {} attempts, {waited} ms \
                     after it was produced (last error {})",
                    front.attempts,
                    errors::name(front.last_code)
                ),
            );
        }
    }

    /// Connected, and with an identity if idempotent; false after a failed attempt (backed
    /// off already).
    async fn ready(&mut self) -> bool {
        if self.client.is_none() {
            let timeout = self.spec.timeout;
            let connected = match (self.spec.partition, self.routes.as_mut()) {
                (Some(partition), Some(routes)) => {
                    routes
                        .connect_leader(&self.io, &self.spec.topic, partition, timeout)
                        .await
                }
                _ => connect(&self.io, self.spec.addr, timeout).await,
            };
            match connected {
                Ok(c) => {
                    self.client = Some(c);
                    self.generation += 1;
                }
                Err(e) => {
                    if let Some(front) = self.pending.front_mut() {
                        front.last_code = errors::code(&e);
                    }
                    self.backoff().await;
                    return false;
                }
            }
        }
        if self.spec.idempotent && self.identity.is_none() {
            // A new identity only once nothing of the old one is in flight.
            assert!(self.pending.is_empty());
            let got = if self.spec.bootstrap.is_empty() {
                let c = self.client.as_mut().expect("connected above");
                c.init_producer_id().await
            } else {
                // As Kafka's producer does, InitProducerId goes to any broker (the next one
                // each attempt), not necessarily the partition's leader.
                self.lookups += 1;
                let at =
                    self.spec.bootstrap[(self.lookups % self.spec.bootstrap.len() as u64) as usize];
                match connect(&self.io, at, self.spec.timeout).await {
                    Ok(mut c) => c.init_producer_id().await,
                    Err(e) => Err(e),
                }
            };
            match got {
                Ok((producer_id, epoch)) => {
                    self.identity = Some(Identity {
                        producer_id,
                        epoch,
                        sequences: vec![0; self.spec.partitions as usize],
                    });
                    self.session += 1;
                    self.retried_with_others = false;
                }
                Err(_) => {
                    self.client = None;
                    self.backoff().await;
                    return false;
                }
            }
        }
        true
    }

    /// Sends, in order, every pending batch not yet sent on this connection.
    async fn resend(&mut self) -> bool {
        for i in 0..self.pending.len() {
            if self.pending[i].sent_on == Some(self.generation) {
                continue;
            }
            if self.pending[i].attempts > self.spec.retries {
                // Retries run out: the delivery report carries the last error. Counted from
                // the oldest batch, whose report comes first (a later one has been sent at
                // most as often).
                let (code, attempts) = (self.pending[0].last_code, self.pending[0].attempts);
                let why = format!("retries exhausted after {attempts} attempts");
                self.fail_front(code, why);
                return false;
            }
            if !self.send(i).await {
                return false;
            }
        }
        true
    }

    async fn send(&mut self, i: usize) -> bool {
        let c = self.client.as_mut().expect("ready");
        let b = &mut self.pending[i];
        b.attempts += 1;
        b.sent_on = Some(self.generation);
        match c
            .send_produce(
                &self.spec.topic,
                b.partition,
                b.bytes.clone(),
                self.spec.acks,
            )
            .await
        {
            Ok(()) => true,
            Err(e) => {
                b.last_code = errors::code(&e);
                let partition = b.partition;
                let op = b.op;
                self.history.record(
                    self.clock.now_ms(),
                    Event::Note(format!(
                        "producer {}: op {op} not sent ({e}), reconnecting",
                        self.spec.id
                    )),
                );
                self.lost_connection(partition);
                self.backoff().await;
                false
            }
        }
    }

    /// The connection is gone (or its answers are no longer wanted); the leader it went to
    /// may have moved.
    fn lost_connection(&mut self, partition: i32) {
        self.client = None;
        if let Some(routes) = self.routes.as_mut() {
            routes.stale(&self.spec.topic, partition);
        }
    }

    async fn start_batch(&mut self) {
        let number = self.batch_number;
        self.batch_number += 1;
        let partition = self
            .spec
            .partition
            .unwrap_or((number % self.spec.partitions as u64) as i32);
        let op = ((self.spec.id as u64) << 40) | number;
        let values: Vec<String> = (0..self.spec.batch_records)
            .map(|r| value(self.spec.id, number, r))
            .collect();
        let now = self.io.clock.wall_ms();
        let mut builder = BatchBuilder::new(now);
        for v in &values {
            builder.push(None, Some(v.as_bytes()), now);
        }
        let (pid, epoch, seq) = match self.identity.as_mut() {
            Some(id) => {
                let seq = &mut id.sequences[partition as usize];
                let first = *seq;
                *seq = seq.wrapping_add(self.spec.batch_records as i32) & i32::MAX;
                (id.producer_id, id.epoch, first)
            }
            None => (-1, -1, -1),
        };
        let bytes = Bytes::from(builder.finish(pid, epoch, seq));
        let produced_ms = self.clock.now_ms();
        self.history.record(
            produced_ms,
            Event::Invoke {
                op,
                partition,
                session: if self.spec.idempotent {
                    self.session
                } else {
                    0
                },
                values,
            },
        );
        self.pending.push_back(Pending {
            op,
            partition,
            bytes,
            produced_ms,
            attempts: 0,
            sent_on: None,
            last_code: 0,
        });
        let last = self.pending.len() - 1;
        self.send(last).await;
    }

    /// Waits for the answer to the oldest batch in flight and acts on it.
    async fn receive_front(&mut self) {
        let c = self.client.as_mut().expect("ready");
        match c.receive_produce().await {
            Ok(offset) => {
                self.failures = 0;
                let b = self.pending.pop_front().expect("something in flight");
                self.history
                    .record(self.clock.now_ms(), Event::Ack { op: b.op, offset });
            }
            Err(e) => {
                let code = errors::code(&e);
                let front = self.pending.front_mut().expect("something in flight");
                front.last_code = code;
                let first_attempt = front.attempts <= 1;
                let partition = front.partition;
                // Whatever the error, the answers still due on this connection belong to
                // requests we are about to resend (or fail): start afresh, as clients do.
                self.client = None;
                let action = errors::action(code, self.spec.idempotent, first_attempt);
                if let Action::Retry { .. } = action {
                    self.retried_with_others |= self.pending.len() > 1;
                    // librdkafka logs a retry at debug level; the trace shows it.
                    let op = self.pending[0].op;
                    self.history.record(
                        self.clock.now_ms(),
                        Event::Note(format!(
                            "producer {}: op {op} retried after {e}",
                            self.spec.id
                        )),
                    );
                }
                match action {
                    Action::Retry { refresh } => {
                        if refresh {
                            self.lost_connection(partition);
                        }
                        self.backoff().await;
                    }
                    Action::Permanent => self.fail_front(code, e.to_string()),
                    Action::Fatal if self.retried_with_others => self.fail_fatal(
                        code,
                        format!("{e} ({})", errors::AFTER_RETRY_WITH_OTHERS_IN_FLIGHT),
                    ),
                    Action::Fatal => self.fail_fatal(code, e.to_string()),
                    Action::BumpAndRetry => {
                        // librdkafka bumps the epoch and retries under it; the bytes carry
                        // the old identity, so here the batch is given up (it was not
                        // appended) and the next ones start a new producer id.
                        self.fail_front(errors::RENUMBERED, e.to_string());
                    }
                }
            }
        }
    }

    /// The oldest batch fails with `code`, the delivery report the application sees. With
    /// idempotence every other batch in flight fails too (their sequence numbers follow a
    /// batch in doubt: librdkafka renumbers them under a bumped epoch) and the identity is
    /// dropped. The connection's answers are no longer wanted.
    fn fail_front(&mut self, code: i16, error: String) {
        let Some(b) = self.pending.pop_front() else {
            return;
        };
        self.client = None;
        self.record_fail(b.op, code, error);
        if self.spec.idempotent {
            for b in std::mem::take(&mut self.pending) {
                self.record_fail(
                    b.op,
                    errors::RENUMBERED,
                    "renumbered after an earlier batch failed".into(),
                );
            }
            self.identity = None;
        }
    }

    /// A fatal error of the idempotent producer: the oldest batch fails with it, every other
    /// one with `_FATAL`, and the application starts a new producer.
    fn fail_fatal(&mut self, code: i16, error: String) {
        self.client = None;
        if let Some(b) = self.pending.pop_front() {
            self.record_fail(b.op, code, error);
        }
        for b in std::mem::take(&mut self.pending) {
            self.record_fail(
                b.op,
                errors::FATAL,
                "the producer raised a fatal error".into(),
            );
        }
        self.identity = None;
    }

    /// The application stops: what is left is purged.
    fn purge(&mut self, why: &str) {
        for b in std::mem::take(&mut self.pending) {
            self.record_fail(b.op, errors::PURGE_QUEUE, why.to_string());
        }
    }

    fn record_fail(&self, op: u64, code: i16, error: String) {
        self.history
            .record(self.clock.now_ms(), Event::Fail { op, code, error });
    }
}
