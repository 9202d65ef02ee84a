use super::*;
use crate::controller::brokers::{BrokerSessions, HeartbeatRequest, RegistrationRequest};
use crate::controller::image::{BrokerEndpoint, PartitionRecord, NO_LEADER};

const T: Uuid = Uuid::from_u128(77);
/// Broker b's directories: `dir(b, 0)` and `dir(b, 1)`.
fn dir(broker: i32, n: u64) -> Uuid {
    Uuid::from_u64_pair(broker as u64, 1000 + n)
}

fn config(_: &TopicMeta) -> ElectionConfig {
    ElectionConfig {
        elr: true,
        min_isr: 2,
        unclean: false,
        recovery: None,
    }
}

fn commit(image: &mut MetadataImage, records: &[MetadataRecord]) {
    for r in records {
        let at = image.applied();
        image.apply(at, r);
    }
}

fn beat(id: i32, image: &MetadataImage, offline: Vec<Uuid>) -> HeartbeatRequest {
    HeartbeatRequest {
        id,
        epoch: image.broker(id).unwrap().epoch,
        metadata_offset: image.applied() - 1,
        want_fence: false,
        want_shutdown: false,
        replica_logs: Vec::new(),
        offline_dirs: offline,
        cordoned_dirs: None,
    }
}

/// Brokers 1..=3, each with two directories, unfenced; topic "t" with partitions 0..4 on
/// [1, 2, 3] led by 1, 2, 3, 1; broker 1 placed partitions 0 and 2 in its first directory and
/// 1 and 3 in its second.
fn cluster(sessions: &mut BrokerSessions) -> MetadataImage {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        let request = RegistrationRequest {
            id,
            incarnation: Uuid::from_u128(id as u128),
            listeners: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9000 + id as u16,
            }],
            rack: None,
            previous_epoch: -1,
            durable: false,
            log_dirs: vec![dir(id, 0), dir(id, 1)],
        };
        let records = sessions.register(&image, &request, 0, &config).unwrap();
        commit(&mut image, &records);
    }
    for id in 1..=3 {
        let d = sessions
            .heartbeat(&image, &beat(id, &image, vec![]), 0, &config)
            .unwrap();
        commit(&mut image, &d.records);
    }
    commit(
        &mut image,
        &[MetadataRecord::topic("t", T, Default::default())],
    );
    for partition in 0..4 {
        let leader = [1, 2, 3, 1][partition as usize];
        commit(
            &mut image,
            &[MetadataRecord::Partition(PartitionRecord {
                topic_id: T,
                partition,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2, 3],
                elr: vec![],
                last_known_elr: vec![],
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovering: false,
                directories: Vec::new(),
            })],
        );
    }
    let assignments: Vec<((Uuid, i32), Uuid)> =
        (0..4).map(|p| ((T, p), dir(1, (p % 2) as u64))).collect();
    let epoch = image.broker(1).unwrap().epoch;
    let (records, accepted) = assign_dirs(&image, 1, epoch, &assignments).unwrap();
    assert_eq!(accepted, vec![true; 4]);
    commit(&mut image, &records);
    image
}

#[test]
fn an_assignment_records_the_replicas_directory_once() {
    let mut sessions = BrokerSessions::new(9000);
    let image = cluster(&mut sessions);
    let p = image.partition(T, 1).unwrap();
    assert_eq!(
        p.directories,
        vec![dir(1, 1), DIR_UNASSIGNED, DIR_UNASSIGNED]
    );
    assert_eq!(p.directory_of(1), Some(dir(1, 1)));
    // The same report again writes nothing; an unknown partition or a non-replica is refused.
    let epoch = image.broker(1).unwrap().epoch;
    let again = assign_dirs(&image, 1, epoch, &[((T, 1), dir(1, 1))]).unwrap();
    assert!(again.0.is_empty());
    let unknown = assign_dirs(&image, 1, epoch, &[((T, 9), dir(1, 1))]).unwrap();
    assert_eq!(unknown.1, vec![false]);
    // A stale epoch is refused as a whole.
    assert!(matches!(
        assign_dirs(&image, 1, epoch - 1, &[((T, 1), dir(1, 1))]),
        Err(ControllerError::StaleBrokerEpoch(_))
    ));
}

#[test]
fn a_failed_directory_takes_only_its_replicas_out_of_isr_and_leadership() {
    let mut sessions = BrokerSessions::new(9000);
    let mut image = cluster(&mut sessions);
    let d = sessions
        .heartbeat(&image, &beat(1, &image, vec![dir(1, 0)]), 10, &config)
        .unwrap();
    assert!(!d.reply.is_fenced, "the broker stays in service");
    commit(&mut image, &d.records);
    assert_eq!(image.broker(1).unwrap().log_dirs, vec![dir(1, 1)]);
    assert!(image.is_active_broker(1));
    for partition in [0, 2] {
        let p = image.partition(T, partition).unwrap();
        assert!(!p.isr.contains(&1), "{partition}: {p:?}");
        assert!(!p.elr.contains(&1), "{partition}: {p:?}");
        assert_ne!(p.leader, 1, "{partition}: {p:?}");
        assert_ne!(p.leader, NO_LEADER, "{partition}: {p:?}");
        assert!(replica_dir_offline(&image, (T, partition), 1));
    }
    // Partition 0 was led by 1: a new leader at a new epoch.
    assert_eq!(image.partition(T, 0).unwrap().leader_epoch, 1);
    // Partition 2 was led by 3: only its ISR changed.
    assert_eq!(image.partition(T, 2).unwrap().leader, 3);
    for partition in [1, 3] {
        let p = image.partition(T, partition).unwrap();
        assert_eq!(p.isr, vec![1, 2, 3], "{partition}: untouched");
        assert!(!replica_dir_offline(&image, (T, partition), 1));
    }
    assert_eq!(image.partition(T, 3).unwrap().leader, 1);
    // The report is cumulative: the next heartbeat with it writes nothing more.
    let again = sessions
        .heartbeat(&image, &beat(1, &image, vec![dir(1, 0)]), 20, &config)
        .unwrap();
    assert!(again.records.is_empty());
}

#[test]
fn an_unknown_or_other_brokers_directory_changes_nothing() {
    let mut sessions = BrokerSessions::new(9000);
    let image = cluster(&mut sessions);
    assert!(dirs_offline(&image, 1, &[dir(2, 0)], &config).is_empty());
    assert!(dirs_offline(&image, 1, &[], &config).is_empty());
    assert!(dirs_offline(&image, 9, &[dir(1, 0)], &config).is_empty());
}
