//! A 3-node metadata quorum on real loopback sockets and real disks (one temp dir per node),
//! in one process: a leader is elected, a CreateTopics sent to a follower is forwarded and
//! committed, the leader is killed, a new leader commits the next change, and the killed node
//! restarts and catches up. Prints the failover time and the commit latency (figures, not
//! assertions). Partition leadership: AlterPartition on the controller listener, and a halted
//! partition leader's leadership moved to an ISR member once its session expires. Also
//! `weir format` from the command line.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weir::broker::quorum_status::QuorumRole;
use weir::broker::{Broker, RunningBroker};
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::Io;

mod common;

use common::{free_port, wait_listening, CLUSTER_ID};

const NODES: i32 = 3;

struct Node {
    id: i32,
    config: ServerConfig,
    running: Option<RunningBroker>,
}

/// A pure broker (`process.roles=broker`): an observer of the quorum.
fn broker_config(id: i32, dir: &Path, controller_ports: &[u16], client_port: u16) -> ServerConfig {
    let mut config = config(1, dir, controller_ports, client_port);
    let props = BTreeMap::from([
        ("process.roles".to_string(), "broker".to_string()),
        ("node.id".to_string(), id.to_string()),
        (
            "controller.quorum.voters".to_string(),
            config
                .controller_quorum_voters
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(","),
        ),
        (
            "listeners".to_string(),
            format!("PLAINTEXT://127.0.0.1:{client_port}"),
        ),
        (
            "controller.listener.names".to_string(),
            "CONTROLLER".to_string(),
        ),
        ("log.dirs".to_string(), dir.display().to_string()),
    ]);
    config = ServerConfig::from_properties(&props).unwrap().0;
    config
}

fn config(id: i32, dir: &Path, controller_ports: &[u16], client_port: u16) -> ServerConfig {
    config_with(id, dir, controller_ports, client_port, &[])
}

