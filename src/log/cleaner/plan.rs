//! The cleaner's decisions, as pure functions over plain data (no I/O): which part of a log is
//! cleanable and whether it is worth cleaning now, the bounded key → last offset map, how
//! segments are grouped for rewriting, and which records and batches survive. Kafka's rules
//! (`LogCleanerManager.cleanableOffsets`, `LogCleaner.doClean`/`shouldRetainRecord`/
//! `checkBatchRetention`, KIP-58, KIP-354, KIP-534) as paraphrased in
//! `shared/notes/compaction.md`.

use std::collections::{BTreeMap, BTreeSet};

/// What the planner needs to know of one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    pub base: i64,
    /// The offset after its last batch.
    pub next: i64,
    pub size: u64,
    /// The largest record timestamp (-1 when unknown or empty).
    pub max_timestamp: i64,
    /// The first batch's max timestamp (-1 when empty): KIP-354's "first-batch timestamp".
    pub first_timestamp: i64,
}

/// A topic's compaction settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CleanPolicy {
    /// `min.cleanable.dirty.ratio`.
    pub min_dirty_ratio: f64,
    /// `min.compaction.lag.ms`.
    pub min_lag_ms: i64,
    /// `max.compaction.lag.ms`.
    pub max_lag_ms: i64,
    /// `delete.retention.ms`.
    pub delete_retention_ms: i64,
    /// `segment.bytes`: the most log bytes one rewritten segment (a group) may hold.
    pub segment_bytes: u64,
}

impl Default for CleanPolicy {
    fn default() -> Self {
        CleanPolicy {
            min_dirty_ratio: 0.5,
            min_lag_ms: 0,
            max_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
            segment_bytes: 1 << 30,
        }
    }
}

/// The cleanable part of a log, `[first_dirty, first_uncleanable)`, and why it is due.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CleanRange {
    pub first_dirty: i64,
    /// A segment base: only whole segments below it are mapped.
    pub first_uncleanable: i64,
    pub dirty_ratio: f64,
    /// `max.compaction.lag.ms` says the dirty data must be cleaned whatever the ratio.
    pub forced: bool,
}

/// The cleanable range of a log, if cleaning is due now. `segments` are in offset order, the
/// last one active; `stored_first_dirty` is the cleaner checkpoint (reset to `log_start` when
/// outside `[log_start, log end]`); `upper_bound` is the first offset the cleaner must not
/// touch (the high watermark, and the recovery point: only durable data is rewritten).
pub fn cleanable_range(
    segments: &[SegmentInfo],
    stored_first_dirty: Option<i64>,
    log_start: i64,
    upper_bound: i64,
    now_ms: i64,
    policy: &CleanPolicy,
) -> Option<CleanRange> {
    let (active, closed) = segments.split_last()?;
    let log_end = active.next;
    let first_dirty = match stored_first_dirty {
        Some(d) if d >= log_start && d <= log_end => d,
        _ => log_start,
    };
    // (a) the upper bound, (b) the active segment's base, (c) the first dirty segment still
    // inside min.compaction.lag.ms.
    let mut uncleanable = upper_bound.min(active.base);
    if policy.min_lag_ms > 0 {
        let young = closed
            .iter()
            .filter(|s| s.next > first_dirty)
            .find(|s| s.max_timestamp > now_ms.saturating_sub(policy.min_lag_ms));
        if let Some(s) = young {
            uncleanable = uncleanable.min(s.base);
        }
    }
    uncleanable = uncleanable.max(first_dirty);
    // Rounded down to the base of the segment holding it: only whole segments are mapped.
    let first_uncleanable = segments
        .iter()
        .rev()
        .find(|s| s.base <= uncleanable)
        .map(|s| s.base)
        .unwrap_or(uncleanable)
        .max(first_dirty.min(uncleanable));
    let dirty: Vec<&SegmentInfo> = closed
        .iter()
        .filter(|s| s.next > first_dirty && s.base < first_uncleanable)
        .collect();
    let cleanable_bytes: u64 = dirty.iter().map(|s| s.size).sum();
    let clean_bytes: u64 = closed
        .iter()
        .filter(|s| s.next <= first_dirty && s.base < first_uncleanable)
        .map(|s| s.size)
        .sum();
    if cleanable_bytes == 0 || first_uncleanable <= first_dirty {
        return None;
    }
    let dirty_ratio = cleanable_bytes as f64 / (clean_bytes + cleanable_bytes) as f64;
    let forced = policy.max_lag_ms < i64::MAX
        && dirty
            .iter()
            .filter(|s| s.first_timestamp >= 0)
            .any(|s| s.first_timestamp < now_ms.saturating_sub(policy.max_lag_ms));
    (dirty_ratio > policy.min_dirty_ratio || forced).then_some(CleanRange {
        first_dirty,
        first_uncleanable,
        dirty_ratio,
        forced,
    })
}

/// Bytes one map entry costs besides its key: the offset, and the tree's node and pointer
/// overhead (measured for `BTreeMap<Vec<u8>, i64>` at about 40 bytes per entry on 64-bit).
pub const ENTRY_OVERHEAD: usize = 48;

/// Key → last offset over the dirty range, bounded by `log.cleaner.dedupe.buffer.size`. Kafka
/// stores 16-byte MD5 hashes and treats collisions as impossible; this map keeps the exact
/// keys (a collision would silently drop a live record), so its bound is on key bytes plus
/// [`ENTRY_OVERHEAD`] each.
#[derive(Debug)]
pub struct OffsetMap {
    entries: BTreeMap<Vec<u8>, i64>,
    bytes: usize,
    limit: usize,
    /// The last offset the map covers: records above it are beyond the map and kept.
    latest: i64,
}

