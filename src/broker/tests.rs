//! The broker's delayed operations end to end, over loopback TCP on an in-memory disk: acks
//! values, acks=all waits and their timeout, long polls woken by their own partitions only,
//! and waits ended by leadership loss or a closed connection.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{shared::Broker, RunningBroker};
use crate::client::{produce_request, Client, FETCH_VERSION, PRODUCE_VERSION};
use crate::config::ServerConfig;
use crate::io::memdisk::MemDisk;
use crate::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use crate::io::Io;
use crate::log::batch::BatchBuilder;

fn io() -> Io {
    Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(5)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(MemDisk::new(9)),
    }
}

async fn start(fsync_before_ack: bool) -> (RunningBroker, Io) {
    start_with(config(fsync_before_ack)).await
}

async fn start_with(config: ServerConfig) -> (RunningBroker, Io) {
    let io = io();
    (Broker::start(config, io.clone()).await.unwrap(), io)
}

fn config(fsync_before_ack: bool) -> ServerConfig {
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        (
            "weir.fsync.before.ack".to_string(),
            fsync_before_ack.to_string(),
        ),
    ]);
    ServerConfig::from_properties(&props).unwrap().0
}

fn batch(value: &str) -> Bytes {
    let mut b = BatchBuilder::new(1);
    b.push(None, Some(value.as_bytes()), 1);
    Bytes::from(b.finish(-1, -1, -1))
}

/// One produce with a chosen acks and timeout: the partition's error code and base offset.
async fn produce(
    client: &mut Client,
    topic: &str,
    partition: i32,
    acks: i16,
    timeout: Duration,
) -> (i16, i64) {
    let request = produce_request(topic, &[(partition, batch("v"))], acks, timeout);
    let response = client
        .connection()
        .call(&request, PRODUCE_VERSION)
        .await
        .unwrap();
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// A consumer fetch of `partitions` of `topic` at offset 0, waiting up to `max_wait` for a
/// byte: the partitions that returned records.
fn long_poll(topic: &str, partitions: &[i32], max_wait: Duration) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait.as_millis() as i32)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )])
}

