//! What this node knows of the metadata quorum: its role, epoch, leader and high watermark,
//! and (on the leader) every replica's progress. Read by the simulator's quorum checks,
//! DescribeQuorum and `weir cluster status`.
//!
//! Until the quorum driver is wired (branch wt/quorum, which replaces this file), every node
//! is a quorum of one: it answers Leader of epoch 1, and its committed metadata is its own
//! metadata log, every record of which is committed once confirmed.

use bytes::Bytes;

use super::Broker;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum QuorumRole {
    Leader,
    Candidate,
    Prospective,
    Follower,
    Unattached,
    Resigned,
    Observer,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaProgress {
    pub node_id: i32,
    pub voter: bool,
    pub end_offset: u64,
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
    /// On the leader only: every voter's and observer's progress.
    pub replicas: Vec<ReplicaProgress>,
}

impl Broker {
    /// This node's view of the quorum.
    pub fn quorum_status(&self) -> QuorumStatus {
        let id = self.config.node_id;
        // A commit in progress holds the store; its end is then unknown here, and the node's
        // answer is as of the last commit (the image's count is not tracked separately).
        let end = self
            .metadata
            .try_lock()
            .map(|store| store.end_offset())
            .unwrap_or(0);
        QuorumStatus {
            node_id: id,
            role: QuorumRole::Leader,
            epoch: 1,
            leader: Some(id),
            high_watermark: end,
            log_end: end,
            replicas: vec![ReplicaProgress {
                node_id: id,
                voter: true,
                end_offset: end,
                last_fetch_ms: None,
            }],
        }
    }

    /// Committed metadata records this node applied, from offset `from`, at most `max`:
    /// (offset, the record's raw value bytes). A node busy committing answers nothing this
    /// time rather than wait (the simulator samples again).
    pub fn committed_metadata(&self, from: u64, max: usize) -> Vec<(u64, Bytes)> {
        match self.metadata.try_lock() {
            Ok(store) => store.committed_records(from, max),
            Err(_) => Vec::new(),
        }
    }
}
