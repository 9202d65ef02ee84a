//! Directed schedules (issue 21's mutation run): the two quorum bugs the random cluster harness
//! (`cluster.rs`) meets rarely or never are driven here step by step, as Raft's paper draws
//! them, on a scripted network. Each schedule fails with its bug planted and holds with the
//! correct code, so the checks can fail and the schedule is the one that matters.
//!
//! - Figure 8 (`quorum-commit-old-epoch`): a leader of an old epoch (A) holds an entry X no
//!   one else has; a leader between (B) writes its LeaderChange at X's offset and dies; A is
//!   elected again and a follower C fetches X in an answer cut to one batch (the fetch size),
//!   so C's next fetch acknowledges exactly A's epoch start and a majority holds X. Counting
//!   replicas commits X there; A dies before C gets A's LeaderChange, B comes back, wins C's
//!   vote with its newer last epoch and overwrites X. KRaft waits for a majority past the
//!   epoch start (A's LeaderChange), which C never acknowledged.
//! - Double vote (`quorum-double-vote`): the leader dies and the two others pre-vote each
//!   other into candidacy in the same epoch; each asks the other for its vote. One vote per
//!   epoch refuses both; granting a second vote makes two leaders of one epoch.
//!
//! The network delivers in order with no latency and loses what the script cuts; disk writes
//! complete at once and survive crashes (the random harness covers torn tails). Time moves only
//! to the next node deadline.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use crate::config::planted::Planted;
use crate::config::PlantedBug;
use crate::raft::{
    Action, Batch, DropReason, Epoch, Event, LogState, Message, NodeId, OffsetAndEpoch,
    QuorumStateRecord, Raft, RaftConfig, RoleKind,
};

/// Time a script may wait for a condition (simulated ms); longer is a broken script.
const PATIENCE_MS: u64 = 60_000;
/// Every message takes this long (so an exchange that answers itself at once still lets time
/// move).
const LATENCY_MS: u64 = 1;
/// Events a script may take to reach a condition; more is a livelock.
const MAX_EVENTS: u64 = 1_000_000;

struct Node {
    raft: Option<Raft>,
    log: Vec<Batch>,
    stored: Option<QuorumStateRecord>,
}

/// What the node's disk finishes next (at once, in order).
enum Done {
    Persisted(QuorumStateRecord),
    Flushed(u64),
}

struct Net {
    planted: Planted,
    /// Batches a fetch answer carries at most (the fetch size).
    fetch_batches: usize,
    now: u64,
    entropy: u64,
    nodes: BTreeMap<NodeId, Node>,
    voters: BTreeSet<NodeId>,
    /// Pairs that can talk (both directions).
    links: BTreeSet<(NodeId, NodeId)>,
    /// Messages in flight, in send order, with the time they arrive.
    wire: VecDeque<(u64, NodeId, NodeId, Message)>,
    /// Messages the script holds back (`hold`, given the sender) until it releases them.
    held: VecDeque<(u64, NodeId, NodeId, Message)>,
    hold: Hold,
    disk: VecDeque<(NodeId, Done)>,
    leaders: BTreeMap<Epoch, NodeId>,
    committed: Vec<Batch>,
    proposals: u64,
    failure: Option<String>,
}

/// Which messages (by sender) the script holds back.
type Hold = Box<dyn Fn(NodeId, &Message) -> bool>;

impl Net {
    fn new(voters: usize, planted: Option<PlantedBug>) -> Net {
        let voters: BTreeSet<NodeId> = (1..=voters as NodeId).collect();
        let mut net = Net {
            planted: Planted::new(planted),
            fetch_batches: 1,
            now: 0,
            entropy: 0x5eed,
            nodes: BTreeMap::new(),
            voters: voters.clone(),
            links: BTreeSet::new(),
            wire: VecDeque::new(),
            held: VecDeque::new(),
            hold: Box::new(|_, _| false),
            disk: VecDeque::new(),
            leaders: BTreeMap::new(),
            committed: Vec::new(),
            proposals: 0,
            failure: None,
        };
        for id in voters {
            let node = Node {
                raft: None,
                log: Vec::new(),
                stored: None,
            };
            net.nodes.insert(id, node);
            net.start(id);
        }
        net.connect(&net.voters.clone());
        net
    }

