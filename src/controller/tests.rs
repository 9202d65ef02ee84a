use super::*;

fn controller() -> Controller {
    let defaults = crate::config::ServerConfig::default_single_node().topic_defaults;
    Controller::new(3, 1, true, defaults)
}

/// An image with brokers 1..=n registered and unfenced.
fn cluster(n: i32) -> MetadataImage {
    let mut image = MetadataImage::default();
    for id in 1..=n {
        let at = image.applied();
        image.apply(
            at,
            &MetadataRecord::RegisterBroker {
                log_dirs: Vec::new(),
                id,
                incarnation: Uuid::from_u128(id as u128),
                listeners: vec![],
                rack: None,
                fenced: true,
            },
        );
        image.apply(
            at + 1,
            &MetadataRecord::BrokerChange {
                id,
                epoch: at,
                fenced: Some(false),
                in_controlled_shutdown: None,
            },
        );
    }
    image
}

fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
    for r in records {
        let at = image.applied();
        image.apply(at, r);
    }
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
fn topic_lifecycle() {
    let c = controller();
    let mut image = cluster(1);
    let mut new = new_topic("orders", -1, -1);
    new.configs = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
    let records = c.create_topic(&image, &new, Uuid::from_u128(1), 0).unwrap();
    assert_eq!(records.len(), 4);
    apply(&mut image, &records);
    let topic = image.topic("orders").unwrap();
    assert_eq!((topic.partitions, topic.replication_factor), (3, 1));
    let p = image.partition(topic.id, 2).unwrap();
    assert_eq!(
        (p.leader, &p.replicas, &p.isr, p.leader_epoch),
        (1, &vec![1], &vec![1], 0)
    );
    assert_eq!(
        c.create_topic(&image, &new, Uuid::from_u128(2), 0),
        Err(ControllerError::TopicAlreadyExists("orders".into()))
    );
    assert!(c.create_partitions(&image, "orders", 2, None, 0).is_err());
    // Regression (fuzzing): a count in the billions is refused, not opened.
    assert_eq!(
        c.create_partitions(&image, "orders", i32::MAX, None, 0),
        Err(ControllerError::TooLarge)
    );
    assert!(c
        .create_partitions(&image, "orders", 3 + MAX_NEW_PARTITIONS, None, 0)
        .is_ok());
    assert_eq!(
        c.create_topic(&image, &new_topic("huge", 536_870_914, 1), Uuid::nil(), 0),
        Err(ControllerError::TooLarge)
    );
    let grown = c.create_partitions(&image, "orders", 5, None, 0).unwrap();
    apply(&mut image, &grown);
    assert_eq!(image.topic("orders").unwrap().partitions, 5);
    let changes = BTreeMap::from([("retention.ms".to_string(), None)]);
    let record = c.alter_topic_config(&image, "orders", changes).unwrap();
    apply(&mut image, &[record]);
    assert!(image.topic("orders").unwrap().configs.is_empty());
    let record = c.delete_topic(&image, "orders").unwrap();
    apply(&mut image, &[record]);
    assert!(image.topic("orders").is_none());
    assert_eq!(image.partitions().count(), 0);
}

#[test]
fn replicas_are_placed_on_unfenced_brokers_only() {
    let c = controller();
    let mut image = cluster(4);
    let at = image.applied();
    image.apply(
        at,
        &MetadataRecord::BrokerChange {
            id: 3,
            epoch: 4,
            fenced: Some(true),
            in_controlled_shutdown: None,
        },
    );
    let records = c
        .create_topic(&image, &new_topic("t", 6, 3), Uuid::from_u128(5), 99)
        .unwrap();
    apply(&mut image, &records);
    for (_, p) in image.topic_partitions(Uuid::from_u128(5)) {
        assert!(!p.replicas.contains(&3), "{:?}", p.replicas);
        assert_eq!(p.isr, p.replicas);
        assert_eq!(p.leader, p.replicas[0]);
    }
    // Three unfenced brokers: RF 4 is refused.
    assert!(matches!(
        c.create_topic(&image, &new_topic("u", 1, 4), Uuid::from_u128(6), 0),
        Err(ControllerError::InvalidReplicationFactor(_))
    ));
    // New partitions keep the topic's replication factor.
    let more = c.create_partitions(&image, "t", 8, None, 7).unwrap();
    assert!(more.iter().all(|r| matches!(r,
        MetadataRecord::Partition(p) if p.replicas.len() == 3 && p.partition >= 6)));
}

