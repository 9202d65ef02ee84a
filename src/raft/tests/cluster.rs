//! A deterministic in-process cluster of quorum cores, driven by a discrete-event loop from one
//! seed: an in-memory log, `quorum-state` and fsync model per node; a network that delays,
//! drops, duplicates, reorders and partitions; crashes that lose the un-fsynced log tail and
//! any unpersisted `quorum-state`; restarts. After every step it checks at most one leader per
//! epoch and that every committed prefix is a prefix of one sequence; after the faults heal it
//! requires a leader and a commit within a bound.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

use crate::config::planted::Planted;
use crate::raft::{
    Action, Batch, DropReason, Epoch, Event, LogState, Message, NodeId, OffsetAndEpoch, Payload,
    QuorumStateRecord, Raft, RaftConfig, RoleKind,
};

/// The observer's node id (voters are 1..=n).
pub const OBSERVER: NodeId = 100;
/// Messages in flight at once; more are dropped (a bounded network).
const MAX_IN_FLIGHT: usize = 10_000;
/// Batches a fetch answer carries at most (the driver's byte limit).
const MAX_FETCH_BATCHES: usize = 16;
/// Chance that a `quorum-state` write is interrupted by a power loss (fault phase only).
const POWER_LOSS_DURING_WRITE_PERCENT: u64 = 3;
/// Loop iterations per run: a livelock (a deadline that never moves) fails the run.
const MAX_ITERATIONS: u64 = 2_000_000;

#[derive(Clone, Debug)]
pub struct Options {
    pub voters: usize,
    pub observer: bool,
    /// How long faults are injected (simulated ms).
    pub fault_ms: u64,
    /// After healing, a leader must be elected and commit a proposal within this many ms.
    pub heal_bound_ms: u64,
    pub drop_percent: u64,
    pub duplicate_percent: u64,
    pub max_delay_ms: u64,
    /// Mean gap between faults (crash, restart-all, partition, heal).
    pub fault_gap_ms: u64,
    /// The bug planted in every node (through its `RaftConfig`).
    pub planted: Planted,
    /// Print every step (for replaying one failing seed by hand).
    pub trace: bool,
}

impl Options {
    pub fn new(voters: usize) -> Options {
        Options {
            voters,
            observer: true,
            fault_ms: 8_000,
            heal_bound_ms: 20_000,
            drop_percent: 5,
            duplicate_percent: 3,
            max_delay_ms: 40,
            fault_gap_ms: 600,
            planted: Planted::default(),
            trace: false,
        }
    }
}

/// What one run did, for the test's report.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub leaders: usize,
    pub committed: usize,
    pub crashes: usize,
    pub messages: u64,
    /// Simulated ms from healing to the first post-heal commit.
    pub heal_ms: u64,
}

struct Node {
    raft: Option<Raft>,
    log: Vec<Batch>,
    /// Entries below this offset survive a crash.
    durable: u64,
    /// The `quorum-state` file's content.
    stored: Option<QuorumStateRecord>,
    /// Writes asked for and not yet done, in order.
    persisting: VecDeque<QuorumStateRecord>,
    flushing: bool,
    /// Bumped at each crash: completions of an older incarnation are void.
    incarnation: u64,
}

#[derive(Clone, Debug)]
enum Ev {
    Deliver {
        from: NodeId,
        to: NodeId,
        message: Message,
    },
    Persisted {
        node: NodeId,
        incarnation: u64,
    },
    Flushed {
        node: NodeId,
        incarnation: u64,
    },
    Restart {
        node: NodeId,
    },
    /// Power loss on `node` (if still in `incarnation`), restarting after `down_ms`.
    Crash {
        node: NodeId,
        incarnation: u64,
        down_ms: u64,
    },
    Fault,
    Propose,
}

struct Cluster {
    opts: Options,
    rng: TestRng,
    now: u64,
    seq: u64,
    events: BTreeMap<(u64, u64), Ev>,
    nodes: BTreeMap<NodeId, Node>,
    voters: BTreeSet<NodeId>,
    /// A node's side of the current partition; nodes on different sides cannot talk.
    side: BTreeMap<NodeId, u8>,
    healed: bool,
    leaders: BTreeMap<Epoch, NodeId>,
    /// The one committed sequence every node's committed prefix must be a prefix of.
    committed: Vec<Batch>,
    proposals: u64,
    /// A proposal made after healing has committed.
    healed_commit: bool,
    stats: Stats,
    failure: Option<String>,
}

