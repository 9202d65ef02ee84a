//! Appending batches at the offsets they already carry, which may jump forward: a follower
//! replicating a leader whose cleaner compacted the range (offsets are never renumbered, so
//! the leader's log has gaps and the follower's copy must have the same ones, as Kafka's
//! `appendAsFollower` allows).
//!
//! Recovery takes an offset jump inside or between segments for damage unless the segment is
//! known to have gaps (`cleaner-offset-checkpoint`'s `gaps_below`). A follower that meets its
//! first gap therefore first writes that checkpoint with `gaps_below = i64::MAX` ("any segment
//! of this log may have gaps", the same state a damaged checkpoint leaves), durably, and only
//! then appends: no restart can cut the replicated data at the gap.

use std::io;

use super::batch::{self, BatchHeader};
use super::cleaner::CleanerCheckpoint;
use super::Log;

impl Log {
    /// Whether every segment of this log may have offset gaps (recovery accepts them).
    pub fn gaps_allowed(&self) -> bool {
        self.cleaner.gaps_below == i64::MAX
    }

    /// The cleaner checkpoint to make durable before [`Log::allow_gaps`].
    pub fn gap_marker(&self) -> CleanerCheckpoint {
        CleanerCheckpoint {
            gaps_below: i64::MAX,
            ..self.cleaner
        }
    }

    /// The [`Log::gap_marker`] is durable: from now on appends may jump forward.
    pub fn allow_gaps(&mut self) {
        self.cleaner.gaps_below = i64::MAX;
        for segment in self.segments.values_mut() {
            segment.allow_gaps();
        }
    }

    /// Appends batches at their own base offsets (`bytes` back to back, described by
    /// `headers`), each at or after the log end; a jump forward needs [`Log::gaps_allowed`]
    /// (checked by the caller; asserted here). Returns (first offset, last offset).
    pub fn append_at_offsets(
        &mut self,
        bytes: &mut [u8],
        headers: &[BatchHeader],
        now_ms: i64,
    ) -> io::Result<(i64, i64)> {
        assert!(!headers.is_empty());
        let first = headers[0].base_offset;
        let mut position = 0usize;
        for header in headers {
            let end = self.end_offset();
            assert!(
                header.base_offset == end || (header.base_offset > end && self.gaps_allowed()),
                "batch at {} after log end {end}",
                header.base_offset
            );
            let len = header.total_len();
            // The offsets the batch spans from the current end, gap included, so a segment's
            // relative offsets stay within u32.
            let span = (header.last_offset() - end + 1).clamp(1, i32::MAX as i64) as i32;
            self.maybe_roll(len as u64, span, now_ms)?;
            if self.gaps_allowed() {
                self.active_mut().allow_gaps();
            }
            let slice = &mut bytes[position..position + len];
            debug_assert_eq!(batch::BatchHeader::parse(slice).ok(), Some(*header));
            self.active_mut().append(slice, header)?;
            self.note_batch_epoch(header);
            self.unflushed_messages += header.record_count as i64;
            position += len;
        }
        assert_eq!(position, bytes.len());
        let last = self.end_offset() - 1;
        assert!(last >= first, "offsets must advance");
        Ok((first, last))
    }
}
