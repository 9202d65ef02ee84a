//! Damage behind trusted indexes (found by the `log_recovery` fuzz target): a clean shutdown
//! and its checkpoint let open trust a segment whose middle holds a batch out of sequence. Every
//! walk at open that meets it must recover the segment (cut at the damage), never refuse the
//! open, and keep everything before the damage and everything appended after the cut.

use std::path::Path;
use std::sync::Arc;

use super::batch::{self, testing::batch};
use super::leader_epochs::CHECKPOINT_FILE as EPOCH_FILE;
use super::*;
use crate::io::memdisk::{block_on, MemDisk};
use crate::io::OpenMode;

const DIR: &str = "/data/topic-0";

/// Index entries every two batches of the ones [`filled`] writes, in one segment.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        segment_ms: i64::MAX,
        index_interval_bytes: 128,
        planted: Default::default(),
    }
}

fn open(disk: &MemDisk) -> io::Result<(Log, Recovery)> {
    block_on(Log::open(
        Arc::new(disk.clone()),
        Path::new(DIR),
        config(),
        0,
    ))
}

fn append(log: &mut Log, value: &[u8], epoch: i32) {
    let mut bytes = batch(&[value, b"second"], 5, None);
    batch::set_partition_leader_epoch(&mut bytes, epoch);
    let mut header = batch::check(&bytes).unwrap();
    log.append(&mut bytes, std::slice::from_mut(&mut header), 5)
        .unwrap();
}

/// Ten batches of two records (offsets 0..20), epoch 0 and from offset 10 epoch 1, closed
/// cleanly (marker, recovery point 20, epoch checkpoint). Returns each batch's file position.
fn filled(disk: &MemDisk) -> Vec<u64> {
    let (mut log, _) = open(disk).unwrap();
    for i in 0..10 {
        append(&mut log, format!("v{i}").as_bytes(), (i >= 5) as i32);
    }
    let mut positions = Vec::new();
    let seg = log.segments.values().next().unwrap();
    seg.scan(0, |position, _, _| {
        positions.push(position);
        true
    })
    .unwrap();
    block_on(log.close(0)).unwrap();
    positions
}

/// Rewrites the base offset of the batch at `position`: outside the CRC, so the batch stays
/// CRC-valid but no longer follows on (the fuzz input's 12884901896 where 8 was expected).
fn misnumber(disk: &MemDisk, position: u64) {
    let path = Path::new(DIR).join(segment::file_name(0, "log"));
    let file = disk.open(&path, OpenMode::ReadWrite).unwrap();
    file.write_at(position, &12_884_901_896i64.to_be_bytes())
        .unwrap();
}

fn index_entries(disk: &MemDisk) -> usize {
    let path = Path::new(DIR).join(segment::file_name(0, "index"));
    disk.file_contents(&path).unwrap().len() / index::OFFSET_ENTRY
}

/// Every batch from the start: (base offset, first record value).
fn contents(log: &Log) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    while offset < log.end_offset() {
        let data = log.read(offset, 1 << 16, i64::MAX).unwrap();
        assert!(!data.is_empty(), "no data at {offset}");
        for item in batch::iter(&data) {
            let (at, header) = item.unwrap();
            assert_eq!(header.base_offset, offset, "offsets follow on");
            let records = batch::records(&data[at..at + header.total_len()], &header);
            let value = records.unwrap().unwrap()[0].value.unwrap().to_vec();
            out.push((offset, value));
            offset = header.next_offset();
        }
    }
    out
}

/// The cut is at the damaged batch (offset 8), the log reads back whole up to it, and an
/// append there survives a clean close and an unclean stop.
fn check_cut_at_eight(disk: &MemDisk, mut log: Log, recovery: &Recovery) {
    assert_eq!(log.end_offset(), 8, "cut at the damaged batch");
    assert_eq!(recovery.truncated_at.as_ref().map(|t| t.0), Some(0));
    assert_eq!(log.recovery_point(), 8);
    let before: Vec<_> = (0..4)
        .map(|i| (2 * i, format!("v{i}").into_bytes()))
        .collect();
    assert_eq!(contents(&log), before, "nothing before the damage is lost");
    append(&mut log, b"after", 2);
    block_on(log.close(0)).unwrap();
    drop(log);
    let (log, recovery) = open(disk).unwrap();
    assert!(recovery.clean);
    assert_eq!(log.end_offset(), 10);
    assert_eq!(contents(&log)[4], (8, b"after".to_vec()));
    drop(log);
    disk.process_crash();
    let (log, _) = open(disk).unwrap();
    assert_eq!(
        log.end_offset(),
        10,
        "the append survives an unclean start too"
    );
}