/// Runs one seed. `Err` names the first violated property (or a panic inside the core).
pub fn run(seed: u64, opts: &Options) -> Result<Stats, String> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut cluster = Cluster::new(seed, opts.clone());
        cluster.run()
    }));
    match result {
        Ok(r) => r,
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panic: {text}"))
        }
    }
}

fn config(id: NodeId, voters: &BTreeSet<NodeId>) -> RaftConfig {
    let mut cfg = RaftConfig::new(id, voters.clone());
    // Kafka's timeouts; a slower idle fetch keeps the event count (and the test) small.
    cfg.fetch_idle_backoff_ms = 250;
    cfg
}

impl Cluster {
    fn new(seed: u64, opts: Options) -> Cluster {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        bytes[8..].copy_from_slice(&(!seed).to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::XorShift, &bytes);
        let voters: BTreeSet<NodeId> = (1..=opts.voters as NodeId).collect();
        let mut ids: Vec<NodeId> = voters.iter().copied().collect();
        if opts.observer {
            ids.push(OBSERVER);
        }
        let nodes = ids
            .iter()
            .map(|id| {
                let node = Node {
                    raft: None,
                    log: Vec::new(),
                    durable: 0,
                    stored: None,
                    persisting: VecDeque::new(),
                    flushing: false,
                    incarnation: 0,
                };
                (*id, node)
            })
            .collect();
        let mut cluster = Cluster {
            opts,
            rng,
            now: 0,
            seq: 0,
            events: BTreeMap::new(),
            nodes,
            voters,
            side: BTreeMap::new(),
            healed: false,
            leaders: BTreeMap::new(),
            committed: Vec::new(),
            proposals: 0,
            healed_commit: false,
            stats: Stats::default(),
            failure: None,
        };
        for id in ids {
            cluster.start(id);
        }
        let gap = cluster.opts.fault_gap_ms;
        let at = cluster.random(1, 2 * gap);
        cluster.schedule(at, Ev::Fault);
        cluster.schedule(50, Ev::Propose);
        cluster
    }

    fn random(&mut self, low: u64, high: u64) -> u64 {
        assert!(low <= high);
        low + self.rng.next_u64() % (high - low + 1)
    }

    /// An fsync's latency: usually fast, sometimes a slow disk.
    fn disk_latency(&mut self) -> u64 {
        if self.percent(85) {
            self.random(1, 20)
        } else {
            self.random(100, 800)
        }
    }

    fn percent(&mut self, p: u64) -> bool {
        self.rng.next_u64() % 100 < p
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.events.insert((at.max(self.now), self.seq), ev);
    }

    fn fail(&mut self, why: String) {
        if self.failure.is_none() {
            self.failure = Some(format!("t={}ms: {why}", self.now));
        }
    }

    fn run(&mut self) -> Result<Stats, String> {
        let heal_at = self.opts.fault_ms;
        let end = heal_at + self.opts.heal_bound_ms;
        let mut iterations = 0u64;
        while self.failure.is_none() {
            iterations += 1;
            if iterations > MAX_ITERATIONS {
                return Err(format!(
                    "t={}ms: livelock ({iterations} iterations)",
                    self.now
                ));
            }
            if !self.healed && self.now >= heal_at {
                self.heal();
            }
            if self.healed_commit {
                self.stats.heal_ms = self.now - heal_at;
                break;
            }
            if self.now > end {
                return Err(format!(
                    "no commit within {}ms after healing (leaders by epoch {:?})",
                    self.opts.heal_bound_ms,
                    self.leaders.iter().rev().take(3).collect::<Vec<_>>()
                ));
            }
            // The earliest of: a queued event, a node's deadline, the heal.
            let queued = self.events.keys().next().map(|k| k.0);
            let tick = self
                .nodes
                .iter()
                .filter_map(|(id, n)| {
                    n.raft
                        .as_ref()
                        .and_then(|r| r.next_deadline())
                        .map(|d| (d, *id))
                })
                .min();
            let mut next = queued
                .unwrap_or(u64::MAX)
                .min(tick.map_or(u64::MAX, |t| t.0));
            if !self.healed {
                next = next.min(heal_at);
            }
            if next == u64::MAX {
                return Err("nothing left to happen".into());
            }
            self.now = self.now.max(next);
            if let Some((at, id)) = tick.filter(|t| t.0 <= next) {
                let _ = at;
                self.step(id, Event::Tick);
            } else if queued == Some(next) {
                let (_, ev) = self.events.pop_first().expect("an event is queued");
                self.handle(ev);
            }
        }
        match self.failure.take() {
            Some(f) => Err(f),
            None => {
                self.stats.committed = self.committed.len();
                self.stats.leaders = self.leaders.len();
                Ok(self.stats.clone())
            }
        }
    }

