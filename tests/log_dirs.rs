//! JBOD (KIP-858) in a 3-node cluster in one process, over one in-memory disk: every node has
//! two log directories. The second directory of node 1 dies (every I/O under it fails with EIO); the
//! node takes only that directory's partitions offline, reports it in its heartbeats, the
//! controller moves their leaders elsewhere and takes node 1 out of their ISRs, and node 1 keeps
//! serving the partitions of its other directory. Acknowledged writes all read back.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use weir::broker::{format_log_dir, Broker, RunningBroker};
use weir::client::{Client, ClusterClient};
use weir::io::memdisk::{Faults, MemDisk};
use weir::log::batch::{self, BatchBuilder, BatchHeader};

mod common;

use common::{combined_config, free_port, memdisk_io, wait_for, wait_listening, CLUSTER_ID};

const PARTITIONS: i32 = 6;

fn batch(value: &str) -> Bytes {
    let mut b = BatchBuilder::new(1);
    b.push(None, Some(value.as_bytes()), 1);
    Bytes::from(b.finish(-1, -1, -1))
}

fn dirs_of(node: usize) -> [PathBuf; 2] {
    [
        PathBuf::from(format!("/n{node}/a")),
        PathBuf::from(format!("/n{node}/b")),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_directory_moves_only_its_partitions_away() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_test_writer()
        .try_init();
    let disk = MemDisk::new(5);
    let io = memdisk_io(&disk);
    let controller_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let client_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes: Vec<RunningBroker> = Vec::new();
    for id in 1..=3 {
        let [a, b] = dirs_of(id);
        for dir in [&a, &b] {
            format_log_dir(&io, dir, CLUSTER_ID, id as i32)
                .await
                .unwrap();
        }
        let log_dirs = format!("{},{}", a.display(), b.display());
        let config = combined_config(
            id,
            &a,
            &controller_ports,
            client_ports[id - 1],
            &[("log.dirs", &log_dirs)],
        );
        nodes.push(Broker::start(config, io.clone()).await.unwrap());
    }
    let addrs: Vec<SocketAddr> = client_ports
        .iter()
        .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
        .collect();
    wait_listening(&addrs).await;
    let mut admin = Client::connect(&io, addrs[0]).await.unwrap();
    admin
        .create_topic("t", PARTITIONS, 3, &Default::default())
        .await
        .unwrap();
    let node1 = nodes[0].broker.clone();
    // Every replica of node 1 placed and reported (AssignReplicasToDirs) in the image.
    let topic_id = wait_for(
        "node 1's directories in the image",
        Duration::from_secs(20),
        || {
            let image = node1.image();
            let id = image.topic("t")?.id;
            (0..PARTITIONS)
                .all(|p| {
                    image
                        .partition(id, p)
                        .and_then(|r| r.directory_of(1))
                        .is_some_and(|d| d != weir::controller::image::DIR_UNASSIGNED)
                })
                .then_some(id)
        },
    )
    .await;
    let views = node1.log_dir_views();
    assert_eq!(views.len(), 2);
    // The second: the first also holds the metadata log, whose failure stops the whole node
    // (as Kafka's metadata.log.dir).
    let (surviving, failing) = (&views[0], &views[1]);
    assert_eq!(failing.partitions.len(), 3, "placed evenly: {views:?}");
    assert_eq!(surviving.partitions.len(), 3, "placed evenly: {views:?}");
    let on = |dir: &weir::broker::log_dirs::DirView| -> Vec<i32> {
        dir.partitions.iter().map(|(_, p)| *p).collect()
    };
    let (lost, kept) = (on(failing), on(surviving));

    let mut cluster = ClusterClient::connect(&io, addrs.clone()).await.unwrap();
    let mut acked: Vec<(i32, i64, String)> = Vec::new();
    for p in 0..PARTITIONS {
        let value = format!("before-{p}");
        let offset = cluster.produce("t", p, batch(&value), -1).await.unwrap();
        acked.push((p, offset.unwrap(), value));
    }

    let t0 = std::time::Instant::now();
    disk.set_faults(Faults {
        failed_dirs: vec![failing.path.clone()],
        ..Faults::default()
    });
    // Writes reach the dead directory (as leader's appends or follower's fetches) until node 1
    // notices; produces to its partitions may fail meanwhile, but never silently.
    let start = std::time::Instant::now();
    while node1.log_dir_views()[1].offline.is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the directory never went offline"
        );
        for p in &lost {
            let value = format!("during-{p}");
            let produce = cluster.produce("t", *p, batch(&value), -1);
            if let Ok(Ok(Some(offset))) =
                tokio::time::timeout(Duration::from_secs(3), produce).await
            {
                acked.push((*p, offset, value));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("directory offline after {:?}", t0.elapsed());
    assert!(!node1.is_storage_offline(), "only one directory failed");

    // The controller: node 1 out of the failed directory's partitions' ISRs and leadership,
    // its registration down to the surviving directory; the others untouched.
    let image = wait_for(
        "the controller to move leadership",
        Duration::from_secs(20),
        || {
            let image = nodes[1].broker.image();
            let moved = lost.iter().all(|p| {
                let r = image.partition(topic_id, *p).unwrap();
                r.leader != 1 && r.leader != -1 && !r.isr.contains(&1)
            });
            moved.then_some(image)
        },
    )
    .await;
    eprintln!("leadership moved after {:?}", t0.elapsed());
    assert_eq!(image.broker(1).unwrap().log_dirs, vec![surviving.id]);
    for p in &kept {
        let r = image.partition(topic_id, *p).unwrap();
        assert!(r.isr.contains(&1), "partition {p} keeps node 1: {r:?}");
    }

    // A fresh client: a produce cut short above may have left its answer on a connection.
    let mut cluster = ClusterClient::connect(&io, addrs.clone()).await.unwrap();
    // Everything still takes writes, node 1's surviving partitions included, and every
    // acknowledged record reads back from the current leaders.
    for p in 0..PARTITIONS {
        let value = format!("after-{p}");
        let offset = cluster.produce("t", p, batch(&value), -1).await.unwrap();
        acked.push((p, offset.unwrap(), value));
    }
    eprintln!("written again after {:?}", t0.elapsed());
    for (p, offset, value) in &acked {
        let fetched = cluster
            .fetch("t", *p, *offset, 1 << 20, Duration::from_millis(100))
            .await
            .unwrap();
        let header = BatchHeader::parse(&fetched.records).expect("the acknowledged batch");
        let records = batch::records(&fetched.records, &header).unwrap().unwrap();
        let record = records
            .iter()
            .find(|r| r.offset == *offset)
            .expect("its record");
        assert_eq!(record.value, Some(value.as_bytes()), "{p}@{offset}");
    }
    // Node 1 answers for the failed directory's partitions with KAFKA_STORAGE_ERROR.
    let mut direct = Client::connect(&io, addrs[0]).await.unwrap();
    let refused = direct.fetch("t", lost[0], 0, 1024, Duration::ZERO).await;
    assert!(refused.is_err(), "{refused:?}");
    let described = direct.describe_log_dirs(None).await.unwrap();
    assert_eq!(
        described[1].error,
        Some(kafka_protocol::error::ResponseError::KafkaStorageError)
    );
    assert_eq!(described[0].error, None);
    assert_eq!(described[0].replicas.len(), kept.len());

    for node in nodes.iter().rev() {
        node.broker.halt();
    }
}

/// Every record of `records` (offset, value) reads back from `node`'s own replica of
/// `topic`-`partition`.
fn read_back_locally(node: &Broker, topic: &str, partition: i32, records: &[(i64, String)]) {
    let handle = node.partition(topic, partition).expect("hosted");
    let p = handle.lock();
    for (offset, value) in records {
        // The log itself, not a consumer's view: a follower's high watermark may lag.
        let data = p
            .log()
            .read(*offset, 1 << 20, p.log_end_offset())
            .expect("readable");
        let header = BatchHeader::parse(&data).expect("the acknowledged batch");
        let batch_records = batch::records(&data, &header).unwrap().unwrap();
        let record = batch_records
            .iter()
            .find(|r| r.offset == *offset)
            .unwrap_or_else(|| panic!("{topic}-{partition}@{offset} not in {header:?}"));
        assert_eq!(record.value, Some(value.as_bytes()), "{offset}");
    }
}

/// What is left of `topic`-`partition` in `root`: its directory, a future or an old log.
fn leftovers(
    io: &weir::io::Io,
    root: &std::path::Path,
    topic: &str,
    partition: i32,
) -> Vec<String> {
    let name = format!("{topic}-{partition}");
    io.disk
        .list_dir(root)
        .unwrap()
        .into_iter()
        .filter(|n| n == &name || n.starts_with(&format!("{name}.")))
        .collect()
}

/// AlterReplicaLogDirs moves a replica of a 3-node cluster's partition to the node's other
/// directory while an acks=all producer writes: every acknowledged record is in the moved
/// replica, the old directory holds nothing of it, and the controller learns the directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_moves_between_directories_under_acks_all() {
    let disk = MemDisk::new(6);
    let io = memdisk_io(&disk);
    let controller_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let client_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes: Vec<RunningBroker> = Vec::new();
    for id in 1..=3 {
        let [a, b] = dirs_of(id);
        for dir in [&a, &b] {
            format_log_dir(&io, dir, CLUSTER_ID, id as i32)
                .await
                .unwrap();
        }
        let log_dirs = format!("{},{}", a.display(), b.display());
        let config = combined_config(
            id,
            &a,
            &controller_ports,
            client_ports[id - 1],
            &[("log.dirs", &log_dirs)],
        );
        nodes.push(Broker::start(config, io.clone()).await.unwrap());
    }
    let addrs: Vec<SocketAddr> = client_ports
        .iter()
        .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
        .collect();
    wait_listening(&addrs).await;
    let mut admin = Client::connect(&io, addrs[0]).await.unwrap();
    admin
        .create_topic("m", 1, 3, &Default::default())
        .await
        .unwrap();
    let node1 = nodes[0].broker.clone();
    let (topic_id, from) = wait_for("node 1's replica placed", Duration::from_secs(20), || {
        let image = node1.image();
        let id = image.topic("m")?.id;
        let dir = image.partition(id, 0)?.directory_of(1)?;
        (dir != weir::controller::image::DIR_UNASSIGNED).then_some((id, dir))
    })
    .await;
    let views = node1.log_dir_views();
    let (source, dest) = if views[0].id == from {
        (&views[0], &views[1])
    } else {
        (&views[1], &views[0])
    };
    assert!(source.partitions.contains(&("m".to_string(), 0)));

    let mut cluster = ClusterClient::connect(&io, addrs.clone()).await.unwrap();
    let mut acked: Vec<(i64, String)> = Vec::new();
    for i in 0..300 {
        let value = format!("before-{i}-{}", "x".repeat(200));
        let offset = cluster.produce("m", 0, batch(&value), -1).await.unwrap();
        acked.push((offset.unwrap(), value));
    }
    // An acks=all producer writes all through the move.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producer = {
        let (io, addrs, stop) = (io.clone(), addrs.clone(), stop.clone());
        tokio::spawn(async move {
            let mut cluster = ClusterClient::connect(&io, addrs).await.unwrap();
            let mut acked = Vec::new();
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let value = format!("during-{i}");
                let offset = cluster.produce("m", 0, batch(&value), -1).await;
                acked.push((offset.unwrap().unwrap(), value));
                i += 1;
            }
            acked
        })
    };
    let mut direct = Client::connect(&io, addrs[0]).await.unwrap();
    let answers = direct
        .alter_replica_log_dirs(&[
            (dest.path.display().to_string(), "m".into(), 0),
            ("/nowhere".into(), "m".into(), 0),
            (dest.path.display().to_string(), "absent".into(), 0),
        ])
        .await
        .unwrap();
    use kafka_protocol::error::ResponseError;
    assert!(answers.contains(&("m".into(), 0, None)), "{answers:?}");
    assert!(
        answers.contains(&("m".into(), 0, Some(ResponseError::LogDirNotFound))),
        "{answers:?}"
    );
    assert!(
        answers.contains(&("absent".into(), 0, Some(ResponseError::ReplicaNotAvailable))),
        "{answers:?}"
    );
    let t0 = std::time::Instant::now();
    wait_for("the move and its report", Duration::from_secs(30), || {
        let here = node1
            .log_dir_views()
            .into_iter()
            .find(|v| v.id == dest.id)?;
        let image = nodes[1].broker.image();
        let reported = image.partition(topic_id, 0)?.directory_of(1) == Some(dest.id);
        (here.partitions.contains(&("m".to_string(), 0)) && reported).then_some(())
    })
    .await;
    eprintln!("moved and reported after {:?}", t0.elapsed());
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let during = producer.await.unwrap();
    assert!(!during.is_empty());
    acked.extend(during);
    // Node 1's replica catches up with the last acknowledged record, then holds them all.
    let last = acked.iter().map(|(o, _)| *o).max().unwrap();
    wait_for("node 1 caught up", Duration::from_secs(20), || {
        let h = node1.partition("m", 0)?;
        let end = h.lock().log_end_offset();
        (end > last).then_some(())
    })
    .await;
    read_back_locally(&node1, "m", 0, &acked);
    assert!(
        leftovers(&io, &source.path, "m", 0).is_empty(),
        "{:?}",
        leftovers(&io, &source.path, "m", 0)
    );
    assert_eq!(leftovers(&io, &dest.path, "m", 0), vec!["m-0".to_string()]);
    // DescribeLogDirs: the replica in its new directory, no future left.
    let described = direct.describe_log_dirs(None).await.unwrap();
    let in_dest = described
        .iter()
        .find(|d| d.path == dest.path.display().to_string())
        .unwrap();
    assert!(in_dest
        .replicas
        .iter()
        .any(|r| r.topic == "m" && !r.is_future));
    assert!(described
        .iter()
        .all(|d| d.replicas.iter().all(|r| !r.is_future)));
    for node in nodes.iter().rev() {
        node.broker.halt();
    }
}

