//! A broker on the in-memory disk, on 127.0.0.1, fed hostile and random frames: each bad
//! connection is closed, the broker survives, and a well-behaved client is still served.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::broker::Broker;
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use weir::io::Io;
use weir::log::batch::BatchBuilder;

fn memory_io() -> Io {
    Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(7)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(MemDisk::new(7)),
    }
}

fn config() -> ServerConfig {
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
    ]);
    ServerConfig::from_properties(&props).unwrap().0
}

fn uvarint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// Sends raw bytes and checks that the broker answers or closes this connection in bounded
/// time (its read side ends).
async fn poke(addr: std::net::SocketAddr, bytes: &[u8]) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _ = s.write_all(bytes).await;
    let _ = s.shutdown().await;
    let mut sink = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut sink)).await;
    assert!(
        ended.is_ok(),
        "the broker neither answered nor closed {bytes:02x?}"
    );
}

/// A connection opened before the hostile ones, used between them: a bad frame must close only
/// its own connection, never another client's.
struct Bystander {
    client: Client,
    topic: String,
    next_offset: i64,
}

impl Bystander {
    async fn new(io: &Io, addr: std::net::SocketAddr) -> Bystander {
        let mut client = Client::connect(io, addr).await.unwrap();
        client.set_timeout(Duration::from_secs(10));
        let topic = "bystander".to_string();
        client
            .create_topic(&topic, 1, 1, &BTreeMap::new())
            .await
            .unwrap();
        Bystander {
            client,
            topic,
            next_offset: 0,
        }
    }

    /// Produces one record on the same, long-lived connection and reads it back.
    async fn still_connected(&mut self, after: &[u8]) {
        let mut b = BatchBuilder::new(1);
        b.push(None, Some(b"bystander"), 1);
        let produced = self
            .client
            .produce(&self.topic, 0, Bytes::from(b.finish(-1, -1, -1)), -1)
            .await;
        let offset = match produced {
            Ok(offset) => offset,
            Err(e) => panic!("the bystander's connection broke after {after:02x?}: {e}"),
        };
        assert_eq!(offset, Some(self.next_offset));
        let fetched = self
            .client
            .fetch(&self.topic, 0, self.next_offset, 1 << 20, Duration::ZERO)
            .await
            .unwrap();
        assert!(!fetched.records.is_empty());
        self.next_offset += 1;
    }
}

async fn still_serves(io: &Io, addr: std::net::SocketAddr, topic: &str) {
    let mut client = Client::connect(io, addr)
        .await
        .expect("broker still accepts clients");
    client
        .create_topic(topic, 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let mut b = BatchBuilder::new(1);
    b.push(None, Some(b"still here"), 1);
    let offset = client
        .produce(topic, 0, Bytes::from(b.finish(-1, -1, -1)), -1)
        .await
        .unwrap();
    assert_eq!(offset, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_frames_close_one_connection_and_nothing_else() {
    let io = memory_io();
    let running = Broker::start(config(), io.clone()).await.unwrap();
    let addr = running.local_addr;
    let mut bystander = Bystander::new(&io, addr).await;

    // Array lengths that claim billions of elements (regression: the codec reserved them).
    let mut produce_v9 = vec![0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0];
    produce_v9.extend_from_slice(&[0, 0xff, 0xff, 0, 0, 3, 0xe8]);
    produce_v9.extend_from_slice(&uvarint(0x7fff_fff0));
    let mut produce_v7 = vec![0, 0, 0, 7, 0, 0, 0, 1, 0xff, 0xff];
    produce_v7.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 3, 0xe8]);
    produce_v7.extend_from_slice(&0x7fff_fff0i32.to_be_bytes());
    let cases: Vec<Vec<u8>> = vec![
        frame(&produce_v9),
        frame(&produce_v7),
        0x7fff_ffffi32.to_be_bytes().to_vec(), // over socket.request.max.bytes
        (-5i32).to_be_bytes().to_vec(),        // negative size
        frame(&[0, 1]),                        // shorter than a header
        frame(&[0x7f, 0x7f, 0, 0, 0, 0, 0, 1]), // unknown API key
        frame(&[0, 0, 0x7f, 0x7f, 0, 0, 0, 1]), // unsupported Produce version
        vec![0, 0, 0, 100, 1, 2, 3],           // truncated frame, then EOF
    ];
    for case in &cases {
        poke(addr, case).await;
        bystander.still_connected(case).await;
    }
    // Random frames with valid API keys and versions: a bounded, seeded storm.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..300 {
        let (key, version) = [
            (0u8, 9u8),
            (1, 12),
            (2, 7),
            (3, 12),
            (19, 5),
            (22, 4),
            (32, 4),
        ][(next() % 7) as usize];
        let len = (next() % 200) as usize;
        let mut body = vec![0, key, 0, version, 0, 0, 0, 1];
        body.extend((0..len).map(|_| next() as u8));
        let bytes = frame(&body);
        poke(addr, &bytes).await;
        if round % 10 == 0 {
            bystander.still_connected(&bytes).await;
        }
    }
    bystander.still_connected(b"the storm").await;
    still_serves(&io, addr, "after-storm").await;
    running.broker.shutdown().await.unwrap();
}

