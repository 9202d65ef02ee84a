//! A 3-node metadata quorum on real loopback sockets and real disks (one temp dir per node),
//! in one process: a leader is elected, a CreateTopics sent to a follower is forwarded and
//! committed, the leader is killed, a new leader commits the next change, and the killed node
//! restarts and catches up. Prints the failover time and the commit latency (figures, not
//! assertions). Also `weir format` from the command line.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weir::broker::quorum_status::QuorumRole;
use weir::broker::{Broker, RunningBroker};
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::Io;

const NODES: i32 = 3;
const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qk";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-cluster-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Node {
    id: i32,
    config: ServerConfig,
    running: Option<RunningBroker>,
}

fn config(id: i32, dir: &Path, controller_ports: &[u16], client_port: u16) -> ServerConfig {
    let voters: Vec<String> = controller_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
        .collect();
    let cport = controller_ports[(id - 1) as usize];
    let props = BTreeMap::from([
        ("process.roles".to_string(), "broker,controller".to_string()),
        ("node.id".to_string(), id.to_string()),
        ("controller.quorum.voters".to_string(), voters.join(",")),
        (
            "listeners".to_string(),
            format!("PLAINTEXT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{cport}"),
        ),
        (
            "controller.listener.names".to_string(),
            "CONTROLLER".to_string(),
        ),
        (
            "inter.broker.listener.name".to_string(),
            "PLAINTEXT".to_string(),
        ),
        ("log.dirs".to_string(), dir.display().to_string()),
        (
            "controller.quorum.election.timeout.ms".to_string(),
            "300".to_string(),
        ),
        (
            "controller.quorum.fetch.timeout.ms".to_string(),
            "600".to_string(),
        ),
    ]);
    ServerConfig::from_properties(&props).unwrap().0
}

async fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The node that is the active controller, if exactly one running node is.
fn active(nodes: &[Node]) -> Option<usize> {
    let active: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            n.running
                .as_ref()
                .is_some_and(|r| r.broker.is_active_controller())
        })
        .map(|(i, _)| i)
        .collect();
    (active.len() == 1).then(|| active[0])
}

async fn create(addr: SocketAddr, topic: &str) -> Result<(), String> {
    let mut client = Client::connect(&Io::os(), addr)
        .await
        .map_err(|e| e.to_string())?;
    client
        .create_topic(topic, 1, 1, &BTreeMap::new())
        .await
        .map_err(|e| e.to_string())
}

