use super::super::{parse_properties, CleanupPolicy, TimestampType};
use super::*;

const SINGLE_NODE: &str = "\
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=PLAINTEXT://127.0.0.1:9092
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=/tmp/kraft-combined-logs
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
";

/// `config/kraft/server.properties` from Kafka 3.x, comments removed.
const KAFKA_3_KRAFT: &str = "\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
";

/// `config/server.properties` from Kafka 4.0 (dynamic quorum), comments removed.
const KAFKA_4_KRAFT: &str = "\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
";

fn load(text: &str) -> Result<(ServerConfig, Vec<String>), ConfigError> {
    ServerConfig::from_properties(&parse_properties(text)?)
}

fn config(text: &str) -> ServerConfig {
    let (config, warnings) = load(text).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    config
}

/// The key the error names, and its message.
fn error(text: &str) -> (String, String) {
    match load(text) {
        Err(e @ ConfigError::Invalid { .. }) => {
            let ConfigError::Invalid { key, .. } = &e else {
                unreachable!()
            };
            (key.clone(), e.to_string())
        }
        other => panic!("expected an invalid value for {text:?}, got {other:?}"),
    }
}

#[test]
fn authorizer_keys() {
    let off = config("");
    assert_eq!(off.authorizer, AuthorizerConfig::default());
    let on = config(
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
         super.users=User:admin; User:ops\n\
         allow.everyone.if.no.acl.found=true\n",
    );
    assert!(on.authorizer.enabled);
    assert_eq!(on.authorizer.super_users, vec!["User:admin", "User:ops"]);
    assert!(on.authorizer.allow_everyone_if_no_acl_found);
    assert!(!config("authorizer.class.name=\n").authorizer.enabled);
    assert_eq!(
        error("authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n").0,
        "authorizer.class.name"
    );
    assert_eq!(error("super.users=admin\n").0, "super.users");
}

fn ep(name: &str, host: &str, port: u16) -> Endpoint {
    Endpoint {
        listener_name: name.into(),
        host: host.into(),
        port,
    }
}

#[test]
fn single_node_kraft_file() {
    let c = config(SINGLE_NODE);
    assert_eq!(c.node_id, 1);
    assert_eq!(c.process_roles, vec![Role::Broker, Role::Controller]);
    assert!(c.is_broker() && c.is_controller());
    assert_eq!(
        c.listeners,
        vec![
            ep("PLAINTEXT", "127.0.0.1", 9092),
            ep("CONTROLLER", "127.0.0.1", 9093)
        ]
    );
    assert_eq!(
        c.advertised_listeners,
        vec![ep("PLAINTEXT", "127.0.0.1", 9092)]
    );
    assert_eq!(
        c.broker_endpoints(),
        vec![ep("PLAINTEXT", "127.0.0.1", 9092)]
    );
    assert_eq!(c.controller_listener_names, vec!["CONTROLLER"]);
    assert_eq!(
        c.controller_quorum_voters,
        vec![Voter {
            id: 1,
            host: "127.0.0.1".into(),
            port: 9093
        }]
    );
    assert_eq!(c.log_dirs, vec!["/tmp/kraft-combined-logs"]);
    assert_eq!(c.num_partitions, 3);
    assert_eq!(c.default_replication_factor, 1);
    assert!(c.auto_create_topics_enable);
    assert_eq!(c.log_retention_check_interval_ms, 300_000);
    assert_eq!(c.topic_defaults.retention_ms, 168 * 3_600_000);
    assert_eq!(c.topic_defaults.segment_bytes, 1_073_741_824);
    assert_eq!(c.topic_defaults.min_insync_replicas, 1);
}

#[test]
fn stock_kafka_files() {
    let c = config(KAFKA_3_KRAFT);
    assert_eq!(
        c.listeners,
        vec![
            ep("PLAINTEXT", "0.0.0.0", 9092),
            ep("CONTROLLER", "0.0.0.0", 9093)
        ]
    );
    assert_eq!(
        c.advertised_listeners,
        vec![ep("PLAINTEXT", "localhost", 9092)]
    );

    let c = config(KAFKA_4_KRAFT);
    assert_eq!(
        c.controller_quorum_voters,
        vec![Voter {
            id: -1,
            host: "localhost".into(),
            port: 9093
        }]
    );
    assert_eq!(c.advertised_listeners.len(), 2);
    assert_eq!(c.broker_endpoints(), vec![ep("PLAINTEXT", "0.0.0.0", 9092)]);
}

#[test]
fn defaults() {
    let (c, warnings) = ServerConfig::from_properties(&BTreeMap::new()).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(c, ServerConfig::default_single_node());
    assert_eq!(c.node_id, 1);
    assert_eq!(c.process_roles, vec![Role::Broker, Role::Controller]);
    assert_eq!(c.listeners, vec![ep("PLAINTEXT", "127.0.0.1", 9092)]);
    assert_eq!(c.advertised_listeners, c.listeners);
    assert_eq!(c.controller_listener_names, vec!["CONTROLLER"]);
    assert_eq!(c.inter_broker_listener_name, "PLAINTEXT");
    assert!(c.controller_quorum_voters.is_empty());
    assert_eq!(c.log_dirs, vec!["./weir-data"]);
    assert_eq!(c.num_partitions, 1);
    assert_eq!(c.default_replication_factor, 1);
    assert!(c.auto_create_topics_enable);
    assert!(c.delete_topic_enable);
    assert_eq!(c.socket_request_max_bytes, 104_857_600);
    assert_eq!(c.connections_max_idle_ms, 600_000);
    assert_eq!(c.log_retention_check_interval_ms, 300_000);
    assert_eq!(c.log_flush_scheduler_interval_ms, 1000);
    assert_eq!(c.offsets_topic_num_partitions, 50);
    assert_eq!(c.group_initial_rebalance_delay_ms, 3000);
    assert_eq!(c.group_min_session_timeout_ms, 6000);
    assert_eq!(c.group_max_session_timeout_ms, 1_800_000);
    assert_eq!(c.offsets_retention_minutes, 10080);
    assert_eq!(c.offsets_topic_replication_factor, 3);
    assert!(!c.fsync_before_ack);
    assert_eq!(c.fetch_max_bytes, 57_671_680);
    assert_eq!(c.replica_fetch_max_bytes, 1_048_576);
    assert_eq!(c.replica_fetch_response_max_bytes, 10_485_760);
    assert_eq!(c.producer_id_expiration_ms, 86_400_000);
    assert_eq!(c.producer_id_expiration_check_interval_ms, 600_000);
    assert_eq!(c.topic_defaults, TopicConfig::default());
}

