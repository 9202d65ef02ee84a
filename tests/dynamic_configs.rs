//! Dynamic BROKER configs and GROUP config resources end to end on a broker over `MemDisk`:
//! what librdkafka's 0081_admin sends, the layering DescribeConfigs reports, the error codes
//! for bad input, a log default reaching a topic, a group's session timeout and heartbeat
//! interval reaching its members, and everything surviving a restart.

mod common;

use common::memdisk_io as io;
use std::collections::BTreeMap;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    alter_configs_request, AlterConfigsRequest, ConsumerGroupHeartbeatRequest,
    DescribeConfigsRequest, GroupId, IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir::broker::{Broker, RunningBroker};
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::Io;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const GROUP: i8 = 32;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;
const NONE: i16 = 0;
const UNKNOWN_TOPIC: i16 = 3;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;

async fn start(io: &Io) -> RunningBroker {
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        (
            "offsets.topic.replication.factor".to_string(),
            "1".to_string(),
        ),
        ("offsets.topic.num.partitions".to_string(), "1".to_string()),
    ]);
    let config = ServerConfig::from_properties(&props).unwrap().0;
    Broker::start(config, io.clone()).await.unwrap()
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// IncrementalAlterConfigs of one resource: (error code, message).
async fn incremental(
    client: &mut Client,
    kind: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> (i16, Option<String>) {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configs(
                ops.iter()
                    .map(|(k, op, v)| {
                        AlterableConfig::default()
                            .with_name(s(k))
                            .with_config_operation(*op)
                            .with_value(v.map(s))
                    })
                    .collect(),
            ),
    ]);
    let response = client.connection().call(&request, 1).await.unwrap();
    let r = &response.responses[0];
    assert_eq!((r.resource_type, r.resource_name.as_str()), (kind, name));
    (
        r.error_code,
        r.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// Legacy AlterConfigs of one resource (replaces its stored configs): the error code.
async fn alter(client: &mut Client, kind: i8, name: &str, set: &[(&str, &str)]) -> i16 {
    let request = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configs(
                set.iter()
                    .map(|(k, v)| {
                        alter_configs_request::AlterableConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            ),
    ]);
    let response = client.connection().call(&request, 2).await.unwrap();
    response.responses[0].error_code
}

/// DescribeConfigs of one resource: the error code and key → (value, source, read-only).
async fn describe(
    client: &mut Client,
    kind: i8,
    name: &str,
) -> (i16, BTreeMap<String, (String, i8, bool)>) {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configuration_keys(None)]);
    let response = client.connection().call(&request, 4).await.unwrap();
    let r = &response.results[0];
    let entries = r
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                (
                    c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                    c.config_source,
                    c.read_only,
                ),
            )
        })
        .collect();
    (r.error_code, entries)
}

fn entry(entries: &BTreeMap<String, (String, i8, bool)>, key: &str) -> (String, i8, bool) {
    entries
        .get(key)
        .cloned()
        .unwrap_or_else(|| panic!("no {key} in {entries:?}"))
}