/// A fetch asking for 2 GiB gets at most `fetch.max.bytes`, except that its first batch is
/// always whole (KIP-74).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_is_capped_by_fetch_max_bytes() {
    let io = memory_io();
    let mut props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
    ]);
    props.insert("fetch.max.bytes".to_string(), "2048".to_string());
    let config = ServerConfig::from_properties(&props).unwrap().0;
    let running = Broker::start(config, io.clone()).await.unwrap();
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("capped", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let value = vec![b'x'; 1500];
    for _ in 0..4 {
        let mut b = BatchBuilder::new(1);
        b.push(None, Some(&value), 1);
        let batch = Bytes::from(b.finish(-1, -1, -1));
        client.produce("capped", 0, batch, -1).await.unwrap();
    }
    let fetched = client
        .fetch("capped", 0, 0, i32::MAX, Duration::ZERO)
        .await
        .unwrap();
    // Each batch is over 1 500 bytes: one fits under 2 048, two do not.
    let len = fetched.records.len();
    assert!(len > 1500 && len < 2048, "{len} bytes");
    // A first batch larger than the cap still comes whole.
    let big = vec![b'y'; 5000];
    let mut b = BatchBuilder::new(1);
    b.push(None, Some(&big), 1);
    client
        .produce("capped", 0, Bytes::from(b.finish(-1, -1, -1)), -1)
        .await
        .unwrap();
    let fetched = client
        .fetch("capped", 0, 4, i32::MAX, Duration::ZERO)
        .await
        .unwrap();
    assert!(fetched.records.len() > 5000, "{}", fetched.records.len());
    // Across partitions, only the first with data may overshoot: a second partition whose next
    // batch does not fit in what is left gets no records (not an oversized response).
    client
        .create_topic("capped2", 2, 1, &BTreeMap::new())
        .await
        .unwrap();
    for partition in 0..2 {
        let mut b = BatchBuilder::new(1);
        b.push(None, Some(&value), 1);
        let batch = Bytes::from(b.finish(-1, -1, -1));
        client
            .produce("capped2", partition, batch, -1)
            .await
            .unwrap();
    }
    {
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
        let partitions = (0..2)
            .map(|p| {
                FetchPartition::default()
                    .with_partition(p)
                    .with_partition_max_bytes(1 << 20)
            })
            .collect();
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_bytes(2048)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName("capped2".to_string().into()))
                .with_partitions(partitions)]);
        let response = client.connection().call(&request, 12).await.unwrap();
        let sizes: Vec<usize> = response.responses[0]
            .partitions
            .iter()
            .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
            .collect();
        assert!(sizes[0] > 1500, "{sizes:?}");
        assert_eq!(sizes[1], 0, "{sizes:?}");
        assert!(sizes.iter().sum::<usize>() <= 2048, "{sizes:?}");
    }
    running.broker.shutdown().await.unwrap();
}
