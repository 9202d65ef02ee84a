//! The partition side of transactions: markers, the last stable offset, the aborted index and
//! producer state that tracks open transactions across restarts.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::io::memdisk::MemDisk;
use crate::log::batch::BatchBuilder;

fn open(disk: &MemDisk) -> Partition {
    let config = crate::config::ServerConfig::default_single_node().topic_defaults;
    let open = Partition::open(
        Arc::new(disk.clone()),
        Path::new("/data/t-0"),
        "t",
        0,
        config,
        Default::default(),
        0,
    );
    crate::io::memdisk::block_on(open).unwrap().0
}

fn fresh() -> (MemDisk, Partition) {
    let disk = MemDisk::new(7);
    disk.create_dir_all(Path::new("/data")).unwrap();
    let p = open(&disk);
    (disk, p)
}

/// A batch of `count` records from producer (`pid`, `epoch`) starting at sequence `seq`,
/// transactional or not.
fn data(pid: i64, epoch: i16, seq: i32, count: usize, transactional: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(10);
    for _ in 0..count {
        b.push(None, Some(b"v"), 10);
    }
    let mut bytes = b.finish(pid, epoch, seq);
    if transactional {
        bytes[21..23].copy_from_slice(&0x10i16.to_be_bytes());
        let crc = batch::compute_crc(&bytes);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    bytes
}

fn commit(coordinator_epoch: i32) -> Marker {
    Marker {
        commit: true,
        coordinator_epoch,
    }
}

fn abort(coordinator_epoch: i32) -> Marker {
    Marker {
        commit: false,
        coordinator_epoch,
    }
}

/// (producer id, first offset) of the aborted transactions a read_committed read from
/// `offset` reports, and the offsets of the batches it returns.
fn committed_read(p: &Partition, offset: i64) -> (Vec<(i64, i64)>, Vec<i64>) {
    let (records, aborted) = p.read_committed(offset, 1 << 20).unwrap();
    let batches = batch::iter(&records)
        .map(|b| b.unwrap().1.base_offset)
        .collect();
    (
        aborted
            .iter()
            .map(|a| (a.producer_id, a.first_offset))
            .collect(),
        batches,
    )
}

#[test]
fn markers_move_the_lso_and_aborts_are_indexed() {
    let (_disk, mut p) = fresh();
    p.append(&data(1, 0, 0, 2, true), 1).unwrap(); // 0..=1
    p.append(&data(9, 0, 0, 1, false), 1).unwrap(); // 2, idempotent, no transaction
    p.append(&data(2, 0, 0, 1, true), 1).unwrap(); // 3
    assert_eq!((p.high_watermark(), p.last_stable_offset()), (4, 0));
    assert_eq!(p.open_transactions(), 2);
    // Nothing below the LSO yet: a read_committed reader sees nothing.
    assert_eq!(committed_read(&p, 0), (vec![], vec![]));
    let m = p.append_marker(1, 0, commit(0), 2).unwrap();
    assert_eq!((m.base_offset, m.last_offset), (4, 4));
    assert_eq!(p.last_stable_offset(), 3, "producer 2 is still open");
    let m = p.append_marker(2, 0, abort(0), 3).unwrap();
    assert_eq!(m.base_offset, 5);
    assert_eq!(p.last_stable_offset(), 6);
    assert_eq!(p.open_transactions(), 0);
    // Every batch is returned (the client filters), with producer 2's aborted transaction.
    assert_eq!(committed_read(&p, 0), (vec![(2, 3)], vec![0, 2, 3, 4, 5]));
    assert_eq!(committed_read(&p, 4), (vec![(2, 3)], vec![4, 5]));
    assert_eq!(committed_read(&p, 6), (vec![], vec![]));
    // The next transaction of producer 1 opens at its first batch.
    p.append(&data(1, 0, 2, 1, true), 4).unwrap();
    assert_eq!(p.last_stable_offset(), 6);
    // A marker for a producer with no open transaction still takes an offset, changes nothing.
    assert_eq!(p.append_marker(3, 0, commit(0), 5).unwrap().base_offset, 7);
    assert_eq!(p.last_stable_offset(), 6);
}

#[test]
fn refusals() {
    let (_disk, mut p) = fresh();
    p.append(&data(1, 2, 0, 1, true), 1).unwrap();
    // A non-transactional write inside an open transaction.
    assert!(matches!(
        p.append(&data(1, 2, 1, 1, false), 1),
        Err(ProduceError::InvalidTxnState)
    ));
    // A client may not write a control batch.
    let forged = control::marker_batch(1, 2, commit(0), 1);
    assert!(matches!(
        p.append(&forged, 1),
        Err(ProduceError::InvalidRecord(_))
    ));
    // A transactional batch without a producer id.
    assert!(matches!(
        p.append(&data(-1, -1, -1, 1, true), 1),
        Err(ProduceError::InvalidRecord(_))
    ));
    // Markers: an older epoch, then an older coordinator than the last marker's.
    assert!(matches!(
        p.append_marker(1, 1, commit(0), 1),
        Err(ProduceError::InvalidProducerEpoch)
    ));
    p.append_marker(1, 2, abort(5), 1).unwrap();
    p.append(&data(1, 2, 1, 1, true), 1).unwrap();
    assert!(matches!(
        p.append_marker(1, 2, commit(4), 1),
        Err(ProduceError::CoordinatorFenced)
    ));
    // A marker at a bumped epoch (the coordinator fenced the producer) closes it, and the
    // zombie's next write at the old epoch is refused.
    p.append_marker(1, 3, abort(5), 1).unwrap();
    assert_eq!(p.last_stable_offset(), p.high_watermark());
    assert!(matches!(
        p.append(&data(1, 2, 2, 1, true), 1),
        Err(ProduceError::InvalidProducerEpoch)
    ));
    // The retry of a transactional batch is still a duplicate.
    p.append(&data(1, 3, 0, 1, true), 1).unwrap();
    assert!(p.append(&data(1, 3, 0, 1, true), 1).unwrap().duplicate);
}

#[test]
fn transactions_survive_a_restart_with_or_without_a_snapshot() {
    for with_snapshot in [false, true] {
        let (disk, mut p) = fresh();
        p.append(&data(1, 0, 0, 1, true), 1).unwrap(); // 0
        p.append(&data(2, 0, 0, 1, true), 1).unwrap(); // 1
        p.append_marker(1, 0, abort(0), 1).unwrap(); // 2
        if with_snapshot {
            let (path, snapshot) = p.producer_snapshot();
            crate::io::memdisk::block_on(crate::io::write_file_atomic(&disk, &path, &snapshot))
                .unwrap();
        }
        p.append(&data(3, 0, 0, 1, true), 1).unwrap(); // 3
        p.append_marker(3, 0, abort(0), 1).unwrap(); // 4
        drop(p);
        disk.process_crash();
        let p = open(&disk);
        assert_eq!(p.open_transactions(), 1, "snapshot: {with_snapshot}");
        // Producer 2's transaction (at 1) is still open and holds the LSO.
        assert_eq!(p.last_stable_offset(), 1.min(p.high_watermark()));
        let (records, aborted) = p.read_committed(0, 1 << 20).unwrap();
        if p.high_watermark() > 0 {
            assert!(!records.is_empty());
            assert_eq!(
                aborted.iter().map(|a| a.producer_id).collect::<Vec<_>>(),
                [1]
            );
        }
        let mut p = p;
        assert!(matches!(
            p.append(&data(2, 0, 1, 1, false), 1),
            Err(ProduceError::InvalidTxnState)
        ));
        p.append_marker(2, 0, commit(0), 1).unwrap();
        assert_eq!(p.last_stable_offset(), p.high_watermark());
        let (_, aborted) = p.read_committed(0, 1 << 20).unwrap();
        assert_eq!(
            aborted
                .iter()
                .map(|a| (a.producer_id, a.first_offset))
                .collect::<Vec<_>>(),
            [(1, 0), (3, 3)]
        );
    }
}

#[test]
fn a_follower_tracks_transactions_and_truncation_reopens_one() {
    use super::follower::tests::{pair, tail};
    let disk = MemDisk::new(3);
    let (mut leader, mut follower) = pair(&disk); // 12 plain and idempotent batches
    let start = leader.log_end_offset();
    leader.append(&data(1, 0, 0, 2, true), 100).unwrap();
    leader.append(&data(2, 0, 0, 1, true), 100).unwrap();
    leader.append_marker(1, 0, abort(0), 100).unwrap();
    let marker = leader.log_end_offset() - 1;
    follower
        .append_as_follower(&tail(&leader, 0), 200)
        .unwrap()
        .unwrap();
    assert_eq!(follower.open_transactions(), 1);
    follower.follow_high_watermark(leader.log_end_offset());
    assert_eq!(
        follower.last_stable_offset(),
        start + 2,
        "producer 2 is open"
    );
    // (Reads go one segment at a time: read where the transactions are.)
    let (_, aborted) = follower.read_committed(start, 1 << 20).unwrap();
    assert_eq!(
        aborted
            .iter()
            .map(|a| (a.producer_id, a.first_offset, a.last_offset))
            .collect::<Vec<_>>(),
        [(1, start, marker)]
    );
    // Cutting the marker off reopens producer 1's transaction on the follower.
    let plan = follower.truncate_to(marker).unwrap().unwrap();
    crate::io::memdisk::block_on(plan.make_durable()).unwrap();
    follower.truncation_durable(&plan, 300);
    assert_eq!(follower.open_transactions(), 2);
    assert_eq!(
        follower.last_stable_offset(),
        start.min(follower.high_watermark())
    );
}

#[test]
fn a_coordinators_transactional_batches_carry_no_sequence_and_are_fenced_by_epoch() {
    let (_disk, mut p) = fresh();
    // The group coordinator's TxnOffsetCommit batches: producer 5, epoch 2, no sequence.
    let offsets = || {
        let mut b = BatchBuilder::new(10);
        b.push(Some(b"k"), Some(b"v"), 10);
        b.finish_transactional(5, 2)
    };
    let header = batch::check(&offsets()).unwrap();
    assert!(header.is_transactional() && !header.is_control());
    assert_eq!(header.base_sequence, -1);
    let first = p.append_from_coordinator(&offsets(), 10).unwrap();
    // A second one in the same transaction is appended, not taken for a retry.
    let second = p.append_from_coordinator(&offsets(), 10).unwrap();
    assert!(!second.duplicate && second.base_offset == first.base_offset + 1);
    assert!(p.has_open_transaction(5, 2));
    // A batch of a newer epoch is a later transaction's (v2 bumps at every end), not this one.
    assert!(!p.has_open_transaction(5, 3));
    // From a client the same bytes would be a retry of the first: the sequence check.
    assert!(p.append(&offsets(), 10).unwrap().duplicate);
    p.append_marker(5, 2, commit(0), 10).unwrap();
    assert!(!p.has_open_transaction(5, 2));
    // A zombie of an older epoch is refused.
    let mut b = BatchBuilder::new(10);
    b.push(Some(b"k"), Some(b"v"), 10);
    let stale = b.finish_transactional(5, 1);
    assert!(matches!(
        p.append_from_coordinator(&stale, 10),
        Err(ProduceError::InvalidProducerEpoch)
    ));
}

#[test]
fn compaction_never_lets_an_aborted_record_shadow_the_committed_value() {
    use crate::io::memdisk::block_on;
    struct StillClock;
    impl crate::io::Clock for StillClock {
        fn monotonic(&self) -> std::time::Duration {
            std::time::Duration::ZERO
        }
        fn wall_ms(&self) -> i64 {
            0
        }
        fn sleep(&self, _: std::time::Duration) -> crate::io::BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }
    let disk = MemDisk::new(3);
    block_on(crate::io::create_dir_all_durable(&disk, Path::new("/data"))).unwrap();
    let mut config = crate::config::ServerConfig::default_single_node().topic_defaults;
    config.cleanup_policy = crate::config::CleanupPolicy::Compact;
    config.segment_bytes = 300;
    let mut p = crate::io::memdisk::block_on(Partition::open(
        Arc::new(disk.clone()),
        Path::new("/data/c-0"),
        "c",
        0,
        config,
        Default::default(),
        0,
    ))
    .unwrap()
    .0;
    let keyed = |key: &str, value: &str| {
        let mut b = BatchBuilder::new(10);
        b.push(Some(key.as_bytes()), Some(value.as_bytes()), 10);
        b
    };
    // "k" committed (a group coordinator's plain commit), then a transaction writes "k" and
    // aborts (a TxnOffsetCommit whose transaction aborted); other keys fill segments.
    p.append(&keyed("k", "committed").finish(-1, -1, -1), 1)
        .unwrap();
    p.append_from_coordinator(&keyed("k", "aborted").finish_transactional(5, 0), 1)
        .unwrap();
    p.append_marker(5, 0, abort(0), 1).unwrap();
    for i in 0..20 {
        p.append(&keyed(&format!("f{}", i % 3), "x").finish(-1, -1, -1), 1)
            .unwrap();
    }
    let plan = p.log().flush_plan();
    block_on(crate::log::Log::sync_files(&plan)).unwrap();
    p.flushed(&plan, 1);
    let job = p.clean_job(100).unwrap().expect("a pass is due");
    let mut throttle = crate::log::cleaner::Throttle::new(f64::MAX, std::time::Duration::ZERO);
    let cleaned = block_on(job.run(1 << 20, 100, &StillClock, &mut throttle))
        .unwrap()
        .unwrap();
    block_on(cleaned.write_intent()).unwrap();
    let checkpoint = p.install_cleaned(&cleaned).unwrap();
    block_on(cleaned.commit(checkpoint)).unwrap();
    assert!(cleaned.stats.batches_dropped > 0, "the pass compacted");
    // The committed value of "k" is still there for a read_committed reader.
    let (records, aborted) = p.read_committed(0, 1 << 20).unwrap();
    let mut values = Vec::new();
    for item in batch::iter(&records) {
        let (at, header) = item.unwrap();
        let bytes = &records[at..at + header.total_len()];
        if header.is_control() || aborted.iter().any(|a| a.producer_id == header.producer_id) {
            continue;
        }
        for r in batch::records(bytes, &header).unwrap().unwrap() {
            if r.key == Some(b"k") {
                values.push(r.value.unwrap().to_vec());
            }
        }
    }
    assert_eq!(values, vec![b"committed".to_vec()]);
}

/// KIP-1228's marker epoch checks, from `testdata/marker_epochs.txt`: for each row a fresh
/// partition in the row's state gets the marker; an accepted one closes the transaction, a
/// refused one changes nothing.
#[test]
fn marker_epochs_follow_the_table() {
    let table = include_str!("testdata/marker_epochs.txt");
    let mut rows = 0;
    for line in table.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [state, epoch, version, answer] = fields[..] else {
            panic!("a row has four fields: {line}");
        };
        let epoch: i16 = epoch.parse().unwrap();
        let (_disk, mut p) = fresh();
        let open_before = match state.split_once('@') {
            None => {
                assert_eq!(state, "none", "{line}");
                false
            }
            Some((kind, at)) => {
                let at: i16 = at.parse().unwrap();
                p.append(&data(1, at, 0, 1, true), 1).unwrap();
                if kind == "closed" {
                    p.append_marker(1, at, commit(0), 1).unwrap();
                }
                kind == "open"
            }
        };
        let end = p.log_end_offset();
        let got = p.append_marker_as(1, epoch, abort(0), version == "v2", 2);
        match answer {
            "ok" => {
                assert_eq!(got.unwrap().base_offset, end, "{line}");
                assert_eq!(p.open_transactions(), 0, "{line}: closed");
            }
            "INVALID_PRODUCER_EPOCH" => {
                assert!(
                    matches!(got, Err(ProduceError::InvalidProducerEpoch)),
                    "{line}: {got:?}"
                );
                assert_eq!(p.log_end_offset(), end, "{line}: nothing written");
                assert_eq!(p.open_transactions() > 0, open_before, "{line}");
            }
            other => panic!("unknown answer {other}"),
        }
        rows += 1;
    }
    assert!(rows >= 10, "the table has its rows");
}

