//! The `log_recovery` target: arbitrary files in a partition directory on a `MemDisk`, then
//! `Partition::open` (log recovery and the producer-state rebuild), reads, an append, a clean
//! close and a second open. It also runs the batch validator and record decoder over every
//! segment's bytes.
//!
//! Input: one flags byte, then pieces, each a big-endian u16 length and that many bytes (a
//! length past the end takes the rest). Flags: bit 0 writes the clean-shutdown marker; bit 1
//! takes a piece for `recovery-point`; bit 2 one for `producer-state`; bits 3–4 give the
//! number of segments less one; bit 5 takes an `.index` piece and bit 6 a `.timeindex` piece
//! after each segment's `.log` piece. A segment is named by the base offset its bytes start
//! with (as a real one is), made unique.
//!
//! What must hold, beyond "never panics": the open succeeds; every batch served has a valid
//! CRC and offsets that follow on; when nothing was trusted without a scan (no marker, no
//! checkpoint) the whole log reads back; an append lands at the log end and survives a clean
//! close and reopen.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir::io::memdisk::MemDisk;
use weir::io::{write_file_atomic, Disk, OpenMode};
use weir::log::batch::{self, BatchBuilder};
use weir::replica::Partition;

use crate::harness_io::block_on;

const DIR: &str = "/data/t-0";
/// Offsets beyond this are clamped, keeping file names and offset arithmetic ordinary.
const MAX_BASE: i64 = 1 << 40;

pub const CLEAN: u8 = 1;
pub const CHECKPOINT: u8 = 2;
pub const SNAPSHOT: u8 = 4;
pub const INDEX: u8 = 32;
pub const TIME_INDEX: u8 = 64;

/// The files an input describes: (file name, contents).
pub fn files(data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let Some((&flags, mut rest)) = data.split_first() else {
        return Vec::new();
    };
    let mut piece = || -> Vec<u8> {
        if rest.len() < 2 {
            rest = &[];
            return Vec::new();
        }
        let len = (u16::from_be_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        let out = rest[2..2 + len].to_vec();
        rest = &rest[2 + len..];
        out
    };
    let mut out = Vec::new();
    if flags & CLEAN != 0 {
        out.push(("clean-shutdown".to_string(), Vec::new()));
    }
    if flags & CHECKPOINT != 0 {
        out.push(("recovery-point".to_string(), piece()));
    }
    if flags & SNAPSHOT != 0 {
        out.push(("producer-state".to_string(), piece()));
    }
    let segments = 1 + ((flags >> 3) & 3) as usize;
    let mut bases: Vec<i64> = Vec::new();
    for i in 0..segments {
        let log = piece();
        let mut base = match log.get(..8) {
            Some(b) => i64::from_be_bytes(b.try_into().unwrap()).clamp(0, MAX_BASE),
            None => i as i64,
        };
        while bases.contains(&base) {
            base += 1;
        }
        bases.push(base);
        out.push((format!("{base:020}.log"), log));
        if flags & INDEX != 0 {
            out.push((format!("{base:020}.index"), piece()));
        }
        if flags & TIME_INDEX != 0 {
            out.push((format!("{base:020}.timeindex"), piece()));
        }
    }
    out
}

/// The input for a set of files (for the seed writer); the inverse of [`files`] for files in
/// its order.
pub fn input(flags: u8, pieces: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![flags];
    for p in pieces {
        assert!(p.len() <= u16::MAX as usize, "a seed piece is too large");
        out.extend_from_slice(&(p.len() as u16).to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn open(disk: &MemDisk) -> Partition {
    let config = weir::config::ServerConfig::default_single_node().topic_defaults;
    let open = Partition::open(
        Arc::new(disk.clone()),
        Path::new(DIR),
        "t",
        0,
        config,
        Default::default(),
        1_000,
    );
    match block_on(open) {
        Ok((partition, _)) => partition,
        Err(e) => panic!("recovery refused the log: {e}"),
    }
}

/// Reads from the log start to the high watermark; returns the offset reached. Panics if a
/// served batch is corrupt or out of sequence.
fn read_all(p: &Partition) -> i64 {
    let mut offset = p.log_start_offset();
    // Bounded: every round advances by at least one batch, and there are finitely many.
    for _ in 0..100_000 {
        if offset >= p.high_watermark() {
            return offset;
        }
        let Ok(data) = p.read(offset, 1 << 16) else {
            return offset;
        };
        if data.is_empty() {
            return offset;
        }
        let mut at = 0;
        for item in batch::iter(&data) {
            let (position, header) = item.expect("a served batch is valid");
            assert_eq!(position, at);
            assert!(header.base_offset <= offset.max(header.base_offset));
            assert!(header.next_offset() > offset, "no progress at {offset}");
            if at > 0 {
                assert_eq!(header.base_offset, offset, "offsets follow on");
            }
            offset = header.next_offset();
            at += header.total_len();
        }
        assert_eq!(at, data.len(), "only whole batches are served");
    }
    panic!("read did not reach the end");
}

/// The validator and decoder over raw bytes: whatever they say, they must not panic.
fn validate(bytes: &[u8]) {
    for (at, header) in batch::iter(bytes).map_while(Result::ok) {
        let whole = &bytes[at..at + header.total_len()];
        if let Some(Ok(records)) = batch::records(whole, &header) {
            assert!(records.len() <= header.record_count.max(0) as usize);
        }
    }
    let _ = batch::BatchHeader::parse(bytes);
}

pub fn run(data: &[u8]) {
    let disk = MemDisk::new(11);
    let dir = PathBuf::from(DIR);
    disk.create_dir_all(&dir).unwrap();
    let files = files(data);
    let trusted = files
        .iter()
        .any(|(n, _)| n == "clean-shutdown" || n == "recovery-point");
    for (name, contents) in &files {
        if name.ends_with(".log") {
            validate(contents);
        }
        let file = disk.open(&dir.join(name), OpenMode::Create).unwrap();
        file.write_at(0, contents).unwrap();
    }
    let mut p = open(&disk);
    let reached = read_all(&p);
    if !trusted {
        assert_eq!(
            reached,
            p.log_end_offset(),
            "a fully scanned log reads back whole"
        );
    }
    let end = p.log_end_offset();
    let mut b = BatchBuilder::new(2_000);
    b.push(Some(b"k"), Some(b"after recovery"), 2_000);
    let appended = p
        .append(&b.finish(-1, -1, -1), 2_000)
        .expect("append after recovery");
    assert_eq!(appended.base_offset, end);
    let (snapshot_path, snapshot) = p.producer_snapshot();
    block_on(write_file_atomic(&disk, &snapshot_path, &snapshot)).unwrap();
    block_on(p.log_mut().close(3_000)).expect("clean close");
    drop(p);
    let p = open(&disk);
    assert_eq!(
        p.log_end_offset(),
        end + 1,
        "the append survived a clean close"
    );
    let tail = p.read(end, 1 << 16).expect("the appended batch reads back");
    let header = batch::check(&tail).expect("the appended batch is valid");
    assert_eq!(header.base_offset, end);
}
