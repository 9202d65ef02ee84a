//! Log compaction through a running broker: a `cleanup.policy=compact` topic keeps the last
//! value per key (offsets unchanged, older values gone), and `__consumer_offsets` is compacted
//! too, after which a restarted broker loads the surviving commits and answers with the last
//! committed offset.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weir::broker::Broker;
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use weir::io::Io;
use weir::log::batch::{self, BatchBuilder};

fn io_on(disk: &MemDisk) -> Io {
    Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(5)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(disk.clone()),
    }
}

fn config() -> ServerConfig {
    let props = BTreeMap::from(
        [
            ("listeners", "PLAINTEXT://127.0.0.1:0"),
            ("log.dirs", "/data"),
            ("log.cleaner.backoff.ms", "20"),
            ("log.cleaner.min.cleanable.ratio", "0.01"),
            ("offsets.topic.num.partitions", "1"),
            ("offsets.topic.segment.bytes", "2048"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    ServerConfig::from_properties(&props).unwrap().0
}

fn keyed(key: &str, value: &str) -> Bytes {
    let mut b = BatchBuilder::new(1);
    b.push(Some(key.as_bytes()), Some(value.as_bytes()), 1);
    Bytes::from(b.finish(-1, -1, -1))
}

/// Every (offset, key, value) served from the start, following the batches' offsets.
async fn read_all(client: &mut Client, topic: &str, end: i64) -> Vec<(i64, String, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    let mut steps = 0;
    while offset < end {
        steps += 1;
        assert!(steps < 10_000, "reading made no progress at {offset}");
        let fetched = client
            .fetch(topic, 0, offset, 1 << 20, Duration::from_millis(10))
            .await
            .unwrap();
        assert!(!fetched.records.is_empty(), "nothing served at {offset}");
        for item in batch::iter(&fetched.records) {
            let (at, header) = item.unwrap();
            let bytes = &fetched.records[at..at + header.total_len()];
            for r in batch::records(bytes, &header).unwrap().unwrap() {
                if r.offset >= offset {
                    let text = |b: Option<&[u8]>| String::from_utf8(b.unwrap().to_vec()).unwrap();
                    out.push((r.offset, text(r.key), text(r.value)));
                }
            }
            offset = header.next_offset();
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_keeps_the_last_value_per_key() {
    let disk = MemDisk::new(17);
    let io = io_on(&disk);
    let running = Broker::start(config(), io.clone()).await.unwrap();
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let configs = BTreeMap::from(
        [("cleanup.policy", "compact"), ("segment.bytes", "1024")]
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    client.create_topic("table", 1, 1, &configs).await.unwrap();
    let mut last = BTreeMap::new();
    for i in 0..300 {
        let key = format!("key-{}", i % 7);
        let value = format!("value-{i:05}");
        client
            .produce("table", 0, keyed(&key, &value), -1)
            .await
            .unwrap();
        last.insert(key, value);
    }
    let handle = running.broker.partition("table", 0).unwrap();
    let size_before = handle.lock().log().size_bytes();
    // The cleaner runs every 20 ms when idle; wait until the closed segments are compacted.
    let mut records = Vec::new();
    for _ in 0..500 {
        records = read_all(&mut client, "table", 300).await;
        if records.len() < 60 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(records.len() < 60, "still {} of 300 records", records.len());
    let size_after = handle.lock().log().size_bytes();
    assert!(
        size_after < size_before / 3,
        "{size_after} of {size_before} bytes"
    );
    // Offsets ascend, and each survivor is the record produced at that offset.
    assert!(records.windows(2).all(|w| w[0].0 < w[1].0));
    for (offset, key, value) in &records {
        assert_eq!(key, &format!("key-{}", offset % 7));
        assert_eq!(value, &format!("value-{offset:05}"));
    }
    let mut table = BTreeMap::new();
    for (_, k, v) in records {
        table.insert(k, v);
    }
    assert_eq!(table, last, "the last value of every key survives");
    let (end, _) = client.list_offset("table", 0, -1).await.unwrap();
    let (start, _) = client.list_offset("table", 0, -2).await.unwrap();
    assert_eq!((start, end), (0, 300), "compaction moves no offsets");
    running.broker.shutdown().await.unwrap();
}

/// Commits, retrying while the offsets topic is created and loaded.
async fn commit(client: &mut Client, group: &str, offsets: &[(i32, i64)]) {
    for _ in 0..200 {
        // FindCoordinator creates `__consumer_offsets` on first use.
        let found = client.find_coordinator(group).await;
        match found.and(client.commit_offsets(group, "events", offsets).await) {
            Ok(()) => return,
            Err(e) if e.is_retriable() => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("the commit was never accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offsets_log_is_compacted_and_still_loads() {
    let disk = MemDisk::new(23);
    let io = io_on(&disk);
    let running = Broker::start(config(), io.clone()).await.unwrap();
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("events", 2, 1, &BTreeMap::new())
        .await
        .unwrap();
    for i in 0..200 {
        commit(&mut client, "g", &[(0, i), (1, 1000 + i)]).await;
    }
    commit(&mut client, "h", &[(0, 7)]).await;
    let handle = running
        .broker
        .partition("__consumer_offsets", 0)
        .expect("the offsets topic exists");
    let count = |handle: &weir::broker::PartitionHandle| {
        let p = handle.lock();
        let (mut offset, end) = (p.log_start_offset(), p.high_watermark());
        let mut records = 0;
        while offset < end {
            let data = p.read(offset, 1 << 20).unwrap();
            if data.is_empty() {
                break;
            }
            for item in batch::iter(&data) {
                let (_, header) = item.unwrap();
                records += header.record_count as i64;
                offset = header.next_offset();
            }
        }
        records
    };
    let mut left = i64::MAX;
    for _ in 0..500 {
        left = count(&handle);
        if left < 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(left < 100, "still {left} of 401 offset commits");
    drop(handle);
    running.broker.shutdown().await.unwrap();
    drop(client);
    drop(running);

    // A restart replays only what survived, and answers with the last commits.
    let running = Broker::start(config(), io.clone()).await.unwrap();
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let mut committed = Vec::new();
    for _ in 0..200 {
        let _ = client.find_coordinator("g").await;
        match client
            .committed_offsets("g", Some(("events", &[0, 1])))
            .await
        {
            Ok(c) => {
                committed = c;
                break;
            }
            // COORDINATOR_LOAD_IN_PROGRESS while the partition loads.
            Err(e) if e.is_retriable() => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(
        committed,
        vec![
            ("events".to_string(), 0, 199),
            ("events".to_string(), 1, 1199)
        ]
    );
    let h = client
        .committed_offsets("h", Some(("events", &[0])))
        .await
        .unwrap();
    assert_eq!(h, vec![("events".to_string(), 0, 7)]);
    running.broker.shutdown().await.unwrap();
}