/// Waits (bounded) until `f` holds.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_must_be_0_1_or_all_and_min_insync_replicas_guards_acks_all() {
    let (running, io) = start(false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let second = Duration::from_secs(5);
    for acks in [2, -2, 5] {
        let (code, _) = produce(&mut client, "t", 0, acks, second).await;
        assert_eq!(
            code,
            ResponseError::InvalidRequiredAcks.code(),
            "acks={acks}"
        );
    }
    assert_eq!(produce(&mut client, "t", 0, 1, second).await, (0, 0));
    assert_eq!(produce(&mut client, "t", 0, -1, second).await, (0, 1));
    assert_eq!(client.produce("t", 0, batch("x"), 0).await.unwrap(), None);
    eventually("the acks=0 record is appended", || {
        running
            .broker
            .partition("t", 0)
            .unwrap()
            .lock()
            .log_end_offset()
            == 3
    })
    .await;

    // One replica cannot satisfy min.insync.replicas=2: acks=all is refused before anything is
    // appended; acks=1 is not held to it.
    let configs = BTreeMap::from([("min.insync.replicas".to_string(), "2".to_string())]);
    client.create_topic("strict", 1, 1, &configs).await.unwrap();
    let (code, _) = produce(&mut client, "strict", 0, -1, second).await;
    assert_eq!(code, ResponseError::NotEnoughReplicas.code());
    assert_eq!(produce(&mut client, "strict", 0, 1, second).await, (0, 0));
    let handle = running.broker.partition("strict", 0).unwrap();
    assert_eq!(handle.lock().log_end_offset(), 1);
    assert_eq!(running.broker.wait_budget.used(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_waits_for_the_high_watermark_and_times_out_at_the_request_timeout() {
    let (running, io) = start(true).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let handle = running.broker.partition("t", 0).unwrap();
    // In durable mode the fsync moves the high watermark: holding the partition's fsync gate
    // holds the high watermark.
    let gate = handle.flush_gate.lock().await;
    let started = io.clock.monotonic();
    let (code, _) = produce(&mut client, "t", 0, -1, Duration::from_millis(200)).await;
    assert_eq!(code, ResponseError::RequestTimedOut.code());
    assert!((io.clock.monotonic() - started) >= Duration::from_millis(200));
    assert_eq!(
        handle.waiters.counts().produce,
        0,
        "the timed-out waiter left"
    );
    // The record was appended (an error after the append is indeterminate, as in Kafka) and
    // becomes visible once the fsync is done.
    assert_eq!(handle.lock().high_watermark(), 0);
    drop(gate);
    eventually("the fsync moves the high watermark", || {
        handle.lock().high_watermark() == 1
    })
    .await;

    // Released while the produce waits: answered as soon as the fsync lands.
    let gate = handle.flush_gate.lock().await;
    let waiting = {
        let io = io.clone();
        let addr = running.local_addr;
        tokio::spawn(async move {
            let mut client = Client::connect(&io, addr).await.unwrap();
            produce(&mut client, "t", 0, -1, Duration::from_secs(10)).await
        })
    };
    eventually("the produce waits", || handle.waiters.counts().produce == 1).await;
    let released = io.clock.monotonic();
    drop(gate);
    assert_eq!(waiting.await.unwrap(), (0, 1));
    assert!((io.clock.monotonic() - released) < Duration::from_secs(5));
    assert_eq!(running.broker.wait_budget.used(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_acks_all_produce_fails_when_leadership_is_lost() {
    let (running, io) = start(true).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let handle = running.broker.partition("t", 0).unwrap();
    let gate = handle.flush_gate.lock().await;
    let waiting = {
        let io = io.clone();
        let addr = running.local_addr;
        tokio::spawn(async move {
            let mut client = Client::connect(&io, addr).await.unwrap();
            produce(&mut client, "t", 0, -1, Duration::from_secs(10))
                .await
                .0
        })
    };
    eventually("the produce waits", || handle.waiters.counts().produce == 1).await;
    handle.leadership_lost();
    assert_eq!(
        waiting.await.unwrap(),
        ResponseError::NotLeaderOrFollower.code()
    );
    drop(gate);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_is_woken_by_a_produce_to_its_partition_and_not_by_another() {
    let (running, io) = start(false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 2, 1, &BTreeMap::new())
        .await
        .unwrap();
    let (p0, p1) = (
        running.broker.partition("t", 0).unwrap(),
        running.broker.partition("t", 1).unwrap(),
    );
    let max_wait = Duration::from_secs(5);
    let polling = {
        let io = io.clone();
        let addr = running.local_addr;
        tokio::spawn(async move {
            let mut consumer = Client::connect(&io, addr).await.unwrap();
            let started = io.clock.monotonic();
            let response = consumer
                .connection()
                .call(&long_poll("t", &[0], max_wait), FETCH_VERSION)
                .await
                .unwrap();
            let records = response.responses[0].partitions[0]
                .records
                .clone()
                .unwrap_or_default();
            (records.len(), (io.clock.monotonic() - started))
        })
    };
    eventually("the fetch waits on partition 0", || {
        p0.waiters.counts().fetch == 1
    })
    .await;
    assert_eq!(produce(&mut client, "t", 1, 1, max_wait).await.0, 0);
    assert_eq!(
        p0.waiters.counts().fetch_wakes,
        0,
        "partition 1's append left it asleep"
    );
    assert_eq!(p1.waiters.counts().fetch_wakes, 0);
    assert!(!polling.is_finished());
    assert_eq!(produce(&mut client, "t", 0, 1, max_wait).await.0, 0);
    let (bytes, waited) = polling.await.unwrap();
    assert!(bytes > 0, "the record of partition 0 is returned");
    assert!(waited < max_wait, "woken, not timed out: {waited:?}");
    assert_eq!(p0.waiters.counts().fetch, 0);
    assert_eq!(running.broker.wait_budget.used(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_partition_long_poll_is_woken_by_any_of_its_partitions() {
    let (running, io) = start(false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 3, 1, &BTreeMap::new())
        .await
        .unwrap();
    let max_wait = Duration::from_secs(5);
    let polling = {
        let io = io.clone();
        let addr = running.local_addr;
        tokio::spawn(async move {
            let mut consumer = Client::connect(&io, addr).await.unwrap();
            let started = io.clock.monotonic();
            let response = consumer
                .connection()
                .call(&long_poll("t", &[0, 1, 2], max_wait), FETCH_VERSION)
                .await
                .unwrap();
            let with_data: Vec<i32> = response.responses[0]
                .partitions
                .iter()
                .filter(|p| p.records.as_ref().is_some_and(|r| !r.is_empty()))
                .map(|p| p.partition_index)
                .collect();
            (with_data, (io.clock.monotonic() - started))
        })
    };
    let p2 = running.broker.partition("t", 2).unwrap();
    eventually("the fetch waits on every partition", || {
        (0..3).all(|p| {
            running
                .broker
                .partition("t", p)
                .unwrap()
                .waiters
                .counts()
                .fetch
                == 1
        })
    })
    .await;
    assert_eq!(produce(&mut client, "t", 2, 1, max_wait).await.0, 0);
    let (with_data, waited) = polling.await.unwrap();
    assert_eq!(with_data, vec![2]);
    assert!(waited < max_wait, "{waited:?}");
    assert_eq!(p2.waiters.counts().fetch, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_without_data_is_answered_at_max_wait() {
    let (running, io) = start(false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let started = io.clock.monotonic();
    let fetched = client
        .fetch("t", 0, 0, 1 << 20, Duration::from_millis(150))
        .await
        .unwrap();
    assert!(fetched.records.is_empty());
    assert!((io.clock.monotonic() - started) >= Duration::from_millis(150));
    assert_eq!(running.broker.wait_budget.used(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_ends_its_long_poll() {
    let (running, io) = start(false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let p0 = running.broker.partition("t", 0).unwrap();
    let mut consumer = Client::connect(&io, running.local_addr).await.unwrap();
    consumer
        .connection()
        .send(
            &long_poll("t", &[0], Duration::from_secs(30)),
            FETCH_VERSION,
        )
        .await
        .unwrap();
    eventually("the fetch waits", || p0.waiters.counts().fetch == 1).await;
    drop(consumer);
    eventually("the waiter leaves with its connection", || {
        p0.waiters.counts().fetch == 0
    })
    .await;
    assert_eq!(running.broker.wait_budget.used(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_topic_ends_its_waits() {
    let (running, io) = start(true).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let handle = running.broker.partition("t", 0).unwrap();
    let polling = {
        let io = io.clone();
        let addr = running.local_addr;
        tokio::spawn(async move {
            let mut consumer = Client::connect(&io, addr).await.unwrap();
            let started = io.clock.monotonic();
            let response = consumer
                .connection()
                .call(
                    &long_poll("t", &[0], Duration::from_secs(20)),
                    FETCH_VERSION,
                )
                .await
                .unwrap();
            (
                response.responses[0].partitions[0].error_code,
                (io.clock.monotonic() - started),
            )
        })
    };
    eventually("the fetch waits", || handle.waiters.counts().fetch == 1).await;
    client.delete_topic("t").await.unwrap();
    let (code, waited) = polling.await.unwrap();
    assert_eq!(code, ResponseError::UnknownTopicOrPartition.code());
    assert!(waited < Duration::from_secs(20), "{waited:?}");
}

/// A commit that reaches its coordinator while the group's offsets partition loads (just
/// created by FindCoordinator; the load stalled 200..2000 ms by the fault point
/// `coordinator_load_stall`) is held until the load finishes and succeeds, instead of being
/// answered COORDINATOR_LOAD_IN_PROGRESS, which librdkafka retries twice only (~300 ms) before
/// a synchronous `commit()` fails in the application.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_during_the_offsets_partitions_load_waits_for_it() {
    let mut config = config(false);
    config.fault_points.coordinator_load_stall = 1.0;
    let (running, io) = start_with(config).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let group = "held-group";
    let mut found = false;
    for _ in 0..200 {
        match client.find_coordinator(group).await {
            Ok(()) => {
                found = true;
                break;
            }
            Err(e) if e.is_retriable() => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(e) => panic!("FindCoordinator: {e}"),
        }
    }
    assert!(found, "FindCoordinator never named a coordinator");
    let loading = |b: &Broker| b.groups.read(|c| c.load_in_progress(group));
    assert!(
        loading(&running.broker),
        "the group's partition is still loading (stalled at least 200 ms)"
    );
    client.commit_offsets(group, "t", &[(0, 7)]).await.unwrap();
    assert!(!loading(&running.broker));
    assert_eq!(
        client
            .committed_offsets(group, Some(("t", &[0])))
            .await
            .unwrap(),
        vec![("t".to_string(), 0, 7)]
    );
}
