use super::*;

fn part(t: &str, n: Option<&str>) -> (String, Option<String>) {
    (t.to_string(), n.map(str::to_string))
}

fn set(key: &str, value: f64) -> QuotaOp {
    QuotaOp {
        key: key.into(),
        value,
        remove: false,
    }
}

fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
    for r in records {
        let offset = image.applied();
        image.apply(offset, r);
    }
}

#[test]
fn each_entry_is_validated_as_kafka_does() {
    // (entity, ops, accepted)
    type Case = (Vec<(String, Option<String>)>, Vec<QuotaOp>, bool);
    let cases: Vec<Case> = vec![
        (
            vec![part("user", Some("alice"))],
            vec![set("producer_byte_rate", 1024.0)],
            true,
        ),
        (
            vec![part("user", None)],
            vec![set("consumer_byte_rate", 10.0)],
            true,
        ),
        (
            vec![part("client-id", Some("c")), part("user", Some("a"))],
            vec![set("request_percentage", 12.5)],
            true,
        ),
        (
            vec![part("client-id", None)],
            vec![set("controller_mutation_rate", 0.5)],
            true,
        ),
        (
            vec![part("ip", Some("10.0.0.1"))],
            vec![set("connection_creation_rate", 5.0)],
            true,
        ),
        (
            vec![part("ip", None)],
            vec![set("connection_creation_rate", 5.0)],
            true,
        ),
        (vec![], vec![set("producer_byte_rate", 1.0)], false),
        (
            vec![part("user", Some(""))],
            vec![set("producer_byte_rate", 1.0)],
            false,
        ),
        (
            vec![part("group", Some("g"))],
            vec![set("producer_byte_rate", 1.0)],
            false,
        ),
        (
            vec![part("user", Some("a")), part("user", Some("b"))],
            vec![set("producer_byte_rate", 1.0)],
            false,
        ),
        (
            vec![part("user", Some("a")), part("ip", Some("10.0.0.1"))],
            vec![set("connection_creation_rate", 1.0)],
            false,
        ),
        (
            vec![part("ip", Some("not-an-ip"))],
            vec![set("connection_creation_rate", 1.0)],
            false,
        ),
        (
            vec![part("ip", Some("10.0.0.1"))],
            vec![set("producer_byte_rate", 1.0)],
            false,
        ),
        (
            vec![part("user", Some("a"))],
            vec![set("connection_creation_rate", 1.0)],
            false,
        ),
        (
            vec![part("user", Some("a"))],
            vec![set("no_such_key", 1.0)],
            false,
        ),
        (
            vec![part("user", Some("a"))],
            vec![set("producer_byte_rate", 0.0)],
            false,
        ),
        (
            vec![part("user", Some("a"))],
            vec![set("producer_byte_rate", -5.0)],
            false,
        ),
        (
            vec![part("user", Some("a"))],
            vec![set("producer_byte_rate", 1.5)],
            false,
        ),
        (
            vec![part("user", Some("a"))],
            vec![set("producer_byte_rate", f64::NAN)],
            false,
        ),
        (
            vec![part("user", Some("a"))],
            vec![
                set("producer_byte_rate", 1.0),
                set("producer_byte_rate", 2.0),
            ],
            false,
        ),
    ];
    for (entity, ops, accepted) in cases {
        let image = MetadataImage::default();
        let alteration = QuotaAlteration {
            entity: entity.clone(),
            ops: ops.clone(),
        };
        let (records, results) = alter(&image, vec![alteration], false);
        assert_eq!(results.len(), 1);
        assert_eq!(
            results[0].is_ok(),
            accepted,
            "{entity:?} {ops:?}: {results:?}"
        );
        assert_eq!(records.len(), usize::from(accepted), "{entity:?}");
    }
}

#[test]
fn records_set_and_remove_and_validate_only_writes_nothing() {
    let mut image = MetadataImage::default();
    let alice = vec![part("user", Some("alice"))];
    let entry = |ops| QuotaAlteration {
        entity: alice.clone(),
        ops,
    };
    let (records, results) = alter(
        &image,
        vec![entry(vec![set("producer_byte_rate", 100.0)])],
        true,
    );
    assert!(records.is_empty() && results[0].is_ok());
    let (records, _) = alter(
        &image,
        vec![entry(vec![
            set("producer_byte_rate", 100.0),
            set("consumer_byte_rate", 200.0),
        ])],
        false,
    );
    assert_eq!(records.len(), 2);
    apply(&mut image, &records);
    let e = entity_of(&alice).unwrap();
    assert_eq!(image.quotas().get(&e, "producer_byte_rate"), Some(100.0));
    // Setting the same value again writes nothing; removing an unset key neither.
    let removal = QuotaOp {
        key: "request_percentage".into(),
        value: 0.0,
        remove: true,
    };
    let (records, results) = alter(
        &image,
        vec![entry(vec![set("producer_byte_rate", 100.0), removal])],
        false,
    );
    assert!(records.is_empty() && results[0].is_ok());
    let remove = |key: &str| QuotaOp {
        key: key.into(),
        value: 0.0,
        remove: true,
    };
    let (records, _) = alter(
        &image,
        vec![entry(vec![
            remove("producer_byte_rate"),
            remove("consumer_byte_rate"),
        ])],
        false,
    );
    apply(&mut image, &records);
    assert!(image.quotas().is_empty());
}

#[test]
fn describe_filters_as_kafka_does() {
    let mut image = MetadataImage::default();
    let entities = [
        vec![part("user", Some("alice"))],
        vec![part("user", None)],
        vec![part("user", Some("alice")), part("client-id", Some("app"))],
        vec![part("client-id", Some("app"))],
        vec![part("client-id", None)],
        vec![part("ip", Some("10.0.0.1"))],
    ];
    let alterations = entities
        .iter()
        .map(|e| QuotaAlteration {
            entity: e.clone(),
            ops: vec![set(
                if e[0].0 == "ip" {
                    "connection_creation_rate"
                } else {
                    "producer_byte_rate"
                },
                1000.0,
            )],
        })
        .collect();
    let (records, _) = alter(&image, alterations, false);
    apply(&mut image, &records);
    let c = |t: &str, m: i8, n: Option<&str>| FilterComponent {
        entity_type: t.into(),
        match_type: m,
        name: n.map(str::to_string),
    };
    // (components, strict, how many match)
    let cases = vec![
        (vec![], false, 6),
        (vec![], true, 0),
        (vec![c("user", 0, Some("alice"))], false, 2),
        (vec![c("user", 0, Some("alice"))], true, 1),
        (vec![c("user", 1, None)], false, 1),
        (vec![c("user", 2, None)], false, 3),
        (vec![c("user", 2, None)], true, 2),
        (vec![c("client-id", 2, None)], false, 3),
        (
            vec![c("user", 0, Some("alice")), c("client-id", 0, Some("app"))],
            true,
            1,
        ),
        (vec![c("ip", 2, None)], true, 1),
        (vec![c("user", 0, Some("bob"))], false, 0),
    ];
    for (components, strict, n) in cases {
        let found = describe(&image, &components, strict).unwrap();
        assert_eq!(found.len(), n, "{components:?} strict={strict}");
    }
    let refused = vec![
        vec![c("group", 2, None)],
        vec![c("user", 2, None), c("user", 1, None)],
        vec![c("user", 0, None)],
        vec![c("user", 1, Some("x"))],
        vec![c("user", 3, None)],
        vec![c("ip", 2, None), c("user", 2, None)],
    ];
    for components in refused {
        assert!(
            describe(&image, &components, false).is_err(),
            "{components:?}"
        );
    }
}