#[test]
fn retention_precedence() {
    let retention = |text: &str| config(text).topic_defaults.retention_ms;
    assert_eq!(retention("log.retention.hours=1"), 3_600_000);
    assert_eq!(
        retention("log.retention.hours=1\nlog.retention.minutes=2"),
        120_000
    );
    assert_eq!(
        retention("log.retention.hours=1\nlog.retention.minutes=2\nlog.retention.ms=5"),
        5
    );
    assert_eq!(retention("log.retention.ms=5\nlog.retention.hours=1"), 5);
    assert_eq!(retention("log.retention.hours=-1"), -1);
    assert_eq!(retention("log.retention.ms=-1\nlog.retention.hours=1"), -1);
    assert_eq!(
        retention("log.retention.hours=2147483647"),
        2_147_483_647 * 3_600_000
    );
    // The losing key is still validated.
    assert_eq!(
        error("log.retention.ms=5\nlog.retention.hours=x").0,
        "log.retention.hours"
    );
    assert_eq!(error("log.retention.ms=-2").0, "log.retention.ms");

    let roll = |text: &str| config(text).topic_defaults.segment_ms;
    assert_eq!(roll("log.roll.hours=2"), 7_200_000);
    assert_eq!(roll("log.roll.hours=2\nlog.roll.ms=10"), 10);
    assert_eq!(error("log.roll.hours=0").0, "log.roll.hours");
}

#[test]
fn broker_topic_defaults() {
    let c = config(
        "log.retention.bytes=1000\nlog.segment.bytes=14\nmessage.max.bytes=2000\n\
         min.insync.replicas=2\n\
         log.cleanup.policy=compact\nlog.flush.interval.messages=10\nlog.flush.interval.ms=50\n\
         log.index.interval.bytes=100\nlog.message.timestamp.type=LogAppendTime",
    );
    let t = &c.topic_defaults;
    assert_eq!(t.retention_bytes, 1000);
    assert_eq!(t.segment_bytes, 14);
    assert_eq!(t.max_message_bytes, 2000);
    assert_eq!(t.min_insync_replicas, 2);
    assert_eq!(t.cleanup_policy, CleanupPolicy::Compact);
    assert_eq!(t.flush_messages, 10);
    assert_eq!(t.flush_ms, 50);
    assert_eq!(t.index_interval_bytes, 100);
    assert_eq!(t.message_timestamp_type, TimestampType::LogAppendTime);

    // Topic overrides then win over the broker defaults.
    let overrides = BTreeMap::from([("segment.bytes".to_string(), "4096".to_string())]);
    let t = c.topic_defaults.with_overrides(&overrides).unwrap();
    assert_eq!((t.segment_bytes, t.retention_bytes), (4096, 1000));
}

#[test]
fn flush_interval_falls_back_to_explicit_scheduler_interval() {
    assert_eq!(config("").topic_defaults.flush_ms, i64::MAX);
    let c = config("log.flush.scheduler.interval.ms=200");
    assert_eq!(
        (c.log_flush_scheduler_interval_ms, c.topic_defaults.flush_ms),
        (200, 200)
    );
    let c = config("log.flush.scheduler.interval.ms=200\nlog.flush.interval.ms=900");
    assert_eq!(c.topic_defaults.flush_ms, 900);
    let c = config("log.flush.scheduler.interval.ms=9223372036854775807");
    assert_eq!(c.log_flush_scheduler_interval_ms, i64::MAX as u64);
}

#[test]
fn group_config_bounds_are_checked_at_start_as_kafka_checks_them() {
    let c = config("");
    assert_eq!(c.group_config_bounds, GroupConfigBounds::default());
    // Below Kafka's floor of 5 s unless the floor is lowered too.
    let (key, msg) = error("group.consumer.heartbeat.interval.ms=500");
    assert_eq!(key, "group.consumer.heartbeat.interval.ms");
    assert!(
        msg.contains("group.consumer.min.heartbeat.interval.ms"),
        "{msg}"
    );
    let c = config(
        "group.consumer.heartbeat.interval.ms=500\n\
         group.consumer.session.timeout.ms=6000\n\
         group.consumer.min.heartbeat.interval.ms=500\n\
         group.consumer.min.session.timeout.ms=6000\n",
    );
    let b = &c.group_config_bounds;
    assert_eq!(
        (
            b.consumer_heartbeat_interval_ms,
            b.consumer_session_timeout_ms
        ),
        (500, 6000)
    );
    let (key, _) = error("group.consumer.max.session.timeout.ms=1000");
    assert_eq!(key, "group.consumer.max.session.timeout.ms");
    let (key, _) = error("group.share.record.lock.duration.ms=999");
    assert_eq!(key, "group.share.record.lock.duration.ms");
}

