//! The follower side of a partition: appending the leader's batches as they are (offsets,
//! leader epochs and bytes kept, CRCs checked, nothing re-encoded), following the leader's high
//! watermark, and truncating when the log diverges from the leader's.
//!
//! Producer state is updated from replicated batches without sequence checks (notes §6.3), so it
//! is the same function of the log prefix on every replica and deduplication survives failover.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use super::snapshot::{self, LastBatch, Snapshot, PRODUCER_SNAPSHOT};
use super::Partition;
use crate::io::Disk;
use crate::log::batch::{self, BatchHeader};
use crate::log::{Checkpoint, FlushPlan, Log, StartOffsetWrite};
use crate::replica::producer::ProducerStates;

/// Why the leader's batches were refused. Nothing was appended.
#[derive(Debug)]
pub enum FollowerAppendError {
    /// Not a sequence of whole, CRC-valid v2 batches.
    Corrupt(String),
    /// The first batch does not start at the local log end: a gap (`found > expected`) or an
    /// overlap (`found < expected`).
    NotAtLogEnd {
        expected: i64,
        found: i64,
    },
    /// A batch starts before the previous one ended (offsets go back or overlap). A batch
    /// starting after it is a gap a compacted leader legitimately has.
    NotContiguous {
        expected: i64,
        found: i64,
    },
    /// The batches jump forward over offsets (a compacted leader) and this log does not yet
    /// accept gaps: make [`Log::gap_marker`] durable, call [`Log::allow_gaps`], append again.
    NeedsGapMarker,
    /// A batch carries no leader epoch, or one older than the log already has.
    EpochGoesBack {
        offset: i64,
        epoch: i32,
        latest: i32,
    },
    /// This replica leads the partition.
    NotFollower,
    /// A truncation is not yet durable ([`Partition::truncation_durable`]).
    TruncationPending {
        at: i64,
    },
    Storage(io::Error),
}

impl std::fmt::Display for FollowerAppendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FollowerAppendError::Corrupt(why) => {
                write!(f, "corrupt batches from the leader: {why}")
            }
            FollowerAppendError::NotAtLogEnd { expected, found } if found > expected => {
                write!(
                    f,
                    "gap: batches start at {found}, the log ends at {expected}"
                )
            }
            FollowerAppendError::NotAtLogEnd { expected, found } => {
                write!(
                    f,
                    "overlap: batches start at {found}, the log ends at {expected}"
                )
            }
            FollowerAppendError::NotContiguous { expected, found } => {
                write!(f, "batch at {found} where {expected} was expected")
            }
            FollowerAppendError::NeedsGapMarker => {
                write!(
                    f,
                    "the batches have offset gaps; the log must accept them first"
                )
            }
            FollowerAppendError::EpochGoesBack {
                offset,
                epoch,
                latest,
            } => write!(
                f,
                "batch at {offset} has leader epoch {epoch}, the log is at epoch {latest}"
            ),
            FollowerAppendError::NotFollower => write!(f, "this replica is the leader"),
            FollowerAppendError::TruncationPending { at } => {
                write!(f, "the truncation to {at} is not durable yet")
            }
            FollowerAppendError::Storage(e) => write!(f, "storage: {e}"),
        }
    }
}

impl std::error::Error for FollowerAppendError {}

/// What a follower append wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerAppended {
    pub first_offset: i64,
    pub last_offset: i64,
    pub batches: usize,
    /// The leader epoch of the last batch (the next Fetch's `LastFetchedEpoch`).
    pub last_epoch: i32,
}