    fn entropy(&mut self) -> u64 {
        // A fixed schedule: splitmix64 over a counter.
        self.entropy = self.entropy.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.entropy;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Only the nodes of `group` talk, to each other.
    fn connect(&mut self, group: &BTreeSet<NodeId>) {
        self.links = group
            .iter()
            .flat_map(|a| group.iter().map(move |b| (*a, *b)))
            .filter(|(a, b)| a != b)
            .collect();
    }

    fn start(&mut self, id: NodeId) {
        let mut cfg = RaftConfig::new(id, self.voters.clone());
        cfg.fetch_idle_backoff_ms = 250;
        cfg.planted = self.planted;
        let entropy = self.entropy();
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
        n.raft = Some(Raft::new(cfg, n.stored, log, self.now, entropy).expect("valid config"));
        self.perform(id);
    }

    /// The process dies: what it sent and has not arrived is lost; its disk keeps everything.
    fn crash(&mut self, id: NodeId) {
        self.nodes.get_mut(&id).expect("node exists").raft = None;
        self.wire
            .retain(|(_, from, to, _)| *from != id && *to != id);
        self.disk.retain(|(node, _)| *node != id);
    }

    fn up(&self, id: NodeId) -> Option<&Raft> {
        self.nodes[&id].raft.as_ref()
    }

    fn step(&mut self, id: NodeId, event: Event) {
        let (now, entropy) = (self.now, self.entropy());
        if let Some(raft) = self.nodes.get_mut(&id).and_then(|n| n.raft.as_mut()) {
            raft.step(now, entropy, event);
            self.perform(id);
        }
    }

    fn propose(&mut self, id: NodeId) -> Option<u64> {
        self.proposals += 1;
        let data = Bytes::from(format!("p{}", self.proposals));
        let now = self.now;
        let raft = self.nodes.get_mut(&id)?.raft.as_mut()?;
        let offset = raft.propose(now, 1, data).ok()?;
        self.perform(id);
        Some(offset)
    }

    fn perform(&mut self, id: NodeId) {
        let actions = match self.nodes.get_mut(&id).and_then(|n| n.raft.as_mut()) {
            Some(raft) => raft.take_actions(),
            None => return,
        };
        for action in actions {
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
                        .min(start as usize + self.fetch_batches);
                    response.records = log[start as usize..end].to_vec();
                    self.send(id, to, Message::FetchResponse(response));
                }
                Action::Append { batches } => {
                    let n = self.nodes.get_mut(&id).expect("node exists");
                    for b in batches {
                        assert_eq!(b.base_offset, n.log.len() as u64, "append not at the end");
                        n.log.push(b);
                    }
                    let end = n.log.len() as u64;
                    self.disk.push_back((id, Done::Flushed(end)));
                }
                Action::Truncate { offset } => {
                    let n = self.nodes.get_mut(&id).expect("node exists");
                    n.log.truncate(offset as usize);
                }
                Action::PersistQuorumState(record) => {
                    self.nodes.get_mut(&id).expect("node exists").stored = Some(record);
                    self.disk.push_back((id, Done::Persisted(record)));
                }
                Action::Commit { high_watermark } => self.check_commit(id, high_watermark),
                Action::RoleChanged {
                    role: RoleKind::Leader,
                    epoch,
                    ..
                } => match self.leaders.insert(epoch, id) {
                    Some(other) if other != id => {
                        self.fail(format!("two leaders in epoch {epoch}: {other} and {id}"))
                    }
                    _ => {}
                },
                Action::Dropped {
                    reason: DropReason::TruncationBelowHighWatermark,
                    from,
                } => self.fail(format!(
                    "node {id}: leader {from:?} asked to truncate committed entries"
                )),
                _ => {}
            }
        }
    }

    fn send(&mut self, from: NodeId, to: NodeId, message: Message) {
        let at = self.now + LATENCY_MS;
        self.wire.push_back((at, from, to, message));
    }

    fn fail(&mut self, why: String) {
        if self.failure.is_none() {
            self.failure = Some(format!("t={}ms: {why}", self.now));
        }
    }

    /// Everything below `hw` on node `id` must match the one committed sequence.
    fn check_commit(&mut self, id: NodeId, hw: u64) {
        let log = self.nodes[&id].log.clone();
        for (offset, batch) in log.iter().take(hw as usize).enumerate() {
            match self.committed.get(offset) {
                Some(c) if c != batch => {
                    return self.fail(format!(
                        "node {id}: committed offset {offset} is {batch:?}, elsewhere {c:?}"
                    ))
                }
                Some(_) => {}
                None => self.committed.push(batch.clone()),
            }
        }
    }

    /// One event: a disk completion, else a message (lost between nodes that cannot talk or
    /// to a node that is down). `false`: nothing was pending.
    fn deliver_one(&mut self) -> bool {
        if let Some((id, done)) = self.disk.pop_front() {
            let event = match done {
                Done::Persisted(record) => Event::QuorumStatePersisted(record),
                Done::Flushed(end_offset) => Event::Flushed { end_offset },
            };
            self.step(id, event);
            return true;
        }
        if self.wire.front().is_none_or(|m| m.0 > self.now) {
            return false;
        }
        let (at, from, to, message) = self.wire.pop_front().expect("a message is due");
        if (self.hold)(from, &message) {
            self.held.push_back((at, from, to, message));
            return true;
        }
        self.deliver(from, to, message);
        true
    }

    /// The message at the wire's front arrives now (before any disk completion).
    fn deliver_front(&mut self) {
        let (at, from, to, message) = self.wire.pop_front().expect("a message is on the wire");
        self.now = self.now.max(at);
        self.deliver(from, to, message);
    }

    /// Held messages go back on the wire, in the order they were held, ahead of the rest.
    fn release(&mut self) {
        self.hold = Box::new(|_, _| false);
        while let Some(m) = self.held.pop_back() {
            self.wire.push_front(m);
        }
    }

    fn deliver(&mut self, from: NodeId, to: NodeId, message: Message) {
        if self.links.contains(&(from, to)) && self.up(to).is_some() {
            self.step(to, Event::Message { from, message });
        }
    }

    /// Runs (messages, then node deadlines) until `done` holds after some event; `false` if
    /// the script's patience runs out first. `done` sees each message about to be delivered,
    /// so a script can stop just before one arrives.
    fn run_until(&mut self, mut done: impl FnMut(&Net) -> bool) -> bool {
        let limit = self.now + PATIENCE_MS;
        for _ in 0..MAX_EVENTS {
            if done(self) || self.failure.is_some() {
                return done(self);
            }
            if self.deliver_one() {
                continue;
            }
            // Messages are in send order and each takes the same time: the front is the next.
            let message = self.wire.front().map(|m| m.0);
            let tick = self
                .nodes
                .iter()
                .filter_map(|(id, n)| n.raft.as_ref()?.next_deadline().map(|d| (d, *id)))
                .min();
            match (message, tick) {
                (Some(m), t) if t.is_none_or(|t| m <= t.0) && m <= limit => self.now = m,
                (_, Some((at, id))) if at <= limit => {
                    self.now = self.now.max(at);
                    self.step(id, Event::Tick);
                }
                _ => return false,
            }
        }
        panic!("t={}ms: the script livelocked", self.now)
    }

    fn leader_among(&self, group: &[NodeId], above: Epoch) -> Option<NodeId> {
        group.iter().copied().find(|id| {
            self.up(*id)
                .is_some_and(|r| r.role() == RoleKind::Leader && r.epoch() > above)
        })
    }

    fn epoch_of(&self, id: NodeId) -> Epoch {
        self.up(id).map_or(0, |r| r.epoch())
    }

    /// The next message on the wire is a fetch from `from` to `to` at `offset`.
    fn fetch_next(&self, from: NodeId, to: NodeId, offset: u64) -> bool {
        matches!(self.wire.front(),
            Some((_, f, t, Message::FetchRequest(r))) if (*f, *t) == (from, to) && r.fetch_offset == offset)
    }
}

