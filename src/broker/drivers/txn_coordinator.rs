//! The driver of the transaction coordinator core (`crate::txn::TxnCoordinator`): it owns the
//! core behind a short-held lock (never across an await), performs its actions — appends to
//! `__transaction_state` (counted once the high watermark passes them, as acks=all), writes
//! transaction markers to partition leaders (here through `Partition::append_marker`, on
//! another broker with WriteTxnMarkers), answers requests — runs its timer (timeouts, marker
//! resends), and loads and unloads `__transaction_state` partitions as this node comes to lead
//! them or stops, as the group coordinator's driver does for `__consumer_offsets`.
//!
//! A marker committed on a `__consumer_offsets` partition this node leads settles the
//! transaction's pending offsets there (the group coordinator holds them; TxnOffsetCommit wrote
//! them to that partition as the producer's transactional batch).

mod batches;
pub(crate) mod state;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, RequestKind, ResponseKind, TopicName, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::oneshot;

use crate::broker::{delayed, shared::Broker};
use crate::group::OFFSETS_TOPIC;
use crate::log::batch::{self, BatchBuilder};
use crate::log::control::Marker;
use crate::replica::ProduceError;
use crate::txn::coordinator::{RequestId, Token};
use crate::txn::{
    Action, Event, Reply, TopicPartition, TxnConfig, TxnCoordinator, TxnError,
    TRANSACTION_STATE_TOPIC,
};
use state::Inner;

/// Bound on requests waiting for an answer.
const MAX_WAITING: usize = 100_000;
/// How long an append or a marker may wait for its high watermark.
const COMMIT_TIMEOUT: Duration = Duration::from_millis(5000);
/// Between marker attempts to a partition that failed (leader moving, say).
const MARKER_RETRY: Duration = Duration::from_millis(100);
/// The timer looks at least this often (load changes, missed wake-ups).
const MAX_TIMER_SLEEP_MS: i64 = 500;
const LOAD_CHUNK_BYTES: usize = 1 << 20;

/// An append the core asked for, made, waiting to count.
struct Appending {
    token: Token,
    handle: Option<Arc<crate::broker::state::PartitionHandle>>,
    up_to: i64,
    fsync: bool,
    /// The wait for the high watermark to pass `up_to`, registered under the append's lock.
    wait: Option<delayed::ProduceWait>,
    /// Failed before it was written.
    failed: Option<TxnError>,
}

fn wait_error(e: delayed::WaitError) -> TxnError {
    match e {
        delayed::WaitError::NotLeader | delayed::WaitError::Closed(_) => TxnError::NotCoordinator,
        _ => TxnError::CoordinatorNotAvailable,
    }
}

/// The tagged field of a WriteTxnMarkers v1 marker in which Weir's coordinators say the
/// transaction is a transactions v2 one (KIP-1228's `TransactionVersion`, a plain field of
/// WriteTxnMarkers v2, which the protocol crate does not encode). Kafka's brokers ignore an
/// unknown tag; a marker without it (Admin's abortTransaction, an older Weir) is checked as v1.
const MARKER_VERSION_TAG: i32 = 0x5745;

fn mark_v2(marker: &mut WritableTxnMarker) {
    marker
        .unknown_tagged_fields
        .insert(MARKER_VERSION_TAG, bytes::Bytes::from_static(&[2]));
}

/// Whether a received marker is a transactions v2 one ([`MARKER_VERSION_TAG`]).
pub(crate) fn marker_is_v2(marker: &WritableTxnMarker) -> bool {
    marker
        .unknown_tagged_fields
        .get(&MARKER_VERSION_TAG)
        .is_some_and(|v| v.first().is_some_and(|&tv| tv >= 2))
}

impl Broker {
    /// Runs one request through the transaction coordinator and waits for its answer.
    pub(crate) async fn txn_call(&self, event: impl FnOnce(RequestId) -> Event) -> Reply {
        let now = self.io.clock.wall_ms();
        let (tx, rx) = oneshot::channel();
        let work = {
            let mut inner = self.txns.lock();
            if inner.core.is_none() {
                return Reply::Error(TxnError::CoordinatorNotAvailable);
            }
            if inner.waiting.len() >= MAX_WAITING {
                return Reply::Error(TxnError::CoordinatorNotAvailable);
            }
            let id = inner.next_request;
            inner.next_request += 1;
            inner.waiting.insert(id, tx);
            let actions = inner.core.as_mut().expect("checked").step(now, event(id));
            self.run_txn_actions(&mut inner, actions, now)
        };
        self.finish_txn_appends(work).await;
        rx.await
            .unwrap_or(Reply::Error(TxnError::CoordinatorNotAvailable))
    }

