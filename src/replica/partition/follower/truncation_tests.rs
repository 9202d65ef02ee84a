//! Truncation: log, indexes, epochs, producer state and high watermark roll back together, and
//! once the plan is durable a power loss never brings the cut tail back.

use std::path::Path;

use super::super::*;
use super::tests::{open_at, pair, tail};
use crate::io::memdisk::{block_on, MemDisk};
use crate::log::batch::{self, testing::batch};
use crate::replica::producer::SequenceCheck;

const FOLLOWER: &str = "/data/b/t-0";

/// A batch as a leader of `epoch` would serve it at `base`.
fn leader_batch(
    base: i64,
    epoch: i32,
    values: &[&[u8]],
    producer: Option<(i64, i16, i32)>,
) -> Vec<u8> {
    let mut b = batch(values, 10, producer);
    batch::set_base_offset(&mut b, base);
    batch::set_partition_leader_epoch(&mut b, epoch);
    b
}

/// The follower holding the leader's 18 offsets (epoch 3), its high watermark at 14.
fn replicated(disk: &MemDisk) -> Partition {
    let (leader, mut follower) = pair(disk);
    follower.append_as_follower(&tail(&leader, 0), 1).unwrap();
    follower.follow_high_watermark(14);
    follower
}

fn durable(p: &mut Partition) {
    let plan = p.log().flush_plan();
    block_on(crate::log::Log::sync_files(&plan)).unwrap();
    p.flushed(&plan, 0);
    let (path, snapshot) = p.producer_snapshot();
    block_on(crate::io::write_file_atomic(
        p.log().disk().as_ref(),
        &path,
        &snapshot,
    ))
    .unwrap();
    block_on(p.log().checkpoint().write()).unwrap();
}

fn truncate(p: &mut Partition, offset: i64) -> i64 {
    let plan = p.truncate_to(offset).unwrap().expect("something to cut");
    block_on(plan.make_durable()).unwrap();
    p.truncation_durable(&plan, 0);
    plan.end_offset
}

fn producer_check(p: &Partition, seq: i32) -> SequenceCheck {
    let header = batch::check(&batch(&[b"r", b"r"], 10, Some((7, 0, seq)))).unwrap();
    p.state.producers().check(&header)
}

#[test]
fn truncation_rolls_back_log_epochs_producers_and_high_watermark() {
    let disk = MemDisk::new(11);
    let mut f = replicated(&disk);
    f.become_follower(4).unwrap();
    f.append_as_follower(&leader_batch(18, 4, &[b"e4"], Some((7, 0, 12))), 1)
        .unwrap();
    assert_eq!(f.log().latest_epoch(), 4);
    // A cut inside the batch at 9..=10 takes the whole batch.
    assert_eq!(truncate(&mut f, 10), 9);
    assert_eq!(f.log_end_offset(), 9);
    assert_eq!(f.high_watermark(), 9);
    assert_eq!(f.log().latest_epoch(), 3);
    // The producer's batches at 9 and later are forgotten: seq 6 is new again, 4 a retry.
    assert_eq!(producer_check(&f, 6), SequenceCheck::Append);
    assert!(matches!(producer_check(&f, 4), SequenceCheck::Duplicate(m) if m.first_offset == 6));
    // Appends resume at the cut, in the new leader's epoch; reads see the new data.
    f.append_as_follower(&leader_batch(9, 5, &[b"new"], Some((7, 1, 0))), 1)
        .unwrap();
    assert_eq!(f.log().end_offset_for_epoch(3).end_offset, 9);
    let data = f.log().read(9, 1 << 16, i64::MAX).unwrap();
    assert_eq!(batch::check(&data).unwrap().partition_leader_epoch, 5);
    // A clean restart loads the indexes and the state the truncation left.
    block_on(f.log_mut().close(0)).unwrap();
    drop(f);
    let f = open_at(&disk, FOLLOWER);
    assert_eq!(f.log_end_offset(), 10);
    assert_eq!(f.log().epochs().entries().len(), 2);
    assert_eq!(
        producer_check(&f, 6),
        SequenceCheck::StaleEpoch { current: 1 }
    );
}

#[test]
fn a_snapshot_above_the_cut_is_deleted_and_one_below_it_used() {
    let disk = MemDisk::new(12);
    let mut f = replicated(&disk);
    durable(&mut f);
    let path = Path::new(FOLLOWER).join("producer-state");
    assert!(disk.exists(&path));
    truncate(&mut f, 12);
    assert!(
        !disk.exists(&path),
        "the snapshot at 18 described the cut tail"
    );
    assert_eq!(producer_check(&f, 8), SequenceCheck::Append);
    // A snapshot at 12, then more data, then a cut at 15: the snapshot stays and is used.
    durable(&mut f);
    f.append_as_follower(&leader_batch(12, 3, &[b"a", b"b"], Some((7, 0, 8))), 1)
        .unwrap();
    f.append_as_follower(&leader_batch(14, 3, &[b"c"], None), 1)
        .unwrap();
    f.append_as_follower(&leader_batch(15, 3, &[b"d", b"e"], Some((7, 0, 10))), 1)
        .unwrap();
    truncate(&mut f, 15);
    assert!(disk.exists(&path));
    assert!(matches!(producer_check(&f, 8), SequenceCheck::Duplicate(m) if m.first_offset == 12));
    assert_eq!(producer_check(&f, 10), SequenceCheck::Append);
}

