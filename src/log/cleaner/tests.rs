//! Whole passes on `MemDisk`: a compacted log keeps the last value per key and every offset,
//! survives reopening, and — the property test — random keyed appends, passes, kills and
//! power losses at any disk operation of a pass always leave, after recovery, for each key its
//! last value (or its original records), byte-identical records at their offsets, nothing lost
//! above what a pass may touch, and no leftover `.cleaned`/`.swap` files.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::io::memdisk::{block_on, Crash, MemDisk};
use crate::io::{BoxFuture, OpenMode};
use crate::log::batch::{self, BatchBuilder};
use crate::log::{Log, LogConfig};

const DIR: &str = "/data/compacted-0";

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        segment_ms: i64::MAX,
        index_interval_bytes: 100,
        planted: Default::default(),
    }
}

fn policy() -> CleanPolicy {
    CleanPolicy {
        min_dirty_ratio: 0.0,
        delete_retention_ms: 50,
        segment_bytes: 1200,
        ..CleanPolicy::default()
    }
}

/// A clock for passes without a throttle: it never needs to sleep.
struct StillClock;

impl Clock for StillClock {
    fn monotonic(&self) -> Duration {
        Duration::ZERO
    }
    fn wall_ms(&self) -> i64 {
        0
    }
    fn sleep(&self, _: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// A disk that freezes the `MemDisk` under it (a crash at that instant) once `budget` more
/// mutating calls (writes, truncations, renames, removals, fsyncs) have been made.
#[derive(Clone)]
struct CrashingDisk {
    mem: MemDisk,
    budget: Arc<AtomicI64>,
    crash: Arc<std::sync::Mutex<Crash>>,
}

impl CrashingDisk {
    fn tick(&self) {
        if self.budget.fetch_sub(1, Ordering::SeqCst) == 1 {
            let crash = *self.crash.lock().unwrap();
            self.mem.freeze(crash);
        }
    }
    fn arm(&self, ops: i64, crash: Crash) {
        *self.crash.lock().unwrap() = crash;
        self.budget.store(ops, Ordering::SeqCst);
    }
    fn disarm(&self) {
        self.budget.store(i64::MIN / 2, Ordering::SeqCst);
    }
}

struct CrashingFile {
    inner: Arc<dyn File>,
    disk: CrashingDisk,
}

impl File for CrashingFile {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_at(pos, buf)
    }
    fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.disk.tick();
        self.inner.write_at(pos, data)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.disk.tick();
        self.inner.set_len(len)
    }
    fn sync(&self) -> BoxFuture<'static, io::Result<()>> {
        self.disk.tick();
        self.inner.sync()
    }
}

impl Disk for CrashingDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn File>> {
        let inner = self.mem.open(path, mode)?;
        Ok(Arc::new(CrashingFile {
            inner,
            disk: self.clone(),
        }))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.mem.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.mem.list_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.mem.exists(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.tick();
        self.mem.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.tick();
        self.mem.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.mem.remove_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> BoxFuture<'static, io::Result<()>> {
        self.tick();
        self.mem.sync_dir(path)
    }
}

fn new_disk(seed: u64) -> CrashingDisk {
    let mem = MemDisk::new(seed);
    block_on(crate::io::create_dir_all_durable(&mem, Path::new("/data"))).unwrap();
    let disk = CrashingDisk {
        mem,
        budget: Arc::new(AtomicI64::new(0)),
        crash: Arc::new(std::sync::Mutex::new(Crash::ProcessKill)),
    };
    disk.disarm();
    disk
}

fn open(disk: &CrashingDisk) -> Log {
    block_on(Log::open(
        Arc::new(disk.clone()),
        Path::new(DIR),
        config(),
        0,
    ))
    .unwrap()
    .0
}

/// Appends one batch of keyed records (`None` value: a tombstone); returns its base offset.
fn append(log: &mut Log, records: &[(Vec<u8>, Option<Vec<u8>>)], ts: i64) -> i64 {
    let mut b = BatchBuilder::new(ts);
    for (k, v) in records {
        b.push(Some(k), v.as_deref(), ts);
    }
    let mut bytes = b.finish(-1, -1, -1);
    let mut header = batch::check(&bytes).unwrap();
    log.append(&mut bytes, std::slice::from_mut(&mut header), ts)
        .unwrap()
        .0
}

