//! The log's leader-epoch cache across appends, truncation, start-offset moves, clean and
//! unclean reopens, and a missing, damaged or stale checkpoint file.

use std::path::Path;
use std::sync::Arc;

use super::batch::{self, testing::batch};
use super::leader_epochs::{EpochEnd, EpochEntry, CHECKPOINT_FILE};
use super::*;
use crate::io::memdisk::{block_on, MemDisk};

const DIR: &str = "/data/topic-0";

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 512,
        segment_ms: i64::MAX,
        index_interval_bytes: 64,
        planted: Default::default(),
    }
}

fn open(disk: &MemDisk) -> (Log, Recovery) {
    block_on(Log::open(
        Arc::new(disk.clone()),
        Path::new(DIR),
        config(),
        0,
    ))
    .unwrap()
}

/// Appends a batch of `count` records stamped with `epoch`.
fn append(log: &mut Log, epoch: i32, count: usize) {
    let values: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("value-{i:04}").into_bytes())
        .collect();
    let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
    let mut bytes = batch(&refs, 1, None);
    batch::set_partition_leader_epoch(&mut bytes, epoch);
    let mut header = batch::check(&bytes).unwrap();
    log.append(&mut bytes, std::slice::from_mut(&mut header), 1)
        .unwrap();
}

fn pairs(log: &Log) -> Vec<(i32, i64)> {
    log.epochs()
        .entries()
        .iter()
        .map(|e: &EpochEntry| (e.epoch, e.start_offset))
        .collect()
}

/// Epoch 0 at 0..10, 2 at 10..25, 5 from 25 to 40, over several segments.
fn filled(disk: &MemDisk) -> Log {
    let (mut log, _) = open(disk);
    for (epoch, batches) in [(0, 2), (2, 3), (5, 3)] {
        for _ in 0..batches {
            append(&mut log, epoch, 5);
        }
    }
    assert!(log.segment_count() > 2);
    log
}

#[test]
fn appends_start_epochs_and_end_offset_for_answers() {
    let disk = MemDisk::new(1);
    let log = filled(&disk);
    assert_eq!(pairs(&log), vec![(0, 0), (2, 10), (5, 25)]);
    assert_eq!(
        log.end_offset_for_epoch(5),
        EpochEnd {
            epoch: 5,
            end_offset: 40
        }
    );
    assert_eq!(
        log.end_offset_for_epoch(3),
        EpochEnd {
            epoch: 2,
            end_offset: 25
        }
    );
    assert!(log.end_offset_for_epoch(6).is_undefined());
    // Batches without an epoch (the metadata log's) add nothing.
    let disk = MemDisk::new(2);
    let (mut log, _) = open(&disk);
    append(&mut log, -1, 3);
    assert!(log.epochs().is_empty());
}

#[test]
fn a_new_leader_records_its_epoch_at_the_log_end() {
    let disk = MemDisk::new(3);
    let mut log = filled(&disk);
    assert!(log.assign_epoch_start(7));
    assert_eq!(log.latest_epoch(), 7);
    assert_eq!(
        log.end_offset_for_epoch(5),
        EpochEnd {
            epoch: 5,
            end_offset: 40
        }
    );
    // Elected again before writing anything: the empty epoch 7 is replaced.
    assert!(log.assign_epoch_start(8));
    assert_eq!(pairs(&log), vec![(0, 0), (2, 10), (5, 25), (8, 40)]);
    assert!(!log.assign_epoch_start(6), "epochs never go back");
    append(&mut log, 8, 1);
    assert_eq!(pairs(&log).last(), Some(&(8, 40)));
}

#[test]
fn truncation_and_start_offset_move_the_cache() {
    let disk = MemDisk::new(4);
    let mut log = filled(&disk);
    log.truncate_to(25).unwrap();
    assert_eq!(pairs(&log), vec![(0, 0), (2, 10)]);
    // A cut inside a batch takes the whole batch.
    log.truncate_to(12).unwrap();
    assert_eq!(log.end_offset(), 10);
    assert_eq!(pairs(&log), vec![(0, 0)]);
    append(&mut log, 6, 5);
    append(&mut log, 6, 5);
    let write = log.start_offset_write(15);
    block_on(write.write()).unwrap();
    log.advance_start_offset(15).unwrap();
    assert_eq!(pairs(&log), vec![(6, 15)]);
}

