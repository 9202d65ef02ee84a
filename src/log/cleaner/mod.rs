//! Log compaction (`cleanup.policy=compact`): one pass maps the dirty range's keys to their last
//! offsets, rewrites the log below the map's end keeping the last record per key, and swaps
//! the rewritten segments in crash-safely. Kafka's `LogCleaner`, paraphrased in
//! `shared/notes/compaction.md`.
//!
//! - [`plan`]: the pure decisions (cleanable range, bounded offset map, groups, retention).
//! - [`filter`]: re-encoding one batch as Kafka's `MemoryRecords.filterTo` does.
//! - [`swap`]: the files: writing `.cleaned` segments, the `.cleaned → .swap → final` swap
//!   under the log's lock, and the recovery of an interrupted swap at `Log::open`.
//!
//! A pass works in three steps so that no lock is held across an await: [`Log::clean_job`]
//! (under the partition lock: a snapshot of the segments' files and the range), [`CleanJob::run`]
//! (no lock: reads the snapshot, writes and fsyncs `.cleaned` files, throttled), then
//! [`Cleaned::write_intent`], [`Log::install_cleaned`] (under the lock, synchronous renames) and
//! [`CleanerCheckpoint::write`]. Segments below the first uncleanable offset are immutable while
//! the job runs except for retention, DeleteRecords and truncation, which the install detects
//! (the old files must still be the log's) and then abandons that group.
//!
//! Offsets are never renumbered, so a rewritten segment has gaps between its batches; recovery
//! would take them for damage. The per-partition `cleaner-offset-checkpoint` file therefore
//! holds two offsets: the first dirty offset (where the next pass starts mapping, written after
//! a swap as Kafka does) and `gaps_below`, below which segments may have gaps (written, fsynced,
//! before the first rename of a pass).

pub mod filter;
pub mod plan;
pub mod swap;

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::io::{read_file, write_file_atomic, Clock, Disk, File};
pub use plan::{CleanPolicy, CleanRange, SegmentInfo};

/// Per-partition file: `<first dirty> <gaps below> <crc32c hex>`.
pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// A `cleaner-offset-checkpoint` file that does not check out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DamagedCheckpoint;

/// The cleaner's durable state for one partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerCheckpoint {
    /// Where the next pass starts mapping; `None` before the first pass.
    pub first_dirty: Option<i64>,
    /// Segments whose base is below this were (or may have been) rewritten: offsets in them
    /// may jump forward between batches.
    pub gaps_below: i64,
}

impl CleanerCheckpoint {
    fn render(&self) -> String {
        let text = format!("{} {}", self.first_dirty.unwrap_or(-1), self.gaps_below);
        format!("{text} {:08x}\n", crc32c::crc32c(text.as_bytes()))
    }

    /// Reads the file; a missing one is the default, a damaged one is reported as `Err`.
    pub fn read(disk: &dyn Disk, dir: &Path) -> Result<CleanerCheckpoint, DamagedCheckpoint> {
        let Ok(raw) = read_file(disk, &dir.join(CHECKPOINT_FILE)) else {
            return Ok(CleanerCheckpoint::default());
        };
        Self::parse(&raw).ok_or(DamagedCheckpoint)
    }

    fn parse(raw: &[u8]) -> Option<CleanerCheckpoint> {
        let text = std::str::from_utf8(raw).ok()?.trim();
        let (body, crc) = text.rsplit_once(' ')?;
        let crc = u32::from_str_radix(crc, 16).ok()?;
        if crc32c::crc32c(body.as_bytes()) != crc {
            return None;
        }
        let (dirty, gaps) = body.split_once(' ')?;
        let dirty: i64 = dirty.parse().ok()?;
        Some(CleanerCheckpoint {
            first_dirty: (dirty >= 0).then_some(dirty),
            gaps_below: gaps.parse().ok()?,
        })
    }

    /// Writes it atomically (temporary file, fsync, rename, directory fsync). The directory
    /// fsync also makes every earlier rename in the directory durable.
    pub async fn write(&self, disk: &dyn Disk, dir: &Path) -> io::Result<()> {
        write_file_atomic(disk, &dir.join(CHECKPOINT_FILE), self.render().as_bytes()).await
    }
}

/// One segment as the job sees it: its extent when the job was made, and its log file.
#[derive(Clone)]
pub struct SegmentSnapshot {
    pub info: SegmentInfo,
    pub file: Arc<dyn File>,
}

/// An aborted transaction of the partition (its aborted-index entry): data batches of
/// `producer_id` from `first_offset` up to its ABORT marker at `last_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedRange {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

impl AbortedRange {
    /// Whether the data batch with this header belongs to the aborted transaction.
    pub fn holds(&self, header: &crate::log::batch::BatchHeader) -> bool {
        header.is_transactional()
            && !header.is_control()
            && header.producer_id == self.producer_id
            && (self.first_offset..self.last_offset).contains(&header.base_offset)
    }
}

