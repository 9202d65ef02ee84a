use super::*;
use crate::controller::image::{MetadataRecord, PartitionRecord, TopicMeta};

const T: Uuid = Uuid::from_u128(5);

fn config(_: &TopicMeta) -> ElectionConfig {
    ElectionConfig {
        elr: true,
        min_isr: 1,
        unclean: false,
        recovery: None,
    }
}

/// Brokers 1..=4 (epochs 0..=3), 1..=3 unfenced, 4 fenced; partition 0 on [1, 2, 3] led by 1
/// at leader epoch 0 and partition epoch 0, ISR [1, 2].
fn image(recovering: bool) -> MetadataImage {
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
                fenced: id == 4,
            },
        );
    }
    image.apply(4, &MetadataRecord::topic("t", T, Default::default()));
    image.apply(
        5,
        &MetadataRecord::Partition(PartitionRecord {
            directories: Vec::new(),
            topic_id: T,
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: if recovering { vec![1] } else { vec![1, 2] },
            elr: vec![],
            last_known_elr: vec![],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            leader_recovering: recovering,
        }),
    );
    image
}

fn alteration(isr: &[(i32, i64)]) -> Alteration {
    Alteration {
        topic_id: T,
        partition: 0,
        leader_epoch: 0,
        partition_epoch: 0,
        new_isr: isr.to_vec(),
        leader_recovering: false,
    }
}

#[test]
fn a_valid_expansion_is_a_partition_change() {
    let image = image(false);
    check_sender(&image, 1, 0).unwrap();
    let accepted =
        alter_partition(&image, 1, &alteration(&[(1, 0), (2, 1), (3, 2)]), &config).unwrap();
    let change = accepted.change.unwrap();
    assert_eq!(change.isr, Some(vec![1, 2, 3]));
    assert_eq!(change.leader, None, "an ISR change keeps the leader epoch");
    assert!(!accepted.new_leader_elected);
    // The same ISR again changes nothing.
    let same = alter_partition(&image, 1, &alteration(&[(1, 0), (2, -1)]), &config).unwrap();
    assert_eq!(same.change, None);
}

#[test]
fn checks_run_in_kafkas_order() {
    let image = image(false);
    assert!(matches!(
        check_sender(&image, 1, 7),
        Err(ControllerError::StaleBrokerEpoch(_))
    ));
    assert!(matches!(
        check_sender(&image, 9, 0),
        Err(ControllerError::StaleBrokerEpoch(_))
    ));
    let base = alteration(&[(1, 0)]);
    type Case = (
        &'static str,
        i32,
        fn(&mut Alteration),
        fn(&ControllerError) -> bool,
    );
    let cases: Vec<Case> = vec![
        (
            "unknown topic id",
            1,
            |a| a.topic_id = Uuid::from_u128(6),
            |e| matches!(e, ControllerError::UnknownTopicId(_)),
        ),
        (
            "unknown partition",
            1,
            |a| a.partition = 3,
            |e| matches!(e, ControllerError::UnknownTopic(_)),
        ),
        // Ahead of the registry is checked before the sender is the leader.
        (
            "leader epoch ahead",
            2,
            |a| a.leader_epoch = 1,
            |e| matches!(e, ControllerError::NotController(_)),
        ),
        (
            "partition epoch ahead",
            1,
            |a| a.partition_epoch = 1,
            |e| matches!(e, ControllerError::NotController(_)),
        ),
        (
            "not the leader",
            2,
            |_| {},
            |e| matches!(e, ControllerError::InvalidRequest(_)),
        ),
        (
            "isr outside the replicas",
            1,
            |a| a.new_isr = vec![(1, 0), (4, 3)],
            |e| matches!(e, ControllerError::InvalidRequest(_)),
        ),
        (
            "isr without the leader",
            1,
            |a| a.new_isr = vec![(2, 1)],
            |e| matches!(e, ControllerError::InvalidRequest(_)),
        ),
        (
            "isr repeats",
            1,
            |a| a.new_isr = vec![(1, 0), (1, 0)],
            |e| matches!(e, ControllerError::InvalidRequest(_)),
        ),
        (
            "recovered to recovering",
            1,
            |a| a.leader_recovering = true,
            |e| matches!(e, ControllerError::InvalidRequest(_)),
        ),
        (
            "member with another broker epoch",
            1,
            |a| a.new_isr = vec![(1, 0), (3, 9)],
            |e| matches!(e, ControllerError::IneligibleReplica(_)),
        ),
    ];
    for (name, sender, edit, want) in cases {
        let mut a = base.clone();
        edit(&mut a);
        let got = alter_partition(&image, sender, &a, &config);
        assert!(got.as_ref().is_err_and(want), "{name}: {got:?}");
    }
}