impl Partition {
    /// Appends the leader's batches (`records`: one or more whole v2 batches back to back, as a
    /// Fetch response carries them) at their own offsets: the first at or after the local log
    /// end, each after the previous one. Offsets may jump forward (a compacted leader's gaps,
    /// kept as they are) once the log accepts gaps ([`FollowerAppendError::NeedsGapMarker`]).
    /// All are checked before any is written: on an error nothing changes. Returns `Ok(None)`
    /// for no batches. The high watermark does not move here
    /// ([`Partition::follow_high_watermark`]).
    pub fn append_as_follower(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<Option<FollowerAppended>, FollowerAppendError> {
        self.state.check_follower_append()?;
        let (headers, gaps) = self.check_leader_batches(records)?;
        let Some(last) = headers.last().copied() else {
            return Ok(None);
        };
        if gaps && !self.log.gaps_allowed() {
            return Err(FollowerAppendError::NeedsGapMarker);
        }
        let first_offset = headers[0].base_offset;
        // One copy of the bytes, written as they came (the offsets are the leader's already).
        let mut owned = records.to_vec();
        let mut position = 0;
        for header in headers.iter() {
            let len = header.total_len();
            let slice = &mut owned[position..position + len];
            self.log
                .append_at_offsets(slice, std::slice::from_ref(header), now_ms)
                .map_err(FollowerAppendError::Storage)?;
            let what = snapshot::classify(&owned[position..position + len], header);
            let went_back = self.state.replayed(header, what, now_ms);
            snapshot::warn_if_epoch_went_back(header, went_back);
            position += len;
        }
        assert_eq!(self.log.end_offset(), last.next_offset());
        assert_eq!(self.log.latest_epoch(), last.partition_leader_epoch);
        let ends = self.ends();
        self.state.replicated(ends);
        Ok(Some(FollowerAppended {
            first_offset,
            last_offset: last.last_offset(),
            batches: headers.len(),
            last_epoch: last.partition_leader_epoch,
        }))
    }

    /// Every batch whole and CRC-valid, in offset order from the log end (with whether any
    /// offsets are skipped), epochs never going back.
    fn check_leader_batches(
        &self,
        records: &[u8],
    ) -> Result<(Vec<BatchHeader>, bool), FollowerAppendError> {
        let mut headers: Vec<BatchHeader> = Vec::new();
        let mut expected = self.log.end_offset();
        let mut latest = self.log.latest_epoch();
        let mut gaps = false;
        for item in batch::iter(records) {
            let (_, header) = item.map_err(|e| FollowerAppendError::Corrupt(e.to_string()))?;
            gaps |= header.base_offset > expected;
            if header.base_offset < expected {
                return Err(match headers.is_empty() {
                    true => FollowerAppendError::NotAtLogEnd {
                        expected,
                        found: header.base_offset,
                    },
                    false => FollowerAppendError::NotContiguous {
                        expected,
                        found: header.base_offset,
                    },
                });
            }
            let epoch = header.partition_leader_epoch;
            if epoch < 0 || epoch < latest {
                return Err(FollowerAppendError::EpochGoesBack {
                    offset: header.base_offset,
                    epoch,
                    latest,
                });
            }
            if epoch > latest && !self.log.epochs().can_assign(epoch, header.base_offset) {
                return Err(FollowerAppendError::EpochGoesBack {
                    offset: header.base_offset,
                    epoch,
                    latest,
                });
            }
            latest = epoch;
            expected = header.next_offset();
            headers.push(header);
        }
        Ok((headers, gaps))
    }

    /// What a follower's fetch reads: whole batches from `offset` up to the log end (not the
    /// high watermark: followers hold what is not yet committed, that is how it commits). The
    /// group coordinator's load of a newly led `__consumer_offsets` partition reads the same
    /// way (Kafka loads to the log end offset).
    pub fn read_for_replica(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<bytes::Bytes, crate::log::ReadError> {
        self.log.read(offset, max_bytes, self.log.end_offset())
    }

    /// A replica of a replicated partition that (re)opens does not know how much of its log
    /// was committed: it may end in records no other replica holds (appended as leader just
    /// before a crash). Kafka restarts from its high-watermark checkpoint, which never passes
    /// the true one; this replica starts from its log start. As leader its watermark then
    /// rises only by the ISR rule, as follower to the leader's: a retried produce of such a
    /// record is never acknowledged on this replica's word alone. Call right after `open`.
    pub fn forget_high_watermark(&mut self) {
        let ends = self.ends();
        self.state.forget_high_watermark(ends);
    }

    /// A follower's high watermark: the leader's, capped at the local log end (and never below
    /// the log start). Not monotonic across leader changes (notes §1.11).
    pub fn follow_high_watermark(&mut self, leader_high_watermark: i64) {
        let ends = self.ends();
        self.state
            .follow_high_watermark(leader_high_watermark, ends);
    }
}

/// Why a truncation was refused. Nothing changed.
#[derive(Debug)]
pub enum TruncateError {
    /// Below the log start: the data there is gone and every replica agreed on it (the log
    /// start never passes the high watermark).
    BelowLogStart {
        offset: i64,
        log_start: i64,
    },
    /// This replica leads the partition: a leader's log is the one others truncate to.
    NotFollower,
    /// A restart at the leader's log start asked of a log that reaches it.
    NotBehind {
        leader_log_start: i64,
        end: i64,
    },
    Storage(io::Error),
}

impl std::fmt::Display for TruncateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TruncateError::BelowLogStart { offset, log_start } => {
                write!(
                    f,
                    "truncation to {offset} is below the log start {log_start}"
                )
            }
            TruncateError::NotFollower => write!(f, "a leader does not truncate"),
            TruncateError::NotBehind {
                leader_log_start,
                end,
            } => write!(
                f,
                "the log reaches the leader's log start {leader_log_start} (it ends at {end})"
            ),
            TruncateError::Storage(e) => write!(f, "storage: {e}"),
        }
    }
}