/// KIP-890 part 1 on the partition: a transactional batch that would open its producer's
/// transaction needs the guard handed out before the coordinator was asked, and a marker in
/// between voids it (the ABA case: verified, then aborted, then the "yes" arrives).
#[test]
fn a_verification_guard_opens_one_transaction_and_a_marker_voids_it() {
    let (_disk, mut p) = fresh();
    let guarded = Verification::Guarded;
    // Nothing asked of the coordinator: refused (a write before AddPartitionsToTxn).
    assert!(matches!(
        p.append_verified(&data(1, 0, 0, 1, true), 1, guarded(None)),
        Err(ProduceError::InvalidTxnState)
    ));
    let g = p.start_txn_verification(1, 0, 1).expect("nothing open");
    assert_eq!(
        p.start_txn_verification(1, 0, 1),
        Some(g),
        "a retry shares the guard"
    );
    // The coordinator's abort marker lands before the verified write: the guard is void.
    p.append_marker(1, 0, abort(0), 2).unwrap();
    assert!(matches!(
        p.append_verified(&data(1, 0, 0, 1, true), 3, guarded(Some(g))),
        Err(ProduceError::InvalidTxnState)
    ));
    assert_eq!(p.open_transactions(), 0, "no hanging transaction");
    // Verified again: a new guard, and the write opens the transaction.
    let g2 = p.start_txn_verification(1, 0, 4).unwrap();
    assert_ne!(g2, g);
    p.append_verified(&data(1, 0, 0, 1, true), 4, guarded(Some(g2)))
        .unwrap();
    assert_eq!(p.open_transactions(), 1);
    // Inside the open transaction nothing is asked and no guard is needed.
    assert_eq!(p.start_txn_verification(1, 0, 5), None);
    p.append_verified(&data(1, 0, 1, 1, true), 5, guarded(None))
        .unwrap();
    // A used guard does not open the next transaction.
    p.append_marker(1, 0, commit(0), 6).unwrap();
    assert!(matches!(
        p.append_verified(&data(1, 0, 2, 1, true), 7, guarded(Some(g2))),
        Err(ProduceError::InvalidTxnState)
    ));
    // Verification off: the write goes in unasked, as before KIP-890.
    p.append_verified(&data(1, 0, 2, 1, true), 8, Verification::Skipped)
        .unwrap();
    assert_eq!(p.open_transactions(), 1);
}

