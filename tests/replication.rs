//! Partition replication between three in-process nodes on loopback and real disks: records
//! produced to an RF=3 partition's leader reach both followers at the same offsets with the
//! same bytes (and the followers follow its high watermark); follower fetches the leader must
//! refuse are refused with the protocol's errors; after the leader is killed (`Broker::halt`)
//! a new leader serves every acknowledged record, and replicates what comes next.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::{BrokerId, FetchRequest};
use weir::broker::{Broker, RunningBroker};
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::Io;

mod common;

use common::{free_port, wait_for, wait_listening, CLUSTER_ID};

const NODES: usize = 3;
const TOPIC: &str = "replicated";

/// The partition's leader and leader epoch in `broker`'s image.
fn leader_of(broker: &Broker) -> Option<(i32, i32)> {
    let image = broker.image();
    let topic = image.topic(TOPIC)?;
    let p = image.partition(topic.id, 0)?;
    (p.leader >= 0).then_some((p.leader, p.leader_epoch))
}

/// The whole local log of the partition on `broker` (log end, HW, bytes of every batch).
fn local_log(broker: &Broker) -> Option<(i64, i64, Vec<u8>)> {
    let handle = broker.partition(TOPIC, 0)?;
    let p = handle.lock();
    let mut bytes = Vec::new();
    let mut offset = p.log_start_offset();
    while offset < p.log_end_offset() {
        let data = p.log().read(offset, 1 << 20, i64::MAX).ok()?;
        let mut next = offset;
        for item in weir::log::batch::iter(&data) {
            next = item.ok()?.1.next_offset();
        }
        if next == offset {
            break;
        }
        bytes.extend_from_slice(&data);
        offset = next;
    }
    Some((p.log_end_offset(), p.high_watermark(), bytes))
}

fn record(i: usize) -> Bytes {
    let mut b = weir::log::batch::BatchBuilder::new(1_000 + i as i64);
    b.push(
        Some(format!("k{i}").as_bytes()),
        Some(format!("value-{i}").as_bytes()),
        1_000,
    );
    Bytes::from(b.finish(-1, -1, -1))
}

