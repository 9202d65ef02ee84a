//! Fetch from follower (KIP-392) on three in-process nodes, each in its own rack
//! (`broker.rack=RACK<id>`, `replica.selector.class` = Kafka's rack-aware selector, as
//! librdkafka's test cluster runs them): the leader sends a consumer in a follower's rack to
//! that follower with `preferred_read_replica` and no records; the follower serves every
//! acknowledged record, never one past the leader's high watermark, while producers keep
//! writing; its long poll wakes when its high watermark moves; its epoch checks, out-of-range
//! answer and the leader-only rule for pre-v11 consumers hold. DeleteRecords goes to the leader
//! alone (a follower refuses it and keeps its log start); the leader answers once every
//! follower has adopted its new log start (the low watermark), so a follower no longer serves
//! the deleted records.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{DeleteRecordsRequest, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use weir::broker::{Broker, RunningBroker};
use weir::client::connection::Connection;
use weir::client::Client;
use weir::config::{ServerConfig, RACK_AWARE_SELECTOR};
use weir::io::Io;

mod common;

use common::{free_port, wait_for, wait_listening, CLUSTER_ID};

const NODES: usize = 3;
const TOPIC: &str = "racked";
/// Records produced while the consumer reads from the follower.
const RECORDS: usize = 300;

