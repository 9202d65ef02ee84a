//! `Raft`: one node's quorum state machine. This file holds the state, the entry points
//! (`step`, `propose`, `resign`), role transitions, the `quorum-state` send barrier, timers and
//! the invariants. Message handlers live in `election.rs` and `replication.rs`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use super::action::{Action, DropReason, RoleKind};
use super::epochs::EpochCache;
use super::message::{FetchResponse, Message};
use super::role::{FollowerState, LeaderState, Role, VoterProgress};
use super::types::{
    Batch, Epoch, LogState, NodeId, Offset, OffsetAndEpoch, Payload, QuorumStateRecord, RaftConfig,
    SnapshotMeta, MAX_VOTERS,
};

/// Sends that may wait for `quorum-state` to be persisted; more are dropped (the network may
/// drop them anyway, and everything that matters is resent).
pub const MAX_OUTBOX: usize = 4 * MAX_VOTERS + 16;
/// Actions one step may produce before the driver drains them.
pub const MAX_ACTIONS: usize = MAX_OUTBOX + 8 * MAX_VOTERS + 64;
/// Observers a leader tracks for DescribeQuorum.
pub const MAX_OBSERVERS: usize = 256;
/// Base of the binary-exponential election backoff (Kafka's `RETRY_BACKOFF_BASE_MS`).
const BACKOFF_BASE_MS: u64 = 50;

/// An input to the core. Proposals and resignation have their own methods because they answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Time passed; the driver calls it at `next_deadline()` (earlier is harmless).
    Tick,
    /// A message arrived from node `from`.
    Message { from: NodeId, message: Message },
    /// Every entry below `end_offset` in the log as it is now is durable.
    Flushed { end_offset: Offset },
    /// The `quorum-state` write asked for by `Action::PersistQuorumState(record)` is durable.
    QuorumStatePersisted(QuorumStateRecord),
    /// The driver wrote a snapshot of the state machine at `meta.id` (≤ the high watermark)
    /// durably. The log start then moves to the previous snapshot.
    SnapshotTaken(SnapshotMeta),
    /// The fetched snapshot asked for by `Action::CompleteSnapshot` is durable; `valid`: its
    /// checksum and size match.
    SnapshotFetched { id: OffsetAndEpoch, valid: bool },
}

/// Why a proposal was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotLeader {
    pub epoch: Epoch,
    pub leader: Option<NodeId>,
}

/// A snapshot of the leader's view, for DescribeQuorum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumInfo {
    pub epoch: Epoch,
    pub leader: Option<NodeId>,
    pub high_watermark: Offset,
    /// `(voter, match offset, last fetch time)`; only a leader knows the other voters'.
    pub voters: Vec<(NodeId, Option<Offset>, Option<u64>)>,
    /// `(observer, fetch offset, last fetch time)` of the observers that fetched from this
    /// leader in its epoch.
    pub observers: Vec<(NodeId, Option<Offset>, Option<u64>)>,
}

pub struct Raft {
    pub(super) cfg: RaftConfig,
    pub(super) is_voter: bool,
    pub(super) now: u64,
    /// Driver-supplied randomness for this step; mixed, never drawn from the OS.
    entropy: u64,
    pub(super) epoch: Epoch,
    pub(super) voted_for: Option<NodeId>,
    pub(super) leader: Option<NodeId>,
    pub(super) role: Role,
    pub(super) cache: EpochCache,
    pub(super) end_offset: Offset,
    pub(super) durable_end: Offset,
    pub(super) high_watermark: Offset,
    /// The snapshot at the log start (`None`: the log starts at 0) and the newest snapshot.
    /// The log start trails the newest snapshot by one, so a damaged newest snapshot falls
    /// back to the previous one and the log after it.
    pub(super) earliest_snapshot: Option<SnapshotMeta>,
    pub(super) latest_snapshot: Option<SnapshotMeta>,
    /// The last record the driver reported durable, and the last one asked for: while they
    /// differ, every send waits in `outbox`.
    persisted: QuorumStateRecord,
    wanted: QuorumStateRecord,
    outbox: VecDeque<Action>,
    actions: Vec<Action>,
    /// The voter an observer probes next.
    pub(super) probe_next: usize,
}

