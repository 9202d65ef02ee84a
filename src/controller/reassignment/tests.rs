//! Reassignments message by message: each request (AlterPartitionReassignments, a leader's
//! AlterPartition, a fencing) is decided against the image, its record applied (so every
//! registration rule is checked), and the registration compared with Kafka's.

use super::*;
use crate::controller::alter_partition::{alter_partition, Alteration};
use crate::controller::election::remove_broker;
use crate::controller::image::{MetadataRecord, PartitionRecord, TopicMeta};

const T: Uuid = Uuid::from_u128(7);

fn config(_: &TopicMeta) -> ElectionConfig {
    ElectionConfig {
        elr: true,
        min_isr: 1,
        unclean: false,
        recovery: None,
    }
}

fn unclean_config(t: &TopicMeta) -> ElectionConfig {
    ElectionConfig {
        unclean: true,
        ..config(t)
    }
}

/// Brokers 1..=4 registered and unfenced (broker `b`'s epoch is `b - 1`); partition t-0 on
/// [1, 2, 3], ISR [1, 2, 3], led by 1 at leader epoch 0.
struct World {
    image: MetadataImage,
    next: i64,
}

impl World {
    fn new() -> World {
        let mut image = MetadataImage::default();
        for id in 1..=4 {
            image.apply(
                id as i64 - 1,
                &MetadataRecord::RegisterBroker {
                    log_dirs: Vec::new(),
                    id,
                    incarnation: Uuid::from_u128(id as u128),
                    listeners: vec![],
                    rack: None,
                    fenced: true,
                },
            );
        }
        let mut offset = 4;
        for id in 1..=4 {
            image.apply(
                offset,
                &MetadataRecord::BrokerChange {
                    id,
                    epoch: id as i64 - 1,
                    fenced: Some(false),
                    in_controlled_shutdown: None,
                },
            );
            offset += 1;
        }
        image.apply(offset, &MetadataRecord::topic("t", T, Default::default()));
        image.apply(
            offset + 1,
            &MetadataRecord::Partition(PartitionRecord {
                directories: Vec::new(),
                topic_id: T,
                partition: 0,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2, 3],
                elr: vec![],
                last_known_elr: vec![],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovering: false,
            }),
        );
        World {
            image,
            next: offset + 2,
        }
    }

    fn p(&self) -> &PartitionRegistration {
        self.image.partition(T, 0).unwrap()
    }

    fn commit(&mut self, change: PartitionChange) {
        self.image
            .apply(self.next, &MetadataRecord::PartitionChange(change));
        self.next += 1;
    }

    fn reassign(&mut self, replicas: Option<&[i32]>) -> Result<bool, ControllerError> {
        let request = Reassign {
            topic: "t".into(),
            partition: 0,
            replicas: replicas.map(<[i32]>::to_vec),
            allow_rf_change: true,
        };
        let change = reassign(&self.image, &request, &config)?;
        let wrote = change.is_some();
        if let Some(c) = change {
            self.commit(c);
        }
        Ok(wrote)
    }

    /// The leader asks for `isr` (every member at its registered epoch).
    fn alter_isr(&mut self, isr: &[i32]) -> bool {
        let p = self.p().clone();
        let request = Alteration {
            topic_id: T,
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: isr.iter().map(|&r| (r, r as i64 - 1)).collect(),
            leader_recovering: false,
        };
        let accepted = alter_partition(&self.image, p.leader, &request, &config).unwrap();
        if let Some(c) = accepted.change {
            self.commit(c);
        }
        accepted.new_leader_elected
    }

    /// (replicas, isr, adding, removing, leader, leader epoch).
    fn shape(&self) -> (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>, i32, i32) {
        let p = self.p();
        (
            p.replicas.clone(),
            p.isr.clone(),
            p.adding_replicas.clone(),
            p.removing_replicas.clone(),
            p.leader,
            p.leader_epoch,
        )
    }

    fn listed(&self) -> Vec<Ongoing> {
        list(&self.image, None)
    }
}

fn v(s: &[i32]) -> Vec<i32> {
    s.to_vec()
}

