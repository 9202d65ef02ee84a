//! A partition's log: an ordered set of segments in one directory, appended at the end, read by
//! offset, flushed on a policy, trimmed by retention, and recovered after a crash.
//!
//! Durability contract: everything below the *recovery point* has been fsynced. After an unclean
//! stop, the segments from the one holding the last checkpointed recovery point onwards are
//! scanned batch by batch (CRC, framing, contiguous offsets) and cut at the first bad byte; the
//! segments before it are trusted. A clean shutdown writes the checkpoint with the log end.

pub mod batch;
pub mod cleaner;
pub mod codec;
pub mod control;
mod gapped_append;
pub mod index;
pub mod leader_epochs;
mod repair;
pub mod segment;
pub mod start_offset;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::io::{create_dir_all_durable, read_file, write_file_atomic, Disk, File};
use batch::BatchHeader;
use leader_epochs::{EpochEnd, LeaderEpochCache};
use segment::Segment;
pub use start_offset::StartOffsetWrite;

/// Per-partition file that records the recovery point (decimal text).
const CHECKPOINT_FILE: &str = "recovery-point";
/// Per-partition marker written by a clean close and removed when the log is opened again.
const CLEAN_MARKER: &str = "clean-shutdown";

#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub index_interval_bytes: u64,
    /// Simulator and tests: the bug planted in this log (`IndexLookupPastTarget`,
    /// `RecoveryCutNotSynced`, `FlushActiveSegmentOnly`, `SkipDirFsync`), and, for a
    /// partition's or the metadata quorum's log, in what keeps it (see `replica::partition`
    /// and the quorum driver's `RaftLog`).
    #[cfg(any(madsim, test))]
    pub planted: crate::config::planted::Planted,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            #[cfg(any(madsim, test))]
            planted: Default::default(),
        }
    }
}

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    pub clean: bool,
    /// A checkpoint file existed but did not check out (so the whole log was scanned).
    pub checkpoint_damaged: bool,
    pub segments_scanned: usize,
    pub truncated_at: Option<(i64, u64, String)>,
    pub segments_dropped: usize,
    /// The recovery point the checkpoint confirmed (the log end after a clean shutdown). An
    /// unclean open then makes the rest durable too, so the log's own recovery point says
    /// nothing more about what was confirmed before the crash; this does.
    pub checkpointed: i64,
}