fn flush(log: &mut Log) {
    let plan = log.flush_plan();
    block_on(Log::sync_files(&plan)).unwrap();
    log.flushed(&plan, 0);
    block_on(log.checkpoint().write()).unwrap();
}

type Rec = (Vec<u8>, Option<Vec<u8>>);

/// Every record in the log, by offset (reads go through gaps as a consumer's do).
fn read_all(log: &Log) -> BTreeMap<i64, Rec> {
    let mut out = BTreeMap::new();
    let mut offset = log.start_offset();
    while offset < log.end_offset() {
        let data = log.read(offset, 1 << 20, i64::MAX).unwrap();
        assert!(
            !data.is_empty(),
            "nothing served at {offset} below end {}",
            log.end_offset()
        );
        for item in batch::iter(&data) {
            let (at, header) = item.expect("a read never returns a bad batch");
            assert!(header.base_offset >= offset || header.last_offset() >= offset);
            let bytes = &data[at..at + header.total_len()];
            for r in batch::records(bytes, &header).unwrap().unwrap() {
                assert!(out
                    .insert(
                        r.offset,
                        (r.key.unwrap().to_vec(), r.value.map(<[u8]>::to_vec))
                    )
                    .is_none());
            }
            offset = header.next_offset();
        }
    }
    out
}

/// key → value after replaying `records` in offset order (a tombstone removes the key).
fn materialise<'a>(records: impl Iterator<Item = &'a Rec>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut table = BTreeMap::new();
    for (k, v) in records {
        match v {
            Some(v) => table.insert(k.clone(), v.clone()),
            None => table.remove(k),
        };
    }
    table
}

/// One full pass as the broker runs it.
fn pass(log: &mut Log, now: i64, map_bytes: usize) -> io::Result<Option<(CleanRange, i64)>> {
    let Some(job) = log.clean_job(i64::MAX, BTreeSet::new(), policy(), now)? else {
        return Ok(None);
    };
    let range = job.range;
    let mut throttle = Throttle::new(f64::MAX, Duration::ZERO);
    let Some(cleaned) = block_on(job.run(map_bytes, now, &StillClock, &mut throttle))? else {
        return Ok(None);
    };
    block_on(cleaned.write_intent())?;
    let checkpoint = log.install_cleaned(&cleaned)?;
    block_on(cleaned.commit(checkpoint))?;
    Ok(Some((range, cleaned.end_offset)))
}

fn leftovers(disk: &CrashingDisk) -> Vec<String> {
    disk.mem
        .list_dir(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
        .collect()
}

fn kv(k: &str, v: Option<&str>) -> Rec {
    (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()))
}

#[test]
fn a_pass_keeps_the_last_value_per_key_and_every_offset() {
    let disk = new_disk(1);
    let mut log = open(&disk);
    let mut history = BTreeMap::new();
    for i in 0..60 {
        let rec = kv(&format!("k{}", i % 5), Some(&format!("value-{i:04}")));
        let base = append(&mut log, std::slice::from_ref(&rec), i);
        history.insert(base, rec);
    }
    // A tombstone for k0, then more appends so it is below the active segment.
    history.insert(append(&mut log, &[kv("k0", None)], 60), kv("k0", None));
    for i in 61..80 {
        let rec = kv("filler", Some(&format!("f{i}")));
        history.insert(append(&mut log, std::slice::from_ref(&rec), i), rec);
    }
    flush(&mut log);
    let (start, end, size) = (log.start_offset(), log.end_offset(), log.size_bytes());
    let (range, pass_end) = pass(&mut log, 1_000, 1 << 20)
        .unwrap()
        .expect("a pass is due");
    assert_eq!(range.first_dirty, 0);
    assert!(pass_end <= log.segments.keys().next_back().copied().unwrap());
    assert_eq!(
        (log.start_offset(), log.end_offset()),
        (start, end),
        "offsets never move"
    );
    assert!(
        log.size_bytes() < size / 2,
        "{} of {size} bytes left",
        log.size_bytes()
    );
    let after = read_all(&log);
    // Every survivor is the record appended at that offset.
    for (o, r) in &after {
        assert_eq!(history.get(o), Some(r), "offset {o}");
    }
    assert_eq!(materialise(after.values()), materialise(history.values()));
    // The tombstone survived this pass with a horizon; the next pass after it drops it.
    assert!(after.values().any(|(k, v)| k == b"k0" && v.is_none()));
    assert!(log.cleaner_checkpoint().first_dirty.is_some());
    for i in 80..100 {
        append(&mut log, &[kv("filler", Some(&format!("f{i}")))], i);
    }
    flush(&mut log);
    pass(&mut log, 1_000 + policy().delete_retention_ms, 1 << 20).unwrap();
    let later = read_all(&log);
    assert!(
        !later.values().any(|(k, _)| k == b"k0"),
        "the tombstone went after its horizon"
    );
    // Reopened, cleanly and not: same records.
    block_on(log.close(0)).unwrap();
    drop(log);
    let log = open(&disk);
    assert_eq!(read_all(&log), later);
    drop(log);
    disk.mem.power_loss();
    let log = open(&disk);
    assert_eq!(read_all(&log), later);
    assert!(leftovers(&disk).is_empty());
}

