//! A simulated producer that behaves like a Kafka client: up to `max_in_flight` produce
//! requests pipelined on one connection, sequence numbers assigned when a batch is built, and
//! retries that resend every unanswered batch, in order, on a new connection while the old
//! connection's copies may still be on their way. That is what the broker's five-batch
//! deduplication window exists for.
//!
//! Outcomes go to the history: `Invoke` when a batch is built, `Ack` with its offset, `Fail`
//! when the producer gives up (the batch may or may not be in the log). After a failure an
//! idempotent producer's sequence can no longer be trusted, so every batch still in flight
//! fails too and the next batch starts a new producer id (a new `session`).
//!
//! In a cluster (`bootstrap` not empty) a producer writes one partition and connects to its
//! leader, found by Metadata (`routing.rs`); NOT_LEADER_OR_FOLLOWER and the other retriable
//! errors drop the connection, so the resend goes to whichever broker leads then. Errors after
//! an append (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND) are retriable too: with
//! idempotence the new leader deduplicates; a batch given up on is indeterminate.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use weir::client::{Client, ClientError};
use weir::io::Io;
use weir::log::batch::BatchBuilder;

use crate::history::{value, Event, History};
use crate::workload::{connect, RunClock, RECONNECT_BACKOFF};

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
    pub retries: u32,
    pub timeout: Duration,
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
    /// Sends so far.
    attempts: u32,
    /// The connection generation it was last sent on (`None`: not sent on the current one).
    sent_on: Option<u64>,
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
    /// Leader look-ups so far (which bootstrap broker to ask next).
    lookups: u64,
}

/// Bound on loop rounds: every round sends, receives or sleeps, so a run's simulated minutes
/// stay far below this; reaching it means a round that does none of these.
const MAX_ROUNDS: u64 = 10_000_000;

pub async fn run_producer(io: Io, spec: ProducerSpec, history: History, clock: RunClock) {
    assert!(spec.max_in_flight >= 1);
    assert!(!spec.idempotent || spec.max_in_flight <= 5);
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
    };
    let mut next_batch_ms = p.clock.now_ms();
    let mut rounds = 0u64;
    loop {
        rounds += 1;
        assert!(rounds <= MAX_ROUNDS, "producer {} spins", p.spec.id);
        let now = p.clock.now_ms();
        let producing = now < p.spec.until_ms;
        if !producing && p.pending.is_empty() {
            return;
        }
        if !p.ready().await {
            if !producing {
                // Past the deadline and unable to reach the broker: what is left fails.
                p.fail_all("stopped: broker unreachable at the deadline".into());
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

    /// Connected, and with an identity if idempotent; false after a failed attempt (backed
    /// off already).
    async fn ready(&mut self) -> bool {
        if self.client.is_none() {
            let connected = match self.spec.partition {
                Some(partition) if !self.spec.bootstrap.is_empty() => {
                    self.lookups += 1;
                    crate::routing::connect_leader(
                        &self.io,
                        &self.spec.bootstrap,
                        self.lookups,
                        &self.spec.topic,
                        partition,
                        self.spec.timeout,
                    )
                    .await
                }
                _ => connect(&self.io, self.spec.addr, self.spec.timeout).await,
            };
            match connected {
                Ok(c) => {
                    self.client = Some(c);
                    self.generation += 1;
                }
                Err(e) => {
                    self.count_failed_attempt(format!("connect: {e}"));
                    self.io.clock.sleep(RECONNECT_BACKOFF).await;
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
                }
                Err(_) => {
                    self.client = None;
                    self.io.clock.sleep(RECONNECT_BACKOFF).await;
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
                self.fail_at(i, "retries exhausted".into());
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
            Err(_) => {
                self.client = None;
                self.io.clock.sleep(RECONNECT_BACKOFF).await;
                false
            }
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
        self.history.record(
            self.clock.now_ms(),
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
            attempts: 0,
            sent_on: None,
        });
        let last = self.pending.len() - 1;
        self.send(last).await;
    }

    /// Waits for the answer to the oldest batch in flight and acts on it.
    async fn receive_front(&mut self) {
        let c = self.client.as_mut().expect("ready");
        match c.receive_produce().await {
            Ok(offset) => {
                let b = self.pending.pop_front().expect("something in flight");
                self.history
                    .record(self.clock.now_ms(), Event::Ack { op: b.op, offset });
            }
            Err(e) => {
                let sequence_broken = matches!(
                    e,
                    ClientError::Kafka(
                        ResponseError::OutOfOrderSequenceNumber
                            | ResponseError::InvalidProducerEpoch
                            | ResponseError::UnknownProducerId,
                        _
                    )
                );
                // Whatever the error, the answers still due on this connection belong to
                // requests we are about to resend (or fail): start afresh, as clients do.
                self.client = None;
                if sequence_broken || !e.is_retriable() {
                    self.fail_at(0, e.to_string());
                } else {
                    self.io.clock.sleep(RECONNECT_BACKOFF).await;
                }
            }
        }
    }

    /// A connection attempt failed: it counts against the retries of the oldest batch.
    fn count_failed_attempt(&mut self, error: String) {
        if let Some(front) = self.pending.front_mut() {
            front.attempts += 1;
            if front.attempts > self.spec.retries {
                self.fail_at(0, error);
            }
        }
    }

    /// Batch `i` failed. With idempotence, every other batch in flight fails too (their
    /// sequence numbers follow or precede a batch in doubt) and the identity is dropped.
    fn fail_at(&mut self, i: usize, error: String) {
        if self.spec.idempotent {
            self.fail_all(error);
            self.identity = None;
        } else if let Some(b) = self.pending.remove(i) {
            self.history
                .record(self.clock.now_ms(), Event::Fail { op: b.op, error });
        }
    }

    fn fail_all(&mut self, error: String) {
        for b in std::mem::take(&mut self.pending) {
            self.history.record(
                self.clock.now_ms(),
                Event::Fail {
                    op: b.op,
                    error: error.clone(),
                },
            );
        }
    }
}