#[test]
fn bad_values_name_the_key() {
    let (key, msg) = error("log.segment.bytes=x");
    assert_eq!(key, "log.segment.bytes");
    assert_eq!(
        msg,
        "invalid value 'x' for 'log.segment.bytes': must be an integer >= 14"
    );
    for (text, key) in [
        ("node.id=-1", "node.id"),
        ("node.id=2147483648", "node.id"),
        ("node.id=", "node.id"),
        ("broker.id=abc", "broker.id"),
        ("node.id=1\nbroker.id=2", "node.id"),
        ("num.partitions=0", "num.partitions"),
        ("num.partitions=99999999999", "num.partitions"),
        ("default.replication.factor=0", "default.replication.factor"),
        (
            "default.replication.factor=32768",
            "default.replication.factor",
        ),
        ("auto.create.topics.enable=yes", "auto.create.topics.enable"),
        ("delete.topic.enable=", "delete.topic.enable"),
        ("socket.request.max.bytes=0", "socket.request.max.bytes"),
        ("connections.max.idle.ms=1h", "connections.max.idle.ms"),
        (
            "log.retention.check.interval.ms=0",
            "log.retention.check.interval.ms",
        ),
        (
            "log.flush.scheduler.interval.ms=0",
            "log.flush.scheduler.interval.ms",
        ),
        (
            "offsets.topic.num.partitions=0",
            "offsets.topic.num.partitions",
        ),
        (
            "group.initial.rebalance.delay.ms=-1",
            "group.initial.rebalance.delay.ms",
        ),
        ("weir.fsync.before.ack=1", "weir.fsync.before.ack"),
        ("fetch.max.bytes=1023", "fetch.max.bytes"),
        ("fetch.max.bytes=2147483648", "fetch.max.bytes"),
        ("replica.fetch.max.bytes=-1", "replica.fetch.max.bytes"),
        (
            "replica.fetch.response.max.bytes=-1",
            "replica.fetch.response.max.bytes",
        ),
        ("producer.id.expiration.ms=0", "producer.id.expiration.ms"),
        (
            "producer.id.expiration.check.interval.ms=0",
            "producer.id.expiration.check.interval.ms",
        ),
        ("log.cleanup.policy=forever", "log.cleanup.policy"),
        (
            "log.message.timestamp.type=Now",
            "log.message.timestamp.type",
        ),
        ("min.insync.replicas=0", "min.insync.replicas"),
        ("message.max.bytes=-1", "message.max.bytes"),
        ("log.dirs=", "log.dirs"),
        ("log.dirs= , ", "log.dirs"),
        ("log.dir=", "log.dir"),
        ("log.dirs=/a,/b,/a", "log.dirs"),
        ("num.io.threads=0", "num.io.threads"),
        ("num.network.threads=three", "num.network.threads"),
        (
            "offsets.topic.replication.factor=0",
            "offsets.topic.replication.factor",
        ),
        (
            "transaction.state.log.min.isr=x",
            "transaction.state.log.min.isr",
        ),
        ("socket.send.buffer.bytes=-2", "socket.send.buffer.bytes"),
        ("log.cleaner.enable=maybe", "log.cleaner.enable"),
    ] {
        assert_eq!(error(text).0, key, "{text}");
    }
}

#[test]
fn zookeeper_is_refused() {
    let (key, msg) = error("zookeeper.connect=localhost:2181\nbroker.id=0");
    assert_eq!(key, "zookeeper.connect");
    assert!(
        msg.contains("ZooKeeper is not supported: Weir runs KRaft mode only"),
        "{msg}"
    );
    assert_eq!(
        error("zookeeper.connection.timeout.ms=6000").0,
        "zookeeper.connection.timeout.ms"
    );
}