/// A consumer-protocol join: the heartbeat interval the broker answers with, and the error.
async fn join(client: &mut Client, group: &str, member: &str) -> (i16, i32) {
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(Vec::<TopicPartitions>::new()));
    for _ in 0..50 {
        let response = client.connection().call(&request, 1).await.unwrap();
        // COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / LOAD_IN_PROGRESS while the offsets
        // topic comes up.
        if ![14, 15, 16].contains(&response.error_code) {
            return (response.error_code, response.heartbeat_interval_ms);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the coordinator never came up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_and_group_configs_are_dynamic_validated_applied_and_durable() {
    let disk = MemDisk::new(3);
    let io = io(&disk);
    let running = start(&io).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();

    // What 0081_admin sends to broker 1: per-broker SET of a SASL key, then the helper's
    // SET + APPEND and DELETE + SUBTRACT.
    let relogin = "sasl.kerberos.min.time.before.relogin";
    assert_eq!(
        incremental(&mut client, BROKER, "1", &[(relogin, SET, Some("58000"))]).await,
        (NONE, None)
    );
    let set_append = [
        ("background.threads", SET, Some("9")),
        ("log.cleanup.policy", APPEND, Some("compact")),
    ];
    assert_eq!(
        incremental(&mut client, BROKER, "1", &set_append).await.0,
        NONE
    );
    // A password is stored but never shown.
    let jaas = "listener.name.plaintext.plain.sasl.jaas.config";
    assert_eq!(
        incremental(&mut client, BROKER, "1", &[(jaas, SET, Some("secret"))]).await,
        (NONE, None)
    );
    let (code, b) = describe(&mut client, BROKER, "1").await;
    assert_eq!(code, NONE);
    assert_eq!(entry(&b, jaas), (String::new(), 2, false));
    assert_eq!(entry(&b, relogin), ("58000".into(), 2, false));
    assert_eq!(entry(&b, "background.threads"), ("9".into(), 2, false));
    assert_eq!(
        entry(&b, "log.cleanup.policy"),
        ("delete,compact".into(), 2, false)
    );
    assert_eq!(entry(&b, "node.id"), ("1".into(), 4, true));
    assert_eq!(entry(&b, "log.dirs"), ("/data".into(), 4, true));
    // The log default is live: the topic without an override is now compacted too.
    let (_, t) = describe(&mut client, TOPIC, "t").await;
    assert_eq!(
        entry(&t, "cleanup.policy"),
        ("compact,delete".into(), 5, false)
    );

    // The cluster-wide default (empty name): shown alone there, and under broker 1's layer.
    assert_eq!(
        incremental(
            &mut client,
            BROKER,
            "",
            &[("log.retention.ms", SET, Some("3600000"))]
        )
        .await
        .0,
        NONE
    );
    let (_, d) = describe(&mut client, BROKER, "").await;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(entry(&d, "log.retention.ms"), ("3600000".into(), 3, false));
    let (_, b) = describe(&mut client, BROKER, "1").await;
    assert_eq!(entry(&b, "log.retention.ms"), ("3600000".into(), 3, false));
    let (_, t) = describe(&mut client, TOPIC, "t").await;
    assert_eq!(entry(&t, "retention.ms"), ("3600000".into(), 5, false));

    // Bad input, with Kafka's codes.
    let refused = [
        (BROKER, "1", ("log.dirs", SET, Some("/x")), INVALID_REQUEST),
        (BROKER, "", (relogin, SET, Some("1")), INVALID_REQUEST),
        (
            BROKER,
            "7",
            ("background.threads", SET, Some("9")),
            INVALID_REQUEST,
        ),
        (
            BROKER,
            "x",
            ("background.threads", SET, Some("9")),
            INVALID_REQUEST,
        ),
        (
            BROKER,
            "1",
            ("background.threads", SET, Some("0")),
            INVALID_REQUEST,
        ),
        (
            BROKER,
            "1",
            ("background.threads", APPEND, Some("1")),
            INVALID_CONFIG,
        ),
        (
            BROKER,
            "1",
            ("no.such.key", APPEND, Some("1")),
            INVALID_CONFIG,
        ),
        (
            BROKER,
            "1",
            ("background.threads", SET, None),
            INVALID_REQUEST,
        ),
        (
            GROUP,
            "g",
            ("consumer.session.timeout", SET, Some("50000")),
            INVALID_CONFIG,
        ),
        (
            GROUP,
            "g",
            ("consumer.session.timeout.ms", SET, Some("1000")),
            INVALID_CONFIG,
        ),
        (
            GROUP,
            "g",
            ("consumer.session.timeout.ms", SET, Some("soon")),
            INVALID_CONFIG,
        ),
        (
            GROUP,
            "",
            ("consumer.session.timeout.ms", SET, Some("50000")),
            INVALID_REQUEST,
        ),
        (
            TOPIC,
            "nope",
            ("retention.ms", SET, Some("1")),
            UNKNOWN_TOPIC,
        ),
    ];
    for (kind, name, op, code) in refused {
        let (got, message) = incremental(&mut client, kind, name, &[op]).await;
        assert_eq!(got, code, "{kind} {name:?} {op:?}: {message:?}");
        assert!(message.is_some_and(|m| !m.is_empty()));
    }
    // Nothing of that was stored.
    let (_, b) = describe(&mut client, BROKER, "1").await;
    assert_eq!(entry(&b, "background.threads"), ("9".into(), 2, false));
    let (code, _) = describe(&mut client, BROKER, "2").await;
    assert_eq!(code, INVALID_REQUEST);

    // Group configs: a group that does not exist yet may have them.
    let (code, g) = describe(&mut client, GROUP, "my-group").await;
    assert_eq!(code, NONE);
    assert_eq!(
        entry(&g, "consumer.session.timeout.ms"),
        ("45000".into(), 5, false)
    );
    assert_eq!(
        incremental(
            &mut client,
            GROUP,
            "my-group",
            &[
                ("consumer.session.timeout.ms", SET, Some("50000")),
                ("consumer.heartbeat.interval.ms", SET, Some("6000")),
            ]
        )
        .await
        .0,
        NONE
    );
    let (_, g) = describe(&mut client, GROUP, "my-group").await;
    assert_eq!(
        entry(&g, "consumer.session.timeout.ms"),
        ("50000".into(), 8, false)
    );
    assert_eq!(
        entry(&g, "share.session.timeout.ms"),
        ("45000".into(), 5, false)
    );
    // Applied: a member joining the group is told the group's heartbeat interval; another
    // group keeps the broker's.
    assert_eq!(
        join(&mut client, "my-group", "m1-aaaaaaaaaaaaaaaaaaaa").await,
        (NONE, 6000)
    );
    assert_eq!(
        join(&mut client, "other-group", "m2-aaaaaaaaaaaaaaaaaaaa").await,
        (NONE, 5000)
    );

    // Legacy AlterConfigs replaces a resource's stored configs.
    assert_eq!(
        alter(&mut client, BROKER, "1", &[(relogin, "60000")]).await,
        NONE
    );
    let (_, b) = describe(&mut client, BROKER, "1").await;
    assert_eq!(entry(&b, relogin), ("60000".into(), 2, false));
    assert!(!b.contains_key("background.threads"));
    assert_eq!(entry(&b, "log.cleanup.policy"), ("delete".into(), 4, false));

    // A restart: everything came back from the metadata log.
    drop(client);
    running.broker.shutdown().await.unwrap();
    let running = start(&io).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let (_, b) = describe(&mut client, BROKER, "1").await;
    assert_eq!(entry(&b, relogin), ("60000".into(), 2, false));
    assert_eq!(entry(&b, "log.retention.ms"), ("3600000".into(), 3, false));
    let (_, t) = describe(&mut client, TOPIC, "t").await;
    assert_eq!(entry(&t, "retention.ms"), ("3600000".into(), 5, false));
    let (_, g) = describe(&mut client, GROUP, "my-group").await;
    assert_eq!(
        entry(&g, "consumer.heartbeat.interval.ms"),
        ("6000".into(), 8, false)
    );

    // DELETE and SUBTRACT, as the 0081 helper's second call.
    let delete_subtract = [
        (relogin, DELETE, Some("")),
        ("log.cleanup.policy", SUBTRACT, Some("compact")),
    ];
    assert_eq!(
        incremental(&mut client, BROKER, "1", &delete_subtract)
            .await
            .0,
        NONE
    );
    let (_, b) = describe(&mut client, BROKER, "1").await;
    assert!(!b.contains_key(relogin));
    assert_eq!(entry(&b, "log.cleanup.policy"), ("delete".into(), 2, false));
    assert_eq!(
        incremental(
            &mut client,
            GROUP,
            "my-group",
            &[("consumer.session.timeout.ms", DELETE, Some(""))]
        )
        .await
        .0,
        NONE
    );
    let (_, g) = describe(&mut client, GROUP, "my-group").await;
    assert_eq!(
        entry(&g, "consumer.session.timeout.ms"),
        ("45000".into(), 5, false)
    );
    running.broker.shutdown().await.unwrap();
}
