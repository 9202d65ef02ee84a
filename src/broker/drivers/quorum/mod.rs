//! The metadata quorum driver: one task per node owns the pure [`Raft`] core, its log
//! ([`raft_log::RaftLog`] over `__cluster_metadata-0`) and `quorum-state`, and performs the
//! core's actions in order: sends go out over [`peer::Link`]s (requests) or answer the inbound
//! request they reply to; fetches are served from the log at once; appends are fsynced before
//! `Flushed` is reported; `quorum-state` is written atomically before `QuorumStatePersisted`;
//! commits apply the committed records, in order, to the broker's image. Timers come from
//! `next_deadline()`, entropy from `io.rng`.
//!
//! Everything reaches the task through one bounded channel ([`INBOX`]): inbound quorum
//! requests (from the controller listener), responses to the core's requests, proposals from
//! the active controller, resignation at shutdown. A failed disk write stops the driver (the
//! log directory goes offline, as Kafka halts), never a panic.
//!
//! [`peer::Link`]: crate::broker::peer::Link

pub mod applied;
pub mod batches;
pub mod codec;
#[cfg(any(madsim, test))]
mod fault_point;
pub mod handle;
pub mod legacy;
pub mod raft_log;
pub mod snapshot_file;
mod sole_voter;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sync::watch;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::{mpsc, oneshot};

use crate::broker::drivers::quorum_status::{QuorumRole, QuorumStatus, ReplicaProgress};
use crate::broker::peer::{self, Dialer, Link};
use crate::broker::shared::Broker;
use crate::controller::image::MetadataImage;
use crate::io::Io;
use crate::raft::{
    Action, DropReason, Event, Message, NodeId, OffsetAndEpoch, Raft, RaftConfig, RoleKind,
    SnapshotMeta,
};
use handle::Input;
pub use handle::{Answer, ControllerView, ProposeError, QuorumHandle};
use raft_log::{LoadedSnapshot, RaftLog};

/// Inputs waiting for the driver.
pub const INBOX: usize = 1024;
/// Inbound requests of one kind from one node waiting for the core's answer.
const REPLIES_PER_PEER: usize = 8;
/// How long a request to a peer may take before its answer is ignored (the core resends).
const PEER_TIMEOUT: Duration = Duration::from_millis(2000);
/// What the applier applies, in commit order.
enum Committed {
    /// One committed batch: its records `(offset, value)` (none for a control batch), the
    /// offset after it and its epoch.
    Batch {
        values: Vec<(u64, Bytes)>,
        end: u64,
        epoch: u32,
    },
    /// A snapshot replaces the image: everything below `end` is in it.
    Snapshot { image: Arc<MetadataImage>, end: u64 },
}

/// Committed batches waiting for the applier (back-pressure on the driver past it).
const APPLY_QUEUE: usize = 4096;
/// The longest the driver sleeps without a deadline.
const MAX_IDLE: Duration = Duration::from_millis(1000);

/// Resolves `controller.quorum.voters` to socket addresses, names through the `io` layer's
/// resolver (once, at start: a voter whose name does not resolve stops the start, naming it).
pub async fn voter_addrs(
    io: &Io,
    config: &crate::config::ServerConfig,
) -> anyhow::Result<BTreeMap<NodeId, SocketAddr>> {
    let mut out = BTreeMap::new();
    for v in &config.controller_quorum_voters {
        let addr = io.net.resolve(&v.host, v.port).await.map_err(|e| {
            anyhow::anyhow!(
                "controller.quorum.voters: host '{}' of voter {} does not resolve: {e}",
                v.host,
                v.id
            )
        })?;
        out.insert(v.id, addr);
    }
    Ok(out)
}