#[test]
fn a_move_adds_then_completes_when_the_target_is_in_the_isr() {
    let mut w = World::new();
    // [1,2,3] -> [2,3,4]: 4 is added, 1 (the leader) will be removed.
    assert!(w.reassign(Some(&[2, 3, 4])).unwrap());
    assert_eq!(
        w.shape(),
        (v(&[2, 3, 4, 1]), v(&[1, 2, 3]), v(&[4]), v(&[1]), 1, 0),
        "replicas = target then removing; adding and removing set; no epoch bump"
    );
    assert_eq!(
        w.listed(),
        vec![Ongoing {
            topic: "t".into(),
            partition: 0,
            replicas: v(&[2, 3, 4, 1]),
            adding: v(&[4]),
            removing: v(&[1]),
        }]
    );
    // The leader's ISR shrinks and grows without the target in it: still in progress.
    assert!(!w.alter_isr(&[1, 2]));
    assert!(w.p().is_reassigning());
    assert!(!w.alter_isr(&[1, 2, 3]));
    assert!(w.p().is_reassigning());
    // 4 caught up: the expansion completes it. 1 leaves and led, so 2 leads at a new epoch.
    assert!(
        w.alter_isr(&[1, 2, 3, 4]),
        "the leader moved: NEW_LEADER_ELECTED"
    );
    assert_eq!(
        w.shape(),
        (v(&[2, 3, 4]), v(&[2, 3, 4]), v(&[]), v(&[]), 2, 1)
    );
    assert!(w.listed().is_empty());
    // Cancelling now: nothing in progress.
    assert!(matches!(
        w.reassign(None),
        Err(ControllerError::NoReassignmentInProgress(_))
    ));
}

#[test]
fn removing_a_follower_bumps_the_epoch_and_keeps_the_leader() {
    let mut w = World::new();
    // [1,2,3] -> [1,2,4]: 3 removed, 4 added.
    w.reassign(Some(&[1, 2, 4])).unwrap();
    assert_eq!(
        w.shape(),
        (v(&[1, 2, 4, 3]), v(&[1, 2, 3]), v(&[4]), v(&[3]), 1, 0)
    );
    // 3 fails meanwhile: out of the ISR, still being removed.
    let changes = remove_broker(&w.image, 3, &config);
    assert_eq!(changes.len(), 1);
    w.commit(changes.into_iter().next().unwrap());
    assert!(w.p().is_reassigning());
    assert!(!w.alter_isr(&[1, 2, 4]));
    assert_eq!(
        w.shape(),
        (v(&[1, 2, 4]), v(&[1, 2, 4]), v(&[]), v(&[]), 1, 1)
    );
}

#[test]
fn a_target_already_in_the_isr_completes_at_once() {
    let mut w = World::new();
    // A reorder: one record, no reassignment left, no epoch bump (nobody leaves).
    w.reassign(Some(&[3, 2, 1])).unwrap();
    assert_eq!(
        w.shape(),
        (v(&[3, 2, 1]), v(&[1, 2, 3]), v(&[]), v(&[]), 1, 0)
    );
    // A shrink to replicas in the ISR: completes in the same record, epoch bumped.
    w.reassign(Some(&[2, 3])).unwrap();
    assert_eq!(w.shape(), (v(&[2, 3]), v(&[2, 3]), v(&[]), v(&[]), 2, 1));
    // The same target again writes nothing.
    assert!(!w.reassign(Some(&[2, 3])).unwrap());
}

#[test]
fn cancel_reverts_to_the_original_replicas() {
    let mut w = World::new();
    w.reassign(Some(&[4, 2, 3])).unwrap();
    // The same target again writes nothing.
    assert!(!w.reassign(Some(&[4, 2, 3])).unwrap());
    // 3 drops out and 4 joins: the target [4, 2, 3] is not all in the ISR, still running.
    w.alter_isr(&[1, 2]);
    w.alter_isr(&[1, 2, 4]);
    assert_eq!(
        w.shape(),
        (v(&[4, 2, 3, 1]), v(&[1, 2, 4]), v(&[4]), v(&[1]), 1, 0)
    );
    // The cancel drops 4 from replicas and ISR (4 leaves: the leader epoch bumps).
    assert!(w.reassign(None).unwrap());
    assert_eq!(w.shape(), (v(&[2, 3, 1]), v(&[1, 2]), v(&[]), v(&[]), 1, 1));
    assert!(w.listed().is_empty());
}

#[test]
fn cancel_after_the_leader_moved_to_an_adding_replica_elects_an_original_one() {
    let mut w = World::new();
    w.reassign(Some(&[2, 3, 4])).unwrap();
    // 4 joins as 3 drops out (the target needs 3 too: still in progress); then 1 and 2 leave
    // the ISR, so the adding replica 4 leads alone.
    w.alter_isr(&[1, 2, 4]);
    assert!(w.p().is_reassigning());
    for broker in [1, 2] {
        let changes = remove_broker(&w.image, broker, &config);
        for c in changes {
            w.commit(c);
        }
    }
    assert_eq!(w.p().leader, 4);
    assert_eq!(w.p().isr, v(&[4]));
    // Reverting would leave an empty ISR: unclean, refused without unclean election.
    assert!(matches!(
        w.reassign(None),
        Err(ControllerError::InvalidReplicaAssignment(_))
    ));
    // With unclean election on for the topic, the first remaining replica is forced in (the
    // replicas keep their current order without the adding ones, as Kafka's revert).
    let request = Reassign {
        topic: "t".into(),
        partition: 0,
        replicas: None,
        allow_rf_change: true,
    };
    let change = reassign(&w.image, &request, &unclean_config)
        .unwrap()
        .unwrap();
    w.commit(change);
    let p = w.p();
    assert_eq!(
        (v(&p.replicas), v(&p.isr), p.leader),
        (v(&[2, 3, 1]), v(&[2]), 2)
    );
    assert!(!p.is_reassigning());
}