/// A single node killed mid-move (throttled, so the copy is under way) finds the future log at
/// start and finishes the move; every acknowledged record reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_cut_by_a_crash_finishes_after_the_restart() {
    let disk = MemDisk::new(8);
    let io = memdisk_io(&disk);
    let [a, b] = dirs_of(1);
    for dir in [&a, &b] {
        format_log_dir(&io, dir, CLUSTER_ID, 1).await.unwrap();
    }
    let log_dirs = format!("{},{}", a.display(), b.display());
    let start = |io: weir::io::Io| {
        let (cport, port) = (free_port(), free_port());
        // Small copy steps, so the throttled move is seen under way.
        let config = combined_config(
            1,
            &a,
            &[cport],
            port,
            &[
                ("log.dirs", &log_dirs),
                ("replica.fetch.max.bytes", "16384"),
            ],
        );
        async move {
            let node = Broker::start(config, io).await.unwrap();
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            wait_listening(&[addr]).await;
            (node, addr)
        }
    };
    let (node, addr) = start(io.clone()).await;
    let mut client = Client::connect(&io, addr).await.unwrap();
    client
        .create_topic("r", 1, 1, &Default::default())
        .await
        .unwrap();
    let key = ("r".to_string(), 0);
    let in_a = wait_for("r-0 placed", Duration::from_secs(10), || {
        let views = node.broker.log_dir_views();
        let placed = views.iter().find(|v| v.partitions.contains(&key))?;
        Some(placed.path == a)
    })
    .await;
    let (source, dest) = if in_a {
        (a.clone(), b.clone())
    } else {
        (b.clone(), a.clone())
    };
    let mut acked: Vec<(i64, String)> = Vec::new();
    for i in 0..400 {
        let value = format!("r-{i}-{}", "y".repeat(500));
        let offset = client.produce("r", 0, batch(&value), -1).await.unwrap();
        acked.push((offset.unwrap(), value));
    }
    let throttle = weir::client::ConfigResource::Broker(1);
    let rate = "replica.alter.log.dirs.io.max.bytes.per.second".to_string();
    client
        .alter_configs(
            &throttle,
            &[(rate.clone(), Some("40000".to_string()))].into(),
        )
        .await
        .unwrap();
    let answers = client
        .alter_replica_log_dirs(&[(dest.display().to_string(), "r".into(), 0)])
        .await
        .unwrap();
    assert_eq!(answers, vec![("r".to_string(), 0, None)]);
    // The future shows in DescribeLogDirs, partly copied.
    let mut observer = Client::connect(&io, addr).await.unwrap();
    let waited = std::time::Instant::now();
    let future = loop {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "no future replica shown"
        );
        let described = observer.describe_log_dirs(None).await.unwrap();
        let in_dest = described
            .iter()
            .find(|d| d.path == dest.display().to_string())
            .unwrap();
        let under_way = in_dest
            .replicas
            .iter()
            .find(|r| r.is_future && r.size > 0 && r.offset_lag > 0);
        if let Some(f) = under_way {
            break f.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!("future under way: {future:?}");
    node.broker.halt();
    drop((client, observer));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        leftovers(&io, &dest, "r", 0).len(),
        1,
        "{:?}",
        leftovers(&io, &dest, "r", 0)
    );
    assert!(leftovers(&io, &dest, "r", 0)[0].ends_with("-future"));

    let (node, addr) = start(io.clone()).await;
    let mut client = Client::connect(&io, addr).await.unwrap();
    client
        .alter_configs(&throttle, &[(rate, None)].into())
        .await
        .unwrap();
    let broker = node.broker.clone();
    wait_for(
        "the move to finish after the restart",
        Duration::from_secs(30),
        || {
            let moved = leftovers(&io, &source, "r", 0).is_empty()
                && leftovers(&io, &dest, "r", 0) == vec!["r-0".to_string()];
            (moved && broker.partition("r", 0).is_some()).then_some(())
        },
    )
    .await;
    read_back_locally(&node.broker, "r", 0, &acked);
    node.broker.halt();
}