#[derive(Debug)]
pub enum ReadError {
    /// The offset is before the log start or after its end.
    OffsetOutOfRange {
        start: i64,
        end: i64,
    },
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// The files to fsync to make everything below `up_to` durable; see [`Log::flush_plan`].
pub struct FlushPlan {
    pub files: Vec<Arc<dyn File>>,
    pub up_to: i64,
    /// The directory, when segments were created or removed in it since its last sync: a
    /// file's name (or its removal) is only durable once its directory is synced.
    dir: Option<(Arc<dyn Disk>, PathBuf)>,
    /// How many directory changes had been made when the plan was made.
    dir_changes: u64,
}

pub struct Log {
    dir: PathBuf,
    disk: Arc<dyn Disk>,
    config: LogConfig,
    segments: BTreeMap<i64, Segment>,
    /// The log start offset: the first offset consumers may read. At or after the first
    /// segment's base; inside it after DeleteRecords (then kept in `log-start-offset`).
    start_offset: i64,
    recovery_point: i64,
    /// Messages appended since the last flush (for `flush.messages`).
    unflushed_messages: i64,
    last_flush_ms: i64,
    /// CRC-check every batch served. Only a planted-bug simulation turns this off; production
    /// builds have no such switch.
    #[cfg(any(madsim, test))]
    verify_reads: bool,
    /// Segment files created or removed so far, and how many of those changes the directory's
    /// last sync covered.
    dir_changes: u64,
    dir_changes_synced: u64,
    /// The log cleaner's checkpoint (see [`cleaner`]): where the next pass maps from, and
    /// below which segments may have offset gaps.
    cleaner: cleaner::CleanerCheckpoint,
    /// The leader-epoch cache, consistent with the batches' `partitionLeaderEpoch` (batches
    /// without one, -1, as in the metadata log, add nothing).
    epochs: LeaderEpochCache,
    /// Bumped on every change to `epochs`; `epochs_on_disk` is the version the checkpoint file
    /// holds (`u64::MAX`: unknown), so checkpoints rewrite it only when it changed.
    epochs_version: u64,
    epochs_on_disk: Arc<AtomicU64>,
}

impl Log {
    /// Opens (creating if needed) the log in `dir`, recovering it if it was not closed cleanly.
    pub async fn open(
        disk: Arc<dyn Disk>,
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
    ) -> io::Result<(Log, Recovery)> {
        create_dir_all_durable(disk.as_ref(), dir).await?;
        // An interrupted cleaner swap is completed or rolled back before anything is read.
        let swapped = cleaner::swap::recover(disk.as_ref(), dir).await?;
        let cleaner_checkpoint = cleaner::CleanerCheckpoint::read(disk.as_ref(), dir)
            .unwrap_or_else(|cleaner::DamagedCheckpoint| {
                tracing::warn!(dir = %dir.display(),
                    "cleaner checkpoint is damaged; every segment may have offset gaps");
                cleaner::CleanerCheckpoint {
                    first_dirty: None,
                    gaps_below: i64::MAX,
                }
            });
        let names = disk.list_dir(dir)?;
        let mut bases: Vec<i64> = names
            .iter()
            .filter_map(|n| n.strip_suffix(".log"))
            .filter_map(|n| n.parse::<i64>().ok())
            .collect();
        bases.sort_unstable();
        // Index files whose log is gone (a crash during segment deletion) are stale.
        for name in &names {
            let stem = name.split('.').next().unwrap_or("");
            let is_index = name.ends_with(".index") || name.ends_with(".timeindex");
            if is_index && stem.parse::<i64>().is_ok_and(|b| !bases.contains(&b)) {
                disk.remove_file(&dir.join(name))?;
            }
        }
        let clean = disk.exists(&dir.join(CLEAN_MARKER));
        let checkpoint = read_checkpoint(disk.as_ref(), dir);
        let checkpoint_damaged = checkpoint.is_err();
        if checkpoint_damaged {
            tracing::warn!(dir = %dir.display(), "recovery-point checkpoint is damaged; checking the whole log");
        }
        let checkpoint = checkpoint.unwrap_or(None);
        let mut recovery = Recovery {
            clean,
            checkpoint_damaged,
            ..Recovery::default()
        };
        let mut log = Log {
            dir: dir.to_path_buf(),
            disk: disk.clone(),
            config,
            segments: BTreeMap::new(),
            start_offset: 0,
            recovery_point: 0,
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            #[cfg(any(madsim, test))]
            verify_reads: true,
            dir_changes: 0,
            dir_changes_synced: 0,
            cleaner: cleaner_checkpoint,
            epochs: LeaderEpochCache::default(),
            epochs_version: 0,
            epochs_on_disk: Arc::new(AtomicU64::new(u64::MAX)),
        };
        // Segments that start after the recovery point may hold unflushed data.
        let first_to_scan = if clean {
            i64::MAX
        } else {
            let point = checkpoint.unwrap_or(0);
            bases
                .iter()
                .copied()
                .filter(|&b| b <= point)
                .max()
                .unwrap_or(i64::MIN)
        };
        let mut cut = false;
        for &base in &bases {
            if cut {
                // Everything after a cut is unreachable: offsets must stay contiguous.
                Segment::remove_files(disk.as_ref(), dir, base)?;
                recovery.segments_dropped += 1;
                continue;
            }
            let recover = base >= first_to_scan || swapped.contains(&base);
            let interval = log.config.index_interval_bytes;
            let gaps = base < log.cleaner.gaps_below;
            let (segment, stop) =
                Segment::open(disk.as_ref(), dir, base, interval, recover, gaps, now_ms)?;
            if recover {
                recovery.segments_scanned += 1;
            }
            if let Some(prev) = log.segments.values().next_back() {
                // A cleaned segment may end before the next one starts (its last batches
                // were removed); anything else must follow on exactly.
                let follows =
                    prev.next_offset() == base || (prev.has_gaps() && prev.next_offset() < base);
                if !follows {
                    tracing::warn!(dir = %dir.display(), base, expected = prev.next_offset(),
                        "segment does not follow on from the previous one; dropping the rest");
                    Segment::remove_files(disk.as_ref(), dir, base)?;
                    recovery.segments_dropped += 1;
                    cut = true;
                    continue;
                }
            }
            if let Some(stop) = stop {
                tracing::warn!(dir = %dir.display(), segment = base, position = stop.position,
                    reason = %stop.reason, "truncated log tail during recovery");
                recovery.truncated_at = Some((base, stop.position, stop.reason));
                cut = true;
            }
            log.insert_segment(base, segment);
        }
        if log.segments.is_empty() {
            let start = checkpoint.unwrap_or(0).max(0);
            let segment = Segment::create(
                disk.as_ref(),
                dir,
                start,
                log.config.index_interval_bytes,
                now_ms,
            )?;
            log.insert_segment(start, segment);
            log.dir_changes += 1;
        }
        log.apply_stored_start_offset(start_offset::read(disk.as_ref(), dir), now_ms)?;
        log.recovery_point = if clean {
            log.end_offset()
        } else {
            checkpoint
                .unwrap_or(0)
                .clamp(log.first_base(), log.end_offset())
        };
        recovery.checkpointed = log.recovery_point;
        #[cfg(any(madsim, test))]
        let planted_skip_cut =
            (log.config.planted).is(crate::config::PlantedBug::RecoveryCutNotSynced);
        #[cfg(not(any(madsim, test)))]
        let planted_skip_cut = false;
        if !clean {
            log.make_recovered_tail_durable(first_to_scan).await?;
        } else if let Some((base, _, _)) =
            recovery.truncated_at.as_ref().filter(|_| !planted_skip_cut)
        {
            // A clean shutdown left a bad tail: make the cut durable before anything is written
            // after it, or power loss could bring the tail back in front of new data. (The
            // segment is gone if the stored start offset emptied the log.)
            let files = log
                .segments
                .get(base)
                .map(|s| s.files().to_vec())
                .unwrap_or_default();
            for file in files {
                file.sync().await?;
            }
        }
        if clean {
            // Durably gone before anything is appended: a marker that power loss brought back
            // would make the next start trust a log that was written to after it. The same
            // directory fsync makes the removals recovery made durable (an unclean open has
            // synced the directory already).
            disk.remove_file(&dir.join(CLEAN_MARKER))?;
            disk.sync_dir(dir).await?;
            log.dir_changes_synced = log.dir_changes;
        }
        let trusted_below = if clean {
            log.end_offset()
        } else {
            recovery.checkpointed
        };
        // The epoch rebuild is the first walk over trusted segments: damage it meets there
        // sends the segment through full recovery (see `repair`).
        let ((epochs, unchanged), repaired) = log
            .repair_walk(&mut recovery, now_ms, |log| {
                log.stored_epochs(trusted_below.min(log.end_offset()))
            })
            .await?;
        log.install_epochs(epochs, unchanged);
        if repaired || checkpoint.is_some_and(|point| point > log.end_offset()) {
            // The log was cut below the checkpointed recovery point: left as it is, it would
            // let a later unclean start trust what is appended after the cut unscanned.
            log.checkpoint().write().await?;
        }
        log.check_invariants();
        Ok((log, recovery))
    }

