//! Client quotas end to end on a single broker over `MemDisk`: AlterClientQuotas validates
//! and stores quotas (metadata records, so they survive a restart), DescribeClientQuotas
//! filters them, and a client over its quota is answered with `throttle_time_ms` and muted:
//! its next request is read only once the throttle has passed (KIP-219). A throttled Fetch
//! comes back without records.

mod common;

use common::memdisk_io as io;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::{AlterClientQuotasRequest, FetchRequest};
use kafka_protocol::protocol::StrBytes;
use weir::broker::{Broker, RunningBroker};
use weir::client::{produce_request, Client, QuotaMatch, FETCH_VERSION, PRODUCE_VERSION};
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::Io;
use weir::log::batch::BatchBuilder;

async fn start(io: &Io) -> RunningBroker {
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        // A span of 1 s: a request of 1.2 × the quota is throttled about 200 ms.
        ("quota.window.num".to_string(), "2".to_string()),
        ("quota.window.size.seconds".to_string(), "1".to_string()),
    ]);
    let config = ServerConfig::from_properties(&props).unwrap().0;
    Broker::start(config, io.clone()).await.unwrap()
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn batch(bytes: usize) -> Bytes {
    let mut b = BatchBuilder::new(1_000);
    b.push(None, Some(&vec![b'x'; bytes]), 1_000);
    Bytes::from(b.finish(-1, -1, -1))
}

fn default_client() -> Vec<(String, Option<String>)> {
    vec![("client-id".to_string(), None)]
}

#[tokio::test]
async fn quotas_are_validated_stored_and_survive_a_restart() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let running = start(&io).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let entity = |t: &str, n: Option<&str>| {
        EntityData::default()
            .with_entity_type(s(t))
            .with_entity_name(n.map(s))
    };
    let op = |k: &str, v: f64| OpData::default().with_key(s(k)).with_value(v);
    let request = AlterClientQuotasRequest::default().with_entries(vec![
        EntryData::default()
            .with_entity(vec![entity("user", Some("alice"))])
            .with_ops(vec![op("producer_byte_rate", 1024.0)]),
        EntryData::default()
            .with_entity(vec![entity("user", Some("bob"))])
            .with_ops(vec![op("producer_byte_rate", -1.0)]),
        EntryData::default()
            .with_entity(vec![entity("topic", Some("t"))])
            .with_ops(vec![op("producer_byte_rate", 1.0)]),
    ]);
    let response = client.connection().call(&request, 1).await.unwrap();
    let codes: Vec<i16> = response.entries.iter().map(|e| e.error_code).collect();
    let invalid = ResponseError::InvalidRequest.code();
    assert_eq!(codes, vec![0, invalid, invalid]);
    assert_eq!(
        response.entries[1].entity[0].entity_name.as_deref(),
        Some("bob")
    );
    running.broker.shutdown().await.unwrap();

    let running = start(&io).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let found = client
        .describe_client_quotas(&[("user".into(), QuotaMatch::Any)], false)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].0,
        vec![("user".to_string(), Some("alice".to_string()))]
    );
    assert_eq!(found[0].1["producer_byte_rate"], 1024.0);
    let refused = client
        .describe_client_quotas(&[("nonsense".into(), QuotaMatch::Any)], false)
        .await;
    assert!(refused.is_err(), "{refused:?}");
    running.broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_producer_over_its_quota_is_throttled_and_muted_and_a_fetch_comes_back_empty() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let running = start(&io).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client.set_timeout(Duration::from_secs(10));
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    // Within no quota: not throttled.
    let request = produce_request("t", &[(0, batch(12_000))], 1, Duration::from_secs(5));
    let answer = client
        .connection()
        .call(&request, PRODUCE_VERSION)
        .await
        .unwrap();
    assert_eq!(answer.throttle_time_ms, 0);

    let quota = BTreeMap::from([
        ("producer_byte_rate".to_string(), Some(10_000.0)),
        ("consumer_byte_rate".to_string(), Some(20_000.0)),
    ]);
    client
        .alter_client_quotas(&default_client(), &quota)
        .await
        .unwrap();
    let answer = client
        .connection()
        .call(&request, PRODUCE_VERSION)
        .await
        .unwrap();
    let throttle = answer.throttle_time_ms;
    // ~12 100 request bytes over 1 s against 10 000/s: about 210 ms.
    assert!((150..400).contains(&throttle), "throttle {throttle} ms");
    // The next request is read only after the throttle (a lower bound only: never flaky).
    let answered_at = Instant::now();
    client.metadata(None).await.unwrap();
    assert!(
        answered_at.elapsed() >= Duration::from_millis(throttle as u64 - 20),
        "answered {:?} into a {throttle} ms mute",
        answered_at.elapsed()
    );

    // 24 KB fetched against 20 000/s: throttled (about 210 ms), so sent without records.
    let fetch = FetchRequest::default()
        .with_replica_id(weir_broker_id(-1))
        .with_max_bytes(1 << 20)
        .with_max_wait_ms(0)
        .with_topics(vec![
            kafka_protocol::messages::fetch_request::FetchTopic::default()
                .with_topic(kafka_protocol::messages::TopicName(s("t")))
                .with_partitions(vec![
                    kafka_protocol::messages::fetch_request::FetchPartition::default()
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let answer = client
        .connection()
        .call(&fetch, FETCH_VERSION)
        .await
        .unwrap();
    assert!(answer.throttle_time_ms > 0);
    let p = &answer.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, 2);
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));

    // Quotas removed: nothing is throttled any more.
    let removed = quota.keys().map(|k| (k.clone(), None)).collect();
    client
        .alter_client_quotas(&default_client(), &removed)
        .await
        .unwrap();
    let answer = client
        .connection()
        .call(&fetch, FETCH_VERSION)
        .await
        .unwrap();
    assert_eq!(answer.throttle_time_ms, 0);
    assert!(answer.responses[0].partitions[0]
        .records
        .as_ref()
        .is_some_and(|r| r.len() > 20_000));
    running.broker.shutdown().await.unwrap();
}