#[test]
fn unknown_keys_warn() {
    let (c, warnings) =
        load("num.partitions=2\nnum.partitons=3\nretention.ms=5\nsasl.kerberos.service.name=x")
            .unwrap();
    assert_eq!(c.num_partitions, 2);
    assert_eq!(
        warnings,
        vec![
            "unknown config key 'num.partitons' ignored",
            "unknown config key 'retention.ms' ignored \
             (the broker-wide default is 'log.retention.ms')",
            "unknown config key 'sasl.kerberos.service.name' ignored",
        ]
    );
    // Both spellings of the log directory and of the node id are known keys.
    let (_, warnings) = load("log.dirs=/a\nlog.dir=/b\nnode.id=3\nbroker.id=3").unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn node_id_spellings() {
    assert_eq!(config("broker.id=7").node_id, 7);
    assert_eq!(config("node.id=0").node_id, 0);
    assert_eq!(config("node.id=4\nbroker.id=4").node_id, 4);
}

#[test]
fn log_dir_spellings() {
    assert_eq!(config("log.dir=/one").log_dirs, vec!["/one"]);
    assert_eq!(
        config("log.dirs=/a, /b,\nlog.dir=/c").log_dirs,
        vec!["/a", "/b"]
    );
}

#[test]
fn endpoints() {
    let c = config(
        "listeners=plaintext://:9092,Internal://[::1]:9093,EXTERNAL://my-host.example.com:0\n\
         listener.security.protocol.map=\
         PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
    );
    assert_eq!(
        c.listeners,
        vec![
            ep("PLAINTEXT", "0.0.0.0", 9092),
            ep("INTERNAL", "::1", 9093),
            ep("EXTERNAL", "my-host.example.com", 0)
        ]
    );
    assert_eq!(c.listeners[1].to_string(), "INTERNAL://[::1]:9093");
    assert_eq!(
        config("listeners=PLAINTEXT://::1:9092").listeners,
        vec![ep("PLAINTEXT", "::1", 9092)]
    );
    assert_eq!(
        config("listeners=PLAINTEXT://[fe80::1%eth0]:9092").listeners,
        vec![ep("PLAINTEXT", "fe80::1%eth0", 9092)]
    );
    // Same port on IPv4 and IPv6 is allowed, as in Kafka.
    let c = config(
        "listeners=PLAINTEXT://0.0.0.0:9092,V6://[::]:9092\n\
         advertised.listeners=PLAINTEXT://h:9092",
    );
    assert_eq!(c.listeners.len(), 2);

    for bad in [
        "listeners=",
        "listeners=127.0.0.1:9092",
        "listeners=PLAINTEXT://127.0.0.1",
        "listeners=PLAINTEXT://127.0.0.1:",
        "listeners=PLAINTEXT://127.0.0.1:65536",
        "listeners=PLAINTEXT://127.0.0.1:-1",
        "listeners=PLAINTEXT://127.0.0.1:+80",
        "listeners=PLAINTEXT://127.0.0.1:port",
        "listeners=://127.0.0.1:9092",
        "listeners=PLAIN TEXT://127.0.0.1:9092",
        "listeners=PLAINTEXT://[::1:9092",
        "listeners=PLAINTEXT://[::1]9092",
        "listeners=PLAINTEXT://[host]:9092",
        "listeners=PLAINTEXT://a:b:9092",
        "listeners=PLAINTEXT://bad/host:9092",
        "listeners=PLAINTEXT://:9092,PLAINTEXT://:9093",
        "listeners=PLAINTEXT://:9092,plaintext://:9093",
        "listeners=PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.2:9092",
    ] {
        assert_eq!(error(bad).0, "listeners", "{bad}");
    }
}

#[test]
fn advertised_listeners() {
    let c = config(
        "listeners=PLAINTEXT://0.0.0.0:9092\nadvertised.listeners=PLAINTEXT://broker1:19092",
    );
    assert_eq!(
        c.advertised_listeners,
        vec![ep("PLAINTEXT", "broker1", 19092)]
    );
    // Without advertised.listeners a wildcard is kept for the caller to resolve.
    assert_eq!(
        config("listeners=PLAINTEXT://:9092").advertised_listeners,
        vec![ep("PLAINTEXT", "0.0.0.0", 9092)]
    );
    let (key, msg) = error("advertised.listeners=OTHER://h:9092");
    assert_eq!(key, "advertised.listeners");
    assert!(
        msg.contains("'OTHER' is not defined in 'listeners'"),
        "{msg}"
    );
    assert_eq!(
        error("advertised.listeners=PLAINTEXT://h:1,PLAINTEXT://h:2").0,
        "advertised.listeners"
    );
    assert_eq!(error("advertised.listeners=").0, "advertised.listeners");
    assert_eq!(
        error(
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n\
             advertised.listeners=CONTROLLER://h:9093"
        )
        .0,
        "advertised.listeners"
    );
}

#[test]
fn security_protocols() {
    // A TLS listener needs a key store; the error names it.
    let (key, msg) = error(
        "listeners=PLAINTEXT://:9092,SECURE://:9093\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SSL",
    );
    assert_eq!(key, "ssl.keystore.location");
    assert!(
        msg.contains("listener 'SECURE' (SSL) needs a key store"),
        "{msg}"
    );
    // A listener named after a protocol implies it when there is no map.
    assert_eq!(
        error("listeners=SSL://:9093,PLAINTEXT://:9092").0,
        "ssl.keystore.location"
    );
    // ... and a listener missing from an explicit map is an error.
    assert_eq!(
        error(
            "listeners=PLAINTEXT://:9092,EXTRA://:9094\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT"
        )
        .0,
        "listener.security.protocol.map"
    );
    for bad in [
        "PLAINTEXT",
        "PLAINTEXT:TLS",
        ":PLAINTEXT",
        "PLAINTEXT:PLAINTEXT,plaintext:PLAINTEXT",
    ] {
        assert_eq!(
            error(&format!("listener.security.protocol.map={bad}")).0,
            "listener.security.protocol.map"
        );
    }
    // Names without a map default to PLAINTEXT; case does not matter.
    let c = config(
        "listeners=CLIENT://:9092\ninter.broker.listener.name=client\n\
         listener.security.protocol.map=client:plaintext",
    );
    assert_eq!(c.inter_broker_listener_name, "CLIENT");
    config("security.inter.broker.protocol=PLAINTEXT");
    // The listener named after the protocol, which must exist.
    assert_eq!(
        error("security.inter.broker.protocol=SSL").0,
        "inter.broker.listener.name"
    );
    assert_eq!(
        error("security.inter.broker.protocol=TLS").0,
        "security.inter.broker.protocol"
    );
    assert_eq!(
        error("security.inter.broker.protocol=PLAINTEXT\ninter.broker.listener.name=PLAINTEXT").0,
        "security.inter.broker.protocol"
    );
}

#[test]
fn inter_broker_listener() {
    let (key, _) = error("listeners=CLIENT://:9092");
    assert_eq!(key, "inter.broker.listener.name");
    assert_eq!(
        error("inter.broker.listener.name=OTHER").0,
        "inter.broker.listener.name"
    );
    assert_eq!(
        error("inter.broker.listener.name=").0,
        "inter.broker.listener.name"
    );
    // Must be advertised, not just bound.
    assert_eq!(
        error("listeners=PLAINTEXT://:9092,CLIENT://:9094\nadvertised.listeners=CLIENT://h:9094").0,
        "inter.broker.listener.name"
    );
}

#[test]
fn roles() {
    assert_eq!(
        config("process.roles=Controller , broker").process_roles,
        vec![Role::Controller, Role::Broker]
    );
    for bad in [
        "process.roles=",
        "process.roles=broker,broker",
        "process.roles=zookeeper",
        "process.roles=broker;controller",
    ] {
        assert_eq!(error(bad).0, "process.roles", "{bad}");
    }
}

#[test]
fn controller_listener_required_with_a_quorum() {
    let (key, msg) = error("controller.quorum.voters=1@localhost:9093");
    assert_eq!(key, "controller.listener.names");
    assert!(msg.contains("must name a listener"), "{msg}");
    assert_eq!(
        error(
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CTRL\n\
             controller.quorum.voters=1@h:9093"
        )
        .0,
        "controller.listener.names"
    );
    assert_eq!(
        error("controller.listener.names=").0,
        "controller.listener.names"
    );
    assert_eq!(
        error("controller.listener.names= , ").0,
        "controller.listener.names"
    );
}

#[test]
fn voters() {
    let c = config(
        "node.id=2\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n\
         controller.quorum.voters=1@h1:9093, 2@[::1]:9093 ,3@h3:9093",
    );
    assert_eq!(
        c.controller_quorum_voters[1],
        Voter {
            id: 2,
            host: "::1".into(),
            port: 9093
        }
    );
    assert_eq!(c.controller_quorum_voters[1].to_string(), "2@[::1]:9093");
    let (key, msg) = error(
        "node.id=5\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n\
         controller.quorum.voters=1@h1:9093,2@h2:9093",
    );
    assert_eq!(key, "controller.quorum.voters");
    assert!(msg.contains("node.id 5"), "{msg}");
    for bad in [
        "1@h1",
        "1@:9093",
        "1@h1:0",
        "x@h1:9093",
        "-1@h1:9093",
        "h1:9093",
        "1@h1:9093,1@h2:9093",
        "1@h1:99999",
        "99999999999@h1:9093",
    ] {
        let text = format!(
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.quorum.voters={bad}"
        );
        assert_eq!(error(&text).0, "controller.quorum.voters", "{bad}");
    }
    // Voters win over bootstrap servers; both are validated.
    let c = config(
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.quorum.voters=1@h:9093\n\
         controller.quorum.bootstrap.servers=h:9093,[::1]:9093",
    );
    assert_eq!(
        c.controller_quorum_voters,
        vec![Voter {
            id: 1,
            host: "h".into(),
            port: 9093
        }]
    );
    assert_eq!(
        error("controller.quorum.voters=1@h:9093\ncontroller.quorum.bootstrap.servers=h").0,
        "controller.quorum.bootstrap.servers"
    );
}

#[test]
fn broker_only_node() {
    let base = "process.roles=broker\nnode.id=4\nlisteners=PLAINTEXT://:9092";
    let c = config(&format!("{base}\ncontroller.quorum.voters=1@c1:9093"));
    assert!(c.is_broker() && !c.is_controller());
    config(&format!(
        "{base}\ncontroller.quorum.bootstrap.servers=c1:9093"
    ));
    assert_eq!(error(base).0, "controller.quorum.voters");
    assert_eq!(
        error(&format!("{base}\ncontroller.quorum.voters=4@c1:9093")).0,
        "controller.quorum.voters"
    );
    assert_eq!(
        error(
            "process.roles=broker\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n\
             controller.quorum.voters=2@c:9093"
        )
        .0,
        "listeners"
    );
}

#[test]
fn controller_only_node() {
    let c = config(
        "process.roles=controller\nlisteners=CONTROLLER://:9093\n\
         controller.quorum.voters=1@localhost:9093",
    );
    assert!(c.is_controller() && !c.is_broker());
    assert!(c.broker_endpoints().is_empty());
    assert!(c.advertised_listeners.is_empty());
    config(
        "process.roles=controller\nlisteners=CONTROLLER://:9093\nadvertised.listeners=\n\
         controller.quorum.voters=1@localhost:9093",
    );
    assert_eq!(error("process.roles=controller").0, "listeners");
    assert_eq!(
        error(
            "process.roles=controller\nlisteners=CONTROLLER://:9093,PLAINTEXT://:9092\n\
             controller.quorum.voters=1@h:9093"
        )
        .0,
        "listeners"
    );
}

#[test]
fn connections_idle_never() {
    let c = config("connections.max.idle.ms=-1");
    assert_eq!(c.connections_max_idle_ms, u64::MAX);
    let entries: BTreeMap<_, _> = c.broker_config_entries().into_iter().collect();
    assert_eq!(entries["connections.max.idle.ms"], "-1");
}

#[test]
fn broker_entries() {
    let c = config(SINGLE_NODE);
    let entries = c.broker_config_entries();
    let mut sorted = entries.clone();
    sorted.sort();
    assert_eq!(entries, sorted);
    let entries: BTreeMap<String, String> = entries.into_iter().collect();
    let get = |k: &str| {
        entries
            .get(k)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("missing {k}"))
    };
    assert_eq!(get("node.id"), "1");
    assert_eq!(get("process.roles"), "broker,controller");
    assert_eq!(
        get("listeners"),
        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    );
    assert_eq!(get("advertised.listeners"), "PLAINTEXT://127.0.0.1:9092");
    assert_eq!(
        get("listener.security.protocol.map"),
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    );
    assert_eq!(get("controller.quorum.voters"), "1@127.0.0.1:9093");
    assert_eq!(get("controller.quorum.bootstrap.servers"), "");
    assert_eq!(get("log.dirs"), "/tmp/kraft-combined-logs");
    assert_eq!(get("num.partitions"), "3");
    assert_eq!(get("auto.create.topics.enable"), "true");
    assert_eq!(get("log.retention.ms"), "604800000");
    assert_eq!(get("log.segment.bytes"), "1073741824");
    assert_eq!(get("log.roll.ms"), "604800000");
    assert_eq!(get("message.max.bytes"), "1048588");
    assert_eq!(get("log.cleanup.policy"), "delete");
    assert_eq!(get("log.message.timestamp.type"), "CreateTime");
    assert_eq!(get("weir.fsync.before.ack"), "false");

    // Rendered values parse back to the same configuration.
    let reparsed: BTreeMap<String, String> = entries
        .into_iter()
        .filter(|(k, v)| !(k == "controller.quorum.bootstrap.servers" && v.is_empty()))
        .collect();
    let (again, warnings) = ServerConfig::from_properties(&reparsed).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(again, c);
}

