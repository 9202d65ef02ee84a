//! One case per rule in the module doc: a registration, a target ISR and who is acceptable in,
//! the registration after the change out.

use super::*;
use crate::controller::image::{MetadataRecord, PartitionRecord};

const T: Uuid = Uuid::from_u128(1);

#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    leader: i32,
    isr: Vec<i32>,
    elr: Vec<i32>,
    lke: Vec<i32>,
    recovering: bool,
}

fn state(leader: i32, isr: &[i32], elr: &[i32], lke: &[i32], recovering: bool) -> State {
    State {
        leader,
        isr: isr.to_vec(),
        elr: elr.to_vec(),
        lke: lke.to_vec(),
        recovering,
    }
}

/// Applies the change through an image, so every registration rule is checked too.
fn run(
    replicas: &[i32],
    before: &State,
    target_isr: &[i32],
    election: Election,
    config: ElectionConfig,
    acceptable: &[i32],
    unclean_shutdown: &[i32],
) -> Option<(State, i32)> {
    let mut image = MetadataImage::default();
    image.apply(0, &MetadataRecord::topic("t", T, Default::default()));
    image.apply(
        1,
        &MetadataRecord::Partition(PartitionRecord {
            directories: Vec::new(),
            topic_id: T,
            partition: 0,
            replicas: replicas.to_vec(),
            isr: before.isr.clone(),
            elr: before.elr.clone(),
            last_known_elr: before.lke.clone(),
            leader: before.leader,
            leader_epoch: 5,
            partition_epoch: 9,
            leader_recovering: before.recovering,
        }),
    );
    let p = image.partition(T, 0).unwrap().clone();
    let ok = |r: i32| acceptable.contains(&r);
    let change = change_partition(
        (T, 0),
        &p,
        target_isr.to_vec(),
        election,
        config,
        &ok,
        unclean_shutdown,
    )?;
    image.apply(2, &MetadataRecord::PartitionChange(change));
    let p = image.partition(T, 0).unwrap();
    assert_eq!(p.partition_epoch, 10);
    Some((
        state(
            p.leader,
            &p.isr,
            &p.elr,
            &p.last_known_elr,
            p.leader_recovering,
        ),
        p.leader_epoch - 5,
    ))
}

const ELR: ElectionConfig = ElectionConfig {
    elr: true,
    min_isr: 2,
    unclean: false,
    recovery: None,
};
const NO_ELR: ElectionConfig = ElectionConfig {
    elr: false,
    min_isr: 2,
    unclean: false,
    recovery: None,
};
const UNCLEAN: ElectionConfig = ElectionConfig {
    elr: true,
    min_isr: 2,
    unclean: true,
    recovery: None,
};
const UNCLEAN_NO_ELR: ElectionConfig = ElectionConfig {
    elr: false,
    min_isr: 2,
    unclean: true,
    recovery: None,
};