    fn heal(&mut self) {
        self.healed = true;
        self.side.clear();
        let down: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.raft.is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in down {
            self.start(id);
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { from, to, message } => {
                let blocked = self.side.get(&from) != self.side.get(&to);
                if !blocked && self.nodes[&to].raft.is_some() {
                    self.step(to, Event::Message { from, message });
                }
            }
            Ev::Persisted { node, incarnation } => {
                let n = self.nodes.get_mut(&node).expect("node exists");
                if n.incarnation != incarnation {
                    return;
                }
                let record = n.persisting.pop_front().expect("a write was pending");
                n.stored = Some(record);
                self.step(node, Event::QuorumStatePersisted(record));
            }
            Ev::Flushed { node, incarnation } => {
                let n = self.nodes.get_mut(&node).expect("node exists");
                if n.incarnation != incarnation {
                    return;
                }
                n.flushing = false;
                n.durable = n.log.len() as u64;
                let end_offset = n.durable;
                self.step(node, Event::Flushed { end_offset });
            }
            Ev::Crash {
                node,
                incarnation,
                down_ms,
            } => {
                if self.nodes[&node].incarnation == incarnation {
                    self.crash(node);
                    let at = self.now + down_ms;
                    self.schedule(at, Ev::Restart { node });
                }
            }
            Ev::Restart { node } => {
                if self.nodes[&node].raft.is_none() {
                    self.start(node);
                }
            }
            Ev::Fault => {
                if !self.healed {
                    self.fault();
                    let gap = self.opts.fault_gap_ms;
                    let at = self.now + self.random(1, 2 * gap);
                    self.schedule(at, Ev::Fault);
                }
            }
            Ev::Propose => {
                self.propose();
                let at = self.now + self.random(20, 300);
                self.schedule(at, Ev::Propose);
            }
        }
    }