    /// Reads the core (KIP-664's queries change nothing, so they are not events): `None` until
    /// `__transaction_state` exists on this node. `now` is the wall clock.
    pub(crate) fn txn_read<T>(&self, read: impl FnOnce(Option<&TxnCoordinator>, i64) -> T) -> T {
        let now = self.io.clock.wall_ms();
        let inner = self.txns.lock();
        read(inner.core.as_ref(), now)
    }

    async fn txn_event(&self, event: Event) {
        let now = self.io.clock.wall_ms();
        let work = {
            let mut inner = self.txns.lock();
            let Some(core) = inner.core.as_mut() else {
                return;
            };
            let actions = core.step(now, event);
            self.run_txn_actions(&mut inner, actions, now)
        };
        self.finish_txn_appends(work).await;
    }

    /// Performs the core's actions under the lock: answers, appends (made here, counted
    /// later), marker writes (spawned).
    fn run_txn_actions(&self, inner: &mut Inner, actions: Vec<Action>, now: i64) -> Vec<Appending> {
        let mut queue: VecDeque<Action> = actions.into();
        let mut appends = Vec::new();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Respond(id, reply) => {
                    if let Some(tx) = inner.waiting.remove(&id) {
                        let _ = tx.send(reply);
                    }
                }
                Action::Append {
                    token,
                    partition,
                    key,
                    value,
                } => appends.push(self.append_txn_record(
                    token,
                    partition,
                    &key,
                    value.as_deref(),
                    now,
                )),
                Action::WriteMarkers {
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    partitions,
                    v2,
                } => {
                    if let Some(broker) = self.this.upgrade() {
                        self.io.spawn(async move {
                            broker
                                .write_markers(
                                    transactional_id,
                                    (producer_id, producer_epoch),
                                    Marker {
                                        commit,
                                        coordinator_epoch,
                                    },
                                    v2,
                                    partitions,
                                )
                                .await;
                        });
                    }
                }
            }
        }
        appends
    }

    fn append_txn_record(
        &self,
        token: Token,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
        now: i64,
    ) -> Appending {
        let failed = |e| Appending {
            token,
            handle: None,
            up_to: 0,
            fsync: false,
            wait: None,
            failed: Some(e),
        };
        let Some(handle) = self.partition(TRANSACTION_STATE_TOPIC, partition) else {
            return failed(TxnError::NotCoordinator);
        };
        let size = key.len() + value.map_or(0, <[u8]>::len) + 16;
        let mut builder = BatchBuilder::with_capacity(now, size);
        builder.push(Some(key), value, now);
        let bytes = builder.finish(-1, -1, -1);
        let reservation = match handle.waiters.reserve_produce() {
            Ok(r) => r,
            Err(e) => return failed(wait_error(e)),
        };
        let Some(mut p) = handle.lock_open() else {
            return failed(TxnError::NotCoordinator);
        };
        if self.is_storage_offline() {
            return failed(TxnError::NotCoordinator);
        }
        let appended = match p.append(&bytes, now) {
            Ok(a) => a,
            Err(ProduceError::NotLeader) => return failed(TxnError::NotCoordinator),
            Err(e) => {
                tracing::error!(error = ?e, "append to {TRANSACTION_STATE_TOPIC} failed");
                return failed(TxnError::CoordinatorNotAvailable);
            }
        };
        let config = p.config();
        let fsync = self.config.fsync_before_ack
            || p.log()
                .flush_due(config.flush_messages, config.flush_ms, now);
        let up_to = appended.last_offset + 1;
        // Registered under the append's lock (as a produce's): a truncation or a leadership
        // loss after the release ends this wait, where a wait registered later could be met by
        // another leader's records reaching the same offset.
        let wait = reservation.wait_for(up_to);
        drop(p);
        Appending {
            token,
            handle: Some(handle),
            up_to,
            fsync,
            wait: Some(wait),
            failed: None,
        }
    }

    async fn finish_txn_appends(&self, mut appends: Vec<Appending>) {
        while !appends.is_empty() {
            let results = crate::io::join_all(
                appends
                    .iter_mut()
                    .map(|a| self.commit_txn_append(a))
                    .collect(),
            )
            .await;
            let now = self.io.clock.wall_ms();
            let mut inner = self.txns.lock();
            let mut next = Vec::new();
            for (a, result) in appends.iter().zip(results) {
                let Some(core) = inner.core.as_mut() else {
                    break;
                };
                let actions = core.step(
                    now,
                    Event::AppendDone {
                        token: a.token,
                        result,
                    },
                );
                next.extend(self.run_txn_actions(&mut inner, actions, now));
            }
            appends = next;
        }
    }

    async fn commit_txn_append(&self, a: &mut Appending) -> Result<(), TxnError> {
        if let Some(e) = a.failed {
            return Err(e);
        }
        let handle = a.handle.as_ref().expect("made");
        let wait = a.wait.take().expect("a made append has its wait");
        self.wait_committed(handle, a.up_to, a.fsync, wait).await
    }

    /// Waits until `up_to` is below the partition's high watermark (after an fsync when asked),
    /// through `wait`, registered under the lock the append held.
    async fn wait_committed(
        &self,
        handle: &crate::broker::state::PartitionHandle,
        up_to: i64,
        fsync: bool,
        wait: delayed::ProduceWait,
    ) -> Result<(), TxnError> {
        if fsync {
            self.flush_partition(handle, up_to)
                .await
                .map_err(|_| TxnError::CoordinatorNotAvailable)?;
        }
        let mut waits = [wait];
        let deadline = self.io.clock.monotonic() + COMMIT_TIMEOUT;
        let never = delayed::ConnectionGone::never();
        let [result] = delayed::wait_produce(self.io.clock.as_ref(), &mut waits, deadline, &never)
            .await
            .try_into()
            .expect("one wait, one result");
        match result {
            Ok(delayed::Committed::InSync) => Ok(()),
            Ok(delayed::Committed::BelowMinIsr) => Err(TxnError::CoordinatorNotAvailable),
            Err(e) => Err(wait_error(e)),
        }
    }

    /// Writes one transaction's markers to all its partitions, retrying each until it is
    /// written or this node stops coordinating the transaction; then tells the core.
    async fn write_markers(
        &self,
        transactional_id: String,
        (producer_id, producer_epoch): (i64, i16),
        marker: Marker,
        v2: bool,
        partitions: Vec<TopicPartition>,
    ) {
        let state_partition = {
            let inner = self.txns.lock();
            let Some(core) = inner.core.as_ref() else {
                return;
            };
            crate::txn::partition_for(&transactional_id, core.config().partitions)
        };
        let mut left = partitions;
        if crate::planted!(self.config, CommitMarkerSomePartitions) && marker.commit {
            left.pop();
        }
        while !left.is_empty() {
            // All partitions at once: the next transaction waits for the slowest marker.
            let results = crate::io::join_all(
                left.iter()
                    .map(|tp| {
                        self.write_marker_anywhere(tp, producer_id, producer_epoch, marker, v2)
                    })
                    .collect(),
            )
            .await;
            let mut failed = Vec::new();
            for (tp, result) in left.into_iter().zip(results) {
                if let Err(why) = result {
                    tracing::debug!(topic = %tp.topic, partition = tp.partition, %why,
                        "transaction marker not written yet; retrying");
                    failed.push(tp);
                }
            }
            left = failed;
            if left.is_empty() {
                break;
            }
            let still_ours = self
                .txns
                .lock()
                .core
                .as_ref()
                .is_some_and(|c| c.holds(state_partition));
            if !still_ours || *self.shutdown_signal().borrow() {
                return;
            }
            self.io.clock.sleep(MARKER_RETRY).await;
        }
        self.txn_event(Event::MarkersWritten {
            transactional_id,
            producer_id,
            producer_epoch,
        })
        .await;
    }

    async fn write_marker_anywhere(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        v2: bool,
    ) -> Result<(), String> {
        let image = self.image();
        let leader = image
            .topic(&tp.topic)
            .and_then(|t| image.partition(t.id, tp.partition))
            .map(|p| p.leader);
        match leader {
            // A deleted topic has nothing left to mark.
            None => Ok(()),
            Some(l) if l == self.config.node_id => {
                match self
                    .write_marker_here(tp, producer_id, producer_epoch, marker, v2)
                    .await
                {
                    // A newer epoch or coordinator owns the producer's state here: nothing
                    // more to write (as for the same errors from another leader, below).
                    Ok(())
                    | Err(ProduceError::InvalidProducerEpoch | ProduceError::CoordinatorFenced) => {
                        Ok(())
                    }
                    Err(e) => Err(format!("{e:?}")),
                }
            }
            Some(l) if l < 0 => Err("no leader".into()),
            Some(l) => {
                self.write_marker_remote(l, tp, (producer_id, producer_epoch), marker, v2)
                    .await
            }
        }
    }

    /// Writes a marker on this node (it leads the partition) and waits until it is committed
    /// (acks=all, as Kafka's markers); a COMMIT or ABORT reaching `__consumer_offsets` settles
    /// the producer's transactional offsets there.
    pub(crate) async fn write_marker_here(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
        marker: Marker,
        v2: bool,
    ) -> Result<(), ProduceError> {
        let Some(handle) = self.partition(&tp.topic, tp.partition) else {
            return Err(ProduceError::NotLeader);
        };
        let now = self.io.clock.wall_ms();
        let reservation = handle
            .waiters
            .reserve_produce()
            .map_err(|_| ProduceError::NotLeader)?;
        let (up_to, fsync, wait) = {
            let Some(mut p) = handle.lock_open() else {
                return Err(ProduceError::NotLeader);
            };
            if self.is_storage_offline() {
                return Err(ProduceError::Storage(std::io::Error::other("offline")));
            }
            let appended = p.append_marker_as(producer_id, producer_epoch, marker, v2, now)?;
            let config = p.config();
            let fsync = self.config.fsync_before_ack
                || p.log()
                    .flush_due(config.flush_messages, config.flush_ms, now);
            let up_to = appended.last_offset + 1;
            // Under the append's lock, as `append_txn_record`'s.
            (up_to, fsync, reservation.wait_for(up_to))
        };
        self.wait_committed(&handle, up_to, fsync, wait)
            .await
            .map_err(|_| ProduceError::NotLeader)?;
        if tp.topic == OFFSETS_TOPIC {
            self.settle_txn_offsets(tp.partition, producer_id, marker.commit)
                .await;
        }
        Ok(())
    }

    async fn write_marker_remote(
        &self,
        leader: i32,
        tp: &TopicPartition,
        (producer_id, producer_epoch): (i64, i16),
        marker: Marker,
        v2: bool,
    ) -> Result<(), String> {
        const VERSION: i16 = 1;
        let image = self.image();
        let registration = image.broker(leader).ok_or("unknown leader")?;
        let endpoint = registration
            .endpoint(&self.config.inter_broker_listener_name)
            .or_else(|| registration.listeners.first())
            .ok_or("the leader has no endpoint")?;
        let addr = self
            .io
            .net
            .resolve(&endpoint.host, endpoint.port)
            .await
            .map_err(|e| e.to_string())?;
        let mut written = WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_transaction_result(marker.commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                .with_partition_indexes(vec![tp.partition])]);
        if v2 {
            mark_v2(&mut written);
        }
        let request = WriteTxnMarkersRequest::default().with_markers(vec![written]);
        let answer = self
            .inter_broker_call(
                addr,
                &endpoint.host,
                "weir-txn-coordinator",
                ApiKey::WriteTxnMarkers,
                VERSION,
                &RequestKind::WriteTxnMarkers(request),
                COMMIT_TIMEOUT,
            )
            .await?;
        let ResponseKind::WriteTxnMarkers(response) = answer else {
            return Err("an answer of another kind".into());
        };
        let code = response
            .markers
            .iter()
            .flat_map(|m| m.topics.iter())
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.error_code)
            .find(|&c| c != 0)
            .unwrap_or(0);
        match code {
            0 => Ok(()),
            // INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer coordinator or
            // epoch owns the partition's state; nothing more to write (Kafka stops too).
            47 | 52 => Ok(()),
            c => Err(format!("error code {c}")),
        }
    }

    /// Creates `__transaction_state` on first use (FindCoordinator key type 1, a
    /// transactional InitProducerId), its replication factor and `min.insync.replicas`
    /// clamped to the live brokers.
    pub(crate) async fn ensure_transaction_topic(&self) -> Result<(), String> {
        if self.image().topic(TRANSACTION_STATE_TOPIC).is_some() {
            return Ok(());
        }
        let live = self.image().live_brokers().count().max(1) as i16;
        let replication_factor = self
            .config
            .transaction_state_log_replication_factor
            .min(live);
        let mut configs = BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        configs.insert("compression.type".to_string(), "uncompressed".to_string());
        configs.insert(
            "unclean.leader.election.enable".to_string(),
            "false".to_string(),
        );
        configs.insert(
            "min.insync.replicas".to_string(),
            self.config
                .transaction_state_log_min_isr
                .min(replication_factor as i32)
                .to_string(),
        );
        let new = crate::controller::NewTopic {
            name: TRANSACTION_STATE_TOPIC.to_string(),
            partitions: self.config.transaction_state_log_num_partitions,
            replication_factor,
            configs,
            ..Default::default()
        };
        self.create_internal_topic(new).await
    }

    /// The coordinator of `transactional_id`: the leader of its `__transaction_state`
    /// partition, with its client endpoint.
    pub(crate) fn txn_coordinator_endpoint(
        &self,
        transactional_id: &str,
    ) -> Result<(i32, String, u16), String> {
        let partitions = self
            .image()
            .topic(TRANSACTION_STATE_TOPIC)
            .map(|t| t.partitions)
            .ok_or_else(|| "the transaction state topic is not ready".to_string())?;
        let index = crate::txn::partition_for(transactional_id, partitions);
        self.internal_partition_leader(TRANSACTION_STATE_TOPIC, index)
    }

    /// Makes the core hold exactly the `__transaction_state` partitions this node leads (a
    /// newly led one is replayed from its log, COORDINATOR_LOAD_IN_PROGRESS meanwhile; one led
    /// elsewhere now is unloaded). Called from the timer loop. Idempotent.
    pub(crate) fn sync_txn_roles(&self) {
        let image = self.image();
        let Some(topic) = image.topic(TRANSACTION_STATE_TOPIC) else {
            return;
        };
        let serving = self.serving_partitions();
        // (the leader epoch when it leads in the image, its replica has taken it up: loadable).
        let leads: Vec<(Option<i32>, bool)> = (0..topic.partitions)
            .map(|p| {
                let Some(meta) = image.partition(topic.id, p) else {
                    return (None, false);
                };
                let leads = serving
                    && meta.leader == self.config.node_id
                    && self.partition(TRANSACTION_STATE_TOPIC, p).is_some();
                let ready =
                    leads && self.replica_leads(TRANSACTION_STATE_TOPIC, p, meta.leader_epoch);
                (leads.then_some(meta.leader_epoch), ready)
            })
            .collect();
        let mut to_load = Vec::new();
        {
            let now = self.io.clock.wall_ms();
            let mut inner = self.txns.lock();
            let core = inner.core.get_or_insert_with(|| {
                TxnCoordinator::new(TxnConfig {
                    max_timeout_ms: self.config.transaction_max_timeout_ms,
                    partitions: topic.partitions,
                    id_expiration_ms: self.config.transactional_id_expiration_ms as i64,
                    #[cfg(any(madsim, test))]
                    planted: crate::config::planted::Planted::new(self.config.planted_bug),
                })
            });
            let mut actions = Vec::new();
            let mut begins = Vec::new();
            for (p, (leads, ready)) in leads.iter().enumerate() {
                let p = p as i32;
                let holds = core.holds(p);
                match (leads, holds) {
                    // Loaded once its replica leads (see `replica_leads`); the next tick retries.
                    (Some(_), false) if !ready => {}
                    (Some(epoch), false) => {
                        actions.extend(core.step(
                            now,
                            Event::LoadBegin {
                                partition: p,
                                coordinator_epoch: *epoch,
                            },
                        ));
                        begins.push(p);
                    }
                    (None, true) => {
                        tracing::info!(
                            partition = p,
                            "no longer leads {TRANSACTION_STATE_TOPIC}-{p}"
                        );
                        actions.extend(core.step(now, Event::Unload { partition: p }));
                    }
                    _ => {}
                }
            }
            for p in begins {
                let id = inner.next_load;
                inner.next_load += 1;
                inner.loads.insert(p, id);
                to_load.push((p, id));
            }
            let appends = self.run_txn_actions(&mut inner, actions, now);
            assert!(appends.is_empty(), "loading appends nothing");
        }
        for (p, id) in to_load {
            self.load_txn_partition(p, id);
        }
    }

    /// Tests: whether the coordinator holds `__transaction_state` partition `p` (loading it or
    /// loaded).
    #[cfg(test)]
    pub(crate) fn holds_txn_partition(&self, p: i32) -> bool {
        self.txns.lock().core.as_ref().is_some_and(|c| c.holds(p))
    }

    /// Replays one partition to its log end into the core, then finishes its load (which
    /// resends the markers of every transaction caught in Prepare*).
    fn load_txn_partition(&self, partition: i32, load: u64) {
        if let Some(handle) = self.partition(TRANSACTION_STATE_TOPIC, partition) {
            let (mut offset, end) = {
                let p = handle.lock();
                (p.log_start_offset(), p.log_end_offset())
            };
            while offset < end {
                let chunk = match handle.lock().read_for_replica(offset, LOAD_CHUNK_BYTES) {
                    Ok(chunk) if !chunk.is_empty() => chunk,
                    Ok(_) => break,
                    Err(e) => {
                        tracing::error!(partition, offset, error = ?e,
                            "cannot read {TRANSACTION_STATE_TOPIC}; the rest is skipped");
                        break;
                    }
                };
                let now = self.io.clock.wall_ms();
                let mut inner = self.txns.lock();
                if inner.loads.get(&partition) != Some(&load) {
                    return;
                }
                let before = offset;
                let core = inner.core.as_mut().expect("loading");
                for item in batch::iter(&chunk) {
                    let Ok((at, header)) = item else { break };
                    offset = header.next_offset();
                    if header.is_control() {
                        continue;
                    }
                    let bytes = &chunk[at..at + header.total_len()];
                    let Some(Ok(records)) = batch::records(bytes, &header) else {
                        continue;
                    };
                    for r in records {
                        let Some(key) = r.key else { continue };
                        core.step(
                            now,
                            Event::Load {
                                partition,
                                key: key.to_vec(),
                                value: r.value.map(<[u8]>::to_vec),
                            },
                        );
                    }
                }
                if offset == before {
                    break;
                }
            }
        }
        let now = self.io.clock.wall_ms();
        let mut inner = self.txns.lock();
        if inner.loads.get(&partition) != Some(&load) {
            return;
        }
        inner.loads.remove(&partition);
        let actions = inner
            .core
            .as_mut()
            .expect("loading")
            .step(now, Event::LoadFinished { partition });
        let appends = self.run_txn_actions(&mut inner, actions, now);
        assert!(appends.is_empty(), "finishing a load appends nothing");
    }
}