    /// The leader-epoch cache as the log holds it: the checkpoint file's entries below
    /// `trusted_below` (the recovery point it was written with or after) if they agree with the
    /// batches they name, plus what the batch headers from there on say (walked with every
    /// check recovery makes). A missing or damaged file, or one that disagrees with the log, is
    /// rebuilt from every batch header. Also whether that is what the file holds.
    fn stored_epochs(&self, trusted_below: i64) -> io::Result<(LeaderEpochCache, bool)> {
        let path = self.dir.join(leader_epochs::CHECKPOINT_FILE);
        let stored = read_file(self.disk.as_ref(), &path)
            .ok()
            .and_then(|raw| LeaderEpochCache::parse(&raw));
        let first = self.first_base();
        let mut rescan_from = first;
        let mut epochs = LeaderEpochCache::default();
        let mut unchanged = false;
        if let Some(mut cache) = stored {
            let before = cache.clone();
            // What starts at or after the trusted point is rebuilt from the batches there.
            let trusted_below = trusted_below.max(first);
            cache.truncate_from_end(trusted_below);
            if self.epochs_agree_with_log(&cache)? {
                rescan_from = trusted_below;
                unchanged = cache == before;
                epochs = cache;
            } else {
                tracing::warn!(dir = %self.dir.display(),
                    "leader-epoch checkpoint disagrees with the log; rebuilding it from the batches");
            }
        }
        let mut seen = Vec::new();
        self.scan_headers_verified(rescan_from, |h| {
            seen.push((h.partition_leader_epoch, h.base_offset))
        })?;
        for (epoch, base) in seen {
            if epoch >= 0 && epoch != epochs.latest_epoch() {
                if epochs.can_assign(epoch, base) {
                    epochs.assign(epoch, base);
                    unchanged = false;
                } else {
                    tracing::warn!(dir = %self.dir.display(), epoch, base,
                        "batch leader epoch goes back; left out of the epoch cache");
                }
            }
        }
        unchanged &= !epochs.truncate_from_start(self.start_offset);
        Ok((epochs, unchanged))
    }

    /// Takes the cache [`Log::stored_epochs`] found; `unchanged`: the file already holds it.
    fn install_epochs(&mut self, epochs: LeaderEpochCache, unchanged: bool) {
        self.epochs = epochs;
        if unchanged {
            self.epochs_on_disk
                .store(self.epochs_version, Ordering::SeqCst);
        }
    }