/// Transactions v2: the client has its EndTxn answer (the bumped epoch) once the coordinator's
/// Prepare* is durable, and may write the next transaction before the marker reached this
/// partition. That write is not part of the open transaction (Kafka's
/// `hasOngoingTransaction(producerId, epoch)`): it needs the coordinator's word, which waits
/// for the marker, and the marker then closes only the first transaction.
#[test]
fn a_write_at_the_next_epoch_waits_for_the_previous_transactions_marker() {
    let (_disk, mut p) = fresh();
    p.append(&data(1, 0, 0, 1, true), 1).unwrap();
    assert_eq!(p.start_txn_verification(1, 0, 1), None, "open at epoch 0");
    let early = p
        .start_txn_verification(1, 1, 1)
        .expect("not open at epoch 1");
    assert!(matches!(
        p.append_verified(&data(1, 1, 0, 1, true), 1, Verification::Guarded(None)),
        Err(ProduceError::InvalidTxnState)
    ));
    p.append_marker_as(1, 1, commit(0), true, 2).unwrap();
    assert_eq!(p.open_transactions(), 0);
    // The guard taken before the marker is void; the retry's verification opens transaction 2.
    assert!(matches!(
        p.append_verified(
            &data(1, 1, 0, 1, true),
            3,
            Verification::Guarded(Some(early))
        ),
        Err(ProduceError::InvalidTxnState)
    ));
    let g = p.start_txn_verification(1, 1, 3).unwrap();
    p.append_verified(&data(1, 1, 0, 1, true), 3, Verification::Guarded(Some(g)))
        .unwrap();
    assert_eq!(p.open_transactions(), 1);
}

