//! The driver of the group coordinator core (`crate::group::Coordinator`): it owns the core
//! behind a short-held lock (never across an await), gives each request an id and a one-shot
//! channel, performs the core's actions (answers, appends to `__consumer_offsets` through the
//! same `Partition::append` path as produces, fsyncs with `weir.fsync.before.ack`), runs the
//! core's timers, replays the offsets log at start and creates it on first use.
//!
//! An offsets-log append counts as done when the partition's high watermark passes it, as an
//! acks=all produce does (Kafka writes group records with acks=-1): the driver waits through
//! the partition's delayed operations, bounded by `offsets.commit.timeout.ms`' default.
//!
//! Waiting is per request: a parked JoinGroup or SyncGroup waits on its own channel, answered
//! when its group's own events (another member's join, the leader's sync, a timer of that
//! group) complete it. The timer task sleeps until the core's earliest deadline; a request that
//! arms an earlier one wakes that task only.

pub(crate) mod state;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::broker::{delayed, shared::Broker, state::PartitionHandle};
use crate::group::{
    Action, AppendError, AppendToken, Coordinator, GroupConfig, GroupError, OffsetRecord,
    RequestId, Response, TxnProducer, OFFSETS_TOPIC,
};
use crate::log::batch::{self, BatchBuilder};
use crate::log::control;
use crate::replica::ProduceError;
use state::Inner;

/// Bound on requests waiting for an answer (parked joins and syncs, commits waiting on fsync).
const MAX_WAITING: usize = 100_000;
/// How long the timer task sleeps at most, so a missed wake-up costs at most this.
const MAX_TIMER_SLEEP_MS: i64 = 1000;
/// Bytes read per step while replaying an offsets partition.
const LOAD_CHUNK_BYTES: usize = 1 << 20;

/// How long an offsets-log append may wait for the high watermark (Kafka's default
/// `offsets.commit.timeout.ms`); past it the commit fails with COORDINATOR_NOT_AVAILABLE.
const OFFSETS_COMMIT_TIMEOUT: Duration = Duration::from_millis(5000);

/// How long an offset commit is held at most while its partition loads
/// ([`Broker::hold_while_loading`]); as long as a commit may wait for the high watermark.
const LOAD_HOLD: Duration = OFFSETS_COMMIT_TIMEOUT;

/// An offsets-log append not yet committed: it needs its fsync, or the high watermark to pass
/// it, before it counts.
struct Flush {
    token: AppendToken,
    handle: Arc<PartitionHandle>,
    up_to: i64,
    fsync: bool,
    /// Registered under the append's lock (see [`OffsetsAppended::wait`]); taken once.
    wait: Option<delayed::ProduceWait>,
}

pub(crate) fn group_config(config: &crate::config::ServerConfig) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms as i64,
        min_session_timeout_ms: config.group_min_session_timeout_ms,
        max_session_timeout_ms: config.group_max_session_timeout_ms,
        max_size: config.group_max_size as usize,
        offset_metadata_max_bytes: config.offset_metadata_max_bytes as usize,
        offsets_retention_ms: config.offsets_retention_minutes.saturating_mul(60_000),
        consumer: crate::group::consumer::ConsumerConfig {
            session_timeout_ms: config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
            assignors: config
                .group_consumer_assignors
                .iter()
                .filter_map(|n| crate::group::consumer::Assignor::parse(n))
                .collect(),
            max_size: (config.group_consumer_max_size as usize).min(crate::group::MAX_MEMBERS),
            #[cfg(any(madsim, test))]
            planted: crate::config::planted::Planted::new(config.planted_bug),
        },
        #[cfg(any(madsim, test))]
        planted: crate::config::planted::Planted::new(config.planted_bug),
        ..GroupConfig::default()
    }
}

/// An offsets-log append made: the offset after it, whether it needs an fsync before it
/// counts, and whether the high watermark already passed it.
struct OffsetsAppended {
    handle: Arc<PartitionHandle>,
    up_to: i64,
    fsync: bool,
    committed: bool,
    /// The wait for the high watermark to pass `up_to`, registered under the append's lock (as
    /// a produce's): a truncation or a leadership loss after the release ends it, where a wait
    /// registered later could be met by another leader's records reaching the same offset.
    wait: delayed::ProduceWait,
}

