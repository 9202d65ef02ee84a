//! Tests of the durability model, the namespace and the injected faults.

use super::*;

fn ready<F: std::future::Future>(fut: F) -> F::Output {
    block_on(fut)
}

/// Test-side randomness, independent of the disk's generator.
struct TestRng(Prng);

impl TestRng {
    fn new(seed: u64) -> TestRng {
        TestRng(Prng::new(seed))
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0.below(bound)
    }

    /// Random bytes, `min..max` of them.
    fn bytes(&mut self, min: usize, max: usize) -> Vec<u8> {
        let len = min + self.below((max - min) as u64) as usize;
        (0..len).map(|_| self.below(256) as u8).collect()
    }
}

fn disk_with_dir(seed: u64) -> MemDisk {
    let disk = MemDisk::new(seed);
    disk.create_dir_all(Path::new("/d")).unwrap();
    ready(disk.sync_dir(Path::new("/"))).unwrap();
    disk
}

/// Creates `path` and makes its name durable.
fn create_synced(disk: &MemDisk, path: &str) -> Arc<dyn File> {
    let file = open(disk, path, OpenMode::Create);
    ready(disk.sync_dir(Path::new(path).parent().unwrap())).unwrap();
    file
}

fn open(disk: &MemDisk, path: &str, mode: OpenMode) -> Arc<dyn File> {
    disk.open(Path::new(path), mode).unwrap()
}

fn open_err(disk: &MemDisk, path: &str, mode: OpenMode) -> io::Error {
    match disk.open(Path::new(path), mode) {
        Ok(_) => panic!("{path} opened"),
        Err(e) => e,
    }
}

fn read_all(file: &dyn File) -> Vec<u8> {
    let mut buf = vec![0; file.len().unwrap() as usize];
    crate::io::read_exact_at(file, 0, &mut buf).unwrap();
    buf
}

#[test]
fn unsynced_write_survives_process_crash_but_handles_die() {
    let disk = disk_with_dir(1);
    let file = open(&disk, "/d/f", OpenMode::Create);
    file.write_at(0, b"hello").unwrap();
    disk.process_crash();

    assert_eq!(
        file.write_at(0, b"x").unwrap_err().to_string(),
        "stale handle after crash"
    );
    assert!(file.len().is_err());
    assert!(file.read_at(0, &mut [0; 4]).is_err());
    assert!(ready(file.sync()).is_err());

    let reopened = open(&disk, "/d/f", OpenMode::Read);
    assert_eq!(read_all(reopened.as_ref()), b"hello");
    assert_eq!(disk.durable_contents("/d/f").unwrap(), b"");
}

#[test]
fn synced_data_always_survives_power_loss() {
    for seed in 0..300 {
        let disk = disk_with_dir(seed);
        let mut rng = TestRng::new(seed);
        let file = create_synced(&disk, "/d/f");
        let synced = rng.bytes(1, 101);
        file.write_at(0, &synced).unwrap();
        ready(file.sync()).unwrap();
        let mut end = synced.len() as u64;
        for _ in 0..rng.below(6) {
            if rng.below(3) == 0 {
                end += rng.below(50);
                file.set_len(end).unwrap();
            } else {
                let data = rng.bytes(1, 41);
                file.write_at(end, &data).unwrap();
                end += data.len() as u64;
            }
        }
        disk.power_loss();
        let after = disk.file_contents("/d/f").unwrap();
        assert_eq!(&after[..synced.len()], &synced[..], "seed {seed}");
        assert_eq!(disk.durable_contents("/d/f").unwrap(), after, "seed {seed}");
    }
}

#[test]
fn rename_keeps_open_handles_on_their_file() {
    let disk = disk_with_dir(2);
    let tmp = open(&disk, "/d/a.tmp", OpenMode::Create);
    tmp.write_at(0, b"new").unwrap();
    let old = open(&disk, "/d/a", OpenMode::Create);
    old.write_at(0, b"old").unwrap();

    disk.rename(Path::new("/d/a.tmp"), Path::new("/d/a"))
        .unwrap();
    assert!(!disk.exists(Path::new("/d/a.tmp")));
    assert_eq!(disk.list_dir(Path::new("/d")).unwrap(), vec!["a"]);

    // The handle opened as a.tmp now writes to a; the replaced file lives on for its handle.
    tmp.write_at(3, b"er").unwrap();
    assert_eq!(disk.file_contents("/d/a").unwrap(), b"newer");
    assert_eq!(read_all(old.as_ref()), b"old");
    old.write_at(0, b"OLD").unwrap();
    assert_eq!(disk.file_contents("/d/a").unwrap(), b"newer");

    let used = disk.used_bytes();
    drop(old);
    assert_eq!(
        disk.used_bytes(),
        used - 3,
        "the unlinked file is freed with its last handle"
    );
}