/// Everything a pass needs, taken under the partition lock.
pub struct CleanJob {
    pub(crate) disk: Arc<dyn Disk>,
    pub(crate) dir: PathBuf,
    /// Every segment below the first uncleanable offset, in offset order.
    pub(crate) segments: Vec<SegmentSnapshot>,
    pub range: CleanRange,
    pub(crate) producer_last: BTreeSet<i64>,
    /// Aborted transactions: their records never shadow a key's older value (Kafka's
    /// `buildOffsetMap` skips aborted data), so a read_committed reader keeps that value.
    pub(crate) aborted: Vec<AbortedRange>,
    pub(crate) policy: CleanPolicy,
    pub(crate) index_interval: u64,
    pub(crate) checkpoint: CleanerCheckpoint,
}

/// A segment written by a pass, waiting to be swapped in for `replaces`.
pub struct CleanedGroup {
    pub base: i64,
    /// The old segments (base, log file, size) it replaces: the install checks they are still
    /// the log's.
    pub(crate) replaces: Vec<(i64, Arc<dyn File>, u64)>,
}

/// The result of [`CleanJob::run`]: rewritten groups, ready to swap in.
pub struct Cleaned {
    pub(crate) disk: Arc<dyn Disk>,
    pub(crate) dir: PathBuf,
    pub groups: Vec<CleanedGroup>,
    /// The pass's end: everything below was mapped; the next pass maps from here.
    pub end_offset: i64,
    pub(crate) checkpoint: CleanerCheckpoint,
    pub stats: PassStats,
}

/// What one pass did, for logs, metrics and the benchmark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub batches_dropped: u64,
    pub batches_rewritten: u64,
    pub keys_mapped: u64,
    /// The offset map's accounted bytes at its fullest.
    pub map_bytes: u64,
    /// The map filled before the cleanable range ended (a partial pass).
    pub map_full: bool,
}

impl Cleaned {
    /// Step 1 of the install: durably record that segments below the pass's end may have gaps,
    /// before any of them is renamed into place.
    pub async fn write_intent(&self) -> io::Result<()> {
        if self.checkpoint.gaps_below >= self.end_offset {
            return Ok(());
        }
        let intent = CleanerCheckpoint {
            gaps_below: self.end_offset,
            ..self.checkpoint
        };
        intent.write(self.disk.as_ref(), &self.dir).await
    }

    /// Step 3: records the installed pass (`checkpoint` from [`Log::install_cleaned`]); the
    /// file write's directory fsync makes the swap's renames durable too.
    pub async fn commit(&self, checkpoint: CleanerCheckpoint) -> io::Result<()> {
        checkpoint.write(self.disk.as_ref(), &self.dir).await
    }

    /// Deletes the `.cleaned` files of a pass that will not be installed.
    pub fn discard(&self) -> io::Result<()> {
        for g in &self.groups {
            swap::remove_suffixed(self.disk.as_ref(), &self.dir, g.base, swap::CLEANED)?;
        }
        Ok(())
    }
}

/// `log.cleaner.io.max.bytes.per.second`: one budget for all reads and writes of all passes,
/// enforced by sleeping on the broker's clock between segments.
pub struct Throttle {
    bytes_per_second: f64,
    window_start: Duration,
    bytes: u64,
}

impl Throttle {
    pub fn new(bytes_per_second: f64, now: Duration) -> Throttle {
        Throttle {
            bytes_per_second,
            window_start: now,
            bytes: 0,
        }
    }

    /// How long to sleep after `bytes` more at `now` to stay within the rate.
    pub fn charge(&mut self, bytes: u64, now: Duration) -> Option<Duration> {
        if !self.bytes_per_second.is_finite() || self.bytes_per_second <= 0.0 {
            return None;
        }
        let due_at = |bytes: u64| Duration::from_secs_f64(bytes as f64 / self.bytes_per_second);
        let elapsed = now.saturating_sub(self.window_start);
        if elapsed >= Duration::from_secs(1) && elapsed >= due_at(self.bytes) {
            // A fresh window: idle time is not saved up for a later burst.
            self.window_start = now;
            self.bytes = 0;
        }
        self.bytes += bytes;
        let elapsed = now.saturating_sub(self.window_start);
        due_at(self.bytes)
            .checked_sub(elapsed)
            .filter(|d| !d.is_zero())
    }

    pub async fn pace(&mut self, bytes: u64, clock: &dyn Clock) {
        if let Some(wait) = self.charge(bytes, clock.monotonic()) {
            clock.sleep(wait).await;
        }
    }
}

impl CleanJob {
    /// Maps the dirty range and writes the rewritten groups as `.cleaned` segments, fsynced.
    /// `map_bytes` bounds the offset map (`log.cleaner.dedupe.buffer.size`). `Ok(None)`: the
    /// map could not hold even the first dirty batch.
    pub async fn run(
        self,
        map_bytes: usize,
        now_ms: i64,
        clock: &dyn Clock,
        throttle: &mut Throttle,
    ) -> io::Result<Option<Cleaned>> {
        swap::run(self, map_bytes, now_ms, clock, throttle).await
    }
}

#[cfg(test)]
mod tests;