/// Opens the quorum's log and state and starts the driver task. The returned handle goes into
/// the broker; `attach` gives the task the broker once it exists.
pub async fn open(
    io: &Io,
    config: &crate::config::ServerConfig,
    log_dir: PathBuf,
    cluster_id: String,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<(Arc<QuorumHandle>, Starter)> {
    let mut voters = voter_addrs(io, config).await?;
    let node_id = config.node_id;
    if voters.is_empty() {
        // A single node is its own quorum of one. A sole voter never sends to itself, so its
        // address is never dialled.
        voters.insert(node_id, SocketAddr::from(([127, 0, 0, 1], 0)));
    }
    let mut cfg = RaftConfig::new(node_id, voters.keys().copied().collect());
    cfg.election_timeout_ms = config.quorum_election_timeout_ms;
    cfg.fetch_timeout_ms = config.quorum_fetch_timeout_ms;
    cfg.election_backoff_max_ms = config.quorum_election_timeout_ms;
    cfg.request_timeout_ms = (cfg.fetch_timeout_ms / 4).clamp(1, 500);
    let park_ms = (cfg.request_timeout_ms / 2).min(250);
    // The leader parks a fetch at its log end (see `parked`), so a follower need not pause
    // after an empty answer: a short pause only guards against a leader that answers at once.
    cfg.fetch_idle_backoff_ms = 5;
    #[cfg(any(madsim, test))]
    {
        cfg.planted = crate::config::planted::Planted::new(config.planted_bug);
    }
    let now_wall = io.clock.wall_ms();
    // A metadata log written by a single node before it ran as a quorum becomes a snapshot.
    legacy::migrate(io.disk.clone(), &log_dir, now_wall).await?;
    #[allow(unused_mut)]
    let mut log_config = crate::log::LogConfig::default();
    #[cfg(any(madsim, test))]
    {
        log_config.planted = crate::config::planted::Planted::new(config.planted_bug);
    }
    let (log, state, loaded) =
        RaftLog::open_with(io.disk.clone(), &log_dir, log_config, now_wall).await?;
    if let Some(l) = &loaded {
        tracing::info!(snapshot = %snapshot_file::file_name(l.meta.id), log_start = log.start_offset(),
            log_end = log.end_offset(), "loaded the metadata snapshot");
    }
    let snapshot_end = loaded.as_ref().map_or(0, |l| l.meta.id.offset);
    let stored = raft_log::read_quorum_state(io.disk.as_ref(), &log_dir)?;
    let now = io.clock.monotonic().as_millis() as u64;
    let core = Raft::new(cfg, stored, state, now, io.rng.next_u64())
        .map_err(|e| anyhow::anyhow!("the metadata quorum cannot start: {e}"))?;
    // The controller listener's TLS and SASL, as the config check accepted them.
    let dialer = match config.is_clustered() {
        true => {
            let outbound = config
                .controller_outbound()
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Dialer::new(&outbound, io)
                .map_err(|e| anyhow::anyhow!("controller listener '{}': {e}", outbound.listener))?
        }
        false => None,
    };
    let host_of = |id: NodeId| {
        let voter = config.controller_quorum_voters.iter().find(|v| v.id == id);
        voter.map(|v| v.host.clone()).unwrap_or_default()
    };
    let peers = || {
        voters
            .iter()
            .filter(|(id, _)| **id != node_id)
            .map(|(id, addr)| {
                let security = dialer.clone().map(|d| (d, host_of(*id)));
                (*id, Link::secured(io, *addr, shutdown.clone(), security))
            })
            .collect::<BTreeMap<_, _>>()
    };
    let (links, request_links) = (peers(), peers());
    let (tx, rx) = mpsc::channel(INBOX);
    let handle = Arc::new(QuorumHandle {
        node_id,
        tx: tx.clone(),
        status: Mutex::new(QuorumStatus {
            node_id,
            role: QuorumRole::Unattached,
            epoch: core.epoch(),
            leader: None,
            high_watermark: core.high_watermark(),
            log_end: core.end_offset(),
            log_start: core.log_start(),
            snapshot: core.latest_snapshot().map(|s| s.id),
            replicas: Vec::new(),
        }),
        active: AtomicBool::new(false),
        links,
        request_links,
        voters,
        controller: watch::channel(ControllerView {
            leader: None,
            epoch: core.epoch(),
            active: false,
        })
        .0,
    });
    let driver = Driver {
        io: io.clone(),
        handle: handle.clone(),
        is_voter: handle.voters.contains_key(&node_id),
        core,
        log,
        cluster_id,
        client_id: format!("weir-quorum-{node_id}"),
        tx,
        replies: BTreeMap::new(),
        reply_seq: 0,
        applied: snapshot_end,
        apply_tx: None,
        applied_end: watch::channel(snapshot_end).1,
        leader_since: None,
        waiters: VecDeque::new(),
        broker: None,
        parked: BTreeMap::new(),
        parking: None,
        unpark: false,
        park_ms,
        #[cfg(any(madsim, test))]
        fault_points: config.fault_points,
        #[cfg(any(madsim, test))]
        first_commit_epoch: None,
        #[cfg(any(madsim, test))]
        standing_log: None,
        #[cfg(any(madsim, test))]
        old_tail_epoch: None,
    };
    let policy = SnapshotPolicy {
        max_bytes: config.metadata_snapshot_max_bytes,
        interval_ms: config.metadata_snapshot_interval_ms,
        dir: driver.log.dir().to_path_buf(),
    };
    Ok((
        handle,
        Starter {
            driver,
            rx,
            shutdown,
            loaded,
            policy,
        },
    ))
}

/// When the applier snapshots the image: `metadata.log.max.record.bytes.between.snapshots`
/// of records applied since the last snapshot, or `metadata.log.max.snapshot.interval.ms`
/// since it with anything applied (0: never by time, as in Kafka).
struct SnapshotPolicy {
    max_bytes: u64,
    interval_ms: u64,
    dir: PathBuf,
}

/// The driver, built but not yet running (it needs the broker).
pub struct Starter {
    driver: Driver,
    rx: mpsc::Receiver<Input>,
    shutdown: watch::Receiver<bool>,
    loaded: Option<LoadedSnapshot>,
    policy: SnapshotPolicy,
}

impl Starter {
    /// The image of the snapshot loaded at start and the offset it covers: the broker starts
    /// from it rather than from an empty image.
    pub fn initial_image(&self) -> Option<(MetadataImage, u64)> {
        self.loaded
            .as_ref()
            .map(|l| (l.image.clone(), l.meta.id.offset))
    }

    pub fn start(mut self, broker: Arc<Broker>) {
        let io = self.driver.io.clone();
        let (apply_tx, apply_rx) = mpsc::channel(APPLY_QUEUE);
        let start = self.driver.applied;
        if let Some(l) = self.loaded.take() {
            // The applier reconciles the partitions against the loaded image first.
            let item = Committed::Snapshot {
                image: Arc::new(l.image),
                end: l.meta.id.offset,
            };
            let queued = apply_tx.try_send(item).is_ok();
            assert!(queued, "an empty queue has room");
        }
        let (applied_tx, applied_end) = watch::channel(start);
        io.spawn(apply_loop(
            broker.clone(),
            apply_rx,
            applied_tx,
            self.policy,
            self.driver.tx.clone(),
        ));
        self.driver.apply_tx = Some(apply_tx);
        self.driver.applied_end = applied_end;
        self.driver.broker = Some(broker);
        io.spawn(self.driver.run(self.rx, self.shutdown));
    }
}

/// Applies committed batches to the broker in commit order and publishes how far it got;
/// snapshots the image as `policy` says and reports each snapshot to the driver. Ends when
/// the driver drops its sender.
async fn apply_loop(
    broker: Arc<Broker>,
    mut rx: mpsc::Receiver<Committed>,
    applied: watch::Sender<u64>,
    policy: SnapshotPolicy,
    driver: mpsc::Sender<Input>,
) {
    let mut since_bytes: u64 = 0;
    let mut since_ms = broker.io.clock.monotonic().as_millis() as u64;
    while let Some(item) = rx.recv().await {
        match item {
            Committed::Batch { values, end, epoch } => {
                broker.apply_committed(&values).await;
                broker.committed.advance_to(end);
                let _ = applied.send(end);
                since_bytes += values.iter().map(|(_, v)| v.len() as u64).sum::<u64>();
                let now = broker.io.clock.monotonic().as_millis() as u64;
                let due = since_bytes >= policy.max_bytes
                    || (since_bytes > 0
                        && policy.interval_ms > 0
                        && now.saturating_sub(since_ms) >= policy.interval_ms);
                if !due {
                    continue;
                }
                let image = broker.image();
                let id = OffsetAndEpoch { offset: end, epoch };
                let body = image.to_snapshot();
                match snapshot_file::write(broker.io.disk.as_ref(), &policy.dir, id, &body).await {
                    Ok(meta) => {
                        tracing::info!(snapshot = %snapshot_file::file_name(id), bytes = meta.size,
                            records = since_bytes, "metadata snapshot written");
                        since_bytes = 0;
                        since_ms = now;
                        if driver.send(Input::SnapshotTaken(meta)).await.is_err() {
                            return;
                        }
                    }
                    // The log still holds everything; the next batch tries again.
                    Err(e) => tracing::warn!(error = %e, "writing a metadata snapshot failed"),
                }
            }
            Committed::Snapshot { image, end } => {
                broker.install_snapshot(image, end).await;
                let _ = applied.send(end);
                since_bytes = 0;
                since_ms = broker.io.clock.monotonic().as_millis() as u64;
            }
        }
    }
}

/// What woke the driver.
enum Wake {
    Input(Input),
    Tick,
    /// The applier moved on: proposals may be answered, the controller may become active.
    Applied,
}

/// Which reply queue an answer goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Vote,
    Begin,
    End,
    Fetch,
    FetchSnapshot,
}

