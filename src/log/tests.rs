//! Log tests on the in-memory disk: appends, reads, rolls, retention, and a property test that
//! random appends, flushes and crashes (process kill or power loss) never lose fsynced data nor
//! return a corrupt batch.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::batch::{self, testing::batch};
use super::*;
use crate::io::memdisk::{block_on, Faults, MemDisk};

const DIR: &str = "/data/topic-0";

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        segment_ms: i64::MAX,
        index_interval_bytes: 128,
        planted: Default::default(),
    }
}

fn open(disk: &MemDisk, config: LogConfig) -> (Log, Recovery) {
    block_on(Log::open(Arc::new(disk.clone()), Path::new(DIR), config, 0)).unwrap()
}

fn append(log: &mut Log, values: &[&[u8]], ts: i64) -> (i64, i64) {
    let mut bytes = batch(values, ts, None);
    let mut header = batch::check(&bytes).unwrap();
    log.append(&mut bytes, std::slice::from_mut(&mut header), ts)
        .unwrap()
}

/// Every batch from the start, checked, as (base offset, record values).
fn read_all(log: &Log) -> Vec<(i64, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    while offset < log.end_offset() {
        let data = log.read(offset, 300, i64::MAX).unwrap();
        assert!(
            !data.is_empty(),
            "no data at {offset} below end {}",
            log.end_offset()
        );
        for item in batch::iter(&data) {
            let (at, header) = item.expect("a read never returns a bad batch");
            assert_eq!(header.base_offset, offset, "offsets are contiguous");
            let bytes = &data[at..at + header.total_len()];
            let values = batch::records(bytes, &header)
                .unwrap()
                .unwrap()
                .iter()
                .map(|r| r.value.unwrap().to_vec())
                .collect();
            out.push((offset, values));
            offset = header.next_offset();
        }
    }
    out
}