/// [`config`] with more keys.
fn config_with(
    id: i32,
    dir: &Path,
    controller_ports: &[u16],
    client_port: u16,
    extra: &[(&str, &str)],
) -> ServerConfig {
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
    let mut props = props;
    props.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
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

/// The client addresses of the running nodes.
fn listening_addrs(nodes: &[Node]) -> Vec<SocketAddr> {
    nodes
        .iter()
        .filter_map(|n| n.running.as_ref())
        .map(|r| r.local_addr)
        .collect()
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
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
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
    // Node 4 is a pure broker: it observes the quorum and registers, but never votes.
    let observer_dir = temp_dir("n4");
    weir::broker::format_log_dir(&io, &observer_dir, CLUSTER_ID, 4)
        .await
        .unwrap();
    nodes.push(Node {
        id: 4,
        config: broker_config(4, &observer_dir, &controller_ports, free_port()),
        running: None,
    });
    for node in &mut nodes {
        node.running = Some(Broker::start(node.config.clone(), Io::os()).await.unwrap());
    }
    assert!(nodes[3].running.as_ref().unwrap().controller_addr.is_none());
    let leader = wait_for("a leader", Duration::from_secs(20), || active(&nodes)).await;
    let status = nodes[leader]
        .running
        .as_ref()
        .unwrap()
        .broker
        .quorum_status();
    assert_eq!(status.role, QuorumRole::Leader);
    assert_eq!(status.leader, Some(nodes[leader].id));
    assert_eq!(
        status.replicas.iter().filter(|r| r.voter).count(),
        NODES as usize
    );
    println!(
        "leader: node {} at epoch {}",
        nodes[leader].id, status.epoch
    );

    // Every broker (the observer too) registers and is unfenced by its heartbeats.
    wait_for("four unfenced brokers", Duration::from_secs(20), || {
        let image = nodes[leader].running.as_ref().unwrap().broker.image();
        (image.live_brokers().count() == nodes.len()).then_some(())
    })
    .await;
    wait_listening(&listening_addrs(&nodes)).await;
    assert_eq!(
        nodes[3]
            .running
            .as_ref()
            .unwrap()
            .broker
            .quorum_status()
            .role,
        QuorumRole::Observer
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

    describe_quorum_answers(&nodes, leader, follower).await;
    bad_quorum_input_is_answered_with_errors(&nodes[follower]).await;
    follower_broker_config_goes_through_the_controller(&io, &nodes[follower]).await;

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

    // A follower shuts down in a controlled way: the controller lets it go once its
    // leaderships moved; the rest stop as a crash would.
    let graceful = (0..NODES as usize)
        .find(|i| Some(*i) != active(&nodes))
        .unwrap();
    assert_eq!(committed(&nodes[3]), committed(&nodes[graceful]));
    let broker = nodes[graceful].running.take().unwrap().broker;
    broker.shutdown().await.unwrap();
    assert!(broker.broker_session().shutdown_granted());
    for node in &nodes {
        if let Some(r) = &node.running {
            r.broker.halt();
        }
    }
    for node in &nodes {
        let _ = std::fs::remove_dir_all(&node.config.log_dirs[0]);
    }
}

/// DescribeQuorum v0–v2 to the leader, and to a follower (which forwards it).
/// A per-broker config sent to that broker (as clients send it), which is not the active
/// controller: forwarded, validated against the registered brokers, committed, and reported by
/// the broker itself as DYNAMIC_BROKER_CONFIG; another broker's id there is INVALID_REQUEST.
async fn follower_broker_config_goes_through_the_controller(io: &Io, node: &Node) {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
    use kafka_protocol::protocol::StrBytes;
    let addr = node.running.as_ref().unwrap().local_addr;
    let mut client = Client::connect(io, addr).await.unwrap();
    let id = StrBytes::from_string(node.id.to_string());
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(id.clone())
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_static_str("log.segment.bytes"))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_static_str("4096")))]),
    ]);
    let response = client.connection().call(&request, 1).await.unwrap();
    assert_eq!(response.responses[0].error_code, 0, "{response:?}");
    let describe = |name: StrBytes| {
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(name)
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("log.segment.bytes")]))])
    };
    let broker = &node.running.as_ref().unwrap().broker;
    wait_for(
        "the broker config to reach its broker",
        Duration::from_secs(10),
        || {
            broker
                .image()
                .resource_configs(&weir::controller::ConfigResource::Broker(
                    node.id.to_string(),
                ))
                .contains_key("log.segment.bytes")
                .then_some(())
        },
    )
    .await;
    let response = client.connection().call(&describe(id), 4).await.unwrap();
    let entry = &response.results[0].configs[0];
    assert_eq!(
        (entry.value.as_deref(), entry.config_source),
        (Some("4096"), 2)
    );
    let other = StrBytes::from_string((node.id % NODES + 1).to_string());
    let response = client.connection().call(&describe(other), 4).await.unwrap();
    assert_eq!(response.results[0].error_code, 42);
}

