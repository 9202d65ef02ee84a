//! One segment of a partition log: a file of record batches stored exactly as received (with the
//! broker's base offsets), and its two sparse indexes. File names follow Kafka's:
//! `00000000000000000000.log`, `.index`, `.timeindex`, named by the segment's base offset.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};

use super::batch::{self, BatchError, BatchHeader, HEADER_LEN};
use super::index::{OffsetEntry, OffsetIndex, TimeEntry, TimeIndex};
use crate::io::{read_exact_at, Disk, File, OpenMode};

/// How much of a segment one read asks the disk for while scanning.
const SCAN_CHUNK: usize = 1 << 20;
/// What [`Segment::locate`] reads at a time: the default index interval (4 KiB) plus a batch
/// header, so a walk from an index entry is usually one read.
const LOCATE_CHUNK: usize = 4096 + 2 * HEADER_LEN;

thread_local! {
    /// [`Segment::locate`]'s read buffer, one per thread (never held across an await).
    static LOCATE_BUFFER: std::cell::RefCell<Box<[u8; LOCATE_CHUNK]>> =
        std::cell::RefCell::new(Box::new([0u8; LOCATE_CHUNK]));
}

pub fn file_name(base_offset: i64, extension: &str) -> String {
    format!("{base_offset:020}.{extension}")
}

/// Why a scan stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanStop {
    pub position: u64,
    pub reason: String,
}

/// Damage met in a segment that open trusted without a scan: a batch that does not parse, fails
/// its CRC or does not follow on, or an index entry that names no batch. Carried inside an
/// `InvalidData` [`io::Error`] so that a walk at open can tell it from an I/O error and send the
/// segment through full recovery (see `Log::repairing`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The base offset of the damaged segment.
    pub segment: i64,
    pub position: u64,
    pub reason: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "segment {} position {}: {}",
            self.segment, self.position, self.reason
        )
    }
}

impl std::error::Error for Damage {}

impl Damage {
    pub fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, self)
    }

    /// The damage `error` reports, if it is one.
    pub fn of(error: &io::Error) -> Option<&Damage> {
        error.get_ref()?.downcast_ref::<Damage>()
    }
}

/// A segment's remembered batch starts (`Segment::resume`): a few, one per recent reader.
#[derive(Clone, Copy, Debug, Default)]
struct Resume {
    places: [Option<(i64, u64)>; RESUME_PLACES],
    /// The place a reader that moved on from none of them takes over (round-robin).
    next: usize,
}

/// Readers of one partition's tail at once: its followers and a consumer or two.
const RESUME_PLACES: usize = 4;

impl Resume {
    /// The place to walk from for `offset`: the furthest remembered batch start at or below it,
    /// if no earlier than the index entry's `floor` and inside the segment's `size`.
    fn nearest(&self, offset: i64, floor: u64, size: u64) -> Option<(i64, u64)> {
        self.places
            .iter()
            .flatten()
            .filter(|&&(o, p)| o <= offset && p >= floor && p <= size)
            .max_by_key(|&&(o, p)| (o, p))
            .copied()
    }

    /// Remembers a batch start a walk or read reached: it replaces the place that reader most
    /// likely started from (the furthest at or below it), else the next place in turn.
    fn remember(&mut self, offset: i64, position: u64) {
        let from = self
            .places
            .iter()
            .enumerate()
            .filter_map(|(i, place)| place.map(|(o, p)| (i, o, p)))
            .filter(|&(_, o, p)| o <= offset && p <= position)
            .max_by_key(|&(_, o, p)| (o, p))
            .map(|(i, _, _)| i);
        let at = match from {
            Some(i) => i,
            None => {
                let i = self.next;
                self.next = (self.next + 1) % RESUME_PLACES;
                i
            }
        };
        self.places[at] = Some((offset, position));
    }
}