    /// Every cached epoch that starts inside the log starts a batch of that epoch there.
    fn epochs_agree_with_log(&self, cache: &LeaderEpochCache) -> io::Result<bool> {
        for entry in cache.entries() {
            if entry.start_offset < self.first_base() {
                continue;
            }
            if entry.start_offset >= self.end_offset() {
                return Ok(false);
            }
            match self.batch_at(entry.start_offset)? {
                Some(h)
                    if h.base_offset == entry.start_offset
                        && h.partition_leader_epoch == entry.epoch => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// The header of the batch holding `offset` (or the next one), if the log has one.
    pub fn batch_at(&self, offset: i64) -> io::Result<Option<BatchHeader>> {
        let from = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(i64::MIN, |(&b, _)| b);
        // The segment holding it, or, at a segment's end, the next one.
        for segment in self.segments.range(from..).map(|(_, s)| s).take(2) {
            if let Some(h) = segment.batch_at(offset)? {
                return Ok(Some(h));
            }
        }
        Ok(None)
    }

    /// The leader-epoch cache.
    /// Takes `epochs` as this log's cache (a future log swapped in for the replica whose cache
    /// it was: same batches, perhaps an epoch started without a batch yet).
    pub fn adopt_epochs(&mut self, epochs: LeaderEpochCache) {
        if self.epochs != epochs {
            self.epochs = epochs;
            self.epochs_changed(true);
        }
    }

    pub fn epochs(&self) -> &LeaderEpochCache {
        &self.epochs
    }

    /// `endOffsetFor(epoch)` against this log's end (see [`LeaderEpochCache::end_offset_for`]).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> EpochEnd {
        self.epochs.end_offset_for(epoch, self.end_offset())
    }

    /// The latest epoch in the cache, -1 if none.
    pub fn latest_epoch(&self) -> i32 {
        self.epochs.latest_epoch()
    }

    /// A leader elected in `epoch` records that it starts at the log end, before appending
    /// anything (KAFKA-7415). `false` if `epoch` is older than the latest cached one.
    pub fn assign_epoch_start(&mut self, epoch: i32) -> bool {
        let end = self.end_offset();
        if !self.epochs.can_assign(epoch, end) {
            return false;
        }
        if self.epochs.assign(epoch, end) {
            self.epochs_version += 1;
        }
        true
    }

    /// Forgets the epochs that start at or after `offset` without touching the batches: only
    /// epochs with no batch (a leader's election entry at the log end) may go this way.
    pub fn forget_epochs_from(&mut self, offset: i64) {
        assert!(offset >= self.end_offset(), "epochs with batches stay");
        let changed = self.epochs.truncate_from_end(offset);
        self.epochs_changed(changed);
    }

    fn epochs_changed(&mut self, changed: bool) {
        if changed {
            self.epochs_version += 1;
        }
    }

    /// Brings the log start offset recorded by DeleteRecords back at open. Segments wholly below
    /// it (a crash between the record and their deletion) are deleted now. A start past the log
    /// end (the tail was lost in a power loss after the start was made durable) empties the
    /// log and restarts it there, as Kafka does: offsets below a durable start are never served
    /// again.
    fn apply_stored_start_offset(&mut self, stored: Option<i64>, now_ms: i64) -> io::Result<()> {
        let first = self.first_base();
        let start = stored.unwrap_or(first).max(first);
        if start > self.end_offset() {
            tracing::warn!(dir = %self.dir.display(), start, end = self.end_offset(),
                "log start offset is past the log end; restarting the log at it");
            let bases: Vec<i64> = self.segments.keys().copied().collect();
            for base in bases {
                self.segments.remove(&base);
                Segment::remove_files(self.disk.as_ref(), &self.dir, base)?;
            }
            let segment = Segment::create(
                self.disk.as_ref(),
                &self.dir,
                start,
                self.config.index_interval_bytes,
                now_ms,
            )?;
            self.insert_segment(start, segment);
            self.dir_changes += 1;
        }
        self.start_offset = start;
        self.delete_segments_below_start()?;
        let changed = self.epochs.truncate_from_start(start);
        self.epochs_changed(changed);
        Ok(())
    }

    /// Empties the log and restarts it at `offset` (Kafka's `truncateFullyAndStartAt`: a
    /// follower installing a snapshot of what its log lacks). The new start is made durable
    /// first, so a crash in between still opens the log there (see
    /// [`Log::apply_stored_start_offset`]); then the segments go and the directory is synced.
    pub async fn restart_at(&mut self, offset: i64, now_ms: i64) -> io::Result<()> {
        self.restart_write(offset).write().await?;
        self.restart_in_memory(offset, now_ms)?;
        self.disk.sync_dir(&self.dir).await?;
        self.dir_changes_synced = self.dir_changes;
        Ok(())
    }

    /// [`Log::restart_at`] in two halves for a caller that cannot hold the log across an
    /// `.await` (a partition under its lock): first this write, made durable...
    pub fn restart_write(&self, offset: i64) -> StartOffsetWrite {
        assert!(offset >= 0);
        StartOffsetWrite {
            disk: self.disk.clone(),
            dir: self.dir.clone(),
            offset,
        }
    }

    /// ...then this: the segments go and one empty segment starts at `offset`. The directory
    /// is not synced here (the caller syncs it before appending, as [`Log::restart_at`] does).
    pub fn restart_in_memory(&mut self, offset: i64, now_ms: i64) -> io::Result<()> {
        assert!(offset >= 0);
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        for base in bases {
            self.segments.remove(&base);
            Segment::remove_files(self.disk.as_ref(), &self.dir, base)?;
            self.dir_changes += 1;
        }
        let segment = Segment::create(
            self.disk.as_ref(),
            &self.dir,
            offset,
            self.config.index_interval_bytes,
            now_ms,
        )?;
        self.insert_segment(offset, segment);
        self.dir_changes += 1;
        self.start_offset = offset;
        self.recovery_point = offset;
        self.unflushed_messages = 0;
        self.cleaner.first_dirty = None;
        let changed = self.epochs.truncate_from_end(i64::MIN);
        self.epochs_changed(changed);
        self.check_invariants();
        Ok(())
    }

    /// Deletes whole segments that end at or before the log start (never the active one).
    fn delete_segments_below_start(&mut self) -> io::Result<usize> {
        let mut deleted = 0;
        while self.segments.len() > 1 {
            let (&base, oldest) = self.segments.iter().next().unwrap();
            // An empty segment at or after the start (one the cleaner emptied) is not below it.
            if oldest.next_offset() > self.start_offset || base >= self.start_offset {
                break;
            }
            self.segments.remove(&base);
            Segment::remove_files(self.disk.as_ref(), &self.dir, base)?;
            self.dir_changes += 1;
            deleted += 1;
        }
        Ok(deleted)
    }

    /// The base offset of the oldest segment.
    fn first_base(&self) -> i64 {
        *self
            .segments
            .keys()
            .next()
            .expect("a log always has a segment")
    }

    /// The record of a new log start offset, to write (outside any lock) before
    /// [`Log::advance_start_offset`]. `offset` must be within the log.
    pub fn start_offset_write(&self, offset: i64) -> StartOffsetWrite {
        assert!(offset >= self.start_offset && offset <= self.end_offset());
        StartOffsetWrite {
            disk: self.disk.clone(),
            dir: self.dir.clone(),
            offset,
        }
    }

    /// Moves the log start offset forward to `offset` (DeleteRecords) and deletes the segments
    /// wholly below it. Call only once [`StartOffsetWrite::write`] for it has succeeded. Returns
    /// how many segments were deleted.
    pub fn advance_start_offset(&mut self, offset: i64) -> io::Result<usize> {
        assert!(
            offset <= self.end_offset(),
            "log start offset past the log end"
        );
        if offset <= self.start_offset {
            return Ok(0);
        }
        self.start_offset = offset;
        let deleted = self.delete_segments_below_start()?;
        let changed = self.epochs.truncate_from_start(offset);
        self.epochs_changed(changed);
        self.recovery_point = self.recovery_point.max(self.first_base());
        self.check_invariants();
        Ok(deleted)
    }

    fn check_invariants(&self) {
        assert!(
            self.start_offset >= self.first_base() && self.start_offset <= self.end_offset(),
            "log start offset {} outside the log {:?}",
            self.start_offset,
            self.segments
                .values()
                .map(|s| (s.base_offset(), s.next_offset(), s.size()))
                .collect::<Vec<_>>()
        );
        let mut expected: Option<(i64, bool)> = None;
        for (&base, segment) in &self.segments {
            assert_eq!(base, segment.base_offset());
            assert!(segment.next_offset() >= base);
            if let Some((e, gaps)) = expected {
                assert!(
                    base == e || (gaps && base > e),
                    "segments must be contiguous (segment at {base} after one ending at {e})"
                );
            }
            expected = Some((segment.next_offset(), segment.has_gaps()));
        }
        assert!(self.recovery_point <= self.end_offset());
    }

    /// After an unclean stop, what the page cache shows past the recovery point may not be on
    /// the medium even where an fsync reported success: a failed fsync may have marked its pages
    /// clean without writing them (Linux does, "fsyncgate"), and the next fsync then skips them.
    /// So rewrite every byte from the recovery point on (which dirties those pages again) and
    /// fsync it, with the cut recovery made and the rebuilt indexes. After this the whole log is
    /// durable, so the recovery point, and the high watermark above it, can start at the end.
    /// The cost is a rewrite of what came after the last checkpoint.
    async fn make_recovered_tail_durable(&mut self, first_scanned: i64) -> io::Result<()> {
        let from = self.recovery_point;
        let mut files = Vec::new();
        for (_, segment) in self.segments.range_mut(first_scanned.min(from)..) {
            if segment.next_offset() > from {
                segment.rewrite_from(from)?;
            }
            files.extend(segment.files());
        }
        let mut syncs: Vec<_> = files.iter().map(|f| f.sync()).collect();
        // The names too: the process that created these files may have died before it synced
        // their directory.
        syncs.push(self.disk.sync_dir(&self.dir));
        crate::io::join_all(syncs)
            .await
            .into_iter()
            .collect::<io::Result<()>>()?;
        self.dir_changes_synced = self.dir_changes;
        self.recovery_point = self.end_offset();
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The log's directory was renamed to `dir` (a future log swapped in by an intra-broker
    /// move, `replica::dir_move`): its open files stay valid; files made from now on go there.
    pub fn set_dir(&mut self, dir: &Path) {
        self.dir = dir.to_path_buf();
    }

    pub fn disk(&self) -> &Arc<dyn Disk> {
        &self.disk
    }

    /// Adds a segment, with the bugs planted in this log.
    fn insert_segment(&mut self, base: i64, segment: Segment) {
        #[cfg(any(madsim, test))]
        let segment = {
            let mut segment = segment;
            segment.plant(self.config.planted);
            segment
        };
        self.segments.insert(base, segment);
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    /// Simulator and tests only (a planted bug): serve batches without checking their CRC.
    #[cfg(any(madsim, test))]
    pub fn set_verify_reads(&mut self, verify: bool) {
        self.verify_reads = verify;
    }

    fn verify_reads(&self) -> bool {
        #[cfg(any(madsim, test))]
        return self.verify_reads;
        #[cfg(not(any(madsim, test)))]
        true
    }

    /// The log start offset: the first offset still readable.
    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// The log end offset: the offset the next record will get.
    pub fn end_offset(&self) -> i64 {
        self.active().next_offset()
    }

    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size()).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The base offset of the active (last) segment: everything below it is in closed segments.
    pub fn active_base_offset(&self) -> i64 {
        self.active().base_offset()
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has a segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has a segment")
    }

    /// Appends validated batches (`bytes` holds them back to back, described by `headers`),
    /// giving them consecutive offsets from the log end. Returns (first offset, last offset).
    /// On an I/O error nothing after the failing batch is written; batches before it are.
    pub fn append(
        &mut self,
        bytes: &mut [u8],
        headers: &mut [BatchHeader],
        now_ms: i64,
    ) -> io::Result<(i64, i64)> {
        assert!(!headers.is_empty());
        let first = self.end_offset();
        let mut position = 0usize;
        for header in headers.iter_mut() {
            let len = header.total_len();
            let base = self.end_offset();
            self.maybe_roll(len as u64, header.record_count, now_ms)?;
            let slice = &mut bytes[position..position + len];
            batch::set_base_offset(slice, base);
            header.base_offset = base;
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

    /// A batch with a new leader epoch starts that epoch in the cache. Callers that take
    /// batches from elsewhere check the epochs first (`Partition::append_as_follower`); an epoch
    /// that goes back anyway is left out with a warning rather than breaking the cache's order.
    fn note_batch_epoch(&mut self, header: &BatchHeader) {
        let epoch = header.partition_leader_epoch;
        if epoch < 0 || epoch == self.epochs.latest_epoch() {
            return;
        }
        if self.epochs.can_assign(epoch, header.base_offset) {
            let changed = self.epochs.assign(epoch, header.base_offset);
            self.epochs_changed(changed);
        } else {
            tracing::warn!(dir = %self.dir.display(), epoch, base = header.base_offset,
                latest = self.epochs.latest_epoch(), "batch leader epoch goes back");
        }
    }

    fn maybe_roll(&mut self, incoming: u64, records: i32, now_ms: i64) -> io::Result<()> {
        let active = self.active();
        if active.is_empty() {
            return Ok(());
        }
        let full = active.size() + incoming > self.config.segment_bytes;
        let old = now_ms - active.created_ms() >= self.config.segment_ms;
        // Relative offsets and positions in the index are u32.
        let offsets_exhausted =
            active.next_offset() + records as i64 - active.base_offset() >= u32::MAX as i64;
        let positions_exhausted = active.size() + incoming >= u32::MAX as u64;
        if full || old || offsets_exhausted || positions_exhausted {
            let base = active.next_offset();
            let segment = Segment::create(
                self.disk.as_ref(),
                &self.dir,
                base,
                self.config.index_interval_bytes,
                now_ms,
            )?;
            self.insert_segment(base, segment);
            self.dir_changes += 1;
        }
        Ok(())
    }

    /// Whole batches from the one holding `offset`, at most `max_bytes` (at least one batch),
    /// none reaching `upper_bound` (the high watermark for consumers). Reads one segment.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        upper_bound: i64,
    ) -> Result<Bytes, ReadError> {
        let (start, end) = (self.start_offset(), self.end_offset());
        if offset < start || offset > end {
            return Err(ReadError::OffsetOutOfRange { start, end });
        }
        let upper_bound = upper_bound.min(end);
        if offset >= upper_bound {
            return Ok(Bytes::new());
        }
        let first = *self
            .segments
            .range(..=offset)
            .next_back()
            .map(|(b, _)| b)
            .expect("offset is within the log");
        // The offset may sit at a segment boundary, or in a gap the cleaner left (a segment
        // with nothing at or after it, or an emptied one): then the next segment serves.
        for (_, segment) in self.segments.range(first..) {
            if segment.base_offset() >= upper_bound {
                break;
            }
            let data = segment.read(offset, max_bytes, upper_bound, self.verify_reads())?;
            let exhausted = segment.next_offset() <= offset || segment.is_empty();
            if !data.is_empty() || !exhausted {
                return Ok(data);
            }
        }
        Ok(Bytes::new())
    }

    /// The first offset whose record timestamp is at or after `timestamp`, with that timestamp.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> io::Result<Option<(i64, i64)>> {
        for segment in self.segments.values() {
            if let Some((offset, ts)) = segment.find_by_timestamp(timestamp)? {
                if segment.next_offset() <= self.start_offset {
                    continue;
                }
                // Records below the log start are gone, even when their batch is still stored.
                return Ok(Some((offset.max(self.start_offset), ts)));
            }
        }
        Ok(None)
    }

    /// The largest timestamp in the log and the offset of the batch holding it.
    pub fn max_timestamp(&self) -> i64 {
        self.segments
            .values()
            .map(|s| s.max_timestamp())
            .max()
            .unwrap_or(-1)
    }

    /// Visits every batch header from `from_offset` to the end (rebuilding producer state).
    pub fn scan_headers(
        &self,
        from_offset: i64,
        mut visit: impl FnMut(&BatchHeader),
    ) -> io::Result<()> {
        for segment in self.segments.values() {
            if segment.next_offset() <= from_offset {
                continue;
            }
            segment.scan(0, |_, header, _| {
                if header.last_offset() >= from_offset {
                    visit(header);
                }
                true
            })?;
        }
        Ok(())
    }

    /// [`Log::scan_headers`] with every check full recovery makes (CRC, framing, offsets
    /// following on, index entries at the batches they name), on each segment it visits; the
    /// first fault is a [`segment::Damage`] error.
    fn scan_headers_verified(
        &self,
        from_offset: i64,
        mut visit: impl FnMut(&BatchHeader),
    ) -> io::Result<()> {
        for segment in self.segments.values() {
            if segment.next_offset() <= from_offset {
                continue;
            }
            segment.scan_verified(|header| {
                if header.last_offset() >= from_offset {
                    visit(header);
                }
            })?;
        }
        Ok(())
    }

    /// Whether the flush policy (`flush.messages` / `flush.ms`) asks for an fsync now.
    pub fn flush_due(&self, flush_messages: i64, flush_ms: i64, now_ms: i64) -> bool {
        if self.recovery_point == self.end_offset() {
            return false;
        }
        self.unflushed_messages >= flush_messages || now_ms - self.last_flush_ms >= flush_ms
    }

    /// The files that hold data at or past the recovery point. The caller syncs them outside any
    /// lock and then reports with [`Log::flushed`].
    pub fn flush_plan(&self) -> FlushPlan {
        let first = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map(|(&b, _)| b)
            .unwrap_or(i64::MIN);
        #[allow(unused_mut)]
        let mut first = first;
        #[cfg(any(madsim, test))]
        if (self.config.planted).is(crate::config::PlantedBug::FlushActiveSegmentOnly) {
            first = self.active().base_offset();
        }
        let files = self
            .segments
            .range(first..)
            .flat_map(|(_, s)| s.files())
            .collect();
        #[allow(unused_mut)]
        let mut dir = (self.dir_changes > self.dir_changes_synced)
            .then(|| (self.disk.clone(), self.dir.clone()));
        #[cfg(any(madsim, test))]
        if (self.config.planted).is(crate::config::PlantedBug::SkipDirFsync) {
            dir = None;
        }
        FlushPlan {
            files,
            up_to: self.end_offset(),
            dir,
            dir_changes: self.dir_changes,
        }
    }

    /// Everything the plan covered is now durable.
    pub fn flushed(&mut self, plan: &FlushPlan, now_ms: i64) {
        self.dir_changes_synced = self.dir_changes_synced.max(plan.dir_changes);
        let up_to = plan.up_to;
        if up_to > self.recovery_point {
            assert!(up_to <= self.end_offset());
            self.recovery_point = up_to;
            self.unflushed_messages = 0;
            self.last_flush_ms = now_ms;
        }
    }

    /// fsyncs everything written so far, all files at once.
    pub async fn sync_files(plan: &FlushPlan) -> io::Result<()> {
        let mut syncs: Vec<_> = plan.files.iter().map(|f| f.sync()).collect();
        if let Some((disk, dir)) = &plan.dir {
            syncs.push(disk.sync_dir(dir));
        }
        crate::io::join_all(syncs).await.into_iter().collect()
    }

    /// What to write to record the recovery point; done outside any lock on the log.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            disk: self.disk.clone(),
            dir: self.dir.clone(),
            recovery_point: self.recovery_point,
            epochs: self.epochs.render(),
            epochs_version: self.epochs_version,
            epochs_on_disk: self.epochs_on_disk.clone(),
        }
    }

    /// Flushes everything, records the checkpoint and marks the log clean.
    pub async fn close(&mut self, now_ms: i64) -> io::Result<()> {
        let plan = self.flush_plan();
        Log::sync_files(&plan).await?;
        self.flushed(&plan, now_ms);
        self.checkpoint().write_clean().await
    }

    /// Deletes the oldest whole segments while retention says so: never the active segment,
    /// and never one holding offsets at or past `upper_bound` (the high watermark: data not yet
    /// committed is not retention's to drop). Returns how many were deleted.
    pub fn apply_retention(
        &mut self,
        retention_ms: i64,
        retention_bytes: i64,
        now_ms: i64,
        upper_bound: i64,
    ) -> io::Result<usize> {
        let mut deleted = 0;
        let mut total = self.size_bytes() as i64;
        while self.segments.len() > 1 {
            let (&base, oldest) = self.segments.iter().next().unwrap();
            if oldest.next_offset() > upper_bound {
                break;
            }
            let over_size = retention_bytes >= 0 && total - oldest.size() as i64 >= retention_bytes;
            let expired = retention_ms >= 0
                && oldest.max_timestamp() >= 0
                && now_ms - oldest.max_timestamp() > retention_ms;
            if !(over_size || expired) {
                break;
            }
            total -= oldest.size() as i64;
            self.segments.remove(&base);
            Segment::remove_files(self.disk.as_ref(), &self.dir, base)?;
            self.dir_changes += 1;
            deleted += 1;
        }
        self.start_offset = self.start_offset.max(self.first_base());
        self.recovery_point = self.recovery_point.max(self.first_base());
        let changed = self.epochs.truncate_from_start(self.start_offset);
        self.epochs_changed(changed);
        Ok(deleted)
    }

    /// Removes every batch holding an offset at or after `offset` (a batch that straddles it
    /// goes whole, so the log may end before `offset`), and the epochs that started there.
    /// Used by replication when a follower diverges from its leader. The cut reaches the disk
    /// with the next flush plan (the recovery point moves back to it, and removed segments
    /// count as directory changes), which must complete, together with a checkpoint, before
    /// anything is appended after it (see `Partition::truncate_to`).
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        assert!(offset >= self.start_offset());
        let doomed: Vec<i64> = self.segments.range(offset + 1..).map(|(&b, _)| b).collect();
        for base in doomed {
            if self.segments.len() == 1 {
                break;
            }
            self.segments.remove(&base);
            Segment::remove_files(self.disk.as_ref(), &self.dir, base)?;
            // The next flush makes the removal durable, before the data appended after it.
            self.dir_changes += 1;
        }
        self.active_mut().truncate_to(offset)?;
        self.recovery_point = self.recovery_point.min(self.end_offset());
        // Data after the cut will be new: the next pass maps it (the file follows then).
        self.cleaner.first_dirty = self.cleaner.first_dirty.map(|d| d.min(offset));
        let end = self.end_offset();
        let changed = self.epochs.truncate_from_end(end);
        self.epochs_changed(changed);
        self.check_invariants();
        Ok(())
    }

