//! acks=all across real replicas: three pure controllers and three brokers in one process, on
//! loopback and real disks (the controllers keep their quorum while brokers are halted). An
//! RF=3, min.insync.replicas=2 partition answers acks=all only once both followers have the
//! records (the leader's view of their log ends says so at the answer); with one follower
//! halted a produce waits (REQUEST_TIMED_OUT) until the ISR drops it, then succeeds on two; with
//! two of three brokers halted it fails NOT_ENOUGH_REPLICAS, while acks=1 is still answered. A
//! produce to a follower is NOT_LEADER_OR_FOLLOWER. Prints the acks=all latency (a figure).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use weir::broker::{Broker, RunningBroker};
use weir::client::{Client, ClientError};
use weir::config::ServerConfig;
use weir::io::Io;

mod common;

use common::{free_port, CLUSTER_ID};

const TOPIC: &str = "acks-all";

fn voters(ports: &[u16]) -> String {
    ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
        .collect::<Vec<_>>()
        .join(",")
}

fn node_config(
    id: usize,
    dir: &Path,
    ports: &[u16],
    client_port: Option<u16>,
    fsync: bool,
    session_ms: u64,
) -> ServerConfig {
    let mut props: BTreeMap<String, String> = [
        ("weir.fsync.before.ack", fsync.to_string()),
        ("node.id", id.to_string()),
        ("controller.quorum.voters", voters(ports)),
        ("controller.listener.names", "CONTROLLER".to_string()),
        ("log.dirs", dir.display().to_string()),
        ("controller.quorum.election.timeout.ms", "300".to_string()),
        ("controller.quorum.fetch.timeout.ms", "600".to_string()),
        ("broker.heartbeat.interval.ms", "200".to_string()),
        ("broker.session.timeout.ms", session_ms.to_string()),
        ("replica.lag.time.max.ms", "2000".to_string()),
        ("replica.fetch.wait.max.ms", "200".to_string()),
        ("replica.fetch.backoff.ms", "100".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    match client_port {
        None => {
            props.insert("process.roles".into(), "controller".into());
            props.insert(
                "listeners".into(),
                format!("CONTROLLER://127.0.0.1:{}", ports[id - 1]),
            );
        }
        Some(port) => {
            props.insert("process.roles".into(), "broker".into());
            props.insert("listeners".into(), format!("PLAINTEXT://127.0.0.1:{port}"));
            props.insert("inter.broker.listener.name".into(), "PLAINTEXT".into());
        }
    }
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

fn record(i: usize) -> Bytes {
    let mut b = weir::log::batch::BatchBuilder::new(1_000 + i as i64);
    b.push(None, Some(format!("value-{i}").as_bytes()), 1_000);
    Bytes::from(b.finish(-1, -1, -1))
}

/// The partition's (leader, ISR) in `broker`'s image.
fn leadership(broker: &Broker) -> Option<(i32, Vec<i32>)> {
    let image = broker.image();
    let t = image.topic(TOPIC)?;
    let p = image.partition(t.id, 0)?;
    (p.leader >= 0).then(|| (p.leader, p.isr.clone()))
}

async fn create_retrying(addr: SocketAddr) {
    let start = Instant::now();
    let configs = BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())]);
    loop {
        let attempt = async {
            let mut c = Client::connect(&Io::os(), addr)
                .await
                .map_err(|e| e.to_string())?;
            c.create_topic(TOPIC, 1, 3, &configs)
                .await
                .map_err(|e| e.to_string())
        };
        match attempt.await {
            Ok(()) => return,
            Err(e) => {
                assert!(start.elapsed() < Duration::from_secs(20), "creating: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// One produce: its offset or its error code.
async fn produce(addr: SocketAddr, i: usize, acks: i16, timeout: Duration) -> Result<i64, i16> {
    let mut client = Client::connect(&Io::os(), addr).await.map_err(|_| -1i16)?;
    client.set_timeout(timeout);
    match client.produce(TOPIC, 0, record(i), acks).await {
        Ok(offset) => Ok(offset.unwrap_or(-1)),
        Err(ClientError::Kafka(code, _)) => Err(code.code()),
        Err(_) => Err(-1),
    }
}

/// Three controllers (1-3) and three brokers (4-6), and the topic with a full ISR: the nodes,
/// their directories, the partition's leader and its followers.
async fn start(
    name: &str,
    fsync: bool,
    session_ms: u64,
) -> (Vec<RunningBroker>, Vec<PathBuf>, i32, Vec<i32>) {
    let io = Io::os();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut running: Vec<RunningBroker> = Vec::new();
    let mut dirs = Vec::new();
    for id in 1..=6 {
        let dir = temp_dir(&format!("{name}-{id}"));
        weir::broker::format_log_dir(&io, &dir, CLUSTER_ID, id as i32)
            .await
            .unwrap();
        let port = (id > 3).then(free_port);
        let config = node_config(id, &dir, &ports, port, fsync, session_ms);
        running.push(Broker::start(config, Io::os()).await.unwrap());
        dirs.push(dir);
    }
    let broker = |id: i32| &running[(id - 1) as usize];
    wait_for("three unfenced brokers", Duration::from_secs(20), || {
        let image = broker(4).broker.image();
        (image.live_brokers().count() == 3).then_some(())
    })
    .await;
    create_retrying(broker(4).local_addr).await;
    let (leader, isr) = wait_for("a leader with a full ISR", Duration::from_secs(20), || {
        leadership(&broker(4).broker).filter(|(_, isr)| isr.len() == 3)
    })
    .await;
    let followers: Vec<i32> = (4..=6).filter(|&b| b != leader).collect();
    assert_eq!(isr.len(), 3);
    wait_for(
        "every broker to host the partition",
        Duration::from_secs(20),
        || {
            (4..=6)
                .all(|b| broker(b).broker.partition(TOPIC, 0).is_some())
                .then_some(())
        },
    )
    .await;
    (running, dirs, leader, followers)
}

fn stop(running: Vec<RunningBroker>, dirs: Vec<PathBuf>) {
    for r in &running {
        r.broker.halt();
    }
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_waits_for_the_isr_and_fails_with_two_of_three_brokers_down() {
    let (running, dirs, leader, followers) = start("plain", false, 1500).await;
    let broker = |id: i32| &running[(id - 1) as usize];
    let leader_addr = broker(leader).local_addr;

    // A follower refuses produces.
    let refused = produce(
        broker(followers[0]).local_addr,
        0,
        -1,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(refused, Err(ResponseError::NotLeaderOrFollower.code()));

    // acks=all is answered once both followers hold the record: at the answer, the leader's
    // view of each follower's log end is past it.
    let mut latencies = Vec::new();
    for i in 0..20 {
        let start = Instant::now();
        let offset = produce(leader_addr, i, -1, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("acks=all produce {i}: error {e}"));
        latencies.push(start.elapsed());
        let handle = broker(leader).broker.partition(TOPIC, 0).unwrap();
        let p = handle.lock();
        let set = p.replica_set().expect("the leader holds a replica set");
        for &f in &followers {
            let end = set.follower_log_end(f).unwrap();
            assert!(end > offset, "follower {f} at {end}, offset {offset} acked");
        }
        assert!(p.high_watermark() > offset);
    }
    latencies.sort();
    println!(
        "acks=all RF=3 in-process: p50 {:?}, max {:?}",
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );

    // One follower halted: still in the ISR, so acks=all waits for it and times out...
    broker(followers[0]).broker.halt();
    let waited = produce(leader_addr, 100, -1, Duration::from_millis(500)).await;
    assert!(
        matches!(waited, Err(c) if c == ResponseError::RequestTimedOut.code() || c == -1),
        "{waited:?}"
    );
    // ...until it leaves the ISR (fenced, or lagging past replica.lag.time.max.ms); then the
    // two others commit.
    let start = Instant::now();
    let offset = loop {
        match produce(leader_addr, 101, -1, Duration::from_secs(2)).await {
            Ok(offset) => break offset,
            Err(e) => assert!(
                start.elapsed() < Duration::from_secs(20),
                "acks=all on two of three: error {e}"
            ),
        }
    };
    let (_, isr) = leadership(&broker(leader).broker).unwrap();
    assert!(!isr.contains(&followers[0]), "ISR {isr:?}");
    println!(
        "one follower halted: acks=all succeeds again after {:?}",
        start.elapsed()
    );
    assert!(offset > 0);

    // Two of three halted: the ISR shrinks to the leader alone, below min.insync.replicas=2:
    // acks=all is refused before the append, acks=1 is still answered.
    broker(followers[1]).broker.halt();
    let start = Instant::now();
    loop {
        match produce(leader_addr, 200, -1, Duration::from_secs(1)).await {
            Err(c) if c == ResponseError::NotEnoughReplicas.code() => break,
            Ok(offset) => panic!("acks=all acknowledged at {offset} with two brokers down"),
            Err(_) => assert!(
                start.elapsed() < Duration::from_secs(20),
                "never NOT_ENOUGH_REPLICAS"
            ),
        }
    }
    let (_, isr) = leadership(&broker(leader).broker).unwrap();
    assert_eq!(isr, vec![leader]);
    let end_before = broker(leader)
        .broker
        .partition(TOPIC, 0)
        .unwrap()
        .lock()
        .log_end_offset();
    assert_eq!(
        produce(leader_addr, 201, -1, Duration::from_secs(1)).await,
        Err(ResponseError::NotEnoughReplicas.code())
    );
    let handle = broker(leader).broker.partition(TOPIC, 0).unwrap();
    assert_eq!(
        handle.lock().log_end_offset(),
        end_before,
        "nothing appended"
    );
    assert!(produce(leader_addr, 202, 1, Duration::from_secs(5))
        .await
        .is_ok());

    stop(running, dirs);
}

/// `weir.fsync.before.ack=true` across replicas (issue 9 item 7): a replica counts towards the
/// high watermark only up to what it fsynced, so at each acks=all answer every replica, the
/// leader and both followers, has the record on stable storage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_acks_all_is_answered_once_every_replica_fsynced_it() {
    let (running, dirs, leader, followers) = start("durable", true, 1500).await;
    let broker = |id: i32| &running[(id - 1) as usize];
    let leader_addr = broker(leader).local_addr;
    let mut latencies = Vec::new();
    for i in 0..20 {
        let start = Instant::now();
        let offset = produce(leader_addr, i, -1, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("acks=all produce {i}: error {e}"));
        latencies.push(start.elapsed());
        for b in std::iter::once(leader).chain(followers.iter().copied()) {
            let handle = broker(b).broker.partition(TOPIC, 0).unwrap();
            let durable = handle.lock().durable_log_end();
            assert!(
                durable > offset,
                "broker {b} fsynced to {durable}, {offset} acked"
            );
        }
    }
    latencies.sort();
    println!(
        "durable acks=all RF=3 in-process: p50 {:?}, max {:?}",
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );
    stop(running, dirs);
}

/// The ISR driver's own path: with a broker session timeout far longer than
/// replica.lag.time.max.ms (2 s), a halted follower is not fenced in time; once it misses new
/// records for longer than the lag, its leader proposes
/// it out by AlterPartition, the controller commits it, and the image's ISR (at a new partition
/// epoch) lands back in the leader, whose acks=all produces then commit on two replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_follower_is_shrunk_out_by_alter_partition() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
    let (running, dirs, leader, followers) = start("shrink", false, 60_000).await;
    let broker = |id: i32| &running[(id - 1) as usize];
    let leader_addr = broker(leader).local_addr;
    produce(leader_addr, 0, -1, Duration::from_secs(10))
        .await
        .unwrap();
    let epoch_before = {
        let image = broker(leader).broker.image();
        let t = image.topic(TOPIC).unwrap();
        image.partition(t.id, 0).unwrap().partition_epoch
    };
    broker(followers[0]).broker.halt();
    let halted = Instant::now();
    // As in Kafka, a follower at the leader's end counts as caught up however long it has been
    // silent (an idle partition shrinks nothing): new records make it lag.
    produce(leader_addr, 1, 1, Duration::from_secs(5))
        .await
        .unwrap();
    wait_for("the shrink to commit", Duration::from_secs(15), || {
        let (_, isr) = leadership(&broker(leader).broker)?;
        (!isr.contains(&followers[0])).then_some(())
    })
    .await;
    let took = halted.elapsed();
    println!("lagging follower shrunk out of the ISR after {took:?} (lag max 2 s)");
    assert!(
        took >= Duration::from_millis(1900),
        "shrunk before the lag: {took:?}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    let image = broker(leader).broker.image();
    let t = image.topic(TOPIC).unwrap();
    let p = image.partition(t.id, 0).unwrap();
    assert!(p.partition_epoch > epoch_before);
    assert!(
        image.broker(followers[0]).is_some_and(|b| !b.fenced),
        "not fenced"
    );
    wait_for(
        "the leader to hold the new ISR",
        Duration::from_secs(5),
        || {
            let handle = broker(leader).broker.partition(TOPIC, 0)?;
            let isr = handle.lock().isr_size();
            (isr == 2).then_some(())
        },
    )
    .await;
    assert!(produce(leader_addr, 2, -1, Duration::from_secs(5))
        .await
        .is_ok());
    stop(running, dirs);
}

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("acks", name)
}