#[test]
fn a_small_map_cleans_in_several_passes() {
    let disk = new_disk(2);
    let mut log = open(&disk);
    let mut history = BTreeMap::new();
    for i in 0..120 {
        let rec = kv(&format!("key-{}", i % 30), Some(&format!("v{i}")));
        history.insert(append(&mut log, std::slice::from_ref(&rec), i), rec);
    }
    flush(&mut log);
    // Room for about 6 keys: each pass maps a few batches.
    let map_bytes = 6 * (6 + plan::ENTRY_OVERHEAD);
    let mut ends = Vec::new();
    while let Some((_, end)) = pass(&mut log, 0, map_bytes).unwrap() {
        ends.push(end);
        assert!(ends.len() < 100, "passes make progress");
    }
    assert!(ends.len() > 2, "several partial passes: {ends:?}");
    assert!(
        ends.windows(2).all(|w| w[0] < w[1]),
        "the checkpoint only moves forward"
    );
    assert_eq!(
        materialise(read_all(&log).values()),
        materialise(history.values())
    );
}

#[test]
fn an_interrupted_swap_is_rolled_back_or_completed() {
    // Crash at every mutating disk operation of one pass, both ways, and check the result.
    for crash in [Crash::ProcessKill, Crash::PowerLoss] {
        for at in 1..200 {
            let disk = new_disk(at as u64);
            let mut log = open(&disk);
            let mut history = BTreeMap::new();
            for i in 0..50 {
                let rec = kv(&format!("k{}", i % 4), Some(&format!("v{i:03}")));
                history.insert(append(&mut log, std::slice::from_ref(&rec), i), rec);
            }
            flush(&mut log);
            let before = read_all(&log);
            disk.arm(at, crash);
            let result = pass(&mut log, 0, 1 << 20);
            disk.disarm();
            let crashed = disk.mem.is_frozen();
            drop(log);
            if !crashed {
                assert!(result.is_ok());
                break;
            }
            disk.mem.thaw();
            let log = open(&disk);
            assert!(
                leftovers(&disk).is_empty(),
                "crash at op {at}: {:?}",
                leftovers(&disk)
            );
            let after = read_all(&log);
            for (o, r) in &after {
                assert_eq!(history.get(o), Some(r), "crash at op {at}: offset {o}");
            }
            assert_eq!(
                materialise(after.values()),
                materialise(before.values()),
                "crash at op {at}"
            );
            assert_eq!(log.end_offset(), 50);
        }
    }
}

#[test]
fn the_throttle_paces_reads_and_writes() {
    let ms = Duration::from_millis;
    let mut t = Throttle::new(1000.0, ms(0));
    // 500 bytes at 1000 B/s are due at 500 ms: at 100 ms, wait 400 ms.
    assert_eq!(t.charge(500, ms(100)), Some(ms(400)));
    // 500 more make 1000 bytes, due at 1 s: at 900 ms, wait 100 ms.
    assert_eq!(t.charge(500, ms(900)), Some(ms(100)));
    // A long idle spell is not saved up: a new window starts with this charge.
    assert_eq!(t.charge(10, ms(10_000)), Some(ms(10)));
    assert_eq!(t.charge(1000, ms(10_000)), Some(ms(1010)));
    let mut unlimited = Throttle::new(f64::MAX, ms(0));
    assert_eq!(unlimited.charge(u64::MAX / 2, ms(0)), None);
}

