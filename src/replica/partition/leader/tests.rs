//! The replica set inside a real partition (in-memory disk): the high watermark moves only by
//! the ISR rule, follower fetches are checked, AlterPartition waits for the driver, a committed
//! ISR arrives through `become_leader`, and a partition on its own behaves as a single node.

use std::path::Path;
use std::sync::Arc;

use super::super::*;
use crate::io::memdisk::{block_on, MemDisk};
use crate::log::batch::testing::batch;
use crate::replica::isr::{Action, AlterOutcome, BrokerView, FetchRefused};

fn open(disk: &MemDisk, min_isr: i32) -> Partition {
    disk.create_dir_all(Path::new("/data")).unwrap();
    let mut config = crate::config::ServerConfig::default_single_node().topic_defaults;
    config.min_insync_replicas = min_isr;
    let open = Partition::open(
        Arc::new(disk.clone()),
        Path::new("/data/t-0"),
        "t",
        0,
        config,
        Default::default(),
        0,
    );
    block_on(open).unwrap().0
}

fn view(epoch: i32, partition_epoch: i32, isr: &[i32]) -> LeaderView {
    LeaderView {
        node: 1,
        leadership: crate::replica::isr::Leadership {
            leader_epoch: epoch,
            partition_epoch,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
        },
        brokers: (1..=3)
            .map(|r| {
                (
                    r,
                    BrokerView {
                        broker_epoch: 100 + r as i64,
                        eligible: true,
                    },
                )
            })
            .collect(),
        replica_lag_time_max_ms: 10_000,
    }
}

fn append(p: &mut Partition, n: usize) {
    for _ in 0..n {
        p.append(&batch(&[b"v"], 10, None), 1).unwrap();
    }
}

#[test]
fn the_high_watermark_waits_for_every_isr_follower() {
    let disk = MemDisk::new(1);
    let mut p = open(&disk, 2);
    p.become_leader(view(1, 1, &[1, 2, 3]), 0).unwrap();
    assert_eq!((p.isr_size(), p.maximal_isr_size()), (3, 3));
    append(&mut p, 3);
    assert_eq!(p.high_watermark(), 0, "no follower has fetched");
    p.follower_fetched(2, 3, 0, 102, 10).unwrap();
    assert_eq!(p.high_watermark(), 0, "follower 3 has not fetched");
    p.follower_fetched(3, 2, 0, 103, 10).unwrap();
    assert_eq!(p.high_watermark(), 2);
    p.follower_fetched(3, 3, 0, 103, 20).unwrap();
    assert_eq!(p.high_watermark(), 3);
    assert!(p.check_min_isr().is_ok());
    assert!(p.enough_replicas_after_append());
    assert_eq!(p.take_alter_partition(), None);
}

#[test]
fn bad_follower_fetches_are_refused_and_change_nothing() {
    let disk = MemDisk::new(2);
    let mut p = open(&disk, 2);
    p.become_leader(view(1, 1, &[1, 2, 3]), 0).unwrap();
    append(&mut p, 2);
    assert_eq!(
        p.follower_fetched(7, 1, 0, 1, 10),
        Err(FetchRefused::NotReplica)
    );
    assert_eq!(
        p.follower_fetched(2, 1, 0, 90, 10),
        Err(FetchRefused::StaleBrokerEpoch {
            sent: 90,
            current: 102
        })
    );
    assert_eq!(
        p.follower_fetched(2, 5, 0, 102, 10),
        Err(FetchRefused::PastLogEnd {
            fetch_offset: 5,
            log_end: 2
        })
    );
    assert_eq!(p.replica_set().unwrap().follower_log_end(2), Some(-1));
    // A follower has no replica set to fetch from.
    p.become_follower(2).unwrap();
    assert!(p.replica_set().is_none());
    assert_eq!(
        p.follower_fetched(2, 1, 0, 102, 10),
        Err(FetchRefused::NotReplica)
    );
}

#[test]
fn a_shrink_waits_for_the_driver_and_the_commit_arrives_by_the_image() {
    let disk = MemDisk::new(3);
    let mut p = open(&disk, 2);
    p.become_leader(view(1, 1, &[1, 2, 3]), 0).unwrap();
    append(&mut p, 4);
    p.follower_fetched(2, 4, 0, 102, 1_000).unwrap();
    assert_eq!(p.high_watermark(), 0, "3 is in the ISR and has nothing");
    // Follower 3 never fetches: past replica.lag.time.max.ms the leader proposes {1, 2}.
    p.tick_replicas(5_000);
    assert_eq!(p.take_alter_partition(), None, "3 is still within the lag");
    p.tick_replicas(10_001);
    let Some(Action::AlterPartition {
        leader_epoch,
        partition_epoch,
        isr,
    }) = p.take_alter_partition()
    else {
        panic!("a shrink was proposed");
    };
    assert_eq!((leader_epoch, partition_epoch), (1, 1));
    assert_eq!(isr, vec![(1, 101), (2, 102)]);
    assert_eq!(p.take_alter_partition(), None, "taken once");
    // Until it commits, the removed follower still holds the high watermark back (§1.7).
    assert_eq!(p.high_watermark(), 0);
    assert_eq!(p.isr_size(), 3);
    // Committed: the image brings the new ISR; the high watermark moves on 1 and 2.
    p.become_leader(view(1, 2, &[1, 2]), 10_002).unwrap();
    assert_eq!(p.isr_size(), 2);
    assert_eq!(p.high_watermark(), 4);
    // The controller's own answer afterwards is for a superseded state: ignored.
    p.alter_partition_done(AlterOutcome::Committed {
        leader_epoch: 1,
        partition_epoch: 2,
        isr: vec![1, 2],
    });
    assert_eq!(p.isr_size(), 2);
}

