//! Consume-transform-produce (issue 19), as a Kafka Streams task runs it: one task per
//! partition of the transactional workload's topic reads it `read_committed` from its group's
//! committed offset, turns each record into one output record on one of the output topic's
//! partitions, and in one transaction writes the outputs, commits the consumed offsets
//! (AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator: Kafka's
//! `sendOffsetsToTransaction`) and ends it, committing or aborting at random. After an abort,
//! a failure (fenced, coordinator gone, a leader that moved) or a crash of its own (the task
//! drops everything mid-transaction at random), it initializes again — which fences its old
//! epoch and has the coordinator abort what it left open — and restarts from the group's
//! committed offset (OffsetFetch with `require_stable`). The history gets what each transaction
//! consumed ([`TxnEvent::Consumed`]), its outputs (`Send`, at partition [`OUTPUT_BASE`] + k),
//! how it ended, each restart's offset and, after the final read, the committed offsets; the
//! reader follows the output partitions too. `txn_check` judges exactly-once from that.
//!
//! Under transactions v2 (`version = 2`) a task sends no AddPartitionsToTxn or AddOffsetsToTxn:
//! its outputs go as Produce v12 and its offsets as TxnOffsetCommit v5, which add their
//! partitions to the transaction themselves, as Java 4.x's `sendOffsetsToTransaction` does.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, OffsetFetchRequest, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest,
};
use madsim::rand::Rng;
use tokio::sync::oneshot;
use weir::client::{Client, ClientError, Connection};
use weir::io::Io;

use crate::history::{Event, History};
use crate::txn_check::{output_value, TxnEvent};
use crate::txn_workload::{
    ensure_topic, fetch_committed, kafka, retriable, s, Call, Producer, TxnSpec, ATTEMPTS, PAUSE,
    TOPIC,
};
use crate::workload::{connect, RunClock, RECONNECT_BACKOFF};

/// The output topic.
pub const OUTPUT: &str = "txn-output";
/// Output partition k is recorded in the history as partition `OUTPUT_BASE + k`.
pub const OUTPUT_BASE: i32 = 1000;
/// Task k records its transactions as producer `TASK_BASE + k`.
pub const TASK_BASE: u32 = 100;
/// The tasks' consumer group.
pub const GROUP: &str = "txn-pipeline";
const FIND_COORDINATOR_VERSION: i16 = 3;
/// OffsetFetch with `require_stable` (KIP-447).
const OFFSET_FETCH_VERSION: i16 = 7;
/// TxnOffsetCommit with the generation and member (KIP-447), sent as a group-less task does.
const TXN_OFFSET_COMMIT_VERSION: i16 = 3;
/// TxnOffsetCommit that adds the offsets partition to the transaction (transactions v2).
const TXN_OFFSET_COMMIT_V2_VERSION: i16 = 5;

/// The output partition of the input record at `offset` (consecutive inputs spread over all).
pub fn output_partition(offset: i64, partitions: i32) -> i32 {
    (offset % partitions as i64) as i32
}

async fn group_coordinator(io: &Io, spec: &TxnSpec, attempt: u64) -> Result<Client, ClientError> {
    let via = spec.bootstrap[(attempt % spec.bootstrap.len() as u64) as usize];
    let mut c = connect(io, via, spec.timeout).await?;
    let request = FindCoordinatorRequest::default()
        .with_key(s(GROUP))
        .with_key_type(0);
    let r = c
        .connection()
        .call(&request, FIND_COORDINATOR_VERSION)
        .await?;
    kafka(r.error_code)?;
    let addr = io.net.resolve(&r.host.to_string(), r.port as u16).await?;
    connect(io, addr, spec.timeout).await
}

