//! The follower side of a partition: appending the leader's batches as they are (offsets,
//! leader epochs and bytes kept, CRCs checked, nothing re-encoded), following the leader's high
//! watermark, and truncating when the log diverges from the leader's.
//!
//! Producer state is updated from replicated batches without sequence checks (notes §6.3), so it
//! is the same function of the log prefix on every replica and deduplication survives failover.

use std::io;

use super::{Partition, Role};
use crate::log::batch::{self, BatchHeader};

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
    /// A batch does not start where the previous one ended.
    NotContiguous {
        expected: i64,
        found: i64,
    },
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
    /// Fetch response carries them), which must start exactly at the local log end. All are
    /// checked before any is written: on an error nothing changes. Returns `Ok(None)` for no
    /// batches. The high watermark does not move here ([`Partition::follow_high_watermark`]).
    pub fn append_as_follower(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<Option<FollowerAppended>, FollowerAppendError> {
        if self.role != Role::Follower {
            return Err(FollowerAppendError::NotFollower);
        }
        if let Some(at) = self.pending_truncation {
            return Err(FollowerAppendError::TruncationPending { at });
        }
        let headers = self.check_leader_batches(records)?;
        let Some(last) = headers.last().copied() else {
            return Ok(None);
        };
        let first_offset = headers[0].base_offset;
        // One copy of the bytes; the log rewrites each base offset with the value it has.
        let mut owned = records.to_vec();
        let mut position = 0;
        for mut header in headers.iter().copied() {
            let len = header.total_len();
            let slice = &mut owned[position..position + len];
            self.log
                .append(slice, std::slice::from_mut(&mut header), now_ms)
                .map_err(FollowerAppendError::Storage)?;
            self.producers.record_replicated(&header, now_ms);
            position += len;
        }
        assert_eq!(self.log.end_offset(), last.next_offset());
        assert_eq!(self.log.latest_epoch(), last.partition_leader_epoch);
        Ok(Some(FollowerAppended {
            first_offset,
            last_offset: last.last_offset(),
            batches: headers.len(),
            last_epoch: last.partition_leader_epoch,
        }))
    }

    /// Every batch whole and CRC-valid, contiguous from the log end, epochs never going back.
    fn check_leader_batches(
        &self,
        records: &[u8],
    ) -> Result<Vec<BatchHeader>, FollowerAppendError> {
        let mut headers: Vec<BatchHeader> = Vec::new();
        let mut expected = self.log.end_offset();
        let mut latest = self.log.latest_epoch();
        for item in batch::iter(records) {
            let (_, header) = item.map_err(|e| FollowerAppendError::Corrupt(e.to_string()))?;
            if header.base_offset != expected {
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
        Ok(headers)
    }

    /// A follower's high watermark: the leader's, capped at the local log end (and never below
    /// the log start). Not monotonic across leader changes (notes §1.11).
    pub fn follow_high_watermark(&mut self, leader_high_watermark: i64) {
        assert_eq!(
            self.role,
            Role::Follower,
            "only a follower follows a high watermark"
        );
        self.high_watermark = leader_high_watermark
            .min(self.log.end_offset())
            .max(self.log.start_offset());
    }
}

#[cfg(test)]
mod tests;