#[test]
fn rack_and_replica_selector() {
    let (c, warnings) = load("broker.rack=RACK1\nreplica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector\n").unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(c.broker_rack.as_deref(), Some("RACK1"));
    assert_eq!(c.replica_selector, Some(ReplicaSelector::RackAware));
    let entries: BTreeMap<String, String> = c.broker_config_entries().into_iter().collect();
    assert_eq!(entries["broker.rack"], "RACK1");
    assert_eq!(entries["replica.selector.class"], RACK_AWARE_SELECTOR);
    let (again, _) = ServerConfig::from_properties(&entries).unwrap();
    assert_eq!(again, c);

    // Kafka's defaults: no rack, no selector (consumers read from the leader).
    let d = ServerConfig::default_single_node();
    assert_eq!((d.broker_rack, d.replica_selector), (None, None));
    let (blank, _) = load("broker.rack= \nreplica.selector.class=\n").unwrap();
    assert_eq!((blank.broker_rack, blank.replica_selector), (None, None));
    let err = load("replica.selector.class=com.example.MySelector\n").unwrap_err();
    assert!(err.to_string().contains("replica.selector.class"), "{err}");
}

#[test]
fn garbage_does_not_panic() {
    let keys = [
        "node.id",
        "process.roles",
        "listeners",
        "advertised.listeners",
        "controller.listener.names",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "listener.security.protocol.map",
        "log.dirs",
        "log.retention.hours",
        "log.retention.minutes",
        "connections.max.idle.ms",
        "inter.broker.listener.name",
        "log.roll.hours",
    ];
    let values = [
        "",
        " ",
        ",",
        ",,,",
        "://",
        "@",
        "[",
        "]",
        "[]:1",
        "[:]:1",
        "a@b@c:1",
        "::::",
        "-",
        "-9223372036854775808",
        "9223372036854775807",
        "18446744073709551616",
        "é",
        "\u{0}",
        "PLAINTEXT://é:1",
        "1@é:1",
        "x:y:z",
    ];
    for key in keys {
        for value in values {
            let props = BTreeMap::from([(key.to_string(), value.to_string())]);
            let _ = ServerConfig::from_properties(&props);
        }
    }
}

