//! What a node knows about the metadata quorum, for the simulator's checks, DescribeQuorum and
//! `weir cluster status`: its role, epoch, leader, high watermark and (on the leader) every
//! replica's progress; and the committed metadata records it applied, in order, for the
//! simulator's "every node's committed metadata is a prefix of one sequence" check.
//!
//! A node without other voters (no `controller.quorum.voters`, or only itself) is its own
//! quorum of one: Leader from its start, of an epoch one past its previous run's.

/// KRaft's roles, plus Observer for a node outside the voter set (a pure broker).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuorumRole {
    Leader,
    Candidate,
    Prospective,
    Follower,
    Unattached,
    Resigned,
    Observer,
}

impl QuorumRole {
    pub fn as_str(self) -> &'static str {
        match self {
            QuorumRole::Leader => "Leader",
            QuorumRole::Candidate => "Candidate",
            QuorumRole::Prospective => "Prospective",
            QuorumRole::Follower => "Follower",
            QuorumRole::Unattached => "Unattached",
            QuorumRole::Resigned => "Resigned",
            QuorumRole::Observer => "Observer",
        }
    }
}

/// One replica of the metadata log as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaProgress {
    pub node_id: i32,
    pub voter: bool,
    /// The offset up to which the replica has the log durably (its last fetch offset).
    pub end_offset: u64,
    /// Wall-clock ms of its last fetch, if it fetched at all.
    pub last_fetch_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumStatus {
    pub node_id: i32,
    pub role: QuorumRole,
    pub epoch: u32,
    pub leader: Option<i32>,
    pub high_watermark: u64,
    pub log_end: u64,
    /// The metadata log's first offset (the end of the snapshot at its start, or 0).
    pub log_start: u64,
    /// The newest metadata snapshot this node has.
    pub snapshot: Option<crate::raft::OffsetAndEpoch>,
    /// On the leader only: every voter's and observer's progress.
    pub replicas: Vec<ReplicaProgress>,
}
