//! The quorum's messages, one struct per KRaft RPC, with the fields KRaft uses. The broker
//! layer converts them to and from kafka-protocol's `Vote`, `BeginQuorumEpoch`,
//! `EndQuorumEpoch` and `Fetch` types; the core never sees the wire.

use bytes::Bytes;

use super::types::{Batch, Epoch, NodeId, Offset, OffsetAndEpoch};

/// The subset of Kafka's error codes these RPCs use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaftError {
    /// The request's epoch is older than the receiver's (`FENCED_LEADER_EPOCH`).
    FencedLeaderEpoch,
    /// The request's epoch is newer than the receiver knows (`UNKNOWN_LEADER_EPOCH`).
    UnknownLeaderEpoch,
    /// The receiver is not the leader (`NOT_LEADER_OR_FOLLOWER`).
    NotLeaderOrFollower,
    /// The sender is not in the receiver's voter set (`INCONSISTENT_VOTER_SET`).
    InconsistentVoterSet,
    /// The fields contradict each other (`INVALID_REQUEST`).
    InvalidRequest,
    /// FetchSnapshot of a snapshot the leader does not have (`SNAPSHOT_NOT_FOUND`).
    SnapshotNotFound,
    /// FetchSnapshot at a position past the snapshot's size (`POSITION_OUT_OF_RANGE`).
    PositionOutOfRange,
}

/// `Vote`, with KIP-996's `PreVote` flag. A pre-vote carries the prospective's current epoch;
/// a real vote carries the candidate's new epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteRequest {
    pub candidate_epoch: Epoch,
    pub candidate_id: NodeId,
    /// The candidate's log end: `(last epoch, end offset)`.
    pub last_offset_epoch: Epoch,
    pub last_offset: Offset,
    pub pre_vote: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteResponse {
    pub error: Option<RaftError>,
    pub leader_epoch: Epoch,
    pub leader_id: Option<NodeId>,
    pub vote_granted: bool,
    pub pre_vote: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeginQuorumEpochRequest {
    pub leader_epoch: Epoch,
    pub leader_id: NodeId,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeginQuorumEpochResponse {
    pub error: Option<RaftError>,
    pub leader_epoch: Epoch,
    pub leader_id: Option<NodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndQuorumEpochRequest {
    pub leader_epoch: Epoch,
    pub leader_id: NodeId,
    /// Voters in the order the resigning leader prefers them as successors (most caught-up
    /// first).
    pub preferred_successors: Vec<NodeId>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndQuorumEpochResponse {
    pub error: Option<RaftError>,
    pub leader_epoch: Epoch,
    pub leader_id: Option<NodeId>,
}

/// A follower's or observer's `Fetch` of the metadata partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRequest {
    /// The epoch the fetcher believes current (`CurrentLeaderEpoch`).
    pub current_leader_epoch: Epoch,
    /// The fetcher's log end offset (`FetchOffset`): fetching N acknowledges everything below N.
    pub fetch_offset: Offset,
    /// The epoch of the fetcher's last entry (`LastFetchedEpoch`), 0 for an empty log.
    pub last_fetched_epoch: Epoch,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchResponse {
    pub error: Option<RaftError>,
    pub leader_epoch: Epoch,
    pub leader_id: Option<NodeId>,
    /// The leader's high watermark (absent on errors).
    pub high_watermark: Option<Offset>,
    /// Where the fetcher's log diverges from the leader's (`DivergingEpoch`): truncate to at
    /// most `offset`, then fetch again.
    pub diverging_epoch: Option<OffsetAndEpoch>,
    /// The fetch falls below the leader's log start (or its epoch is older than the log
    /// start's snapshot): load this snapshot (FetchSnapshot), then fetch from its end.
    pub snapshot_id: Option<OffsetAndEpoch>,
    /// Whole batches starting at the fetch offset.
    pub records: Vec<Batch>,
    /// The request this answers: its `fetch_offset` and `last_fetched_epoch`. Not a wire
    /// field: the leader's core fills it, and the fetcher's driver restores it from the request
    /// it matched by correlation id. A diverging epoch means something only for the position
    /// it was computed from, so the fetcher applies a response only if this is its position.
    pub request: OffsetAndEpoch,
}

/// `FetchSnapshot` (KIP-630): one chunk of snapshot `snapshot_id` from byte `position`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSnapshotRequest {
    pub current_leader_epoch: Epoch,
    pub snapshot_id: OffsetAndEpoch,
    pub position: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSnapshotResponse {
    pub error: Option<RaftError>,
    pub leader_epoch: Epoch,
    pub leader_id: Option<NodeId>,
    pub snapshot_id: OffsetAndEpoch,
    /// The snapshot's whole size in bytes.
    pub size: u64,
    /// Where `bytes` starts in the snapshot.
    pub position: u64,
    /// The chunk (`UnalignedRecords`); the leader's driver fills it from the file.
    pub bytes: Bytes,
}

/// Every message the core sends or receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    VoteRequest(VoteRequest),
    VoteResponse(VoteResponse),
    BeginQuorumEpochRequest(BeginQuorumEpochRequest),
    BeginQuorumEpochResponse(BeginQuorumEpochResponse),
    EndQuorumEpochRequest(EndQuorumEpochRequest),
    EndQuorumEpochResponse(EndQuorumEpochResponse),
    FetchRequest(FetchRequest),
    FetchResponse(FetchResponse),
    FetchSnapshotRequest(FetchSnapshotRequest),
    FetchSnapshotResponse(FetchSnapshotResponse),
}
