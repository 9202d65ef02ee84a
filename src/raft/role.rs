//! The per-role state of KRaft's `QuorumState`. The epoch, the vote and the known leader live
//! on the node itself (they are what `quorum-state` persists); these hold only what a role
//! needs while it lasts: its timers and its tallies.

use std::collections::{BTreeMap, BTreeSet};

use super::action::RoleKind;
use super::types::{Epoch, NodeId, Offset, OffsetAndEpoch};

#[derive(Clone, Debug)]
pub(super) enum Role {
    /// No leader known at this epoch. Voters wait for `election_deadline`; observers (no
    /// deadline) probe the voters with fetches to find the leader.
    Unattached {
        election_deadline: Option<u64>,
        probe_sent_at: Option<u64>,
    },
    /// Pre-voting (KIP-996) at the current epoch; `votes` includes our own.
    Prospective {
        votes: BTreeMap<NodeId, bool>,
        deadline: u64,
        resend_at: u64,
    },
    /// Voting at our own, new epoch; `votes` includes our own. `deadline` ends the election
    /// (or, after it was lost, the backoff); either way the next step is a new pre-vote.
    Candidate {
        votes: BTreeMap<NodeId, bool>,
        deadline: u64,
        resend_at: u64,
        retries: u32,
    },
    Leader(LeaderState),
    /// Following the epoch's known leader by fetching from it.
    Follower(FollowerState),
    /// A leader that stepped down (check-quorum or graceful) but stays at its epoch until
    /// someone else wins the next one; it stands for election itself after `deadline`.
    Resigned {
        deadline: u64,
        unacked: BTreeSet<NodeId>,
        resend_at: u64,
        successors: Vec<NodeId>,
    },
}

#[derive(Clone, Debug)]
pub(super) struct LeaderState {
    /// The log end offset when this epoch began: the HW may only pass it (this epoch's first
    /// entry, the LeaderChange batch, must commit before any earlier entry is exposed).
    pub epoch_start: Offset,
    pub became_at: u64,
    /// Other voters' progress in this epoch.
    pub voters: BTreeMap<NodeId, VoterProgress>,
    /// Observers (pure brokers) that fetched in this epoch, for DescribeQuorum; at most
    /// `MAX_OBSERVERS` (the one heard from least recently makes room).
    pub observers: BTreeMap<NodeId, VoterProgress>,
    pub begin_resend_at: u64,
    pub next_check: u64,
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct VoterProgress {
    /// The fetch offset of the voter's last valid fetch in this epoch.
    pub match_offset: Option<Offset>,
    pub last_fetch_at: Option<u64>,
    /// It fetched or answered BeginQuorumEpoch: no need to send BeginQuorumEpoch again.
    pub acked: bool,
}

#[derive(Clone, Debug)]
pub(super) struct FollowerState {
    /// Without a successful fetch by then, a voter stands for election (an observer forgets
    /// the leader and probes again).
    pub fetch_deadline: u64,
    /// A fetch succeeded since we became follower: KIP-996 rejects pre-votes then.
    pub fetched_ok: bool,
    /// The outstanding fetch: when it was sent and the log position it asked from.
    pub inflight: Option<InflightFetch>,
    pub next_fetch_at: u64,
    /// The snapshot being fetched (FetchSnapshot) instead of the log, after the leader
    /// answered a fetch with a snapshot id.
    pub snapshot: Option<SnapshotFetch>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SnapshotFetch {
    pub id: OffsetAndEpoch,
    /// Bytes received so far (the next chunk's position).
    pub position: u64,
    /// The size the leader reported with the first chunk.
    pub size: Option<u64>,
    /// Every byte is in: waiting for the driver's `SnapshotFetched`.
    pub completing: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct InflightFetch {
    pub sent_at: u64,
    pub fetch_offset: Offset,
    pub last_fetched_epoch: Epoch,
}

impl Role {
    pub fn kind(&self) -> RoleKind {
        match self {
            Role::Unattached { .. } => RoleKind::Unattached,
            Role::Prospective { .. } => RoleKind::Prospective,
            Role::Candidate { .. } => RoleKind::Candidate,
            Role::Leader(_) => RoleKind::Leader,
            Role::Follower(_) => RoleKind::Follower,
            Role::Resigned { .. } => RoleKind::Resigned,
        }
    }
}