#[test]
fn elections_follow_the_rules() {
    use Election::*;
    let r3 = &[1, 2, 3][..];
    #[allow(clippy::type_complexity)]
    let cases: Vec<(
        &str,
        State,
        &[i32],
        Election,
        ElectionConfig,
        &[i32],
        &[i32],
        Option<(State, i32)>,
    )> = vec![
        (
            "a valid leader is kept; a shrink alone does not bump the leader epoch",
            state(1, &[1, 2, 3], &[], &[], false),
            &[1, 2],
            Online,
            NO_ELR,
            &[1, 2, 3],
            &[],
            Some((state(1, &[1, 2], &[], &[], false), 0)),
        ),
        (
            "clean election: the first acceptable ISR member in assignment order",
            state(1, &[3, 2, 1], &[], &[], false),
            &[3, 2],
            Online,
            NO_ELR,
            &[2, 3],
            &[],
            Some((state(2, &[3, 2], &[], &[], false), 1)),
        ),
        (
            "an ISR member that is not acceptable is skipped",
            state(1, &[1, 2, 3], &[], &[], false),
            &[2, 3],
            Online,
            NO_ELR,
            &[3],
            &[],
            Some((state(3, &[2, 3], &[], &[], false), 1)),
        ),
        (
            "without ELR the last ISR member stays and the partition is leaderless",
            state(1, &[1], &[], &[], false),
            &[],
            Online,
            NO_ELR,
            &[2, 3],
            &[],
            Some((state(-1, &[1], &[], &[], false), 1)),
        ),
        (
            "nothing to change is no record",
            state(1, &[1, 2], &[], &[], false),
            &[1, 2],
            Online,
            NO_ELR,
            &[1, 2],
            &[],
            None,
        ),
        (
            "ELR: a shrink below min ISR moves the leaving members into the ELR",
            state(1, &[1, 2], &[], &[], false),
            &[1],
            Online,
            ELR,
            &[1, 2, 3],
            &[],
            Some((state(1, &[1], &[2], &[], false), 0)),
        ),
        (
            "ELR: members that left while the ISR was at min ISR are not eligible",
            state(1, &[1, 2], &[], &[], false),
            &[1, 2],
            Online,
            ELR,
            &[1, 2],
            &[],
            None,
        ),
        (
            "ELR: an ISR back at min ISR clears the ELR",
            state(1, &[1], &[2], &[], false),
            &[1, 3],
            Online,
            ELR,
            &[1, 2, 3],
            &[],
            Some((state(1, &[1, 3], &[], &[], false), 0)),
        ),
        (
            "ELR: the ISR may become empty; the last leader is remembered",
            state(1, &[1], &[2], &[], false),
            &[],
            Online,
            ELR,
            &[3],
            &[],
            Some((state(-1, &[], &[1, 2], &[1], false), 1)),
        ),
        (
            "ELR: replicas that shut down uncleanly do not enter the ELR",
            state(1, &[1, 2], &[], &[], false),
            &[1],
            Online,
            ELR,
            &[1, 2, 3],
            &[2],
            Some((state(1, &[1], &[], &[], false), 0)),
        ),
        (
            "ELR: with an empty ISR an acceptable ELR member leads, alone in the ISR",
            state(-1, &[], &[1, 2], &[1], false),
            &[],
            Online,
            ELR,
            &[2, 3],
            &[],
            Some((state(2, &[2], &[1], &[], false), 1)),
        ),
        (
            "ELR: a non-ELR replica is not elected cleanly",
            state(-1, &[], &[1, 2], &[1], false),
            &[],
            Online,
            ELR,
            &[3],
            &[],
            None,
        ),
        (
            "unclean: the last known leader first, ISR = [it], recovering, ELR cleared",
            state(-1, &[], &[], &[2], false),
            &[],
            Online,
            UNCLEAN,
            &[1, 2, 3],
            &[],
            Some((state(2, &[2], &[], &[], true), 1)),
        ),
        (
            "whole-cluster crash (Kafka 4.x): the last known leader, back and acceptable, leads \
             with unclean election off; an unclean election: ISR = [it], recovering",
            state(-1, &[], &[], &[2], false),
            &[],
            Online,
            ELR,
            &[1, 2, 3],
            &[],
            Some((state(2, &[2], &[], &[], true), 1)),
        ),
        (
            "whole-cluster crash: a last known leader still fenced is not elected (KAFKA-19522), \
             and with unclean election off nobody else is",
            state(-1, &[], &[], &[2], false),
            &[],
            Online,
            ELR,
            &[1, 3],
            &[],
            None,
        ),
        (
            "the last known leader waits while an ELR member may still return",
            state(-1, &[], &[1], &[2], false),
            &[],
            Online,
            ELR,
            &[2, 3],
            &[],
            None,
        ),
        (
            "without ELR there is no last-known-leader election",
            state(-1, &[], &[], &[2], false),
            &[],
            Online,
            NO_ELR,
            &[1, 2, 3],
            &[],
            None,
        ),
        (
            "preferred: with nobody valid, the last known leader (uncleanly)",
            state(-1, &[], &[], &[2], false),
            &[],
            Preferred,
            ELR,
            &[1, 2, 3],
            &[],
            Some((state(2, &[2], &[], &[], true), 1)),
        ),
        (
            "preferred never makes the unclean pick, even with unclean election on",
            state(-1, &[], &[], &[2], false),
            &[],
            Preferred,
            UNCLEAN,
            &[1, 3],
            &[],
            None,
        ),
        (
            "unclean: else the first acceptable replica in assignment order",
            state(-1, &[], &[], &[2], false),
            &[],
            Online,
            UNCLEAN,
            &[1, 3],
            &[],
            Some((state(1, &[1], &[], &[], true), 1)),
        ),
        (
            "unclean without ELR: outside the ISR",
            state(-1, &[1], &[], &[], false),
            &[1],
            Online,
            UNCLEAN_NO_ELR,
            &[3],
            &[],
            Some((state(3, &[3], &[], &[], true), 1)),
        ),
        (
            "unclean is not tried while a clean candidate exists",
            state(1, &[1, 2], &[], &[], false),
            &[2],
            Online,
            UNCLEAN_NO_ELR,
            &[2, 3],
            &[],
            Some((state(2, &[2], &[], &[], false), 1)),
        ),
        (
            "unclean disabled: no leader, however many replicas are up",
            state(-1, &[1], &[], &[], false),
            &[1],
            Online,
            NO_ELR,
            &[2, 3],
            &[],
            None,
        ),
        (
            "preferred: replicas[0] when valid",
            state(2, &[1, 2, 3], &[], &[], false),
            &[1, 2, 3],
            Preferred,
            NO_ELR,
            &[1, 2, 3],
            &[],
            Some((state(1, &[1, 2, 3], &[], &[], false), 1)),
        ),
        (
            "preferred: else the current leader stays",
            state(2, &[2, 3], &[], &[], false),
            &[2, 3],
            Preferred,
            NO_ELR,
            &[1, 2, 3],
            &[],
            None,
        ),
        (
            "preferred: else another valid replica",
            state(-1, &[2, 3], &[], &[], false),
            &[2, 3],
            Preferred,
            NO_ELR,
            &[3],
            &[],
            Some((state(3, &[2, 3], &[], &[], false), 1)),
        ),
    ];
    for (name, before, target, election, config, acceptable, unclean_shutdown, want) in cases {
        let got = run(
            r3,
            &before,
            target,
            election,
            config,
            acceptable,
            unclean_shutdown,
        );
        assert_eq!(got, want, "{name}");
    }
}