pub struct Segment {
    base_offset: i64,
    log: Arc<dyn File>,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    /// Bytes of valid batches in the log file.
    size: u64,
    /// The offset after the last batch in this segment (= base offset when empty).
    next_offset: i64,
    max_timestamp: i64,
    /// Wall-clock time the segment was opened or created: drives `segment.ms` rolls.
    created_ms: i64,
    bytes_since_index: u64,
    index_interval: u64,
    /// Offsets may jump forward between batches: the segment was rewritten by the log cleaner,
    /// which removes batches but never renumbers. Elsewhere a jump is damage.
    gaps: bool,
    /// Where [`Segment::locate`]'s recent walks (and [`Segment::read`]'s reads) ended: batch
    /// starts `(offset, position)` reached by walking, every header before them parsed and
    /// following on, one place per reader (a leader's followers and consumers read at different
    /// offsets). A later walk for an offset at or past one starts at the nearest instead of at
    /// the index entry (a follower's fetch at the tail re-walked ~17 headers each time). Never
    /// before the index entry, so a read never walks more than without them; forgotten when the
    /// file is cut or rebuilt. See `locate`.
    resume: Mutex<Resume>,
    /// Simulator and tests: the planted `index-lookup-past-target`, from the log's config.
    #[cfg(any(madsim, test))]
    lookup_past_target: bool,
}

impl Segment {
    /// Simulator and tests: plants the log's bugs that live in a segment (the log does this
    /// for every segment it holds).
    #[cfg(any(madsim, test))]
    pub fn plant(&mut self, planted: crate::config::planted::Planted) {
        self.lookup_past_target = planted.is(crate::config::PlantedBug::IndexLookupPastTarget);
    }

    pub fn paths(dir: &Path, base_offset: i64) -> [PathBuf; 3] {
        Self::paths_with_suffix(dir, base_offset, "")
    }

    /// The segment's three files with `suffix` appended (`.cleaned`, `.swap`).
    pub fn paths_with_suffix(dir: &Path, base_offset: i64, suffix: &str) -> [PathBuf; 3] {
        ["log", "index", "timeindex"]
            .map(|ext| dir.join(format!("{}{suffix}", file_name(base_offset, ext))))
    }

    pub fn create(
        disk: &dyn Disk,
        dir: &Path,
        base_offset: i64,
        index_interval: u64,
        now_ms: i64,
    ) -> io::Result<Segment> {
        Self::create_at(
            disk,
            Self::paths(dir, base_offset),
            base_offset,
            index_interval,
            now_ms,
        )
    }

    /// A new empty segment in the files `paths` (log, offset index, time index).
    pub fn create_at(
        disk: &dyn Disk,
        paths: [PathBuf; 3],
        base_offset: i64,
        index_interval: u64,
        now_ms: i64,
    ) -> io::Result<Segment> {
        let [log, index, time] = paths;
        let log = disk.open(&log, OpenMode::Create)?;
        log.set_len(0)?;
        Ok(Segment {
            base_offset,
            log,
            offset_index: OffsetIndex::empty(disk.open(&index, OpenMode::Create)?)?,
            time_index: TimeIndex::empty(disk.open(&time, OpenMode::Create)?)?,
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            created_ms: now_ms,
            bytes_since_index: 0,
            index_interval,
            gaps: false,
            resume: Mutex::new(Resume::default()),
            #[cfg(any(madsim, test))]
            lookup_past_target: false,
        })
    }

    /// Lets offsets jump forward between batches (a segment the cleaner wrote).
    pub fn allow_gaps(&mut self) {
        self.gaps = true;
    }

    pub fn has_gaps(&self) -> bool {
        self.gaps
    }

    /// Whether a batch at `found` may follow a batch that ended at `expected`.
    fn follows(&self, found: i64, expected: i64) -> bool {
        found == expected || (self.gaps && found > expected)
    }

