//! Snapshots of configuration as users see it: the broker's DescribeConfigs entries and the
//! topic-level defaults, rendered as text. A change to a default or a key name shows up here.

use std::collections::BTreeMap;

use weir::config::{parse_properties, ServerConfig};

fn render(entries: impl IntoIterator<Item = (String, String)>) -> String {
    entries
        .into_iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

#[test]
fn topic_defaults() {
    let config = ServerConfig::default_single_node();
    insta::assert_snapshot!(render(
        config
            .topic_defaults
            .entries()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
    ));
}

#[test]
fn broker_entries_for_a_kraft_single_node_file() {
    let text = "node.id=1\n\
        process.roles=broker,controller\n\
        listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n\
        advertised.listeners=PLAINTEXT://127.0.0.1:9092\n\
        controller.listener.names=CONTROLLER\n\
        controller.quorum.voters=1@127.0.0.1:9093\n\
        log.dirs=/var/lib/weir\n\
        num.partitions=3\n\
        log.retention.hours=24\n";
    let props = parse_properties(text).unwrap();
    let (config, warnings) = ServerConfig::from_properties(&props).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    insta::assert_snapshot!(render(config.broker_config_entries()));
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("log.segment.bytes", "huge"),
        ("num.partitions", "0"),
        ("listeners", "PLAINTEXT//nohost"),
        ("zookeeper.connect", "localhost:2181"),
        ("weir.fsync.before.ack", "maybe"),
    ];
    let mut out = String::new();
    for (key, value) in cases {
        let props = BTreeMap::from([(key.to_string(), value.to_string())]);
        let err = ServerConfig::from_properties(&props).unwrap_err();
        out += &format!("{key}={value}: {err}\n");
    }
    insta::assert_snapshot!(out);
}