#[derive(Clone, Debug)]
enum Op {
    /// Keyed records: (key index, value or tombstone).
    Append(Vec<(u8, bool)>),
    Flush,
    /// A pass; `crash`: freeze the disk after this many mutating operations of it.
    Clean {
        map_keys: usize,
        crash: Option<(i64, bool)>,
    },
    Advance(i64),
    ProcessCrash,
    PowerLoss,
    CleanRestart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::collection::vec((0u8..8, proptest::bool::weighted(0.15)), 1..4).prop_map(Op::Append),
        2 => Just(Op::Flush),
        3 => (1usize..12, proptest::option::weighted(0.4, (1i64..80, any::<bool>())))
            .prop_map(|(map_keys, crash)| Op::Clean { map_keys, crash }),
        1 => (1i64..100).prop_map(Op::Advance),
        1 => Just(Op::ProcessCrash),
        1 => Just(Op::PowerLoss),
        1 => Just(Op::CleanRestart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn compaction_survives_kills_and_power_loss_anywhere(
        seed in any::<u64>(),
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let disk = new_disk(seed);
        let mut log = open(&disk);
        // Every record ever appended at each offset (a power loss may take the tail back, and
        // its offsets are then reused: the entries are replaced).
        let mut history: BTreeMap<i64, Rec> = BTreeMap::new();
        let mut durable = 0i64;
        // No pass ever touches offsets at or above this.
        let mut touched_below = 0i64;
        let mut now = 0i64;
        let mut value = 0u64;
        for op in ops {
            let mut restart: Option<Option<Crash>> = None;
            match op {
                Op::Append(records) => {
                    let recs: Vec<Rec> = records.iter().map(|&(k, tomb)| {
                        value += 1;
                        (format!("key{k}").into_bytes(), (!tomb).then(|| format!("value{value}").into_bytes()))
                    }).collect();
                    let base = append(&mut log, &recs, now);
                    for (i, r) in recs.into_iter().enumerate() {
                        history.insert(base + i as i64, r);
                    }
                }
                Op::Flush => {
                    flush(&mut log);
                    durable = log.end_offset();
                }
                Op::Advance(ms) => now += ms,
                Op::Clean { map_keys, crash } => {
                    let map_bytes = map_keys * (4 + plan::ENTRY_OVERHEAD);
                    if let Some((at, power)) = crash {
                        disk.arm(at, if power { Crash::PowerLoss } else { Crash::ProcessKill });
                    }
                    let result = pass(&mut log, now, map_bytes);
                    disk.disarm();
                    if disk.mem.is_frozen() {
                        // The pass stopped anywhere: what it could touch is bounded by the
                        // log's closed segments.
                        touched_below = touched_below.max(log.active().base_offset());
                        disk.mem.thaw();
                        restart = Some(None);
                    } else {
                        let result = result.unwrap();
                        if let Some((range, end)) = result {
                            prop_assert!(end <= range.first_uncleanable);
                            prop_assert!(range.first_uncleanable <= log.active().base_offset());
                            touched_below = touched_below.max(range.first_uncleanable);
                        }
                    }
                }
                Op::ProcessCrash => restart = Some(Some(Crash::ProcessKill)),
                Op::PowerLoss => restart = Some(Some(Crash::PowerLoss)),
                Op::CleanRestart => {
                    block_on(log.close(0)).unwrap();
                    durable = log.end_offset();
                    restart = Some(None);
                }
            }
            if let Some(crash) = restart {
                let end = log.end_offset();
                drop(log);
                match crash {
                    Some(Crash::ProcessKill) => disk.mem.process_crash(),
                    Some(Crash::PowerLoss) => disk.mem.power_loss(),
                    None => {}
                }
                log = open(&disk);
                prop_assert!(leftovers(&disk).is_empty(), "{:?}", leftovers(&disk));
                prop_assert!(log.end_offset() >= durable, "fsynced data lost: end {} < {}", log.end_offset(), durable);
                if !matches!(crash, Some(Crash::PowerLoss)) {
                    prop_assert!(log.end_offset() >= end.min(log.end_offset()));
                }
                let end = log.end_offset();
                history.retain(|&o, _| o < end);
                durable = end;
            }
            // The invariants, after every step.
            let end = log.end_offset();
            let got = read_all(&log);
            for (o, r) in &got {
                prop_assert_eq!(history.get(o), Some(r), "offset {} changed", o);
            }
            for (o, r) in history.range(touched_below.min(end)..end) {
                prop_assert_eq!(got.get(o), Some(r), "offset {} above every pass was lost", o);
            }
            prop_assert_eq!(
                materialise(got.values()),
                materialise(history.range(..end).map(|(_, r)| r)),
                "the table differs"
            );
        }
    }
}

/// Throughput and memory of the cleaner: one full pass over a 256 MiB log of 10-record
/// batches, on `MemDisk` (page-cache speed) and on the real disk under `/tmp` (fsyncs
/// included). Run with
/// `cargo test --release -p weir --lib cleaner::tests::bench_compaction -- --ignored --nocapture`.
#[test]
#[ignore]
#[cfg(not(madsim))]
fn bench_compaction() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (keys, value_len) in [(10_000usize, 100usize), (100_000, 100), (1_000, 1_000)] {
        let mem: Arc<dyn Disk> = Arc::new(new_disk(7).mem);
        rt.block_on(bench_one(mem, Path::new(DIR), keys, value_len, "memdisk"));
        let dir = std::env::temp_dir().join(format!("weir-cleaner-bench-{}", std::process::id()));
        let os: Arc<dyn Disk> = Arc::new(crate::io::osdisk::OsDisk);
        rt.block_on(bench_one(os.clone(), &dir, keys, value_len, "disk"));
        os.remove_dir_all(&dir).unwrap();
    }
}

