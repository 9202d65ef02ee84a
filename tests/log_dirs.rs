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