/// `list_dir` reads the range of paths under the directory: names that share its prefix
/// without being under it (`t-0.tmp`, `t-00`, `t-0-delete`) sort around that range, before and
/// after it, and are not its entries; every entry is, files and empty directories alike.
#[test]
fn listing_a_directory_sees_exactly_its_children() {
    let disk = MemDisk::new(5);
    for dir in [
        "/d/t-0/sub",
        "/d/t-00",
        "/d/t-0-delete",
        "/d/t",
        "/d/t-0/empty",
    ] {
        disk.create_dir_all(Path::new(dir)).unwrap();
    }
    for file in [
        "/d/t-0/00.log",
        "/d/t-0/00.index",
        "/d/t-0/sub/deeper.log",
        "/d/t-0.tmp",
        "/d/t-00/x.log",
        "/d/t-0-delete/y.log",
        "/d/t/z.log",
        "/d/s.log",
    ] {
        drop(open(&disk, file, OpenMode::Create));
    }
    assert_eq!(
        disk.list_dir(Path::new("/d/t-0")).unwrap(),
        vec!["00.index", "00.log", "empty", "sub"]
    );
    assert_eq!(
        disk.list_dir(Path::new("/d")).unwrap(),
        vec!["s.log", "t", "t-0", "t-0-delete", "t-0.tmp", "t-00"]
    );
    assert_eq!(disk.list_dir(Path::new("/d/t")).unwrap(), vec!["z.log"]);
    assert!(disk.list_dir(Path::new("/d/t-0/empty")).unwrap().is_empty());
}