/// A failed wait for the high watermark, as a group write's error.
fn wait_error(e: delayed::WaitError) -> AppendError {
    match e {
        delayed::WaitError::Closed(delayed::Closed::Offline) => AppendError::Storage,
        delayed::WaitError::NotLeader | delayed::WaitError::Closed(_) => AppendError::NotLeader,
        delayed::WaitError::TimedOut
        | delayed::WaitError::Cancelled
        | delayed::WaitError::Full(_) => AppendError::Timeout,
    }
}

impl Broker {
    /// Runs one request through the core and waits for its answer (at once, or when parked,
    /// once its group's events complete it).
    pub(crate) async fn group_call(
        &self,
        f: impl FnOnce(&mut Coordinator, RequestId, i64) -> Vec<Action>,
    ) -> Result<Response, GroupError> {
        let now = self.io.clock.wall_ms();
        let (tx, rx) = oneshot::channel();
        let flushes = {
            let mut inner = self.groups.lock();
            if inner.waiting.len() >= MAX_WAITING {
                tracing::warn!("too many group requests waiting; refusing one");
                return Err(GroupError::CoordinatorNotAvailable);
            }
            let id = inner.next_request;
            inner.next_request += 1;
            inner.waiting.insert(id, tx);
            let actions = f(&mut inner.core, id, now);
            self.run_group_actions(&mut inner, actions, now)
        };
        self.finish_flushes(flushes).await;
        rx.await.map_err(|_| GroupError::CoordinatorNotAvailable)
    }

    /// Runs a core event that answers no request of its own (a tick, expiry, a marker).
    pub(crate) async fn group_event(&self, f: impl FnOnce(&mut Coordinator, i64) -> Vec<Action>) {
        let now = self.io.clock.wall_ms();
        let flushes = {
            let mut inner = self.groups.lock();
            let actions = f(&mut inner.core, now);
            self.run_group_actions(&mut inner, actions, now)
        };
        self.finish_flushes(flushes).await;
    }