    /// Deletes the log's directory and everything in it.
    pub fn delete(self) -> io::Result<()> {
        self.disk.remove_dir_all(&self.dir)
    }
}

/// The recovery point of a log at one moment, to be written to its directory.
pub struct Checkpoint {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    recovery_point: i64,
    /// The leader-epoch checkpoint file's text at the same moment.
    epochs: String,
    epochs_version: u64,
    epochs_on_disk: Arc<AtomicU64>,
}

impl Checkpoint {
    /// Records the recovery point so an unclean start scans only what follows it, after the
    /// leader-epoch cache (when it changed since it was last written): the epoch file must be
    /// at least as new as the recovery point, since a start trusts it below that point.
    /// Checkpoints of one log must not run concurrently (the broker holds its flush gate).
    pub async fn write(&self) -> io::Result<()> {
        if self.epochs_on_disk.load(Ordering::SeqCst) != self.epochs_version {
            let path = self.dir.join(leader_epochs::CHECKPOINT_FILE);
            write_file_atomic(self.disk.as_ref(), &path, self.epochs.as_bytes()).await?;
            self.epochs_on_disk
                .store(self.epochs_version, Ordering::SeqCst);
        }
        let text = render_checkpoint(self.recovery_point);
        let path = self.dir.join(CHECKPOINT_FILE);
        write_file_atomic(self.disk.as_ref(), &path, text.as_bytes()).await
    }