#[test]
fn a_clean_reopen_trusts_the_file_and_a_missing_one_is_rebuilt() {
    let disk = MemDisk::new(5);
    let mut log = filled(&disk);
    let want = pairs(&log);
    block_on(log.close(0)).unwrap();
    drop(log);
    let file = Path::new(DIR).join(CHECKPOINT_FILE);
    assert_eq!(
        String::from_utf8(disk.file_contents(&file).unwrap()).unwrap(),
        "0\n3\n0 0\n2 10\n5 25\n"
    );
    let (log, _) = open(&disk);
    assert_eq!(pairs(&log), want);
    drop(log);
    disk.remove_file(&file).unwrap();
    let (log, _) = open(&disk);
    assert_eq!(pairs(&log), want);
}

#[test]
fn a_damaged_or_disagreeing_file_is_rebuilt_from_the_batches() {
    let disk = MemDisk::new(6);
    let mut log = filled(&disk);
    let want = pairs(&log);
    block_on(log.close(0)).unwrap();
    drop(log);
    let file = Path::new(DIR).join(CHECKPOINT_FILE);
    for bad in [
        "garbage",
        "0\n3\n0 0\n2 10\n",
        "0\n3\n0 0\n3 10\n5 25\n",
        "0\n2\n0 0\n2 11\n",
    ] {
        block_on(crate::io::write_file_atomic(&disk, &file, bad.as_bytes())).unwrap();
        disk.process_crash();
        let (log, _) = open(&disk);
        assert_eq!(pairs(&log), want, "file {bad:?}");
        drop(log);
    }
}

#[test]
fn an_unclean_reopen_rebuilds_what_came_after_the_checkpoint() {
    let disk = MemDisk::new(7);
    let mut log = filled(&disk);
    let plan = log.flush_plan();
    block_on(Log::sync_files(&plan)).unwrap();
    log.flushed(&plan, 0);
    block_on(log.checkpoint().write()).unwrap();
    // After the checkpoint: a new epoch, then a truncation that the file never heard of.
    append(&mut log, 9, 5);
    append(&mut log, 11, 5);
    drop(log);
    disk.process_crash();
    let (mut log, _) = open(&disk);
    assert_eq!(
        pairs(&log),
        vec![(0, 0), (2, 10), (5, 25), (9, 40), (11, 45)]
    );
    log.truncate_to(45).unwrap();
    block_on(log.checkpoint().write()).unwrap();
    drop(log);
    disk.process_crash();
    let (log, _) = open(&disk);
    assert_eq!(pairs(&log), vec![(0, 0), (2, 10), (5, 25), (9, 40)]);
}

#[test]
fn a_file_newer_than_the_surviving_log_is_cut_to_it() {
    let disk = MemDisk::new(8);
    let (mut log, _) = open(&disk);
    append(&mut log, 1, 5);
    let plan = log.flush_plan();
    block_on(Log::sync_files(&plan)).unwrap();
    log.flushed(&plan, 0);
    block_on(log.checkpoint().write()).unwrap();
    // Epoch 3 reaches the epoch file but its batch is lost (cut off below, as a power loss
    // may do to unsynced pages).
    let size = log.size_bytes();
    append(&mut log, 3, 5);
    let file = Path::new(DIR).join(CHECKPOINT_FILE);
    block_on(crate::io::write_file_atomic(
        &disk,
        &file,
        b"0\n2\n1 0\n3 5\n",
    ))
    .unwrap();
    drop(log);
    let segment = Path::new(DIR).join(segment::file_name(0, "log"));
    disk.open(&segment, crate::io::OpenMode::ReadWrite)
        .unwrap()
        .set_len(size)
        .unwrap();
    disk.process_crash();
    let (log, _) = open(&disk);
    assert_eq!(log.end_offset(), 5);
    assert_eq!(pairs(&log), vec![(1, 0)]);
}