fn cluster(elr: bool) -> MetadataImage {
    let partitions = [[1, 2, 3], [2, 3, 1], [3, 1, 2]].iter().enumerate();
    image_with(partitions.map(|(index, replicas)| PartitionRecord {
        directories: Vec::new(),
        topic_id: T,
        partition: index as i32,
        replicas: replicas.to_vec(),
        isr: if elr {
            replicas.to_vec()
        } else {
            vec![replicas[0]]
        },
        elr: vec![],
        last_known_elr: vec![],
        leader: replicas[0],
        leader_epoch: 0,
        partition_epoch: 0,
        leader_recovering: false,
    }))
}

/// An image with brokers 1..=3 registered and unfenced (epochs 0..=2), topic "t" (id `T`) and
/// `partitions` of it. Shared with the recovery tests.
pub(super) fn image_with(partitions: impl IntoIterator<Item = PartitionRecord>) -> MetadataImage {
    let brokers = (1..=3).map(|id| MetadataRecord::RegisterBroker {
        log_dirs: Vec::new(),
        id,
        incarnation: Uuid::from_u128(id as u128),
        listeners: vec![],
        rack: None,
        fenced: true,
    });
    let unfenced = (1..=3).map(|id| MetadataRecord::BrokerChange {
        id,
        epoch: id as i64 - 1,
        fenced: Some(false),
        in_controlled_shutdown: None,
    });
    let topic = MetadataRecord::topic("t", T, Default::default());
    let records = brokers
        .chain(unfenced)
        .chain([topic])
        .chain(partitions.into_iter().map(MetadataRecord::Partition));
    let mut image = MetadataImage::default();
    for (at, record) in records.enumerate() {
        image.apply(at as i64, &record);
    }
    image
}

#[test]
fn removing_a_broker_changes_every_partition_it_led_or_was_in_the_isr_of() {
    let image = cluster(true);
    let config = |_: &TopicMeta| ELR;
    let changes = remove_broker(&image, 1, &config);
    let got: Vec<(i32, Option<i32>, Option<Vec<i32>>)> = changes
        .iter()
        .map(|c| (c.partition, c.leader, c.isr.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (0, Some(2), Some(vec![2, 3])),
            (1, None, Some(vec![2, 3])),
            (2, None, Some(vec![3, 2])),
        ]
    );
}

