//! The quorum core's own vocabulary: ids, epochs, offsets, batches, the persisted election
//! state and the configuration. None of it is a wire type; the broker layer maps these 1:1 to
//! kafka-protocol's fields.

use std::collections::BTreeSet;

use bytes::Bytes;

/// A node (controller or broker) id, as `node.id` in Kafka.
pub type NodeId = i32;
/// A leader epoch. Epoch 0 is the initial epoch, which never has a leader: every elected leader
/// is at epoch ≥ 1, so every batch in the log carries an epoch ≥ 1.
pub type Epoch = u32;
/// A log offset.
pub type Offset = u64;

/// A position in a log named by its offset and the epoch of the entry before it, ordered
/// lexicographically by `(epoch, offset)`: the order Raft uses to compare logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OffsetAndEpoch {
    pub epoch: Epoch,
    pub offset: Offset,
}

/// What one batch of the replicated log holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// The control batch a new leader appends at the start of its epoch (Kafka's
    /// `LeaderChangeMessage`); committing it commits everything before it.
    LeaderChange { leader: NodeId, voters: Vec<NodeId> },
    /// Records proposed by the state machine (the controller), opaque to the core.
    Data(Bytes),
}

/// One batch of the replicated log: `count` records at `base_offset..base_offset + count`, all
/// written in `epoch` (Kafka's `partitionLeaderEpoch`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub base_offset: Offset,
    pub epoch: Epoch,
    pub count: u32,
    pub payload: Payload,
}

impl Batch {
    pub fn next_offset(&self) -> Offset {
        self.base_offset + u64::from(self.count)
    }
}

/// The election state written to the `quorum-state` file (Kafka's `ElectionState`): it must be
/// durable before the node acts on it (answers a vote, sends in a new epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QuorumStateRecord {
    pub epoch: Epoch,
    pub voted_for: Option<NodeId>,
    pub leader: Option<NodeId>,
}

/// A snapshot of the committed state (KIP-630): its id is `(end offset, epoch of the last
/// entry it covers)`, and `size` is the length of its file in bytes (what FetchSnapshot
/// serves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotMeta {
    pub id: OffsetAndEpoch,
    pub size: u64,
}

/// What the driver recovered from the log at start: its epoch cache (`(epoch, start offset)`
/// pairs, strictly increasing in both, for the batches at or after the log start) and its end
/// offset, and the snapshots it kept. Everything recovered is durable.
///
/// `earliest_snapshot` is the snapshot at the log start (the log start is its end offset;
/// `None`: the log starts at 0); `latest_snapshot` the newest one (the two may be the same).
/// Both are committed state, so the high watermark starts at the latest one's end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogState {
    pub epochs: Vec<OffsetAndEpoch>,
    pub end_offset: Offset,
    pub earliest_snapshot: Option<SnapshotMeta>,
    pub latest_snapshot: Option<SnapshotMeta>,
}

/// The quorum's configuration, with Kafka's key names and defaults.
#[derive(Clone, Debug)]
pub struct RaftConfig {
    pub node_id: NodeId,
    /// `controller.quorum.voters`: the static voter set. A node not in it is an observer.
    pub voters: BTreeSet<NodeId>,
    /// `controller.quorum.election.timeout.ms`: an election timeout is drawn from `[T, 2T)`.
    pub election_timeout_ms: u64,
    /// `controller.quorum.election.backoff.max.ms`: cap of the backoff after a lost election.
    pub election_backoff_max_ms: u64,
    /// `controller.quorum.fetch.timeout.ms`: a follower that has not fetched successfully for
    /// this long stands for election; a leader not fetched from by a majority within 1.5× this
    /// resigns (check-quorum).
    pub fetch_timeout_ms: u64,
    /// How long an unanswered request (a fetch, a vote) waits before it is sent again. Our
    /// leader does not park empty fetches, so this is short, unlike Kafka's request timeout.
    pub request_timeout_ms: u64,
    /// After an empty fetch response a follower waits this long before fetching again (the
    /// stand-in for the leader parking the fetch up to `maxWaitMs`).
    pub fetch_idle_backoff_ms: u64,
    /// Simulator and tests: the bug planted in this node (the Quorum* ones).
    #[cfg(any(madsim, test))]
    pub planted: crate::config::planted::Planted,
}

impl RaftConfig {
    /// Kafka's defaults for `node_id` in `voters`.
    pub fn new(node_id: NodeId, voters: BTreeSet<NodeId>) -> RaftConfig {
        RaftConfig {
            node_id,
            voters,
            election_timeout_ms: 1000,
            election_backoff_max_ms: 1000,
            fetch_timeout_ms: 2000,
            request_timeout_ms: 500,
            fetch_idle_backoff_ms: 50,
            #[cfg(any(madsim, test))]
            planted: Default::default(),
        }
    }

    /// Why this configuration cannot run, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.voters.is_empty() {
            return Err("the voter set is empty".into());
        }
        if self.voters.len() > MAX_VOTERS {
            return Err(format!("more than {MAX_VOTERS} voters"));
        }
        if self.election_timeout_ms == 0 || self.fetch_timeout_ms == 0 {
            return Err("election and fetch timeouts must be positive".into());
        }
        if self.request_timeout_ms == 0 || self.request_timeout_ms >= self.fetch_timeout_ms {
            return Err("the request timeout must be positive and below the fetch timeout".into());
        }
        Ok(())
    }
}

/// The largest voter set the core accepts: bounds every per-voter loop and map.
pub const MAX_VOTERS: usize = 64;
