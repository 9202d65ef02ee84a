//! Sparse indexes of a segment, kept in memory and mirrored to disk so a clean start need not
//! scan the log. The offset index maps a relative offset to the file position of the batch that
//! starts there; the time index maps the segment's running max timestamp to the relative offset
//! of the batch that reached it. Entries are appended every `index.interval.bytes` of log.
//!
//! On disk (big endian): offset index entries are (relative offset u32, position u32); time index
//! entries are (timestamp i64, relative offset u32). A file that is torn or inconsistent with its
//! segment is rebuilt by scanning the segment.

use std::io;
use std::sync::Arc;

use crate::io::{read_exact_at, File};

pub const OFFSET_ENTRY: usize = 8;
pub const TIME_ENTRY: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

pub struct OffsetIndex {
    file: Arc<dyn File>,
    entries: Vec<OffsetEntry>,
}

impl OffsetIndex {
    pub fn empty(file: Arc<dyn File>) -> io::Result<OffsetIndex> {
        file.set_len(0)?;
        Ok(OffsetIndex {
            file,
            entries: Vec::new(),
        })
    }

    /// Loads the index file; `None` if it is torn or does not fit a segment of `segment_size`.
    pub fn load(file: Arc<dyn File>, segment_size: u64) -> io::Result<Option<OffsetIndex>> {
        let len = file.len()? as usize;
        if !len.is_multiple_of(OFFSET_ENTRY) {
            return Ok(None);
        }
        let mut raw = vec![0u8; len];
        read_exact_at(file.as_ref(), 0, &mut raw)?;
        let mut entries = Vec::with_capacity(len / OFFSET_ENTRY);
        for chunk in raw.chunks_exact(OFFSET_ENTRY) {
            let entry = OffsetEntry {
                relative_offset: u32::from_be_bytes(chunk[0..4].try_into().unwrap()),
                position: u32::from_be_bytes(chunk[4..8].try_into().unwrap()),
            };
            let ordered = entries.last().is_none_or(|last: &OffsetEntry| {
                last.relative_offset < entry.relative_offset && last.position < entry.position
            });
            if !ordered || entry.position as u64 >= segment_size {
                return Ok(None);
            }
            entries.push(entry);
        }
        Ok(Some(OffsetIndex { file, entries }))
    }

    pub fn append(&mut self, entry: OffsetEntry) -> io::Result<()> {
        if let Some(last) = self.entries.last() {
            assert!(last.relative_offset < entry.relative_offset);
            assert!(last.position < entry.position);
        }
        let mut raw = [0u8; OFFSET_ENTRY];
        raw[0..4].copy_from_slice(&entry.relative_offset.to_be_bytes());
        raw[4..8].copy_from_slice(&entry.position.to_be_bytes());
        self.file
            .write_at((self.entries.len() * OFFSET_ENTRY) as u64, &raw)?;
        self.entries.push(entry);
        Ok(())
    }

    /// The last entry at or below `relative_offset`: where to start scanning for it.
    pub fn lookup(&self, relative_offset: u32) -> Option<OffsetEntry> {
        let idx = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        idx.checked_sub(1).map(|i| self.entries[i])
    }

    /// Planted `index-lookup-past-target`: the first entry after `relative_offset` (if any)
    /// instead of the last one at or below it.
    #[cfg(any(madsim, test))]
    pub fn lookup_past_target(&self, relative_offset: u32) -> Option<OffsetEntry> {
        let idx = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        match self.entries.get(idx) {
            Some(past) => Some(*past),
            None => self.lookup(relative_offset),
        }
    }

    /// Drops entries for positions at or past `position` (the segment was truncated there).
    pub fn truncate_to_position(&mut self, position: u64) -> io::Result<()> {
        let keep = self
            .entries
            .partition_point(|e| (e.position as u64) < position);
        self.entries.truncate(keep);
        self.file.set_len((keep * OFFSET_ENTRY) as u64)
    }

    pub fn file(&self) -> &Arc<dyn File> {
        &self.file
    }

    /// An index with no entries that leaves its file alone (replaced before use).
    pub fn empty_in_memory(file: Arc<dyn File>) -> OffsetIndex {
        OffsetIndex {
            file,
            entries: Vec::new(),
        }
    }

    pub fn last(&self) -> Option<OffsetEntry> {
        self.entries.last().copied()
    }

    pub fn entries(&self) -> &[OffsetEntry] {
        &self.entries
    }
}

pub struct TimeIndex {
    file: Arc<dyn File>,
    entries: Vec<TimeEntry>,
}

impl TimeIndex {
    pub fn empty(file: Arc<dyn File>) -> io::Result<TimeIndex> {
        file.set_len(0)?;
        Ok(TimeIndex {
            file,
            entries: Vec::new(),
        })
    }

    /// Loads the time index; `None` if torn or not ordered.
    pub fn load(file: Arc<dyn File>) -> io::Result<Option<TimeIndex>> {
        let len = file.len()? as usize;
        if !len.is_multiple_of(TIME_ENTRY) {
            return Ok(None);
        }
        let mut raw = vec![0u8; len];
        read_exact_at(file.as_ref(), 0, &mut raw)?;
        let mut entries = Vec::with_capacity(len / TIME_ENTRY);
        for chunk in raw.chunks_exact(TIME_ENTRY) {
            let entry = TimeEntry {
                timestamp: i64::from_be_bytes(chunk[0..8].try_into().unwrap()),
                relative_offset: u32::from_be_bytes(chunk[8..12].try_into().unwrap()),
            };
            let ordered = entries.last().is_none_or(|last: &TimeEntry| {
                last.timestamp < entry.timestamp && last.relative_offset < entry.relative_offset
            });
            if !ordered {
                return Ok(None);
            }
            entries.push(entry);
        }
        Ok(Some(TimeIndex { file, entries }))
    }

    /// Records that the running max timestamp reached `timestamp` at `relative_offset`; ignored
    /// unless the timestamp grew (the index is monotonic in both columns).
    pub fn maybe_append(&mut self, entry: TimeEntry) -> io::Result<()> {
        if let Some(last) = self.entries.last() {
            if entry.timestamp <= last.timestamp || entry.relative_offset <= last.relative_offset {
                return Ok(());
            }
        }
        let mut raw = [0u8; TIME_ENTRY];
        raw[0..8].copy_from_slice(&entry.timestamp.to_be_bytes());
        raw[8..12].copy_from_slice(&entry.relative_offset.to_be_bytes());
        self.file
            .write_at((self.entries.len() * TIME_ENTRY) as u64, &raw)?;
        self.entries.push(entry);
        Ok(())
    }

    /// The relative offset to start scanning from for the first record with a timestamp at or
    /// after `timestamp`: that of the last entry whose timestamp is below it.
    pub fn lookup(&self, timestamp: i64) -> u32 {
        let idx = self.entries.partition_point(|e| e.timestamp < timestamp);
        idx.checked_sub(1)
            .map(|i| self.entries[i].relative_offset)
            .unwrap_or(0)
    }

    pub fn empty_in_memory(file: Arc<dyn File>) -> TimeIndex {
        TimeIndex {
            file,
            entries: Vec::new(),
        }
    }

    pub fn last(&self) -> Option<TimeEntry> {
        self.entries.last().copied()
    }

    pub fn truncate_to_offset(&mut self, relative_offset: u32) -> io::Result<()> {
        let keep = self
            .entries
            .partition_point(|e| e.relative_offset < relative_offset);
        self.entries.truncate(keep);
        self.file.set_len((keep * TIME_ENTRY) as u64)
    }

    pub fn file(&self) -> &Arc<dyn File> {
        &self.file
    }
}