#[test]
fn namespace_behaves_like_a_file_system() {
    let disk = MemDisk::new(3);
    let missing = open_err(&disk, "/x/f", OpenMode::Create);
    assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    for mode in [OpenMode::Read, OpenMode::ReadWrite] {
        let err = open_err(&disk, "/nope", mode);
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    disk.create_dir_all(Path::new("/a/b/c")).unwrap();
    assert!(disk.exists(Path::new("/a")) && disk.exists(Path::new("/a/b")));
    drop(open(&disk, "/a/./b/z.log", OpenMode::Create));
    drop(open(&disk, "/a/b/c/../m.log", OpenMode::Create));
    drop(open(&disk, "/a/b.txt", OpenMode::Create));
    assert_eq!(
        disk.list_dir(Path::new("/a/b")).unwrap(),
        vec!["c", "m.log", "z.log"]
    );
    assert_eq!(disk.list_dir(Path::new("/a")).unwrap(), vec!["b", "b.txt"]);
    assert_eq!(disk.list_dir(Path::new("/")).unwrap(), vec!["a"]);
    assert_eq!(
        disk.list_dir(Path::new("/a/b.txt")).unwrap_err().kind(),
        io::ErrorKind::NotADirectory
    );
    assert!(disk.create_dir_all(Path::new("/a/b.txt/x")).is_err());
    assert_eq!(
        open_err(&disk, "/a/b", OpenMode::Create).kind(),
        io::ErrorKind::IsADirectory
    );

    disk.rename(Path::new("/a/b"), Path::new("/a/moved"))
        .unwrap();
    assert_eq!(
        disk.list_dir(Path::new("/a/moved")).unwrap(),
        vec!["c", "m.log", "z.log"]
    );
    assert!(disk.file_contents("/a/moved/z.log").is_some());

    disk.remove_dir_all(Path::new("/a/moved")).unwrap();
    assert_eq!(disk.list_dir(Path::new("/a")).unwrap(), vec!["b.txt"]);
    assert!(!disk.exists(Path::new("/a/moved/c")));
    assert_eq!(disk.used_bytes(), 0);

    disk.remove_file(Path::new("/a/b.txt")).unwrap();
    assert_eq!(
        disk.remove_file(Path::new("/a/b.txt")).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    assert!(ready(disk.sync_dir(Path::new("/a"))).is_ok());
}

#[test]
fn read_write_and_set_len_semantics() {
    let disk = disk_with_dir(4);
    let file = open(&disk, "/d/f", OpenMode::Create);
    file.write_at(4, b"ab").unwrap();
    assert_eq!(disk.file_contents("/d/f").unwrap(), b"\0\0\0\0ab");
    let mut buf = [9u8; 4];
    assert_eq!(file.read_at(4, &mut buf).unwrap(), 2);
    assert_eq!(&buf[..2], b"ab");
    assert_eq!(file.read_at(6, &mut buf).unwrap(), 0);
    assert_eq!(file.read_at(u64::MAX, &mut buf).unwrap(), 0);
    file.set_len(2).unwrap();
    file.set_len(3).unwrap();
    assert_eq!(disk.file_contents("/d/f").unwrap(), b"\0\0\0");
    assert_eq!(file.len().unwrap(), 3);
    assert!(file.write_at(u64::MAX, b"x").is_err());
    assert!(file.set_len(u64::MAX).is_err());

    let reader = open(&disk, "/d/f", OpenMode::Read);
    assert_eq!(
        reader.write_at(0, b"x").unwrap_err().raw_os_error(),
        Some(EBADF)
    );
    assert_eq!(disk.stats().writes, 2);
}

#[test]
fn write_file_atomic_survives_power_loss_whole() {
    for seed in 0..50 {
        let disk = disk_with_dir(seed);
        let path = Path::new("/d/meta");
        ready(crate::io::write_file_atomic(&disk, path, b"first")).unwrap();
        disk.power_loss();
        assert_eq!(crate::io::read_file(&disk, path).unwrap(), b"first");
    }
}

#[test]
fn capacity_limit_fails_with_enospc_and_writes_nothing() {
    let disk = disk_with_dir(5);
    disk.set_faults(Faults {
        capacity_bytes: Some(100),
        ..Faults::default()
    });
    let a = open(&disk, "/d/a", OpenMode::Create);
    let b = open(&disk, "/d/b", OpenMode::Create);
    a.write_at(0, &[1; 60]).unwrap();
    let err = b.write_at(0, &[2; 50]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(ENOSPC));
    assert_eq!(disk.file_contents("/d/b").unwrap(), b"");
    assert_eq!(b.set_len(41).unwrap_err().raw_os_error(), Some(ENOSPC));
    b.write_at(0, &[2; 40]).unwrap();
    a.write_at(0, &[3; 60]).unwrap(); // overwriting in place needs no space
    assert_eq!(disk.used_bytes(), 100);

    drop(a);
    disk.remove_file(Path::new("/d/a")).unwrap();
    b.write_at(40, &[2; 50]).unwrap();
    assert_eq!(disk.stats().injected_faults, 2);
}

#[test]
fn eio_rates_fail_the_right_calls() {
    let disk = disk_with_dir(6);
    let file = open(&disk, "/d/f", OpenMode::Create);
    file.write_at(0, b"durable").unwrap();
    ready(file.sync()).unwrap();

    disk.set_faults(Faults {
        write_error_rate: 0.5,
        ..Faults::default()
    });
    let failed = (0..1000u64)
        .filter(|i| match file.write_at(i % 7, b"x") {
            Ok(()) => false,
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(EIO));
                true
            }
        })
        .count();
    assert!(
        (400..600).contains(&failed),
        "{failed} of 1000 writes failed"
    );

    disk.set_faults(Faults {
        write_error_rate: 1.0,
        read_error_rate: 1.0,
        sync_error_rate: 1.0,
        ..Faults::default()
    });
    let before = disk.file_contents("/d/f").unwrap();
    assert_eq!(
        file.write_at(0, b"zzz").unwrap_err().raw_os_error(),
        Some(EIO)
    );
    assert_eq!(file.set_len(0).unwrap_err().raw_os_error(), Some(EIO));
    assert_eq!(
        file.read_at(0, &mut [0; 3]).unwrap_err().raw_os_error(),
        Some(EIO)
    );
    assert_eq!(ready(file.sync()).unwrap_err().raw_os_error(), Some(EIO));
    assert_eq!(disk.file_contents("/d/f").unwrap(), before);
    assert_eq!(disk.durable_contents("/d/f").unwrap(), b"durable");

    disk.set_faults(Faults::default());
    ready(file.sync()).unwrap();
    // The failed fsync either kept the dirty page (written now) or dropped it (never written).
    let durable = disk.durable_contents("/d/f").unwrap();
    if disk.stats().dropped_pages == 0 {
        assert_eq!(durable, before);
    } else {
        assert_eq!(&durable[..7], b"durable");
    }
    let stats = disk.stats();
    assert_eq!(stats.injected_faults, failed as u64 + 4);
    assert_eq!((stats.writes, stats.reads, stats.syncs), (1002, 1, 3));
}

