//! Consumer groups in a 3-node cluster: FindCoordinator names the leader of the group's
//! `__consumer_offsets` partition (RF=3); a commit made there is acknowledged once replicated
//! (past the HW); the other nodes refuse group requests with NOT_COORDINATOR; after the
//! coordinator's broker is halted, FindCoordinator names the partition's new leader, which
//! loaded the replicated log and returns the committed offset.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;
use weir::broker::{Broker, RunningBroker};
use weir::client::{Client, ClientError};
use weir::config::ServerConfig;
use weir::io::Io;

mod common;

use common::{free_port, wait_for, CLUSTER_ID};

const NODES: usize = 3;
const GROUP: &str = "cluster-group";
const TOPIC: &str = "events";

/// FindCoordinator on `addr`: the coordinator's node id and endpoint, or the error code.
async fn find_coordinator(addr: SocketAddr) -> Result<(i32, SocketAddr), i16> {
    let mut client = Client::connect(&Io::os(), addr).await.map_err(|_| -1i16)?;
    let request =
        FindCoordinatorRequest::default().with_key(StrBytes::from_string(GROUP.to_string()));
    let r = client
        .connection()
        .call(&request, 1)
        .await
        .map_err(|_| -1i16)?;
    if r.error_code != 0 {
        return Err(r.error_code);
    }
    let endpoint = format!("{}:{}", r.host, r.port).parse().unwrap();
    Ok((r.node_id.0, endpoint))
}

/// Retries FindCoordinator on `addr` until it names a coordinator `accept` takes.
async fn coordinator(addr: SocketAddr, accept: impl Fn(i32) -> bool) -> (i32, SocketAddr) {
    let start = Instant::now();
    loop {
        match find_coordinator(addr).await {
            Ok((node, endpoint)) if accept(node) => return (node, endpoint),
            other => {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "FindCoordinator: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn kafka_code(e: &ClientError) -> Option<ResponseError> {
    match e {
        ClientError::Kafka(code, _) => Some(*code),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_survives_the_coordinators_failover() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
    let io = Io::os();
    let controller_ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let mut configs = Vec::new();
    for id in 1..=NODES {
        let dir = temp_dir(&format!("n{id}"));
        weir::broker::format_log_dir(&io, &dir, CLUSTER_ID, id as i32)
            .await
            .unwrap();
        configs.push(config(id, &dir, &controller_ports, free_port()));
    }
    let mut nodes: Vec<Option<RunningBroker>> = Vec::new();
    for c in &configs {
        nodes.push(Some(Broker::start(c.clone(), Io::os()).await.unwrap()));
    }
    wait_for("three unfenced brokers", Duration::from_secs(20), || {
        nodes
            .iter()
            .all(|n| n.as_ref().unwrap().broker.image().live_brokers().count() == NODES)
            .then_some(())
    })
    .await;
    let addr = |nodes: &[Option<RunningBroker>], i: usize| nodes[i].as_ref().unwrap().local_addr;
    {
        let start = Instant::now();
        loop {
            let mut c = Client::connect(&io, addr(&nodes, 0)).await.unwrap();
            match c
                .create_topic(TOPIC, 1, NODES as i16, &BTreeMap::new())
                .await
            {
                Ok(()) => break,
                Err(e) => {
                    assert!(start.elapsed() < Duration::from_secs(20), "create: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    // FindCoordinator creates the offsets topic (RF clamped to 3 live brokers) and names the
    // leader of the group's partition; every node names the same one.
    let (first, endpoint) = coordinator(addr(&nodes, 0), |_| true).await;
    for i in 1..NODES {
        let (other, other_endpoint) = coordinator(addr(&nodes, i), |_| true).await;
        assert_eq!(
            (other, other_endpoint),
            (first, endpoint),
            "node {} agrees",
            i + 1
        );
    }
    let coordinator_index = (first - 1) as usize;
    assert_eq!(endpoint, addr(&nodes, coordinator_index));
    println!("coordinator: node {first}");

    // The commit goes to the coordinator (retried while its partition loads).
    let mut client = Client::connect(&io, endpoint).await.unwrap();
    let start = Instant::now();
    let committed_at = loop {
        match client.commit_offsets(GROUP, TOPIC, &[(0, 50)]).await {
            Ok(()) => break start.elapsed(),
            Err(e) if e.is_retriable() && start.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("commit on the coordinator: {e}"),
        }
    };
    println!("commit acknowledged after {committed_at:?}");
    assert_eq!(
        client
            .committed_offsets(GROUP, Some((TOPIC, &[0])))
            .await
            .unwrap(),
        vec![(TOPIC.to_string(), 0, 50)]
    );

    // The other nodes are not the coordinator.
    let other = (0..NODES).find(|&i| i != coordinator_index).unwrap();
    let mut wrong = Client::connect(&io, addr(&nodes, other)).await.unwrap();
    let refused = wrong
        .commit_offsets(GROUP, TOPIC, &[(0, 60)])
        .await
        .unwrap_err();
    assert_eq!(
        kafka_code(&refused),
        Some(ResponseError::NotCoordinator),
        "{refused}"
    );
    let refused = wrong
        .committed_offsets(GROUP, Some((TOPIC, &[0])))
        .await
        .unwrap_err();
    assert_eq!(
        kafka_code(&refused),
        Some(ResponseError::NotCoordinator),
        "{refused}"
    );

    // The coordinator's broker is halted: the offsets partition fails over, the new leader
    // loads it from its replica and serves the commit.
    let killed_at = Instant::now();
    nodes[coordinator_index].take().unwrap().broker.halt();
    let survivor = (0..NODES).find(|&i| i != coordinator_index).unwrap();
    let (second, endpoint2) = coordinator(addr(&nodes, survivor), |n| n != first).await;
    println!(
        "new coordinator: node {second}, {:?} after the halt",
        killed_at.elapsed()
    );
    let mut client = Client::connect(&io, endpoint2).await.unwrap();
    let start = Instant::now();
    let fetched = loop {
        match client.committed_offsets(GROUP, Some((TOPIC, &[0]))).await {
            Ok(f) => break f,
            Err(e) if e.is_retriable() && start.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("OffsetFetch on the new coordinator: {e}"),
        }
    };
    assert_eq!(
        fetched,
        vec![(TOPIC.to_string(), 0, 50)],
        "the committed offset survived"
    );
    println!("offset fetched {:?} after the halt", killed_at.elapsed());
    // And the new coordinator takes commits.
    client
        .commit_offsets(GROUP, TOPIC, &[(0, 70)])
        .await
        .unwrap();
    for n in nodes.iter().flatten() {
        n.broker.halt();
    }
    for c in &configs {
        let _ = std::fs::remove_dir_all(&c.log_dirs[0]);
    }
}

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("groups-cluster", name)
}

fn config(id: usize, dir: &Path, controller_ports: &[u16], client_port: u16) -> ServerConfig {
    common::combined_config(
        id,
        dir,
        controller_ports,
        client_port,
        &[
            ("offsets.topic.num.partitions", "3"),
            ("group.initial.rebalance.delay.ms", "0"),
        ],
    )
}