impl std::error::Error for TruncateError {}

/// What makes a truncation durable, done outside the partition lock (and, in the broker, under
/// the partition's flush gate, so no checkpoint of the old state lands after it): fsync the cut
/// segment and the directory (removed segments and snapshot), then write the epoch and
/// recovery-point checkpoints (the recovery point at or below the cut, so a later crash
/// rescans from there). Then [`Partition::truncation_durable`].
pub struct TruncationPlan {
    /// The log end after the cut (a batch boundary at or below the requested offset).
    pub end_offset: i64,
    flush: FlushPlan,
    checkpoint: Checkpoint,
    disk: Arc<dyn Disk>,
    dir: PathBuf,
}

impl TruncationPlan {
    pub async fn make_durable(&self) -> io::Result<()> {
        Log::sync_files(&self.flush).await?;
        self.disk.sync_dir(&self.dir).await?;
        self.checkpoint.write().await
    }
}

impl Partition {
    /// Cuts the log to `offset` (a follower whose log diverged from its leader's, KIP-101 /
    /// KIP-279): the batches holding offsets at or after it (a batch straddling it goes whole),
    /// their index entries, the epochs that start there, and the producer state they built
    /// (rebuilt from the snapshot at or below the cut and the batches after it; a snapshot
    /// above the cut is deleted). The high watermark is clamped to the new end. `Ok(None)` when
    /// the log already ends at or before `offset`. Nothing is appended until the returned plan
    /// is durable ([`Partition::truncation_durable`]).
    pub fn truncate_to(&mut self, offset: i64) -> Result<Option<TruncationPlan>, TruncateError> {
        self.state.check_truncate()?;
        let log_start = self.log.start_offset();
        if offset < log_start {
            return Err(TruncateError::BelowLogStart { offset, log_start });
        }
        if offset >= self.log.end_offset() {
            return Ok(None);
        }
        let snapshot = Snapshot::load(self.log.disk().as_ref(), self.log.dir());
        self.log
            .truncate_to(offset)
            .map_err(TruncateError::Storage)?;
        let end = self.log.end_offset();
        assert!(end <= offset && end >= log_start);
        // The snapshot is read before the cut and judged after it: one above the cut (or from
        // another history) is removed, so no start can trust it.
        let snapshot = match snapshot {
            Some(s) if s.fits(&self.log, end).map_err(TruncateError::Storage)? => Some(s),
            Some(_) => {
                let path = self.log.dir().join(PRODUCER_SNAPSHOT);
                match self.log.disk().remove_file(&path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(TruncateError::Storage(e))
                    }
                    _ => None,
                }
            }
            None => None,
        };
        let producers =
            snapshot::rebuild(&self.log, snapshot, end).map_err(TruncateError::Storage)?;
        let last_batch = LastBatch::in_log(&self.log, end).map_err(TruncateError::Storage)?;
        let ends = self.ends();
        self.state.truncated(ends, producers, last_batch);
        tracing::info!(topic = %self.topic, partition = self.index, requested = offset, end,
            "truncated the log");
        Ok(Some(TruncationPlan {
            end_offset: end,
            flush: self.log.flush_plan(),
            checkpoint: self.log.checkpoint(),
            disk: self.log.disk().clone(),
            dir: self.log.dir().to_path_buf(),
        }))
    }

    /// A follower whose log ends before its leader's log start (the leader deleted or retained
    /// away what this replica misses while it was gone), first half of Kafka's
    /// `truncateFullyAndStartAt`: the new log start to make durable before
    /// [`Partition::restart_at`] (a crash after it opens the log there, empty).
    ///
    /// Also the way back for a log just restarted so: the leader's log start may fall inside a
    /// batch (DeleteRecords is not batch aligned), and that batch, served whole, starts below
    /// it; an empty log restarts at the batch's base (Kafka's `UnexpectedAppendOffsetException`
    /// in `appendRecordsToFollowerOrFutureReplica`). A log holding records never moves back.
    pub fn restart_plan(&self, offset: i64) -> Result<StartOffsetWrite, TruncateError> {
        self.state.check_truncate()?;
        self.check_restart(offset)?;
        Ok(self.log.restart_write(offset))
    }

    fn check_restart(&self, offset: i64) -> Result<(), TruncateError> {
        let end = self.log.end_offset();
        let empty = self.log.start_offset() == end;
        if offset > end || (empty && offset >= 0 && offset < end) {
            return Ok(());
        }
        Err(TruncateError::NotBehind {
            leader_log_start: offset,
            end,
        })
    }

    /// Second half, once the plan's write is durable: the log is emptied and starts at
    /// `offset`, the high watermark with it; the producer state and its snapshot go (they
    /// describe records this replica no longer holds; the leader's batches rebuild them).
    /// Nothing is appended until the returned plan is durable
    /// ([`Partition::truncation_durable`]).
    pub fn restart_at(
        &mut self,
        offset: i64,
        now_ms: i64,
    ) -> Result<TruncationPlan, TruncateError> {
        self.state.check_truncate()?;
        self.check_restart(offset)?;
        let end = self.log.end_offset();
        let path = self.log.dir().join(PRODUCER_SNAPSHOT);
        match self.log.disk().remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(TruncateError::Storage(e)),
            _ => {}
        }
        self.log
            .restart_in_memory(offset, now_ms)
            .map_err(TruncateError::Storage)?;
        let ends = self.ends();
        assert!(ends.start == offset && ends.end == offset);
        self.state.truncated(ends, ProducerStates::default(), None);
        assert_eq!(self.state.high_watermark(), offset);
        tracing::info!(topic = %self.topic, partition = self.index, from = end, offset,
            "restarted the log at the leader's log start");
        Ok(TruncationPlan {
            end_offset: offset,
            flush: self.log.flush_plan(),
            checkpoint: self.log.checkpoint(),
            disk: self.log.disk().clone(),
            dir: self.log.dir().to_path_buf(),
        })
    }

    /// The truncation `plan` is durable: appends may resume.
    pub fn truncation_durable(&mut self, plan: &TruncationPlan, now_ms: i64) {
        self.log.flushed(&plan.flush, now_ms);
        let ends = self.ends();
        self.state.truncation_durable(plan.end_offset, ends);
    }

    /// A truncation not yet durable, and where it cut.
    pub fn pending_truncation(&self) -> Option<i64> {
        self.state.pending_truncation()
    }
}

#[cfg(test)]
pub(super) mod tests;
#[cfg(test)]
mod truncation_tests;
