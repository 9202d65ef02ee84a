//! Consumer groups in a 3-node cluster: FindCoordinator names the leader of the group's
//! `__consumer_offsets` partition (RF=3); a commit made there is acknowledged once replicated
//! (past the HW); the other nodes refuse group requests with NOT_COORDINATOR; after the
//! coordinator's broker is halted, FindCoordinator names the partition's new leader, which
//! loaded the replicated log and returns the committed offset. A KIP-848 consumer group
//! (ConsumerGroupHeartbeat) fails over whole: the new coordinator replays its records and keeps
//! both members at their epochs and assignments, without fencing or a rebalance.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, FindCoordinatorRequest, GroupId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;
use weir::broker::{Broker, RunningBroker};
use weir::client::{Client, ClientError};
use weir::config::ServerConfig;
use weir::io::Io;

mod common;

use common::{free_port, wait_for, wait_listening, CLUSTER_ID};

const NODES: usize = 3;
const GROUP: &str = "cluster-group";
const TOPIC: &str = "events";

/// FindCoordinator on `addr`: the coordinator's node id and endpoint, or the error code.
async fn find_coordinator(addr: SocketAddr, group: &str) -> Result<(i32, SocketAddr), i16> {
    let mut client = Client::connect(&Io::os(), addr).await.map_err(|_| -1i16)?;
    let request =
        FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_string()));
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

/// Retries FindCoordinator for [`GROUP`] on `addr` until it names a coordinator `accept` takes.
async fn coordinator(addr: SocketAddr, accept: impl Fn(i32) -> bool) -> (i32, SocketAddr) {
    coordinator_of(addr, GROUP, accept).await
}