    fn fault(&mut self) {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        let writing: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.raft.is_some() && !n.persisting.is_empty())
            .map(|(id, _)| *id)
            .collect();
        match self.rng.next_u64() % 12 {
            // Power loss on a node whose quorum-state write is still in flight.
            10 | 11 if !writing.is_empty() => {
                let id = writing[(self.rng.next_u64() % writing.len() as u64) as usize];
                self.crash(id);
                let at = self.now + self.random(50, 1_000);
                self.schedule(at, Ev::Restart { node: id });
            }
            0..=3 => {
                let id = ids[(self.rng.next_u64() % ids.len() as u64) as usize];
                self.crash(id);
                let at = self.now + self.random(100, 3_000);
                self.schedule(at, Ev::Restart { node: id });
            }
            4 => {
                // Power loss everywhere.
                for id in ids {
                    self.crash(id);
                    let at = self.now + self.random(50, 1_000);
                    self.schedule(at, Ev::Restart { node: id });
                }
            }
            5..=7 => {
                self.side = ids
                    .iter()
                    .map(|id| (*id, (self.rng.next_u64() % 2) as u8))
                    .collect();
            }
            _ => self.side.clear(),
        }
    }

    fn propose(&mut self) {
        let leader = self
            .nodes
            .iter()
            .filter(|(_, n)| {
                n.raft
                    .as_ref()
                    .is_some_and(|r| r.role() == RoleKind::Leader)
            })
            .map(|(id, _)| *id)
            .max_by_key(|id| self.nodes[id].raft.as_ref().map(|r| r.epoch()));
        let Some(id) = leader else {
            return;
        };
        self.proposals += 1;
        // Proposals after healing are marked: one of them must commit within the bound.
        let mark = if self.healed { "h" } else { "p" };
        let data = Bytes::from(format!("{mark}{}", self.proposals));
        let now = self.now;
        let raft = self
            .nodes
            .get_mut(&id)
            .and_then(|n| n.raft.as_mut())
            .expect("leader");
        if raft.propose(now, 1, data).is_ok() {
            self.perform(id);
        }
    }

    fn crash(&mut self, id: NodeId) {
        let n = self.nodes.get_mut(&id).expect("node exists");
        if n.raft.is_none() {
            return;
        }
        self.stats.crashes += 1;
        n.raft = None;
        n.log.truncate(n.durable as usize);
        n.persisting.clear();
        n.flushing = false;
        n.incarnation += 1;
    }

    fn start(&mut self, id: NodeId) {
        let entropy = self.rng.next_u64();
        let mut cfg = config(id, &self.voters);
        cfg.planted = self.opts.planted;
        let n = self.nodes.get_mut(&id).expect("node exists");
        let mut epochs: Vec<OffsetAndEpoch> = Vec::new();
        for b in &n.log {
            if epochs.last().is_none_or(|e| e.epoch != b.epoch) {
                epochs.push(OffsetAndEpoch {
                    epoch: b.epoch,
                    offset: b.base_offset,
                });
            }
        }
        let log = LogState {
            epochs,
            end_offset: n.log.len() as u64,
            ..LogState::default()
        };
        let raft = Raft::new(cfg, n.stored, log, self.now, entropy).expect("valid config");
        n.raft = Some(raft);
        self.perform(id);
    }

    fn step(&mut self, id: NodeId, event: Event) {
        let entropy = self.rng.next_u64();
        let now = self.now;
        let trace = self.opts.trace;
        let raft = self
            .nodes
            .get_mut(&id)
            .and_then(|n| n.raft.as_mut())
            .expect("node is up");
        if trace {
            eprintln!(
                "{now} n{id} {:?}/{} hw={} end={} <- {event:?}",
                raft.role(),
                raft.epoch(),
                raft.high_watermark(),
                raft.end_offset()
            );
        }
        raft.step(now, entropy, event);
        self.perform(id);
    }

    /// Performs a node's actions in order, as a driver must.
    fn perform(&mut self, id: NodeId) {
        let actions = self
            .nodes
            .get_mut(&id)
            .and_then(|n| n.raft.as_mut())
            .expect("up")
            .take_actions();
        for action in actions {
            if self.opts.trace {
                eprintln!("    n{id} -> {action:?}");
            }
            match action {
                Action::Send { to, message } => self.send(id, to, message),
                Action::SendFetchRecords {
                    to,
                    mut response,
                    start,
                    end,
                } => {
                    let log = &self.nodes[&id].log;
                    let end = (end as usize)
                        .min(log.len())
                        .min(start as usize + MAX_FETCH_BATCHES);
                    response.records = log[start as usize..end].to_vec();
                    self.send(id, to, Message::FetchResponse(response));
                }
                Action::Append { batches } => {
                    let n = self.nodes.get_mut(&id).expect("node exists");
                    for b in batches {
                        assert_eq!(b.count, 1, "the harness proposes single records");
                        assert_eq!(b.base_offset, n.log.len() as u64, "append not at the end");
                        n.log.push(b);
                    }
                    if !n.flushing {
                        n.flushing = true;
                        let incarnation = n.incarnation;
                        let at = self.now + self.disk_latency();
                        self.schedule(
                            at,
                            Ev::Flushed {
                                node: id,
                                incarnation,
                            },
                        );
                    }
                }
                Action::Truncate { offset } => {
                    let n = self.nodes.get_mut(&id).expect("node exists");
                    assert!(offset <= n.log.len() as u64, "truncation past the end");
                    n.log.truncate(offset as usize);
                    n.durable = n.durable.min(offset);
                }
                Action::PersistQuorumState(record) => {
                    let n = self.nodes.get_mut(&id).expect("node exists");
                    n.persisting.push_back(record);
                    let incarnation = n.incarnation;
                    // Each completion finishes the oldest pending write, so writes complete in
                    // order whatever order their events fire in.
                    let latency = self.disk_latency();
                    let at = self.now + latency;
                    self.schedule(
                        at,
                        Ev::Persisted {
                            node: id,
                            incarnation,
                        },
                    );
                    if !self.healed && self.percent(POWER_LOSS_DURING_WRITE_PERCENT) {
                        // The nemesis cuts power while this write is in flight.
                        let crash_at = self.now + latency / 2;
                        let down_ms = self.random(50, 800);
                        self.schedule(
                            crash_at,
                            Ev::Crash {
                                node: id,
                                incarnation,
                                down_ms,
                            },
                        );
                    }
                }
                Action::Commit { high_watermark } => self.check_commit(id, high_watermark),
                Action::RoleChanged { role, epoch, .. } => {
                    if role == RoleKind::Leader {
                        match self.leaders.get(&epoch) {
                            Some(other) if *other != id => {
                                let why = format!("two leaders in epoch {epoch}: {other} and {id}");
                                self.fail(why);
                            }
                            _ => {
                                self.leaders.insert(epoch, id);
                            }
                        }
                    }
                }
                Action::Dropped {
                    reason: DropReason::TruncationBelowHighWatermark,
                    from,
                } => {
                    self.fail(format!(
                        "node {id}: leader {from:?} asked to truncate committed entries"
                    ));
                }
                Action::Dropped { .. } => {}
                other @ (Action::SendSnapshotChunk { .. }
                | Action::WriteSnapshotChunk { .. }
                | Action::CompleteSnapshot { .. }
                | Action::InstallSnapshot(_)
                | Action::DeleteSnapshot { .. }
                | Action::AdvanceLogStart { .. }) => {
                    // This harness takes no snapshots (`rules.rs` tests them), so no node
                    // ever has a log start to answer fetches below.
                    panic!("node {id}: a snapshot action without snapshots: {other:?}")
                }
            }
        }
    }

    fn send(&mut self, from: NodeId, to: NodeId, message: Message) {
        self.stats.messages += 1;
        let lossy = !self.healed;
        if self.events.len() >= MAX_IN_FLIGHT || (lossy && self.percent(self.opts.drop_percent)) {
            return;
        }
        let copies = if lossy && self.percent(self.opts.duplicate_percent) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = self.now + self.random(1, self.opts.max_delay_ms);
            self.schedule(
                at,
                Ev::Deliver {
                    from,
                    to,
                    message: message.clone(),
                },
            );
        }
    }

    /// Everything below `hw` on node `id` must match the one committed sequence.
    fn check_commit(&mut self, id: NodeId, hw: u64) {
        let log = &self.nodes[&id].log;
        if hw > log.len() as u64 {
            return self.fail(format!("node {id}: HW {hw} past its log end {}", log.len()));
        }
        for (offset, batch) in log.iter().take(hw as usize).enumerate() {
            match self.committed.get(offset) {
                Some(c) if c != batch => {
                    let why = format!(
                        "node {id}: committed offset {offset} is {batch:?}, elsewhere {c:?}"
                    );
                    return self.fail(why);
                }
                Some(_) => {}
                None => {
                    let healed = matches!(&batch.payload, Payload::Data(d) if d.starts_with(b"h"));
                    self.healed_commit |= healed;
                    self.committed.push(batch.clone());
                }
            }
        }
    }
}