#[test]
fn manual_assignments_are_used_as_given() {
    let c = controller();
    let mut image = cluster(3);
    let at = image.applied();
    // Broker 2 fenced: it may be named, but neither leads nor joins the ISR.
    image.apply(
        at,
        &MetadataRecord::BrokerChange {
            id: 2,
            epoch: 2,
            fenced: Some(true),
            in_controlled_shutdown: None,
        },
    );
    let mut new = new_topic("m", -1, -1);
    new.assignments = vec![vec![2, 1], vec![3, 2]];
    let records = c.create_topic(&image, &new, Uuid::from_u128(8), 0).unwrap();
    apply(&mut image, &records);
    let p0 = image.partition(Uuid::from_u128(8), 0).unwrap();
    assert_eq!((p0.leader, &p0.isr), (1, &vec![1]));
    let p1 = image.partition(Uuid::from_u128(8), 1).unwrap();
    assert_eq!(
        (p1.leader, &p1.isr, &p1.replicas),
        (3, &vec![3], &vec![3, 2])
    );
    // A count with an assignment, a missing broker, a wrong count of new partitions.
    let mut both = new.clone();
    both.name = "b".into();
    both.partitions = 2;
    assert!(matches!(
        c.create_topic(&image, &both, Uuid::nil(), 0),
        Err(ControllerError::InvalidRequest(_))
    ));
    let mut missing = new.clone();
    missing.name = "x".into();
    missing.assignments = vec![vec![9]];
    assert!(matches!(
        c.create_topic(&image, &missing, Uuid::nil(), 0),
        Err(ControllerError::InvalidReplicaAssignment(_))
    ));
    let a = vec![vec![1, 3]];
    assert!(matches!(
        c.create_partitions(&image, "m", 4, Some(&a), 0),
        Err(ControllerError::InvalidReplicaAssignment(_))
    ));
    let wrong_rf = vec![vec![1]];
    assert!(matches!(
        c.create_partitions(&image, "m", 3, Some(&wrong_rf), 0),
        Err(ControllerError::InvalidReplicaAssignment(_))
    ));
    let grown = c.create_partitions(&image, "m", 3, Some(&a), 0).unwrap();
    apply(&mut image, &grown);
    assert_eq!(
        image.partition(Uuid::from_u128(8), 2).unwrap().replicas,
        [1, 3]
    );
}

#[test]
fn rejects_bad_requests() {
    let c = controller();
    let image = cluster(1);
    let mut new = new_topic("a/b", 1, 1);
    assert!(matches!(
        c.create_topic(&image, &new, Uuid::nil(), 0),
        Err(ControllerError::InvalidTopic(_))
    ));
    new.name = "ok".into();
    new.replication_factor = 3;
    assert!(matches!(
        c.create_topic(&image, &new, Uuid::nil(), 0),
        Err(ControllerError::InvalidReplicationFactor(_))
    ));
    new.replication_factor = 1;
    new.configs.insert("retention.ms".into(), "soon".into());
    assert!(matches!(
        c.create_topic(&image, &new, Uuid::nil(), 0),
        Err(ControllerError::InvalidConfig(_))
    ));
    // No broker registered at all: nowhere to place anything.
    assert!(matches!(
        c.create_topic(
            &MetadataImage::default(),
            &new_topic("n", 1, 1),
            Uuid::nil(),
            0
        ),
        Err(ControllerError::InvalidReplicationFactor(_))
    ));
    assert!(validate_topic_name(&"x".repeat(250)).is_err());
    assert!(validate_topic_name("..").is_err());
}