/// Every broker key the e2e suites (tests/e2e/conftest.py), the Rust integration tests, the
/// scripts and the simulator's scenarios write into a broker config is known: no warning.
#[test]
fn keys_the_test_harnesses_write_are_known() {
    let keys = [
        "advertised.listeners",
        "allow.everyone.if.no.acl.found",
        "authorizer.class.name",
        "auto.create.topics.enable",
        "broker.heartbeat.interval.ms",
        "broker.rack",
        "broker.session.timeout.ms",
        "controller.listener.names",
        "controller.quorum.voters",
        "default.replication.factor",
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.session.timeout.ms",
        "group.initial.rebalance.delay.ms",
        "inter.broker.listener.name",
        "listener.security.protocol.map",
        "listeners",
        "log.dirs",
        "log.flush.interval.ms",
        "log.flush.offset.checkpoint.interval.ms",
        "log.flush.scheduler.interval.ms",
        "log.retention.check.interval.ms",
        "log.retention.hours",
        "metadata.log.max.record.bytes.between.snapshots",
        "min.insync.replicas",
        "node.id",
        "num.partitions",
        "offsets.topic.num.partitions",
        "offsets.topic.replication.factor",
        "process.roles",
        "replica.lag.time.max.ms",
        "replica.selector.class",
        "super.users",
        "transaction.state.log.min.isr",
        "transaction.state.log.replication.factor",
        "unclean.leader.election.enable",
        "weir.fsync.before.ack",
    ];
    let known = super::known_keys();
    for key in keys {
        assert!(known.contains(key), "{key}");
    }
}