/// Sends a TxnOffsetCommit on `c` and checks every partition's answer.
async fn commit_offsets(
    c: &mut Connection,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> Result<(), ClientError> {
    let r = c.call(request, version).await?;
    for t in &r.topics {
        for p in &t.partitions {
            kafka(p.error_code)?;
        }
    }
    Ok(())
}

/// A request to the group coordinator.
enum GroupCall {
    /// OffsetFetch of the task's partition, require_stable.
    Fetch,
    /// TxnOffsetCommit of the task's partition at this offset.
    Commit(i64),
}

struct Task {
    p: Producer,
    partition: i32,
    group: Option<Client>,
    input: Option<Client>,
    /// Where the next transaction consumes from; `None`: ask the group.
    position: Option<i64>,
    /// A TxnOffsetCommit held in the network (`offset_commit_hold_ratio`): its transaction,
    /// and its release.
    held: Option<(u64, oneshot::Sender<()>)>,
}

impl Task {
    /// `call` on the connection to the group coordinator (made by `at_group`).
    async fn ask_group(&mut self, call: &GroupCall) -> Result<i64, ClientError> {
        let commit_request = match call {
            GroupCall::Commit(offset) => {
                let (request, version) = self.commit_request(*offset);
                (Some(request), version)
            }
            GroupCall::Fetch => (None, 0),
        };
        let c = self
            .group
            .as_mut()
            .expect("connected by at_group")
            .connection();
        let topic = || TopicName(s(TOPIC));
        match call {
            GroupCall::Fetch => {
                let request = OffsetFetchRequest::default()
                    .with_group_id(GroupId(s(GROUP)))
                    .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![self.partition])]))
                    .with_require_stable(true);
                let r = c.call(&request, OFFSET_FETCH_VERSION).await?;
                kafka(r.error_code)?;
                let p = r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == self.partition)
                    .ok_or_else(|| ClientError::Protocol("OffsetFetch without it".into()))?;
                kafka(p.error_code)?;
                Ok(p.committed_offset.max(0))
            }
            GroupCall::Commit(offset) => {
                let (request, version) = commit_request;
                commit_offsets(c, &request.expect("built above"), version).await?;
                Ok(*offset)
            }
        }
    }

    /// The TxnOffsetCommit of `offset` this task sends now, and its version.
    fn commit_request(&self, offset: i64) -> (TxnOffsetCommitRequest, i16) {
        let (pid, epoch) = self.p.producer.expect("initialized");
        let request = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s(&self.p.transactional_id)))
            .with_group_id(GroupId(s(GROUP)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_generation_id(-1)
            .with_member_id(s(""))
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(self.partition)
                    .with_committed_offset(offset)
                    .with_committed_leader_epoch(-1)])]);
        let version = if self.p.v2 {
            TXN_OFFSET_COMMIT_V2_VERSION
        } else {
            TXN_OFFSET_COMMIT_VERSION
        };
        (request, version)
    }

    /// Records a TxnOffsetCommit attempt of `offset` and how it went (a time-out: abandoned).
    fn record_commit(&self, offset: i64, result: &Result<i64, ClientError>) {
        let (producer_id, epoch) = self.p.producer.unwrap_or((-1, -1));
        self.p.record(TxnEvent::OffsetCommit {
            task: self.p.id,
            txn: self.p.txn,
            partition: self.partition,
            offset,
            producer_id,
            epoch,
            abandoned: matches!(result, Err(ClientError::Timeout)),
            error: result.as_ref().err().map(|e| e.to_string()),
        });
    }

    /// With `offset_commit_hold_ratio`, holds this TxnOffsetCommit's first send in the network
    /// (the group coordinator's node cut off from that connection) and waits the request
    /// time-out for its answer: `None` when not held (sent as usual), else the answer, or
    /// `Timeout` when the client gave up on it. The held request travels on a connection of
    /// its own and reaches the coordinator once a later transaction of this task has had its
    /// own offsets accepted (the moment it can replace them) or after `end_txn_hold_max_ms`.
    async fn hold_commit(&mut self, offset: i64) -> Option<Result<i64, ClientError>> {
        let ratio = self.p.spec.txns.offset_commit_hold_ratio;
        if ratio <= 0.0 || self.held.is_some() || !madsim::rand::thread_rng().gen_bool(ratio) {
            return None;
        }
        let io = self.p.io.clone();
        let (timeout, waited) = (self.p.spec.timeout, self.p.spec.coordinator_timeout());
        self.p.attempt += 1;
        let connected = io.timeout(
            timeout,
            group_coordinator(&io, &self.p.spec, self.p.attempt),
        );
        let Some(Ok(mut c)) = connected.await else {
            return None;
        };
        let (request, version) = self.commit_request(offset);
        let (release, released) = oneshot::channel();
        let (answer, answered) = oneshot::channel();
        self.held = Some((self.p.txn, release));
        let hold_max = Duration::from_millis(self.p.spec.txns.end_txn_hold_max_ms);
        let late = io.clone();
        io.spawn(async move {
            let io = late;
            let _ = io.timeout(hold_max, released).await;
            let sent = commit_offsets(c.connection(), &request, version);
            let result = io.timeout(waited, sent).await;
            let _ = answer.send(result.unwrap_or(Err(ClientError::Timeout)));
        });
        let result = match io.timeout(waited, answered).await {
            Some(Ok(result)) => {
                self.held = None; // answered in time: nothing is left in the network
                result.map(|()| offset)
            }
            _ => Err(ClientError::Timeout),
        };
        Some(result)
    }

    /// `call` at the group coordinator until it succeeds or fails for good.
    async fn at_group(&mut self, call: GroupCall) -> Result<i64, ClientError> {
        let mut last = ClientError::Timeout;
        for attempt in 0..ATTEMPTS {
            if self.p.clock.now_ms() > self.p.spec.final_at_ms {
                break;
            }
            let io = self.p.io.clone();
            let held = match (attempt, &call) {
                (0, GroupCall::Commit(offset)) => self.hold_commit(*offset).await,
                _ => None,
            };
            // Connecting (FindCoordinator, then the coordinator) is bounded by the connection
            // time-out; the request itself by the request time-out, whose expiry abandons it.
            if held.is_none() && self.group.is_none() {
                self.p.attempt += 1;
                let spec = &self.p.spec;
                let connected = io
                    .timeout(spec.timeout, group_coordinator(&io, spec, self.p.attempt))
                    .await
                    .unwrap_or(Err(ClientError::Timeout));
                match connected {
                    Ok(c) => self.group = Some(c),
                    Err(e) => {
                        last = e;
                        tokio::time::sleep(PAUSE).await;
                        continue;
                    }
                }
            }
            let result = match held {
                Some(result) => result,
                None => io
                    .timeout(self.p.spec.coordinator_timeout(), self.ask_group(&call))
                    .await
                    .unwrap_or(Err(ClientError::Timeout)),
            };
            if let GroupCall::Commit(offset) = call {
                self.record_commit(offset, &result);
            }
            match result {
                Ok(v) => return Ok(v),
                // The last transaction's marker has not reached the offsets yet.
                Err(ClientError::Kafka(ResponseError::UnstableOffsetCommit, _)) => {
                    last = ClientError::Kafka(ResponseError::UnstableOffsetCommit, String::new());
                    tokio::time::sleep(PAUSE).await;
                }
                Err(e) if retriable(&e) => {
                    self.group = None;
                    last = e;
                    tokio::time::sleep(PAUSE).await;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Committed records of the input partition from `from`, up to `max` of them, and the
    /// offset after the last one taken (after the whole response when all were taken).
    async fn consume(
        &mut self,
        from: i64,
        max: usize,
    ) -> Result<(Vec<(i64, String)>, i64), ClientError> {
        if self.input.is_none() {
            let c = self
                .p
                .routes
                .connect_leader(&self.p.io, TOPIC, self.partition, self.p.spec.timeout)
                .await?;
            self.input = Some(c);
        }
        let c = self.input.as_mut().expect("connected above");
        let (mut values, next, _, _) = self
            .p
            .io
            .timeout(
                self.p.spec.timeout,
                fetch_committed(c, TOPIC, self.partition, from),
            )
            .await
            .unwrap_or(Err(ClientError::Timeout))
            .inspect_err(|_| {
                self.input = None;
                self.p.routes.stale(TOPIC, self.partition);
            })?;
        if values.len() > max {
            values.truncate(max);
            let to = values.last().expect("more than max").0 + 1;
            return Ok((values, to));
        }
        Ok((values, next))
    }

    /// One transaction over `inputs` (consumed from `from` up to `to`); `crash`: the task dies
    /// after writing its outputs.
    async fn transaction(
        &mut self,
        n: u64,
        inputs: &[(i64, String)],
        to: i64,
        commit: bool,
        crash: bool,
    ) -> Result<bool, ClientError> {
        let outputs = self.p.spec.txns.output_partitions;
        let mut partitions: Vec<i32> = inputs
            .iter()
            .map(|(o, _)| output_partition(*o, outputs))
            .collect();
        partitions.sort_unstable();
        partitions.dedup();
        self.p.txn = n;
        if !self.p.v2 {
            self.p.at_coordinator(Call::Add(partitions)).await?;
        }
        for (offset, _) in inputs {
            let out = output_partition(*offset, outputs);
            let v = output_value(self.p.id, n, *offset);
            self.p.record(TxnEvent::Send {
                producer: self.p.id,
                txn: n,
                partition: OUTPUT_BASE + out,
                value: v.clone(),
            });
            self.p.produce(out, &v).await?;
        }
        if crash {
            return Ok(false);
        }
        if !self.p.v2 {
            self.p
                .at_coordinator(Call::AddOffsets(GROUP.into()))
                .await?;
        }
        self.at_group(GroupCall::Commit(to)).await?;
        // A held TxnOffsetCommit of an earlier transaction goes on its way now.
        if self.held.as_ref().is_some_and(|(t, _)| *t < n) {
            let (_, release) = self.held.take().expect("checked");
            let _ = release.send(());
        }
        self.p.end(commit).await?;
        Ok(true)
    }

    /// Forgets everything, as a restarted task would.
    fn restart(&mut self) {
        self.p.reset();
        self.group = None;
        self.input = None;
        self.position = None;
    }
}

/// The task of input partition `partition` until `until_ms`.
pub async fn run_task(io: Io, spec: TxnSpec, partition: i32, history: History, clock: RunClock) {
    ensure_topic(&io, &spec, &clock, TOPIC, spec.txns.partitions).await;
    ensure_topic(&io, &spec, &clock, OUTPUT, spec.txns.output_partitions).await;
    let id = TASK_BASE + partition as u32;
    let p = Producer::new(
        io,
        spec,
        id,
        format!("task-{partition}"),
        OUTPUT,
        history,
        clock,
    );
    let mut t = Task {
        p,
        partition,
        group: None,
        input: None,
        position: None,
        held: None,
    };
    let interval = Duration::from_millis(t.p.spec.txns.interval_ms);
    let batch = t.p.spec.txns.pipeline_batch as usize;
    let mut n = 0u64;
    while t.p.clock.now_ms() < t.p.spec.until_ms {
        if t.p.producer.is_none() {
            if t.p.init().await.is_err() {
                tokio::time::sleep(RECONNECT_BACKOFF).await;
            }
            continue;
        }
        let from = match t.position {
            Some(o) => o,
            None => match t.at_group(GroupCall::Fetch).await {
                Ok(o) => {
                    t.p.record(TxnEvent::Restarted {
                        task: id,
                        partition,
                        offset: o,
                    });
                    t.position = Some(o);
                    o
                }
                Err(_) => {
                    t.restart();
                    tokio::time::sleep(RECONNECT_BACKOFF).await;
                    continue;
                }
            },
        };
        let (inputs, to) = match t.consume(from, batch).await {
            Ok((inputs, _)) if inputs.is_empty() => {
                tokio::time::sleep(Duration::from_millis(t.p.spec.txns.read_interval_ms)).await;
                continue;
            }
            Ok(read) => read,
            Err(_) => {
                tokio::time::sleep(PAUSE).await;
                continue;
            }
        };
        n += 1;
        let (commit, crash) = {
            let mut rng = madsim::rand::thread_rng();
            let commit = !rng.gen_bool(t.p.spec.txns.abort_ratio);
            (commit, rng.gen_bool(t.p.spec.txns.pipeline_crash_ratio))
        };
        t.p.record(TxnEvent::Consumed {
            task: id,
            txn: n,
            partition,
            from,
            to,
            inputs: inputs.clone(),
        });
        match t.transaction(n, &inputs, to, commit, crash).await {
            Ok(true) if commit => t.position = Some(to),
            // Aborted: restart from the committed offset, as Streams does.
            Ok(true) => t.position = None,
            Ok(false) => {
                t.p.record(TxnEvent::Abandoned {
                    producer: id,
                    txn: n,
                    error: "the task crashed".into(),
                });
                t.restart();
                t.p.forget();
            }
            Err(e) => {
                t.p.record(TxnEvent::Abandoned {
                    producer: id,
                    txn: n,
                    error: e.to_string(),
                });
                t.restart();
            }
        }
        tokio::time::sleep(interval).await;
    }
}

/// The group's committed offsets after the final read (the last transactions settled).
pub async fn final_offsets(io: &Io, spec: &TxnSpec, clock: &RunClock, history: &History) {
    for partition in 0..spec.txns.partitions {
        let mut t = Task {
            p: Producer::new(
                io.clone(),
                spec.clone(),
                0,
                String::new(),
                OUTPUT,
                history.clone(),
                *clock,
            ),
            partition,
            group: None,
            input: None,
            position: None,
            held: None,
        };
        // Past the run's end: the bound is the attempts, not the deadline.
        t.p.spec.final_at_ms = u64::MAX;
        let mut committed = None;
        for _ in 0..5 {
            if let Ok(o) = t.at_group(GroupCall::Fetch).await {
                committed = Some(o);
                break;
            }
        }
        history.record(
            clock.now_ms(),
            Event::Txn(TxnEvent::Committed {
                partition,
                offset: committed,
            }),
        );
    }
}