async fn describe_quorum_answers(nodes: &[Node], leader: usize, follower: usize) {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    use kafka_protocol::messages::{DescribeQuorumRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    for target in [leader, follower] {
        let addr = nodes[target].running.as_ref().unwrap().local_addr;
        for version in 0..=2 {
            let mut conn = weir::client::connection::Connection::connect(&Io::os(), addr, "t")
                .await
                .unwrap();
            let r = conn.call(&request, version).await.unwrap();
            assert_eq!(r.error_code, 0);
            let p = &r.topics[0].partitions[0];
            assert_eq!(p.error_code, 0, "v{version} via node {}", nodes[target].id);
            assert_eq!(p.leader_id.0, nodes[leader].id);
            assert_eq!(p.current_voters.len(), NODES as usize);
            assert!(p.high_watermark > 0);
            if version >= 1 {
                assert!(p.current_voters.iter().all(|v| v.last_fetch_timestamp > 0));
            }
            assert_eq!(r.nodes.len(), if version >= 2 { NODES as usize } else { 0 });
        }
    }
}

/// A Vote for another cluster, and one from a node outside the voter set, sent to a
/// controller listener: each is answered with the protocol's error.
async fn bad_quorum_input_is_answered_with_errors(node: &Node) {
    use kafka_protocol::messages::vote_request::{PartitionData, TopicData};
    use kafka_protocol::messages::{BrokerId, TopicName, VoteRequest};
    use kafka_protocol::protocol::StrBytes;
    let addr = node.running.as_ref().unwrap().controller_addr.unwrap();
    let vote = |cluster: &str, candidate: i32| {
        VoteRequest::default()
            .with_cluster_id(Some(StrBytes::from_string(cluster.to_string())))
            .with_voter_id(BrokerId(node.id))
            .with_topics(vec![TopicData::default()
                .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
                .with_partitions(vec![PartitionData::default()
                    .with_replica_epoch(100)
                    .with_replica_id(BrokerId(candidate))
                    .with_last_offset_epoch(100)
                    .with_last_offset(1_000_000)])])
    };
    let mut conn = weir::client::connection::Connection::connect(&Io::os(), addr, "t")
        .await
        .unwrap();
    let r = conn
        .call(&vote("AAAAAAAAAAAAAAAAAAAAAA", 1), 2)
        .await
        .unwrap();
    assert_eq!(
        r.error_code,
        kafka_protocol::error::ResponseError::InconsistentClusterId.code()
    );
    let r = conn.call(&vote(CLUSTER_ID, 99), 2).await.unwrap();
    let code = if r.error_code != 0 {
        r.error_code
    } else {
        r.topics[0].partitions[0].error_code
    };
    assert_eq!(
        code,
        kafka_protocol::error::ResponseError::InconsistentVoterSet.code(),
        "{r:?}"
    );
    // The quorum is undisturbed: its leader and epoch did not move.
    assert!(node.running.as_ref().unwrap().broker.quorum_status().epoch < 100);
}

/// A pure controller (`process.roles=controller`): only the controller listener.
fn controller_config(id: i32, dir: &Path, controller_ports: &[u16]) -> ServerConfig {
    let voters: Vec<String> = controller_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
        .collect();
    let props = BTreeMap::from([
        ("process.roles".to_string(), "controller".to_string()),
        ("node.id".to_string(), id.to_string()),
        ("controller.quorum.voters".to_string(), voters.join(",")),
        (
            "listeners".to_string(),
            format!(
                "CONTROLLER://127.0.0.1:{}",
                controller_ports[(id - 1) as usize]
            ),
        ),
        (
            "controller.listener.names".to_string(),
            "CONTROLLER".to_string(),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_controllers_and_two_brokers() {
    let io = Io::os();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes = Vec::new();
    for id in 1..=5 {
        let dir = temp_dir(&format!("split-{id}"));
        weir::broker::format_log_dir(&io, &dir, CLUSTER_ID, id)
            .await
            .unwrap();
        let config = if id <= 3 {
            controller_config(id, &dir, &ports)
        } else {
            broker_config(id, &dir, &ports, free_port())
        };
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
    assert!(leader < 3, "a controller leads");
    // Only the two brokers register; the controllers are not brokers.
    wait_for("two unfenced brokers", Duration::from_secs(20), || {
        let image = nodes[leader].running.as_ref().unwrap().broker.image();
        let live: Vec<i32> = image.live_brokers().map(|b| b.id).collect();
        (live == [4, 5]).then_some(())
    })
    .await;
    // A CreateTopics through a broker is forwarded to the active controller.
    let broker_addr = nodes[3].running.as_ref().unwrap().local_addr;
    create_retrying(broker_addr, "split", Duration::from_secs(10)).await;
    wait_for(
        "every node to apply 'split'",
        Duration::from_secs(10),
        || nodes.iter().all(|n| has_topic(n, "split")).then_some(()),
    )
    .await;
    for node in &nodes {
        let status = node.running.as_ref().unwrap().broker.quorum_status();
        let expected = if node.id <= 3 {
            status.role != QuorumRole::Observer
        } else {
            status.role == QuorumRole::Observer
        };
        assert!(expected, "node {}: {status:?}", node.id);
    }
    for node in &nodes {
        node.running.as_ref().unwrap().broker.halt();
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

/// Relative directories are what users type: `weir format` with `log.dirs=data` and `weir
/// cluster up` with its default `--dir weir-cluster` ran from the directory that holds them
/// (both once failed fsyncing the parent of a one-component relative path, `""`).
#[test]
fn relative_directories_are_formatted_and_run() {
    let dir = temp_dir("relative-dirs");
    let weir = env!("CARGO_BIN_EXE_weir");
    let (client, controller) = (free_port(), free_port());
    std::fs::write(
        dir.join("server.properties"),
        format!(
            "process.roles=broker,controller\nnode.id=1\n\
             controller.quorum.voters=1@127.0.0.1:{controller}\n\
             listeners=PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}\n\
             controller.listener.names=CONTROLLER\nlog.dirs=data\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(weir)
        .current_dir(&dir)
        .args([
            "format",
            "--config",
            "server.properties",
            "--cluster-id",
            CLUSTER_ID,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("data/meta.properties").exists());

    // `cluster up` formats every node before it starts any: node 3's identity on disk means
    // the relative directory was created, fsynced and written.
    let base = free_port().saturating_sub(40).max(20_000);
    let mut up = std::process::Command::new(weir)
        .current_dir(&dir)
        .args([
            "cluster",
            "up",
            "--nodes",
            "3",
            "--base-port",
            &base.to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let meta = dir.join("weir-cluster/node-3/data/meta.properties");
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if meta.exists() || Instant::now() > deadline {
            break None;
        }
        if let Some(status) = up.try_wait().unwrap() {
            break Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = up.kill();
    let out = up.wait_with_output().unwrap();
    assert!(
        meta.exists(),
        "cluster up exited ({exited:?}) or never formatted node 3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
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

/// The session timeout of the partition-leadership test.
const SESSION_TIMEOUT_MS: u64 = 1500;

/// The registration of partition 0 of `topic` as `node` sees it.
fn partition0(node: &Node, topic: &str) -> Option<weir::controller::PartitionRegistration> {
    let image = node.running.as_ref()?.broker.image();
    let id = image.topic(topic)?.id;
    image.partition(id, 0).cloned()
}

/// AlterPartition on the controller listener: a stale broker epoch, a node that is not the
/// active controller, and a real shrink committed and answered with the new partition epoch.
/// Then the partition leader is halted: the controller fences it once its session expires and
/// moves the leadership to a member of the ISR.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_partition_and_leadership_moving_off_a_halted_broker() {
    use kafka_protocol::error::ResponseError;
    use kafka_protocol::messages::alter_partition_request::{
        BrokerState, PartitionData, TopicData,
    };
    use kafka_protocol::messages::{AlterPartitionRequest, ApiVersionsRequest, BrokerId};
    let io = Io::os();
    let controller_ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let timeout = SESSION_TIMEOUT_MS.to_string();
    let extra = [
        ("broker.session.timeout.ms", timeout.as_str()),
        ("broker.heartbeat.interval.ms", "200"),
    ];
    let mut nodes = Vec::new();
    for id in 1..=NODES {
        let dir = temp_dir(&format!("lead{id}"));
        weir::broker::format_log_dir(&io, &dir, CLUSTER_ID, id)
            .await
            .unwrap();
        nodes.push(Node {
            id,
            config: config_with(id, &dir, &controller_ports, free_port(), &extra),
            running: None,
        });
    }
    for node in &mut nodes {
        node.running = Some(Broker::start(node.config.clone(), Io::os()).await.unwrap());
    }
    let controller = wait_for("a leader", Duration::from_secs(20), || active(&nodes)).await;
    wait_for("three unfenced brokers", Duration::from_secs(20), || {
        let image = nodes[controller].running.as_ref().unwrap().broker.image();
        (image.live_brokers().count() == NODES as usize).then_some(())
    })
    .await;
    wait_listening(&listening_addrs(&nodes)).await;
    let addr = nodes[controller].running.as_ref().unwrap().local_addr;
    let mut client = Client::connect(&io, addr).await.unwrap();
    client
        .create_topic("rep", 1, 3, &BTreeMap::new())
        .await
        .unwrap();
    // ...and each broker's AssignReplicasToDirs (KIP-858), which bumps the partition epoch the
    // AlterPartition below must name.
    let p = wait_for("every node to apply 'rep'", Duration::from_secs(10), || {
        let ps: Vec<_> = nodes.iter().map(|n| partition0(n, "rep")).collect();
        ps.iter()
            .all(|p| p.is_some() && *p == ps[0])
            .then(|| ps[0].clone().unwrap())
            .filter(|p| {
                p.directories.len() == p.replicas.len()
                    && !p
                        .directories
                        .contains(&weir::controller::image::DIR_UNASSIGNED)
            })
    })
    .await;
    assert_eq!(p.isr.len(), 3, "{p:?}");
    let leader = p.leader;
    let leader_index = nodes.iter().position(|n| n.id == leader).unwrap();
    let image = nodes[controller].running.as_ref().unwrap().broker.image();
    let topic_id = image.topic("rep").unwrap().id;
    let epoch_of = |id: i32| image.broker(id).unwrap().epoch;
    // The leader drops its last follower (in assignment order) from the ISR.
    let dropped = *p.replicas.iter().rev().find(|r| **r != leader).unwrap();
    let kept: Vec<i32> = p.isr.iter().copied().filter(|r| *r != dropped).collect();
    let request = |broker_epoch: i64| {
        AlterPartitionRequest::default()
            .with_broker_id(BrokerId(leader))
            .with_broker_epoch(broker_epoch)
            .with_topics(vec![TopicData::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![PartitionData::default()
                    .with_partition_index(0)
                    .with_leader_epoch(p.leader_epoch)
                    .with_partition_epoch(p.partition_epoch)
                    .with_new_isr_with_epochs(
                        kept.iter()
                            .map(|b| {
                                BrokerState::default()
                                    .with_broker_id(BrokerId(*b))
                                    .with_broker_epoch(epoch_of(*b))
                            })
                            .collect(),
                    )])])
    };
    let controller_addr = nodes[controller]
        .running
        .as_ref()
        .unwrap()
        .controller_addr
        .unwrap();
    let mut conn = weir::client::connection::Connection::connect(&io, controller_addr, "t")
        .await
        .unwrap();
    // The controller listener advertises it.
    let versions = conn.call(&ApiVersionsRequest::default(), 3).await.unwrap();
    assert!(versions
        .api_keys
        .iter()
        .any(|k| k.api_key == 56 && k.min_version == 2 && k.max_version == 3));
    let r = conn.call(&request(epoch_of(leader) + 1), 3).await.unwrap();
    assert_eq!(r.error_code, ResponseError::StaleBrokerEpoch.code());
    let other = (0..NODES as usize).find(|i| *i != controller).unwrap();
    let other_addr = nodes[other]
        .running
        .as_ref()
        .unwrap()
        .controller_addr
        .unwrap();
    let mut other_conn = weir::client::connection::Connection::connect(&io, other_addr, "t")
        .await
        .unwrap();
    let r = other_conn
        .call(&request(epoch_of(leader)), 3)
        .await
        .unwrap();
    assert_eq!(r.error_code, ResponseError::NotController.code());
    let started = Instant::now();
    let r = conn.call(&request(epoch_of(leader)), 3).await.unwrap();
    let latency = started.elapsed();
    assert_eq!(r.error_code, 0, "{r:?}");
    let answered = &r.topics[0].partitions[0];
    assert_eq!(answered.error_code, 0, "{r:?}");
    assert_eq!(answered.partition_epoch, p.partition_epoch + 1);
    assert_eq!(
        answered.leader_epoch, p.leader_epoch,
        "an ISR change keeps the leader"
    );
    let isr: Vec<i32> = answered.isr.iter().map(|b| b.0).collect();
    assert_eq!(isr, kept);
    // Answered after the commit: the controller's image already has it.
    let committed = partition0(&nodes[controller], "rep").unwrap();
    assert!(committed.partition_epoch >= answered.partition_epoch);
    println!("AlterPartition answered after commit in {latency:?} (3 voters, loopback, fsync)");
    // The same request again is outdated.
    let r = conn.call(&request(epoch_of(leader)), 3).await.unwrap();
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        ResponseError::InvalidUpdateVersion.code()
    );

    // A broker that is not the active controller reaches it for producer ids and for topics
    // a producer's Metadata auto-creates (forwarded, as Kafka's brokers forward them).
    let other_client = nodes[other].running.as_ref().unwrap().local_addr;
    let mut producer = Client::connect(&io, other_client).await.unwrap();
    let (first, _) = producer.init_producer_id().await.unwrap();
    let (second, _) = producer.init_producer_id().await.unwrap();
    assert!(first >= 0 && second != first, "{first} {second}");
    {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::messages::{MetadataRequest, TopicName};
        use kafka_protocol::protocol::StrBytes;
        let request = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("auto-made"))))]))
            .with_allow_auto_topic_creation(true);
        let mut conn = weir::client::connection::Connection::connect(&io, other_client, "t")
            .await
            .unwrap();
        let answer = conn.call(&request, 12).await.unwrap();
        // Forwarded but maybe not yet applied here: "wait", never "no such topic" (Kafka's
        // LEADER_NOT_AVAILABLE; UNKNOWN_TOPIC_OR_PARTITION makes librdkafka queue produces).
        let code = answer.topics[0].error_code;
        assert!(
            code == 0 || code == ResponseError::LeaderNotAvailable.code(),
            "auto-created topic answered with error {code}"
        );
        wait_for("the auto-created topic", Duration::from_secs(10), || {
            nodes
                .iter()
                .all(|n| has_topic(n, "auto-made"))
                .then_some(())
        })
        .await;
    }

    // Halt the partition leader (as kill -9 would); the ISR as it stands is its successor pool.
    let isr_before = partition0(&nodes[controller], "rep").unwrap().isr;
    let halted_at = Instant::now();
    nodes[leader_index].running.take().unwrap().broker.halt();
    let survivors: Vec<usize> = (0..NODES as usize).filter(|i| *i != leader_index).collect();
    let moved = wait_for(
        "the leadership to move off the halted broker",
        Duration::from_millis(SESSION_TIMEOUT_MS + 10_000),
        || {
            survivors.iter().find_map(|i| {
                let p = partition0(&nodes[*i], "rep")?;
                (p.leader != leader && p.leader != -1).then_some(p)
            })
        },
    )
    .await;
    let elapsed = halted_at.elapsed();
    assert!(
        isr_before.contains(&moved.leader),
        "new leader {} not from the ISR {isr_before:?}",
        moved.leader
    );
    assert!(!moved.isr.contains(&leader), "{moved:?}");
    assert!(moved.leader_epoch > p.leader_epoch);
    println!(
        "partition leadership moved off a halted broker in {elapsed:?} \
         (broker.session.timeout.ms={SESSION_TIMEOUT_MS}, heartbeats every 200 ms; \
         the halted broker {} the active controller)",
        if leader_index == controller {
            "was"
        } else {
            "was not"
        }
    );
    // Fencing waits for the session to expire, then one controller tick and one commit (the
    // quorum may have to elect a new controller first when the halted node led it).
    assert!(
        elapsed < Duration::from_millis(SESSION_TIMEOUT_MS + 3000),
        "{elapsed:?}"
    );
    for node in &nodes {
        if let Some(r) = &node.running {
            r.broker.halt();
        }
    }
    for node in &nodes {
        let _ = std::fs::remove_dir_all(&node.config.log_dirs[0]);
    }
}

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("cluster", name)
}