    /// Records the recovery point and marks the log closed cleanly. Only valid when the
    /// recovery point is the log end and nothing is appended afterwards.
    pub async fn write_clean(&self) -> io::Result<()> {
        self.write().await?;
        write_file_atomic(self.disk.as_ref(), &self.dir.join(CLEAN_MARKER), b"").await
    }
}

/// The checkpoint as text: the offset and a CRC-32C of it, so that a damaged file is told
/// apart from a valid one.
fn render_checkpoint(point: i64) -> String {
    let text = point.to_string();
    format!("{text} {:08x}\n", crc32c::crc32c(text.as_bytes()))
}

/// `Ok(None)`: no checkpoint yet. `Err(())`: there is one, but it is damaged.
fn read_checkpoint(disk: &dyn Disk, dir: &Path) -> Result<Option<i64>, ()> {
    let Ok(raw) = read_file(disk, &dir.join(CHECKPOINT_FILE)) else {
        return Ok(None);
    };
    let text = std::str::from_utf8(&raw).map_err(|_| ())?;
    let (point, crc) = text.trim().split_once(' ').ok_or(())?;
    let crc = u32::from_str_radix(crc, 16).map_err(|_| ())?;
    if crc32c::crc32c(point.as_bytes()) != crc {
        return Err(());
    }
    point.parse().map(Some).map_err(|_| ())
}

#[cfg(test)]
mod epoch_tests;
#[cfg(test)]
mod repair_tests;
#[cfg(test)]
mod tests;
