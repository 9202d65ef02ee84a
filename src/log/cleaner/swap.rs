//! The cleaner's file work: building the offset map from the snapshot, writing each group as a
//! `<base>.{log,index,timeindex}.cleaned` segment (fsynced), swapping it in, and recovering an
//! interrupted swap when the log is opened.
//!
//! Swap order for one group, all renames in the partition directory (whose changes reach the
//! medium in order; power loss keeps a prefix of them): (1) the new segment's three files
//! `.cleaned → .swap`; (2) the old segments' files removed; (3) `.swap → final`. The directory
//! is fsynced afterwards by the checkpoint write. Recovery (Kafka's `LogLoader` rules): any
//! `.cleaned` file means its group's swap had not fully started, so `.swap` files at or above
//! the smallest `.cleaned` base are deleted with every `.cleaned`; a remaining `.swap` log is a
//! complete new segment, so old files whose base lies in its offset range are deleted and every
//! `.swap` is renamed to its final name (its indexes are rebuilt).

use std::collections::BTreeSet;
use std::io;
use std::path::Path;
use std::sync::Arc;

use super::filter::{self, Filtered};
use super::plan::{self, FilterContext, OffsetMap};
use super::{CleanJob, Cleaned, CleanedGroup, CleanerCheckpoint, PassStats, SegmentSnapshot};
use super::{SegmentInfo, Throttle};
use crate::io::{Clock, Disk, OpenMode};
use crate::log::batch::{self, BatchHeader};
use crate::log::segment::{scan_file, Segment};
use crate::log::Log;

