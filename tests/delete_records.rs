//! DeleteRecords end to end on a broker over `MemDisk`: the low watermark, its errors, Fetch and
//! ListOffsets honouring it, and the log start surviving a process kill and a power loss.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{DeleteRecordsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use weir::broker::{Broker, RunningBroker};
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use weir::io::Io;
use weir::log::batch::BatchBuilder;

fn io(disk: &MemDisk) -> Io {
    Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(5)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(disk.clone()),
    }
}

async fn start(io: &Io, segment_bytes: &str) -> RunningBroker {
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        ("log.segment.bytes".to_string(), segment_bytes.to_string()),
    ]);
    let config = ServerConfig::from_properties(&props).unwrap().0;
    Broker::start(config, io.clone()).await.unwrap()
}

fn batch(values: &[&str]) -> Bytes {
    let mut b = BatchBuilder::new(1_000);
    for v in values {
        b.push(Some(b"k"), Some(v.as_bytes()), 1_000);
    }
    Bytes::from(b.finish(-1, -1, -1))
}

/// (low watermark, error code) for one partition.
async fn delete_records(
    client: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
    version: i16,
) -> (i64, i16) {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(1000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])]);
    let response = client.connection().call(&request, version).await.unwrap();
    let p = &response.topics[0].partitions[0];
    (p.low_watermark, p.error_code)
}

async fn fetch_error(client: &mut Client, topic: &str, offset: i64) -> Option<String> {
    client
        .fetch(topic, 0, offset, 1 << 20, Duration::ZERO)
        .await
        .err()
        .map(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_log_start_durably() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let running = start(&io, "1024").await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    for i in 0..30 {
        let value = format!("{i:0>200}");
        client
            .produce("t", 0, batch(&[&value, "x"]), -1)
            .await
            .unwrap();
    }
    assert_eq!(client.list_offset("t", 0, -1).await.unwrap().0, 60);

    // Every version; the offset moves forward, inside a batch and a segment.
    assert_eq!(delete_records(&mut client, "t", 0, 5, 0).await, (5, 0));
    assert_eq!(delete_records(&mut client, "t", 0, 21, 1).await, (21, 0));
    // Backwards is a no-op that reports the current start.
    assert_eq!(delete_records(&mut client, "t", 0, 3, 2).await, (21, 0));
    // Past the high watermark, or negative: OFFSET_OUT_OF_RANGE. Unknown partition: 3.
    assert_eq!(delete_records(&mut client, "t", 0, 61, 2).await, (-1, 1));
    assert_eq!(delete_records(&mut client, "t", 0, -7, 2).await, (-1, 1));
    assert_eq!(delete_records(&mut client, "t", 9, 1, 2).await, (-1, 3));
    assert_eq!(client.list_offset("t", 0, -2).await.unwrap().0, 21);
    assert!(
        fetch_error(&mut client, "t", 20).await.is_some(),
        "below the start"
    );
    let fetched = client
        .fetch("t", 0, 21, 1 << 20, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(fetched.log_start_offset, 21);
    assert!(!fetched.records.is_empty());

    // Kill -9: the process dies, the kernel keeps what was written.
    disk.process_crash();
    drop(client);
    let running = start(&io, "1024").await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    assert_eq!(client.list_offset("t", 0, -2).await.unwrap().0, 21);
    assert!(fetch_error(&mut client, "t", 0).await.is_some());

    // -1 means the high watermark; then a power loss: the start was fsynced before the answer.
    assert_eq!(delete_records(&mut client, "t", 0, -1, 2).await, (60, 0));
    disk.power_loss();
    drop(client);
    let running = start(&io, "1024").await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    assert!(client.list_offset("t", 0, -2).await.unwrap().0 >= 60);
    running.broker.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_topics_refuse_delete_records() {
    let disk = MemDisk::new(12);
    let io = io(&disk);
    let running = start(&io, "1048576").await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic(
            "c",
            1,
            1,
            &BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]),
        )
        .await
        .unwrap();
    client.produce("c", 0, batch(&["a"]), -1).await.unwrap();
    // POLICY_VIOLATION (44).
    assert_eq!(delete_records(&mut client, "c", 0, 1, 2).await, (-1, 44));
    running.broker.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_leaves_the_log_start_alone() {
    let disk = MemDisk::new(13);
    let io = io(&disk);
    let running = start(&io, "1048576").await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    for _ in 0..5 {
        client
            .produce("t", 0, batch(&["a", "b"]), -1)
            .await
            .unwrap();
    }
    // Every fsync fails: the new start is never durable, so it never takes effect.
    disk.set_faults(weir::io::memdisk::Faults {
        sync_error_rate: 1.0,
        ..Default::default()
    });
    // KAFKA_STORAGE_ERROR (56).
    assert_eq!(delete_records(&mut client, "t", 0, 4, 2).await, (-1, 56));
    disk.set_faults(Default::default());
    assert_eq!(client.list_offset("t", 0, -2).await.unwrap().0, 0);
    assert_eq!(delete_records(&mut client, "t", 0, 4, 2).await, (4, 0));
    running.broker.shutdown().await.unwrap();
}
