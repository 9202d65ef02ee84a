use std::collections::BTreeMap;

use super::*;

fn endpoint(port: u16) -> BrokerEndpoint {
    BrokerEndpoint {
        name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port,
    }
}

fn register(id: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker {
        log_dirs: Vec::new(),
        id,
        incarnation: Uuid::from_u128(id as u128),
        listeners: vec![endpoint(9000 + id as u16)],
        rack: None,
        fenced: true,
    }
}

const T: Uuid = Uuid::from_u128(7);

fn partition(index: i32, replicas: &[i32]) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        directories: Vec::new(),
        topic_id: T,
        partition: index,
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
        elr: vec![],
        last_known_elr: vec![],
        leader: replicas[0],
        leader_epoch: 0,
        partition_epoch: 0,
        leader_recovering: false,
    })
}

/// An image with brokers 1..=3 (1 and 2 unfenced) and topic "t" of two partitions.
fn image() -> MetadataImage {
    let mut image = MetadataImage::default();
    let mut offset = 0;
    let mut apply = |image: &mut MetadataImage, r: MetadataRecord| {
        image.apply(offset, &r);
        offset += 1;
    };
    for id in 1..=3 {
        apply(&mut image, register(id));
    }
    for (id, epoch) in [(1, 0), (2, 1)] {
        apply(
            &mut image,
            MetadataRecord::BrokerChange {
                id,
                epoch,
                fenced: Some(false),
                in_controlled_shutdown: None,
            },
        );
    }
    apply(&mut image, MetadataRecord::topic("t", T, BTreeMap::new()));
    apply(&mut image, partition(0, &[1, 2]));
    apply(&mut image, partition(1, &[2, 3]));
    image
}

#[test]
fn queries_answer_from_the_tables() {
    let image = image();
    assert_eq!(image.applied(), 8);
    let live: Vec<i32> = image.live_brokers().map(|b| b.id).collect();
    assert_eq!(live, [1, 2]);
    assert_eq!(image.broker(3).unwrap().epoch, 2);
    assert_eq!(
        image.broker(2).unwrap().endpoint("plaintext").unwrap().port,
        9002
    );
    let topic = image.topic("t").unwrap();
    assert_eq!((topic.partitions, topic.replication_factor), (2, 2));
    assert_eq!(image.partition(T, 1).unwrap().leader, 2);
    let led: Vec<i32> = image.partitions_led_by(2).map(|(k, _)| k.1).collect();
    assert_eq!(led, [1]);
    let hosted: Vec<i32> = image.partitions_hosted_on(2).map(|(k, _)| k.1).collect();
    assert_eq!(hosted, [0, 1]);
    assert!(image.is_active_broker(1) && !image.is_active_broker(3));
}

#[test]
fn partition_change_bumps_epochs_as_kafka_replays_them() {
    let mut image = image();
    let mut change = PartitionChange::new(T, 0);
    change.isr = Some(vec![1]);
    image.apply(8, &MetadataRecord::PartitionChange(change));
    let p = image.partition(T, 0).unwrap();
    assert_eq!((p.leader_epoch, p.partition_epoch), (0, 1));
    let mut change = PartitionChange::new(T, 0);
    change.leader = Some(1);
    image.apply(9, &MetadataRecord::PartitionChange(change));
    let p = image.partition(T, 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 1, 2));
}

#[test]
fn removing_a_topic_removes_its_partitions() {
    let mut image = image();
    image.apply(
        8,
        &MetadataRecord::RemoveTopic {
            name: "t".into(),
            id: T,
        },
    );
    assert!(image.topic("t").is_none() && image.partition(T, 0).is_none());
    assert_eq!(image.partitions().count(), 0);
}

#[test]
fn a_new_registration_replaces_the_old_one_with_a_higher_epoch() {
    let mut image = image();
    image.apply(20, &register(1));
    let b = image.broker(1).unwrap();
    assert_eq!((b.epoch, b.fenced), (20, true));
    assert_eq!(image.applied(), 21);
}

fn panics(f: impl FnOnce(&mut MetadataImage) + std::panic::UnwindSafe) -> String {
    let err = std::panic::catch_unwind(move || {
        let mut image = image();
        f(&mut image)
    })
    .expect_err("applying must panic");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn records_that_break_a_rule_are_refused() {
    let change = |f: fn(&mut PartitionChange)| {
        let mut c = PartitionChange::new(T, 0);
        f(&mut c);
        MetadataRecord::PartitionChange(c)
    };
    let cases: Vec<(MetadataRecord, &str)> = vec![
        (change(|c| c.leader = Some(3)), "not in replicas"),
        (change(|c| c.isr = Some(vec![1, 3])), "not within replicas"),
        (change(|c| c.isr = Some(vec![1, 1])), "repeats"),
        (change(|c| c.isr = Some(vec![2])), "leader 1 not in isr"),
        (change(|c| c.elr = Some(vec![1])), "apart from isr"),
        (
            change(|c| c.leader_recovering = Some(true)),
            "recovering leader",
        ),
        (partition(5, &[1]), "out of order"),
        (partition(2, &[1, 1]), "repeat"),
        (
            MetadataRecord::BrokerChange {
                id: 1,
                epoch: 5,
                fenced: Some(true),
                in_controlled_shutdown: None,
            },
            "stale epoch",
        ),
    ];
    for (record, why) in cases {
        let message = panics(move |image| {
            let at = image.applied();
            image.apply(at, &record);
        });
        assert!(message.contains(why), "{why}: got {message:?}");
    }
    assert!(
        panics(|image| image.apply(3, &MetadataRecord::ProducerIds { next: 1 }))
            .contains("applied after")
    );
}

#[test]
fn legacy_records_replay_and_report_what_to_migrate() {
    let json = r#"{"type":"topic","name":"old","id":"00000000-0000-0000-0000-000000000009","partitions":2,"replication_factor":1,"configs":{}}"#;
    let record: MetadataRecord = serde_json::from_str(json).unwrap();
    let mut image = MetadataImage::default();
    image.apply(0, &record);
    let grow: MetadataRecord =
        serde_json::from_str(r#"{"type":"partitions","name":"old","count":3}"#).unwrap();
    image.apply(1, &grow);
    let id = Uuid::from_u128(9);
    assert_eq!(
        image.unregistered_legacy_partitions(),
        [(id, 0), (id, 1), (id, 2)]
    );
    // Written anew, a topic record carries no legacy fields.
    let json = serde_json::to_string(&MetadataRecord::topic("n", id, BTreeMap::new())).unwrap();
    assert!(!json.contains("partitions"), "{json}");
}