/// After a v2 marker (at the bumped epoch) the producer state is the same whether kept in
/// memory, rebuilt at a restart, or cut back by a truncation: a late copy of the marker
/// cannot close the next transaction, and a cut marker leaves the transaction open at the data's
/// epoch for the coordinator's resend.
#[test]
fn producer_state_after_a_v2_marker_survives_restart_and_truncation() {
    let (disk, mut p) = fresh();
    p.append(&data(1, 0, 0, 1, true), 1).unwrap(); // 0
    p.append_marker_as(1, 1, commit(0), true, 1).unwrap(); // 1, the bumped epoch
    p.append(&data(1, 1, 0, 1, true), 1).unwrap(); // 2, transaction 2 at epoch 1
    drop(p);
    disk.process_crash();
    let mut p = open(&disk);
    assert_eq!(p.open_transactions(), 1);
    let epoch = |p: &Partition| p.active_producers()[0].epoch;
    assert_eq!(epoch(&p), 1);
    // A late copy of transaction 1's marker: refused, transaction 2 stays open.
    assert!(matches!(
        p.append_marker_as(1, 1, commit(0), true, 2),
        Err(ProduceError::InvalidProducerEpoch)
    ));
    assert_eq!(p.open_transactions(), 1);
    // A zombie's write at epoch 0.
    assert!(matches!(
        p.append(&data(1, 0, 1, 1, true), 2),
        Err(ProduceError::InvalidProducerEpoch)
    ));
    // Transaction 2's own marker, then its retry (a lost answer): both accepted.
    p.append_marker_as(1, 2, abort(0), true, 3).unwrap();
    p.append_marker_as(1, 2, abort(0), true, 3).unwrap();
    assert_eq!(p.open_transactions(), 0);
    assert_eq!(p.last_stable_offset(), p.high_watermark());

    // A follower that loses the marker in a truncation is back at the data's epoch, open.
    use super::follower::tests::{pair, tail};
    let disk = MemDisk::new(5);
    let (mut leader, mut follower) = pair(&disk);
    leader.append(&data(8, 3, 0, 1, true), 100).unwrap();
    leader.append_marker_as(8, 4, commit(0), true, 100).unwrap();
    let marker = leader.log_end_offset() - 1;
    follower
        .append_as_follower(&tail(&leader, 0), 200)
        .unwrap()
        .unwrap();
    let producer = |p: &Partition| {
        p.active_producers()
            .into_iter()
            .find(|a| a.producer_id == 8)
            .map(|a| (a.epoch, a.txn_start_offset.is_some()))
    };
    assert_eq!(producer(&follower), Some((4, false)));
    let plan = follower.truncate_to(marker).unwrap().unwrap();
    crate::io::memdisk::block_on(plan.make_durable()).unwrap();
    follower.truncation_durable(&plan, 300);
    assert_eq!(producer(&follower), Some((3, true)));
}
