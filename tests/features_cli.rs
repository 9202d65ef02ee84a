//! `weir features` (kafka-features.sh) against a node `weir format` made: a new cluster starts
//! at transaction.version 2 (Kafka 4.x's default); a downgrade, a refused upgrade past what Weir
//! serves, and the level kept across a restart (the metadata log's FeatureLevel record).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use weir::broker::Broker;
use weir::config::{parse_properties, ServerConfig};
use weir::io::Io;

mod common;

fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn config(path: &Path) -> ServerConfig {
    let props: BTreeMap<String, String> =
        parse_properties(&std::fs::read_to_string(path).unwrap()).unwrap();
    ServerConfig::from_properties(&props).unwrap().0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn features_describe_upgrade_downgrade_and_survive_a_restart() {
    let dir = common::temp_dir("features", "cli");
    let properties = dir.join("server.properties");
    std::fs::write(
        &properties,
        format!(
            "node.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={}\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let config_path = properties.to_str().unwrap();
    let out = weir(&["format", "--config", config_path, "--random-cluster-id"]);
    assert!(out.status.success(), "{}", text(&out));
    let bad = weir(&[
        "format",
        "--config",
        config_path,
        "--random-cluster-id",
        "--feature",
        "transaction.version=3",
    ]);
    assert!(!bad.status.success());
    assert!(text(&bad).contains("Weir supports 0..=2"), "{}", text(&bad));

    let running = Broker::start(config(&properties), Io::os()).await.unwrap();
    let server = running.local_addr.to_string();
    let features = |args: &[&str]| {
        let mut all = vec!["features", "--bootstrap-server", server.as_str()];
        all.extend_from_slice(args);
        weir(&all)
    };
    let described = features(&["describe"]);
    assert_eq!(
        text(&described)
            .lines()
            .next()
            .unwrap_or_default()
            .split('\t')
            .take(4)
            .collect::<Vec<_>>(),
        vec![
            "Feature: transaction.version",
            "SupportedMinVersion: 0",
            "SupportedMaxVersion: 2",
            "FinalizedVersionLevel: 2"
        ],
        "a new cluster finalizes transactions v2"
    );
    let dry = features(&[
        "downgrade",
        "--feature",
        "transaction.version=1",
        "--dry-run",
    ]);
    assert_eq!(
        text(&dry).trim(),
        "transaction.version can be downgraded to 1."
    );
    let down = features(&["downgrade", "--feature", "transaction.version=1"]);
    assert!(down.status.success(), "{}", text(&down));
    assert_eq!(
        text(&down).trim(),
        "transaction.version was downgraded to 1."
    );
    let refused = features(&["upgrade", "--feature", "transaction.version=3"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("Could not upgrade transaction.version to 3."),
        "{}",
        text(&refused)
    );
    let other = features(&["upgrade", "--feature", "metadata.version=21"]);
    assert!(!other.status.success(), "Weir serves no metadata.version");
    assert!(text(&features(&["describe"])).contains("FinalizedVersionLevel: 1"));
    running.broker.shutdown().await.unwrap();
    drop(running);

    // Restarted from the same directory: the level is in the metadata.
    let running = Broker::start(config(&properties), Io::os()).await.unwrap();
    let server = running.local_addr.to_string();
    let described = weir(&["features", "--bootstrap-server", &server, "describe"]);
    assert!(
        text(&described).contains("FinalizedVersionLevel: 1"),
        "{}",
        text(&described)
    );
    running.broker.shutdown().await.unwrap();
}