fn leader_of(broker: &Broker) -> Option<(i32, i32)> {
    let image = broker.image();
    let topic = image.topic(TOPIC)?;
    let p = image.partition(topic.id, 0)?;
    (p.leader >= 0).then_some((p.leader, p.leader_epoch))
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

/// A consumer's Fetch (replica id -1) of partition 0 at `offset`, from `rack`.
fn consumer_fetch(
    topic_id: uuid::Uuid,
    rack: &str,
    leader_epoch: i32,
    offset: i64,
    max_wait_ms: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_rack_id(rack.to_string().into())
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_topic(weir_topic_name())
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(leader_epoch)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

fn weir_topic_name() -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(TOPIC.to_string().into())
}

async fn fetch(conn: &mut Connection, req: &FetchRequest, version: i16) -> PartitionData {
    let mut r = conn.call(req, version).await.unwrap();
    r.responses.remove(0).partitions.remove(0)
}

/// (offset after the last batch, bytes) of the whole batches in `records`.
fn batches(records: &[u8]) -> Vec<(i64, i64, &[u8])> {
    weir::log::batch::iter(records)
        .map(|item| {
            let (at, h) = item.unwrap();
            (
                h.base_offset,
                h.next_offset(),
                &records[at..at + h.total_len()],
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_in_a_followers_rack_reads_every_acked_record_from_it() {
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
    let mut nodes: Vec<RunningBroker> = Vec::new();
    for c in &configs {
        nodes.push(Broker::start(c.clone(), Io::os()).await.unwrap());
    }
    wait_for("three unfenced brokers", Duration::from_secs(20), || {
        nodes
            .iter()
            .all(|n| n.broker.image().live_brokers().count() == NODES)
            .then_some(())
    })
    .await;
    let addrs: Vec<_> = nodes.iter().map(|n| n.local_addr).collect();
    wait_listening(&addrs).await;
    // Registration carries each broker's rack into the image (and so into Metadata).
    for n in &nodes {
        let image = n.broker.image();
        for id in 1..=NODES as i32 {
            assert_eq!(
                image.broker(id).unwrap().rack.as_deref(),
                Some(format!("RACK{id}").as_str())
            );
        }
    }
    let start = Instant::now();
    loop {
        let mut c = Client::connect(&io, nodes[0].local_addr).await.unwrap();
        match c
            .create_topic(TOPIC, 1, NODES as i16, &BTreeMap::new())
            .await
        {
            Ok(()) => break,
            Err(e) => {
                assert!(start.elapsed() < Duration::from_secs(20), "create: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    let (leader_id, epoch) = wait_for("a leader on every node", Duration::from_secs(10), || {
        let seen: Vec<_> = nodes.iter().map(|n| leader_of(&n.broker)).collect();
        let all_open = nodes.iter().all(|n| n.broker.partition(TOPIC, 0).is_some());
        (all_open && seen.iter().all(|s| s.is_some() && *s == seen[0])).then(|| seen[0].unwrap())
    })
    .await;
    let leader = &nodes[(leader_id - 1) as usize];
    let follower_id = (1..=NODES as i32).find(|&i| i != leader_id).unwrap();
    let follower = &nodes[(follower_id - 1) as usize];
    let topic_id = leader.broker.image().topic(TOPIC).unwrap().id;
    let rack = format!("RACK{follower_id}");
    let leader_hw = || {
        leader
            .broker
            .partition(TOPIC, 0)
            .map_or(-1, |h| h.lock().high_watermark())
    };

    // Some records first, so that the followers have fetched and are known to hold them.
    let mut producer = Client::connect(&io, leader.local_addr).await.unwrap();
    for i in 0..10 {
        assert_eq!(
            producer.produce(TOPIC, 0, record(i), -1).await.unwrap(),
            Some(i as i64)
        );
    }
    wait_for("the followers to catch up", Duration::from_secs(10), || {
        nodes
            .iter()
            .all(|n| {
                n.broker
                    .partition(TOPIC, 0)
                    .is_some_and(|h| h.lock().high_watermark() == 10)
            })
            .then_some(())
    })
    .await;

    // DeleteRecords at a follower (a client with stale metadata): refused, nothing moves.
    let mut at_follower = Connection::connect(&io, follower.local_addr, "admin")
        .await
        .unwrap();
    let delete = DeleteRecordsRequest::default()
        .with_timeout_ms(1000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(5)])]);
    let answer = at_follower.call(&delete, 2).await.unwrap();
    assert_eq!(
        answer.topics[0].partitions[0].error_code,
        ResponseError::NotLeaderOrFollower.code()
    );
    let follower_start = follower
        .broker
        .partition(TOPIC, 0)
        .map(|h| h.lock().log_start_offset());
    assert_eq!(
        follower_start,
        Some(0),
        "a follower's log start moved alone"
    );

    // The leader points a consumer in the follower's rack at the follower, with no records.
    let mut at_leader = Connection::connect(&io, leader.local_addr, "c")
        .await
        .unwrap();
    let redirect =
        wait_for_async(&mut at_leader, consumer_fetch(topic_id, &rack, epoch, 0, 0)).await;
    assert_eq!(redirect.error_code, 0);
    assert_eq!(redirect.preferred_read_replica.0, follower_id);
    assert!(redirect.records.as_ref().is_none_or(|r| r.is_empty()));
    assert_eq!(redirect.high_watermark, 10);
    // A consumer in the leader's rack, or with no rack, reads at the leader.
    let own_rack = format!("RACK{leader_id}");
    for r in [own_rack.as_str(), ""] {
        let here = fetch(
            &mut at_leader,
            &consumer_fetch(topic_id, r, epoch, 0, 0),
            12,
        )
        .await;
        assert_eq!(here.preferred_read_replica.0, -1);
        assert!(!batches(here.records.as_deref().unwrap()).is_empty());
    }
    // Before v11 there is no rack and no redirection.
    let old = fetch(
        &mut at_leader,
        &consumer_fetch(topic_id, &rack, epoch, 0, 0),
        10,
    )
    .await;
    assert_eq!(old.preferred_read_replica.0, -1);

    // Produce while the consumer reads from the follower: every batch it is served is below
    // the high watermark of the answer and below the leader's (committed everywhere that
    // counts), and it ends up with every acknowledged record, byte for byte as the leader has
    // them.
    let leader_addr = leader.local_addr;
    let producing = tokio::spawn(async move {
        let mut producer = Client::connect(&Io::os(), leader_addr).await.unwrap();
        let mut acked = Vec::new();
        for i in 10..RECORDS {
            match producer.produce(TOPIC, 0, record(i), -1).await {
                Ok(Some(offset)) => acked.push(offset),
                other => panic!("produce {i}: {other:?}"),
            }
        }
        acked
    });
    let mut at_follower = Connection::connect(&io, follower.local_addr, "c")
        .await
        .unwrap();
    let mut served: Vec<u8> = Vec::new();
    let mut offset = 0;
    let mut answers = 0;
    let start = Instant::now();
    while offset < RECORDS as i64 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "read {offset} of {RECORDS} from the follower"
        );
        let got = fetch(
            &mut at_follower,
            &consumer_fetch(topic_id, &rack, epoch, offset, 200),
            12,
        )
        .await;
        answers += 1;
        assert_eq!(got.error_code, 0, "follower fetch at {offset}");
        assert_eq!(
            got.preferred_read_replica.0, -1,
            "a follower never redirects"
        );
        let committed = leader_hw();
        for (base, next, bytes) in batches(got.records.as_deref().unwrap_or_default()) {
            assert!(
                next <= got.high_watermark,
                "batch {base}..{next} served past the follower's high watermark {}",
                got.high_watermark
            );
            assert!(
                next <= committed,
                "batch {base}..{next} served past the leader's high watermark {committed}"
            );
            if next > offset {
                served.extend_from_slice(bytes);
                offset = next;
            }
        }
    }
    let acked = producing.await.unwrap();
    assert_eq!(acked, (10..RECORDS as i64).collect::<Vec<_>>());
    let reference = {
        let h = leader.broker.partition(TOPIC, 0).unwrap();
        let p = h.lock();
        let mut all = Vec::new();
        let mut at = 0;
        while at < RECORDS as i64 {
            let data = p.log().read(at, 1 << 20, i64::MAX).unwrap();
            for (_, next, bytes) in batches(&data) {
                all.extend_from_slice(bytes);
                at = next;
            }
        }
        all
    };
    assert_eq!(
        served, reference,
        "the follower served the leader's batches"
    );
    println!(
        "{RECORDS} records read from follower {follower_id} in {answers} fetches, {:?}",
        start.elapsed()
    );

    // A long poll at the follower wakes when its high watermark passes the offset.
    let end = RECORDS as i64;
    let waiting = {
        let addr = follower.local_addr;
        let req = consumer_fetch(topic_id, &rack, epoch, end, 10_000);
        tokio::spawn(async move {
            let mut conn = Connection::connect(&Io::os(), addr, "c").await.unwrap();
            let t = Instant::now();
            let got = fetch(&mut conn, &req, 12).await;
            (got, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "nothing to read yet: the fetch waits"
    );
    assert_eq!(
        producer
            .produce(TOPIC, 0, record(RECORDS), -1)
            .await
            .unwrap(),
        Some(end)
    );
    let (woken, waited) = waiting.await.unwrap();
    assert_eq!(woken.error_code, 0);
    let got = batches(woken.records.as_deref().unwrap());
    assert_eq!(got.first().map(|b| (b.0, b.1)), Some((end, end + 1)));
    assert!(
        waited < Duration::from_secs(5),
        "woken by the high watermark, not the deadline: {waited:?}"
    );

    // The follower checks the consumer's leader epoch against its own.
    let c = &mut at_follower;
    let req = |e: i32, off: i64| consumer_fetch(topic_id, &rack, e, off, 0);
    // (A new topic's first epoch is 0, and -1 means "not sent": the fenced answer needs a
    // later epoch; the unit test `a_follower_checks_a_consumer_read_against_its_own_epoch`
    // covers it.)
    if epoch > 0 {
        assert_eq!(
            fetch(c, &req(epoch - 1, 0), 12).await.error_code,
            ResponseError::FencedLeaderEpoch.code()
        );
    }
    assert_eq!(
        fetch(c, &req(epoch + 1, 0), 12).await.error_code,
        ResponseError::UnknownLeaderEpoch.code()
    );
    // Past its log end: out of range, with no offsets (the consumer goes back to the leader).
    let past = fetch(c, &req(epoch, end + 1_000), 12).await;
    assert_eq!(past.error_code, ResponseError::OffsetOutOfRange.code());
    assert_eq!(past.high_watermark, -1);
    // A consumer without client metadata (before v11) must still go to the leader.
    assert_eq!(
        fetch(c, &req(epoch, 0), 10).await.error_code,
        ResponseError::NotLeaderOrFollower.code()
    );

    // DeleteRecords at the leader: answered once every follower's log start is there too.
    let mut admin = Connection::connect(&io, leader.local_addr, "admin")
        .await
        .unwrap();
    let answer = admin
        .call(&delete.clone().with_timeout_ms(10_000), 2)
        .await
        .unwrap();
    let p = &answer.topics[0].partitions[0];
    assert_eq!((p.error_code, p.low_watermark), (0, 5));
    for (i, n) in nodes.iter().enumerate() {
        let start = n
            .broker
            .partition(TOPIC, 0)
            .map(|h| h.lock().log_start_offset());
        assert_eq!(start, Some(5), "node {}'s log start", i + 1);
    }
    let below = fetch(&mut at_follower, &req(epoch, 0), 12).await;
    assert_eq!(below.error_code, ResponseError::OffsetOutOfRange.code());

    for n in &nodes {
        n.broker.halt();
    }
    for c in &configs {
        let _ = std::fs::remove_dir_all(&c.log_dirs[0]);
    }
}

/// The leader's first answer once it has seen the followers fetch past offset 0 (a fresh
/// leader may not know yet): retried briefly until it redirects.
async fn wait_for_async(conn: &mut Connection, req: FetchRequest) -> PartitionData {
    let start = Instant::now();
    loop {
        let got = fetch(conn, &req, 12).await;
        if got.preferred_read_replica.0 >= 0 || start.elapsed() > Duration::from_secs(10) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("fff", name)
}

fn config(
    id: usize,
    dir: &std::path::Path,
    controller_ports: &[u16],
    client_port: u16,
) -> ServerConfig {
    let rack = format!("RACK{id}");
    common::combined_config(
        id,
        dir,
        controller_ports,
        client_port,
        &[
            ("broker.rack", rack.as_str()),
            ("replica.selector.class", RACK_AWARE_SELECTOR),
            ("min.insync.replicas", "1"),
        ],
    )
}