impl Raft {
    /// Starts a node from its persisted `quorum-state` (`None` if there was none) and its
    /// recovered log. A node that was leader restarts Resigned; one that knew a leader restarts
    /// as its follower; otherwise it starts Unattached (keeping its vote). `entropy` draws the
    /// first election timeout.
    pub fn new(
        cfg: RaftConfig,
        stored: Option<QuorumStateRecord>,
        log: LogState,
        now: u64,
        entropy: u64,
    ) -> Result<Raft, String> {
        cfg.validate()?;
        // The snapshot at the log start names the epoch of the entries before it.
        let mut entries: Vec<OffsetAndEpoch> =
            log.earliest_snapshot.map(|s| s.id).into_iter().collect();
        entries.extend(log.epochs.iter().copied());
        let cache = EpochCache::from_entries(&entries);
        if cache
            .entries()
            .last()
            .is_some_and(|e| e.offset > log.end_offset)
        {
            return Err("the epoch cache goes past the log end".into());
        }
        let start = log.earliest_snapshot.map_or(0, |s| s.id.offset);
        let latest = log.latest_snapshot.or(log.earliest_snapshot);
        if latest.is_some_and(|l| l.id.offset < start || l.id.offset > log.end_offset)
            || log.epochs.first().is_some_and(|e| e.offset < start)
        {
            return Err("the snapshots do not fit the log".into());
        }
        let stored = stored.unwrap_or_default();
        let is_voter = cfg.voters.contains(&cfg.node_id);
        let mut node = Raft {
            is_voter,
            now,
            entropy,
            epoch: stored.epoch,
            voted_for: stored.voted_for,
            leader: stored.leader,
            role: Role::Unattached {
                election_deadline: None,
                probe_sent_at: None,
            },
            cache,
            end_offset: log.end_offset,
            durable_end: log.end_offset,
            // A snapshot holds only committed state.
            high_watermark: latest.map_or(0, |l| l.id.offset),
            earliest_snapshot: log.earliest_snapshot,
            latest_snapshot: latest,
            persisted: stored,
            wanted: stored,
            outbox: VecDeque::new(),
            actions: Vec::new(),
            probe_next: 0,
            cfg,
        };
        let id = node.cfg.node_id;
        let log_epoch = node.cache.last_epoch();
        if log_epoch > stored.epoch {
            // Entries of a newer epoch were appended before its quorum-state was: we never
            // voted or sent in that epoch (sends wait for the persist), so start there afresh.
            node.epoch = stored.epoch;
            node.become_unattached(log_epoch, None);
        } else if stored.leader == Some(id) && is_voter {
            node.voted_for = Some(id);
            node.become_resigned(Vec::new());
        } else if let Some(leader) = stored.leader.filter(|l| *l != id) {
            node.leader = None;
            node.become_follower(stored.epoch, leader);
        } else {
            node.leader = None;
            node.set_role(Role::Unattached {
                election_deadline: None,
                probe_sent_at: None,
            });
            node.reset_unattached_timer();
        }
        node.check_invariants();
        Ok(node)
    }

    /// Feeds one event. `now` is the driver's monotonic clock in ms; `entropy` is a fresh
    /// random value from the driver's RNG (`io.rng`), used if this step draws a timeout.
    pub fn step(&mut self, now: u64, entropy: u64, event: Event) {
        self.enter(now, entropy);
        match event {
            Event::Tick => self.tick(),
            Event::Message { from, message } => self.receive(from, message),
            Event::Flushed { end_offset } => self.flushed(end_offset),
            Event::QuorumStatePersisted(record) => self.quorum_state_persisted(record),
            Event::SnapshotTaken(meta) => self.snapshot_taken(meta),
            Event::SnapshotFetched { id, valid } => self.snapshot_fetched(id, valid),
        }
        self.check_invariants();
    }

    /// Proposes `count` records (opaque `data`) on the leader. Returns the base offset they
    /// will have; they are committed once the high watermark passes them.
    pub fn propose(&mut self, now: u64, count: u32, data: Bytes) -> Result<Offset, NotLeader> {
        self.enter(now, 0);
        if !matches!(self.role, Role::Leader(_)) || count == 0 {
            return Err(NotLeader {
                epoch: self.epoch,
                leader: self.leader,
            });
        }
        let base = self.end_offset;
        self.append_local(Payload::Data(data), count);
        self.check_invariants();
        Ok(base)
    }

