use std::collections::BTreeMap;

use super::*;
use crate::controller::election::ElectionConfig;
use crate::controller::image::{PartitionRecord, DIR_UNASSIGNED, NO_LEADER};
use crate::controller::{Controller, NewTopic};

const T: Uuid = Uuid::from_u128(77);

fn config(_: &TopicMeta) -> ElectionConfig {
    ElectionConfig {
        elr: true,
        min_isr: 2,
        unclean: false,
        recovery: None,
    }
}

fn dir(broker: i32, n: u128) -> Uuid {
    Uuid::from_u128(1000 * broker as u128 + n)
}

fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
    for r in records {
        let at = image.applied();
        image.apply(at, r);
    }
}

/// Brokers 1..=n unfenced, each with `dirs` directories.
fn cluster(n: i32, dirs: u128) -> MetadataImage {
    let mut image = MetadataImage::default();
    for id in 1..=n {
        let at = image.applied();
        apply(
            &mut image,
            &[
                MetadataRecord::RegisterBroker {
                    log_dirs: (0..dirs).map(|d| dir(id, d)).collect(),
                    id,
                    incarnation: Uuid::from_u128(id as u128),
                    listeners: vec![],
                    rack: None,
                    fenced: true,
                },
                MetadataRecord::BrokerChange {
                    id,
                    epoch: at,
                    fenced: Some(false),
                    in_controlled_shutdown: None,
                },
            ],
        );
    }
    image
}

fn partition(
    index: i32,
    replicas: &[i32],
    isr: &[i32],
    elr: &[i32],
    leader: i32,
) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        topic_id: T,
        partition: index,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        elr: elr.to_vec(),
        last_known_elr: vec![],
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        leader_recovering: false,
        directories: Vec::new(),
    })
}

fn controller() -> Controller {
    let defaults = crate::config::ServerConfig::default_single_node().topic_defaults;
    Controller::new(3, 1, true, defaults)
}

fn new_topic(name: &str, partitions: i32, rf: i16) -> NewTopic {
    NewTopic {
        name: name.into(),
        partitions,
        replication_factor: rf,
        ..NewTopic::default()
    }
}

#[test]
fn unregistering_an_unknown_id_is_refused() {
    let image = cluster(3, 1);
    let e = unregister(&image, 9, &config).unwrap_err();
    assert!(
        matches!(e, ControllerError::BrokerIdNotRegistered(_)),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "Broker ID 9 is not currently registered");
}

/// Broker 3 leads p0, is a follower in p1's ISR, in p2's ELR only, and a replica of p3
/// outside ISR and ELR: unregistering takes it out of every ISR and ELR (p0 elects another
/// leader), leaves p3 alone, keeps it in every replica list, and removes the registration.
#[test]
fn unregistering_takes_the_broker_out_of_every_isr_and_elr() {
    let mut image = cluster(3, 1);
    apply(
        &mut image,
        &[
            MetadataRecord::topic("t", T, BTreeMap::new()),
            partition(0, &[3, 1, 2], &[3, 1, 2], &[], 3),
            partition(1, &[1, 2, 3], &[1, 2, 3], &[], 1),
            partition(2, &[1, 2, 3], &[1, 2], &[3], 1),
            partition(3, &[2, 3, 1], &[2, 1], &[], 2),
        ],
    );
    let epoch = image.broker(3).unwrap().epoch;
    let records = unregister(&image, 3, &config).unwrap();
    assert_eq!(
        records.last(),
        Some(&MetadataRecord::UnregisterBroker { id: 3, epoch })
    );
    assert_eq!(
        records.len(),
        4,
        "p0, p1, p2 and the unregistration: {records:?}"
    );
    apply(&mut image, &records);
    assert!(image.broker(3).is_none());
    let p = |i| image.partition(T, i).unwrap().clone();
    assert_eq!((p(0).leader, p(0).isr.clone()), (1, vec![1, 2]));
    assert_eq!(p(1).isr, vec![1, 2]);
    assert_eq!((p(2).isr.clone(), p(2).elr.clone()), (vec![1, 2], vec![]));
    assert_eq!(p(3).partition_epoch, 0, "untouched");
    for i in 0..4 {
        assert!(p(i).replicas.contains(&3), "replicas stay until reassigned");
        assert!(!p(i).isr.contains(&3) && !p(i).elr.contains(&3));
    }
    // Twice: the second is refused, nothing is written.
    assert!(unregister(&image, 3, &config).is_err());
}

/// A sole ISR member unregistered leaves its partition leaderless (no unclean election).
#[test]
fn unregistering_the_last_isr_member_leaves_no_leader() {
    let mut image = cluster(2, 1);
    apply(
        &mut image,
        &[
            MetadataRecord::topic("t", T, BTreeMap::new()),
            partition(0, &[2, 1], &[2], &[], 2),
        ],
    );
    let records = unregister(&image, 2, &config).unwrap();
    apply(&mut image, &records);
    let p = image.partition(T, 0).unwrap();
    assert_eq!(
        (p.leader, p.isr.clone(), p.elr.clone()),
        (NO_LEADER, vec![], vec![])
    );
}

