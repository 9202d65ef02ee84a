//! Follower appends between two partitions on one in-memory disk: the leader's bytes, offsets
//! and epochs land unchanged, producer state follows, bad input changes nothing.

use std::path::Path;
use std::sync::Arc;

use super::super::*;
use crate::io::memdisk::{block_on, MemDisk};
use crate::log::batch::testing::batch;

pub(in crate::replica) fn open_at(disk: &MemDisk, dir: &str) -> Partition {
    let mut config = crate::config::ServerConfig::default_single_node().topic_defaults;
    config.segment_bytes = 700;
    let open = Partition::open(
        Arc::new(disk.clone()),
        Path::new(dir),
        "t",
        0,
        config,
        Default::default(),
        0,
    );
    block_on(open).unwrap().0
}

/// Everything in `p`'s log from `from`, as the leader would serve a follower.
pub(in crate::replica) fn tail(p: &Partition, from: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = from;
    while offset < p.log_end_offset() {
        let data = p.log().read(offset, 1 << 20, i64::MAX).unwrap();
        let mut last = offset;
        for item in crate::log::batch::iter(&data) {
            last = item.unwrap().1.next_offset();
        }
        out.extend_from_slice(&data);
        offset = last;
    }
    out
}

/// A leader at epoch 3 with idempotent and plain batches, and an empty follower at epoch 3.
pub(in crate::replica) fn pair(disk: &MemDisk) -> (Partition, Partition) {
    let mut leader = open_at(disk, "/data/a/t-0");
    leader
        .become_leader(LeaderView::replicated_for_tests(3), 0)
        .unwrap();
    let mut follower = open_at(disk, "/data/b/t-0");
    follower.become_follower(3).unwrap();
    for i in 0..6 {
        let b = batch(
            &[format!("v{i}").repeat(20).as_bytes(), b"x"],
            10,
            Some((7, 0, 2 * i)),
        );
        leader.append(&b, 100).unwrap();
        leader.append(&batch(&[b"plain"], 10, None), 100).unwrap();
    }
    (leader, follower)
}

#[test]
fn follower_gets_the_leaders_bytes_offsets_epochs_and_producer_state() {
    let disk = MemDisk::new(1);
    let (leader, mut follower) = pair(&disk);
    let data = tail(&leader, 0);
    let got = follower.append_as_follower(&data, 200).unwrap().unwrap();
    assert_eq!(got.first_offset, 0);
    assert_eq!(got.last_offset, leader.log_end_offset() - 1);
    assert_eq!(got.batches, 12);
    assert_eq!(got.last_epoch, 3);
    assert_eq!(tail(&follower, 0), data, "nothing re-encoded");
    assert_eq!(follower.log().epochs(), leader.log().epochs());
    // The high watermark is the leader's, capped at the local end.
    follower.follow_high_watermark(5);
    assert_eq!(follower.high_watermark(), 5);
    follower.follow_high_watermark(1_000);
    assert_eq!(follower.high_watermark(), follower.log_end_offset());
    // Failover: the follower leads and recognises the producer's retry.
    follower
        .become_leader(LeaderView::replicated_for_tests(4), 0)
        .unwrap();
    let retry = batch(&["v5".repeat(20).as_bytes(), b"x"], 10, Some((7, 0, 10)));
    let again = follower.append(&retry, 300).unwrap();
    assert!(again.duplicate);
    assert_eq!(again.base_offset, 15);
    let next = batch(&[b"new"], 10, Some((7, 0, 12)));
    assert!(!follower.append(&next, 300).unwrap().duplicate);
    assert_eq!(follower.log().latest_epoch(), 4);
}

#[test]
fn appends_continue_from_the_log_end_in_pieces() {
    let disk = MemDisk::new(2);
    let (leader, mut follower) = pair(&disk);
    let first = leader.log().read(0, 1, i64::MAX).unwrap();
    follower.append_as_follower(&first, 1).unwrap();
    assert_eq!(follower.log_end_offset(), 2);
    let rest = tail(&leader, 2);
    follower.append_as_follower(&rest, 1).unwrap();
    assert_eq!(tail(&follower, 0), tail(&leader, 0));
    assert_eq!(follower.append_as_follower(&[], 1).unwrap(), None);
}