#[test]
fn legacy_partitions_are_registered_on_the_single_node() {
    let c = controller();
    let mut image = cluster(1);
    let legacy: MetadataRecord = serde_json::from_str(
        r#"{"type":"topic","name":"old","id":"00000000-0000-0000-0000-000000000009","partitions":2,"replication_factor":1,"configs":{}}"#,
    )
    .unwrap();
    apply(&mut image, &[legacy]);
    let records = c.register_legacy_partitions(&image, 1);
    assert_eq!(records.len(), 2);
    apply(&mut image, &records);
    assert_eq!(image.topic("old").unwrap().partitions, 2);
    assert!(c.register_legacy_partitions(&image, 1).is_empty());
}

#[test]
fn election_config_follows_topic_overrides() {
    let c = controller();
    let mut image = cluster(3);
    let mut new = new_topic("t", 1, 3);
    new.configs = BTreeMap::from([
        ("min.insync.replicas".to_string(), "2".to_string()),
        (
            "unclean.leader.election.enable".to_string(),
            "true".to_string(),
        ),
    ]);
    let records = c.create_topic(&image, &new, Uuid::from_u128(3), 0).unwrap();
    apply(&mut image, &records);
    let config = c.election_config(&image, image.topic("t").unwrap());
    assert_eq!(
        config,
        ElectionConfig {
            elr: true,
            min_isr: 2,
            unclean: true,
            recovery: None,
        }
    );
}

#[test]
fn records_round_trip_as_json() {
    let records = [
        MetadataRecord::TopicConfig {
            name: "t".into(),
            changes: BTreeMap::from([("a".into(), Some("1".into())), ("b".into(), None)]),
        },
        MetadataRecord::PartitionChange(PartitionChange {
            isr: Some(vec![1, 2]),
            leader: Some(2),
            ..PartitionChange::new(Uuid::from_u128(4), 3)
        }),
        MetadataRecord::RegisterBroker {
            log_dirs: Vec::new(),
            id: 1,
            incarnation: Uuid::from_u128(9),
            listeners: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "h".into(),
                port: 1,
            }],
            rack: Some("r".into()),
            fenced: true,
        },
    ];
    for record in records {
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(
            serde_json::from_str::<MetadataRecord>(&json).unwrap(),
            record
        );
    }
}

#[test]
fn periodic_elections_retry_unclean_and_restore_preferred_leaders() {
    let c = controller();
    let mut image = cluster(3);
    let mut new = new_topic("t", 2, 3);
    new.assignments = vec![];
    new.configs = BTreeMap::from([(
        "unclean.leader.election.enable".to_string(),
        "true".to_string(),
    )]);
    let id = Uuid::from_u128(12);
    let records = c.create_topic(&image, &new, id, 0).unwrap();
    apply(&mut image, &records);
    // Partition 0 loses its leader with ISR [] and no ELR; partition 1 is led by a
    // non-preferred replica.
    let (p0, p1) = (
        image.partition(id, 0).unwrap().clone(),
        image.partition(id, 1).unwrap().clone(),
    );
    let mut lost = PartitionChange::new(id, 0);
    lost.leader = Some(NO_LEADER);
    lost.isr = Some(vec![]);
    let mut moved = PartitionChange::new(id, 1);
    moved.leader = Some(p1.replicas[1]);
    apply(
        &mut image,
        &[
            MetadataRecord::PartitionChange(lost),
            MetadataRecord::PartitionChange(moved),
        ],
    );
    assert!(c.periodic_elections(&image, false).len() == 1);
    let records = c.periodic_elections(&image, true);
    assert_eq!(records.len(), 2);
    apply(&mut image, &records);
    let p = image.partition(id, 0).unwrap();
    assert_eq!((p.leader, p.leader_recovering), (p0.replicas[0], true));
    assert_eq!(image.partition(id, 1).unwrap().leader, p1.replicas[0]);
    assert!(c.periodic_elections(&image, true).is_empty());
}