    /// Opens an existing segment. With `recover`, every batch is checked (CRC, framing, offsets
    /// following on from `base_offset`), the file is truncated after the last good batch and the
    /// indexes are rebuilt; otherwise the indexes on disk are trusted if they are sound.
    pub fn open(
        disk: &dyn Disk,
        dir: &Path,
        base_offset: i64,
        index_interval: u64,
        recover: bool,
        gaps: bool,
        now_ms: i64,
    ) -> io::Result<(Segment, Option<ScanStop>)> {
        let [log_path, index_path, time_path] = Self::paths(dir, base_offset);
        let log = disk.open(&log_path, OpenMode::ReadWrite)?;
        let file_size = log.len()?;
        let index_file = disk.open(&index_path, OpenMode::Create)?;
        let time_file = disk.open(&time_path, OpenMode::Create)?;
        let loaded = if recover {
            None
        } else {
            match (
                OffsetIndex::load(index_file.clone(), file_size)?,
                TimeIndex::load(time_file.clone())?,
            ) {
                (Some(o), Some(t)) => Some((o, t)),
                _ => None,
            }
        };
        let mut segment = Segment {
            base_offset,
            log,
            offset_index: OffsetIndex::empty_in_memory(index_file.clone()),
            time_index: TimeIndex::empty_in_memory(time_file.clone()),
            size: file_size,
            next_offset: base_offset,
            max_timestamp: -1,
            created_ms: now_ms,
            bytes_since_index: 0,
            index_interval,
            gaps,
            resume: Mutex::new(Resume::default()),
            #[cfg(any(madsim, test))]
            lookup_past_target: false,
        };
        match loaded {
            Some((offset_index, time_index)) => {
                // Only the tail after the last index entry needs walking to find the end.
                let last_entry = offset_index.last();
                let start = last_entry.map(|e| e.position as u64).unwrap_or(0);
                // The batch at an index entry starts at the offset the entry names.
                let first_expected =
                    base_offset + last_entry.map(|e| e.relative_offset as i64).unwrap_or(0);
                segment.offset_index = offset_index;
                segment.time_index = time_index;
                let mut last: Option<BatchHeader> = None;
                let mut max_ts = segment.time_index.last().map(|e| e.timestamp).unwrap_or(-1);
                // Offsets must follow on here too, from the one the index promises: a
                // CRC-valid batch out of sequence in the tail would otherwise set the end (even
                // below the segment's base), and later appends would land behind it where no
                // read can reach them (both found by fuzzing).
                let mut expected = Some(first_expected);
                let mut out_of_sequence = None;
                let gaps = segment.gaps;
                let stop = segment.scan(start, |position, header, _| {
                    let follows =
                        |e: i64| header.base_offset == e || (gaps && header.base_offset > e);
                    if expected.is_some_and(|e| !follows(e)) {
                        out_of_sequence = Some(ScanStop {
                            position,
                            reason: format!(
                                "batch at offset {} where {} was expected",
                                header.base_offset,
                                expected.unwrap_or_default()
                            ),
                        });
                        return false;
                    }
                    expected = Some(header.next_offset());
                    max_ts = max_ts.max(header.max_timestamp);
                    last = Some(*header);
                    true
                })?;
                if let Some(stop) = out_of_sequence.or(stop) {
                    // A clean shutdown left a bad tail: distrust the indexes and recover fully.
                    tracing::warn!(segment = base_offset, position = stop.position, reason = %stop.reason,
                        "segment tail unreadable after clean shutdown; recovering");
                    drop(segment);
                    return Self::open(disk, dir, base_offset, index_interval, true, gaps, now_ms);
                }
                segment.max_timestamp = max_ts;
                segment.next_offset = last.map(|h| h.next_offset()).unwrap_or(base_offset);
                Ok((segment, None))
            }
            None => {
                let stop = segment.rebuild(index_file, time_file)?;
                Ok((segment, stop))
            }
        }
    }

    /// Walks every batch from the start, checking it, and rebuilds both indexes; truncates the
    /// log after the last good batch.
    fn rebuild(
        &mut self,
        index_file: Arc<dyn File>,
        time_file: Arc<dyn File>,
    ) -> io::Result<Option<ScanStop>> {
        self.offset_index = OffsetIndex::empty(index_file)?;
        self.time_index = TimeIndex::empty(time_file)?;
        self.forget_resume();
        let base = self.base_offset;
        let mut expected = base;
        let mut entries = Vec::new();
        let mut bad_offset = None;
        let gaps = self.gaps;
        let stop = self.scan(0, |position, header, _| {
            let follows = header.base_offset == expected || (gaps && header.base_offset > expected);
            if !follows {
                bad_offset = Some((position, header.base_offset, expected));
                return false;
            }
            expected = header.next_offset();
            entries.push((position, *header));
            true
        })?;
        let stop = match bad_offset {
            Some((position, found, expected)) => Some(ScanStop {
                position,
                reason: format!("batch at offset {found} where {expected} was expected"),
            }),
            None => stop,
        };
        let valid_end = match &stop {
            Some(stop) => stop.position,
            None => self.size,
        };
        if valid_end < self.size {
            self.log.set_len(valid_end)?;
        }
        self.size = 0;
        self.next_offset = base;
        self.max_timestamp = -1;
        self.bytes_since_index = 0;
        for (position, header) in entries {
            self.index_batch(position, &header)?;
            self.size = position + header.total_len() as u64;
            self.next_offset = header.next_offset();
        }
        assert_eq!(self.size, valid_end);
        Ok(stop)
    }