#[test]
fn appends_roll_segments_and_read_back() {
    let disk = MemDisk::new(1);
    let (mut log, recovery) = open(&disk, small_config());
    assert!(!recovery.clean);
    for i in 0..50 {
        let value = format!("value-{i:03}").repeat(5);
        assert_eq!(
            append(&mut log, &[value.as_bytes(), b"x"], 1000 + i),
            (2 * i, 2 * i + 1)
        );
    }
    assert!(log.segment_count() > 3, "small segments roll");
    let all = read_all(&log);
    assert_eq!(all.len(), 50);
    // A read from the middle of a batch starts at that batch.
    let data = log.read(7, 1, i64::MAX).unwrap();
    assert_eq!(batch::check(&data).unwrap().base_offset, 6);
    // Reads stop below the upper bound.
    assert!(log.read(10, 10_000, 10).unwrap().is_empty());
    assert!(matches!(
        log.read(101, 10, i64::MAX),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    assert_eq!(log.offset_for_timestamp(1010).unwrap(), Some((19, 1010)));
    assert_eq!(log.offset_for_timestamp(1011).unwrap(), Some((21, 1011)));
    assert_eq!(log.offset_for_timestamp(99_999).unwrap(), None);
}

/// A read far from any index entry walks many chunks of batch headers (`Segment::locate` reads
/// the file a chunk at a time), across batches larger than a chunk too, and still starts at
/// the batch holding the offset.
#[test]
fn reads_far_from_an_index_entry_find_their_batch() {
    let disk = MemDisk::new(1);
    let config = LogConfig {
        segment_bytes: 1 << 30,
        segment_ms: i64::MAX,
        // No index entry after the first: every read walks from the segment's start.
        index_interval_bytes: 1 << 30,
        planted: Default::default(),
    };
    let (mut log, _) = open(&disk, config);
    let big = vec![b'b'; 10_000];
    for i in 0..400i64 {
        let value = match i % 97 {
            50 => big.clone(),
            _ => format!("value-{i:04}").into_bytes(),
        };
        assert_eq!(append(&mut log, &[&value], 1000 + i), (i, i));
    }
    for offset in (0..400).rev() {
        let data = log.read(offset, 1, i64::MAX).unwrap();
        assert_eq!(batch::check(&data).unwrap().base_offset, offset);
    }
    // Past the end of what is stored below an upper bound: nothing.
    assert!(log.read(399, 1, 399).unwrap().is_empty());
}

#[test]
fn clean_and_unclean_reopen_keep_everything() {
    let disk = MemDisk::new(2);
    let (mut log, _) = open(&disk, small_config());
    for i in 0..30 {
        append(&mut log, &[format!("v{i}").as_bytes()], i);
    }
    let before = read_all(&log);
    block_on(log.close(0)).unwrap();
    drop(log);
    let (log, recovery) = open(&disk, small_config());
    assert!(recovery.clean);
    assert_eq!(recovery.segments_scanned, 0);
    assert_eq!(read_all(&log), before);
    drop(log);
    disk.process_crash();
    let (log, recovery) = open(&disk, small_config());
    assert!(!recovery.clean);
    assert_eq!(read_all(&log), before);
}

/// Regression (found by the `log_recovery` fuzz target): after a clean close, a CRC-valid batch
/// whose offset does not follow on sat at the segment's tail. The clean open took its end as
/// the log end, and the next append landed behind it, where reads stopped with an error.
#[test]
fn an_out_of_sequence_tail_after_a_clean_close_is_cut() {
    let disk = MemDisk::new(6);
    let (mut log, _) = open(&disk, LogConfig::default());
    for i in 0..8 {
        append(&mut log, &[format!("v{i}").as_bytes()], i);
    }
    block_on(log.close(0)).unwrap();
    drop(log);
    let path = Path::new(DIR).join(segment::file_name(0, "log"));
    let mut stray = batch(&[b"stray"], 99, None);
    stray[0..8].copy_from_slice(&2i64.to_be_bytes());
    let file = disk.open(&path, crate::io::OpenMode::ReadWrite).unwrap();
    let len = file.len().unwrap();
    file.write_at(len, &stray).unwrap();
    let (mut log, recovery) = open(&disk, LogConfig::default());
    assert!(recovery.clean);
    assert_eq!(
        log.end_offset(),
        8,
        "the stray batch is not part of the log"
    );
    assert_eq!(append(&mut log, &[b"after"], 100), (8, 8));
    let all = read_all(&log);
    assert_eq!(all.len(), 9);
    assert_eq!(all[8], (8, vec![b"after".to_vec()]));
}

/// Regression (fuzzing): a clean segment named past its batches (with an index) tripped the
/// "a segment ends at or after its base" invariant at every start.
#[test]
fn a_clean_segment_named_past_its_batches_is_recovered() {
    let disk = MemDisk::new(7);
    let config = LogConfig {
        segment_bytes: 1 << 20,
        ..small_config()
    };
    let (mut log, _) = open(&disk, config.clone());
    for i in 0..30 {
        append(&mut log, &[format!("v{i}").as_bytes()], i);
    }
    block_on(log.close(0)).unwrap();
    drop(log);
    assert_eq!(
        disk.list_dir(Path::new(DIR)).unwrap().len(),
        6,
        "one segment"
    );
    for ext in ["log", "index", "timeindex"] {
        let from = Path::new(DIR).join(segment::file_name(0, ext));
        let to = Path::new(DIR).join(segment::file_name(1000, ext));
        disk.rename(&from, &to).unwrap();
    }
    let (mut log, recovery) = open(&disk, config);
    assert!(recovery.clean);
    assert_eq!(log.start_offset(), 1000);
    assert_eq!(
        log.end_offset(),
        1000,
        "no batch of the misnamed segment is usable"
    );
    assert_eq!(append(&mut log, &[b"after"], 100), (1000, 1000));
    assert_eq!(read_all(&log).len(), 1);
}

#[test]
fn torn_tail_is_cut_and_index_rebuilt() {
    let disk = MemDisk::new(3);
    let (mut log, _) = open(&disk, LogConfig::default());
    for i in 0..10 {
        append(&mut log, &[format!("v{i}").as_bytes()], i);
    }
    drop(log);
    let path = Path::new(DIR).join(segment::file_name(0, "log"));
    let len = disk.file_contents(&path).unwrap().len() as u64;
    // Corrupt a byte inside the 8th batch: recovery keeps the first seven.
    let per_batch = len / 10;
    disk.flip_bit(&path, per_batch * 7 + 40, 3).unwrap();
    disk.process_crash();
    let (log, recovery) = open(&disk, LogConfig::default());
    assert!(recovery.truncated_at.is_some());
    assert_eq!(log.end_offset(), 7);
    assert_eq!(read_all(&log).len(), 7);
}

#[test]
fn corruption_at_rest_is_an_error_not_data() {
    let disk = MemDisk::new(4);
    let (mut log, _) = open(&disk, LogConfig::default());
    append(&mut log, &[b"hello"], 1);
    let path = Path::new(DIR).join(segment::file_name(0, "log"));
    disk.flip_bit(&path, 65, 0).unwrap();
    assert!(matches!(log.read(0, 1000, i64::MAX), Err(ReadError::Io(_))));
}

#[test]
fn retention_deletes_whole_old_segments() {
    let disk = MemDisk::new(5);
    let (mut log, _) = open(&disk, small_config());
    for i in 0..40 {
        append(&mut log, &[&[b'a'; 100]], i * 1000);
    }
    let segments = log.segment_count();
    assert_eq!(log.apply_retention(-1, -1, 1_000_000, i64::MAX).unwrap(), 0);
    // Nothing at or past the upper bound goes, however old.
    assert_eq!(log.apply_retention(0, -1, 1_000_000, 1).unwrap(), 0);
    let deleted = log.apply_retention(-1, 2048, 40_000, i64::MAX).unwrap();
    assert!(deleted > 0 && log.segment_count() == segments - deleted);
    assert!(log.size_bytes() >= 2048 - 1024);
    assert!(log.start_offset() > 0);
    let deleted_by_time = log.apply_retention(5_000, -1, 100_000, i64::MAX).unwrap();
    assert!(deleted_by_time > 0);
    assert_eq!(log.segment_count(), 1, "the active segment stays");
    let start = log.start_offset();
    drop(log);
    disk.process_crash();
    let (log, _) = open(&disk, small_config());
    assert_eq!(log.start_offset(), start);
}

#[test]
fn start_offset_moves_inside_a_segment_and_survives_crashes() {
    let disk = MemDisk::new(7);
    let (mut log, _) = open(&disk, small_config());
    for i in 0..40 {
        append(&mut log, &[b"0123456789abcdef0123456789abcdef", b"x"], i);
    }
    let segments = log.segment_count();
    assert!(segments > 3);
    // Mid-batch, mid-segment: reads below fail, the batch holding it is still served.
    let write = log.start_offset_write(41);
    block_on(write.write()).unwrap();
    let deleted = log.advance_start_offset(41).unwrap();
    assert!(deleted > 0 && log.segment_count() == segments - deleted);
    assert_eq!(log.start_offset(), 41);
    assert!(matches!(
        log.read(40, 1000, i64::MAX),
        Err(ReadError::OffsetOutOfRange { start: 41, .. })
    ));
    let data = log.read(41, 1000, i64::MAX).unwrap();
    assert_eq!(batch::check(&data).unwrap().base_offset, 40);
    // Going back is a no-op.
    assert_eq!(log.advance_start_offset(10).unwrap(), 0);
    assert_eq!(log.start_offset(), 41);
    assert!(log.offset_for_timestamp(0).unwrap().unwrap().0 >= 41);
    drop(log);
    disk.process_crash();
    let (log, _) = open(&disk, small_config());
    assert_eq!(log.start_offset(), 41);
    assert_eq!(log.end_offset(), 80);
    drop(log);
    disk.power_loss();
    let (log, _) = open(&disk, small_config());
    assert_eq!(log.start_offset(), 41, "the start offset was fsynced");
}

#[test]
fn stored_start_offset_cleans_up_and_can_pass_a_lost_tail() {
    let disk = MemDisk::new(8);
    let (mut log, _) = open(&disk, small_config());
    for i in 0..40 {
        append(&mut log, &[b"0123456789abcdef0123456789abcdef", b"x"], i);
    }
    let segments = log.segment_count();
    // Recorded, then a crash before the segments were deleted: the next open deletes them.
    block_on(log.start_offset_write(60).write()).unwrap();
    drop(log);
    disk.process_crash();
    let (log, _) = open(&disk, small_config());
    assert_eq!(log.start_offset(), 60);
    assert!(log.segment_count() < segments);
    assert!(read_all(&log).first().unwrap().0 <= 60);
    drop(log);
    // A start offset past everything that survived: the log restarts empty at it.
    block_on(
        StartOffsetWrite {
            disk: Arc::new(disk.clone()),
            dir: Path::new(DIR).to_path_buf(),
            offset: 500,
        }
        .write(),
    )
    .unwrap();
    disk.process_crash();
    let (mut log, _) = open(&disk, small_config());
    assert_eq!((log.start_offset(), log.end_offset()), (500, 500));
    assert_eq!(append(&mut log, &[b"a"], 1), (500, 500));
}

#[test]
fn truncate_to_drops_the_tail() {
    let disk = MemDisk::new(6);
    let (mut log, _) = open(&disk, small_config());
    for i in 0..40 {
        append(&mut log, &[format!("value-{i}").repeat(10).as_bytes()], i);
    }
    log.truncate_to(17).unwrap();
    assert_eq!(log.end_offset(), 17);
    assert_eq!(read_all(&log).len(), 17);
    assert_eq!(append(&mut log, &[b"again"], 99).0, 17);
}

/// A read starts its walk where the last one ended (`Segment`'s `resume`) when that is past the
/// index entry: tail reads, reads behind it and reads after a truncation that put other
/// batches where the cut ones were all find the batch a fresh walk from the index finds.
#[test]
fn reads_resumed_from_the_last_read_match_a_walk_from_the_index() {
    let disk = MemDisk::new(8);
    let config = LogConfig {
        segment_bytes: 1 << 30,
        segment_ms: i64::MAX,
        index_interval_bytes: 4096,
        planted: Default::default(),
    };
    let (mut log, _) = open(&disk, config.clone());
    let mut expected = Vec::new();
    for i in 0..120i64 {
        let value = format!("value-{i:04}").repeat(1 + (i as usize % 7));
        append(&mut log, &[value.as_bytes()], 1000 + i);
        // A follower's tail read after each append: the batch just written, then nothing.
        let data = log.read(i, 1, i64::MAX).unwrap();
        assert_eq!(batch::check(&data).unwrap().base_offset, i);
        assert!(log.read(i + 1, 1, i64::MAX).unwrap().is_empty());
        expected.push(data);
    }
    // Reads behind the last one and at scattered offsets, against what each offset held.
    for offset in [119, 3, 64, 65, 118, 0, 119, 77, 76, 78] {
        let data = log.read(offset, 1, i64::MAX).unwrap();
        assert_eq!(data, expected[offset as usize], "offset {offset}");
    }
    // Cut back, then other batches where the cut ones were: no stale place is trusted.
    log.truncate_to(100).unwrap();
    for i in 100..110i64 {
        append(&mut log, &[format!("other-{i}").as_bytes()], 5000 + i);
        let data = log.read(i, 1, i64::MAX).unwrap();
        let header = batch::check(&data).unwrap();
        assert_eq!((header.base_offset, header.max_timestamp), (i, 5000 + i));
    }
    // The same reads on a reopened log (no remembered place) give the same bytes.
    let fresh: Vec<_> = (0..110)
        .map(|o| log.read(o, 1, i64::MAX).unwrap())
        .collect();
    drop(log);
    let (reopened, _) = open(&disk, config);
    for (offset, data) in fresh.iter().enumerate() {
        assert_eq!(&reopened.read(offset as i64, 1, i64::MAX).unwrap(), data);
    }
    // Damage behind the remembered place is still found by a read that walks over it.
    let path = Path::new(DIR).join(segment::file_name(0, "log"));
    reopened.read(109, 1, i64::MAX).unwrap();
    disk.flip_bit(&path, 65, 0).unwrap();
    assert!(matches!(
        reopened.read(0, 1000, i64::MAX),
        Err(ReadError::Io(_))
    ));
}

#[derive(Clone, Debug)]
enum Op {
    Append {
        records: usize,
        size: usize,
    },
    Flush,
    /// A flush whose fsync fails; the owner then restarts (as the broker does, offline).
    FailedFlush,
    ProcessCrash,
    PowerLoss,
    CleanRestart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..5, 1usize..200).prop_map(|(records, size)| Op::Append { records, size }),
        2 => Just(Op::Flush),
        1 => Just(Op::FailedFlush),
        1 => Just(Op::ProcessCrash),
        1 => Just(Op::PowerLoss),
        1 => Just(Op::CleanRestart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn crashes_never_lose_fsynced_data_nor_return_corrupt_batches(
        seed in any::<u64>(),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        let disk = MemDisk::new(seed);
        block_on(crate::io::create_dir_all_durable(&disk, Path::new("/data"))).unwrap();
        let (mut log, _) = open(&disk, small_config());
        // What was appended, batch by batch: (base offset, values).
        let mut model: Vec<(i64, Vec<Vec<u8>>)> = Vec::new();
        let mut durable = 0i64;
        let mut next_value = 0u64;
        for op in ops {
            match op {
                Op::Append { records, size } => {
                    let values: Vec<Vec<u8>> = (0..records)
                        .map(|_| { next_value += 1; format!("{next_value:08}").repeat(size / 8 + 1).into_bytes() })
                        .collect();
                    let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
                    let (first, _) = append(&mut log, &refs, next_value as i64);
                    model.push((first, values));
                }
                Op::Flush => {
                    let plan = log.flush_plan();
                    block_on(Log::sync_files(&plan)).unwrap();
                    log.flushed(&plan, 0);
                    durable = plan.up_to;
                    block_on(log.checkpoint().write()).unwrap();
                }
                Op::FailedFlush => {
                    let end = log.end_offset();
                    let before = log.recovery_point();
                    disk.set_faults(Faults { sync_error_rate: 1.0, ..Faults::default() });
                    let plan = log.flush_plan();
                    prop_assert!(block_on(Log::sync_files(&plan)).is_err());
                    disk.set_faults(Faults::default());
                    prop_assert_eq!(log.recovery_point(), before, "a failed fsync moved nothing");
                    drop(log);
                    disk.process_crash();
                    let (reopened, _) = open(&disk, small_config());
                    log = reopened;
                    prop_assert_eq!(log.end_offset(), end, "a process kill loses nothing");
                    // An unclean open makes everything it kept durable, dropped pages included.
                    prop_assert_eq!(log.recovery_point(), end);
                    durable = end;
                }
                Op::ProcessCrash | Op::PowerLoss | Op::CleanRestart => {
                    let end = log.end_offset();
                    if matches!(op, Op::CleanRestart) {
                        block_on(log.close(0)).unwrap();
                        durable = end;
                    }
                    drop(log);
                    match op {
                        Op::ProcessCrash => disk.process_crash(),
                        Op::PowerLoss => disk.power_loss(),
                        _ => {}
                    }
                    let (reopened, recovery) = open(&disk, small_config());
                    log = reopened;
                    prop_assert!(log.end_offset() >= durable, "fsynced data lost: end {} < durable {}", log.end_offset(), durable);
                    if !matches!(op, Op::PowerLoss) {
                        prop_assert_eq!(log.end_offset(), end, "a process kill loses nothing");
                    }
                    // What survives is a prefix of what was written.
                    let survivors = read_all(&log);
                    model.retain(|(offset, _)| *offset < log.end_offset());
                    prop_assert_eq!(&survivors, &model);
                    // Whatever an open keeps is durable from then on (item: no tail that a later
                    // power loss takes back).
                    prop_assert_eq!(log.recovery_point(), log.end_offset(), "{:?}", recovery);
                    durable = log.end_offset();
                }
            }
        }
        prop_assert_eq!(read_all(&log), model);
    }
}