#[test]
fn a_snapshot_from_another_history_is_not_trusted() {
    let disk = MemDisk::new(13);
    let mut f = replicated(&disk);
    durable(&mut f);
    let (path, stale) = f.producer_snapshot();
    truncate(&mut f, 12);
    // Other batches fill 12..18 again, then the stale snapshot lands (a checkpoint that raced
    // the truncation): its last batch does not match, so a start rebuilds instead.
    f.append_as_follower(&leader_batch(12, 5, &[&b"x"[..]; 6], Some((9, 0, 0))), 1)
        .unwrap();
    block_on(crate::io::write_file_atomic(&disk, &path, &stale)).unwrap();
    drop(f);
    disk.process_crash();
    let f = open_at(&disk, FOLLOWER);
    assert_eq!(f.log_end_offset(), 18);
    assert_eq!(producer_check(&f, 8), SequenceCheck::Append);
}

#[test]
fn after_a_durable_truncation_power_loss_never_brings_the_tail_back() {
    for seed in 0..40 {
        let disk = MemDisk::new(100 + seed);
        let mut f = replicated(&disk);
        durable(&mut f);
        f.become_follower(5).unwrap();
        assert_eq!(truncate(&mut f, 9), 9);
        // The new leader's batches, not yet fsynced, then the power goes.
        for i in 0..3 {
            let values: &[&[u8]] = &[b"new-data-new-data", b"more-new-data"];
            let b = leader_batch(9 + 2 * i, 5, values, None);
            f.append_as_follower(&b, 1).unwrap();
        }
        drop(f);
        disk.power_loss();
        let f = open_at(&disk, FOLLOWER);
        assert!(
            f.log_end_offset() >= 9,
            "seed {seed}: the durable prefix survives"
        );
        let data = tail(&f, 9);
        for item in batch::iter(&data) {
            let (_, h) = item.unwrap();
            assert_eq!(
                h.partition_leader_epoch, 5,
                "seed {seed}: an old batch came back at {}",
                h.base_offset
            );
        }
        assert_eq!(
            f.log().latest_epoch(),
            if f.log_end_offset() > 9 { 5 } else { 3 }
        );
        assert_eq!(producer_check(&f, 6), SequenceCheck::Append, "seed {seed}");
    }
}

#[test]
fn bad_truncations_change_nothing_and_appends_wait_for_durability() {
    let disk = MemDisk::new(14);
    let mut f = replicated(&disk);
    assert!(f.truncate_to(18).unwrap().is_none());
    assert!(f.truncate_to(99).unwrap().is_none());
    block_on(f.log().start_offset_write(6).write()).unwrap();
    f.log_mut().advance_start_offset(6).unwrap();
    let Err(e) = f.truncate_to(5) else {
        panic!("a truncation below the log start")
    };
    assert!(
        matches!(
            e,
            TruncateError::BelowLogStart {
                offset: 5,
                log_start: 6
            }
        ),
        "{e}"
    );
    assert_eq!(f.log_end_offset(), 18);
    // Until the cut is durable, nothing is appended behind it.
    let plan = f.truncate_to(12).unwrap().unwrap();
    let next = leader_batch(12, 3, &[b"z"], None);
    assert!(matches!(
        f.append_as_follower(&next, 1),
        Err(FollowerAppendError::TruncationPending { at: 12 })
    ));
    block_on(plan.make_durable()).unwrap();
    f.truncation_durable(&plan, 0);
    assert!(f.append_as_follower(&next, 1).unwrap().is_some());
    // A leader does not truncate.
    f.become_leader(LeaderView::replicated_for_tests(7), 0)
        .unwrap();
    assert!(matches!(f.truncate_to(10), Err(TruncateError::NotFollower)));
    assert_eq!(f.log_end_offset(), 13);
}

/// The follower core's cut for a leader's diverging epoch, from this partition's own log.
fn cut_of(p: &Partition, leader: crate::log::leader_epochs::EpochEnd) -> i64 {
    let own = p.log().end_offset_for_epoch(leader.epoch);
    crate::replica::fetcher::divergence_cut(leader, own, p.log_end_offset())
}