#[test]
fn secure_listeners() {
    use crate::config::SecurityProtocol;
    use crate::security::tls::{ClientAuth, PemSource};
    let c = config(
        "listeners=CLIENT://:9093,MTLS://:9094,CONTROLLER://:9095\n\
         listener.security.protocol.map=CLIENT:SASL_SSL,MTLS:SSL,CONTROLLER:PLAINTEXT\n\
         inter.broker.listener.name=CLIENT\n\
         sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN\n\
         listener.name.client.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"a\";\n\
         listener.name.client.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
         ssl.keystore.type=PEM\nssl.keystore.location=/etc/broker.pem\n\
         ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\n\
         ssl.client.auth=required\n\
         listener.name.client.connections.max.reauth.ms=60000\n\
         ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
    );
    let client = c.security_of("CLIENT");
    assert_eq!(client.protocol, SecurityProtocol::SaslSsl);
    // Unprefixed ssl.client.auth does not apply to SASL_SSL (KIP-684).
    assert_eq!(client.tls.as_ref().unwrap().client_auth, ClientAuth::None);
    let sasl = client.sasl.unwrap();
    assert_eq!(sasl.plain_users["alice"], "a");
    assert_eq!(sasl.reauth, Some(std::time::Duration::from_secs(60)));
    let mtls = c.security_of("MTLS");
    let tls = mtls.tls.unwrap();
    assert_eq!(tls.client_auth, ClientAuth::Required);
    assert_eq!(tls.chain, PemSource::File("/etc/broker.pem".into()));
    assert_eq!(
        mtls.principal_mapping.map("CN=alice,O=x"),
        Some("alice".into())
    );
    assert_eq!(
        c.security_of("CONTROLLER").protocol,
        SecurityProtocol::Plaintext
    );

    let base = "listeners=S://:9093\nlistener.security.protocol.map=S:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT\ninter.broker.listener.name=S\n";
    for (extra, key) in [
        ("", "sasl.enabled.mechanisms"),
        ("sasl.enabled.mechanisms=GSSAPI", "sasl.enabled.mechanisms"),
        (
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.s.plain.sasl.jaas.config",
        ),
        (
            "sasl.enabled.mechanisms=PLAIN\nlistener.name.s.plain.sasl.jaas.config=x",
            "listener.name.s.plain.sasl.jaas.config",
        ),
    ] {
        assert_eq!(error(&format!("{base}{extra}")).0, key, "{extra}");
    }
    let tls = "listeners=S://:9093\nlistener.security.protocol.map=S:SSL,CONTROLLER:PLAINTEXT\ninter.broker.listener.name=S\n";
    for (extra, key) in [
        (
            "ssl.keystore.type=JKS\nssl.keystore.location=/k",
            "ssl.keystore.type",
        ),
        (
            "ssl.keystore.location=/k\nssl.keystore.password=x",
            "ssl.keystore.password",
        ),
        (
            "ssl.keystore.location=/k\nssl.client.auth=required",
            "ssl.client.auth",
        ),
        (
            "ssl.keystore.location=/k\nssl.client.auth=maybe",
            "ssl.client.auth",
        ),
        (
            "ssl.keystore.location=/k\nssl.principal.mapping.rules=RULE:(?=a)/x/",
            "ssl.principal.mapping.rules",
        ),
    ] {
        assert_eq!(error(&format!("{tls}{extra}")).0, key, "{extra}");
    }
    // A single node dials nobody: a secure controller listener needs nothing more.
    config(
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL\n\
         ssl.keystore.location=/k",
    );
}

/// A node of a cluster logs in to the inter-broker and controller listeners of the others:
/// Kafka's secure cluster file parses, and each missing piece of the outbound side is an error
/// naming its key.
#[test]
fn secure_inter_node_listeners() {
    use crate::security::sasl::client::Login;
    use crate::security::sasl::Mechanism;
    let cluster = "node.id=1\nprocess.roles=broker,controller\n\
        controller.quorum.voters=1@h1:9093,2@h2:9093,3@h3:9093\n\
        listeners=INTERNAL://:9092,CONTROLLER://:9093,EXTERNAL://:9094\n\
        advertised.listeners=INTERNAL://h1:9092,EXTERNAL://h1:9094\n\
        listener.security.protocol.map=INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL,EXTERNAL:SSL\n\
        inter.broker.listener.name=INTERNAL\ncontroller.listener.names=CONTROLLER\n\
        ssl.keystore.location=/k\nssl.truststore.location=/t\n\
        listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512\n\
        listener.name.controller.sasl.enabled.mechanisms=PLAIN\n";
    let internal = "listener.name.internal.scram-sha-512.sasl.jaas.config=\
        org.apache.kafka.common.security.scram.ScramLoginModule required \
        username=\"broker\" password=\"broker-secret\";\n";
    let controller = "listener.name.controller.plain.sasl.jaas.config=\
        org.apache.kafka.common.security.plain.PlainLoginModule required \
        username=\"ctl\" password=\"ctl-secret\" user_ctl=\"ctl-secret\";\n";
    let mechanisms = "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n\
        sasl.mechanism.controller.protocol=PLAIN\n";
    let c = config(&format!("{cluster}{internal}{controller}{mechanisms}"));
    let out = c.inter_broker_outbound().unwrap();
    assert_eq!(out.listener, "INTERNAL");
    assert!(out.tls.is_some() && out.verify_hostname);
    assert_eq!(
        out.sasl.unwrap(),
        Login::password(Mechanism::ScramSha512, "broker", "broker-secret")
    );
    let out = c.controller_outbound().unwrap();
    assert_eq!(out.sasl.unwrap().user(), "ctl");
    // The mechanism left at Kafka's GSSAPI default, or not enabled on the listener.
    let (key, msg) = error(&format!(
        "{cluster}{internal}{controller}sasl.mechanism.controller.protocol=PLAIN\n"
    ));
    assert_eq!(key, "sasl.mechanism.inter.broker.protocol", "{msg}");
    let (key, _) = error(&format!("{cluster}{internal}{controller}sasl.mechanism.controller.protocol=PLAIN\nsasl.mechanism.inter.broker.protocol=PLAIN\n"));
    assert_eq!(key, "sasl.mechanism.inter.broker.protocol");
    // No username/password for the mechanism.
    let (key, _) = error(&format!("{cluster}{controller}{mechanisms}"));
    assert_eq!(key, "listener.name.internal.scram-sha-512.sasl.jaas.config");
    // No trust store to check the others' certificates.
    let no_trust = cluster.replace("ssl.truststore.location=/t\n", "");
    let (key, _) = error(&format!("{no_trust}{internal}{controller}{mechanisms}"));
    assert_eq!(key, "ssl.truststore.location");
    // A pure broker declares the controller listener's security without binding it.
    let broker = format!(
        "node.id=4\nprocess.roles=broker\ncontroller.quorum.voters=1@h1:9093\n\
         listeners=INTERNAL://:9092\ninter.broker.listener.name=INTERNAL\n\
         listener.security.protocol.map=INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL\n\
         controller.listener.names=CONTROLLER\nssl.keystore.location=/k\nssl.truststore.location=/t\n\
         listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512\n\
         listener.name.controller.sasl.enabled.mechanisms=PLAIN\n{internal}{controller}{mechanisms}"
    );
    let c = config(&broker);
    assert_eq!(
        c.controller_outbound().unwrap().protocol,
        SecurityProtocol::SaslSsl
    );
    assert!(c.listeners.iter().all(|l| l.listener_name != "CONTROLLER"));
    // `ssl.endpoint.identification.algorithm=` (empty) turns the host name check off.
    let c = config(&format!(
        "{cluster}{internal}{controller}{mechanisms}ssl.endpoint.identification.algorithm=\n"
    ));
    assert!(!c.inter_broker_outbound().unwrap().verify_hostname);
}