impl OffsetMap {
    pub fn new(limit_bytes: usize) -> OffsetMap {
        OffsetMap {
            entries: BTreeMap::new(),
            bytes: 0,
            limit: limit_bytes,
            latest: -1,
        }
    }

    /// Whether `keys` (one batch's) can all be added without passing the bound.
    pub fn fits<'a>(&self, keys: impl IntoIterator<Item = &'a [u8]>) -> bool {
        let mut extra = 0usize;
        let mut seen = BTreeSet::new();
        for key in keys {
            if !self.entries.contains_key(key) && seen.insert(key) {
                extra += key.len() + ENTRY_OVERHEAD;
            }
        }
        self.bytes + extra <= self.limit
    }

    /// Records that `key` was written at `offset` (later offsets overwrite earlier ones).
    pub fn put(&mut self, key: &[u8], offset: i64) {
        assert!(offset >= self.latest, "offsets are mapped in order");
        match self.entries.get_mut(key) {
            Some(o) => *o = offset,
            None => {
                self.bytes += key.len() + ENTRY_OVERHEAD;
                self.entries.insert(key.to_vec(), offset);
            }
        }
    }

    /// Everything up to `offset` has been mapped (called after each batch).
    pub fn advance(&mut self, offset: i64) {
        self.latest = self.latest.max(offset);
    }

    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.entries.get(key).copied()
    }

    pub fn latest(&self) -> i64 {
        self.latest
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes accounted against the bound.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Splits the segments to rewrite (offset order) into groups, each rewritten as one segment
/// named by its first base: a group stays within `max_bytes` of log and within a u32 span of
/// offsets (index entries hold 32-bit relative offsets). Returns index ranges into `segments`.
pub fn group_segments(segments: &[SegmentInfo], max_bytes: u64) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let mut end = start + 1;
        let mut bytes = segments[start].size;
        while end < segments.len() {
            let next = &segments[end];
            let span = next.next - segments[start].base;
            if bytes + next.size > max_bytes || span >= u32::MAX as i64 {
                break;
            }
            bytes += next.size;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

/// What a pass knows while it filters batches.
#[derive(Debug)]
pub struct FilterContext<'a> {
    pub map: &'a OffsetMap,
    /// The first offset the pass mapped (the checkpoint it started from).
    pub first_dirty: i64,
    /// Last offsets of active producers' last batches: kept, even emptied (idempotence).
    pub producer_last: &'a BTreeSet<i64>,
    /// The pass's upper bound: a batch ending exactly there is kept, even emptied.
    pub first_uncleanable: i64,
    pub now_ms: i64,
    pub delete_retention_ms: i64,
}

/// One record as the retention rule sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    /// A keyed record without a value.
    pub tombstone: bool,
}

impl FilterContext<'_> {
    /// Kafka's `shouldRetainRecord`, with one stricter rule: a tombstone is dropped only once
    /// its batch carries a horizon that has passed (a horizon is stamped only by a pass that
    /// mapped the tombstone, so its older values are gone by then; Kafka can also stamp one on a
    /// tombstone beyond a full map, whose older values may still be present).
    pub fn keep(&self, record: &RecordView<'_>, horizon: Option<i64>) -> bool {
        if record.offset > self.map.latest() {
            return true;
        }
        let Some(key) = record.key else {
            // Keyless records cannot be compacted; a compacted topic refuses them at produce.
            return false;
        };
        let newest = self.map.get(key).is_none_or(|last| record.offset >= last);
        if !newest {
            return false;
        }
        if record.tombstone {
            return horizon.is_none_or(|h| self.now_ms < h);
        }
        true
    }

    /// Whether a kept tombstone at `offset` gets its batch stamped with a horizon now: it lies
    /// in the range this pass mapped, so this pass removed its key's older values.
    pub fn stamps_horizon(&self, offset: i64) -> bool {
        offset >= self.first_dirty && offset <= self.map.latest()
    }

    pub fn horizon(&self) -> i64 {
        self.now_ms.saturating_add(self.delete_retention_ms)
    }
}

/// What becomes of one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchFate {
    /// Copied byte for byte (CRC included).
    Unchanged,
    /// Rebuilt with the records at these indexes (possibly none: an empty header kept for a
    /// producer or for the pass's end offset), stamped with `horizon` when set.
    Rewrite {
        kept: Vec<usize>,
        horizon: Option<i64>,
    },
    Dropped,
}

/// Decides a data batch's fate from its records: `existing_horizon` is the batch's KIP-534
/// horizon, `producer_id` and `last_offset` its header's.
pub fn batch_fate(
    ctx: &FilterContext<'_>,
    records: &[RecordView<'_>],
    existing_horizon: Option<i64>,
    producer_id: i64,
    last_offset: i64,
) -> BatchFate {
    let mut kept = Vec::with_capacity(records.len());
    let mut stamp = false;
    for (i, r) in records.iter().enumerate() {
        if ctx.keep(r, existing_horizon) {
            if r.tombstone && existing_horizon.is_none() && ctx.stamps_horizon(r.offset) {
                stamp = true;
            }
            kept.push(i);
        }
    }
    if kept.len() == records.len() && !stamp {
        return BatchFate::Unchanged;
    }
    let producers_last = producer_id >= 0 && ctx.producer_last.contains(&last_offset);
    let at_upper_bound = last_offset + 1 == ctx.first_uncleanable;
    if kept.is_empty() && !producers_last && !at_upper_bound {
        return BatchFate::Dropped;
    }
    // A batch keeps its horizon through later rewrites; an emptied one has nothing to guard.
    let horizon = match (kept.is_empty(), stamp) {
        (true, _) => None,
        (false, true) => Some(ctx.horizon()),
        (false, false) => existing_horizon,
    };
    BatchFate::Rewrite { kept, horizon }
}

#[cfg(test)]
mod tests;