fn set(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
        .collect()
}

#[test]
fn dynamic_broker_configs_are_validated_stored_and_layered_over_the_static_defaults() {
    let c = controller();
    let mut image = cluster(2);
    // Per broker: a SASL key (stored only) and a log default (live).
    let record = c
        .alter_broker_config(
            &image,
            "2",
            set(&[
                ("sasl.kerberos.min.time.before.relogin", Some("58000")),
                ("log.retention.ms", Some("1000")),
            ]),
        )
        .unwrap();
    apply(&mut image, &[record]);
    // Cluster-wide: the segment size for every broker.
    let record = c
        .alter_broker_config(&image, "", set(&[("log.segment.bytes", Some("4096"))]))
        .unwrap();
    apply(&mut image, &[record]);
    let on2 = c.topic_defaults_on(&image, 2);
    let on1 = c.topic_defaults_on(&image, 1);
    assert_eq!((on2.retention_ms, on2.segment_bytes), (1000, 4096));
    assert_eq!(on1.segment_bytes, 4096);
    assert_eq!(on1.retention_ms, c.topic_defaults().retention_ms);
    // A topic override still wins.
    let created = c
        .create_topic(
            &image,
            &NewTopic {
                name: "t".into(),
                partitions: 1,
                replication_factor: 1,
                configs: BTreeMap::from([("retention.ms".into(), "7".into())]),
                ..NewTopic::default()
            },
            Uuid::from_u128(9),
            0,
        )
        .unwrap();
    apply(&mut image, &created);
    let topic = image.topic("t").unwrap().clone();
    assert_eq!(c.topic_config_on(&image, 2, &topic).retention_ms, 7);
    assert_eq!(c.topic_config_on(&image, 2, &topic).segment_bytes, 4096);

    // Refusals: INVALID_REQUEST throughout, as Kafka answers.
    let refused = |name: &str, changes| c.alter_broker_config(&image, name, changes).unwrap_err();
    assert!(matches!(
        refused("1", set(&[("log.dirs", Some("/x"))])),
        ControllerError::InvalidRequest(m) if m.contains("Cannot update these configs dynamically")
    ));
    assert!(matches!(
        refused("", set(&[("sasl.kerberos.min.time.before.relogin", Some("1"))])),
        ControllerError::InvalidRequest(m) if m.contains("broker id must be specified")
    ));
    assert!(matches!(
        refused("9", set(&[("background.threads", Some("9"))])),
        ControllerError::InvalidRequest(m) if m.contains("no such broker")
    ));
    assert!(matches!(
        refused("one", set(&[])),
        ControllerError::InvalidRequest(m) if m.contains("must be an integer")
    ));
    assert!(matches!(
        refused("1", set(&[("log.segment.bytes", Some("tiny"))])),
        ControllerError::InvalidRequest(_)
    ));

    // Deleting the last key removes the resource.
    let record = c
        .alter_broker_config(
            &image,
            "2",
            set(&[
                ("sasl.kerberos.min.time.before.relogin", None),
                ("log.retention.ms", None),
            ]),
        )
        .unwrap();
    apply(&mut image, &[record]);
    assert!(image
        .resource_configs(&ConfigResource::Broker("2".into()))
        .is_empty());
    assert_eq!(image.all_resource_configs().count(), 1);
    assert_eq!(
        c.topic_defaults_on(&image, 2).retention_ms,
        c.topic_defaults().retention_ms
    );
}