#[test]
fn below_min_isr_acks_all_is_refused_and_the_high_watermark_freezes() {
    let disk = MemDisk::new(4);
    let mut p = open(&disk, 2);
    p.become_leader(view(1, 1, &[1]), 0).unwrap();
    let e = p.check_min_isr().unwrap_err();
    assert_eq!((e.isr, e.required), (1, 2));
    assert!(!p.enough_replicas_after_append());
    append(&mut p, 2);
    assert_eq!(p.high_watermark(), 0, "strict min ISR: frozen");
    // Follower 2 catches up: it joins the maximal ISR at once (an expansion to send).
    p.follower_fetched(2, 2, 0, 102, 10).unwrap();
    assert_eq!(p.maximal_isr_size(), 2);
    assert!(p.enough_replicas_after_append());
    assert!(matches!(
        p.take_alter_partition(),
        Some(Action::AlterPartition { isr, .. }) if isr == vec![(1, 101), (2, 102)]
    ));
    // Still frozen until the expansion commits (the committed ISR is below the minimum).
    assert_eq!(p.high_watermark(), 0);
    p.alter_partition_done(AlterOutcome::Committed {
        leader_epoch: 1,
        partition_epoch: 2,
        isr: vec![1, 2],
    });
    assert_eq!(p.isr_size(), 2);
    assert_eq!(p.high_watermark(), 2);
}

#[test]
fn effective_min_isr_is_capped_at_the_replication_factor() {
    let disk = MemDisk::new(5);
    let mut p = open(&disk, 5);
    p.become_leader(view(1, 1, &[1, 2, 3]), 0).unwrap();
    assert!(p.check_min_isr().is_ok(), "min(5, 3 replicas) = 3");
    // On its own, the single-node rule: min.insync.replicas itself.
    let disk = MemDisk::new(6);
    let mut alone = open(&disk, 2);
    alone.become_leader(LeaderView::sole(1, 1), 0).unwrap();
    assert!(alone.replica_set().is_none());
    assert_eq!(alone.check_min_isr().unwrap_err().required, 2);
    assert!(!alone.enough_replicas_after_append());
}

#[test]
fn a_partition_on_its_own_follows_its_log_end_or_its_fsynced_end() {
    let disk = MemDisk::new(7);
    let mut p = open(&disk, 1);
    p.become_leader(LeaderView::sole(1, 1), 0).unwrap();
    append(&mut p, 2);
    assert_eq!(p.high_watermark(), 2);
    assert_eq!((p.isr_size(), p.maximal_isr_size()), (1, 1));
    assert_eq!(
        p.follower_fetched(2, 1, 0, 1, 1),
        Err(FetchRefused::NotReplica)
    );
    p.set_durable_reads(true);
    append(&mut p, 1);
    assert_eq!(p.high_watermark(), 2, "not fsynced yet");
    let plan = p.log().flush_plan();
    block_on(crate::log::Log::sync_files(&plan)).unwrap();
    p.flushed(&plan, 1);
    assert_eq!(p.high_watermark(), 3);
    assert_eq!(p.durable_log_end(), 3);
}

#[test]
fn durable_mode_counts_the_leader_only_up_to_its_fsynced_end() {
    let disk = MemDisk::new(8);
    let mut p = open(&disk, 2);
    p.set_durable_reads(true);
    p.become_leader(view(1, 1, &[1, 2]), 0).unwrap();
    append(&mut p, 3);
    p.follower_fetched(2, 3, 0, 102, 10).unwrap();
    assert_eq!(p.high_watermark(), 0, "the leader has fsynced nothing");
    let plan = p.log().flush_plan();
    block_on(crate::log::Log::sync_files(&plan)).unwrap();
    p.flushed(&plan, 1);
    assert_eq!(p.durable_log_end(), 3);
    assert_eq!(p.high_watermark(), 3);
}

#[test]
fn a_new_leader_epoch_forgets_followers_and_leadership_needs_the_isr() {
    let disk = MemDisk::new(9);
    let mut p = open(&disk, 1);
    p.become_leader(view(1, 1, &[1, 2]), 0).unwrap();
    append(&mut p, 2);
    p.follower_fetched(2, 2, 0, 102, 10).unwrap();
    assert_eq!(p.high_watermark(), 2);
    p.become_follower(2).unwrap();
    p.become_leader(view(3, 4, &[1, 2]), 20).unwrap();
    assert_eq!(p.replica_set().unwrap().follower_log_end(2), Some(-1));
    assert_eq!(p.high_watermark(), 2, "never back");
    assert!(matches!(
        p.become_leader(view(2, 5, &[1, 2]), 30),
        Err(LeaderRefused::Stale { .. })
    ));
    assert_eq!(
        p.become_leader(view(4, 5, &[2, 3]), 30),
        Err(LeaderRefused::NotInIsr)
    );
}