    /// Performs actions in order under the lock; appends that need no fsync are reported done
    /// at once. Returns the fsyncs still to wait for.
    fn run_group_actions(&self, inner: &mut Inner, actions: Vec<Action>, now: i64) -> Vec<Flush> {
        let mut queue: VecDeque<Action> = actions.into();
        let mut flushes = Vec::new();
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Respond(id, response) => {
                    // The requester may have gone (connection closed): nothing to do then.
                    if let Some(tx) = inner.waiting.remove(&id) {
                        let _ = tx.send(response);
                    }
                }
                Action::Append {
                    partition,
                    token,
                    records,
                    transaction,
                } => match self.append_offsets(partition, &records, transaction, now) {
                    Ok(appended) if !appended.fsync && appended.committed => {
                        queue.extend(inner.core.append_done(token, Ok(()), now));
                    }
                    Ok(appended) => flushes.push(Flush {
                        token,
                        handle: appended.handle,
                        up_to: appended.up_to,
                        fsync: appended.fsync,
                        wait: Some(appended.wait),
                    }),
                    Err(e) => queue.extend(inner.core.append_done(token, Err(e), now)),
                },
                Action::MemberExpired { group, member } => {
                    tracing::info!(%group, %member, "consumer group member removed: session or rebalance timeout");
                }
            }
        }
        if let Some(next) = inner.core.next_deadline() {
            if next < inner.timer_planned {
                inner.timer_planned = next;
                self.groups.timer_wake.notify_one();
            }
        }
        flushes
    }

    async fn finish_flushes(&self, mut flushes: Vec<Flush>) {
        // Each round's completions may append again (a failed sync rebalances and persists).
        while !flushes.is_empty() {
            let results =
                crate::io::join_all(flushes.iter_mut().map(|f| self.commit_offsets(f)).collect())
                    .await;
            let now = self.io.clock.wall_ms();
            let mut inner = self.groups.lock();
            let mut next = Vec::new();
            for (flush, result) in flushes.iter().zip(results) {
                let actions = inner.core.append_done(flush.token, result, now);
                next.extend(self.run_group_actions(&mut inner, actions, now));
            }
            flushes = next;
        }
    }

    /// Makes one offsets-log append count: its fsync if it needs one, then the wait for the
    /// partition's high watermark to pass it.
    async fn commit_offsets(&self, flush: &mut Flush) -> Result<(), AppendError> {
        if flush.fsync {
            self.flush_partition(&flush.handle, flush.up_to)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "fsync of __consumer_offsets failed");
                    AppendError::Storage
                })?;
        }
        let wait = flush.wait.take().expect("a flush is committed once");
        let mut waits = [wait];
        let deadline = self.io.clock.monotonic() + OFFSETS_COMMIT_TIMEOUT;
        let never = delayed::ConnectionGone::never();
        let [result] = delayed::wait_produce(self.io.clock.as_ref(), &mut waits, deadline, &never)
            .await
            .try_into()
            .expect("one wait, one result");
        match result {
            Ok(delayed::Committed::InSync) => Ok(()),
            // Kafka turns NOT_ENOUGH_REPLICAS_AFTER_APPEND into COORDINATOR_NOT_AVAILABLE.
            Ok(delayed::Committed::BelowMinIsr) => Err(AppendError::Timeout),
            Err(e) => Err(wait_error(e)),
        }
    }

    /// Appends group records as one batch to `__consumer_offsets-partition` (a transactional
    /// one of the producer for a TxnOffsetCommit).
    fn append_offsets(
        &self,
        partition: i32,
        records: &[OffsetRecord],
        transaction: Option<TxnProducer>,
        now: i64,
    ) -> Result<OffsetsAppended, AppendError> {
        let Some(handle) = self.partition(OFFSETS_TOPIC, partition) else {
            return Err(AppendError::NotLeader);
        };
        let size: usize = records
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + 16)
            .sum();
        let mut builder = BatchBuilder::with_capacity(now, size);
        for (key, value) in records {
            builder.push(Some(key), value.as_deref(), now);
        }
        let bytes = match transaction {
            Some(t) => builder.finish_transactional(t.producer_id, t.producer_epoch),
            None => builder.finish(-1, -1, -1),
        };
        let reservation = handle.waiters.reserve_produce().map_err(wait_error)?;
        // Checked and used under one lock: a delete or shutdown cannot come in between.
        let Some(mut p) = handle.lock_open() else {
            return Err(AppendError::NotLeader);
        };
        // As for produces: nothing is written to an offline log directory (a later fsync could
        // "succeed" over pages a failed one dropped, and the commit would be answered as durable).
        if self.is_storage_offline() {
            return Err(AppendError::Storage);
        }
        let appended = match transaction {
            Some(_) => p.append_from_coordinator(&bytes, now),
            None => p.append(&bytes, now),
        };
        let appended = appended.map_err(|e| match e {
            ProduceError::MessageTooLarge { .. } => AppendError::TooLarge,
            ProduceError::InvalidProducerEpoch => AppendError::ProducerFenced,
            ProduceError::NotLeader => AppendError::NotLeader,
            ProduceError::Storage(e) => {
                tracing::error!(error = %e, "append to __consumer_offsets failed");
                AppendError::Storage
            }
            other => panic!("the coordinator built an invalid batch: {other:?}"),
        })?;
        let config = p.config();
        let fsync = self.config.fsync_before_ack
            || p.log()
                .flush_due(config.flush_messages, config.flush_ms, now);
        let up_to = appended.last_offset + 1;
        let committed = p.high_watermark() >= up_to;
        let wait = reservation.wait_for(up_to);
        drop(p);
        Ok(OffsetsAppended {
            handle,
            up_to,
            fsync,
            committed,
            wait,
        })
    }

    /// Holds an offset commit for `group_id` while this node answers it
    /// COORDINATOR_LOAD_IN_PROGRESS (it has not applied the offsets topic that another node's
    /// FindCoordinator already named it coordinator for, or the group's partition is loading),
    /// until that ends or [`LOAD_HOLD`] passes; then the commit goes to the core, which answers
    /// it as it stands. librdkafka retries a commit on that error twice only (about 300 ms of
    /// backoff), so a sync commit on a freshly created offsets topic would fail in the
    /// application; Kafka's Java consumer retries until its own timeout. Woken by every role
    /// sync and finished load (`Groups::load_change`).
    pub(crate) async fn hold_while_loading(&self, group_id: &str) {
        if !self.groups.read(|c| c.load_in_progress(group_id)) {
            return;
        }
        let Some(_held) = self.groups.hold() else {
            return;
        };
        let deadline = self.io.clock.monotonic() + LOAD_HOLD;
        loop {
            let changed = self.groups.load_change.notified();
            tokio::pin!(changed);
            // Registered before the check: a change right after it still wakes this wait.
            changed.as_mut().enable();
            if !self.groups.read(|c| c.load_in_progress(group_id)) {
                return;
            }
            let now = self.io.clock.monotonic();
            if now >= deadline {
                return;
            }
            tokio::select! {
                biased;
                _ = changed => {}
                _ = self.io.clock.sleep(deadline - now) => return,
            }
        }
    }

    /// Makes `__consumer_offsets` exist (created on first use, as Kafka does), with its
    /// replication factor clamped to the live brokers (one, here).
    pub(crate) async fn ensure_offsets_topic(&self) -> Result<(), String> {
        if self.image().topic(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let live_brokers = self.image().live_brokers().count().max(1) as i16;
        let mut configs = BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        configs.insert("compression.type".to_string(), "producer".to_string());
        configs.insert(
            "segment.bytes".to_string(),
            self.config.offsets_topic_segment_bytes.to_string(),
        );
        let new = crate::controller::NewTopic {
            name: OFFSETS_TOPIC.to_string(),
            partitions: self.config.offsets_topic_num_partitions,
            replication_factor: self
                .config
                .offsets_topic_replication_factor
                .min(live_brokers),
            configs,
            ..Default::default()
        };
        self.create_internal_topic(new).await
    }

    /// The coordinator of `group_id`: the broker that leads its `__consumer_offsets`
    /// partition in the image, with its client endpoint (`partitionFor` in Kafka's
    /// `KafkaApis.getCoordinator`). Err (COORDINATOR_NOT_AVAILABLE) while the topic is not in
    /// the image or the partition has no leader with a reachable endpoint.
    pub(crate) fn coordinator_endpoint(
        &self,
        group_id: &str,
    ) -> Result<(i32, String, u16), String> {
        let partitions = self
            .image()
            .topic(OFFSETS_TOPIC)
            .map(|t| t.partitions)
            .ok_or_else(|| "the offsets topic is not ready".to_string())?;
        let index = crate::group::placement::partition_for(group_id, partitions);
        self.internal_partition_leader(OFFSETS_TOPIC, index)
    }

    /// The offsets topic was just created: the partitions this node leads are loaded.
    pub(crate) fn offsets_topic_created(&self, _partitions: i32) {
        self.sync_offsets_roles();
    }

    /// Tests: whether the coordinator holds `__consumer_offsets` partition `p` (loading it or
    /// loaded).
    #[cfg(test)]
    pub(crate) fn holds_offsets_partition(&self, p: i32) -> bool {
        self.groups.lock().core.holds_partition(p)
    }

    /// At start: the offsets partitions this node leads are replayed in the background.
    pub(crate) fn start_offsets_load(&self) {
        self.sync_offsets_roles();
    }

    /// Makes the coordinator hold exactly the `__consumer_offsets` partitions this node leads
    /// in the image and has open: a newly led one is replayed from the local (replicated) log
    /// (COORDINATOR_LOAD_IN_PROGRESS meanwhile), one led elsewhere now is unloaded (its groups
    /// end, parked joins and syncs get NOT_COORDINATOR). Called after every reconcile pass and
    /// from the coordinator's timer loop (which retries a load deferred while an unloaded
    /// group's appends were still in flight). Idempotent.
    pub(crate) fn sync_offsets_roles(&self) {
        let _one_at_a_time = self.groups.roles();
        let image = self.image();
        let Some(topic) = image.topic(OFFSETS_TOPIC) else {
            return;
        };
        // Worked out before the coordinator's lock: the partition map has its own lock. Before
        // the start-up gate opens the image may be stale and name this node leader of what it
        // no longer leads (`startup_gate`): it coordinates nothing until then, as it leads no
        // partition.
        let serving = self.serving_partitions();
        // (leads in the image, its replica has taken the leadership up: loadable).
        let leads: Vec<(bool, bool)> = (0..topic.partitions)
            .map(|p| {
                let led = image
                    .partition(topic.id, p)
                    .filter(|x| serving && x.leader == self.config.node_id);
                let leads = led.is_some() && self.partition(OFFSETS_TOPIC, p).is_some();
                let ready =
                    led.is_some_and(|x| self.replica_leads(OFFSETS_TOPIC, p, x.leader_epoch));
                (leads, leads && ready)
            })
            .collect();
        let mut to_load = Vec::new();
        {
            let now = self.io.clock.wall_ms();
            let mut inner = self.groups.lock();
            inner.core.set_partition_count(topic.partitions);
            let mut actions = Vec::new();
            for (p, &(leads, ready)) in leads.iter().enumerate() {
                let p = p as i32;
                let holds = inner.core.holds_partition(p);
                // Not yet ready: the reconcile pass that takes the leadership up, or the timer
                // loop, calls again.
                if ready && !holds && !inner.core.has_unloading_groups(p) {
                    inner.core.load_begin(p);
                    let id = inner.next_load;
                    inner.next_load += 1;
                    inner.loads.insert(p, id);
                    to_load.push((p, id));
                } else if !leads && holds {
                    tracing::info!(
                        partition = p,
                        "no longer leads {OFFSETS_TOPIC}-{p}: its groups are unloaded"
                    );
                    inner.loads.remove(&p);
                    actions.extend(inner.core.unload(p));
                }
            }
            let flushes = self.run_group_actions(&mut inner, actions, now);
            assert!(flushes.is_empty(), "unloading appends nothing");
        }
        self.groups.load_change.notify_waiters();
        if to_load.is_empty() {
            return;
        }
        // Replayed off the caller's path (reconcile holds the metadata lock).
        if let Some(broker) = self.this.upgrade() {
            self.io.spawn(async move {
                #[cfg(any(madsim, test))]
                broker.coordinator_load_stall().await;
                for (p, id) in to_load {
                    broker.load_offsets_partition(p, id);
                }
            });
        }
    }

    /// Fault point `coordinator_load_stall` (simulator and unit tests only; `config::fault_points`):
    /// the replay starts late, as on a slow disk, so the partitions just begun stay loading
    /// while their groups' members come asking (they must be told COORDINATOR_LOAD_IN_PROGRESS).
    #[cfg(any(madsim, test))]
    async fn coordinator_load_stall(&self) {
        use crate::config::fault_points::{FaultPoints, COORDINATOR_LOAD_STALL_MS};
        let chance = self.config.fault_points.coordinator_load_stall;
        if !FaultPoints::strikes(chance, self.io.rng.as_ref()) {
            return;
        }
        let ms = FaultPoints::draw(COORDINATOR_LOAD_STALL_MS, self.io.rng.as_ref());
        tracing::debug!(ms, "fault point coordinator_load_stall: the replay waits");
        self.io.clock.sleep(Duration::from_millis(ms)).await;
    }

    /// Replays one partition from its start to its log end: a new leader's high watermark may
    /// trail records the old leader had already committed (it learns the HW a fetch later).
    /// Transactional offset batches stay pending until the replay reaches their marker. The
    /// load finishes only once it has read the whole log under the coordinator's lock, so a
    /// marker appended during the replay is either replayed or settled live afterwards.
    fn load_offsets_partition(&self, partition: i32, load: u64) {
        let started = self.io.clock.monotonic();
        let mut records_loaded = 0u64;
        let handle = self.partition(OFFSETS_TOPIC, partition);
        let mut offset = handle.as_ref().map_or(0, |h| h.lock().log_start_offset());
        // An empty read short of the log end (a gap) is retried once, then ends the replay.
        let mut stalled = false;
        // The loop ends holding the coordinator's lock, and the load finishes under it: a
        // marker settled between the caught-up check and the finish would find the partition
        // still loading (ignored) after the replay had read past where it lands.
        let mut inner = loop {
            let Some(handle) = handle.as_ref() else {
                break self.groups.lock();
            };
            // To the log end, not the high watermark (`Partition::read`): the watermark of
            // a replica that just reopened its log starts at the log start, a new leader's
            // trails the old one's, and what this leader holds is what it will commit.
            let chunk = match read_offsets(&self.config, handle, offset) {
                Ok(chunk) => chunk,
                Err(e) => {
                    tracing::error!(partition, offset, error = ?e,
                        "cannot read __consumer_offsets; the rest of the partition is skipped");
                    break self.groups.lock();
                }
            };
            let mut inner = self.groups.lock();
            if inner.loads.get(&partition) != Some(&load) {
                return;
            }
            if chunk.is_empty() {
                // Caught up, checked under the coordinator's lock (a marker's live settling
                // takes it after the marker is in the log).
                if stalled || handle.lock().log_end_offset() <= offset {
                    break inner;
                }
                stalled = true;
                continue;
            }
            stalled = false;
            let before = offset;
            for item in batch::iter(&chunk) {
                let Ok((at, header)) = item else { break };
                let bytes = &chunk[at..at + header.total_len()];
                offset = header.next_offset();
                if header.is_control() {
                    if let Ok(Some(marker)) = control::parse_marker(bytes, &header) {
                        inner
                            .core
                            .load_marker(partition, header.producer_id, marker.commit);
                    }
                    continue;
                }
                let Some(Ok(records)) = batch::records(bytes, &header) else {
                    tracing::warn!(
                        partition,
                        base = header.base_offset,
                        "skipping an unreadable (compressed or malformed) offsets batch"
                    );
                    continue;
                };
                let transactional = header.is_transactional().then_some(header.producer_id);
                for r in records {
                    let Some(key) = r.key else { continue };
                    records_loaded += 1;
                    let loaded = match transactional {
                        Some(pid) => inner.core.load_txn_record(partition, pid, key, r.value),
                        None => inner.core.load_record(partition, key, r.value),
                    };
                    if let Err(e) = loaded {
                        tracing::warn!(partition, offset = r.offset, error = %e,
                            "skipping a record of __consumer_offsets");
                    }
                }
            }
            if offset == before {
                break inner;
            }
        };
        let now = self.io.clock.wall_ms();
        if inner.loads.get(&partition) != Some(&load) {
            return;
        }
        inner.core.load_finish(partition, now);
        if let Some(next) = inner.core.next_deadline() {
            if next < inner.timer_planned {
                inner.timer_planned = next;
                self.groups.timer_wake.notify_one();
            }
        }
        drop(inner);
        self.groups.load_change.notify_waiters();
        let elapsed = self.io.clock.monotonic().saturating_sub(started);
        if records_loaded > 0 {
            tracing::info!(
                partition,
                records_loaded,
                ?elapsed,
                "loaded __consumer_offsets partition"
            );
        }
    }

    /// A transaction marker of `producer_id` is committed on `__consumer_offsets-partition`
    /// (this node leads it): the transaction's pending offsets there are committed or dropped.
    pub(crate) async fn settle_txn_offsets(&self, partition: i32, producer_id: i64, commit: bool) {
        self.group_event(|core, now| {
            if core.holds_partition(partition) {
                core.txn_marker(partition, producer_id, commit, now)
            } else {
                Vec::new()
            }
        })
        .await;
    }
}