fn request_kind(m: &Message) -> Option<Kind> {
    match m {
        Message::VoteRequest(_) => Some(Kind::Vote),
        Message::BeginQuorumEpochRequest(_) => Some(Kind::Begin),
        Message::EndQuorumEpochRequest(_) => Some(Kind::End),
        Message::FetchRequest(_) => Some(Kind::Fetch),
        Message::FetchSnapshotRequest(_) => Some(Kind::FetchSnapshot),
        _ => None,
    }
}

fn response_kind(m: &Message) -> Option<Kind> {
    match m {
        Message::VoteResponse(_) => Some(Kind::Vote),
        Message::BeginQuorumEpochResponse(_) => Some(Kind::Begin),
        Message::EndQuorumEpochResponse(_) => Some(Kind::End),
        Message::FetchResponse(_) => Some(Kind::Fetch),
        Message::FetchSnapshotResponse(_) => Some(Kind::FetchSnapshot),
        _ => None,
    }
}

/// An inbound request's answer channel, with its arrival number.
type PendingReply = (u64, oneshot::Sender<Answer>);

struct Waiter {
    end: u64,
    epoch: u32,
    reply: oneshot::Sender<Result<u64, ProposeError>>,
}

struct Driver {
    io: Io,
    handle: Arc<QuorumHandle>,
    is_voter: bool,
    core: Raft,
    log: RaftLog,
    cluster_id: String,
    client_id: String,
    tx: mpsc::Sender<Input>,
    /// Inbound requests waiting for the core's answer, oldest first, per sender and kind.
    replies: BTreeMap<(NodeId, Kind), VecDeque<PendingReply>>,
    reply_seq: u64,
    /// Everything below this offset is committed and handed to the applier.
    applied: u64,
    /// Committed batches to the applier task, which applies them to the broker in order, off
    /// the driver (reconciliation opens directories and fsyncs: the quorum keeps answering).
    apply_tx: Option<mpsc::Sender<Committed>>,
    /// Everything below this offset is applied to the broker's image (the applier's mark).
    applied_end: watch::Receiver<u64>,
    /// `(epoch, offset after its LeaderChange)` while this node leads.
    leader_since: Option<(u32, u64)>,
    /// Proposals waiting for their commit, in offset order.
    waiters: VecDeque<Waiter>,
    broker: Option<Arc<Broker>>,
    /// Fetches at the leader's log end whose (empty) answer is held back, as Kafka's leader
    /// parks a fetch up to its max wait: fed to the core again when the log grows or the high
    /// watermark moves, or at the deadline. One per fetcher at most.
    parked: BTreeMap<NodeId, (Message, u64)>,
    /// The fetch being stepped that may be parked (its sender and the request).
    parking: Option<(NodeId, Message)>,
    /// The log grew or the high watermark moved: answer parked fetches.
    unpark: bool,
    /// How long a fetch may stay parked: well under the fetcher's request timeout.
    park_ms: u64,
    /// The fault points armed (`fault_point.rs`; simulator and tests only).
    #[cfg(any(madsim, test))]
    fault_points: crate::config::FaultPoints,
    /// The last epoch whose first commit as leader `quorum_first_commit_stall` considered.
    #[cfg(any(madsim, test))]
    first_commit_epoch: Option<u32>,
    /// The log's end (and last epoch) when this node last stood as a candidate.
    #[cfg(any(madsim, test))]
    standing_log: Option<OffsetAndEpoch>,
    /// The epoch this node leads with an uncommitted tail of an older epoch than the last.
    #[cfg(any(madsim, test))]
    old_tail_epoch: Option<u32>,
}