/// The fuzz input itself: no epoch checkpoint, so open rebuilds the epochs from every header
/// of the trusted segment and meets the damage (before the fix that walk skipped it, the log
/// ended at 20 with offsets 8.. unreadable, and the next clean open refused the log).
#[test]
fn damage_met_by_the_epoch_rebuild_recovers_the_trusted_segment() {
    let disk = MemDisk::new(21);
    let positions = filled(&disk);
    assert!(
        index_entries(&disk) >= 3,
        "the damage lies between index entries"
    );
    disk.remove_file(&Path::new(DIR).join(EPOCH_FILE)).unwrap();
    misnumber(&disk, positions[4]);
    let (log, recovery) = open(&disk).unwrap();
    assert!(recovery.clean, "the segment was trusted");
    check_cut_at_eight(&disk, log, &recovery);
}

/// With the epoch checkpoint, open checks its entry for epoch 1 at offset 10 with an index
/// lookup that walks through the damaged batch: that refused the open before the fix.
#[test]
fn damage_met_by_an_index_lookup_at_open_recovers_the_trusted_segment() {
    let disk = MemDisk::new(22);
    let positions = filled(&disk);
    misnumber(&disk, positions[4]);
    let (log, recovery) = open(&disk).unwrap();
    assert!(recovery.clean);
    assert_eq!(log.latest_epoch(), 0, "epoch 1 started after the cut");
    check_cut_at_eight(&disk, log, &recovery);
}

/// Damage no walk at open reaches stays until one does: then `repairing` recovers the segment
/// and writes a checkpoint at the cut, so a later unclean start scans what follows it.
#[test]
fn damage_met_by_a_later_walk_at_open_is_repaired() {
    let disk = MemDisk::new(23);
    let positions = filled(&disk);
    // Damage after epoch 1's start: no walk at open passes it.
    misnumber(&disk, positions[6]);
    let (mut log, mut recovery) = open(&disk).unwrap();
    assert_eq!(log.end_offset(), 20, "trusted as it was closed");
    assert!(log.batch_at(13).is_err(), "the lookup meets the damage");
    let found = block_on(log.repairing(&mut recovery, 0, |log| log.batch_at(13))).unwrap();
    assert_eq!(found, None, "nothing at or after 12 is left");
    assert_eq!(log.end_offset(), 12);
    assert_eq!(log.recovery_point(), 12);
    assert_eq!(
        read_checkpoint(&disk, Path::new(DIR)),
        Ok(Some(12)),
        "the checkpoint no longer vouches for offsets past the cut"
    );
    assert_eq!(
        recovery.truncated_at.as_ref().map(|t| t.1),
        Some(positions[6])
    );
    assert_eq!(contents(&log).len(), 6);
    // Appends after the cut (enough for more index entries), then an unclean stop: the
    // checkpoint no longer vouches for them, so the restart scans and keeps them.
    for i in 0..6 {
        append(&mut log, format!("new{i}").as_bytes(), 2);
    }
    let plan = log.flush_plan();
    block_on(Log::sync_files(&plan)).unwrap();
    drop(log);
    disk.process_crash();
    let (log, recovery) = open(&disk).unwrap();
    assert!(!recovery.clean);
    assert_eq!(recovery.truncated_at, None);
    assert_eq!(log.end_offset(), 24);
    assert_eq!(contents(&log)[11], (22, b"new5".to_vec()));
}

/// An index entry that points into the middle of a batch is damage of the index alone: the
/// repair rebuilds it and loses no batch.
#[test]
fn a_misplaced_index_entry_costs_no_data() {
    let disk = MemDisk::new(24);
    filled(&disk);
    disk.remove_file(&Path::new(DIR).join(EPOCH_FILE)).unwrap();
    let path = Path::new(DIR).join(segment::file_name(0, "index"));
    let file = disk.open(&path, OpenMode::ReadWrite).unwrap();
    // The first entry's position, one byte on.
    let mut raw = [0u8; 4];
    crate::io::read_exact_at(file.as_ref(), 4, &mut raw).unwrap();
    let moved = u32::from_be_bytes(raw) + 1;
    file.write_at(4, &moved.to_be_bytes()).unwrap();
    let (log, recovery) = open(&disk).unwrap();
    assert_eq!(recovery.truncated_at, None);
    assert_eq!(recovery.segments_scanned, 1, "the segment was recovered");
    assert_eq!(log.end_offset(), 20);
    assert_eq!(contents(&log).len(), 10);
}
