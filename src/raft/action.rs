//! What the core asks its driver to do. The driver performs a step's actions in order before
//! feeding the next event.

use bytes::Bytes;

use super::message::{FetchResponse, FetchSnapshotResponse, Message};
use super::types::{Batch, Epoch, NodeId, Offset, OffsetAndEpoch, QuorumStateRecord, SnapshotMeta};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send `message` to node `to`. Delivery may fail; the core retries what matters.
    Send { to: NodeId, message: Message },
    /// Answer a fetch: read whole batches from `start` (a batch boundary) up to at most `end`
    /// from the log *now*, before the next event, put them in `response.records` and send it
    /// to `to`. The driver may return fewer batches (a byte limit), never a partial batch.
    SendFetchRecords {
        to: NodeId,
        response: FetchResponse,
        start: Offset,
        end: Offset,
    },
    /// Answer a FetchSnapshot: read the snapshot `response.snapshot_id` from byte `start`
    /// (at most the driver's chunk size, never past its end) into `response.bytes` *now*, and
    /// send it to `to`. A snapshot the driver can no longer read is answered
    /// `SNAPSHOT_NOT_FOUND`.
    SendSnapshotChunk {
        to: NodeId,
        response: FetchSnapshotResponse,
        start: u64,
    },
    /// Write a fetched chunk of snapshot `id` at byte `position` of its partial file (position
    /// 0 starts the file afresh). Not durable until `CompleteSnapshot`.
    WriteSnapshotChunk {
        id: OffsetAndEpoch,
        position: u64,
        bytes: Bytes,
    },
    /// Every byte of snapshot `id` (`size` bytes) is written: make the partial file durable,
    /// verify it, and report `Event::SnapshotFetched`.
    CompleteSnapshot { id: OffsetAndEpoch, size: u64 },
    /// Install the fetched, verified snapshot: make it the node's snapshot file, empty the log
    /// and restart it at `meta.id.offset` (durably), and load the snapshot into the state
    /// machine; everything below its end is applied. The core already counts it as done.
    InstallSnapshot(SnapshotMeta),
    /// Delete snapshot `id` (a partial or a complete file): abandoned, or superseded.
    DeleteSnapshot { id: OffsetAndEpoch },
    /// The log start moves to `offset` (a snapshot's end): write it durably, delete the log
    /// segments wholly below it. The core already counts it as done.
    AdvanceLogStart { offset: Offset },
    /// Append these batches at the log's end (the first starts at the current end offset).
    /// They are not durable until the driver reports `Event::Flushed`.
    Append { batches: Vec<Batch> },
    /// Remove every entry at or after `offset` (never below the high watermark).
    Truncate { offset: Offset },
    /// Write `quorum-state` durably and report `Event::QuorumStatePersisted` with this record.
    /// Until then the core sends nothing.
    PersistQuorumState(QuorumStateRecord),
    /// The high watermark advanced: entries below it are committed and may be applied.
    Commit { high_watermark: Offset },
    /// This node's role changed.
    RoleChanged {
        role: RoleKind,
        epoch: Epoch,
        leader: Option<NodeId>,
    },
    /// An input was ignored; the driver may log `reason`. Nothing changed.
    Dropped {
        from: Option<NodeId>,
        reason: DropReason,
    },
}

/// The roles of KRaft's `QuorumState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleKind {
    Unattached,
    Prospective,
    Candidate,
    Leader,
    Follower,
    Resigned,
}

/// Why an input changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// A response or request for an epoch older than ours.
    StaleEpoch,
    /// A response this role did not ask for (or no longer waits for).
    Unexpected,
    /// A message claims a different leader for an epoch whose leader we already know.
    ConflictingLeader,
    /// A fetch response whose records do not start at our log end (a late duplicate).
    StaleFetchResponse,
    /// Batches that are not contiguous, carry an epoch that goes back or is above the leader's,
    /// or are empty.
    InvalidBatches,
    /// A diverging epoch that would truncate committed entries.
    TruncationBelowHighWatermark,
    /// The sender of a voter-only message is not a voter.
    NotAVoter,
    /// Too many sends wait for `quorum-state` to be persisted.
    OutboxFull,
    /// A flush or persisted report that does not match anything asked for.
    InvalidReport,
}