#[cfg(not(madsim))]
async fn bench_one(disk: Arc<dyn Disk>, dir: &Path, keys: usize, value_len: usize, what: &str) {
    let cfg = LogConfig {
        segment_bytes: 16 << 20,
        segment_ms: i64::MAX,
        index_interval_bytes: 4096,
        planted: Default::default(),
    };
    let mut log = Log::open(disk, dir, cfg, 0).await.unwrap().0;
    let value = vec![b'x'; value_len];
    let total_bytes = 256u64 << 20;
    let mut i = 0u64;
    while log.size_bytes() < total_bytes {
        let mut b = BatchBuilder::new(0);
        for _ in 0..10 {
            b.push(
                Some(format!("key-{:08}", i % keys as u64).as_bytes()),
                Some(&value),
                0,
            );
            i += 1;
        }
        let mut bytes = b.finish(-1, -1, -1);
        let mut header = batch::check(&bytes).unwrap();
        log.append(&mut bytes, std::slice::from_mut(&mut header), 0)
            .unwrap();
    }
    let plan = log.flush_plan();
    Log::sync_files(&plan).await.unwrap();
    log.flushed(&plan, 0);
    let before = log.size_bytes();
    let policy = CleanPolicy {
        min_dirty_ratio: 0.0,
        segment_bytes: 16 << 20,
        ..CleanPolicy::default()
    };
    let job = log
        .clean_job(i64::MAX, BTreeSet::new(), policy, 0)
        .unwrap()
        .unwrap();
    let started = std::time::Instant::now();
    let mut throttle = Throttle::new(f64::MAX, Duration::ZERO);
    let cleaned = job
        .run(128 << 20, 0, &StillClock, &mut throttle)
        .await
        .unwrap()
        .unwrap();
    cleaned.write_intent().await.unwrap();
    let cp = log.install_cleaned(&cleaned).unwrap();
    cleaned.commit(cp).await.unwrap();
    let secs = started.elapsed().as_secs_f64();
    let s = cleaned.stats;
    println!(
        "{what}: keys={keys} value={value_len}B log={:.0} MiB -> {:.1} MiB: {:.2} s, {:.0} MB/s of log compacted (read {:.0} MiB, wrote {:.1} MiB), map {} keys {:.1} MiB",
        before as f64 / (1 << 20) as f64,
        log.size_bytes() as f64 / (1 << 20) as f64,
        secs,
        before as f64 / 1e6 / secs,
        s.bytes_read as f64 / (1 << 20) as f64,
        s.bytes_written as f64 / (1 << 20) as f64,
        s.keys_mapped,
        s.map_bytes as f64 / (1 << 20) as f64,
    );
}