    /// Graceful resignation (before shutdown): a leader becomes Resigned and sends
    /// EndQuorumEpoch naming its most caught-up voters as successors.
    pub fn resign(&mut self, now: u64, entropy: u64) {
        self.enter(now, entropy);
        if let Role::Leader(state) = &self.role {
            let successors = successors_by_progress(&state.voters);
            self.become_resigned(successors);
        }
        self.check_invariants();
    }

    /// Takes the actions produced so far, to be performed in order.
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }

    /// The earliest time at which `Event::Tick` has work to do.
    pub fn next_deadline(&self) -> Option<u64> {
        let request = self.cfg.request_timeout_ms;
        match &self.role {
            Role::Unattached {
                election_deadline: Some(d),
                ..
            } => Some(*d),
            Role::Unattached {
                election_deadline: None,
                probe_sent_at,
            } => Some(probe_sent_at.map_or(self.now, |t| t + request)),
            Role::Prospective {
                deadline,
                resend_at,
                ..
            }
            | Role::Candidate {
                deadline,
                resend_at,
                ..
            }
            | Role::Resigned {
                deadline,
                resend_at,
                ..
            } => Some((*deadline).min(*resend_at)),
            Role::Leader(s) => Some(s.next_check.min(s.begin_resend_at)),
            Role::Follower(f) => {
                let retry = match f.inflight {
                    Some(i) => i.sent_at + request,
                    None if self.can_fetch() => f.next_fetch_at,
                    None => u64::MAX,
                };
                Some(f.fetch_deadline.min(retry))
            }
        }
    }

    pub fn role(&self) -> RoleKind {
        self.role.kind()
    }
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }
    pub fn leader(&self) -> Option<NodeId> {
        self.leader
    }
    pub fn voted_for(&self) -> Option<NodeId> {
        self.voted_for
    }
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }
    pub fn end_offset(&self) -> Offset {
        self.end_offset
    }
    pub fn durable_end(&self) -> Offset {
        self.durable_end
    }
    /// The first offset in the log: the end of the snapshot at its start, or 0.
    pub fn log_start(&self) -> Offset {
        self.earliest_snapshot.map_or(0, |s| s.id.offset)
    }
    pub fn latest_snapshot(&self) -> Option<SnapshotMeta> {
        self.latest_snapshot
    }
    pub fn node_id(&self) -> NodeId {
        self.cfg.node_id
    }
    /// The log end as `(last epoch, end offset)`, the position votes compare.
    pub fn log_end(&self) -> OffsetAndEpoch {
        OffsetAndEpoch {
            epoch: self.cache.last_epoch(),
            offset: self.end_offset,
        }
    }

    pub fn describe(&self) -> QuorumInfo {
        let voters = match &self.role {
            Role::Leader(s) => self
                .cfg
                .voters
                .iter()
                .map(|v| match s.voters.get(v) {
                    Some(p) => (*v, p.match_offset, p.last_fetch_at),
                    None => (*v, Some(self.durable_end), Some(self.now)),
                })
                .collect(),
            _ => self.cfg.voters.iter().map(|v| (*v, None, None)).collect(),
        };
        let observers = match &self.role {
            Role::Leader(s) => s
                .observers
                .iter()
                .map(|(id, p)| (*id, p.match_offset, p.last_fetch_at))
                .collect(),
            _ => Vec::new(),
        };
        QuorumInfo {
            epoch: self.epoch,
            leader: self.leader,
            high_watermark: self.high_watermark,
            voters,
            observers,
        }
    }

    fn enter(&mut self, now: u64, entropy: u64) {
        // A clock that goes back is treated as standing still.
        self.now = self.now.max(now);
        self.entropy ^= entropy;
    }

    fn receive(&mut self, from: NodeId, message: Message) {
        if from == self.cfg.node_id {
            // We never send to ourselves: this is a misrouted or forged message.
            return self.drop_input(Some(from), DropReason::Unexpected);
        }
        match message {
            Message::VoteRequest(r) => self.on_vote_request(from, r),
            Message::VoteResponse(r) => self.on_vote_response(from, r),
            Message::BeginQuorumEpochRequest(r) => self.on_begin_quorum_epoch(from, r),
            Message::BeginQuorumEpochResponse(r) => self.on_begin_quorum_epoch_response(from, r),
            Message::EndQuorumEpochRequest(r) => self.on_end_quorum_epoch(from, r),
            Message::EndQuorumEpochResponse(r) => self.on_end_quorum_epoch_response(from, r),
            Message::FetchRequest(r) => self.on_fetch_request(from, r),
            Message::FetchResponse(r) => self.on_fetch_response(from, r),
            Message::FetchSnapshotRequest(r) => self.on_fetch_snapshot_request(from, r),
            Message::FetchSnapshotResponse(r) => self.on_fetch_snapshot_response(from, r),
        }
    }

    fn tick(&mut self) {
        let now = self.now;
        let request = self.cfg.request_timeout_ms;
        // Decide from a copy of the timers, then act (the actions need `&mut self`).
        let (deadline, resend_at) = match &self.role {
            Role::Unattached {
                election_deadline: Some(d),
                ..
            } => (*d, u64::MAX),
            Role::Unattached {
                election_deadline: None,
                ..
            } => return self.probe_voters(),
            Role::Prospective {
                deadline,
                resend_at,
                ..
            }
            | Role::Candidate {
                deadline,
                resend_at,
                ..
            }
            | Role::Resigned {
                deadline,
                resend_at,
                ..
            } => (*deadline, *resend_at),
            Role::Leader(_) => return self.leader_tick(),
            Role::Follower(_) => return self.follower_tick(),
        };
        if now >= deadline {
            // KIP-996: a pre-vote that timed out with the leader still known goes back to
            // following it (its fetch timeout starts the next pre-vote); otherwise we stand.
            match self.last_known_leader() {
                Some(leader) if self.role.kind() == RoleKind::Prospective => {
                    self.become_follower(self.epoch, leader)
                }
                _ => self.become_prospective(),
            }
            return;
        }
        if now < resend_at {
            return;
        }
        match &mut self.role {
            Role::Prospective { resend_at, .. }
            | Role::Candidate { resend_at, .. }
            | Role::Resigned { resend_at, .. } => *resend_at = now + request,
            _ => unreachable!("only these roles resend"),
        }
        match self.role.kind() {
            RoleKind::Prospective => self.send_vote_requests(true),
            RoleKind::Candidate => self.send_vote_requests(false),
            _ => self.send_end_quorum_epoch(),
        }
    }

    // ---- transitions -------------------------------------------------------------------

    /// Moves to `epoch` (≥ ours) as Unattached, having voted for `voted_for`.
    pub(super) fn become_unattached(&mut self, epoch: Epoch, voted_for: Option<NodeId>) {
        self.set_epoch(epoch);
        self.voted_for = voted_for;
        self.leader = None;
        self.set_role(Role::Unattached {
            election_deadline: None,
            probe_sent_at: None,
        });
        self.reset_unattached_timer();
    }

    pub(super) fn reset_unattached_timer(&mut self) {
        let deadline = if self.sole_voter() {
            // No other voter can lead or split the vote: waiting would only delay the start.
            Some(self.now)
        } else if self.is_voter {
            Some(self.now + self.election_timeout())
        } else {
            None
        };
        if let Role::Unattached {
            election_deadline, ..
        } = &mut self.role
        {
            *election_deadline = deadline;
        }
    }

    /// Follows `leader` at `epoch` (≥ ours).
    pub(super) fn become_follower(&mut self, epoch: Epoch, leader: NodeId) {
        assert_ne!(leader, self.cfg.node_id, "following ourselves");
        if epoch == self.epoch {
            assert!(
                self.leader.is_none() || self.leader == Some(leader),
                "two leaders"
            );
        }
        self.set_epoch(epoch);
        self.leader = Some(leader);
        let state = FollowerState {
            fetch_deadline: self.now + self.cfg.fetch_timeout_ms,
            fetched_ok: false,
            inflight: None,
            next_fetch_at: self.now,
            snapshot: None,
        };
        self.set_role(Role::Follower(state));
        self.maybe_fetch();
    }

    /// Starts a pre-vote round at the current epoch (voters only).
    pub(super) fn become_prospective(&mut self) {
        assert!(self.is_voter, "an observer never stands for election");
        let mut votes = BTreeMap::new();
        votes.insert(self.cfg.node_id, true);
        let deadline = self.now + self.election_timeout();
        let resend_at = self.now + self.cfg.request_timeout_ms;
        self.set_role(Role::Prospective {
            votes,
            deadline,
            resend_at,
        });
        self.send_vote_requests(true);
        self.maybe_end_election();
    }

    /// Bumps the epoch and votes for ourselves.
    pub(super) fn become_candidate(&mut self) {
        assert!(
            matches!(self.role, Role::Prospective { .. }),
            "only a prospective stands"
        );
        let epoch = self.epoch + 1;
        self.set_epoch(epoch);
        self.voted_for = Some(self.cfg.node_id);
        self.leader = None;
        let mut votes = BTreeMap::new();
        votes.insert(self.cfg.node_id, true);
        let deadline = self.now + self.election_timeout();
        let resend_at = self.now + self.cfg.request_timeout_ms;
        self.set_role(Role::Candidate {
            votes,
            deadline,
            resend_at,
            retries: 0,
        });
        self.send_vote_requests(false);
        self.maybe_end_election();
    }

    /// Won the election: assign the epoch in the cache, append LeaderChange, announce.
    pub(super) fn become_leader(&mut self) {
        assert!(
            matches!(self.role, Role::Candidate { .. }),
            "only a candidate wins"
        );
        assert_eq!(self.voted_for, Some(self.cfg.node_id));
        assert!(
            self.leader.is_none(),
            "epoch {} already has a leader",
            self.epoch
        );
        assert!(
            self.cache.last_epoch() < self.epoch,
            "our log already has our new epoch"
        );
        self.leader = Some(self.cfg.node_id);
        let voters = self
            .cfg
            .voters
            .iter()
            .filter(|v| **v != self.cfg.node_id)
            .map(|v| (*v, VoterProgress::default()))
            .collect();
        let check_window = self.check_quorum_window();
        self.set_role(Role::Leader(LeaderState {
            epoch_start: self.end_offset,
            became_at: self.now,
            voters,
            observers: BTreeMap::new(),
            begin_resend_at: self.now,
            next_check: self.now + check_window,
        }));
        let voters: Vec<NodeId> = self.cfg.voters.iter().copied().collect();
        self.append_local(
            Payload::LeaderChange {
                leader: self.cfg.node_id,
                voters,
            },
            1,
        );
        self.leader_tick();
        self.update_high_watermark();
    }

    /// Stops leading; stays at the epoch and tells the voters, naming `successors`.
    pub(super) fn become_resigned(&mut self, successors: Vec<NodeId>) {
        assert!(self.is_voter);
        let unacked: BTreeSet<NodeId> = self
            .cfg
            .voters
            .iter()
            .copied()
            .filter(|v| *v != self.cfg.node_id)
            .collect();
        // A sole voter has no successor to wait for: it may stand again at once.
        let deadline = if self.sole_voter() {
            self.now
        } else {
            self.now + self.election_timeout()
        };
        let resend_at = self.now + self.cfg.request_timeout_ms;
        self.leader = Some(self.cfg.node_id);
        self.set_role(Role::Resigned {
            deadline,
            unacked,
            resend_at,
            successors,
        });
        self.send_end_quorum_epoch();
    }

    /// Moves to a message's newer `epoch`: as follower of its leader if it names one.
    pub(super) fn adopt_epoch(&mut self, epoch: Epoch, leader: Option<NodeId>) {
        assert!(epoch > self.epoch);
        match leader.filter(|l| *l != self.cfg.node_id) {
            Some(l) => self.become_follower(epoch, l),
            None => self.become_unattached(epoch, None),
        }
    }

    /// Learns that `leader` leads the current epoch. Returns false (and drops) if that
    /// contradicts what we know.
    /// The epoch's leader we knew before standing, if it is another node (a prospective keeps
    /// it: KIP-996 goes back to following it when the pre-vote fails).
    pub(super) fn last_known_leader(&self) -> Option<NodeId> {
        self.leader.filter(|&l| l != self.cfg.node_id)
    }

    pub(super) fn learn_leader(&mut self, from: NodeId, leader: NodeId) -> bool {
        if self.leader == Some(leader) {
            if leader != self.cfg.node_id && !matches!(self.role, Role::Follower(_)) {
                // A prospective (or an observer) that knew the leader hears from it again.
                self.become_follower(self.epoch, leader);
            }
            return true;
        }
        if self.leader.is_some() || leader == self.cfg.node_id {
            self.drop_input(Some(from), DropReason::ConflictingLeader);
            return false;
        }
        self.become_follower(self.epoch, leader);
        true
    }

    fn set_epoch(&mut self, epoch: Epoch) {
        assert!(
            epoch >= self.epoch,
            "epoch goes back from {} to {epoch}",
            self.epoch
        );
        if epoch > self.epoch {
            self.voted_for = None;
            self.leader = None;
        }
        self.epoch = epoch;
    }

    /// Installs `role`, asks for the election state to be persisted if it changed, and
    /// reports the role.
    fn set_role(&mut self, role: Role) {
        self.role = role;
        let record = QuorumStateRecord {
            epoch: self.epoch,
            voted_for: self.voted_for,
            leader: self.leader,
        };
        if record != self.wanted {
            assert!(
                record.epoch >= self.wanted.epoch,
                "persisting an older epoch"
            );
            self.wanted = record;
            self.push(Action::PersistQuorumState(record));
        }
        self.push(Action::RoleChanged {
            role: self.role.kind(),
            epoch: self.epoch,
            leader: self.leader,
        });
    }

    // ---- the persist barrier -----------------------------------------------------------

    fn quorum_state_persisted(&mut self, record: QuorumStateRecord) {
        if record.epoch > self.wanted.epoch || record.epoch < self.persisted.epoch {
            self.drop_input(None, DropReason::InvalidReport);
            return;
        }
        self.persisted = record;
        if self.persisted == self.wanted {
            while let Some(action) = self.outbox.pop_front() {
                self.push(action);
            }
            self.maybe_end_election();
        }
    }

    pub(super) fn state_is_durable(&self) -> bool {
        #[cfg(any(madsim, test))]
        if (self.cfg.planted).is(crate::config::PlantedBug::QuorumVoteBeforePersist) {
            return true;
        }
        self.persisted == self.wanted
    }

    pub(super) fn send(&mut self, to: NodeId, message: Message) {
        assert_ne!(to, self.cfg.node_id, "sending to ourselves");
        self.send_action(Action::Send { to, message });
    }

    pub(super) fn send_fetch_records(
        &mut self,
        to: NodeId,
        response: FetchResponse,
        start: Offset,
        end: Offset,
    ) {
        assert!(start <= end && end <= self.end_offset);
        self.send_action(Action::SendFetchRecords {
            to,
            response,
            start,
            end,
        });
    }

    pub(super) fn send_action(&mut self, action: Action) {
        if self.state_is_durable() {
            self.push(action);
        } else if self.outbox.len() < MAX_OUTBOX {
            self.outbox.push_back(action);
        } else {
            self.drop_input(None, DropReason::OutboxFull);
        }
    }

    pub(super) fn push(&mut self, action: Action) {
        assert!(
            self.actions.len() < MAX_ACTIONS,
            "the driver does not drain the actions"
        );
        self.actions.push(action);
    }

    pub(super) fn drop_input(&mut self, from: Option<NodeId>, reason: DropReason) {
        self.push(Action::Dropped { from, reason });
    }

    // ---- timers and randomness ---------------------------------------------------------

    /// A uniform value in `[0, n)` from the driver's entropy (splitmix64 of the mixed state).
    fn random_below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        self.entropy = self.entropy.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.entropy;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }

    /// Whether this node is the only voter (a single node's quorum of one): it stands for
    /// election as soon as it has no leader, as Kafka's sole voter does.
    pub(super) fn sole_voter(&self) -> bool {
        self.is_voter && self.cfg.voters.len() == 1
    }

    /// Uniform in `[T, 2T)`, T = `controller.quorum.election.timeout.ms`.
    pub(super) fn election_timeout(&mut self) -> u64 {
        let t = self.cfg.election_timeout_ms;
        t + self.random_below(t)
    }

    /// Binary-exponential backoff after `retries` lost elections, capped at
    /// `controller.quorum.election.backoff.max.ms`.
    pub(super) fn election_backoff(&mut self, retries: u32) -> u64 {
        let range = 2u64 << retries.clamp(1, 16).saturating_sub(1);
        (BACKOFF_BASE_MS * (1 + self.random_below(range))).min(self.cfg.election_backoff_max_ms)
    }

    /// KAFKA-15489: a leader resigns without fetches from a majority for 1.5 × fetch timeout.
    pub(super) fn check_quorum_window(&self) -> u64 {
        self.cfg.fetch_timeout_ms + self.cfg.fetch_timeout_ms / 2
    }

    // ---- invariants --------------------------------------------------------------------

    fn check_invariants(&self) {
        assert!(
            self.high_watermark <= self.end_offset,
            "HW past the log end"
        );
        assert!(
            self.durable_end <= self.end_offset,
            "durable end past the log end"
        );
        assert!(
            self.cache.last_epoch() <= self.epoch,
            "log holds an epoch above ours"
        );
        assert!(
            self.wanted.epoch == self.epoch,
            "quorum-state is not asked for our epoch"
        );
        assert!(self.persisted.epoch <= self.wanted.epoch);
        let start = self.log_start();
        assert!(start <= self.end_offset, "log start past the log end");
        match self.latest_snapshot {
            Some(l) => assert!(
                l.id.offset >= start && l.id.offset <= self.high_watermark,
                "snapshots hold committed state from the log start on"
            ),
            None => assert!(self.earliest_snapshot.is_none(), "no latest snapshot"),
        }
        assert!(
            self.cache
                .entries()
                .first()
                .is_none_or(|e| e.offset >= start),
            "an epoch starts below the log start"
        );
        assert!(self.outbox.len() <= MAX_OUTBOX);
        match &self.role {
            Role::Leader(s) => {
                assert_eq!(self.leader, Some(self.cfg.node_id));
                assert_eq!(self.voted_for, Some(self.cfg.node_id));
                assert!(self.is_voter && s.epoch_start < self.end_offset);
                assert_eq!(self.cache.last_epoch(), self.epoch);
            }
            Role::Candidate { .. } => {
                assert_eq!(self.voted_for, Some(self.cfg.node_id));
                assert!(self.leader.is_none());
            }
            Role::Follower(_) => assert!(self.leader.is_some_and(|l| l != self.cfg.node_id)),
            Role::Resigned { .. } => assert_eq!(self.leader, Some(self.cfg.node_id)),
            Role::Unattached {
                election_deadline, ..
            } => {
                assert!(self.leader.is_none());
                assert_eq!(election_deadline.is_some(), self.is_voter);
            }
            Role::Prospective { .. } => assert!(self.is_voter),
        }
    }
}

/// Other voters, most caught-up first (ties by id), for EndQuorumEpoch.
pub(super) fn successors_by_progress(voters: &BTreeMap<NodeId, VoterProgress>) -> Vec<NodeId> {
    let mut ranked: Vec<(Offset, NodeId)> = voters
        .iter()
        .map(|(id, p)| (p.match_offset.unwrap_or(0), *id))
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranked.into_iter().map(|(_, id)| id).collect()
}

impl Raft {
    /// Appends one batch of our own at the log end, in the current epoch (leader only).
    pub(super) fn append_local(&mut self, payload: Payload, count: u32) {
        assert!(matches!(self.role, Role::Leader(_)));
        let batch = Batch {
            base_offset: self.end_offset,
            epoch: self.epoch,
            count,
            payload,
        };
        self.cache.assign(self.epoch, batch.base_offset);
        self.end_offset = batch.next_offset();
        self.push(Action::Append {
            batches: vec![batch],
        });
    }
}
