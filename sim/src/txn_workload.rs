//! The transactional workload (issue 19): transactional producers that run KIP-98's client
//! flow by hand — FindCoordinator(transaction) → InitProducerId → AddPartitionsToTxn →
//! Produce (transactional batches, to each partition's leader) → EndTxn commit or abort —
//! and one `read_committed` consumer that reads every partition live (dropping aborted
//! transactions as Kafka clients do, from the Fetch's aborted list and the markers) and, after
//! healing and the drain, once more in full. Everything goes into the history as
//! [`TxnEvent`]s for `txn_check`. A producer that cannot finish a transaction abandons it and
//! initializes again, which fences it and has the coordinator abort it. Every call is bounded
//! by a time-out and every loop by the run's deadline. Its own topic, so the plain workload's
//! checks are untouched.
//!
//! With `version = 2` the clients speak transactions v2 as Java 4.x's `TransactionManager`
//! does once ApiVersions says `transaction.version` 2 is finalized: no AddPartitionsToTxn
//! (Produce v12 carries the transactional id and the leader adds the partition), EndTxn v5,
//! whose answer names the producer id and epoch the next transaction uses, sequences starting
//! again at 0. With `end_txn_hold_ratio` the network holds an EndTxn's first send
//! (KAFKA-17754's delayed EndTxn): the client times out, retries on a new connection, goes on,
//! and the held request reaches the coordinator once the next transaction has written.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::oneshot;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, FetchRequest,
    FindCoordinatorRequest, GroupId, InitProducerIdRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;
use weir::client::{produce_offsets, produce_request, Client, ClientError};
use weir::io::Io;
use weir::log::batch::{self, BatchBuilder};

use crate::history::{Event, History};
use crate::routing::{Routes, DEFAULT_MAX_AGE};
use crate::scenario::{Scenario, Transactions};
use crate::txn_check::{value, TxnEvent};
use crate::workload::{connect, RunClock, RECONNECT_BACKOFF};

pub const TOPIC: &str = "txn-workload";
const FIND_COORDINATOR_VERSION: i16 = 3;
const INIT_PRODUCER_ID_VERSION: i16 = 1;
/// InitProducerId naming the producer id and epoch to go on from (KIP-360, v3+), as Java 4.x
/// sends it.
const INIT_PRODUCER_ID_RESUME_VERSION: i16 = 5;
const ADD_PARTITIONS_VERSION: i16 = 1;
const END_TXN_VERSION: i16 = 1;
/// EndTxn whose answer carries the bumped epoch (transactions v2).
const END_TXN_V2_VERSION: i16 = 5;
/// Produce as the v1 clients send it, and v12: transactions v2's implicit add.
const PRODUCE_VERSION: i16 = 7;
const PRODUCE_V2_VERSION: i16 = 12;
const ADD_OFFSETS_VERSION: i16 = 1;
/// Fetch with isolation levels and aborted transactions, without topic ids.
const FETCH_VERSION: i16 = 11;
/// Attempts at one step (each after a short pause) before the transaction is abandoned.
pub(crate) const ATTEMPTS: u32 = 20;
pub(crate) const PAUSE: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct TxnSpec {
    pub txns: Transactions,
    pub bootstrap: Vec<SocketAddr>,
    pub replication_factor: i16,
    pub timeout: Duration,
    /// Producers stop starting transactions here; the live reader stops too.
    pub until_ms: u64,
    /// The final read starts here (after healing and the drain).
    pub final_at_ms: u64,
}

impl TxnSpec {
    /// A scenario's transactional workload (`None` without `[transactions]`) against
    /// `bootstrap`: producers stop starting transactions at `until_ms`, the final read starts
    /// after the drain.
    pub fn of(scenario: &Scenario, bootstrap: Vec<SocketAddr>, until_ms: u64) -> Option<TxnSpec> {
        let t = scenario.transactions.as_ref()?;
        Some(TxnSpec {
            txns: t.clone(),
            bootstrap,
            replication_factor: scenario.topic.replication_factor,
            timeout: Duration::from_millis(scenario.producers.request_timeout_ms),
            until_ms,
            final_at_ms: until_ms + t.drain_secs * 1000,
        })
    }

    /// The transactional clients' request time-out at the coordinators
    /// (`transactions.request_timeout_ms`); connections keep `timeout`.
    pub fn coordinator_timeout(&self) -> Duration {
        Duration::from_millis(self.txns.request_timeout_ms)
    }
}