pub const CLEANED: &str = ".cleaned";
pub const SWAP: &str = ".swap";

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Removes a segment's three files with `suffix`, ignoring those that do not exist.
pub fn remove_suffixed(disk: &dyn Disk, dir: &Path, base: i64, suffix: &str) -> io::Result<()> {
    for path in Segment::paths_with_suffix(dir, base, suffix) {
        match disk.remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Maps `[first_dirty, first_uncleanable)` into `map`, batch by batch, until the map is full.
fn build_map(job: &CleanJob, map: &mut OffsetMap, stats: &mut PassStats) -> io::Result<()> {
    let (first_dirty, end) = (job.range.first_dirty, job.range.first_uncleanable);
    'segments: for seg in &job.segments {
        if seg.info.next <= first_dirty || seg.info.base >= end {
            continue;
        }
        let mut failure = None;
        let mut full = false;
        let stop = scan_file(seg.file.as_ref(), 0, seg.info.size, |_, header, bytes| {
            stats.bytes_read += bytes.len() as u64;
            let aborted = job.aborted.iter().any(|a| a.holds(header));
            if header.last_offset() < first_dirty || header.is_control() || aborted {
                map.advance(header.last_offset().max(map.latest()));
                return true;
            }
            let mut keys: Vec<(i64, Vec<u8>)> = Vec::new();
            if let Err(e) = filter::for_each_key(bytes, header, |offset, key| {
                if offset >= first_dirty {
                    keys.push((offset, key.to_vec()));
                }
            }) {
                failure = Some(invalid(format!("batch at {}: {e}", header.base_offset)));
                return false;
            }
            if !map.fits(keys.iter().map(|(_, k)| k.as_slice())) {
                full = true;
                return false;
            }
            for (offset, key) in &keys {
                map.put(key, *offset);
            }
            map.advance(header.last_offset());
            true
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        if full {
            stats.map_full = true;
            break 'segments;
        }
        if let Some(stop) = stop {
            return Err(invalid(format!(
                "segment {} unreadable at {}: {}",
                seg.info.base, stop.position, stop.reason
            )));
        }
        // Past any gap at the segment's end.
        map.advance(seg.info.next - 1);
    }
    stats.keys_mapped = map.len() as u64;
    stats.map_bytes = map.bytes() as u64;
    Ok(())
}

pub(super) async fn run(
    job: CleanJob,
    map_bytes: usize,
    now_ms: i64,
    clock: &dyn Clock,
    throttle: &mut Throttle,
) -> io::Result<Option<Cleaned>> {
    let mut stats = PassStats::default();
    let mut map = OffsetMap::new(map_bytes);
    // Nothing below the first dirty offset needs mapping: start the map just below it.
    map.advance(job.range.first_dirty - 1);
    build_map(&job, &mut map, &mut stats)?;
    throttle.pace(stats.bytes_read, clock).await;
    if map.latest() < job.range.first_dirty {
        tracing::warn!(dir = %job.dir.display(), map_bytes,
            "log.cleaner.dedupe.buffer.size cannot hold one batch's keys; not cleaning");
        return Ok(None);
    }
    let end_offset = (map.latest() + 1).min(job.range.first_uncleanable);
    let to_rewrite: Vec<&SegmentSnapshot> = job
        .segments
        .iter()
        .filter(|s| s.info.base < end_offset)
        .collect();
    let infos: Vec<SegmentInfo> = to_rewrite.iter().map(|s| s.info).collect();
    let ctx = FilterContext {
        map: &map,
        first_dirty: job.range.first_dirty,
        producer_last: &job.producer_last,
        first_uncleanable: job.range.first_uncleanable,
        now_ms,
        delete_retention_ms: job.policy.delete_retention_ms,
    };
    let mut groups = Vec::new();
    for range in plan::group_segments(&infos, job.policy.segment_bytes) {
        let members = &to_rewrite[range];
        let base = members[0].info.base;
        let written = write_group(&job, base, members, &ctx, &mut stats, clock, throttle).await;
        if let Err(e) = written {
            for g in &groups {
                let g: &CleanedGroup = g;
                let _ = remove_suffixed(job.disk.as_ref(), &job.dir, g.base, CLEANED);
            }
            let _ = remove_suffixed(job.disk.as_ref(), &job.dir, base, CLEANED);
            return Err(e);
        }
        groups.push(CleanedGroup {
            base,
            replaces: members
                .iter()
                .map(|s| (s.info.base, s.file.clone(), s.info.size))
                .collect(),
        });
    }
    Ok(Some(Cleaned {
        disk: job.disk.clone(),
        dir: job.dir.clone(),
        groups,
        end_offset,
        checkpoint: job.checkpoint,
        stats,
    }))
}

/// Writes one group's surviving batches as a `.cleaned` segment and fsyncs its files.
async fn write_group(
    job: &CleanJob,
    base: i64,
    members: &[&SegmentSnapshot],
    ctx: &FilterContext<'_>,
    stats: &mut PassStats,
    clock: &dyn Clock,
    throttle: &mut Throttle,
) -> io::Result<()> {
    let disk = job.disk.as_ref();
    remove_suffixed(disk, &job.dir, base, CLEANED)?;
    let paths = Segment::paths_with_suffix(&job.dir, base, CLEANED);
    let mut out = Segment::create_at(disk, paths, base, job.index_interval, ctx.now_ms)?;
    out.allow_gaps();
    for seg in members {
        let mut failure: Option<io::Error> = None;
        let mut moved = 0u64;
        let stop = scan_file(seg.file.as_ref(), 0, seg.info.size, |_, header, bytes| {
            moved += bytes.len() as u64;
            let result = match filter::filter_batch(bytes, header, ctx) {
                Ok(Filtered::Unchanged(b)) => append(&mut out, b, header),
                Ok(Filtered::Rewritten(b)) => {
                    stats.batches_rewritten += 1;
                    batch::check(&b)
                        .map_err(|e| invalid(format!("rewritten batch: {e}")))
                        .and_then(|h| append(&mut out, &b, &h))
                }
                Ok(Filtered::Dropped) => {
                    stats.batches_dropped += 1;
                    Ok(0)
                }
                Err(e) => Err(invalid(format!("batch at {}: {e}", header.base_offset))),
            };
            match result {
                Ok(n) => {
                    stats.bytes_written += n;
                    moved += n;
                    true
                }
                Err(e) => {
                    failure = Some(e);
                    false
                }
            }
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        if let Some(stop) = stop {
            return Err(invalid(format!(
                "segment {} unreadable at {}: {}",
                seg.info.base, stop.position, stop.reason
            )));
        }
        stats.bytes_read += seg.info.size;
        throttle.pace(moved, clock).await;
    }
    let syncs: Vec<_> = out.files().iter().map(|f| f.sync()).collect();
    crate::io::join_all(syncs)
        .await
        .into_iter()
        .collect::<io::Result<()>>()
}

fn append(out: &mut Segment, bytes: &[u8], header: &BatchHeader) -> io::Result<u64> {
    out.append(bytes, header)?;
    Ok(bytes.len() as u64)
}

impl Log {
    /// The segments and range of a pass, if one is due: `upper_bound` is the high watermark
    /// (the log's recovery point bounds it too: only durable data is rewritten) and
    /// `producer_last` the last offsets of active producers' last batches.
    pub fn clean_job(
        &self,
        upper_bound: i64,
        producer_last: BTreeSet<i64>,
        policy: plan::CleanPolicy,
        now_ms: i64,
    ) -> io::Result<Option<CleanJob>> {
        let mut infos = Vec::with_capacity(self.segments.len());
        let active = self.active().base_offset();
        for s in self.segments.values() {
            // The first-batch timestamp costs a header read; only closed segments need it.
            let first_timestamp = if s.base_offset() < active && policy.max_lag_ms < i64::MAX {
                s.first_batch_timestamp()?
            } else {
                -1
            };
            infos.push(SegmentInfo {
                base: s.base_offset(),
                next: s.next_offset(),
                size: s.size(),
                max_timestamp: s.max_timestamp(),
                first_timestamp,
            });
        }
        let upper = upper_bound.min(self.recovery_point);
        let Some(range) = plan::cleanable_range(
            &infos,
            self.cleaner.first_dirty,
            self.start_offset,
            upper,
            now_ms,
            &policy,
        ) else {
            return Ok(None);
        };
        let segments = self
            .segments
            .values()
            .zip(infos)
            .filter(|(s, _)| s.base_offset() < range.first_uncleanable)
            .map(|(s, info)| SegmentSnapshot {
                info,
                file: s.log_file().clone(),
            })
            .collect();
        Ok(Some(CleanJob {
            disk: self.disk.clone(),
            dir: self.dir.clone(),
            segments,
            range,
            producer_last,
            aborted: Vec::new(),
            policy,
            index_interval: self.config.index_interval_bytes,
            checkpoint: self.cleaner,
        }))
    }

    /// Swaps the pass's groups in (synchronous renames; call under the partition lock, after
    /// [`Cleaned::write_intent`]). A group whose old segments are no longer the log's
    /// (retention, DeleteRecords or truncation ran meanwhile) is abandoned, and so is the
    /// checkpoint's advance. Returns the checkpoint to write next (outside the lock), whose
    /// directory fsync makes the renames durable.
    pub fn install_cleaned(&mut self, cleaned: &Cleaned) -> io::Result<CleanerCheckpoint> {
        let disk = self.disk.clone();
        let dir = self.dir.clone();
        self.cleaner.gaps_below = self.cleaner.gaps_below.max(cleaned.end_offset);
        let mut complete = true;
        for group in &cleaned.groups {
            let current = group.replaces.iter().all(|(base, file, size)| {
                self.segments.get(base).is_some_and(|s| {
                    Arc::ptr_eq(s.log_file(), file)
                        && s.size() == *size
                        && s.next_offset() <= self.active().base_offset()
                })
            });
            // The group must still start at or after the log start's segment.
            if !current || group.base < self.first_base() {
                complete = false;
                remove_suffixed(disk.as_ref(), &dir, group.base, CLEANED)?;
                continue;
            }
            let cleaned_paths = Segment::paths_with_suffix(&dir, group.base, CLEANED);
            let swap_paths = Segment::paths_with_suffix(&dir, group.base, SWAP);
            for (from, to) in cleaned_paths.iter().zip(&swap_paths) {
                disk.rename(from, to)?;
            }
            for (base, _, _) in &group.replaces {
                self.segments.remove(base);
                Segment::remove_files(disk.as_ref(), &dir, *base)?;
            }
            for (from, to) in swap_paths.iter().zip(Segment::paths(&dir, group.base)) {
                disk.rename(from, &to)?;
            }
            self.dir_changes += 1;
            let (segment, stop) = Segment::open(
                disk.as_ref(),
                &dir,
                group.base,
                self.config.index_interval_bytes,
                false,
                true,
                0,
            )?;
            if let Some(stop) = stop {
                // The file was fsynced before the swap: unreadable now means the disk is bad.
                return Err(invalid(format!(
                    "cleaned segment {} unreadable at {}: {}",
                    group.base, stop.position, stop.reason
                )));
            }
            self.insert_segment(group.base, segment);
        }
        if complete {
            self.cleaner.first_dirty = Some(
                cleaned
                    .end_offset
                    .max(self.cleaner.first_dirty.unwrap_or(i64::MIN)),
            );
        }
        self.check_invariants();
        Ok(self.cleaner)
    }

    /// The cleaner's checkpoint as the log holds it.
    pub fn cleaner_checkpoint(&self) -> CleanerCheckpoint {
        self.cleaner
    }
}

/// Completes or rolls back an interrupted swap in `dir` (called by `Log::open` before it reads
/// the segments). Returns the bases of segments that came out of a `.swap`, whose indexes must
/// be rebuilt.
pub(crate) async fn recover(disk: &dyn Disk, dir: &Path) -> io::Result<BTreeSet<i64>> {
    let names = disk.list_dir(dir)?;
    let base_of = |name: &str| name.split('.').next().and_then(|b| b.parse::<i64>().ok());
    let cleaned: Vec<&String> = names.iter().filter(|n| n.ends_with(CLEANED)).collect();
    let swaps: Vec<&String> = names.iter().filter(|n| n.ends_with(SWAP)).collect();
    if cleaned.is_empty() && swaps.is_empty() {
        return Ok(BTreeSet::new());
    }
    let min_cleaned = cleaned.iter().filter_map(|n| base_of(n)).min();
    for name in &cleaned {
        disk.remove_file(&dir.join(name))?;
    }
    let mut kept_swaps = Vec::new();
    for name in swaps {
        match base_of(name) {
            Some(b) if min_cleaned.is_none_or(|m| b < m) => kept_swaps.push((b, name.clone())),
            _ => disk.remove_file(&dir.join(name))?,
        }
    }
    // Offset ranges of the complete new segments.
    let mut ranges = Vec::new();
    for (base, name) in &kept_swaps {
        if name.ends_with(&format!(".log{SWAP}")) {
            let file = disk.open(&dir.join(name), OpenMode::Read)?;
            let mut next = *base;
            scan_file(file.as_ref(), 0, file.len()?, |_, h, _| {
                next = h.next_offset();
                true
            })?;
            ranges.push((*base, next.max(base + 1)));
        }
    }
    for name in &names {
        if name.ends_with(CLEANED) || name.ends_with(SWAP) {
            continue;
        }
        let is_segment_file =
            name.ends_with(".log") || name.ends_with(".index") || name.ends_with(".timeindex");
        if let (true, Some(b)) = (is_segment_file, base_of(name)) {
            if ranges.iter().any(|&(lo, hi)| b >= lo && b < hi) {
                disk.remove_file(&dir.join(name))?;
            }
        }
    }
    let mut rebuilt = BTreeSet::new();
    for (base, name) in &kept_swaps {
        let target = name.strip_suffix(SWAP).expect("a .swap name");
        disk.rename(&dir.join(name), &dir.join(target))?;
        rebuilt.insert(*base);
        tracing::info!(dir = %dir.display(), file = target, "completed an interrupted cleaner swap");
    }
    // Durable before anything else happens in the directory.
    disk.sync_dir(dir).await?;
    Ok(rebuilt)
}
