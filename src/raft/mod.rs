//! The metadata quorum core: KRaft's Raft variant as a pure state machine.
//!
//! One [`Raft`] is one node of the `__cluster_metadata` quorum: a voter (in
//! `controller.quorum.voters`) or an observer (a broker that only replicates). It is shaped
//! like raft-rs and quinn-proto: events in ([`Raft::step`] with [`Event::Tick`], a received
//! [`Message`], a flush done, `quorum-state` persisted; [`Raft::propose`]; [`Raft::resign`]),
//! [`Action`]s out ([`Raft::take_actions`]). It does no I/O, reads no clock, draws no
//! randomness (the driver passes `now` and fresh entropy into each step) and is not async.
//!
//! Semantics follow KRaft (KIP-595, KIP-996): roles Unattached, Prospective, Candidate,
//! Leader, Follower, Resigned; pre-vote before every election; pull replication where the
//! leader validates each fetch's `(fetch_offset, last_fetched_epoch)` against its epoch cache
//! and answers with records or a diverging epoch; a high watermark that a majority has
//! durably replicated and that passes the leader's epoch start (its LeaderChange batch);
//! check-quorum; EndQuorumEpoch on resignation. The election state is persisted before any
//! message leaves the node: a barrier holds every send while `quorum-state` is behind.
//!
//! Snapshots (KIP-630): the driver snapshots the state machine at a committed offset and
//! reports it ([`Event::SnapshotTaken`]); the log start then trails the newest snapshot by
//! one. A fetch below the log start is answered with the newest snapshot's id; the fetcher
//! loads it by FetchSnapshot chunks and installs it in place of its log.
//!
//! Invariants asserted in code: epochs never go back, at most one leader per epoch as seen by
//! this node, HW ≤ log end, the leader's HW never goes back, committed entries are never
//! truncated, a leader never truncates. Bad input (non-voters, stale epochs, nonsense fields,
//! late responses) is answered with the protocol's error or dropped with a [`DropReason`].
//!
//! See `docs/ARCHITECTURE.md` for the contract a driver must follow.

mod action;
mod election;
mod epochs;
mod message;
mod node;
pub mod quorum;
mod replication;
mod role;
mod snapshots;
mod types;

#[cfg(test)]
mod tests;

pub use action::{Action, DropReason, RoleKind};
pub use epochs::{EpochCache, FetchPosition};
pub use message::{
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest,
    EndQuorumEpochResponse, FetchRequest, FetchResponse, FetchSnapshotRequest,
    FetchSnapshotResponse, Message, RaftError, VoteRequest, VoteResponse,
};
pub use node::{Event, NotLeader, QuorumInfo, Raft, MAX_ACTIONS, MAX_OBSERVERS, MAX_OUTBOX};
pub use types::{
    Batch, Epoch, LogState, NodeId, Offset, OffsetAndEpoch, Payload, QuorumStateRecord, RaftConfig,
    SnapshotMeta, MAX_VOTERS,
};