fn weir_broker_id(id: i32) -> kafka_protocol::messages::BrokerId {
    kafka_protocol::messages::BrokerId(id)
}

#[tokio::test]
async fn connections_over_the_per_ip_limit_are_closed_at_accept() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        ("max.connections.per.ip".to_string(), "5".to_string()),
        (
            "max.connections.per.ip.overrides".to_string(),
            "127.0.0.1:2".to_string(),
        ),
    ]);
    let config = ServerConfig::from_properties(&props).unwrap().0;
    let running = Broker::start(config, io.clone()).await.unwrap();
    let first = Client::connect(&io, running.local_addr).await.unwrap();
    let _second = Client::connect(&io, running.local_addr).await.unwrap();
    assert!(
        Client::connect(&io, running.local_addr).await.is_err(),
        "a third connection from 127.0.0.1 is closed"
    );
    // A closed connection frees its slot (once the broker has seen it close).
    drop(first);
    let mut reconnected = false;
    for _ in 0..100 {
        if Client::connect(&io, running.local_addr).await.is_ok() {
            reconnected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reconnected, "the slot was never freed");
    running.broker.shutdown().await.unwrap();
}

/// A connection of its own client id (quotas set for it leave the admin client alone).
async fn connect_as(
    io: &weir::io::Io,
    running: &RunningBroker,
    client_id: &str,
) -> weir::client::Connection {
    weir::client::Connection::connect(io, running.local_addr, client_id)
        .await
        .unwrap()
}

fn client_entity(id: &str) -> Vec<(String, Option<String>)> {
    vec![("client-id".to_string(), Some(id.to_string()))]
}

#[tokio::test]
async fn a_client_over_its_request_percentage_is_throttled_at_most_one_window() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let running = start(&io).await;
    let mut admin = Client::connect(&io, running.local_addr).await.unwrap();
    // 0.0001 % of a thread: one microsecond per second, which any handler exceeds.
    let quota = BTreeMap::from([("request_percentage".to_string(), Some(0.0001))]);
    admin
        .alter_client_quotas(&client_entity("busy"), &quota)
        .await
        .unwrap();
    let mut busy = connect_as(&io, &running, "busy").await;
    let metadata = kafka_protocol::messages::MetadataRequest::default();
    let answer = busy.call(&metadata, 12).await.unwrap();
    let throttle = answer.throttle_time_ms;
    // Far over its quota, but throttled one window (1 s) at most, as Kafka bounds it.
    assert!((1..=1000).contains(&throttle), "throttle {throttle} ms");
    // Another client id has no quota.
    let other = admin.connection().call(&metadata, 12).await.unwrap();
    assert_eq!(other.throttle_time_ms, 0);
    running.broker.shutdown().await.unwrap();
}

