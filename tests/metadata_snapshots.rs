//! Metadata snapshots on a real 3-node quorum (loopback sockets, real disks, one process): a
//! small `metadata.log.max.record.bytes.between.snapshots` makes every node snapshot its image
//! and move its log start; a voter stopped while the others commit many records comes back
//! below the leader's log start and catches up through FetchSnapshot; a brand-new pure broker
//! joins from the snapshot; a restarted node serves its image from its own snapshot and log
//! before it hears from anyone; DescribeQuorum lists the observer. Prints what the snapshots
//! held (figures, not assertions).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use weir::broker::{Broker, RunningBroker};
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::Io;

mod common;

use common::{combined_config, free_port, temp_dir, wait_for, CLUSTER_ID};

const SNAPSHOT_BYTES: &str = "4096";
const TOPICS: usize = 120;

struct Node {
    id: i32,
    config: ServerConfig,
    running: Option<RunningBroker>,
}

impl Node {
    fn broker(&self) -> &Broker {
        &self.running.as_ref().expect("running").broker
    }
}

fn observer_config(id: i32, dir: &Path, controller_ports: &[u16]) -> ServerConfig {
    let voters: Vec<String> = controller_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
        .collect();
    let props: BTreeMap<String, String> = [
        ("process.roles", "broker".to_string()),
        ("node.id", id.to_string()),
        ("controller.quorum.voters", voters.join(",")),
        (
            "listeners",
            format!("PLAINTEXT://127.0.0.1:{}", free_port()),
        ),
        ("controller.listener.names", "CONTROLLER".to_string()),
        ("log.dirs", dir.display().to_string()),
        ("controller.quorum.fetch.timeout.ms", "600".to_string()),
        ("broker.heartbeat.interval.ms", "200".to_string()),
        (
            "metadata.log.max.record.bytes.between.snapshots",
            SNAPSHOT_BYTES.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    ServerConfig::from_properties(&props).unwrap().0
}

fn active(nodes: &[Node]) -> Option<usize> {
    let active: Vec<usize> = (0..nodes.len())
        .filter(|i| {
            nodes[*i]
                .running
                .as_ref()
                .is_some_and(|r| r.broker.is_active_controller())
        })
        .collect();
    (active.len() == 1).then(|| active[0])
}

fn snapshot_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("__cluster_metadata-0"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".checkpoint"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn has_all_topics(node: &Node) -> bool {
    let image = node.broker().image();
    (0..TOPICS).all(|i| image.topic(&format!("snap-{i}")).is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_move_the_log_start_and_lagging_or_new_nodes_load_them() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
    let io = Io::os();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let dir = temp_dir("snapshots", &format!("n{id}"));
        weir::broker::format_log_dir(&io, &dir, CLUSTER_ID, id)
            .await
            .unwrap();
        let extra = [(
            "metadata.log.max.record.bytes.between.snapshots",
            SNAPSHOT_BYTES,
        )];
        let config = combined_config(id as usize, &dir, &ports, free_port(), &extra);
        nodes.push(Node {
            id,
            config,
            running: None,
        });
    }
    for node in &mut nodes {
        node.running = Some(Broker::start(node.config.clone(), Io::os()).await.unwrap());
    }
    let leader = wait_for("a leader", Duration::from_secs(20), || active(&nodes)).await;
    wait_for("three unfenced brokers", Duration::from_secs(20), || {
        (nodes[leader].broker().image().live_brokers().count() == 3).then_some(())
    })
    .await;

    // A voter stops; the other two commit many records.
    let lagging = (leader + 1) % 3;
    let stopped = nodes[lagging].running.take().unwrap();
    let stopped_end = stopped.broker.quorum_status().log_end;
    stopped.broker.halt();
    drop(stopped);
    let leader_addr = nodes[leader].running.as_ref().unwrap().local_addr;
    let mut client = Client::connect(&io, leader_addr).await.unwrap();
    for i in 0..TOPICS {
        client
            .create_topic(&format!("snap-{i}"), 1, 1, &BTreeMap::new())
            .await
            .unwrap();
    }
    let status = wait_for(
        "the leader's log start to move",
        Duration::from_secs(10),
        || {
            let s = nodes[leader].broker().quorum_status();
            (s.log_start > stopped_end).then_some(s)
        },
    )
    .await;
    let files = snapshot_files(Path::new(&nodes[leader].config.log_dirs[0]));
    println!(
        "leader: log start {} end {} HW {}, snapshots {files:?} (the stopped voter ended at {stopped_end})",
        status.log_start, status.log_end, status.high_watermark
    );
    assert!(
        !files.is_empty() && files.len() <= 2,
        "one or two snapshots kept: {files:?}"
    );

    // The stopped voter comes back below the leader's log start: it loads the snapshot.
    tokio::time::sleep(Duration::from_millis(200)).await;
    nodes[lagging].running = Some(
        Broker::start(nodes[lagging].config.clone(), Io::os())
            .await
            .unwrap(),
    );
    wait_for(
        "the lagging voter to catch up",
        Duration::from_secs(20),
        || has_all_topics(&nodes[lagging]).then_some(()),
    )
    .await;
    let caught_up = nodes[lagging].broker().quorum_status();
    let snapshot = caught_up.snapshot.expect("a snapshot");
    assert!(
        snapshot.offset > stopped_end && caught_up.log_start > stopped_end,
        "the voter's log restarted at a fetched snapshot: {caught_up:?}, it had {stopped_end}"
    );
    let image = nodes[lagging].broker().image();
    println!(
        "lagging voter: loaded snapshot at {} (log start {}), image: {} topics, {} brokers",
        snapshot.offset,
        caught_up.log_start,
        image.topics().count(),
        image.brokers().count()
    );
    // The same image as the leader's once both applied the same offset.
    wait_for("equal images", Duration::from_secs(10), || {
        let (a, b) = (
            nodes[leader].broker().image(),
            nodes[lagging].broker().image(),
        );
        (a == b).then_some(())
    })
    .await;

    // A brand-new pure broker joins: it has no log, so it starts from the snapshot.
    let observer_dir = temp_dir("snapshots", "n4");
    weir::broker::format_log_dir(&io, &observer_dir, CLUSTER_ID, 4)
        .await
        .unwrap();
    nodes.push(Node {
        id: 4,
        config: observer_config(4, &observer_dir, &ports),
        running: None,
    });
    nodes[3].running = Some(
        Broker::start(nodes[3].config.clone(), Io::os())
            .await
            .unwrap(),
    );
    wait_for(
        "the new broker to catch up",
        Duration::from_secs(20),
        || has_all_topics(&nodes[3]).then_some(()),
    )
    .await;
    let observer = nodes[3].broker().quorum_status();
    assert!(
        observer.snapshot.is_some() && observer.log_start > 0,
        "{observer:?}"
    );
    // DescribeQuorum's observers: the leader lists the new broker with its log end.
    let described = wait_for(
        "the observer in the leader's view",
        Duration::from_secs(10),
        || {
            let s = nodes[leader].broker().quorum_status();
            s.replicas
                .iter()
                .find(|r| r.node_id == 4 && !r.voter && r.end_offset >= observer.log_start)
                .cloned()
        },
    )
    .await;
    println!("observer in DescribeQuorum: {described:?}");

    // A restarted voter serves its image from its own snapshot before hearing from anyone.
    let restarted = (leader + 2) % 3;
    let before = nodes[restarted].broker().quorum_status();
    nodes[restarted].running.take().unwrap().broker.halt();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let running = Broker::start(nodes[restarted].config.clone(), Io::os())
        .await
        .unwrap();
    let image = running.broker.image();
    let own = before.snapshot.expect("the voter had snapshotted");
    assert!(
        image.applied() > 0 && image.topic("snap-0").is_some(),
        "the image at start comes from the node's snapshot at {}",
        own.offset
    );
    println!(
        "restarted voter: image at start has {} topics (applied {}), from its snapshot at {}",
        image.topics().count(),
        image.applied(),
        own.offset
    );
    nodes[restarted].running = Some(running);
    wait_for(
        "the restarted voter to catch up",
        Duration::from_secs(20),
        || has_all_topics(&nodes[restarted]).then_some(()),
    )
    .await;

    for node in &nodes {
        if let Some(r) = &node.running {
            r.broker.halt();
        }
    }
    for node in &nodes {
        let _ = node.id;
        let _ = std::fs::remove_dir_all(&node.config.log_dirs[0]);
    }
}
