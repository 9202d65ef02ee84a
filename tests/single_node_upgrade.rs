//! A data directory written by a single-node Weir from before a single node ran as a quorum
//! of one still opens: the fixtures (`tests/fixtures/single-node-<commit>/{clean,killed}`,
//! made by `tests/fixtures/make-single-node-fixtures.sh` with that commit's binary) are
//! started on a copy, and their topics, topic configs and records are served; a change made
//! after the upgrade survives a clean restart and then a crash.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use weir::broker::{Broker, RunningBroker};
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::Io;
use weir::log::batch;

mod common;

use common::temp_dir;

/// The commit whose binary wrote the fixtures.
const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/single-node-8be4435"
);

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn config(dir: &Path) -> ServerConfig {
    let props = BTreeMap::from(
        [
            ("listeners", "PLAINTEXT://127.0.0.1:0".to_string()),
            ("log.dirs", dir.display().to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    ServerConfig::from_properties(&props).unwrap().0
}

/// `(key, value)` of every record of a partition.
async fn records(client: &mut Client, topic: &str, partition: i32) -> Vec<(String, String)> {
    let fetched = client
        .fetch(topic, partition, 0, 1 << 20, Duration::from_millis(10))
        .await
        .unwrap();
    let text = |b: Option<&[u8]>| String::from_utf8(b.unwrap_or_default().to_vec()).unwrap();
    let mut out = Vec::new();
    for item in batch::iter(&fetched.records) {
        let (at, header) = item.unwrap();
        let bytes = &fetched.records[at..at + header.total_len()];
        for r in batch::records(bytes, &header).unwrap().unwrap() {
            out.push((text(r.key), text(r.value)));
        }
    }
    out
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What the fixture holds, plus what round 0 added when `after_change`.
async fn check(running: &RunningBroker, after_change: bool) {
    let mut client = Client::connect(&Io::os(), running.local_addr)
        .await
        .unwrap();
    let mut topics: Vec<(String, i32)> = client
        .metadata(None)
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.name, t.partitions))
        .collect();
    topics.sort();
    let mut want = vec![("events".to_string(), 1), ("orders".to_string(), 2)];
    if after_change {
        want.insert(0, ("after".to_string(), 1));
    }
    assert_eq!(topics, want);
    let configs = client.describe_topic_configs("orders").await.unwrap();
    let value = |k: &str| configs[k].value.clone().unwrap();
    assert_eq!(value("retention.ms"), "604800000");
    assert_eq!(value("max.message.bytes"), "65536");
    assert_eq!(configs["retention.ms"].source, 1, "a topic override");
    let mut orders0 = pairs(&[("k0", "v0"), ("k1", "v1"), ("k2", "v2")]);
    if after_change {
        orders0.push(("k9".to_string(), "v9".to_string()));
    }
    assert_eq!(records(&mut client, "orders", 0).await, orders0);
    assert_eq!(
        records(&mut client, "orders", 1).await,
        pairs(&[("k3", "v3")])
    );
    assert_eq!(
        records(&mut client, "events", 0).await,
        pairs(&[("", "e0"), ("", "e1")])
    );
}

/// Adds a record and a topic: metadata and data written after the upgrade.
async fn change(running: &RunningBroker) {
    let mut client = Client::connect(&Io::os(), running.local_addr)
        .await
        .unwrap();
    let mut b = batch::BatchBuilder::new(1);
    b.push(Some(b"k9"), Some(b"v9"), 1);
    let offset = client
        .produce("orders", 0, b.finish(-1, -1, -1).into(), -1)
        .await
        .unwrap();
    assert_eq!(offset, Some(3));
    client
        .create_topic("after", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
}

/// The metadata log is the quorum's: a snapshot of the old log, every batch with an epoch.
fn assert_upgraded(dir: &Path) {
    let meta = dir.join("__cluster_metadata-0");
    let mut snapshots = 0;
    for entry in std::fs::read_dir(&meta).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        snapshots += name.ends_with(".checkpoint") as usize;
        if name.ends_with(".log") {
            let bytes = std::fs::read(meta.join(&name)).unwrap();
            for item in batch::iter(&bytes) {
                let (_, header) = item.unwrap();
                assert!(
                    header.partition_leader_epoch >= 0,
                    "{name}: a batch without a raft epoch at {}",
                    header.base_offset
                );
            }
        }
    }
    assert!(snapshots >= 1, "no snapshot of the old log");
}

async fn upgrade(fixture: &str) {
    let dir = temp_dir("upgrade", fixture);
    copy_dir(&Path::new(FIXTURES).join(fixture), &dir);
    // Round 0 upgrades and writes; a clean restart; then a restart after a crash.
    for round in 0..3 {
        let running = Broker::start(config(&dir), Io::os()).await.unwrap();
        check(&running, round > 0).await;
        assert_upgraded(&dir);
        match round {
            0 => {
                change(&running).await;
                check(&running, true).await;
                running.broker.shutdown().await.unwrap();
            }
            1 => running.broker.halt(),
            _ => running.broker.shutdown().await.unwrap(),
        }
        drop(running);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanly_stopped_single_node_directory_opens() {
    upgrade("clean").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_single_node_directory_opens() {
    upgrade("killed").await;
}

/// The fold itself on the fixtures: the quorum's log then opens on a snapshot of the image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixtures_metadata_logs_fold_into_a_snapshot() {
    use weir::broker::quorum::legacy::{migrate, Migration};
    use weir::broker::quorum::raft_log::RaftLog;
    for fixture in ["clean", "killed"] {
        let dir = temp_dir("fold", fixture);
        copy_dir(&Path::new(FIXTURES).join(fixture), &dir);
        let disk = Io::os().disk;
        let done = migrate(disk.clone(), &dir, 0).await.unwrap();
        let Migration::Folded { end, records } = done else {
            panic!("{fixture}: nothing folded");
        };
        assert!(records > 0 && end >= records, "{fixture}: {done:?}");
        let (log, state, loaded) = RaftLog::open(disk.clone(), &dir, 0).await.unwrap();
        assert_eq!((log.start_offset(), state.end_offset), (end, end));
        let image = loaded.expect("the snapshot loads").image;
        let mut names: Vec<&str> = image.topics().map(|t| t.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["events", "orders"], "{fixture}");
        drop(log);
        let again = migrate(disk, &dir, 0).await.unwrap();
        assert_eq!(again, Migration::NotNeeded);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
