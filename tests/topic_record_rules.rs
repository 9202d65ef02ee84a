//! Topic configs that make the broker look inside batches, over the wire: keyless records on a
//! compacted topic are refused with per-record errors, and `compression.type` makes the broker
//! store (and serve) batches with the topic's codec, records unchanged.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ProduceResponse;
use weir::broker::{Broker, RunningBroker};
use weir::client::{produce_request, Client};
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use weir::io::Io;
use weir::log::batch::{self, BatchBuilder};
use weir::log::codec::{self, Codec};

async fn start() -> (Io, RunningBroker) {
    let io = Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(9)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(MemDisk::new(9)),
    };
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
    ]);
    let config = ServerConfig::from_properties(&props).unwrap().0;
    let running = Broker::start(config, io.clone()).await.unwrap();
    (io, running)
}

fn batch_with(keys: &[Option<&str>], codec: Codec) -> Bytes {
    let mut b = BatchBuilder::new(1_000);
    for (i, key) in keys.iter().enumerate() {
        let value = format!("value-{i}-{}", "x".repeat(100));
        b.push(
            key.map(str::as_bytes),
            Some(value.as_bytes()),
            1_000 + i as i64,
        );
    }
    let plain = b.finish(-1, -1, -1);
    let header = batch::check(&plain).unwrap();
    let packed = codec::compress(codec, batch::records_section(&plain, &header), -1).unwrap();
    Bytes::from(batch::with_records_section(&plain, codec.id(), &packed))
}

fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn produce(
    client: &mut Client,
    topic: &str,
    records: Bytes,
    version: i16,
) -> ProduceResponse {
    let request = produce_request(topic, &[(0, records)], -1, Duration::from_secs(5));
    client.connection().call(&request, version).await.unwrap()
}

/// (codec, [(offset, key, value)]) of every batch in the partition.
async fn stored(
    client: &mut Client,
    topic: &str,
) -> Vec<(Codec, Vec<(i64, Option<Vec<u8>>, Vec<u8>)>)> {
    let fetched = client
        .fetch(topic, 0, 0, 1 << 20, Duration::ZERO)
        .await
        .unwrap();
    batch::iter(&fetched.records)
        .map(|item| {
            let (at, header) = item.unwrap();
            let bytes = &fetched.records[at..at + header.total_len()];
            let codec = Codec::from_id(header.compression()).unwrap();
            let plain =
                codec::decompress(codec, batch::records_section(bytes, &header), 1 << 24).unwrap();
            let records = batch::parse_records(&plain, &header)
                .unwrap()
                .0
                .iter()
                .map(|r| {
                    (
                        r.offset,
                        r.key.map(<[u8]>::to_vec),
                        r.value.unwrap().to_vec(),
                    )
                })
                .collect();
            (codec, records)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_topics_refuse_keyless_records() {
    let (io, running) = start().await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("c", 1, 1, &configs(&[("cleanup.policy", "compact")]))
        .await
        .unwrap();
    for codec in [Codec::None, Codec::Gzip, Codec::Lz4] {
        let keyless = batch_with(&[Some("a"), None, Some("c")], codec);
        for version in [3, 7, 8, 11] {
            let response = produce(&mut client, "c", keyless.clone(), version).await;
            let p = &response.responses[0].partition_responses[0];
            assert_eq!(p.error_code, 87, "INVALID_RECORD, {codec:?} v{version}");
            if version >= 8 {
                assert_eq!(p.record_errors.len(), 1);
                assert_eq!(p.record_errors[0].batch_index, 1);
                let message = p.error_message.as_deref().unwrap();
                assert!(message.contains("without key"), "{message}");
            }
        }
    }
    let keyed = batch_with(&[Some("a"), Some("b")], Codec::Snappy);
    let response = produce(&mut client, "c", keyed, 11).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    // Only the keyed batch was stored, as the producer compressed it.
    let batches = stored(&mut client, "c").await;
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].0, Codec::Snappy);
    // Keyless records are fine on a delete-policy topic, and never decoded there.
    client
        .create_topic("d", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let response = produce(&mut client, "d", batch_with(&[None], Codec::Gzip), 11).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    running.broker.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_compression_type_recompresses_what_differs() {
    let (io, running) = start().await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let sources = [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ];
    for (name, codec) in [
        ("uncompressed", Codec::None),
        ("gzip", Codec::Gzip),
        ("snappy", Codec::Snappy),
        ("lz4", Codec::Lz4),
        ("zstd", Codec::Zstd),
        ("producer", Codec::None),
    ] {
        let topic = format!("z-{name}");
        let mut settings = vec![("compression.type", name)];
        if name == "gzip" {
            settings.push(("compression.gzip.level", "9"));
        }
        client
            .create_topic(&topic, 1, 1, &configs(&settings))
            .await
            .unwrap();
        for source in sources {
            let response = produce(
                &mut client,
                &topic,
                batch_with(&[Some("k"), None], source),
                11,
            )
            .await;
            assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
        }
        let batches = stored(&mut client, &topic).await;
        assert_eq!(batches.len(), sources.len());
        for (i, (stored_codec, records)) in batches.iter().enumerate() {
            let expected = if name == "producer" {
                sources[i]
            } else {
                codec
            };
            assert_eq!(*stored_codec, expected, "{topic} batch {i}");
            let offsets: Vec<i64> = records.iter().map(|r| r.0).collect();
            assert_eq!(offsets, [2 * i as i64, 2 * i as i64 + 1]);
            assert_eq!(records[0].1.as_deref(), Some(&b"k"[..]));
            assert_eq!(records[1].1, None);
            assert!(records[1].2.starts_with(b"value-1-"));
        }
    }
    // zstd batches are served from Fetch v10 on; older versions get UNSUPPORTED_COMPRESSION_TYPE.
    for (version, expected) in [(9, 76), (10, 0)] {
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName("z-zstd".to_string().into()))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_partition_max_bytes(1 << 20)])]);
        let response = client.connection().call(&request, version).await.unwrap();
        let p = &response.responses[0].partitions[0];
        assert_eq!(p.error_code, expected, "Fetch v{version}");
        assert!(p.records.is_some());
    }
    // zstd needs Produce v7+: UNSUPPORTED_COMPRESSION_TYPE (76) below.
    let response = produce(
        &mut client,
        "z-producer",
        batch_with(&[Some("k")], Codec::Zstd),
        6,
    )
    .await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 76);
    running.broker.shutdown().await.unwrap();
}