/// A disk failure: the driver stops.
struct Fatal(String);

impl Driver {
    fn now(&self) -> u64 {
        self.io.clock.monotonic().as_millis() as u64
    }

    fn broker(&self) -> &Arc<Broker> {
        self.broker
            .as_ref()
            .expect("the driver runs with its broker")
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Input>, mut shutdown: watch::Receiver<bool>) {
        self.publish();
        loop {
            let now = self.now();
            let parked_until = self.parked.values().map(|(_, until)| *until).min();
            let deadline = match (self.core.next_deadline(), parked_until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let wait = match deadline {
                Some(d) => Duration::from_millis(d.saturating_sub(now)).min(MAX_IDLE),
                None => MAX_IDLE,
            };
            let input = tokio::select! {
                biased;
                // The timer first, so a busy inbox never starves elections and check-quorum.
                _ = self.io.clock.sleep(wait) => Wake::Tick,
                i = rx.recv() => match i { Some(i) => Wake::Input(i), None => break },
                changed = self.applied_end.changed() => match changed {
                    Ok(()) => Wake::Applied,
                    Err(_) => break,
                },
                _ = shutdown.changed() => break,
            };
            let result = match input {
                Wake::Tick => {
                    self.step(Event::Tick);
                    self.perform().await.map(|_| true)
                }
                Wake::Applied => Ok(true),
                Wake::Input(input) => self.handle(input).await,
            };
            self.resolve_waiters();
            let result = match result {
                Ok(true) => self.release_parked().await.map(|_| true),
                other => other,
            };
            match result {
                Ok(true) => {}
                Ok(false) => break,
                Err(Fatal(reason)) => {
                    tracing::error!(%reason, "the metadata quorum stops");
                    self.broker()
                        .storage_failed("the metadata quorum", &std::io::Error::other(reason));
                    break;
                }
            }
            self.publish();
        }
        self.handle.active.store(false, Ordering::Release);
        for w in self.waiters.drain(..) {
            let _ = w.reply.send(Err(ProposeError::Stopped));
        }
    }

    fn step(&mut self, event: Event) {
        let now = self.now();
        let entropy = self.io.rng.next_u64();
        self.core.step(now, entropy, event);
    }

    /// One input; `Ok(false)` ends the driver.
    async fn handle(&mut self, input: Input) -> Result<bool, Fatal> {
        match input {
            Input::Request {
                from,
                message,
                reply,
            } => {
                #[cfg(any(madsim, test))]
                if let Some(hold) = self.rival_vote_hold(from, &message) {
                    let tx = self.tx.clone();
                    let io = self.io.clone();
                    self.io.spawn(async move {
                        io.clock.sleep(hold).await;
                        let _ = tx
                            .send(Input::Held {
                                from,
                                message,
                                reply,
                            })
                            .await;
                    });
                    return Ok(true);
                }
                self.request(from, message, reply).await?
            }
            #[cfg(any(madsim, test))]
            Input::Held {
                from,
                message,
                reply,
            } => self.request(from, message, reply).await?,
            Input::Response { from, message } => {
                self.step(Event::Message { from, message });
                self.perform().await?;
            }
            Input::Propose { values, reply } => self.propose(values, reply).await?,
            Input::Shutdown { reply } => {
                let now = self.now();
                let entropy = self.io.rng.next_u64();
                self.core.resign(now, entropy);
                self.perform().await?;
                let wall = self.io.clock.wall_ms();
                if let Err(e) = self.log.close(wall).await {
                    tracing::warn!(error = %e, "closing the metadata log failed");
                }
                let _ = reply.send(());
                return Ok(false);
            }
            Input::SnapshotTaken(meta) => {
                self.step(Event::SnapshotTaken(meta));
                self.perform().await?;
            }
        }
        Ok(true)
    }

    /// An inbound request: queued for the core's answer, stepped, and answered with the
    /// protocol's error if the core dropped it.
    async fn request(
        &mut self,
        from: NodeId,
        message: Message,
        reply: oneshot::Sender<Answer>,
    ) -> Result<(), Fatal> {
        let Some(kind) = request_kind(&message) else {
            let _ = reply.send(Answer::Error(ResponseError::InvalidRequest));
            return Ok(());
        };
        if let Some((earlier, _)) = self.parked.remove(&from) {
            // A new fetch while one is parked (the fetcher gave up on it): answer the
            // parked one first, so replies keep their order.
            self.step(Event::Message {
                from,
                message: earlier,
            });
            self.perform().await?;
        }
        let queue = self.replies.entry((from, kind)).or_default();
        queue.retain(|(_, r)| !r.is_closed());
        if queue.len() >= REPLIES_PER_PEER {
            let _ = reply.send(Answer::Error(ResponseError::RequestTimedOut));
            return Ok(());
        }
        self.reply_seq += 1;
        let seq = self.reply_seq;
        queue.push_back((seq, reply));
        if kind == Kind::Fetch && self.core.role() == RoleKind::Leader {
            self.parking = Some((from, message.clone()));
        }
        self.step(Event::Message { from, message });
        let dropped = self.perform_noting_drops(from).await;
        self.parking = None;
        let dropped = dropped?;
        if let Some(reason) = dropped {
            // The core ignored it: answer the protocol's error, not silence.
            if let Some(queue) = self.replies.get_mut(&(from, kind)) {
                if let Some(at) = queue.iter().position(|(s, _)| *s == seq) {
                    let (_, reply) = queue.remove(at).expect("position is valid");
                    let _ = reply.send(Answer::Error(drop_code(reason)));
                }
            }
        }
        Ok(())
    }

    async fn propose(
        &mut self,
        values: Vec<Bytes>,
        reply: oneshot::Sender<Result<u64, ProposeError>>,
    ) -> Result<(), Fatal> {
        let active = self.leader_since.is_some_and(|(e, since)| {
            e == self.core.epoch()
                && *self.applied_end.borrow() >= since
                && self.core.role() == RoleKind::Leader
        });
        if !active || values.is_empty() {
            let _ = reply.send(Err(ProposeError::NotController));
            return Ok(());
        }
        let refs: Vec<&[u8]> = values.iter().map(|v| v.as_ref()).collect();
        let data = batches::data_batch(&refs, self.io.clock.wall_ms());
        let now = self.now();
        match self.core.propose(now, values.len() as u32, data.into()) {
            Ok(base) => {
                self.waiters.push_back(Waiter {
                    end: base + values.len() as u64,
                    epoch: self.core.epoch(),
                    reply,
                });
                self.perform().await
            }
            Err(_) => {
                let _ = reply.send(Err(ProposeError::NotController));
                Ok(())
            }
        }
    }

    async fn perform(&mut self) -> Result<(), Fatal> {
        self.perform_noting_drops(-1).await.map(|_| ())
    }

    /// Performs every action the core produced, in order, feeding the follow-up events
    /// (flushed, persisted) after each round. Returns the reason of a drop of an input from
    /// `from`, if one happened.
    async fn perform_noting_drops(&mut self, from: NodeId) -> Result<Option<DropReason>, Fatal> {
        let mut dropped = None;
        let mut rounds = 0;
        loop {
            #[allow(unused_mut)]
            let mut actions = self.core.take_actions();
            if actions.is_empty() {
                return Ok(dropped);
            }
            #[cfg(any(madsim, test))]
            if self
                .log
                .planted(crate::config::PlantedBug::QuorumVoteBeforePersist)
            {
                // Planted (with the core's barrier off): sends go out before `quorum-state` is
                // written, so a vote may be answered and then forgotten at power loss.
                actions.sort_by_key(|a| matches!(a, Action::PersistQuorumState(_)));
            }
            rounds += 1;
            assert!(rounds < 10_000, "the quorum core keeps producing actions");
            #[cfg(any(madsim, test))]
            self.first_commit_stall(&actions).await;
            let mut follow = Vec::new();
            let mut appended = false;
            for action in actions {
                match action {
                    Action::Send { to, message } => self.send(to, message, None),
                    Action::SendFetchRecords {
                        to,
                        response,
                        start,
                        end,
                    } => {
                        let records = self
                            .log
                            .read(start, end, codec::FETCH_MAX_BYTES)
                            .map_err(|e| Fatal(format!("reading the metadata log: {e}")))?;
                        #[cfg(any(madsim, test))]
                        let records = self.answer_one_batch(records);
                        self.send(to, Message::FetchResponse(response), Some(records));
                    }
                    Action::SendSnapshotChunk {
                        to,
                        mut response,
                        start,
                    } => {
                        let id = response.snapshot_id;
                        match snapshot_file::read_chunk(
                            self.io.disk.as_ref(),
                            self.log.dir(),
                            id,
                            start,
                            codec::SNAPSHOT_CHUNK_BYTES,
                        ) {
                            Ok(bytes) if !bytes.is_empty() => response.bytes = bytes,
                            other => {
                                tracing::warn!(snapshot = %snapshot_file::file_name(id), ?other,
                                    "a snapshot to serve is unreadable");
                                response.error = Some(crate::raft::RaftError::SnapshotNotFound);
                            }
                        }
                        self.send(to, Message::FetchSnapshotResponse(response), None);
                    }
                    Action::WriteSnapshotChunk {
                        id,
                        position,
                        bytes,
                    } => snapshot_file::write_chunk(
                        self.io.disk.as_ref(),
                        self.log.dir(),
                        id,
                        position,
                        &bytes,
                    )
                    .map_err(|e| Fatal(format!("writing a fetched snapshot: {e}")))?,
                    Action::CompleteSnapshot { id, size } => {
                        let checked = snapshot_file::complete(
                            self.io.disk.as_ref(),
                            self.log.dir(),
                            id,
                            size,
                        )
                        .await
                        .map_err(|e| Fatal(format!("syncing a fetched snapshot: {e}")))?;
                        if let Err(why) = &checked {
                            tracing::warn!(snapshot = %snapshot_file::file_name(id), %why,
                                "a fetched snapshot is damaged; fetching again");
                        }
                        follow.push(Event::SnapshotFetched {
                            id,
                            valid: checked.is_ok(),
                        });
                    }
                    Action::InstallSnapshot(meta) => self.install_snapshot(meta).await?,
                    Action::DeleteSnapshot { id } => {
                        if let Err(e) =
                            snapshot_file::delete(self.io.disk.as_ref(), self.log.dir(), id)
                        {
                            tracing::warn!(error = %e, "deleting a metadata snapshot failed");
                        }
                    }
                    Action::AdvanceLogStart { offset } => self
                        .log
                        .advance_start(offset)
                        .await
                        .map_err(|e| Fatal(format!("moving the metadata log start: {e}")))?,
                    Action::Append { batches } => {
                        self.log
                            .append(&batches, self.io.clock.wall_ms())
                            .map_err(|e| Fatal(format!("appending to the metadata log: {e}")))?;
                        appended = true;
                        self.unpark = true;
                    }
                    Action::Truncate { offset } => {
                        tracing::info!(
                            offset,
                            "truncating the metadata log (diverged from the leader)"
                        );
                        self.log
                            .truncate(offset, self.io.clock.wall_ms())
                            .await
                            .map_err(|e| Fatal(format!("truncating the metadata log: {e}")))?;
                    }
                    Action::PersistQuorumState(record) => {
                        self.log
                            .write_quorum_state(&record)
                            .await
                            .map_err(|e| Fatal(format!("writing quorum-state: {e}")))?;
                        follow.push(Event::QuorumStatePersisted(record));
                    }
                    Action::Commit { high_watermark } => {
                        self.unpark = true;
                        self.apply_to(high_watermark).await?
                    }
                    Action::RoleChanged {
                        role,
                        epoch,
                        leader,
                    } => self.role_changed(role, epoch, leader),
                    Action::Dropped { from: f, reason } => {
                        tracing::debug!(from = ?f, ?reason, "quorum input dropped");
                        if f == Some(from) {
                            dropped = Some(reason);
                        }
                    }
                }
            }
            if appended {
                #[cfg(any(madsim, test))]
                self.flush_stall().await;
                let end = self
                    .log
                    .flush(self.io.clock.wall_ms())
                    .await
                    .map_err(|e| Fatal(format!("fsync of the metadata log: {e}")))?;
                follow.push(Event::Flushed { end_offset: end });
            }
            for event in follow {
                self.step(event);
            }
        }
    }

    /// A message from the core to node `to`: a request goes out over the link; a response
    /// answers the oldest inbound request of its kind from `to`.
    fn send(&mut self, to: NodeId, message: Message, records: Option<Bytes>) {
        if let Message::FetchResponse(f) = &message {
            let empty = records.as_ref().is_none_or(|r| r.is_empty()) && f.records.is_empty();
            let at_end =
                f.error.is_none() && f.diverging_epoch.is_none() && f.snapshot_id.is_none();
            if empty && at_end && self.parked.len() < crate::raft::MAX_VOTERS * 4 {
                if let Some((from, request)) = self.parking.take_if(|(from, _)| *from == to) {
                    // Held back: the reply stays queued for the answer to this fetch re-fed.
                    let until = self.now() + self.park_ms;
                    self.parked.insert(from, (request, until));
                    return;
                }
            }
        }
        if let Some(kind) = response_kind(&message) {
            let Some(queue) = self.replies.get_mut(&(to, kind)) else {
                tracing::debug!(to, ?kind, "a quorum response with no request waiting");
                return;
            };
            while let Some((_, reply)) = queue.pop_front() {
                if !reply.is_closed() {
                    let _ = reply.send(Answer::Message(message, records));
                    return;
                }
            }
            return;
        }
        let Some(link) = self.handle.links.get(&to) else {
            tracing::debug!(to, "no link to send a quorum request to");
            return;
        };
        let Some((key, version, body)) =
            codec::encode_request(&message, &self.cluster_id, self.handle.node_id, to)
        else {
            return;
        };
        let frame = match peer::encode_request(key, version, &self.client_id, &body) {
            Ok(f) => f,
            Err(e) => {
                tracing::error!(error = %e, ?key, "encoding a quorum request failed");
                return;
            }
        };
        #[cfg(any(madsim, test))]
        let delay = self.vote_request_delay(&message);
        #[cfg(not(any(madsim, test)))]
        let delay: Option<Duration> = None;
        // Sent now (the order of sends is the order of the core's actions), or, held back by
        // the fault point, from the task after the delay.
        let (rx, later) = match delay {
            None => (Some(link.call(frame)), None),
            Some(d) => (None, Some((d, frame, self.handle.clone()))),
        };
        let tx = self.tx.clone();
        let io = self.io.clone();
        self.io.spawn(async move {
            let rx = match (rx, later) {
                (Some(rx), _) => rx,
                (None, Some((d, frame, handle))) => {
                    io.clock.sleep(d).await;
                    let Some(link) = handle.links.get(&to) else {
                        return;
                    };
                    link.call(frame)
                }
                (None, None) => return,
            };
            let answer = match io.timeout(PEER_TIMEOUT, rx).await {
                Some(Ok(Ok(frame))) => frame,
                _ => return, // lost, refused or late: the core resends
            };
            let response = match peer::decode_response(key, version, answer) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(to, error = %e, "undecodable quorum response");
                    return;
                }
            };
            match codec::decode_response(&response, &message) {
                Ok(m) => {
                    let _ = tx.try_send(Input::Response {
                        from: to,
                        message: m,
                    });
                }
                Err(e) => tracing::debug!(to, reason = %e.reason, "quorum response dropped"),
            }
        });
    }

    /// Answers parked fetches that are due (the log grew, the high watermark moved, or their
    /// time is up) by feeding them to the core again: the answer then carries what is new.
    async fn release_parked(&mut self) -> Result<(), Fatal> {
        if self.parked.is_empty() {
            self.unpark = false;
            return Ok(());
        }
        let now = self.now();
        let all = std::mem::take(&mut self.unpark) || self.core.role() != RoleKind::Leader;
        let due: Vec<NodeId> = self
            .parked
            .iter()
            .filter(|(_, (_, until))| all || *until <= now)
            .map(|(id, _)| *id)
            .collect();
        for from in due {
            let Some((message, _)) = self.parked.remove(&from) else {
                continue;
            };
            self.step(Event::Message { from, message });
            self.perform().await?;
        }
        self.unpark = false;
        Ok(())
    }

    fn role_changed(&mut self, role: RoleKind, epoch: u32, leader: Option<NodeId>) {
        tracing::info!(?role, epoch, ?leader, "metadata quorum role changed");
        #[cfg(any(madsim, test))]
        self.note_role(role, epoch);
        if role == RoleKind::Leader {
            self.leader_since = Some((epoch, self.core.end_offset()));
        } else {
            self.leader_since = None;
            self.handle.active.store(false, Ordering::Release);
            for w in self.waiters.drain(..) {
                let _ = w.reply.send(Err(ProposeError::NotController));
            }
        }
    }

    /// Installs a fetched, verified snapshot: its file goes into place, the log restarts at
    /// its end, and the applier replaces the image with it.
    async fn install_snapshot(&mut self, meta: SnapshotMeta) -> Result<(), Fatal> {
        let id = meta.id;
        let disk = self.io.disk.clone();
        let dir = self.log.dir().to_path_buf();
        let body = snapshot_file::install(disk.as_ref(), &dir, id)
            .await
            .map_err(|e| Fatal(format!("installing a fetched snapshot: {e}")))?;
        let image = MetadataImage::from_snapshot(&body)
            .map_err(|e| Fatal(format!("a verified snapshot does not load: {e}")))?;
        self.log
            .restart_at(id.offset, self.io.clock.wall_ms())
            .await
            .map_err(|e| Fatal(format!("restarting the metadata log: {e}")))?;
        tracing::info!(snapshot = %snapshot_file::file_name(id), bytes = meta.size,
            "installed a metadata snapshot from the leader; the log restarts at its end");
        for other in snapshot_file::list(disk.as_ref(), &dir).unwrap_or_default() {
            if other != id {
                let _ = snapshot_file::delete(disk.as_ref(), &dir, other);
            }
        }
        self.applied = self.applied.max(id.offset);
        let tx = self
            .apply_tx
            .as_ref()
            .expect("the driver runs with its applier");
        let item = Committed::Snapshot {
            image: Arc::new(image),
            end: id.offset,
        };
        if tx.send(item).await.is_err() {
            return Err(Fatal("the metadata applier stopped".into()));
        }
        Ok(())
    }

    /// Applies every committed entry below `high_watermark` to the broker, in order.
    async fn apply_to(&mut self, high_watermark: u64) -> Result<(), Fatal> {
        if high_watermark <= self.applied {
            return Ok(());
        }
        let batches = self
            .log
            .read_batches(self.applied, high_watermark)
            .map_err(|e| Fatal(format!("reading committed metadata: {e}")))?;
        for (b, raw) in batches {
            let values = match &b.payload {
                crate::raft::Payload::Data(_) => batches::values(&raw).map_err(|e| {
                    Fatal(format!(
                        "committed metadata at offset {}: {e}",
                        b.base_offset
                    ))
                })?,
                crate::raft::Payload::LeaderChange { .. } => Vec::new(),
            };
            self.applied = b.next_offset();
            let tx = self
                .apply_tx
                .as_ref()
                .expect("the driver runs with its applier");
            let item = Committed::Batch {
                values,
                end: self.applied,
                epoch: b.epoch,
            };
            if tx.send(item).await.is_err() {
                return Err(Fatal("the metadata applier stopped".into()));
            }
        }
        Ok(())
    }

    /// Answers the proposals the applier has applied.
    fn resolve_waiters(&mut self) {
        let applied = *self.applied_end.borrow();
        while self.waiters.front().is_some_and(|w| w.end <= applied) {
            let w = self.waiters.pop_front().expect("front exists");
            let result = if w.epoch == self.core.epoch() {
                Ok(w.end)
            } else {
                Err(ProposeError::NotController)
            };
            let _ = w.reply.send(result);
        }
    }

    /// Publishes the status the broker, DescribeQuorum and the simulator read.
    fn publish(&self) {
        let role = if !self.is_voter {
            QuorumRole::Observer
        } else {
            match self.core.role() {
                RoleKind::Leader => QuorumRole::Leader,
                RoleKind::Candidate => QuorumRole::Candidate,
                RoleKind::Prospective => QuorumRole::Prospective,
                RoleKind::Follower => QuorumRole::Follower,
                RoleKind::Unattached => QuorumRole::Unattached,
                RoleKind::Resigned => QuorumRole::Resigned,
            }
        };
        let now = self.now();
        let wall = self.io.clock.wall_ms();
        let replicas = if self.core.role() == RoleKind::Leader {
            let info = self.core.describe();
            let progress = |voter: bool| {
                move |(id, end, at): (NodeId, Option<u64>, Option<u64>)| ReplicaProgress {
                    node_id: id,
                    voter,
                    end_offset: end.unwrap_or(0),
                    last_fetch_ms: at.map(|t| wall - now.saturating_sub(t) as i64),
                }
            };
            let voters = info.voters.into_iter().map(progress(true));
            voters
                .chain(info.observers.into_iter().map(progress(false)))
                .collect()
        } else {
            Vec::new()
        };
        let active = self.leader_since.is_some_and(|(e, since)| {
            e == self.core.epoch()
                && *self.applied_end.borrow() >= since
                && self.core.role() == RoleKind::Leader
        });
        self.handle.active.store(active, Ordering::Release);
        let view = ControllerView {
            leader: self.core.leader(),
            epoch: self.core.epoch(),
            active,
        };
        self.handle.controller.send_if_modified(|v| {
            let changed = *v != view;
            *v = view;
            changed
        });
        *self.handle.status.lock().unwrap() = QuorumStatus {
            node_id: self.handle.node_id,
            role,
            epoch: self.core.epoch(),
            leader: self.core.leader(),
            high_watermark: self.core.high_watermark(),
            log_end: self.core.end_offset(),
            log_start: self.core.log_start(),
            snapshot: self.core.latest_snapshot().map(|s| s.id),
            replicas,
        };
    }
}

/// The protocol's error for an inbound request the core ignored.
fn drop_code(reason: DropReason) -> ResponseError {
    match reason {
        DropReason::NotAVoter => ResponseError::InconsistentVoterSet,
        DropReason::StaleEpoch => ResponseError::FencedLeaderEpoch,
        DropReason::OutboxFull => ResponseError::RequestTimedOut,
        _ => ResponseError::InvalidRequest,
    }
}
