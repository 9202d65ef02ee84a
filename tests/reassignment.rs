//! A partition reassignment end to end on real loopback nodes: three combined nodes, a topic
//! on them, a fourth (broker-only) node added, every partition moved from [1, 2, 3] to
//! [4, 2, 3] through AlterPartitionReassignments while a producer writes with acks=all. The
//! move completes (ListPartitionReassignments empties), node 1 deletes its replicas, the new
//! replica on node 4 leads, and every acknowledged record reads back from it.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use weir::broker::{Broker, RunningBroker};
use weir::client::Client;
use weir::io::Io;

use common::{combined_config, free_port, temp_dir, wait_for, wait_for_async, CLUSTER_ID};

const TOPIC: &str = "moved";
const PARTITIONS: i32 = 3;

async fn start(id: i32, controller_ports: &[u16]) -> RunningBroker {
    let io = Io::os();
    let dir = temp_dir("reassign", &format!("n{id}"));
    weir::broker::format_log_dir(&io, &dir, CLUSTER_ID, id)
        .await
        .unwrap();
    let extra = [
        ("replica.fetch.wait.max.ms", "100"),
        ("min.insync.replicas", "2"),
    ];
    let config = combined_config(id as usize, &dir, controller_ports, free_port(), &extra);
    Broker::start(config, io).await.unwrap()
}

fn record(i: usize) -> Bytes {
    let mut b = weir::log::batch::BatchBuilder::new(1_000 + i as i64);
    b.push(None, Some(format!("value-{i}").as_bytes()), 1_000);
    Bytes::from(b.finish(-1, -1, -1))
}

fn node(nodes: &[RunningBroker], id: i32) -> &RunningBroker {
    nodes
        .iter()
        .find(|n| n.broker.config().node_id == id)
        .unwrap()
}