/// Runs the core's timers (join, sync and session timeouts) when they are due, and offset
/// expiry every `offsets.retention.check.interval.ms`.
pub(crate) async fn timer_loop(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    let expiry_every = broker.config.offsets_retention_check_interval_ms.max(1) as i64;
    let mut next_expiry = broker.io.clock.wall_ms() + expiry_every;
    loop {
        let now = broker.io.clock.wall_ms();
        let wait_until = {
            let mut inner = broker.groups.lock();
            let next = inner
                .core
                .next_deadline()
                .unwrap_or(i64::MAX)
                .min(now + MAX_TIMER_SLEEP_MS)
                .min(next_expiry);
            inner.timer_planned = next;
            next
        };
        let wait = Duration::from_millis((wait_until - now).max(0) as u64);
        tokio::select! {
            biased;
            _ = broker.io.clock.sleep(wait) => {}
            _ = broker.groups.timer_wake.notified() => {}
            _ = shutdown.changed() => return,
        }
        broker.group_event(|core, now| core.tick(now)).await;
        broker.sync_offsets_roles();
        if broker.io.clock.wall_ms() >= next_expiry {
            next_expiry = broker.io.clock.wall_ms() + expiry_every;
            broker
                .group_event(|core, now| core.expire_offsets(now))
                .await;
        }
    }
}

/// A chunk of `__consumer_offsets` for the replay, to the log end. Planted
/// `group-load-to-high-watermark`: only to the high watermark (`Partition::read`).
fn read_offsets(
    config: &crate::config::ServerConfig,
    handle: &PartitionHandle,
    offset: i64,
) -> Result<bytes::Bytes, crate::log::ReadError> {
    #[cfg(any(madsim, test))]
    if crate::planted!(config, GroupLoadToHighWatermark) {
        return handle.lock().read(offset, LOAD_CHUNK_BYTES);
    }
    let _ = config;
    handle.lock().read_for_replica(offset, LOAD_CHUNK_BYTES)
}