fn create_topics(names: &[(&str, i32)]) -> kafka_protocol::messages::CreateTopicsRequest {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    kafka_protocol::messages::CreateTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(
            names
                .iter()
                .map(|(name, partitions)| {
                    CreatableTopic::default()
                        .with_name(kafka_protocol::messages::TopicName(s(name)))
                        .with_num_partitions(*partitions)
                        .with_replication_factor(1)
                })
                .collect(),
        )
}

#[tokio::test]
async fn controller_mutations_over_the_rate_are_refused_strictly_and_throttled_permissively() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let running = start(&io).await;
    let mut admin = Client::connect(&io, running.local_addr).await.unwrap();
    // 1 partition/s over 2 windows of 1 s: a burst of 2 partitions.
    let quota = BTreeMap::from([("controller_mutation_rate".to_string(), Some(1.0))]);
    admin
        .alter_client_quotas(&client_entity("mutator"), &quota)
        .await
        .unwrap();
    let mut mutator = connect_as(&io, &running, "mutator").await;
    let throttled = ResponseError::ThrottlingQuotaExceeded.code();
    // v7 is strict: `a` takes the bucket below zero (a topic is never cut), `b` is refused.
    let answer = mutator
        .call(&create_topics(&[("a", 3), ("b", 1)]), 7)
        .await
        .unwrap();
    let codes: Vec<i16> = answer.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![0, throttled], "{answer:?}");
    assert!(answer.throttle_time_ms > 0, "{answer:?}");
    // The connection is muted now; the same client id on others shares the bucket.
    // v5 is permissive: carried out, and throttled.
    let mut second = connect_as(&io, &running, "mutator").await;
    let answer = second.call(&create_topics(&[("c", 1)]), 5).await.unwrap();
    assert_eq!(answer.topics[0].error_code, 0, "{answer:?}");
    assert!(answer.throttle_time_ms > 0, "{answer:?}");
    // DeleteTopics v5 is strict too.
    let delete = kafka_protocol::messages::DeleteTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topic_names(vec![kafka_protocol::messages::TopicName(s("a"))]);
    let mut third = connect_as(&io, &running, "mutator").await;
    let answer = third.call(&delete, 5).await.unwrap();
    assert_eq!(answer.responses[0].error_code, throttled, "{answer:?}");
    // The admin client has no quota: the same deletion goes through.
    let answer = admin.connection().call(&delete, 5).await.unwrap();
    assert_eq!(answer.responses[0].error_code, 0, "{answer:?}");
    running.broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_ip_over_its_connection_creation_rate_is_closed_unserved() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let running = start(&io).await;
    let mut admin = Client::connect(&io, running.local_addr).await.unwrap();
    // The default IP: 1 connection per second over a span of at least 1 s.
    let quota = BTreeMap::from([("connection_creation_rate".to_string(), Some(1.0))]);
    admin
        .alter_client_quotas(&vec![("ip".to_string(), None)], &quota)
        .await
        .unwrap();
    let found = admin
        .describe_client_quotas(&[("ip".into(), QuotaMatch::Default)], true)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    let _first = Client::connect(&io, running.local_addr).await.unwrap();
    let second = Client::connect(&io, running.local_addr).await;
    assert!(
        second.is_err(),
        "a second connection within the second is not served"
    );
    // The admin connection, opened before, is still served.
    admin.metadata(None).await.unwrap();
    running.broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn connection_limits_change_at_run_time_and_the_creation_rate_delays_accepts() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let running = start(&io).await;
    let mut admin = Client::connect(&io, running.local_addr).await.unwrap();
    let _second = Client::connect(&io, running.local_addr).await.unwrap();
    // Cluster-wide: two connections from one address at most (both are open).
    let cluster = weir::client::ConfigResource::BrokerDefault;
    let limit = BTreeMap::from([("max.connections.per.ip".to_string(), Some("2".to_string()))]);
    admin.alter_configs(&cluster, &limit).await.unwrap();
    assert!(
        Client::connect(&io, running.local_addr).await.is_err(),
        "a third connection is refused once the dynamic limit is set"
    );
    let unset = BTreeMap::from([("max.connections.per.ip".to_string(), None)]);
    admin.alter_configs(&cluster, &unset).await.unwrap();
    // 1 connection/s: accepts beyond it wait (a lower bound only: never flaky).
    let rate = BTreeMap::from([(
        "max.connection.creation.rate".to_string(),
        Some("1".to_string()),
    )]);
    admin.alter_configs(&cluster, &rate).await.unwrap();
    let started = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(Client::connect(&io, running.local_addr).await.unwrap());
    }
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "three connections at 1/s took {:?}",
        started.elapsed()
    );
    running.broker.shutdown().await.unwrap();
}