#[test]
fn a_heartbeats_cordoned_directories_are_recorded_once() {
    let mut image = cluster(2, 2);
    let epoch = image.broker(1).unwrap().epoch;
    // Unknown ids are ignored; the order of the report does not matter.
    let record = cordon(&image, 1, &[dir(1, 1), dir(2, 0), dir(1, 0)]).unwrap();
    assert_eq!(
        record,
        MetadataRecord::BrokerCordonedLogDirs {
            id: 1,
            epoch,
            cordoned_log_dirs: vec![dir(1, 0), dir(1, 1)],
        }
    );
    apply(&mut image, &[record]);
    assert!(image.broker(1).unwrap().is_cordoned());
    assert_eq!(
        cordon(&image, 1, &[dir(1, 0), dir(1, 1)]),
        None,
        "unchanged"
    );
    // Uncordoning one directory: no longer a cordoned broker.
    let record = cordon(&image, 1, &[dir(1, 1)]).unwrap();
    apply(&mut image, &[record]);
    let b = image.broker(1).unwrap();
    assert!(!b.is_cordoned());
    assert_eq!(b.placeable_log_dirs().collect::<Vec<_>>(), vec![dir(1, 0)]);
    assert_eq!(cordon(&image, 9, &[]), None, "not registered");
}

#[test]
fn new_partitions_avoid_cordoned_brokers() {
    let c = controller();
    let mut image = cluster(4, 1);
    let record = cordon(&image, 4, &[dir(4, 0)]).unwrap();
    apply(&mut image, &[record]);
    for entropy in 0..8 {
        let records = c
            .create_topic(&image, &new_topic("t", 8, 3), T, entropy)
            .unwrap();
        for r in &records[1..] {
            let MetadataRecord::Partition(p) = r else {
                panic!("{r:?}")
            };
            assert!(
                !p.replicas.contains(&4),
                "entropy {entropy}: {:?}",
                p.replicas
            );
        }
    }
    // Three brokers left: a replication factor of 4 cannot be reached.
    assert!(matches!(
        c.create_topic(&image, &new_topic("t", 1, 4), T, 0),
        Err(ControllerError::InvalidReplicationFactor(_))
    ));
    // Existing partitions can still grow onto the others.
    let records = c.create_topic(&image, &new_topic("t", 1, 3), T, 0).unwrap();
    apply(&mut image, &records);
    for r in c.create_partitions(&image, "t", 5, None, 3).unwrap() {
        let MetadataRecord::Partition(p) = r else {
            panic!("{r:?}")
        };
        assert!(!p.replicas.contains(&4));
    }
}

/// Kafka's `defaultDir`: a broker's only directory is assigned at creation; a broker with
/// two is left unassigned (it reports where it placed the replica).
#[test]
fn a_brokers_only_directory_is_assigned_at_creation() {
    let c = controller();
    let one = cluster(3, 1);
    let records = c.create_topic(&one, &new_topic("t", 3, 3), T, 0).unwrap();
    for r in &records[1..] {
        let MetadataRecord::Partition(p) = r else {
            panic!("{r:?}")
        };
        let want: Vec<Uuid> = p.replicas.iter().map(|b| dir(*b, 0)).collect();
        assert_eq!(p.directories, want);
    }
    let two = cluster(3, 2);
    let records = c.create_topic(&two, &new_topic("t", 3, 3), T, 0).unwrap();
    for r in &records[1..] {
        let MetadataRecord::Partition(p) = r else {
            panic!("{r:?}")
        };
        assert!(p.directories.is_empty(), "{:?}", p.directories);
    }
    // Mixed: the one-directory broker's entry is set, the other's unassigned.
    let mut mixed = cluster(1, 1);
    let at = mixed.applied();
    apply(
        &mut mixed,
        &[
            MetadataRecord::RegisterBroker {
                log_dirs: vec![dir(2, 0), dir(2, 1)],
                id: 2,
                incarnation: Uuid::from_u128(2),
                listeners: vec![],
                rack: None,
                fenced: true,
            },
            MetadataRecord::BrokerChange {
                id: 2,
                epoch: at,
                fenced: Some(false),
                in_controlled_shutdown: None,
            },
        ],
    );
    let records = c.create_topic(&mixed, &new_topic("t", 1, 2), T, 0).unwrap();
    let MetadataRecord::Partition(p) = &records[1] else {
        panic!()
    };
    let want: Vec<Uuid> = p
        .replicas
        .iter()
        .map(|b| if *b == 1 { dir(1, 0) } else { DIR_UNASSIGNED })
        .collect();
    assert_eq!(p.directories, want);
}