#[test]
fn stale_epochs_are_fenced_or_outdated() {
    let mut image = image(false);
    // Two changes: leader epoch 1 (same leader re-elected), partition epoch 2.
    let mut bump = crate::controller::PartitionChange::new(T, 0);
    bump.leader = Some(1);
    image.apply(6, &MetadataRecord::PartitionChange(bump));
    let mut isr = crate::controller::PartitionChange::new(T, 0);
    isr.isr = Some(vec![1, 2, 3]);
    image.apply(7, &MetadataRecord::PartitionChange(isr));
    let mut a = alteration(&[(1, 0)]);
    assert!(matches!(
        alter_partition(&image, 1, &a, &config),
        Err(ControllerError::FencedLeaderEpoch(_))
    ));
    // A leader epoch below wins over a wrong sender (FENCED_LEADER_EPOCH first).
    assert!(matches!(
        alter_partition(&image, 2, &a, &config),
        Err(ControllerError::FencedLeaderEpoch(_))
    ));
    a.leader_epoch = 1;
    a.partition_epoch = 1;
    assert!(matches!(
        alter_partition(&image, 1, &a, &config),
        Err(ControllerError::InvalidUpdateVersion(_))
    ));
    a.partition_epoch = 2;
    assert_eq!(
        alter_partition(&image, 1, &a, &config)
            .unwrap()
            .change
            .unwrap()
            .isr,
        Some(vec![1])
    );
}

#[test]
fn fenced_or_shutting_down_members_are_ineligible() {
    let mut image = image(false);
    let mut a = alteration(&[(1, 0), (2, 1), (3, 2)]);
    image.apply(
        6,
        &MetadataRecord::BrokerChange {
            id: 3,
            epoch: 2,
            fenced: None,
            in_controlled_shutdown: Some(true),
        },
    );
    assert!(matches!(
        alter_partition(&image, 1, &a, &config),
        Err(ControllerError::IneligibleReplica(_))
    ));
    a.new_isr = vec![(1, 0), (2, 1)];
    assert_eq!(
        alter_partition(&image, 1, &a, &config).unwrap().change,
        None
    );
}

#[test]
fn a_recovering_leader_reports_recovered_before_the_isr_grows() {
    let image = image(true);
    let mut a = alteration(&[(1, 0), (2, 1)]);
    a.leader_recovering = true;
    assert!(matches!(
        alter_partition(&image, 1, &a, &config),
        Err(ControllerError::InvalidRequest(_))
    ));
    let mut recovered = alteration(&[(1, 0)]);
    recovered.leader_recovering = false;
    let change = alter_partition(&image, 1, &recovered, &config)
        .unwrap()
        .change
        .unwrap();
    assert_eq!((change.leader_recovering, change.isr), (Some(false), None));
}

#[test]
fn a_request_is_decided_partition_by_partition_and_answered_as_committed() {
    let image = image(false);
    // The sender's epoch answers the whole request.
    assert!(matches!(
        alter_partitions(&image, 1, 5, &[alteration(&[(1, 0)])], &config),
        Err(ControllerError::StaleBrokerEpoch(_))
    ));
    let shrink = alteration(&[(1, 0)]);
    let mut unknown = alteration(&[(1, 0)]);
    unknown.partition = 9;
    let decided = alter_partitions(
        &image,
        1,
        0,
        &[shrink.clone(), unknown, shrink.clone()],
        &config,
    )
    .unwrap();
    assert_eq!(decided.records.len(), 1, "one change: the shrink");
    let answers: Vec<_> = decided.answers.iter().map(|(_, a)| a.clone()).collect();
    // The answer is the partition after the change: ISR [1], partition epoch bumped, the
    // leader epoch not (an ISR change moves no leadership).
    match &answers[0] {
        PartitionAnswer::Done(p) => {
            assert_eq!(
                (&p.isr, p.leader, p.leader_epoch, p.partition_epoch),
                (&vec![1], 1, 0, 1)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        answers[1],
        PartitionAnswer::Refused(ControllerError::UnknownTopic(_))
    ));
    // Named twice: the second is refused, so the records always fit the image.
    assert!(matches!(
        answers[2],
        PartitionAnswer::Refused(ControllerError::InvalidRequest(_))
    ));
    let mut after = image.clone();
    for r in &decided.records {
        let at = after.applied();
        after.apply(at, r);
    }
    match &answers[0] {
        PartitionAnswer::Done(p) => assert_eq!(after.partition(T, 0), Some(p)),
        _ => unreachable!(),
    }
    // The leader's next request with the old partition epoch is outdated.
    let again = alter_partitions(&after, 1, 0, &[shrink], &config).unwrap();
    assert!(matches!(
        again.answers[0].1,
        PartitionAnswer::Refused(ControllerError::InvalidUpdateVersion(_))
    ));
    // An unchanged ISR writes nothing and answers the current state.
    let mut same = alteration(&[(1, 0)]);
    same.partition_epoch = 1;
    let decided = alter_partitions(&after, 1, 0, &[same], &config).unwrap();
    assert!(decided.records.is_empty());
    assert!(matches!(&decided.answers[0].1, PartitionAnswer::Done(p) if p.partition_epoch == 1));
}