#[test]
fn the_divergence_cut_follows_our_own_end_of_the_leaders_epoch() {
    use crate::log::leader_epochs::EpochEnd;
    let disk = MemDisk::new(21);
    let mut b = open_at(&disk, FOLLOWER);
    b.become_follower(3).unwrap();
    // Notes §7.3: B holds [0..1: e1] and x@2 written as leader of e2.
    b.append_as_follower(&leader_batch(0, 1, &[b"a", b"b"], None), 1)
        .unwrap();
    b.append_as_follower(&leader_batch(2, 2, &[b"x"], None), 1)
        .unwrap();
    // C (cache {1: 0, 3: 5}) answers B's last fetched epoch 2 with (1, 5): B's epoch 1 ends at
    // 2, so x goes (pre-KIP-279 logic would cut at min(5, 3) and keep it).
    let cut = cut_of(
        &b,
        EpochEnd {
            epoch: 1,
            end_offset: 5,
        },
    );
    assert_eq!(cut, 2);
    // Our largest epoch at or below the leader's is another one: cut where ours ends, then the
    // next fetch asks about it.
    let mut c = open_at(&disk, "/data/c/t-0");
    c.become_follower(4).unwrap();
    c.append_as_follower(&leader_batch(0, 1, &[b"a"], None), 1)
        .unwrap();
    c.append_as_follower(&leader_batch(1, 3, &[b"y", b"z"], None), 1)
        .unwrap();
    let cut = cut_of(
        &c,
        EpochEnd {
            epoch: 2,
            end_offset: 4,
        },
    );
    assert_eq!(cut, 1, "epoch 1 ends at 1 here");
    // Never past our own end, and an empty log cuts nothing.
    let cut = cut_of(
        &c,
        EpochEnd {
            epoch: 3,
            end_offset: 9,
        },
    );
    assert_eq!(cut, 3);
    let mut empty = open_at(&disk, "/data/d/t-0");
    empty.become_follower(4).unwrap();
    assert_eq!(
        cut_of(
            &empty,
            EpochEnd {
                epoch: 3,
                end_offset: 9
            }
        ),
        0
    );
}

/// Kafka's `truncateFullyAndStartAt`: the follower's log (18 offsets) ends before the leader's
/// log start (30, deleted or retained away while it was gone).
fn restart(p: &mut Partition, at: i64) {
    let write = p.restart_plan(at).unwrap();
    block_on(write.write()).unwrap();
    let plan = p.restart_at(at, 0).unwrap();
    block_on(plan.make_durable()).unwrap();
    p.truncation_durable(&plan, 0);
}

#[test]
fn a_follower_behind_the_leaders_log_start_starts_over_there() {
    let disk = MemDisk::new(12);
    let mut f = replicated(&disk);
    durable(&mut f);
    // Only a follower that does not reach the leader's start restarts.
    assert!(matches!(
        f.restart_plan(18),
        Err(TruncateError::NotBehind { end: 18, .. })
    ));
    restart(&mut f, 30);
    assert_eq!(
        (f.log_start_offset(), f.log_end_offset(), f.high_watermark()),
        (30, 30, 30)
    );
    assert_eq!(f.log().latest_epoch(), -1, "no epoch left");
    // The producer's history went with the records: its next batch is judged afresh.
    assert_eq!(producer_check(&f, 6), SequenceCheck::Append);
    // The leader's log start was inside its batch 29..=30 (DeleteRecords is not batch
    // aligned): that batch, served whole, does not go on the log ending at 30; the empty log
    // starts again at its base.
    let straddling = leader_batch(29, 6, &[b"a", b"b"], None);
    assert!(matches!(
        f.append_as_follower(&straddling, 1),
        Err(FollowerAppendError::NotAtLogEnd {
            expected: 30,
            found: 29
        })
    ));
    restart(&mut f, 29);
    f.append_as_follower(&straddling, 1).unwrap();
    assert_eq!((f.log_start_offset(), f.log_end_offset()), (29, 31));
    // A log holding records never moves back.
    assert!(matches!(
        f.restart_plan(20),
        Err(TruncateError::NotBehind { end: 31, .. })
    ));
    // The leader's batches continue; a power loss keeps the restart.
    f.append_as_follower(&leader_batch(31, 6, &[b"c"], None), 1)
        .unwrap();
    assert_eq!(f.log_end_offset(), 32);
    drop(f);
    disk.power_loss();
    let f = open_at(&disk, FOLLOWER);
    assert_eq!(f.log_start_offset(), 29);
    assert!([29, 31, 32].contains(&f.log_end_offset()));
    for item in batch::iter(&tail(&f, 29)) {
        assert_eq!(
            item.unwrap().1.partition_leader_epoch,
            6,
            "only the new batches"
        );
    }
    // A leader never restarts.
    let (leader, _) = pair(&MemDisk::new(13));
    assert!(matches!(
        leader.restart_plan(100),
        Err(TruncateError::NotFollower)
    ));
}

#[test]
fn a_crash_between_the_halves_of_a_restart_opens_the_log_empty_at_the_new_start() {
    let disk = MemDisk::new(14);
    let mut f = replicated(&disk);
    durable(&mut f);
    let write = f.restart_plan(30).unwrap();
    block_on(write.write()).unwrap();
    drop(f);
    disk.power_loss();
    let f = open_at(&disk, FOLLOWER);
    assert_eq!((f.log_start_offset(), f.log_end_offset()), (30, 30));
}