/// Runs `seeds`, returning the first failure with its seed, and the largest heal time.
pub fn sweep(opts: &Options, seeds: std::ops::Range<u64>) -> Result<(u64, Stats), (u64, String)> {
    let mut worst = 0;
    let mut total = Stats::default();
    for seed in seeds {
        let stats = run(seed, opts).map_err(|e| (seed, e))?;
        worst = worst.max(stats.heal_ms);
        total.leaders += stats.leaders;
        total.committed += stats.committed;
        total.crashes += stats.crashes;
        total.messages += stats.messages;
    }
    Ok((worst, total))
}

#[test]
fn three_voters_and_an_observer_survive_faults() {
    let opts = Options::new(3);
    match sweep(&opts, 0..SEEDS) {
        Ok((worst, total)) => eprintln!("3 voters, {SEEDS} seeds: worst heal {worst}ms, {total:?}"),
        Err((seed, why)) => panic!("seed {seed}: {why}"),
    }
}

#[test]
fn five_voters_and_an_observer_survive_faults() {
    let opts = Options::new(5);
    match sweep(&opts, 0..SEEDS) {
        Ok((worst, total)) => eprintln!("5 voters, {SEEDS} seeds: worst heal {worst}ms, {total:?}"),
        Err((seed, why)) => panic!("seed {seed}: {why}"),
    }
}

#[test]
fn long_runs_see_many_leader_changes() {
    for voters in [3, 5] {
        let mut opts = Options::new(voters);
        opts.fault_ms = 60_000;
        match sweep(&opts, 10_000..10_000 + LONG_SEEDS) {
            Ok((worst, total)) => {
                eprintln!("{voters} voters, {LONG_SEEDS} 60s runs: worst heal {worst}ms, {total:?}")
            }
            Err((seed, why)) => panic!("{voters} voters, seed {seed}: {why}"),
        }
    }
}

/// Seeds of the 60-second runs per cluster size.
const LONG_SEEDS: u64 = 50;

/// `RAFT_SEED=16 RAFT_VOTERS=3 cargo test -p weir --lib raft::tests::cluster::replay -- --nocapture`
#[test]
fn replay() {
    let Some(seed) = std::env::var("RAFT_SEED").ok().and_then(|s| s.parse().ok()) else {
        return;
    };
    let voters = std::env::var("RAFT_VOTERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let mut opts = Options::new(voters);
    opts.trace = true;
    eprintln!("{:?}", run(seed, &opts));
}

#[test]
fn a_seed_replays_exactly() {
    let opts = Options::new(3);
    let a = run(7, &opts).expect("seed 7 passes");
    let b = run(7, &opts).expect("seed 7 passes");
    assert_eq!(
        (a.messages, a.committed, a.heal_ms),
        (b.messages, b.committed, b.heal_ms)
    );
}

/// Seeds per cluster size in the default test run.
const SEEDS: u64 = 2000;