    /// Calls `visit(position, header, bytes)` for each good batch from `start` until it returns
    /// false or the data ends. Returns where and why it stopped if a batch was bad or torn.
    pub fn scan(
        &self,
        start: u64,
        visit: impl FnMut(u64, &BatchHeader, &[u8]) -> bool,
    ) -> io::Result<Option<ScanStop>> {
        scan_file(self.log.as_ref(), start, self.size, visit)
    }

    /// Walks every batch from the start, as full recovery would, without changing anything, and
    /// calls `visit` for each: every batch must parse, pass its CRC and follow on from the base
    /// offset up to the segment's end offset, and every offset index entry must sit at a batch
    /// that starts at the offset it names (so that no later lookup can meet damage). The first
    /// fault is returned as [`Damage`].
    pub fn scan_verified(&self, mut visit: impl FnMut(&BatchHeader)) -> io::Result<()> {
        let damage = |position: u64, reason: String| Damage {
            segment: self.base_offset,
            position,
            reason,
        };
        let mut expected = self.base_offset;
        let mut end = 0u64;
        let mut entries = self.offset_index.entries().iter().peekable();
        let mut fault = None;
        let stop = self.scan(0, |position, header, _| {
            if !self.follows(header.base_offset, expected) {
                fault = Some(damage(
                    position,
                    format!(
                        "batch at offset {} where {expected} was expected",
                        header.base_offset
                    ),
                ));
                return false;
            }
            while let Some(entry) = entries.next_if(|e| e.position as u64 <= position) {
                let named = self.base_offset + entry.relative_offset as i64;
                if entry.position as u64 != position || named != header.base_offset {
                    fault = Some(damage(
                        entry.position as u64,
                        format!("index entry for offset {named} names no batch starting there"),
                    ));
                    return false;
                }
            }
            expected = header.next_offset();
            end = position + header.total_len() as u64;
            visit(header);
            true
        })?;
        if let Some(fault) = fault.or(stop.map(|s| damage(s.position, s.reason))) {
            return Err(fault.into_io());
        }
        if let Some(entry) = entries.next() {
            let reason = "index entry past the last batch".to_string();
            return Err(damage(entry.position as u64, reason).into_io());
        }
        if end != self.size || expected != self.next_offset {
            let reason = format!(
                "batches end at offset {expected}, position {end}; the segment ends at {}, {}",
                self.next_offset, self.size
            );
            return Err(damage(end, reason).into_io());
        }
        Ok(())
    }

    /// Index bookkeeping for a batch that now sits at `position`.
    fn index_batch(&mut self, position: u64, header: &BatchHeader) -> io::Result<()> {
        let relative = (header.base_offset - self.base_offset) as u32;
        // Position 0 needs no entry: a lookup that finds none starts there.
        if position > 0 && self.bytes_since_index >= self.index_interval {
            self.offset_index.append(OffsetEntry {
                relative_offset: relative,
                position: position as u32,
            })?;
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += header.total_len() as u64;
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.time_index.maybe_append(TimeEntry {
                timestamp: header.max_timestamp,
                relative_offset: (header.last_offset() - self.base_offset) as u32,
            })?;
        }
        Ok(())
    }

    /// Appends one batch whose base offset has already been set to `self.next_offset()` (or,
    /// in a segment the cleaner writes, to any later offset).
    pub fn append(&mut self, bytes: &[u8], header: &BatchHeader) -> io::Result<()> {
        assert!(
            self.follows(header.base_offset, self.next_offset),
            "offsets must be contiguous (batch at {}, segment end {})",
            header.base_offset,
            self.next_offset
        );
        assert_eq!(header.total_len(), bytes.len());
        let position = self.size;
        self.log.write_at(position, bytes)?;
        self.index_batch(position, header)?;
        self.size += bytes.len() as u64;
        self.next_offset = header.next_offset();
        Ok(())
    }

