//! One file's bytes as the OS shows them (`current`, the page cache) and as they are on the
//! medium (`durable`), with what separates the two: the dirty pages and the size changes not yet
//! written back. Writeback is by page, in any order, so power loss can leave any subset of the
//! dirty pages on the medium, each whole, missing, or torn at a sector boundary.

use std::collections::BTreeSet;

use super::Prng;

/// The page cache's unit of writeback.
pub const PAGE: usize = 4096;
/// The medium's unit of atomic write: a torn page lands a whole number of these.
pub const SECTOR: usize = 512;
const SECTORS_PER_PAGE: u64 = (PAGE / SECTOR) as u64;

/// Size changes remembered between two writebacks. Power loss picks one of them (or the durable
/// size); beyond this many, the oldest are forgotten, which only narrows the choice.
const MAX_PENDING_LENGTHS: usize = 64;

#[derive(Default)]
pub struct FileImage {
    pub current: Vec<u8>,
    pub durable: Vec<u8>,
    /// Pages changed in `current` since they were last written back, by page index.
    dirty: BTreeSet<usize>,
    /// Sizes the file has had since its size last reached the medium, oldest first.
    lengths: Vec<usize>,
}

/// What a failed fsync did to the pages it could not write (Linux may do either).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncFailure {
    /// The pages stay dirty: a later fsync can still write them.
    Kept,
    /// The pages are marked clean without reaching the medium: the page cache still shows
    /// them, a later fsync succeeds without writing them, and power loss takes them back.
    Dropped,
}

impl FileImage {
    fn mark_dirty(&mut self, start: usize, end: usize) {
        if start >= end {
            return;
        }
        for page in start / PAGE..=(end - 1) / PAGE {
            self.dirty.insert(page);
        }
    }

    fn note_length(&mut self, len: usize) {
        if self.lengths.last() == Some(&len) {
            return;
        }
        if self.lengths.len() == MAX_PENDING_LENGTHS {
            self.lengths.remove(0);
        }
        self.lengths.push(len);
    }

    pub fn write(&mut self, pos: usize, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let end = pos + bytes.len();
        if self.current.len() < end {
            self.current.resize(end, 0);
            self.note_length(end);
        }
        self.current[pos..end].copy_from_slice(bytes);
        self.mark_dirty(pos, end);
    }

    pub fn set_len(&mut self, len: usize) {
        let old = self.current.len();
        self.current.resize(len, 0);
        // The bytes between the two sizes changed (dropped, or zero-filled): their pages are
        // dirty, so power loss may bring the old bytes back.
        self.mark_dirty(old.min(len), old.max(len));
        self.note_length(len);
    }

    /// A successful fsync: the dirty pages and the size reach the medium. Pages dropped by an
    /// earlier failed fsync are not dirty, so they are not written now either.
    pub fn write_back(&mut self) {
        let len = self.current.len();
        self.durable.resize(len, 0);
        for &page in &self.dirty {
            let start = page * PAGE;
            if start >= len {
                continue;
            }
            let end = (start + PAGE).min(len);
            self.durable[start..end].copy_from_slice(&self.current[start..end]);
        }
        self.dirty.clear();
        self.lengths.clear();
    }

    /// A failed fsync. Returns how many dirty pages were dropped.
    pub fn fail_sync(&mut self, failure: SyncFailure) -> u64 {
        match failure {
            SyncFailure::Kept => 0,
            SyncFailure::Dropped => {
                let dropped = self.dirty.len() as u64;
                self.dirty.clear();
                dropped
            }
        }
    }

    /// Whether everything the OS shows is on the medium.
    pub fn is_synced(&self) -> bool {
        self.current == self.durable
    }

    /// The power failed: the medium keeps its durable bytes, one of the pending sizes (or the
    /// durable one), and some of the dirty pages, each whole, missing, or torn (a prefix of its
    /// sectors). A quarter of the time no page lands, a quarter of the time all do.
    pub fn power_loss(&mut self, rng: &mut Prng) {
        if self.dirty.is_empty() && self.lengths.is_empty() {
            self.current.clone_from(&self.durable);
            return;
        }
        let choices = self.lengths.len() as u64 + 1;
        let pick = rng.below(choices) as usize;
        let len = if pick == 0 {
            self.durable.len()
        } else {
            self.lengths[pick - 1]
        };
        let mut medium = std::mem::take(&mut self.durable);
        medium.resize(len, 0);
        let mode = rng.below(4);
        for &page in &self.dirty {
            let start = page * PAGE;
            if start >= len {
                continue;
            }
            let sectors = match mode {
                0 => 0,
                1 => SECTORS_PER_PAGE,
                _ => match rng.below(3) {
                    0 => 0,
                    1 => SECTORS_PER_PAGE,
                    _ => 1 + rng.below(SECTORS_PER_PAGE - 1),
                },
            };
            let end = (start + sectors as usize * SECTOR).min(len);
            for (i, byte) in medium[start..end].iter_mut().enumerate() {
                // Past the page cache's end the page holds zeros.
                *byte = self.current.get(start + i).copied().unwrap_or(0);
            }
        }
        self.current.clone_from(&medium);
        self.durable = medium;
        self.dirty.clear();
        self.lengths.clear();
    }

    /// Bit rot at rest: the byte changes on the medium and in the page cache alike.
    pub fn flip(&mut self, offset: usize, mask: u8) {
        self.current[offset] ^= mask;
        if let Some(byte) = self.durable.get_mut(offset) {
            *byte ^= mask;
        }
    }
}