async fn coordinator_of(
    addr: SocketAddr,
    group: &str,
    accept: impl Fn(i32) -> bool,
) -> (i32, SocketAddr) {
    let start = Instant::now();
    loop {
        match find_coordinator(addr, group).await {
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

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// Three combined nodes, unfenced, with `topic` created (RF 3).
async fn start_cluster(
    name: &str,
    topic: &str,
    partitions: i32,
) -> (Vec<ServerConfig>, Vec<Option<RunningBroker>>) {
    let io = Io::os();
    let controller_ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let mut configs = Vec::new();
    for id in 1..=NODES {
        let dir = temp_dir(&format!("{name}-n{id}"));
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
    let addrs: Vec<_> = nodes
        .iter()
        .map(|n| n.as_ref().unwrap().local_addr)
        .collect();
    wait_listening(&addrs).await;
    let start = Instant::now();
    loop {
        let addr = nodes[0].as_ref().unwrap().local_addr;
        let mut c = Client::connect(&io, addr).await.unwrap();
        match c
            .create_topic(topic, partitions, NODES as i16, &BTreeMap::new())
            .await
        {
            Ok(()) => break,
            Err(e) => {
                assert!(start.elapsed() < Duration::from_secs(20), "create: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // CreateTopics answers once the controller committed the topic; each node applies it a
    // little later (as in Kafka), and the tests ask node 0 about it at once.
    wait_for(
        "every node applied the topic",
        Duration::from_secs(20),
        || {
            nodes
                .iter()
                .all(|n| n.as_ref().unwrap().broker.image().topic(topic).is_some())
                .then_some(())
        },
    )
    .await;
    (configs, nodes)
}

fn stop_cluster(configs: &[ServerConfig], nodes: &[Option<RunningBroker>]) {
    for n in nodes.iter().flatten() {
        n.broker.halt();
    }
    for c in configs {
        let _ = std::fs::remove_dir_all(&c.log_dirs[0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_survives_the_coordinators_failover() {
    init_tracing();
    let io = Io::os();
    let (configs, mut nodes) = start_cluster("commit", TOPIC, 1).await;
    let addr = |nodes: &[Option<RunningBroker>], i: usize| nodes[i].as_ref().unwrap().local_addr;

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
    stop_cluster(&configs, &nodes);
}

const CONSUMER_GROUP: &str = "kip848-group";
const CONSUMER_TOPIC: &str = "kip848-events";

/// One KIP-848 member as the test plays it: its epoch and what it owns.
struct Member {
    id: String,
    epoch: i32,
    owned: BTreeSet<i32>,
}

/// One ConsumerGroupHeartbeat (v1: the member id is the client's) reporting what `m` owns; on
/// success the member takes the epoch and, if sent, the assignment. The error code otherwise.
async fn heartbeat(client: &mut Client, topic: Uuid, m: &mut Member) -> Result<(), i16> {
    let joining = m.epoch == 0;
    let mut request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(CONSUMER_GROUP.to_string())))
        .with_member_id(StrBytes::from_string(m.id.clone()))
        .with_member_epoch(m.epoch)
        .with_rebalance_timeout_ms(if joining { 30_000 } else { -1 })
        .with_topic_partitions(Some(if m.owned.is_empty() {
            Vec::new()
        } else {
            vec![TopicPartitions::default()
                .with_topic_id(topic)
                .with_partitions(m.owned.iter().copied().collect())]
        }));
    if joining {
        request = request.with_subscribed_topic_names(Some(vec![TopicName(
            StrBytes::from_string(CONSUMER_TOPIC.to_string()),
        )]));
    }
    let r = client
        .connection()
        .call(&request, 1)
        .await
        .map_err(|_| -1i16)?;
    if r.error_code != 0 {
        return Err(r.error_code);
    }
    m.epoch = r.member_epoch;
    if let Some(a) = r.assignment {
        m.owned = a
            .topic_partitions
            .iter()
            .filter(|t| t.topic_id == topic)
            .flat_map(|t| t.partitions.iter().copied())
            .collect();
    }
    Ok(())
}

/// The group's epoch from ConsumerGroupDescribe, or the error code.
async fn group_epoch(client: &mut Client) -> Result<i32, i16> {
    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(
        StrBytes::from_string(CONSUMER_GROUP.to_string()),
    )]);
    let r = client
        .connection()
        .call(&request, 0)
        .await
        .map_err(|_| -1i16)?;
    let g = &r.groups[0];
    if g.error_code != 0 {
        return Err(g.error_code);
    }
    Ok(g.group_epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_group_survives_the_coordinators_failover() {
    init_tracing();
    let io = Io::os();
    let (configs, mut nodes) = start_cluster("kip848", CONSUMER_TOPIC, 3).await;
    let addr = |nodes: &[Option<RunningBroker>], i: usize| nodes[i].as_ref().unwrap().local_addr;
    let topic = {
        let mut c = Client::connect(&io, addr(&nodes, 0)).await.unwrap();
        c.describe_topics(Some(&[CONSUMER_TOPIC])).await.unwrap()[0].id
    };
    let (first, endpoint) = coordinator_of(addr(&nodes, 0), CONSUMER_GROUP, |_| true).await;
    let mut client = Client::connect(&io, endpoint).await.unwrap();
    let mut members: Vec<Member> = ["a", "b"]
        .iter()
        .map(|n| Member {
            id: Uuid::from_u128(0xa0 + n.len() as u128 + (n.as_bytes()[0] as u128)).to_string(),
            epoch: 0,
            owned: BTreeSet::new(),
        })
        .collect();
    // Heartbeat both until they agree on one epoch and split the three partitions.
    let start = Instant::now();
    loop {
        for m in members.iter_mut() {
            match heartbeat(&mut client, topic, m).await {
                Ok(()) => {}
                // COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR: the offsets
                // partition is still loading or moving; try again.
                Err(14..=16) => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(e) => panic!("heartbeat of {}: error {e}", m.id),
            }
        }
        let settled = members[0].epoch > 0
            && members
                .iter()
                .all(|m| m.epoch == members[0].epoch && !m.owned.is_empty())
            && members.iter().map(|m| m.owned.len()).sum::<usize>() == 3;
        if settled {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the group did not settle"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let epoch_before = group_epoch(&mut client).await.unwrap();
    let before: Vec<(i32, BTreeSet<i32>)> =
        members.iter().map(|m| (m.epoch, m.owned.clone())).collect();
    println!("settled: group epoch {epoch_before}, members {before:?} on node {first}");

    // The coordinator's broker is halted; the new leader of the offsets partition replays the
    // group's records.
    let coordinator_index = (first - 1) as usize;
    let killed_at = Instant::now();
    nodes[coordinator_index].take().unwrap().broker.halt();
    let survivor = (0..NODES).find(|&i| i != coordinator_index).unwrap();
    let (second, endpoint2) =
        coordinator_of(addr(&nodes, survivor), CONSUMER_GROUP, |n| n != first).await;
    let mut client = Client::connect(&io, endpoint2).await.unwrap();
    // Each member heartbeats at its old epoch and is kept: same epoch, same partitions.
    for m in members.iter_mut() {
        let start = Instant::now();
        loop {
            match heartbeat(&mut client, topic, m).await {
                Ok(()) => break,
                Err(14..=16) if start.elapsed() < Duration::from_secs(20) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("heartbeat of {} after failover: error {e}", m.id),
            }
        }
    }
    println!(
        "both members kept by node {second} {:?} after the halt",
        killed_at.elapsed()
    );
    let after: Vec<(i32, BTreeSet<i32>)> =
        members.iter().map(|m| (m.epoch, m.owned.clone())).collect();
    assert_eq!(after, before, "member epochs and assignments survived");
    assert_eq!(
        group_epoch(&mut client).await.unwrap(),
        epoch_before,
        "no rebalance on failover"
    );
    stop_cluster(&configs, &nodes);
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