#[test]
fn retargeting_turns_unwanted_adding_replicas_into_removing_ones() {
    let mut w = World::new();
    w.reassign(Some(&[1, 2, 4])).unwrap();
    assert_eq!(w.p().replicas, v(&[1, 2, 4, 3]));
    // Now aim at [1, 2, 3]: 4 (an adding replica) is removed, nothing added, and since the
    // ISR already holds 1, 2, 3 it completes at once.
    w.reassign(Some(&[1, 2, 3])).unwrap();
    assert_eq!(
        w.shape(),
        (v(&[1, 2, 3]), v(&[1, 2, 3]), v(&[]), v(&[]), 1, 1)
    );
}

#[test]
fn bad_requests_are_refused_as_kafka_refuses_them() {
    let mut w = World::new();
    let invalid = |r: Result<bool, ControllerError>| {
        matches!(r, Err(ControllerError::InvalidReplicaAssignment(_)))
    };
    assert!(invalid(w.reassign(Some(&[]))), "empty");
    assert!(invalid(w.reassign(Some(&[1, 1, 2]))), "a duplicate");
    assert!(
        invalid(w.reassign(Some(&[1, 2, 9]))),
        "an unregistered broker"
    );
    assert!(matches!(
        w.reassign(None),
        Err(ControllerError::NoReassignmentInProgress(_))
    ));
    for (topic, partition) in [("nope", 0), ("t", 5)] {
        let request = Reassign {
            topic: topic.into(),
            partition,
            replicas: Some(v(&[1])),
            allow_rf_change: true,
        };
        assert!(matches!(
            reassign(&w.image, &request, &config),
            Err(ControllerError::UnknownTopic(_))
        ));
    }
    let same_rf = Reassign {
        topic: "t".into(),
        partition: 0,
        replicas: Some(v(&[2, 3])),
        allow_rf_change: false,
    };
    assert!(matches!(
        reassign(&w.image, &same_rf, &config),
        Err(ControllerError::InvalidReplicationFactor(_))
    ));
    // Nothing was written by any of them.
    assert_eq!(w.p().partition_epoch, 0);
}

#[test]
fn a_broker_with_every_directory_cordoned_takes_no_new_replica() {
    let mut w = World::new();
    let d = Uuid::from_u128(400);
    for record in [
        MetadataRecord::BrokerLogDirs {
            id: 4,
            epoch: 3,
            log_dirs: vec![d],
        },
        MetadataRecord::BrokerCordonedLogDirs {
            id: 4,
            epoch: 3,
            cordoned_log_dirs: vec![d],
        },
    ] {
        w.image.apply(w.next, &record);
        w.next += 1;
    }
    assert!(w.image.broker(4).unwrap().is_cordoned());
    assert!(matches!(
        w.reassign(Some(&[1, 2, 4])),
        Err(ControllerError::IneligibleReplica(_))
    ));
    // Moving away from cordoned brokers, or reordering, is what cordoning is for.
    w.reassign(Some(&[3, 2, 1])).unwrap();
    assert_eq!(w.p().replicas, v(&[3, 2, 1]));
}

#[test]
fn a_fenced_broker_may_be_a_target() {
    let mut w = World::new();
    let changes = remove_broker(&w.image, 4, &config);
    assert!(changes.is_empty());
    w.image.apply(
        w.next,
        &MetadataRecord::BrokerChange {
            id: 4,
            epoch: 3,
            fenced: Some(true),
            in_controlled_shutdown: None,
        },
    );
    w.next += 1;
    assert!(w.reassign(Some(&[1, 2, 4])).unwrap());
    assert_eq!(w.p().adding_replicas, v(&[4]));
}

#[test]
fn listing_named_partitions_leaves_out_unknown_and_idle_ones() {
    let mut w = World::new();
    w.reassign(Some(&[1, 2, 4])).unwrap();
    let named = vec![
        ("t".to_string(), vec![0, 0, 3]),
        ("nope".to_string(), vec![0]),
    ];
    let listed = list(&w.image, Some(&named));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].removing, v(&[3]));
}

#[test]
fn the_reassignment_survives_a_snapshot() {
    let mut w = World::new();
    w.reassign(Some(&[1, 2, 4])).unwrap();
    let restored = MetadataImage::from_snapshot(&w.image.to_snapshot()).unwrap();
    assert_eq!(restored.partition(T, 0), w.image.partition(T, 0));
}