#[test]
fn leaderless_partitions_are_elected_when_their_broker_returns() {
    // RF 3 but ISR = [leader]: fencing broker 1 leaves partition 0 leaderless (no ELR).
    let mut image = cluster(false);
    let config = |_: &TopicMeta| NO_ELR;
    let mut at = image.applied();
    image.apply(
        at,
        &MetadataRecord::BrokerChange {
            id: 1,
            epoch: 0,
            fenced: Some(true),
            in_controlled_shutdown: None,
        },
    );
    at += 1;
    for c in remove_broker(&image, 1, &config) {
        image.apply(at, &MetadataRecord::PartitionChange(c));
        at += 1;
    }
    assert_eq!(image.partition(T, 0).unwrap().leader, NO_LEADER);
    // Unfencing: broker 1 counts as acceptable before its BrokerChange is applied.
    let changes = elect_leaderless(&image, Some(1), &config);
    assert_eq!(changes.len(), 1);
    assert_eq!((changes[0].partition, changes[0].leader), (0, Some(1)));
    assert!(elect_leaderless(&image, None, &config).is_empty());
}

#[test]
fn preferred_election_moves_only_to_a_valid_preferred_replica() {
    let mut image = cluster(true);
    let config = |_: &TopicMeta| ElectionConfig { min_isr: 1, ..ELR };
    let mut change = PartitionChange::new(T, 0);
    change.leader = Some(2);
    image.apply(image.applied(), &MetadataRecord::PartitionChange(change));
    let all = [(T, 0), (T, 1), (T, 2)];
    let changes = elect_preferred(&image, &all, &config);
    assert_eq!(changes.len(), 1);
    assert_eq!((changes[0].partition, changes[0].leader), (0, Some(1)));
}

#[test]
fn elect_leaders_requests_answer_as_kafka_does() {
    let mut image = cluster(true);
    let config = |_: &TopicMeta| ElectionConfig { min_isr: 1, ..ELR };
    // Already preferred: nothing to do.
    assert_eq!(elect_on_request(&image, (T, 0), false, &config), Ok(None));
    let mut change = PartitionChange::new(T, 0);
    change.leader = Some(2);
    change.isr = Some(vec![2, 3]);
    image.apply(image.applied(), &MetadataRecord::PartitionChange(change));
    // The preferred replica 1 left the ISR: not available.
    assert!(matches!(
        elect_on_request(&image, (T, 0), false, &config),
        Err(ControllerError::PreferredLeaderNotAvailable(_))
    ));
    // Unclean on a partition with a leader: not needed.
    assert_eq!(elect_on_request(&image, (T, 0), true, &config), Ok(None));
    assert!(matches!(
        elect_on_request(&image, (T, 9), false, &config),
        Err(ControllerError::UnknownTopic(_))
    ));
    // Leaderless with nobody in the ISR or ELR: unclean election picks a live replica.
    let mut change = PartitionChange::new(T, 1);
    change.leader = Some(NO_LEADER);
    change.isr = Some(vec![]);
    image.apply(image.applied(), &MetadataRecord::PartitionChange(change));
    let c = elect_on_request(&image, (T, 1), true, &config)
        .unwrap()
        .unwrap();
    assert_eq!((c.leader, c.leader_recovering), (Some(2), Some(true)));
    // After a whole-cluster crash (ISR and ELR empty, last known leader 2, replicas [3, 1, 2]):
    // UNCLEAN prefers the last known leader over assignment order.
    let mut change = PartitionChange::new(T, 2);
    change.leader = Some(NO_LEADER);
    change.isr = Some(vec![]);
    change.last_known_elr = Some(vec![2]);
    image.apply(image.applied(), &MetadataRecord::PartitionChange(change));
    let c = elect_on_request(&image, (T, 2), true, &config)
        .unwrap()
        .unwrap();
    assert_eq!((c.leader, c.leader_recovering), (Some(2), Some(true)));
}