/// Keeps the coordinator's partitions in step with leadership, and ticks it: transaction
/// timeouts (every `transaction.abort.timed.out.transaction.cleanup.interval.ms`, or at the
/// next deadline), marker resends, and expiry of idle transactional ids (every
/// `transaction.remove.expired.transaction.cleanup.interval.ms`).
pub(crate) async fn timer_loop(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    let interval = broker.config.transaction_abort_interval_ms.max(1) as i64;
    let expire_every = broker.config.transaction_remove_expired_interval_ms.max(1) as i64;
    let mut next_expiry = broker.io.clock.wall_ms() + expire_every;
    loop {
        let now = broker.io.clock.wall_ms();
        let next = broker
            .txns
            .lock()
            .core
            .as_ref()
            .and_then(|c| c.next_deadline())
            .unwrap_or(i64::MAX)
            .max(now)
            .min(now + MAX_TIMER_SLEEP_MS)
            .min(now + interval);
        let wait = Duration::from_millis((next - now).max(1) as u64);
        tokio::select! {
            biased;
            _ = shutdown.changed() => return,
            _ = broker.io.clock.sleep(wait) => {}
        }
        broker.sync_txn_roles();
        broker.txn_event(Event::Tick).await;
        if broker.io.clock.wall_ms() >= next_expiry {
            next_expiry = broker.io.clock.wall_ms() + expire_every;
            broker.txn_event(Event::ExpireIds).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::protocol::{Decodable, Encodable};

    use super::*;

    /// A v2 transaction's marker keeps its transaction version across the wire (WriteTxnMarkers
    /// v1 and the tag); a marker without the tag (Admin's, an older Weir's) is a v1 one.
    #[test]
    fn the_marker_version_rides_in_its_tag() {
        let round_trip = |v2: bool| {
            let mut marker = WritableTxnMarker::default().with_producer_epoch(3);
            if v2 {
                mark_v2(&mut marker);
            }
            let request = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
            let mut buf = bytes::BytesMut::new();
            request.encode(&mut buf, 1).unwrap();
            let back = WriteTxnMarkersRequest::decode(&mut buf.freeze(), 1).unwrap();
            marker_is_v2(&back.markers[0])
        };
        assert!(round_trip(true));
        assert!(!round_trip(false));
    }
}