pub(crate) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub(crate) fn kafka(code: i16) -> Result<(), ClientError> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(e) => Err(ClientError::Kafka(e, String::new())),
    }
}

/// Errors worth the same step again after a pause (with the coordinator or leader found again
/// when `moved`).
pub(crate) fn retriable(e: &ClientError) -> bool {
    match e {
        ClientError::Kafka(k, _) => matches!(
            k,
            ResponseError::ConcurrentTransactions
                | ResponseError::CoordinatorLoadInProgress
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::NotCoordinator
                | ResponseError::NotLeaderOrFollower
                | ResponseError::NotEnoughReplicas
                | ResponseError::NotEnoughReplicasAfterAppend
                | ResponseError::RequestTimedOut
                | ResponseError::UnknownTopicOrPartition
                | ResponseError::LeaderNotAvailable
        ),
        _ => true,
    }
}

/// Makes the workload's topic (any broker; already made is fine).
pub(crate) async fn ensure_topic(
    io: &Io,
    spec: &TxnSpec,
    clock: &RunClock,
    topic: &str,
    partitions: i32,
) {
    let mut attempt = 0usize;
    while clock.now_ms() < spec.until_ms {
        let addr = spec.bootstrap[attempt % spec.bootstrap.len()];
        attempt += 1;
        let made = async {
            let mut c = connect(io, addr, spec.timeout).await?;
            c.create_topic(topic, partitions, spec.replication_factor, &BTreeMap::new())
                .await
        };
        match io.timeout(spec.timeout, made).await {
            Some(Ok(())) | Some(Err(ClientError::Kafka(ResponseError::TopicAlreadyExists, _))) => {
                return
            }
            _ => tokio::time::sleep(PAUSE).await,
        }
    }
}

/// A request to the transaction coordinator.
pub(crate) enum Call {
    Init,
    /// AddPartitionsToTxn of partitions of the producer's topic.
    Add(Vec<i32>),
    /// AddOffsetsToTxn of a group (sendOffsetsToTransaction's first half).
    AddOffsets(String),
    End(bool),
}

/// A transactional producer of one transactional id, writing to one topic (the workload's
/// producers and the consume-transform-produce tasks of `txn_pipeline`).
pub(crate) struct Producer {
    pub io: Io,
    pub spec: TxnSpec,
    pub id: u32,
    pub transactional_id: String,
    pub topic: &'static str,
    pub history: History,
    pub clock: RunClock,
    pub attempt: u64,
    pub coordinator: Option<Client>,
    pub leaders: BTreeMap<i32, Client>,
    /// The cached leader map (as the producers', `routing::Routes`): kept across a failure
    /// (the same client instance), new after a crash.
    pub routes: Routes,
    /// (producer id, epoch) and the next sequence per partition at that epoch.
    pub producer: Option<(i64, i16)>,
    pub sequences: BTreeMap<i32, i32>,
    /// Speaking transactions v2 (asked for and finalized by the cluster), since the last init.
    pub v2: bool,
    /// The transaction in progress (its number in the history).
    pub txn: u64,
    /// The producer id and epoch a v2 client initializes again from after a failure (KIP-360:
    /// InitProducerId v5 names them, so the coordinator bumps that epoch rather than hand the
    /// id to whoever asks); `None` after a crash, which is a new producer.
    resume: Option<(i64, i16)>,
    coordinator_addr: Option<SocketAddr>,
    /// An EndTxn held in the network: its transaction, and the release (with the transaction
    /// whose acknowledged write lets it through).
    held: Option<(u64, oneshot::Sender<u64>)>,
}

impl Producer {
    pub fn new(
        io: Io,
        spec: TxnSpec,
        id: u32,
        transactional_id: String,
        topic: &'static str,
        history: History,
        clock: RunClock,
    ) -> Producer {
        let routes = Routes::new(spec.bootstrap.clone(), DEFAULT_MAX_AGE, id as u64);
        Producer {
            io,
            spec,
            id,
            transactional_id,
            topic,
            history,
            clock,
            attempt: id as u64,
            coordinator: None,
            leaders: BTreeMap::new(),
            routes,
            producer: None,
            sequences: BTreeMap::new(),
            v2: false,
            txn: 0,
            resume: None,
            coordinator_addr: None,
            held: None,
        }
    }

    /// Forgets every connection and the producer id (after a failure or a crash): the next
    /// InitProducerId fences the old epoch and has the coordinator abort what it left open.
    pub fn reset(&mut self) {
        if self.v2 {
            self.resume = self.producer.or(self.resume);
        }
        self.producer = None;
        self.coordinator = None;
        self.leaders.clear();
    }