/// Retries a creation until it commits (NOT_CONTROLLER while no leader is active).
async fn create_retrying(addr: SocketAddr, topic: &str, limit: Duration) {
    let start = Instant::now();
    loop {
        match create(addr, topic).await {
            Ok(()) => return,
            Err(e) => {
                assert!(start.elapsed() < limit, "creating {topic}: {e}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

fn committed(node: &Node) -> Vec<(u64, bytes::Bytes)> {
    node.running
        .as_ref()
        .unwrap()
        .broker
        .committed_metadata(0, 100_000)
}

fn has_topic(node: &Node, topic: &str) -> bool {
    node.running
        .as_ref()
        .is_some_and(|r| r.broker.image().topic(topic).is_some())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_commit_fail_over_and_catch_up() {
    let io = Io::os();
    let controller_ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let mut nodes = Vec::new();
    for id in 1..=NODES {
        let dir = temp_dir(&format!("n{id}"));
        weir::broker::format_log_dir(&io, &dir, CLUSTER_ID, id)
            .await
            .unwrap();
        let config = config(id, &dir, &controller_ports, free_port());
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
    let status = nodes[leader]
        .running
        .as_ref()
        .unwrap()
        .broker
        .quorum_status();
    assert_eq!(status.role, QuorumRole::Leader);
    assert_eq!(status.leader, Some(nodes[leader].id));
    assert_eq!(status.replicas.len(), NODES as usize);
    println!(
        "leader: node {} at epoch {}",
        nodes[leader].id, status.epoch
    );

    // A CreateTopics sent to a follower is forwarded to the leader and committed everywhere.
    let follower = (leader + 1) % NODES as usize;
    let follower_addr = nodes[follower].running.as_ref().unwrap().local_addr;
    create(follower_addr, "first").await.unwrap();
    assert!(has_topic(&nodes[leader], "first"));
    wait_for(
        "every node to apply 'first'",
        Duration::from_secs(10),
        || nodes.iter().all(|n| has_topic(n, "first")).then_some(()),
    )
    .await;
    // A duplicate is refused by the leader's controller, through the follower.
    let e = create(follower_addr, "first").await.unwrap_err();
    assert!(
        e.contains("TopicAlreadyExists") || e.contains("already"),
        "{e}"
    );

    // Commit latency on the leader, one change at a time.
    let leader_addr = nodes[leader].running.as_ref().unwrap().local_addr;
    let mut client = Client::connect(&io, leader_addr).await.unwrap();
    let mut latencies = Vec::new();
    for i in 0..100 {
        let start = Instant::now();
        client
            .create_topic(&format!("lat-{i}"), 1, 1, &BTreeMap::new())
            .await
            .unwrap();
        latencies.push(start.elapsed());
    }
    latencies.sort();
    println!(
        "metadata commit latency (CreateTopics on the leader, 3 voters, loopback, fsync): p50 {:?} p99 {:?} max {:?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().unwrap()
    );

    // Kill the leader; the others elect a new one, which commits the next change.
    let killed = leader;
    let stopped_at = Instant::now();
    nodes[killed].running.take().unwrap().broker.halt();
    let survivor = (killed + 1) % NODES as usize;
    let survivor_addr = nodes[survivor].running.as_ref().unwrap().local_addr;
    create_retrying(survivor_addr, "second", Duration::from_secs(20)).await;
    let failover = stopped_at.elapsed();
    println!(
        "failover (leader killed -> next committed CreateTopics): {failover:?} \
         (election timeout 300 ms, fetch timeout 600 ms)"
    );
    let new_leader = wait_for("a new leader", Duration::from_secs(10), || active(&nodes)).await;
    assert_ne!(new_leader, killed);
    let new_status = nodes[new_leader]
        .running
        .as_ref()
        .unwrap()
        .broker
        .quorum_status();
    assert!(
        new_status.epoch > status.epoch,
        "{new_status:?} after {status:?}"
    );

    // The killed node restarts and catches up to the same committed sequence.
    tokio::time::sleep(Duration::from_millis(200)).await; // let its tasks wind down
    nodes[killed].running = Some(
        Broker::start(nodes[killed].config.clone(), Io::os())
            .await
            .unwrap(),
    );
    create_retrying(survivor_addr, "third", Duration::from_secs(20)).await;
    wait_for(
        "the restarted node to catch up",
        Duration::from_secs(20),
        || {
            let reference = committed(&nodes[new_leader]);
            nodes
                .iter()
                .all(|n| committed(n) == reference)
                .then_some(())
        },
    )
    .await;
    assert!(has_topic(&nodes[killed], "second") && has_topic(&nodes[killed], "third"));
    let offsets: Vec<u64> = committed(&nodes[killed]).iter().map(|(o, _)| *o).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");

    for node in &nodes {
        if let Some(r) = &node.running {
            r.broker.shutdown().await.unwrap();
        }
    }
    for node in &nodes {
        let _ = std::fs::remove_dir_all(&node.config.log_dirs[0]);
    }
}

#[tokio::test]
async fn unformatted_or_foreign_dirs_are_refused_in_a_cluster() {
    let controller_ports = [free_port(), free_port(), free_port()];
    let dir = temp_dir("unformatted");
    let config = config(1, &dir, &controller_ports, free_port());
    let e = Broker::start(config.clone(), Io::os()).await.err().unwrap();
    assert!(e.to_string().contains("weir format"), "{e}");
    weir::broker::format_log_dir(&Io::os(), &dir, CLUSTER_ID, 2)
        .await
        .unwrap();
    let e = Broker::start(config, Io::os()).await.err().unwrap();
    assert!(e.to_string().contains("node.id=2"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn weir_format_writes_meta_properties() {
    let dir = temp_dir("format-cli");
    let ports = [free_port(), free_port(), free_port()];
    let config_path = dir.join("server.properties");
    std::fs::write(
        &config_path,
        format!(
            "process.roles=broker,controller\nnode.id=2\n\
             controller.quorum.voters=1@127.0.0.1:{},2@127.0.0.1:{},3@127.0.0.1:{}\n\
             listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{}\n\
             controller.listener.names=CONTROLLER\nlog.dirs={}\n",
            ports[0],
            ports[1],
            ports[2],
            ports[1],
            dir.join("data").display()
        ),
    )
    .unwrap();
    let weir = env!("CARGO_BIN_EXE_weir");
    let out = std::process::Command::new(weir)
        .args(["format", "--config"])
        .arg(&config_path)
        .args(["--cluster-id", CLUSTER_ID])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = std::fs::read_to_string(dir.join("data/meta.properties")).unwrap();
    assert!(meta.contains(&format!("cluster.id={CLUSTER_ID}")), "{meta}");
    assert!(
        meta.contains("node.id=2") && meta.contains("version=1"),
        "{meta}"
    );
    assert!(meta.contains("directory.id="), "{meta}");
    // Another cluster id on the same directory is refused, naming both.
    let out = std::process::Command::new(weir)
        .args(["format", "--config"])
        .arg(&config_path)
        .arg("--random-cluster-id")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(CLUSTER_ID), "{err}");
    // A random id is printed and usable.
    let other = dir.join("other.properties");
    std::fs::write(
        &other,
        std::fs::read_to_string(&config_path)
            .unwrap()
            .replace("/data\n", "/data2\n"),
    )
    .unwrap();
    let out = std::process::Command::new(weir)
        .args(["format", "--config"])
        .arg(&other)
        .arg("--random-cluster-id")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(id.len(), 22, "{id}");
    let bad = std::process::Command::new(weir)
        .args(["format", "--config"])
        .arg(&config_path)
        .args(["--cluster-id", "not-an-id"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}