    /// Position of the first batch holding an offset at or after `offset`, and that batch's
    /// header; `None` if no batch in this segment holds such an offset.
    fn locate(&self, offset: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        let relative = (offset.max(self.base_offset) - self.base_offset) as u32;
        let entry = self.offset_index.lookup(relative);
        #[cfg(any(madsim, test))]
        let entry = match self.lookup_past_target {
            true => self.offset_index.lookup_past_target(relative),
            false => entry,
        };
        let position = entry.map(|e| e.position as u64).unwrap_or(0);
        // Offsets must follow on from batch to batch: a lost or misdirected write shows up as a
        // jump, and serving past it would hand out records out of order.
        let expected = self.base_offset + entry.map(|e| e.relative_offset as i64).unwrap_or(0);
        // The walk reads the file a chunk at a time, not one header at a time: from an index
        // entry it passes up to `index.interval.bytes` of batches, and in the simulator each
        // header read was a locked call into the disk (most of a fetch's cost).
        // A batch start an earlier walk or read reached (see `resume`): a walk for an offset at
        // or past it starts there when that is no earlier than the index entry. Everything a
        // reader is served is still checked where it is read (`read` checks every batch's CRC
        // and that offsets follow on); what is skipped is re-parsing the headers before it,
        // which a walk parsed when it passed them. Damage met from there (it cannot come from a
        // cut: `truncate_to` and `rebuild` forget the place) sends the walk back to the index
        // entry, which reports it as before.
        let resume = self
            .resume
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .nearest(offset, position, self.size);
        if let Some((from_offset, from)) = resume {
            match self.walk_buffered(offset, from, from_offset) {
                Err(e) if Damage::of(&e).is_some() => self.forget_resume(),
                found => return found,
            }
        }
        self.walk_buffered(offset, position, expected)
    }

    /// [`Segment::walk`] through the thread's chunk buffer: not a fresh zeroed array per call
    /// (a fetch locates on every read); only the bytes just read are looked at.
    fn walk_buffered(
        &self,
        offset: i64,
        position: u64,
        expected: i64,
    ) -> io::Result<Option<(u64, BatchHeader)>> {
        LOCATE_BUFFER.with(|buffer| {
            let mut chunk = buffer.borrow_mut();
            self.walk(offset, position, expected, &mut chunk[..])
        })
    }

    /// Remembers that the batch at `position` starts at `offset` or, in a segment with gaps,
    /// at the first offset present at or after it (see `resume`).
    fn remember_resume(&self, offset: i64, position: u64) {
        self.resume
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remember(offset, position);
    }

    fn forget_resume(&self) {
        *self.resume.lock().unwrap_or_else(|e| e.into_inner()) = Resume::default();
    }

    /// [`Segment::locate`]'s walk from `position` (where batch `expected` starts) through
    /// `chunk`-sized reads.
    fn walk(
        &self,
        offset: i64,
        mut position: u64,
        mut expected: i64,
        chunk: &mut [u8],
    ) -> io::Result<Option<(u64, BatchHeader)>> {
        let (mut chunk_start, mut chunk_len) = (position, 0usize);
        while position < self.size {
            let in_chunk = (position - chunk_start) as usize;
            if in_chunk + HEADER_LEN > chunk_len {
                let want = ((self.size - position) as usize).clamp(HEADER_LEN, LOCATE_CHUNK);
                chunk_len = read_up_to(self.log.as_ref(), position, &mut chunk[..want])?;
                chunk_start = position;
                if chunk_len < HEADER_LEN {
                    // The file ends inside this header: the exact read reports it as before.
                    let mut raw = [0u8; HEADER_LEN];
                    read_exact_at(self.log.as_ref(), position, &mut raw)?;
                    chunk[..HEADER_LEN].copy_from_slice(&raw);
                    chunk_len = HEADER_LEN;
                }
            }
            let at = (position - chunk_start) as usize;
            let raw = &chunk[at..at + HEADER_LEN];
            let damaged = |reason: String| {
                Damage {
                    segment: self.base_offset,
                    position,
                    reason,
                }
                .into_io()
            };
            let header = BatchHeader::parse(raw).map_err(|e| damaged(e.to_string()))?;
            if !self.follows(header.base_offset, expected) {
                return Err(damaged(format!(
                    "batch at offset {} where {expected} was expected",
                    header.base_offset
                )));
            }
            if header.last_offset() >= offset {
                self.remember_resume(header.base_offset, position);
                return Ok(Some((position, header)));
            }
            expected = header.next_offset();
            position += header.total_len() as u64;
        }
        // Past the last batch: the next one appended starts here. (A walk that overshot the end,
        // a damaged length, leaves nothing to remember.)
        if position == self.size {
            self.remember_resume(expected, position);
        }
        Ok(None)
    }