    /// As [`Self::reset`], after a crash: a new producer, which knows no producer id.
    pub fn forget(&mut self) {
        self.reset();
        self.resume = None;
        self.routes = Routes::new(self.spec.bootstrap.clone(), DEFAULT_MAX_AGE, self.attempt);
    }

    pub fn record(&self, e: TxnEvent) {
        self.history.record(self.clock.now_ms(), Event::Txn(e));
    }

    fn txn_id(&self) -> TransactionalId {
        TransactionalId(s(&self.transactional_id))
    }

    /// A connection to the coordinator of our transactional id.
    async fn coordinator(&mut self) -> Result<&mut Client, ClientError> {
        if self.coordinator.is_none() {
            self.attempt += 1;
            let via =
                self.spec.bootstrap[(self.attempt % self.spec.bootstrap.len() as u64) as usize];
            let mut c = connect(&self.io, via, self.spec.timeout).await?;
            let request = FindCoordinatorRequest::default()
                .with_key(s(&self.transactional_id))
                .with_key_type(1);
            let r = c
                .connection()
                .call(&request, FIND_COORDINATOR_VERSION)
                .await?;
            kafka(r.error_code)?;
            let addr = self
                .io
                .net
                .resolve(&r.host.to_string(), r.port as u16)
                .await?;
            self.coordinator = Some(connect(&self.io, addr, self.spec.timeout).await?);
            self.coordinator_addr = Some(addr);
        }
        Ok(self.coordinator.as_mut().expect("connected above"))
    }