#[test]
fn lost_and_misdirected_writes_report_success() {
    let disk = disk_with_dir(7);
    let file = open(&disk, "/d/f", OpenMode::Create);
    file.set_len(16384).unwrap();
    disk.set_faults(Faults {
        lost_write_rate: 1.0,
        ..Faults::default()
    });
    file.write_at(0, b"lost").unwrap();
    assert_eq!(disk.file_contents("/d/f").unwrap(), vec![0; 16384]);

    disk.set_faults(Faults {
        misdirected_write_rate: 1.0,
        ..Faults::default()
    });
    let mut misplaced = 0;
    for _ in 0..8 {
        file.set_len(0).unwrap();
        file.set_len(16384).unwrap();
        file.write_at(8192, b"MARK").unwrap();
        let contents = disk.file_contents("/d/f").unwrap();
        let at = contents.windows(4).position(|w| w == b"MARK").unwrap();
        assert!((8192 - 4096..8192 + 4096).contains(&at));
        if at != 8192 {
            misplaced += 1;
        }
    }
    assert!(misplaced > 0);
}

#[test]
fn bit_flips_change_exactly_one_bit() {
    let disk = disk_with_dir(8);
    assert_eq!(disk.flip_random_bit(), None);
    let file = open(&disk, "/d/f", OpenMode::Create);
    drop(open(&disk, "/d/empty", OpenMode::Create));
    file.write_at(0, &[0; 64]).unwrap();
    ready(file.sync()).unwrap();

    let (path, offset) = disk.flip_random_bit().unwrap();
    assert_eq!(path, Path::new("/d/f"));
    let current = disk.file_contents("/d/f").unwrap();
    assert_eq!(current.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
    assert_ne!(current[offset as usize], 0);
    assert_eq!(disk.durable_contents("/d/f").unwrap(), current);

    disk.flip_bit("/d/f", 3, 7).unwrap();
    assert_eq!(
        read_all(file.as_ref())[3] & 0x80,
        0x80 ^ (current[3] & 0x80)
    );
    assert!(disk.flip_bit("/d/f", 64, 0).is_err());
    assert!(disk.flip_bit("/d/f", 0, 8).is_err());
    assert!(disk.flip_bit("/d/none", 0, 0).is_err());
}

/// File contents, counters and bit flips: everything a run can observe.
type Observed = (Vec<Option<Vec<u8>>>, DiskStats, Vec<Option<(PathBuf, u64)>>);

/// A run mixing every fault and both crashes.
fn scenario(seed: u64) -> Observed {
    let disk = disk_with_dir(seed);
    disk.set_faults(Faults {
        failed_dirs: Vec::new(),
        write_error_rate: 0.05,
        read_error_rate: 0.05,
        sync_error_rate: 0.1,
        capacity_bytes: Some(4000),
        lost_write_rate: 0.05,
        misdirected_write_rate: 0.05,
    });
    let mut flips = Vec::new();
    for round in 0..5u64 {
        for name in ["a", "b", "c"] {
            let path = format!("/d/{name}");
            let Ok(file) = disk.open(Path::new(&path), OpenMode::Create) else {
                continue;
            };
            for i in 0..10u64 {
                let _ = file.write_at(i * 13 + round, &[i as u8 ^ round as u8; 25]);
                if i % 4 == 0 {
                    let _ = ready(file.sync());
                }
                let _ = file.read_at(i, &mut [0; 8]);
            }
        }
        flips.push(disk.flip_random_bit());
        if round % 2 == 0 {
            disk.power_loss();
        } else {
            disk.process_crash();
        }
    }
    let contents = ["a", "b", "c"]
        .iter()
        .map(|n| disk.file_contents(format!("/d/{n}")))
        .collect();
    (contents, disk.stats(), flips)
}

#[test]
fn same_seed_same_disk() {
    for seed in 0..10 {
        assert_eq!(scenario(seed), scenario(seed), "seed {seed}");
    }
    assert!((1..10).any(|seed| scenario(seed) != scenario(0)));
}

/// Power loss after rewriting four synced pages: each page must come back old, new, or torn
/// at a sector boundary (new sectors first), independently of the others.
#[test]
fn unsynced_pages_land_in_any_order_whole_or_torn_by_sector() {
    let (mut later_without_earlier, mut torn, mut none, mut all) = (0, 0, 0, 0);
    for seed in 0..400 {
        let disk = disk_with_dir(seed);
        let file = create_synced(&disk, "/d/f");
        file.write_at(0, &[1; 4 * PAGE]).unwrap();
        ready(file.sync()).unwrap();
        file.write_at(0, &[2; 4 * PAGE]).unwrap();
        disk.power_loss();
        let got = disk.file_contents("/d/f").unwrap();
        assert_eq!(got.len(), 4 * PAGE, "seed {seed}: the size never changed");
        let mut landed = Vec::new();
        for page in got.chunks(PAGE) {
            let new = page.iter().take_while(|&&b| b == 2).count();
            assert!(
                page[new..].iter().all(|&b| b == 1),
                "seed {seed}: not a sector prefix"
            );
            assert_eq!(new % SECTOR, 0, "seed {seed}: torn inside a sector");
            if new != 0 && new != PAGE {
                torn += 1;
            }
            landed.push(new == PAGE);
        }
        if landed.iter().all(|&l| l) {
            all += 1;
        }
        if got.iter().all(|&b| b == 1) {
            none += 1;
        }
        if landed.windows(2).any(|w| !w[0] && w[1]) {
            later_without_earlier += 1;
        }
        assert_eq!(disk.durable_contents("/d/f").unwrap(), got);
    }
    assert!(later_without_earlier > 0 && torn > 0 && none > 0 && all > 0);
}

#[test]
fn a_size_change_is_pending_until_fsync() {
    let (mut reverted, mut kept) = (0, 0);
    for seed in 0..100 {
        let disk = disk_with_dir(seed);
        let file = create_synced(&disk, "/d/f");
        file.write_at(0, &[7; 3 * PAGE]).unwrap();
        ready(file.sync()).unwrap();
        file.set_len(100).unwrap();
        disk.power_loss();
        let got = disk.file_contents("/d/f").unwrap();
        match got.len() {
            100 => kept += 1,
            n if n == 3 * PAGE => reverted += 1,
            n => panic!("seed {seed}: length {n} the file never had"),
        }
        // Whatever the length, the surviving bytes are the synced ones (or zeros the
        // truncation left in a page that landed).
        assert!(got.iter().all(|&b| b == 7 || b == 0), "seed {seed}");
        assert!(got[..100].iter().all(|&b| b == 7), "seed {seed}");
    }
    assert!(reverted > 0 && kept > 0);
    // After fsync the truncation is durable.
    let disk = disk_with_dir(1);
    let file = create_synced(&disk, "/d/f");
    file.write_at(0, &[7; 3 * PAGE]).unwrap();
    file.set_len(100).unwrap();
    ready(file.sync()).unwrap();
    disk.power_loss();
    assert_eq!(disk.file_contents("/d/f").unwrap(), vec![7; 100]);
}

#[test]
fn a_new_name_is_durable_only_after_its_directory_is_synced() {
    let mut vanished = 0;
    for seed in 0..100 {
        let disk = disk_with_dir(seed);
        let file = open(&disk, "/d/new", OpenMode::Create);
        file.write_at(0, b"data").unwrap();
        ready(file.sync()).unwrap();
        disk.power_loss();
        match disk.file_contents("/d/new") {
            None => vanished += 1,
            Some(bytes) => assert_eq!(bytes, b"data"),
        }
    }
    assert!(
        vanished > 0,
        "a name whose directory was never synced survived every time"
    );
    for seed in 0..50 {
        let disk = disk_with_dir(seed);
        let file = open(&disk, "/d/new", OpenMode::Create);
        file.write_at(0, b"data").unwrap();
        ready(file.sync()).unwrap();
        ready(disk.sync_dir(Path::new("/d"))).unwrap();
        disk.power_loss();
        assert_eq!(
            disk.file_contents("/d/new").unwrap(),
            b"data",
            "seed {seed}"
        );
    }
}

#[test]
fn a_new_directory_needs_its_parent_synced() {
    let mut vanished = 0;
    for seed in 0..100 {
        let disk = disk_with_dir(seed);
        disk.create_dir_all(Path::new("/d/sub/deeper")).unwrap();
        ready(disk.sync_dir(Path::new("/d/sub"))).unwrap();
        disk.power_loss();
        if !disk.exists(Path::new("/d/sub")) {
            vanished += 1;
            assert!(
                !disk.exists(Path::new("/d/sub/deeper")),
                "seed {seed}: an orphan"
            );
        }
    }
    assert!(vanished > 0);
}

#[test]
fn an_unsynced_rename_reverts_whole_and_a_removed_file_may_come_back() {
    let (mut reverted, mut renamed, mut resurrected) = (0, 0, 0);
    for seed in 0..200 {
        let disk = disk_with_dir(seed);
        ready(crate::io::write_file_atomic(
            &disk,
            Path::new("/d/meta"),
            b"old",
        ))
        .unwrap();
        drop(create_synced(&disk, "/d/doomed"));
        let tmp = open(&disk, "/d/meta.tmp", OpenMode::Create);
        tmp.write_at(0, b"new").unwrap();
        ready(tmp.sync()).unwrap();
        drop(tmp);
        disk.rename(Path::new("/d/meta.tmp"), Path::new("/d/meta"))
            .unwrap();
        disk.remove_file(Path::new("/d/doomed")).unwrap();
        disk.power_loss();
        // rename(2) is atomic even across a crash: old or new, never neither.
        match disk.file_contents("/d/meta").as_deref() {
            Some(b"old") => reverted += 1,
            Some(b"new") => renamed += 1,
            other => panic!("seed {seed}: meta is {other:?}"),
        }
        if disk.exists(Path::new("/d/doomed")) {
            resurrected += 1;
        }
    }
    assert!(reverted > 0 && renamed > 0 && resurrected > 0);
}

/// Linux's fsyncgate: after a failed fsync the pages may be marked clean without reaching the
/// medium. The next fsync then succeeds, the page cache still shows the data, and power loss
/// takes it back. Other failures keep the pages dirty, and the next fsync writes them.
#[test]
fn a_failed_fsync_keeps_or_drops_the_dirty_pages() {
    let (mut dropped_runs, mut kept_runs) = (0, 0);
    for seed in 0..40 {
        let disk = disk_with_dir(seed);
        let file = create_synced(&disk, "/d/f");
        file.write_at(0, &[1; PAGE]).unwrap();
        ready(file.sync()).unwrap();
        file.write_at(0, &[2; PAGE]).unwrap();
        disk.set_faults(Faults {
            sync_error_rate: 1.0,
            ..Faults::default()
        });
        assert_eq!(ready(file.sync()).unwrap_err().raw_os_error(), Some(EIO));
        disk.set_faults(Faults::default());
        ready(file.sync()).unwrap();
        assert_eq!(disk.file_contents("/d/f").unwrap(), vec![2; PAGE]);
        if disk.stats().dropped_pages > 0 {
            dropped_runs += 1;
            assert_eq!(disk.durable_contents("/d/f").unwrap(), vec![1; PAGE]);
            assert!(!disk.is_synced());
            disk.process_crash();
            assert_eq!(
                disk.file_contents("/d/f").unwrap(),
                vec![2; PAGE],
                "still cached"
            );
            disk.power_loss();
            assert_eq!(disk.file_contents("/d/f").unwrap(), vec![1; PAGE], "gone");
        } else {
            kept_runs += 1;
            assert_eq!(disk.durable_contents("/d/f").unwrap(), vec![2; PAGE]);
            assert!(disk.is_synced());
        }
    }
    assert!(dropped_runs > 0 && kept_runs > 0);
}

/// Rewriting what the page cache shows makes the pages dirty again: the next fsync writes them
/// (how the broker recovers after a failed fsync).
#[test]
fn rewriting_dropped_pages_makes_them_durable() {
    let disk = (0..100)
        .map(|seed| {
            let disk = disk_with_dir(seed);
            let file = create_synced(&disk, "/d/f");
            file.write_at(0, &[2; PAGE]).unwrap();
            disk.set_faults(Faults {
                sync_error_rate: 1.0,
                ..Faults::default()
            });
            let _ = ready(file.sync());
            disk.set_faults(Faults::default());
            disk
        })
        .find(|d| d.stats().dropped_pages > 0)
        .expect("some seed drops");
    let file = open(&disk, "/d/f", OpenMode::ReadWrite);
    let shown = read_all(file.as_ref());
    file.write_at(0, &shown).unwrap();
    ready(file.sync()).unwrap();
    disk.power_loss();
    assert_eq!(disk.file_contents("/d/f").unwrap(), vec![2; PAGE]);
}

#[test]
fn a_frozen_disk_refuses_everything_until_thawed() {
    let disk = disk_with_dir(9);
    let file = create_synced(&disk, "/d/f");
    file.write_at(0, b"synced").unwrap();
    ready(file.sync()).unwrap();
    file.write_at(6, b" and cached").unwrap();
    disk.freeze(Crash::ProcessKill);
    assert!(disk.is_frozen());
    assert!(file.write_at(0, b"x").is_err());
    assert!(disk.open(Path::new("/d/g"), OpenMode::Create).is_err());
    assert!(disk.list_dir(Path::new("/d")).is_err());
    assert!(ready(disk.sync_dir(Path::new("/d"))).is_err());
    disk.thaw();
    assert!(file.write_at(0, b"x").is_err(), "the old handle stays dead");
    assert_eq!(disk.file_contents("/d/f").unwrap(), b"synced and cached");
    disk.freeze(Crash::PowerLoss);
    disk.thaw();
    assert_eq!(&disk.file_contents("/d/f").unwrap()[..6], b"synced");
}

/// The namespace's keys order normalized paths exactly as `Path` does (component by
/// component), so iterating its maps, and every draw that follows that order, is unchanged.
#[test]
fn key_order_is_path_order() {
    let mut rng = TestRng::new(21);
    // Bytes around '/' (0x2f) in ASCII order, and names that are prefixes of one another.
    let alphabet = ["a", "b", "-", ".", "0", "_", "~", "ab", "a-", "a.b", "é"];
    let mut paths: Vec<PathBuf> = vec![PathBuf::new(), PathBuf::from("/")];
    for _ in 0..400 {
        let mut path = String::new();
        if rng.below(2) == 0 {
            path.push('/');
        }
        let parts = 1 + rng.below(4);
        for i in 0..parts {
            if i > 0 {
                path.push('/');
            }
            for _ in 0..1 + rng.below(3) {
                path.push_str(alphabet[rng.below(alphabet.len() as u64) as usize]);
            }
        }
        paths.push(normalize(Path::new(&path)));
    }
    for a in &paths {
        for b in &paths {
            assert_eq!(
                namespace::key(a).cmp(namespace::key(b)),
                a.cmp(b),
                "{a:?} vs {b:?}"
            );
            assert_eq!(namespace::key(a) == namespace::key(b), a == b);
        }
    }
}

/// What `keys_below` yields is what a filter of every key by `strictly_within` yields, for a
/// directory, the root and the empty relative root.
#[test]
fn keys_below_is_strictly_within() {
    let mut names = std::collections::BTreeMap::new();
    for (i, p) in [
        "/d", "/d/a", "/d/a/x", "/d-x", "/d.x", "/da", "/d/b", "/e/d", "rel", "rel/x", "/",
    ]
    .iter()
    .enumerate()
    {
        names.insert(namespace::Key::from(Path::new(p)), i as u64);
    }
    for dir in ["/d", "/d/a", "/", "", "rel", "/nothing"] {
        let dir = Path::new(dir);
        let ranged: Vec<&PathBuf> = namespace::keys_below(&names, dir).map(|k| &**k).collect();
        let filtered: Vec<&PathBuf> = names
            .keys()
            .filter(|k| namespace::strictly_within(k, dir))
            .map(|k| &**k)
            .collect();
        assert_eq!(ranged, filtered, "below {dir:?}");
    }
}