#[test]
fn group_configs_are_checked_against_the_broker_bounds() {
    let mut c = controller();
    let mut image = cluster(1);
    let record = c
        .alter_group_config(
            &image,
            "my-group",
            set(&[("consumer.session.timeout.ms", Some("50000"))]),
        )
        .unwrap();
    apply(&mut image, &[record]);
    assert_eq!(
        image.resource_configs(&ConfigResource::Group("my-group".into()))
            ["consumer.session.timeout.ms"],
        "50000"
    );
    let invalid = |c: &Controller, image: &MetadataImage, pairs| match c.alter_group_config(
        image,
        "my-group",
        set(pairs),
    ) {
        Err(ControllerError::InvalidConfig(m)) => m,
        other => panic!("expected INVALID_CONFIG, got {other:?}"),
    };
    assert_eq!(
        invalid(&c, &image, &[("consumer.session.timeout", Some("50000"))]),
        "Unknown group config name: consumer.session.timeout"
    );
    assert!(
        invalid(&c, &image, &[("consumer.session.timeout.ms", Some("6000"))])
            .contains("group.consumer.min.session.timeout.ms")
    );
    // The check is of the group's configs as a whole: with the session at 50 s stored, a
    // heartbeat of 50 s is out of bounds before it is too close.
    assert!(invalid(
        &c,
        &image,
        &[("consumer.heartbeat.interval.ms", Some("50000"))]
    )
    .contains("group.consumer.max.heartbeat.interval.ms"));
    assert!(matches!(
        c.alter_group_config(&image, "", set(&[])),
        Err(ControllerError::InvalidRequest(_))
    ));
    // Wider broker bounds accept what the defaults refuse.
    c.set_group_bounds(crate::config::GroupConfigBounds {
        consumer_min_session_timeout_ms: 6000,
        ..crate::config::GroupConfigBounds::default()
    });
    assert!(c
        .alter_group_config(
            &image,
            "g",
            set(&[("consumer.session.timeout.ms", Some("6000"))])
        )
        .is_ok());
    // DELETE of the override: the resource goes.
    let record = c
        .alter_group_config(
            &image,
            "my-group",
            set(&[("consumer.session.timeout.ms", None)]),
        )
        .unwrap();
    apply(&mut image, &[record]);
    assert_eq!(image.all_resource_configs().count(), 0);
}

#[test]
fn election_config_follows_the_cluster_wide_dynamic_defaults_not_a_brokers_own() {
    let c = controller();
    let mut image = cluster(3);
    let records = c
        .create_topic(&image, &new_topic("t", 1, 3), Uuid::from_u128(3), 0)
        .unwrap();
    apply(&mut image, &records);
    let before = c.election_config(&image, image.topic("t").unwrap());
    assert_eq!((before.min_isr, before.unclean), (1, false));
    // A broker's own value does not reach the controller's elections…
    let own = c
        .alter_broker_config(&image, "1", set(&[("min.insync.replicas", Some("3"))]))
        .unwrap();
    apply(&mut image, &[own]);
    assert_eq!(c.election_config(&image, image.topic("t").unwrap()), before);
    // …the cluster default does.
    let cluster_wide = c
        .alter_broker_config(
            &image,
            "",
            set(&[
                ("min.insync.replicas", Some("2")),
                ("unclean.leader.election.enable", Some("true")),
            ]),
        )
        .unwrap();
    apply(&mut image, &[cluster_wide]);
    let after = c.election_config(&image, image.topic("t").unwrap());
    assert_eq!((after.min_isr, after.unclean), (2, true));
}

#[test]
fn no_dynamic_broker_configs_leave_the_topic_defaults_as_parsing_them_would() {
    // `defaults_over` skips the parse for an empty level: the same config as the parse gives.
    let empty = BTreeMap::new();
    let mut base = controller().topic_defaults().clone();
    base.retention_ms = 1234;
    base.flush_ms = 77;
    let parsed = dynamic_broker::topic_defaults_with(&base, &empty).unwrap();
    assert_eq!(defaults_over(base.clone(), &empty), parsed);
    assert_eq!(parsed, base);
    // A level with configs is still parsed.
    let mut cluster = BTreeMap::new();
    cluster.insert("log.retention.ms".to_string(), "5000".to_string());
    assert_eq!(defaults_over(base.clone(), &cluster).retention_ms, 5000);
}