    /// The EndTxn this producer sends now, and its version.
    fn end_txn_request(&self, commit: bool) -> (EndTxnRequest, i16) {
        let (pid, epoch) = self.producer.unwrap_or((-1, -1));
        let request = EndTxnRequest::default()
            .with_transactional_id(self.txn_id())
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit);
        let version = if self.v2 {
            END_TXN_V2_VERSION
        } else {
            END_TXN_VERSION
        };
        (request, version)
    }

    /// The InitProducerId this producer sends now, and its version: v5 naming the producer id
    /// and epoch to go on from after a failure of a v2 client (KIP-360), else v1 as a new
    /// producer.
    fn init_request(&self) -> (InitProducerIdRequest, i16) {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(self.txn_id()))
            .with_transaction_timeout_ms(self.spec.txns.transaction_timeout_ms);
        match self.resume {
            Some((pid, epoch)) => (
                request
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch),
                INIT_PRODUCER_ID_RESUME_VERSION,
            ),
            None => (request, INIT_PRODUCER_ID_VERSION),
        }
    }

    /// One coordinator request, answered: the producer id and epoch for InitProducerId, and
    /// for EndTxn under v2 (the ones the next transaction uses).
    async fn ask(&mut self, call: &Call) -> Result<Option<(i64, i16)>, ClientError> {
        let id = self.txn_id();
        let (pid, epoch) = self.producer.unwrap_or((-1, -1));
        let end = match call {
            Call::End(commit) => Some(self.end_txn_request(*commit)),
            _ => None,
        };
        let init = matches!(call, Call::Init).then(|| self.init_request());
        let v2 = self.v2;
        let topic = self.topic;
        let c = self.coordinator().await?.connection();
        match call {
            Call::Init => {
                let (request, version) = init.expect("built above");
                let r = c.call(&request, version).await?;
                kafka(r.error_code)?;
                Ok(Some((r.producer_id.0, r.producer_epoch)))
            }
            Call::Add(partitions) => {
                let request = AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(id)
                    .with_v3_and_below_producer_id(ProducerId(pid))
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(s(topic)))
                        .with_partitions(partitions.clone())]);
                let r = c.call(&request, ADD_PARTITIONS_VERSION).await?;
                for t in &r.results_by_topic_v3_and_below {
                    for p in &t.results_by_partition {
                        kafka(p.partition_error_code)?;
                    }
                }
                Ok(None)
            }
            Call::AddOffsets(group) => {
                let request = AddOffsetsToTxnRequest::default()
                    .with_transactional_id(id)
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_group_id(GroupId(s(group)));
                let r = c.call(&request, ADD_OFFSETS_VERSION).await?;
                kafka(r.error_code)?;
                Ok(None)
            }
            Call::End(_) => {
                let (request, version) = end.expect("built above");
                let r = c.call(&request, version).await?;
                kafka(r.error_code)?;
                Ok((v2 && r.producer_id.0 >= 0).then_some((r.producer_id.0, r.producer_epoch)))
            }
        }
    }

    /// Runs `call` at the coordinator until it succeeds or fails for good (finding the
    /// coordinator again when it moved).
    pub async fn at_coordinator(&mut self, call: Call) -> Result<Option<(i64, i16)>, ClientError> {
        let mut last = ClientError::Timeout;
        for attempt in 0..ATTEMPTS {
            if self.clock.now_ms() > self.spec.final_at_ms {
                break;
            }
            if let (0, Call::End(commit)) = (attempt, &call) {
                if self.hold_end_txn(*commit).await {
                    // No answer within the request time-out: the connection is dropped and
                    // the request sent again, as Java's NetworkClient and TransactionManager do.
                    self.coordinator = None;
                    tokio::time::sleep(PAUSE).await;
                    continue;
                }
            }
            let timeout = self.spec.coordinator_timeout();
            let io = self.io.clone();
            let result = io
                .timeout(timeout, self.ask(&call))
                .await
                .unwrap_or(Err(ClientError::Timeout));
            match result {
                Ok(v) => return Ok(v),
                Err(e) if retriable(&e) => {
                    if !matches!(
                        e,
                        ClientError::Kafka(ResponseError::ConcurrentTransactions, _)
                            | ClientError::Kafka(ResponseError::CoordinatorLoadInProgress, _)
                    ) {
                        self.coordinator = None;
                    }
                    last = e;
                    tokio::time::sleep(PAUSE).await;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// With `end_txn_hold_ratio`, holds this EndTxn's first send in the network (KAFKA-17754's
    /// delayed EndTxn) and waits the request time-out for an answer that cannot come; `false`:
    /// sent as usual. The held request travels on a connection of its own, opened now, and
    /// reaches the coordinator once the producer's next transaction has written a record (the
    /// moment it can do the most harm) or after `end_txn_hold_max_ms`; its answer goes into
    /// the history ([`TxnEvent::LateEnd`]).
    async fn hold_end_txn(&mut self, commit: bool) -> bool {
        let ratio = self.spec.txns.end_txn_hold_ratio;
        if ratio <= 0.0 || self.held.is_some() || !madsim::rand::thread_rng().gen_bool(ratio) {
            return false;
        }
        let timeout = self.spec.timeout;
        let io = self.io.clone();
        if !matches!(io.timeout(timeout, self.coordinator()).await, Some(Ok(_))) {
            return false;
        }
        let Some(addr) = self.coordinator_addr else {
            return false;
        };
        let (request, version) = self.end_txn_request(commit);
        let (producer_id, epoch) = self.producer.unwrap_or((-1, -1));
        let (release, released) = oneshot::channel();
        self.held = Some((self.txn, release));
        let (history, clock, producer, txn) = (self.history.clone(), self.clock, self.id, self.txn);
        let hold_max = Duration::from_millis(self.spec.txns.end_txn_hold_max_ms);
        let late = io.clone();
        io.spawn(async move {
            let io = late;
            let client = connect(&io, addr, timeout).await;
            let during = io.timeout(hold_max, released).await.and_then(|r| r.ok());
            let released_ms = clock.now_ms();
            let answer = match client {
                Ok(mut c) => io
                    .timeout(timeout, c.connection().call(&request, version))
                    .await
                    .unwrap_or(Err(ClientError::Timeout))
                    .and_then(|r| {
                        kafka(r.error_code)?;
                        Ok((r.producer_id.0 >= 0).then_some((r.producer_id.0, r.producer_epoch)))
                    }),
                Err(e) => Err(e),
            };
            history.record(
                clock.now_ms(),
                Event::Txn(TxnEvent::LateEnd {
                    producer,
                    txn,
                    commit,
                    producer_id,
                    epoch,
                    during,
                    released_ms,
                    answered: answer.as_ref().ok().copied().flatten(),
                    error: answer.err().map(|e| e.to_string()),
                }),
            );
        });
        let wait = self
            .spec
            .txns
            .end_txn_timeout_ms
            .map_or(timeout, Duration::from_millis);
        tokio::time::sleep(wait).await;
        true
    }

    pub async fn init(&mut self) -> Result<(), ClientError> {
        self.producer = None;
        let resumed = self.resume.is_some();
        let answer = match self.at_coordinator(Call::Init).await {
            // The epoch moved on without us (an answer lost, a time-out's abort): as Java's
            // application does with a fenced producer, start again as a new one.
            Err(ClientError::Kafka(
                ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch,
                _,
            )) if resumed => {
                self.resume = None;
                self.at_coordinator(Call::Init).await?
            }
            answer => answer?,
        };
        let (pid, epoch) = answer.expect("InitProducerId answers an id");
        let resumed = resumed && self.resume.is_some();
        self.resume = None;
        // Java 4.x speaks v2 only once ApiVersions says `transaction.version` 2 is finalized.
        self.v2 = self.spec.txns.version >= 2 && self.v2_finalized().await?;
        self.producer = Some((pid, epoch));
        self.sequences.clear();
        self.record(TxnEvent::Init {
            producer: self.id,
            producer_id: pid,
            epoch,
            v2: self.v2,
            resumed,
        });
        Ok(())
    }

    /// Whether the coordinator's ApiVersions finalizes `transaction.version` 2 or more.
    async fn v2_finalized(&mut self) -> Result<bool, ClientError> {
        let io = self.io.clone();
        let timeout = self.spec.timeout;
        let asked = async {
            let features = self.coordinator().await?.describe_features().await?;
            Ok::<_, ClientError>(
                features
                    .iter()
                    .any(|f| f.name == "transaction.version" && f.finalized >= 2),
            )
        };
        let answer = io.timeout(timeout, asked).await;
        let answer = answer.unwrap_or(Err(ClientError::Timeout));
        if answer.is_err() {
            self.coordinator = None;
        }
        answer
    }

    /// Ends the transaction in progress (`txn`): EndTxn, and under v2 the producer id and
    /// epoch it answers for the next transaction, sequences from 0 (Java's
    /// `resetSequenceNumbers`).
    pub async fn end(&mut self, commit: bool) -> Result<(), ClientError> {
        let next = self.at_coordinator(Call::End(commit)).await?;
        self.ended(next);
        self.record(TxnEvent::Ended {
            producer: self.id,
            txn: self.txn,
            commit,
        });
        Ok(())
    }

    /// EndTxn answered: under v2 the producer id and epoch `next` it names are the next
    /// transaction's (a new id at epoch 0 once the old epoch is exhausted), sequences from 0.
    fn ended(&mut self, next: Option<(i64, i16)>) {
        if let Some(next) = next {
            self.producer = Some(next);
            self.sequences.clear();
        }
    }

    /// One transaction: add its partitions, write one record to each, end it.
    async fn transaction(
        &mut self,
        n: u64,
        partitions: &[i32],
        commit: bool,
    ) -> Result<(), ClientError> {
        self.txn = n;
        if !self.v2 {
            self.at_coordinator(Call::Add(partitions.to_vec())).await?;
        }
        for &p in partitions {
            let v = value(self.id, n, p);
            self.record(TxnEvent::Send {
                producer: self.id,
                txn: n,
                partition: p,
                value: v.clone(),
            });
            self.produce(p, &v).await?;
        }
        self.end(commit).await
    }

    /// One transactional record to `partition`'s leader, retried with the same sequence.
    pub async fn produce(&mut self, partition: i32, v: &str) -> Result<(), ClientError> {
        let (pid, epoch) = self.producer.expect("initialized");
        let sequence = *self.sequences.get(&partition).unwrap_or(&0);
        let mut b = BatchBuilder::new(self.clock.now_ms() as i64);
        b.push(None, Some(v.as_bytes()), self.clock.now_ms() as i64);
        let mut records = b.finish(pid, epoch, sequence);
        records[21..23].copy_from_slice(&0x10i16.to_be_bytes()); // transactional
        let crc = batch::compute_crc(&records);
        records[17..21].copy_from_slice(&crc.to_be_bytes());
        let records = Bytes::from(records);
        let request = produce_request(self.topic, &[(partition, records)], -1, self.spec.timeout)
            .with_transactional_id(Some(self.txn_id()));
        let version = if self.v2 {
            PRODUCE_V2_VERSION
        } else {
            PRODUCE_VERSION
        };
        let mut last = ClientError::Timeout;
        for _ in 0..ATTEMPTS {
            if self.clock.now_ms() > self.spec.final_at_ms {
                break;
            }
            if !self.leaders.contains_key(&partition) {
                match self
                    .routes
                    .connect_leader(&self.io, self.topic, partition, self.spec.timeout)
                    .await
                {
                    Ok(c) => {
                        self.leaders.insert(partition, c);
                    }
                    Err(e) => {
                        last = e;
                        tokio::time::sleep(PAUSE).await;
                        continue;
                    }
                }
            }
            let c = self.leaders.get_mut(&partition).expect("connected above");
            let sent = self
                .io
                .timeout(self.spec.timeout, c.connection().call(&request, version))
                .await
                .unwrap_or(Err(ClientError::Timeout))
                .and_then(|r| produce_offsets(&r));
            match sent {
                Ok(_) => {
                    self.sequences.insert(partition, sequence + 1);
                    // A held EndTxn of an earlier transaction goes on its way now.
                    if self.held.as_ref().is_some_and(|(t, _)| *t < self.txn) {
                        let (_, release) = self.held.take().expect("checked");
                        let _ = release.send(self.txn);
                    }
                    return Ok(());
                }
                Err(e) if retriable(&e) => {
                    self.leaders.remove(&partition);
                    self.routes.stale(self.topic, partition);
                    last = e;
                    tokio::time::sleep(PAUSE).await;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}

pub async fn run_producer(io: Io, spec: TxnSpec, id: u32, history: History, clock: RunClock) {
    ensure_topic(&io, &spec, &clock, TOPIC, spec.txns.partitions).await;
    let mut p = Producer::new(io, spec, id, format!("txn-{id}"), TOPIC, history, clock);
    let interval = Duration::from_millis(p.spec.txns.interval_ms);
    let mut n = 0u64;
    while p.clock.now_ms() < p.spec.until_ms {
        if p.producer.is_none() {
            if p.init().await.is_err() {
                tokio::time::sleep(RECONNECT_BACKOFF).await;
            }
            continue;
        }
        n += 1;
        let (partitions, commit) = {
            let mut rng = madsim::rand::thread_rng();
            let total = p.spec.txns.partitions;
            let k = rng.gen_range(1..=p.spec.txns.partitions_per_txn.min(total as u32)) as usize;
            let mut chosen = BTreeSet::new();
            while chosen.len() < k {
                chosen.insert(rng.gen_range(0..total));
            }
            let commit = !rng.gen_bool(p.spec.txns.abort_ratio);
            (chosen.into_iter().collect::<Vec<i32>>(), commit)
        };
        if let Err(e) = p.transaction(n, &partitions, commit).await {
            p.record(TxnEvent::Abandoned {
                producer: p.id,
                txn: n,
                error: e.to_string(),
            });
            // A new epoch fences this one; the coordinator aborts what it left open.
            p.reset();
        }
        tokio::time::sleep(interval).await;
    }
}

/// What read_committed reading of one partition keeps: the producers whose transaction the
/// Fetch listed aborted (from its first offset until their marker).
#[derive(Default)]
struct Aborted {
    pending: Vec<(i64, i64)>,
    active: BTreeSet<i64>,
}

/// The values of a read_committed response from `from`, Kafka's client-side filtering: a
/// transactional batch of a producer in an aborted transaction is skipped, control batches
/// are not values. Returns them and the offset after the last whole batch.
fn committed_values(records: &[u8], from: i64, aborted: &mut Aborted) -> (Vec<(i64, String)>, i64) {
    let mut out = Vec::new();
    let mut next = from;
    for item in batch::iter(records) {
        let Ok((at, header)) = item else { break };
        while let Some(&(pid, first)) = aborted.pending.first() {
            if first > header.last_offset() {
                break;
            }
            aborted.active.insert(pid);
            aborted.pending.remove(0);
        }
        next = header.next_offset();
        if header.is_control() {
            aborted.active.remove(&header.producer_id);
            continue;
        }
        if header.is_transactional() && aborted.active.contains(&header.producer_id) {
            continue;
        }
        let bytes = &records[at..at + header.total_len()];
        if let Some(Ok(rs)) = batch::records(bytes, &header) {
            for r in rs {
                if r.offset >= from {
                    let v = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
                    out.push((r.offset, v));
                }
            }
        }
    }
    (out, next)
}

/// One read_committed Fetch of `partition` from `offset`: values, next offset, last stable
/// offset and high watermark.
pub(crate) async fn fetch_committed(
    c: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(Vec<(i64, String)>, i64, i64, i64), ClientError> {
    let request = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(50)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let r = c.connection().call(&request, FETCH_VERSION).await?;
    kafka(r.error_code)?;
    let p = r
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| ClientError::Protocol("empty Fetch response".into()))?;
    kafka(p.error_code)?;
    let mut aborted = Aborted {
        pending: p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect(),
        active: BTreeSet::new(),
    };
    aborted.pending.sort_by_key(|&(_, first)| first);
    let records = p.records.clone().unwrap_or_default();
    let (values, next) = committed_values(&records, offset, &mut aborted);
    Ok((values, next, p.last_stable_offset, p.high_watermark))
}

/// The partitions the reader follows: (topic, partition, the partition as recorded), the
/// pipeline's output partitions recorded from [`OUTPUT_BASE`](crate::txn_pipeline::OUTPUT_BASE).
fn streams(spec: &TxnSpec) -> Vec<(&'static str, i32, i32)> {
    let mut out: Vec<_> = (0..spec.txns.partitions).map(|p| (TOPIC, p, p)).collect();
    if spec.txns.pipeline {
        use crate::txn_pipeline::{OUTPUT, OUTPUT_BASE};
        out.extend((0..spec.txns.output_partitions).map(|p| (OUTPUT, p, OUTPUT_BASE + p)));
    }
    out
}

/// The live read_committed consumer until `until_ms`, then (at `final_at_ms`) the final read
/// (and the pipeline's committed offsets).
pub async fn run_reader(io: Io, spec: TxnSpec, history: History, clock: RunClock) {
    ensure_topic(&io, &spec, &clock, TOPIC, spec.txns.partitions).await;
    if spec.txns.pipeline {
        let (topic, n) = (crate::txn_pipeline::OUTPUT, spec.txns.output_partitions);
        ensure_topic(&io, &spec, &clock, topic, n).await;
    }
    let streams = streams(&spec);
    let mut positions: BTreeMap<i32, i64> = streams.iter().map(|s| (s.2, 0)).collect();
    let mut leaders: BTreeMap<i32, Client> = BTreeMap::new();
    let mut routes = Routes::new(spec.bootstrap.clone(), DEFAULT_MAX_AGE, 0);
    let record = |e: TxnEvent| history.record(clock.now_ms(), Event::Txn(e));
    while clock.now_ms() < spec.until_ms {
        for &(topic, p, recorded) in &streams {
            let c = match leaders.entry(recorded) {
                std::collections::btree_map::Entry::Occupied(c) => c.into_mut(),
                std::collections::btree_map::Entry::Vacant(slot) => {
                    match routes.connect_leader(&io, topic, p, spec.timeout).await {
                        Ok(c) => slot.insert(c),
                        Err(_) => continue,
                    }
                }
            };
            let at = positions[&recorded];
            match io
                .timeout(spec.timeout, fetch_committed(c, topic, p, at))
                .await
                .unwrap_or(Err(ClientError::Timeout))
            {
                Ok((values, next, _, _)) => {
                    for (offset, value) in values {
                        record(TxnEvent::Read {
                            partition: recorded,
                            offset,
                            value,
                            upto: next,
                        });
                    }
                    positions.insert(recorded, next.max(at));
                }
                Err(_) => {
                    leaders.remove(&recorded);
                    routes.stale(topic, p);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(spec.txns.read_interval_ms)).await;
    }
    let now = clock.now_ms();
    if now < spec.final_at_ms {
        tokio::time::sleep(Duration::from_millis(spec.final_at_ms - now)).await;
    }
    final_read(&io, &spec, &clock, &history).await;
    if spec.txns.pipeline {
        crate::txn_pipeline::final_offsets(&io, &spec, &clock, &history).await;
    }
}

/// Every partition from offset 0, read_committed, until the last stable offset is the high
/// watermark and the read reached it (bounded by `FINAL_BOUND`).
async fn final_read(io: &Io, spec: &TxnSpec, clock: &RunClock, history: &History) {
    const FINAL_BOUND_MS: u64 = 20_000;
    let deadline = clock.now_ms() + FINAL_BOUND_MS;
    let mut routes = Routes::new(spec.bootstrap.clone(), DEFAULT_MAX_AGE, 0);
    for (topic, p, recorded) in streams(spec) {
        let mut values = Vec::new();
        let mut offset = 0i64;
        let (mut lso, mut hw) = (-1, -1);
        let mut client: Option<Client> = None;
        let settled = loop {
            if clock.now_ms() > deadline {
                break false;
            }
            if client.is_none() {
                match routes.connect_leader(io, topic, p, spec.timeout).await {
                    Ok(c) => client = Some(c),
                    Err(_) => {
                        tokio::time::sleep(PAUSE).await;
                        continue;
                    }
                }
            }
            let c = client.as_mut().expect("connected above");
            match io
                .timeout(spec.timeout, fetch_committed(c, topic, p, offset))
                .await
                .unwrap_or(Err(ClientError::Timeout))
            {
                Ok((read, next, l, h)) => {
                    let before = offset;
                    values.extend(read);
                    offset = next.max(offset);
                    (lso, hw) = (l, h);
                    if lso == hw && offset >= hw {
                        break true;
                    }
                    if offset == before {
                        tokio::time::sleep(PAUSE).await;
                    }
                }
                Err(_) => {
                    client = None;
                    routes.stale(topic, p);
                    tokio::time::sleep(PAUSE).await;
                }
            }
        };
        history.record(
            clock.now_ms(),
            Event::Txn(TxnEvent::Final {
                partition: recorded,
                values,
                settled,
                last_stable_offset: lso,
                high_watermark: hw,
            }),
        );
    }
}

// The client's own state, no I/O: the ordinary test build (`Io::os`).
#[cfg(all(test, not(madsim)))]
mod tests {
    use super::*;

    /// A producer of a `[transactions]` table of `version`, never connected.
    fn producer(version: u8) -> Producer {
        let txns: Transactions =
            toml::from_str(&format!("version = {version}")).expect("a [transactions] table");
        let spec = TxnSpec {
            txns,
            // Never dialled; the leader cache needs one bootstrap address.
            bootstrap: vec!["127.0.0.1:9092".parse().expect("an address")],
            replication_factor: 3,
            timeout: Duration::from_secs(1),
            until_ms: 0,
            final_at_ms: 0,
        };
        let (history, clock) = (History::default(), RunClock::start());
        Producer::new(Io::os(), spec, 0, "txn-0".into(), TOPIC, history, clock)
    }

    /// A producer speaking transactions v2 at `producer_at` (id, epoch).
    fn v2_at(producer_at: (i64, i16)) -> Producer {
        let mut p = producer(2);
        p.v2 = true;
        p.producer = Some(producer_at);
        p
    }

    /// The InitProducerId the producer would send now: (version, producer id, epoch).
    fn init_sent(p: &Producer) -> (i16, i64, i16) {
        let (request, version) = p.init_request();
        assert_eq!(
            request.transactional_id.as_ref().map(|t| t.0.as_str()),
            Some("txn-0")
        );
        (version, request.producer_id.0, request.producer_epoch)
    }

    #[test]
    fn a_v2_producer_reinitializes_from_its_current_id_and_epoch() {
        let p = producer(2);
        // A new producer: v1, no id.
        assert_eq!(init_sent(&p), (INIT_PRODUCER_ID_VERSION, -1, -1));
        // Initialized under v2 (epoch 3), then an abortable error: KIP-360's InitProducerId
        // v5 names the id and epoch it goes on from.
        let mut p = v2_at((7, 3));
        p.reset();
        assert_eq!(init_sent(&p), (INIT_PRODUCER_ID_RESUME_VERSION, 7, 3));
        // That init failed too (init drops the producer first): still the same id and epoch.
        p.producer = None;
        p.reset();
        assert_eq!(init_sent(&p), (INIT_PRODUCER_ID_RESUME_VERSION, 7, 3));
    }

    #[test]
    fn the_reinit_names_what_the_last_end_txn_answered() {
        let mut p = v2_at((7, 3));
        // EndTxn v5 bumps the epoch for the next transaction, which then fails.
        p.ended(Some((7, 4)));
        p.reset();
        assert_eq!(init_sent(&p), (INIT_PRODUCER_ID_RESUME_VERSION, 7, 4));
        // Epoch exhaustion: at the last epoch EndTxn answers a new producer id at epoch 0.
        let mut p = v2_at((7, i16::MAX - 1));
        p.ended(Some((8, 0)));
        p.reset();
        assert_eq!(init_sent(&p), (INIT_PRODUCER_ID_RESUME_VERSION, 8, 0));
    }

    #[test]
    fn a_crashed_or_v1_producer_initializes_as_a_new_one() {
        let mut p = v2_at((7, 3));
        p.forget();
        assert_eq!(init_sent(&p), (INIT_PRODUCER_ID_VERSION, -1, -1));
        // Transactions v1 (or a cluster that has not finalized v2): no KIP-360 re-init.
        let mut p = producer(1);
        p.producer = Some((7, 3));
        p.reset();
        assert_eq!(init_sent(&p), (INIT_PRODUCER_ID_VERSION, -1, -1));
    }
}