#[test]
fn gaps_overlaps_corruption_and_old_epochs_change_nothing() {
    let disk = MemDisk::new(3);
    let (leader, mut follower) = pair(&disk);
    let all = tail(&leader, 0);
    follower
        .append_as_follower(&leader.log().read(0, 1, i64::MAX).unwrap(), 1)
        .unwrap();
    let before = tail(&follower, 0);
    let check = |f: &Partition| {
        assert_eq!(tail(f, 0), before);
        assert_eq!(f.log_end_offset(), 2);
    };
    // Overlap: from 0 again.
    let e = follower.append_as_follower(&all, 1).unwrap_err();
    assert!(
        matches!(
            e,
            FollowerAppendError::NotAtLogEnd {
                expected: 2,
                found: 0
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("overlap"));
    check(&follower);
    // Gap: from 3 (a compacted leader's log may skip offsets): refused until the log takes
    // gaps durably.
    let later = tail(&leader, 3);
    let e = follower.append_as_follower(&later, 1).unwrap_err();
    assert!(matches!(e, FollowerAppendError::NeedsGapMarker), "{e}");
    check(&follower);
    // A bad CRC in the second batch: the first is not written either.
    let mut bad = tail(&leader, 2);
    let second = crate::log::batch::check(&bad).unwrap().total_len() + 30;
    bad[second] ^= 0x40;
    let e = follower.append_as_follower(&bad, 1).unwrap_err();
    assert!(matches!(e, FollowerAppendError::Corrupt(_)), "{e}");
    check(&follower);
    // A torn last batch.
    let good = tail(&leader, 2);
    let e = follower
        .append_as_follower(&good[..good.len() - 3], 1)
        .unwrap_err();
    assert!(matches!(e, FollowerAppendError::Corrupt(_)), "{e}");
    check(&follower);
    // Batches that skip within the response: the same.
    let one = leader.log().read(2, 1, i64::MAX).unwrap();
    let far = leader.log().read(5, 1, i64::MAX).unwrap();
    let e = follower
        .append_as_follower(&[one.to_vec(), far.to_vec()].concat(), 1)
        .unwrap_err();
    assert!(matches!(e, FollowerAppendError::NeedsGapMarker), "{e}");
    check(&follower);
    // Batches that go back within the response.
    let e = follower
        .append_as_follower(&[far.to_vec(), one.to_vec()].concat(), 1)
        .unwrap_err();
    assert!(
        matches!(
            e,
            FollowerAppendError::NotContiguous {
                expected: 6,
                found: 2
            }
        ),
        "{e}"
    );
    check(&follower);
    // An epoch older than the log's.
    let mut old = tail(&leader, 2);
    crate::log::batch::set_partition_leader_epoch(&mut old, 1);
    let e = follower.append_as_follower(&old, 1).unwrap_err();
    assert!(
        matches!(
            e,
            FollowerAppendError::EpochGoesBack {
                epoch: 1,
                latest: 3,
                ..
            }
        ),
        "{e}"
    );
    check(&follower);
    // A leader never appends as follower, and a follower takes no produce.
    let mut leader = leader;
    assert!(matches!(
        leader.append_as_follower(&later, 1),
        Err(FollowerAppendError::NotFollower)
    ));
    assert!(matches!(
        follower.append(&batch(&[b"p"], 1, None), 1),
        Err(ProduceError::NotLeader)
    ));
    check(&follower);
}

/// Whole batches of `p` holding offsets in `ranges` (batch-aligned), back to back: what a
/// leader whose cleaner removed everything else would serve.
fn batches_in(p: &Partition, ranges: &[(i64, i64)]) -> Vec<u8> {
    let all = tail(p, 0);
    let mut out = Vec::new();
    for item in crate::log::batch::iter(&all) {
        let (at, h) = item.unwrap();
        if ranges
            .iter()
            .any(|&(a, b)| h.base_offset >= a && h.last_offset() < b)
        {
            out.extend_from_slice(&all[at..at + h.total_len()]);
        }
    }
    out
}

#[test]
fn a_compacted_leaders_gaps_are_kept_and_survive_a_crash() {
    let disk = MemDisk::new(9);
    let (leader, mut follower) = pair(&disk);
    // Offsets 0..2, then 5..9, then 12.. : two gaps, one inside a response.
    let first = batches_in(&leader, &[(0, 2)]);
    follower.append_as_follower(&first, 1).unwrap();
    let gapped = batches_in(&leader, &[(5, 9), (12, i64::MAX)]);
    let e = follower.append_as_follower(&gapped, 1).unwrap_err();
    assert!(matches!(e, FollowerAppendError::NeedsGapMarker), "{e}");
    let marker = follower.log().gap_marker();
    block_on(marker.write(&disk, Path::new("/data/b/t-0"))).unwrap();
    follower.log_mut().allow_gaps();
    let got = follower.append_as_follower(&gapped, 1).unwrap().unwrap();
    assert_eq!(got.first_offset, 5);
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    let expected = [first.clone(), gapped.clone()].concat();
    assert_eq!(
        tail(&follower, 0),
        expected,
        "the leader's bytes at the leader's offsets"
    );
    // A read from inside a gap gets the next batch.
    let from_gap = follower.log().read(3, 1, i64::MAX).unwrap();
    assert_eq!(crate::log::batch::check(&from_gap).unwrap().base_offset, 5);
    // An unclean restart scans the segments and keeps the gapped data.
    let end = follower.log_end_offset();
    drop(follower);
    disk.process_crash();
    let mut follower = open_at(&disk, "/data/b/t-0");
    assert_eq!(follower.log_end_offset(), end);
    assert_eq!(tail(&follower, 0), expected);
    // And appends go on from the end.
    follower.become_follower(3).unwrap();
    assert!(follower.log().gaps_allowed());
}

#[test]
fn role_changes_never_go_back_in_epoch() {
    let disk = MemDisk::new(4);
    let (mut leader, mut follower) = pair(&disk);
    assert!(leader.become_follower(2).is_err());
    assert!(follower
        .become_leader(LeaderView::replicated_for_tests(1), 0)
        .is_err());
    // A leader elected at the log end records its epoch there before writing.
    leader
        .become_leader(LeaderView::replicated_for_tests(5), 0)
        .unwrap();
    let end = leader.log_end_offset();
    assert_eq!(leader.log().epochs().latest().unwrap().start_offset, end);
    // Becoming follower drops that empty epoch, so the old leader's epoch-3 data can follow.
    leader.become_follower(6).unwrap();
    assert_eq!(leader.log().latest_epoch(), 3);
}

#[test]
fn a_follower_adopts_the_leaders_log_start_durably_up_to_its_high_watermark() {
    let disk = MemDisk::new(7);
    let (leader, mut follower) = pair(&disk);
    follower.append_as_follower(&tail(&leader, 0), 200).unwrap();
    follower.follow_high_watermark(10);
    // The leader deleted up to 15; this follower holds only up to its high watermark as the
    // leader's, so its start moves to 10 (the next answers carry the rest).
    let write = follower.follower_log_start_plan(15).expect("a move");
    assert_eq!(write.offset(), 10);
    block_on(write.write()).unwrap();
    follower.advance_log_start(write.offset()).unwrap();
    assert_eq!(follower.log_start_offset(), 10);
    // Never back, nor to where it is.
    assert!(follower.follower_log_start_plan(5).is_none());
    assert!(follower.follower_log_start_plan(10).is_none());
    follower.follow_high_watermark(1_000);
    let write = follower.follower_log_start_plan(15).expect("a move");
    assert_eq!(write.offset(), 15);
    block_on(write.write()).unwrap();
    follower.advance_log_start(15).unwrap();
    // Durable: a restart opens the log there.
    drop(follower);
    let reopened = open_at(&disk, "/data/b/t-0");
    assert_eq!(reopened.log_start_offset(), 15);
    // A leader moves its own start only through DeleteRecords.
    assert!(leader.follower_log_start_plan(5).is_none());
}