#[test]
fn a_reopened_replica_does_not_take_its_log_end_as_committed() {
    let disk = MemDisk::new(10);
    let mut p = open(&disk, 2);
    append(&mut p, 3);
    assert_eq!(p.high_watermark(), 3, "alone, its own end");
    drop(p);
    // Reopened as a replica of an RF=3 partition: the tail may never have been replicated.
    let mut p = open(&disk, 2);
    p.forget_high_watermark();
    assert_eq!(p.high_watermark(), 0);
    assert!(
        p.read(0, 1 << 20).unwrap().is_empty(),
        "consumers see nothing yet"
    );
    p.become_leader(view(2, 2, &[1, 2, 3]), 0).unwrap();
    assert_eq!(p.high_watermark(), 0);
    p.follower_fetched(2, 3, 0, 102, 10).unwrap();
    p.follower_fetched(3, 1, 0, 103, 10).unwrap();
    assert_eq!(p.high_watermark(), 1, "what the whole ISR holds");
}

#[test]
fn a_consumer_is_sent_to_an_in_sync_follower_in_its_rack_that_holds_its_offset() {
    let disk = MemDisk::new(9);
    let mut p = open(&disk, 1);
    p.become_leader(view(1, 1, &[1, 2, 3]), 0).unwrap();
    append(&mut p, 4);
    let rack = |b: i32| Some(format!("RACK{b}"));
    // No follower has fetched yet: none is known to hold anything.
    assert_eq!(p.preferred_read_replica(1, "RACK2", 0, 10, rack), None);
    p.follower_fetched(2, 4, 0, 102, 10).unwrap();
    p.follower_fetched(3, 2, 0, 103, 10).unwrap();
    assert_eq!(p.preferred_read_replica(1, "RACK2", 3, 10, rack), Some(2));
    // Follower 3 has only fetched up to 2: it may serve offset 2, not 3.
    assert_eq!(p.preferred_read_replica(1, "RACK3", 2, 10, rack), Some(3));
    assert_eq!(p.preferred_read_replica(1, "RACK3", 3, 10, rack), None);
    // The leader's own rack, an unknown rack, or no rack: read here.
    assert_eq!(p.preferred_read_replica(1, "RACK1", 0, 10, rack), None);
    assert_eq!(p.preferred_read_replica(1, "RACK9", 0, 10, rack), None);
    assert_eq!(p.preferred_read_replica(1, "", 0, 10, rack), None);
    // A follower the controller took out of the ISR is never chosen.
    p.become_leader(view(1, 2, &[1, 3]), 20).unwrap();
    assert_eq!(p.preferred_read_replica(1, "RACK2", 0, 30, rack), None);
    // A broker clients cannot reach (no rack known) matches no rack.
    p.follower_fetched(3, 4, 0, 103, 30).unwrap();
    assert_eq!(p.preferred_read_replica(1, "RACK3", 0, 30, |_| None), None);
    assert_eq!(p.preferred_read_replica(1, "RACK3", 4, 30, rack), Some(3));
}

#[test]
fn a_follower_serves_consumers_up_to_the_high_watermark_it_learned() {
    let disk = MemDisk::new(10);
    let mut leader = open(&disk, 1);
    leader.become_leader(view(1, 1, &[1, 2, 3]), 0).unwrap();
    append(&mut leader, 3);
    let mut follower = {
        disk.create_dir_all(Path::new("/data/f")).unwrap();
        let config = crate::config::ServerConfig::default_single_node().topic_defaults;
        let open = Partition::open(
            Arc::new(disk.clone()),
            Path::new("/data/f/t-0"),
            "t",
            0,
            config,
            Default::default(),
            0,
        );
        block_on(open).unwrap().0
    };
    follower.become_follower(1).unwrap();
    let all = leader.read_for_replica(0, 1 << 20).unwrap();
    follower.append_as_follower(&all, 1).unwrap();
    assert_eq!(follower.log_end_offset(), 3);
    // Nothing is committed yet as far as the follower knows.
    follower.follow_high_watermark(0);
    assert!(follower.read(0, 1 << 20).unwrap().is_empty());
    follower.follow_high_watermark(2);
    let read = follower.read(0, 1 << 20).unwrap();
    let last = crate::log::batch::iter(&read)
        .map(|b| b.unwrap().1.next_offset())
        .last();
    assert_eq!(last, Some(2), "never past the high watermark");
    // Between the high watermark and the log end: nothing yet; past the log end: out of range.
    assert!(follower.read(2, 1 << 20).unwrap().is_empty());
    assert!(follower.read(3, 1 << 20).unwrap().is_empty());
    assert!(matches!(
        follower.read(4, 1 << 20),
        Err(crate::log::ReadError::OffsetOutOfRange { .. })
    ));
}