    /// Reads whole batches starting with the one that holds `offset`, up to `max_bytes` (but at
    /// least one batch), never including a batch that ends at or past `upper_bound`. Every batch
    /// returned has a valid CRC: corruption at rest is an error, never data.
    /// `verify` is always true outside a planted-bug simulation run.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        upper_bound: i64,
        verify: bool,
    ) -> io::Result<Bytes> {
        let Some((start, first)) = self.locate(offset)? else {
            return Ok(Bytes::new());
        };
        if first.last_offset() >= upper_bound {
            return Ok(Bytes::new());
        }
        let available = (self.size - start) as usize;
        let want = max_bytes.max(first.total_len()).min(available);
        let mut buf = BytesMut::zeroed(want);
        read_exact_at(self.log.as_ref(), start, &mut buf)?;
        let mut keep = 0usize;
        let mut expected = first.base_offset;
        while keep < buf.len() {
            let rest = &buf[keep..];
            let item = if verify {
                batch::check(rest)
            } else {
                BatchHeader::parse(rest).and_then(|h| match h.total_len() <= rest.len() {
                    true => Ok(h),
                    false => Err(BatchError::Truncated {
                        have: rest.len(),
                        need: h.total_len(),
                    }),
                })
            };
            match item {
                // A jump in offsets after the first batch: serve what precedes it; the next
                // read starts at the jump and reports the damage.
                Ok(header) if !self.follows(header.base_offset, expected) && verify => break,
                Ok(header) => {
                    if header.last_offset() >= upper_bound {
                        break;
                    }
                    keep += header.total_len();
                    expected = header.next_offset();
                }
                Err(BatchError::Truncated { .. }) => break,
                Err(e) if keep == 0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("segment {} at position {start}: {e}", self.base_offset),
                    ))
                }
                Err(_) => break,
            }
        }
        // The next batch (if any) starts where the kept ones end, each checked above: the next
        // read (a follower's, at the offset after them) starts its walk there.
        self.remember_resume(expected, start + keep as u64);
        buf.truncate(keep);
        Ok(buf.freeze())
    }

    /// Writes the bytes from the batch holding `offset` to the end back over themselves, so the
    /// page cache holds them as dirty pages again (see `Log::make_recovered_tail_durable`).
    pub fn rewrite_from(&mut self, offset: i64) -> io::Result<()> {
        let Some((start, _)) = self.locate(offset)? else {
            return Ok(());
        };
        let mut position = start;
        // No bigger than what is rewritten: the tail is usually a few batches, and a zeroed
        // chunk of SCAN_CHUNK for each was most of a recovery's work in the simulator.
        let mut chunk = vec![0u8; (self.size.saturating_sub(position) as usize).min(SCAN_CHUNK)];
        while position < self.size {
            let n = ((self.size - position) as usize).min(SCAN_CHUNK);
            read_exact_at(self.log.as_ref(), position, &mut chunk[..n])?;
            self.log.write_at(position, &chunk[..n])?;
            position += n as u64;
        }
        assert_eq!(position, self.size.max(start));
        Ok(())
    }

    /// The first record at or after `timestamp` in this segment: (offset, its timestamp).
    pub fn find_by_timestamp(&self, timestamp: i64) -> io::Result<Option<(i64, i64)>> {
        if self.max_timestamp < timestamp {
            return Ok(None);
        }
        let start_relative = self.time_index.lookup(timestamp);
        let start = match self.locate(self.base_offset + start_relative as i64)? {
            Some((position, _)) => position,
            None => return Ok(None),
        };
        let mut found = None;
        self.scan(start, |_, header, bytes| {
            if header.max_timestamp < timestamp {
                return true;
            }
            found = match batch::records(bytes, header) {
                Some(Ok(records)) => records
                    .iter()
                    .find(|r| r.timestamp >= timestamp)
                    .map(|r| (r.offset, r.timestamp)),
                Some(Err(_)) => Some((header.base_offset, header.max_timestamp)),
                // Compressed or LogAppendTime: the batch is the finest grain we know.
                None => Some((header.base_offset, header.max_timestamp)),
            };
            found.is_none()
        })?;
        Ok(found)
    }

    /// The header of the batch holding `offset` (or the first after it), if any.
    pub fn batch_at(&self, offset: i64) -> io::Result<Option<BatchHeader>> {
        Ok(self.locate(offset)?.map(|(_, h)| h))
    }

    /// Drops every batch holding an offset at or after `offset`. A batch is never split: when
    /// `offset` falls inside one, that whole batch goes too (as Kafka's `LogSegment.truncateTo`),
    /// so the segment may end before `offset`. Returns the new end.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<i64> {
        let Some((position, header)) = self.locate(offset)? else {
            return Ok(self.next_offset);
        };
        let cut = header.base_offset;
        self.log.set_len(position)?;
        self.size = position;
        self.offset_index.truncate_to_position(position)?;
        self.time_index
            .truncate_to_offset((cut - self.base_offset) as u32)?;
        self.next_offset = cut;
        // Recompute the running max timestamp from what is left.
        let mut max_ts = -1;
        self.scan(0, |_, h, _| {
            max_ts = max_ts.max(h.max_timestamp);
            true
        })?;
        self.max_timestamp = max_ts;
        self.bytes_since_index = self.index_interval;
        // The batches from the cut on are gone; later appends may put others where they were.
        self.forget_resume();
        Ok(cut)
    }

    /// The first batch's max timestamp, -1 when empty (`max.compaction.lag.ms` uses it).
    pub fn first_batch_timestamp(&self) -> io::Result<i64> {
        if self.size < HEADER_LEN as u64 {
            return Ok(-1);
        }
        let mut raw = [0u8; HEADER_LEN];
        read_exact_at(self.log.as_ref(), 0, &mut raw)?;
        Ok(BatchHeader::parse(&raw)
            .map(|h| h.max_timestamp)
            .unwrap_or(-1))
    }

    /// The log file, for a reader that works on a snapshot of the segment (the cleaner).
    pub fn log_file(&self) -> &Arc<dyn File> {
        &self.log
    }

    pub fn remove_files(disk: &dyn Disk, dir: &Path, base_offset: i64) -> io::Result<()> {
        for path in Self::paths(dir, base_offset) {
            match disk.remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// The files an fsync of this segment must cover.
    pub fn files(&self) -> [Arc<dyn File>; 3] {
        [
            self.log.clone(),
            self.offset_index.file().clone(),
            self.time_index.file().clone(),
        ]
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    pub fn created_ms(&self) -> i64 {
        self.created_ms
    }
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

/// Reads from `pos` until `buf` is full or the file ends; how many bytes it read.
fn read_up_to(file: &dyn File, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(pos + done as u64, &mut buf[done..])?;
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

/// Calls `visit(position, header, bytes)` for each good batch of `file` in `[start, end)` until it
/// returns false or the data ends. Returns where and why it stopped if a batch was bad or torn.
pub fn scan_file(
    file: &dyn File,
    start: u64,
    end: u64,
    mut visit: impl FnMut(u64, &BatchHeader, &[u8]) -> bool,
) -> io::Result<Option<ScanStop>> {
    let mut position = start;

    while position < end {
        let want = ((end - position) as usize).min(SCAN_CHUNK);
        let mut chunk = vec![0u8; want];
        read_exact_at(file, position, &mut chunk)?;
        let mut consumed = 0usize;
        let mut need_more = None;
        for item in batch::iter(&chunk) {
            match item {
                Ok((at, header)) => {
                    if !visit(
                        position + at as u64,
                        &header,
                        &chunk[at..at + header.total_len()],
                    ) {
                        return Ok(None);
                    }
                    consumed = at + header.total_len();
                }
                Err(BatchError::Truncated { need, .. })
                    if position + consumed as u64 + (need as u64) <= end
                        && chunk.len() < end as usize - position as usize =>
                {
                    // The batch runs past this chunk but not past the file: read on.
                    need_more = Some(need);
                }
                Err(e) => {
                    return Ok(Some(ScanStop {
                        position: position + consumed as u64,
                        reason: e.to_string(),
                    }));
                }
            }
        }
        if consumed == 0 {
            // A single batch bigger than the chunk: read exactly that batch next round.
            let need = need_more.unwrap_or(HEADER_LEN);
            let mut big = vec![0u8; need];
            read_exact_at(file, position, &mut big)?;
            match batch::check(&big) {
                Ok(header) => {
                    if !visit(position, &header, &big) {
                        return Ok(None);
                    }
                    position += header.total_len() as u64;
                }
                Err(e) => {
                    return Ok(Some(ScanStop {
                        position,
                        reason: e.to_string(),
                    }))
                }
            }
            continue;
        }
        position += consumed as u64;
    }
    Ok(None)
}