/// A figure, not a check: how fast a replica moves between two directories on the real disk,
/// unthrottled and under `replica.alter.log.dirs.io.max.bytes.per.second`. Run by hand:
/// `cargo test --release --test log_dirs measure_move -- --ignored --nocapture`
/// (`WEIR_MOVE_MB`, default 64; `WEIR_MOVE_THROTTLED_MB`, default 16, at 4 MB/s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_move_throughput() {
    let mb = |key: &str, default: usize| {
        std::env::var(key)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let io = weir::io::Io::os();
    let root = common::temp_dir("move-figure", "dirs");
    let (a, b) = (root.join("a"), root.join("b"));
    for dir in [&a, &b] {
        format_log_dir(&io, dir, CLUSTER_ID, 1).await.unwrap();
    }
    let log_dirs = format!("{},{}", a.display(), b.display());
    let (cport, port) = (free_port(), free_port());
    let config = combined_config(1, &a, &[cport], port, &[("log.dirs", &log_dirs)]);
    let node = Broker::start(config, io.clone()).await.unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    wait_listening(&[addr]).await;
    let mut client = Client::connect(&io, addr).await.unwrap();
    let rate = "replica.alter.log.dirs.io.max.bytes.per.second".to_string();
    let throttle = weir::client::ConfigResource::Broker(1);
    for (topic, megabytes, limit) in [
        ("fast", mb("WEIR_MOVE_MB", 64), None),
        ("slow", mb("WEIR_MOVE_THROTTLED_MB", 16), Some(4u64 << 20)),
    ] {
        client
            .create_topic(topic, 1, 1, &Default::default())
            .await
            .unwrap();
        let value = "z".repeat(1000);
        for _ in 0..megabytes {
            let mut batch = BatchBuilder::new(1);
            for _ in 0..1000 {
                batch.push(None, Some(value.as_bytes()), 1);
            }
            let batch = Bytes::from(batch.finish(-1, -1, -1));
            client.produce(topic, 0, batch, 1).await.unwrap();
        }
        let key = (topic.to_string(), 0);
        let placed = node
            .broker
            .log_dir_views()
            .into_iter()
            .find(|v| v.partitions.contains(&key))
            .unwrap();
        let dest = if placed.path == a { &b } else { &a };
        let change = [(rate.clone(), limit.map(|l| l.to_string()))].into();
        client.alter_configs(&throttle, &change).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let started = std::time::Instant::now();
        let answers = client
            .alter_replica_log_dirs(&[(dest.display().to_string(), topic.into(), 0)])
            .await
            .unwrap();
        assert_eq!(answers, vec![(topic.to_string(), 0, None)]);
        let broker = node.broker.clone();
        let dest_path = dest.clone();
        wait_for("the move", Duration::from_secs(600), || {
            let views = broker.log_dir_views();
            let there = views.iter().find(|v| v.path == dest_path)?;
            there.partitions.contains(&key).then_some(())
        })
        .await;
        let took = started.elapsed();
        let size = node
            .broker
            .partition(topic, 0)
            .unwrap()
            .lock()
            .log()
            .size_bytes();
        eprintln!(
            "moved {topic}-0: {:.1} MB in {:.2} s = {:.1} MB/s (throttle {:?} B/s)",
            size as f64 / 1e6,
            took.as_secs_f64(),
            size as f64 / 1e6 / took.as_secs_f64(),
            limit
        );
    }
    node.broker.halt();
    let _ = std::fs::remove_dir_all(&root);
}