/// Raft's figure 8 on three voters; `Err` names the violation (the schedule's script failing
/// is a panic: the correct code must reach every step too).
fn figure_8(planted: Option<PlantedBug>) -> Result<(), String> {
    let mut net = Net::new(3, planted);
    let all: Vec<NodeId> = vec![1, 2, 3];
    // (a) A leader, one committed proposal everywhere.
    assert!(net.run_until(|n| n.leader_among(&all, 0).is_some()));
    let a = net.leader_among(&all, 0).unwrap();
    net.propose(a).expect("the leader takes a proposal");
    let everyone = |n: &Net| {
        all.iter()
            .all(|id| n.up(*id).unwrap().high_watermark() >= 2)
    };
    assert!(net.run_until(everyone), "the first proposal commits");
    let k = net.nodes[&a].log.len() as u64;
    // (b) A, cut off, appends X at offset k; no one else gets it.
    net.connect(&all.iter().copied().filter(|id| *id != a).collect());
    assert_eq!(net.propose(a), Some(k), "X is appended at k");
    let others: Vec<NodeId> = all.iter().copied().filter(|id| *id != a).collect();
    let e1 = net.epoch_of(a);
    // (c) B is elected by C and dies the moment it leads: its LeaderChange at k stays its own.
    assert!(net.run_until(|n| n.leader_among(&others, e1).is_some()));
    let b = net.leader_among(&others, e1).unwrap();
    let c = *others.iter().find(|id| **id != b).unwrap();
    net.crash(b);
    assert_eq!(
        net.nodes[&b].log.len() as u64,
        k + 1,
        "B's LeaderChange at k"
    );
    // (d) A and C: A wins (its log is longer), C fetches X in a one-batch answer, then its
    // fetch at A's epoch start (k + 1) acknowledges X. A dies before answering it.
    net.connect(&BTreeSet::from([a, c]));
    let e2 = net.epoch_of(c);
    assert!(net.run_until(|n| n.leader_among(&[a], e2).is_some()));
    assert!(
        net.run_until(|n| n.fetch_next(c, a, k + 1)),
        "C fetches at A's epoch start"
    );
    net.deliver_front();
    net.crash(a);
    assert_eq!(
        net.nodes[&c].log.len() as u64,
        k + 1,
        "C holds X, not A's LeaderChange"
    );
    // (e) B comes back; C's vote goes to B's newer last epoch; B overwrites X and commits.
    net.start(b);
    net.connect(&BTreeSet::from([b, c]));
    let e3 = net.epoch_of(c);
    assert!(net.run_until(|n| n.leader_among(&[b], e3).is_some()));
    let decided = |n: &Net| n.failure.is_some() || n.up(b).unwrap().high_watermark() > k + 1;
    net.propose(b);
    assert!(net.run_until(decided), "B commits past k");
    // (f) Everyone back: the committed sequence must still be one.
    net.start(a);
    net.connect(&all.iter().copied().collect());
    net.propose(b);
    let caught_up = |n: &Net| {
        n.failure.is_some()
            || all
                .iter()
                .all(|id| n.up(*id).unwrap().high_watermark() == n.committed.len() as u64)
    };
    assert!(net.run_until(caught_up), "everyone catches up");
    match net.failure {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// Two candidates of one epoch on three voters, cut off from each other, each asking the
/// third (the old leader, resigned) for its vote before it hears of either's victory.
fn double_vote(planted: Option<PlantedBug>) -> Result<(), String> {
    let mut net = Net::new(3, planted);
    let all: Vec<NodeId> = vec![1, 2, 3];
    assert!(net.run_until(|n| n.leader_among(&all, 0).is_some()));
    let a = net.leader_among(&all, 0).unwrap();
    net.propose(a);
    let everyone = |n: &Net| {
        all.iter()
            .all(|id| n.up(*id).unwrap().high_watermark() >= 2)
    };
    assert!(net.run_until(everyone), "the first proposal commits");
    let e1 = net.epoch_of(a);
    let others: Vec<NodeId> = all.iter().copied().filter(|id| *id != a).collect();
    let (x, y) = (others[0], others[1]);
    // Everyone cut off: A resigns (check-quorum), X and Y stop hearing from it.
    net.connect(&BTreeSet::new());
    assert!(
        net.run_until(|n| n.up(a).unwrap().role() == RoleKind::Resigned),
        "A resigns"
    );
    // X and Y each reach A (not each other). A's own votes are held (it never stands), and so
    // are X's and Y's real votes, until both stand in one epoch. (Each, having known A, goes
    // back to following it whenever a pre-vote times out (KIP-996), and pre-votes again after a
    // fetch timeout; A, resigned, grants pre-votes.)
    net.links = BTreeSet::from([(x, a), (a, x), (y, a), (a, y)]);
    net.hold =
        Box::new(move |from, m| matches!(m, Message::VoteRequest(r) if !r.pre_vote || from == a));
    let standing = |n: &Net| {
        let (rx, ry) = (n.up(x).unwrap(), n.up(y).unwrap());
        rx.role() == RoleKind::Candidate
            && ry.role() == RoleKind::Candidate
            && rx.epoch() == ry.epoch()
            && rx.epoch() > e1
    };
    assert!(net.run_until(standing), "X and Y stand in one epoch");
    // Only their requests of that epoch reach A.
    let epoch = net.epoch_of(x);
    net.held.retain(|(_, from, _, m)| {
        *from != a && matches!(m, Message::VoteRequest(r) if r.candidate_epoch == epoch)
    });
    net.release();
    let settled = |n: &Net| n.failure.is_some() || n.leader_among(&[x, y], e1).is_some();
    assert!(net.run_until(settled), "someone wins");
    let quiet = |n: &Net| n.failure.is_some() || n.wire.is_empty();
    assert!(net.run_until(quiet));
    match net.failure {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

#[test]
fn figure_8_commits_an_old_epoch_only_with_the_plant() {
    assert_eq!(figure_8(None), Ok(()), "the correct commit rule holds");
    let why = figure_8(Some(PlantedBug::QuorumCommitOldEpoch)).expect_err("figure 8 is caught");
    assert!(why.contains("committed offset"), "{why}");
    eprintln!("quorum-commit-old-epoch: {why}");
}

#[test]
fn two_candidates_of_one_epoch_elect_two_leaders_only_with_the_plant() {
    assert_eq!(double_vote(None), Ok(()), "one vote per epoch holds");
    let why =
        double_vote(Some(PlantedBug::QuorumDoubleVote)).expect_err("the double vote is caught");
    assert!(why.contains("two leaders"), "{why}");
    eprintln!("quorum-double-vote: {why}");
}