/// OAUTHBEARER on a listener: the validator's options from its JAAS entry, the node's own
/// unsecured login for outbound links, and a listener set up for signed tokens refused.
#[test]
fn oauthbearer_listeners() {
    use crate::security::sasl::Mechanism;
    let cluster = "node.id=1\nprocess.roles=broker,controller\n\
        controller.quorum.voters=1@h1:9093,2@h2:9093\n\
        listeners=INTERNAL://:9092,CONTROLLER://:9093\n\
        listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT\n\
        inter.broker.listener.name=INTERNAL\ncontroller.listener.names=CONTROLLER\n\
        sasl.enabled.mechanisms=OAUTHBEARER,PLAIN\n\
        sasl.mechanism.inter.broker.protocol=OAUTHBEARER\n\
        sasl.mechanism.controller.protocol=OAUTHBEARER\n";
    let jaas = "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
        required unsecuredLoginStringClaim_sub=\"node\" unsecuredLoginListClaim_scope=\",cluster\" \
        unsecuredValidatorRequiredScope=\"cluster\" unsecuredValidatorAllowableClockSkewMs=\"250\";\n";
    let plain = "listener.name.internal.plain.sasl.jaas.config=\
        org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";\n\
        listener.name.controller.plain.sasl.jaas.config=\
        org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";\n";
    let c = config(&format!("{cluster}{jaas}{plain}"));
    let sasl = c.security_of("INTERNAL").sasl.unwrap();
    assert_eq!(sasl.mechanisms, [Mechanism::OAuthBearer, Mechanism::Plain]);
    assert_eq!(sasl.oauthbearer.required_scope, ["cluster"]);
    assert_eq!(sasl.oauthbearer.allowable_clock_skew_ms, 250);
    // The PLAIN users come from PLAIN's own entry, not the OAUTHBEARER one.
    assert_eq!(sasl.plain_users["a"], "b");
    let out = c.controller_outbound().unwrap().sasl.unwrap();
    assert_eq!(
        (out.mechanism(), out.user()),
        (Mechanism::OAuthBearer, "node")
    );
    // Without a login of its own the node cannot dial the others.
    let (key, msg) = error(&format!("{cluster}{plain}"));
    assert_eq!(
        key, "listener.name.controller.oauthbearer.sasl.jaas.config",
        "{msg}"
    );
    assert!(msg.contains("unsecuredLoginStringClaim_sub"), "{msg}");
    // A listener meant for signed tokens is refused, not served with the unsecured validator.
    for extra in [
        "listener.name.internal.oauthbearer.sasl.server.callback.handler.class=\
         org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler\n",
        "sasl.oauthbearer.jwks.endpoint.url=https://idp/jwks\n",
    ] {
        let (key, msg) = error(&format!("{cluster}{jaas}{plain}{extra}"));
        assert!(
            key.contains("sasl.") && msg.contains("unsecured"),
            "{key}: {msg}"
        );
    }
    // Kafka's own unsecured handler named explicitly is fine; a bad option is an error.
    config(&format!(
        "{cluster}{jaas}{plain}listener.name.internal.oauthbearer.sasl.server.callback.handler.class=\
         org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler\n"
    ));
    let bad = jaas.replace("\"250\"", "\"-5\"");
    let (key, _) = error(&format!("{cluster}{bad}{plain}"));
    assert_eq!(key, "listener.name.internal.oauthbearer.sasl.jaas.config");
}

#[test]
fn connection_limits_and_per_ip_overrides_are_read() {
    let c = config("max.connections=100\nmax.connections.per.ip=10\nmax.connections.per.ip.overrides=10.0.0.1:3,[::1]:0,127.0.0.1:5");
    assert_eq!((c.max_connections, c.max_connections_per_ip), (100, 10));
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    assert_eq!(c.max_connections_per_ip_overrides[&ip("10.0.0.1")], 3);
    assert_eq!(c.max_connections_per_ip_overrides[&ip("::1")], 0);
    assert_eq!(c.max_connections_per_ip_overrides.len(), 3);
    let defaults = config("");
    assert_eq!(defaults.max_connections, i32::MAX as u32);
    assert!(defaults.max_connections_per_ip_overrides.is_empty());
    for bad in ["broker1:3", "10.0.0.1", "10.0.0.1:-1", "10.0.0.1:x"] {
        let (key, _) = error(&format!("max.connections.per.ip.overrides={bad}"));
        assert_eq!(key, "max.connections.per.ip.overrides", "{bad}");
    }
}