/// (leader, replicas, isr, reassigning) of `partition` in `broker`'s image.
fn registration(broker: &Broker, partition: i32) -> Option<(i32, Vec<i32>, Vec<i32>, bool)> {
    let image = broker.image();
    let t = image.topic(TOPIC)?;
    let p = image.partition(t.id, partition)?;
    Some((
        p.leader,
        p.replicas.clone(),
        p.isr.clone(),
        p.is_reassigning(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_moves_onto_a_new_broker_under_acks_all_load() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
    let io = Io::os();
    let controller_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start(id, &controller_ports).await);
    }
    wait_for("three unfenced brokers", Duration::from_secs(20), || {
        (nodes[0].broker.image().live_brokers().count() == 3).then_some(())
    })
    .await;
    let addr = nodes[0].local_addr;
    let mut admin = wait_for_async("a client", Duration::from_secs(20), || async {
        Client::connect(&io, addr).await.ok()
    })
    .await;
    admin
        .create_topic(TOPIC, PARTITIONS, 3, &BTreeMap::new())
        .await
        .unwrap();
    // Pin every partition to [1, 2, 3] led by 1 first, so the move takes the leader away.
    let pin: Vec<(String, i32, Option<Vec<i32>>)> = (0..PARTITIONS)
        .map(|p| (TOPIC.to_string(), p, Some(vec![1, 2, 3])))
        .collect();
    let outcomes = admin
        .alter_partition_reassignments(&pin, true)
        .await
        .unwrap();
    assert!(outcomes.iter().all(|o| o.error.is_none()), "{outcomes:?}");
    let _ = admin
        .elect_leaders(weir::client::ElectionType::Preferred, None)
        .await;
    wait_for("partitions led by 1", Duration::from_secs(20), || {
        (0..PARTITIONS)
            .all(|p| registration(&nodes[0].broker, p).is_some_and(|r| r.0 == 1 && r.2.len() == 3))
            .then_some(())
    })
    .await;

    // A producer, acks=all, round-robin over the partitions, following leadership.
    let stop = Arc::new(AtomicBool::new(false));
    let brokers: Vec<(i32, std::net::SocketAddr)> = nodes
        .iter()
        .map(|n| (n.broker.config().node_id, n.local_addr))
        .collect();
    let images: Vec<Arc<Broker>> = nodes.iter().map(|n| n.broker.clone()).collect();
    let producer = {
        let stop = stop.clone();
        let io = Io::os();
        tokio::spawn(async move {
            let mut acked: Vec<(i32, i64, usize)> = Vec::new();
            let mut retries = 0usize;
            let mut clients: BTreeMap<i32, Client> = BTreeMap::new();
            let mut i = 0usize;
            while !stop.load(Ordering::SeqCst) {
                let partition = (i % PARTITIONS as usize) as i32;
                let leader = registration(&images[1], partition).map_or(-1, |r| r.0);
                let Some(&(_, addr)) = brokers.iter().find(|(id, _)| *id == leader) else {
                    retries += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                if let std::collections::btree_map::Entry::Vacant(e) = clients.entry(leader) {
                    match Client::connect(&io, addr).await {
                        Ok(c) => {
                            e.insert(c);
                        }
                        Err(_) => {
                            retries += 1;
                            continue;
                        }
                    }
                }
                let client = clients.get_mut(&leader).unwrap();
                match client.produce(TOPIC, partition, record(i), -1).await {
                    Ok(Some(offset)) => {
                        acked.push((partition, offset, i));
                        i += 1;
                    }
                    Ok(None) => unreachable!("acks=all answers"),
                    // Leadership moved (NOT_LEADER_OR_FOLLOWER) or the connection went: a
                    // client retries the same record.
                    Err(_) => {
                        retries += 1;
                        clients.remove(&leader);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            (acked, retries)
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Broker 4 joins.
    let four = start(4, &controller_ports).await;
    wait_for("broker 4 unfenced", Duration::from_secs(20), || {
        nodes[0].broker.image().is_active_broker(4).then_some(())
    })
    .await;
    nodes.push(four);

    // Move every partition off 1 onto 4.
    let started = Instant::now();
    let plan: Vec<(String, i32, Option<Vec<i32>>)> = (0..PARTITIONS)
        .map(|p| (TOPIC.to_string(), p, Some(vec![4, 2, 3])))
        .collect();
    let outcomes = admin
        .alter_partition_reassignments(&plan, true)
        .await
        .unwrap();
    assert!(outcomes.iter().all(|o| o.error.is_none()), "{outcomes:?}");
    let listed = admin.list_partition_reassignments(None).await.unwrap();
    println!("in progress right after the request: {listed:?}");
    let io2 = Io::os();
    wait_for_async(
        "the reassignment to complete",
        Duration::from_secs(30),
        || {
            let io = io2.clone();
            async move {
                let mut c = Client::connect(&io, addr).await.ok()?;
                c.list_partition_reassignments(None)
                    .await
                    .ok()
                    .filter(|l| l.is_empty())
            }
        },
    )
    .await;
    println!("moved in {:?}", started.elapsed());
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let (acked, retries) = producer.await.unwrap();
    println!("{} records acknowledged, {retries} retries", acked.len());
    assert!(acked.len() > 10, "the producer made progress");

    for p in 0..PARTITIONS {
        let (leader, replicas, isr, reassigning) = registration(&nodes[0].broker, p).unwrap();
        assert_eq!((leader, replicas, reassigning), (4, vec![4, 2, 3], false));
        assert_eq!(isr.len(), 3);
    }
    // Node 1 deleted its replicas; node 4 holds them.
    wait_for(
        "node 1 to drop its replicas",
        Duration::from_secs(10),
        || {
            (0..PARTITIONS)
                .all(|p| node(&nodes, 1).broker.partition(TOPIC, p).is_none())
                .then_some(())
        },
    )
    .await;
    // Every acknowledged record reads back from the new leader, node 4.
    let mut reader = Client::connect(&io, node(&nodes, 4).local_addr)
        .await
        .unwrap();
    for p in 0..PARTITIONS {
        let mut values = Vec::new();
        let mut offset = 0;
        loop {
            let fetched = reader
                .fetch(TOPIC, p, offset, 1 << 20, Duration::from_millis(100))
                .await
                .unwrap();
            if fetched.records.is_empty() {
                break;
            }
            let mut buf = &fetched.records[..];
            while let Ok(header) = weir::log::batch::BatchHeader::parse(buf) {
                let len = header.total_len();
                if len > buf.len() {
                    break;
                }
                for r in weir::log::batch::records(&buf[..len], &header)
                    .unwrap()
                    .unwrap()
                {
                    values.push((r.offset, r.value.map(<[u8]>::to_vec)));
                    offset = r.offset + 1;
                }
                buf = &buf[len..];
            }
        }
        for (partition, off, i) in acked.iter().filter(|(q, _, _)| *q == p) {
            let want = format!("value-{i}");
            assert!(
                values
                    .iter()
                    .any(|(o, v)| o == off && v.as_deref() == Some(want.as_bytes())),
                "acknowledged record {i} at {partition}-{off} not read back from node 4"
            );
        }
    }
    for n in nodes.iter().rev() {
        let _ = n.broker.shutdown().await;
    }
}

/// A batch of `n` records of `size` bytes each.
fn big_batch(n: usize, size: usize) -> Bytes {
    let mut b = weir::log::batch::BatchBuilder::new(1_000);
    let value = vec![b'x'; size];
    for _ in 0..n {
        b.push(None, Some(&value), 1_000);
    }
    Bytes::from(b.finish(-1, -1, -1))
}

/// Waits until no reassignment is in progress; the time it took.
async fn until_moved(io: &Io, addr: std::net::SocketAddr, limit: Duration) -> Duration {
    let started = Instant::now();
    wait_for_async("the reassignment to complete", limit, || {
        let io = io.clone();
        async move {
            let mut c = Client::connect(&io, addr).await.ok()?;
            c.list_partition_reassignments(None)
                .await
                .ok()
                .filter(|l| l.is_empty())
        }
    })
    .await;
    started.elapsed()
}

/// The reassignment throughput figure (bytes/s moved) with and without a replication
/// throttle: `cargo test --release --test reassignment -- --ignored --nocapture`. A timed
/// run, so not in CI; it checks that the throttled move averages no more than the limit (and
/// a window's slack).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn throughput_under_a_replication_throttle() {
    const MB: usize = 1 << 20;
    let io = Io::os();
    let controller_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start(id, &controller_ports).await);
    }
    nodes.push(start(4, &controller_ports).await);
    wait_for("four unfenced brokers", Duration::from_secs(20), || {
        (nodes[0].broker.image().live_brokers().count() == 4).then_some(())
    })
    .await;
    let addr = nodes[0].local_addr;
    let mut admin = wait_for_async("a client", Duration::from_secs(20), || async {
        Client::connect(&io, addr).await.ok()
    })
    .await;
    let mut configs = BTreeMap::new();
    configs.insert("segment.bytes".to_string(), (8 * MB).to_string());
    admin.create_topic(TOPIC, 1, 3, &configs).await.unwrap();
    let pin = vec![(TOPIC.to_string(), 0, Some(vec![1, 2, 3]))];
    admin
        .alter_partition_reassignments(&pin, true)
        .await
        .unwrap();
    let _ = admin
        .elect_leaders(weir::client::ElectionType::Preferred, None)
        .await;
    wait_for("partition led by 1", Duration::from_secs(20), || {
        registration(&nodes[0].broker, 0)
            .is_some_and(|r| r.0 == 1 && r.2.len() == 3)
            .then_some(())
    })
    .await;
    let mut producer = Client::connect(&io, node(&nodes, 1).local_addr)
        .await
        .unwrap();
    let total = 24 * MB;
    let per_batch = MB / 2;
    let mut written = 0;
    let mut tries = 0;
    while written < total / per_batch {
        // Node 1 opens the replica a moment after its image names it leader.
        match producer
            .produce(TOPIC, 0, big_batch(8, per_batch / 8), -1)
            .await
        {
            Ok(_) => written += 1,
            Err(e) => {
                tries += 1;
                assert!(tries < 100, "preload failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let log_bytes = || {
        let h = node(&nodes, 1).broker.partition(TOPIC, 0).unwrap();
        let p = h.lock();
        p.log_end_offset()
    };
    println!("preloaded {} MiB ({} records)", total / MB, log_bytes());

    // Unthrottled: [1,2,3] -> [4,2,3].
    let plan = vec![(TOPIC.to_string(), 0, Some(vec![4, 2, 3]))];
    admin
        .alter_partition_reassignments(&plan, true)
        .await
        .unwrap();
    let took = until_moved(&io, addr, Duration::from_secs(60)).await;
    let unthrottled = total as f64 / took.as_secs_f64();
    println!(
        "unthrottled: {} MiB moved in {:.2} s = {:.1} MB/s",
        total / MB,
        took.as_secs_f64(),
        unthrottled / 1e6
    );

    // Throttled back onto 1: leaders 4,2,3 and follower 1 limited to `rate`.
    let rate = 2 * MB;
    let lists = BTreeMap::from([
        (
            "leader.replication.throttled.replicas".to_string(),
            Some("0:4,0:2,0:3".to_string()),
        ),
        (
            "follower.replication.throttled.replicas".to_string(),
            Some("0:1".to_string()),
        ),
    ]);
    admin.alter_topic_configs(TOPIC, &lists).await.unwrap();
    for b in 1..=4 {
        let rates = BTreeMap::from([
            (
                "leader.replication.throttled.rate".to_string(),
                Some(rate.to_string()),
            ),
            (
                "follower.replication.throttled.rate".to_string(),
                Some(rate.to_string()),
            ),
        ]);
        admin
            .alter_configs(&weir::client::ConfigResource::Broker(b), &rates)
            .await
            .unwrap();
    }
    let back = vec![(TOPIC.to_string(), 0, Some(vec![1, 2, 3]))];
    admin
        .alter_partition_reassignments(&back, true)
        .await
        .unwrap();
    let took = until_moved(&io, addr, Duration::from_secs(120)).await;
    let throttled = total as f64 / took.as_secs_f64();
    println!(
        "throttled at {} B/s: {} MiB moved in {:.2} s = {:.2} MB/s",
        rate,
        total / MB,
        took.as_secs_f64(),
        throttled / 1e6
    );
    // The rate's windows (11 of 1 s, at least 10 s of span) let a first burst of 10 s worth
    // through at once, and then nothing until the average is back under the limit: over a
    // move of more than that, the average stays within a window's slack of the limit.
    assert!(
        throttled <= 1.3 * rate as f64,
        "throttled move averaged {throttled:.0} B/s against a limit of {rate} B/s"
    );
    assert!(throttled < unthrottled);
    for n in nodes.iter().rev() {
        let _ = n.broker.shutdown().await;
    }
}