async fn create_retrying(addr: std::net::SocketAddr, limit: Duration) {
    let start = Instant::now();
    loop {
        let attempt = async {
            let mut c = Client::connect(&Io::os(), addr)
                .await
                .map_err(|e| e.to_string())?;
            c.create_topic(TOPIC, 1, NODES as i16, &BTreeMap::new())
                .await
                .map_err(|e| e.to_string())
        };
        match attempt.await {
            Ok(()) => return,
            Err(e) => {
                assert!(start.elapsed() < limit, "creating {TOPIC}: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Produces `values` with acks=all to `addr`, retrying refusals until `limit`; the offsets.
async fn produce_all(addr: std::net::SocketAddr, values: std::ops::Range<usize>) -> Vec<i64> {
    let mut client = Client::connect(&Io::os(), addr).await.unwrap();
    let mut offsets = Vec::new();
    for i in values {
        let start = Instant::now();
        loop {
            match client.produce(TOPIC, 0, record(i), -1).await {
                Ok(Some(offset)) => {
                    offsets.push(offset);
                    break;
                }
                other => {
                    assert!(
                        start.elapsed() < Duration::from_secs(20),
                        "produce {i}: {other:?}"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
    offsets
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_copy_the_leader_and_a_new_leader_serves_every_acknowledged_record() {
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
    let broker =
        |nodes: &[Option<RunningBroker>], i: usize| nodes[i].as_ref().unwrap().broker.clone();
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
    create_retrying(
        nodes[0].as_ref().unwrap().local_addr,
        Duration::from_secs(20),
    )
    .await;
    let (leader_id, epoch) = wait_for("a leader on every node", Duration::from_secs(10), || {
        let seen: Vec<_> = (0..NODES).map(|i| leader_of(&broker(&nodes, i))).collect();
        let all_open = (0..NODES).all(|i| broker(&nodes, i).partition(TOPIC, 0).is_some());
        (all_open && seen.iter().all(|s| s.is_some() && *s == seen[0])).then(|| seen[0].unwrap())
    })
    .await;
    let leader = (leader_id - 1) as usize;
    let followers: Vec<usize> = (0..NODES).filter(|&i| i != leader).collect();
    println!("leader: node {leader_id} at epoch {epoch}");

    // Records produced with acks=all reach both followers at the same offsets, byte for byte.
    let leader_addr = nodes[leader].as_ref().unwrap().local_addr;
    let started = Instant::now();
    let offsets = produce_all(leader_addr, 0..20).await;
    assert_eq!(offsets, (0..20).collect::<Vec<i64>>());
    let (end, _, reference) = local_log(&broker(&nodes, leader)).unwrap();
    assert_eq!(end, 20);
    wait_for(
        "both followers to hold the leader's log",
        Duration::from_secs(10),
        || {
            followers
                .iter()
                .all(|&f| {
                    local_log(&broker(&nodes, f))
                        .is_some_and(|(e, _, b)| e == end && b == reference)
                })
                .then_some(())
        },
    )
    .await;
    println!(
        "20 acks=all produces replicated to both followers in {:?}",
        started.elapsed()
    );
    // The followers follow the leader's high watermark.
    wait_for(
        "the followers' high watermarks",
        Duration::from_secs(10),
        || {
            followers
                .iter()
                .all(|&f| local_log(&broker(&nodes, f)).is_some_and(|(_, hw, _)| hw == end))
                .then_some(())
        },
    )
    .await;
    for &f in &followers {
        let membership = broker(&nodes, f).replica_fetcher_membership();
        assert_eq!(
            membership,
            BTreeMap::from([(leader_id, vec![(TOPIC.to_string(), 0)])]),
            "node {} fetches from the leader only",
            f + 1
        );
    }
    assert!(broker(&nodes, leader)
        .replica_fetcher_membership()
        .is_empty());

    refused_follower_fetches(
        &nodes[leader].as_ref().unwrap().broker,
        leader_addr,
        followers[0] as i32 + 1,
    )
    .await;

    // Kill the leader: the controller fences it and elects a follower, which serves every
    // acknowledged record and replicates new ones to the remaining follower.
    let killed_at = Instant::now();
    nodes[leader].take().unwrap().broker.halt();
    let survivor = followers[0];
    let (new_leader_id, new_epoch) = wait_for("a new leader", Duration::from_secs(30), || {
        leader_of(&broker(&nodes, survivor)).filter(|(l, e)| *l != leader_id && *e > epoch)
    })
    .await;
    println!(
        "new leader: node {new_leader_id} at epoch {new_epoch}, {:?} after the kill",
        killed_at.elapsed()
    );
    let new_leader = (new_leader_id - 1) as usize;
    let other = followers
        .iter()
        .copied()
        .find(|&f| f != new_leader)
        .unwrap();
    let new_addr = nodes[new_leader].as_ref().unwrap().local_addr;
    let mut consumer = Client::connect(&io, new_addr).await.unwrap();
    let mut served = Vec::new();
    let mut offset = 0;
    let start = Instant::now();
    while offset < end {
        match consumer
            .fetch(TOPIC, 0, offset, 1 << 20, Duration::from_millis(100))
            .await
        {
            Ok(f) => {
                for item in weir::log::batch::iter(&f.records) {
                    let (at, h) = item.unwrap();
                    served.extend_from_slice(&f.records[at..at + h.total_len()]);
                    offset = h.next_offset();
                }
            }
            Err(e) => {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "fetch from the new leader: {e}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    assert_eq!(
        served, reference,
        "the new leader serves every acknowledged record as written"
    );
    let more = produce_all(new_addr, 20..25).await;
    assert_eq!(more, (20..25).collect::<Vec<i64>>());
    let (end2, _, reference2) = local_log(&broker(&nodes, new_leader)).unwrap();
    assert_eq!(end2, 25);
    assert_eq!(&reference2[..reference.len()], &reference[..]);
    wait_for(
        "the remaining follower to follow the new leader",
        Duration::from_secs(10),
        || {
            local_log(&broker(&nodes, other))
                .is_some_and(|(e, _, b)| e == end2 && b == reference2)
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        broker(&nodes, other).replica_fetcher_membership(),
        BTreeMap::from([(new_leader_id, vec![(TOPIC.to_string(), 0)])]),
        "the partition moved to the new leader's fetcher"
    );
    for n in nodes.iter().flatten() {
        n.broker.halt();
    }
    for c in &configs {
        let _ = std::fs::remove_dir_all(&c.log_dirs[0]);
    }
}

/// Follower fetches the leader refuses: from a broker that is not a replica, with a broker
/// epoch older than the image's, and past the leader's log end.
async fn refused_follower_fetches(leader: &Broker, addr: std::net::SocketAddr, follower: i32) {
    let image = leader.image();
    let topic_id = image.topic(TOPIC).unwrap().id;
    let epoch = image.broker(follower).unwrap().epoch;
    let (_, leader_epoch) = leader_of(leader).unwrap();
    let fetch = |replica: i32, broker_epoch: i64, offset: i64| {
        FetchRequest::default()
            .with_replica_state(
                ReplicaState::default()
                    .with_replica_id(BrokerId(replica))
                    .with_replica_epoch(broker_epoch),
            )
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(leader_epoch)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])])
    };
    let mut conn = weir::client::connection::Connection::connect(&Io::os(), addr, "t")
        .await
        .unwrap();
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    assert_eq!(code(&mut conn, fetch(99, -1, 0)).await, not_leader);
    assert_eq!(
        code(&mut conn, fetch(follower, epoch - 1, 0)).await,
        not_leader
    );
    let out_of_range = ResponseError::OffsetOutOfRange.code();
    assert_eq!(
        code(&mut conn, fetch(follower, epoch, 1_000)).await,
        out_of_range
    );
    // The follower's own position is served (nothing new: no records, no error).
    assert_eq!(code(&mut conn, fetch(follower, epoch, 20)).await, 0);
}

async fn code(conn: &mut weir::client::connection::Connection, req: FetchRequest) -> i16 {
    let r = conn.call(&req, 15).await.unwrap();
    r.responses[0].partitions[0].error_code
}

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("repl", name)
}

/// Host names where operators write them (`localhost`, not `127.0.0.1`): voters, listeners and
/// the advertised endpoint the followers fetch from all go through the `io` resolver here.
fn config(id: usize, dir: &Path, controller_ports: &[u16], client_port: u16) -> ServerConfig {
    let voters: Vec<String> = controller_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@localhost:{p}", i + 1))
        .collect();
    let listeners = format!(
        "PLAINTEXT://localhost:{client_port},CONTROLLER://localhost:{}",
        controller_ports[id - 1]
    );
    let voters = voters.join(",");
    common::combined_config(
        id,
        dir,
        controller_ports,
        client_port,
        &[
            ("controller.quorum.voters", voters.as_str()),
            ("listeners", listeners.as_str()),
        ],
    )
}
