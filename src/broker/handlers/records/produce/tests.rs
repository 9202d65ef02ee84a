//! The produce path on a replicated partition: one real broker (node 1) whose image also names
//! broker 2 (records committed through its own store, as the quorum delivers them). Broker 2
//! never fetches by itself; the tests stand in for it with `Partition::follower_fetched`, and
//! move the ISR and the leadership with PartitionChange records. Each acks error code of the
//! leader side: REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS (effective minimum capped at the
//! replication factor), NOT_LEADER_OR_FOLLOWER when leadership moves during the wait,
//! INVALID_REQUIRED_ACKS; and acks=1 answered after the leader's append alone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use crate::broker::{shared::Broker, RunningBroker};
use crate::client::{Client, ClientError};
use crate::config::ServerConfig;
use crate::controller::{BrokerEndpoint, MetadataRecord, NewTopic, PartitionChange};
use crate::io::memdisk::MemDisk;
use crate::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use crate::io::Io;
use crate::log::batch::BatchBuilder;

fn io(disk: &MemDisk) -> Io {
    Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(5)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(disk.clone()),
    }
}

async fn commit(broker: &Broker, records: Vec<MetadataRecord>) {
    broker
        .change_metadata(false, |_, _| Ok((records, ())))
        .await
        .unwrap();
}

/// Broker 1 running, broker 2 registered and unfenced in its image (epoch returned).
async fn start_with_peer(io: &Io) -> (RunningBroker, i64) {
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        ("node.id".to_string(), "1".to_string()),
    ]);
    let config = ServerConfig::from_properties(&props).unwrap().0;
    let running = Broker::start(config, io.clone()).await.unwrap();
    let broker = running.broker.clone();
    commit(
        &broker,
        vec![MetadataRecord::RegisterBroker {
            log_dirs: Vec::new(),
            id: 2,
            incarnation: Uuid::from_u128(2),
            listeners: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9999,
            }],
            rack: None,
            fenced: true,
        }],
    )
    .await;
    let epoch = broker.image().broker(2).unwrap().epoch;
    commit(
        &broker,
        vec![MetadataRecord::BrokerChange {
            id: 2,
            epoch,
            fenced: Some(false),
            in_controlled_shutdown: None,
        }],
    )
    .await;
    (running, epoch)
}

/// A one-partition topic on brokers 1 (leader) and 2, ISR both.
async fn create(broker: &Broker, name: &str, min_isr: i32) {
    let new = NewTopic {
        name: name.into(),
        partitions: -1,
        replication_factor: -1,
        assignments: vec![vec![1, 2]],
        configs: BTreeMap::from([("min.insync.replicas".to_string(), min_isr.to_string())]),
    };
    broker.create_topic(new, false).await.unwrap();
    let p = broker.partition(name, 0).unwrap();
    assert_eq!(p.lock().isr_size(), 2, "the leader took the image's ISR");
}

fn batch() -> bytes::Bytes {
    let mut b = BatchBuilder::new(1_000);
    b.push(None, Some(b"v"), 1_000);
    bytes::Bytes::from(b.finish(-1, -1, -1))
}

async fn client(running: &RunningBroker, io: &Io, timeout: Duration) -> Client {
    let mut c = Client::connect(io, running.local_addr).await.unwrap();
    c.set_timeout(timeout);
    c
}

fn code(result: Result<Option<i64>, ClientError>) -> Result<i64, ResponseError> {
    match result {
        Ok(offset) => Ok(offset.unwrap_or(-1)),
        Err(ClientError::Kafka(code, _)) => Err(code),
        Err(other) => panic!("not a Kafka answer: {other:?}"),
    }
}

/// Stands in for broker 2's fetch at the leader's log end.
fn follower_caught_up(broker: &Broker, topic: &str, epoch: i64) {
    let handle = broker.partition(topic, 0).unwrap();
    let mut p = handle.lock();
    let end = p.log_end_offset();
    let now = broker.io.clock.wall_ms();
    p.follower_fetched(2, end, 0, epoch, now).unwrap();
}

async fn wait_for_end(broker: &Broker, topic: &str, end: i64) {
    for _ in 0..500 {
        if broker.partition(topic, 0).unwrap().lock().log_end_offset() >= end {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the produce was never appended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_waits_for_the_follower_acks_1_does_not() {
    let disk = MemDisk::new(21);
    let io = io(&disk);
    let (running, epoch) = start_with_peer(&io).await;
    let broker = running.broker.clone();
    create(&broker, "r", 2).await;
    // The follower never fetched: appended, but not replicated within the request's timeout.
    let mut c = client(&running, &io, Duration::from_secs(5)).await;
    let request =
        crate::client::produce_request("r", &[(0, batch())], -1, Duration::from_millis(200));
    let response = c
        .connection()
        .call(&request, crate::client::PRODUCE_VERSION)
        .await
        .unwrap();
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ResponseError::RequestTimedOut.code());
    assert_eq!(broker.partition("r", 0).unwrap().lock().log_end_offset(), 1);
    // acks=1: answered after the leader's append, the follower still behind.
    assert_eq!(code(c.produce("r", 0, batch(), 1).await), Ok(1));
    assert_eq!(broker.partition("r", 0).unwrap().lock().high_watermark(), 0);
    // acks=all is answered once the follower has fetched past it, not before.
    let waiting = {
        let running_addr = running.local_addr;
        let io = io.clone();
        tokio::spawn(async move {
            let mut c = Client::connect(&io, running_addr).await.unwrap();
            c.set_timeout(Duration::from_secs(10));
            code(c.produce("r", 0, batch(), -1).await)
        })
    };
    wait_for_end(&broker, "r", 3).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiting.is_finished(),
        "answered before the follower fetched"
    );
    follower_caught_up(&broker, "r", epoch);
    assert_eq!(waiting.await.unwrap(), Ok(2));
    assert_eq!(broker.partition("r", 0).unwrap().lock().high_watermark(), 3);
    // Bad acks are refused whatever the replication.
    assert_eq!(
        code(c.produce("r", 0, batch(), 2).await),
        Err(ResponseError::InvalidRequiredAcks)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_min_isr_acks_all_is_refused_before_the_append() {
    let disk = MemDisk::new(22);
    let io = io(&disk);
    let (running, epoch) = start_with_peer(&io).await;
    let broker = running.broker.clone();
    create(&broker, "m", 2).await;
    // The controller drops broker 2 from the ISR: {1} is below min.insync.replicas=2.
    let id = broker.image().topic("m").unwrap().id;
    let mut shrink = PartitionChange::new(id, 0);
    shrink.isr = Some(vec![1]);
    commit(&broker, vec![MetadataRecord::PartitionChange(shrink)]).await;
    assert_eq!(broker.partition("m", 0).unwrap().lock().isr_size(), 1);
    let mut c = client(&running, &io, Duration::from_secs(5)).await;
    assert_eq!(
        code(c.produce("m", 0, batch(), -1).await),
        Err(ResponseError::NotEnoughReplicas)
    );
    assert_eq!(broker.partition("m", 0).unwrap().lock().log_end_offset(), 0);
    // acks=1 is not held to it; the high watermark stays frozen (strict min ISR).
    assert_eq!(code(c.produce("m", 0, batch(), 1).await), Ok(0));
    follower_caught_up(&broker, "m", epoch);
    assert_eq!(broker.partition("m", 0).unwrap().lock().high_watermark(), 0);

    // min.insync.replicas=3 on two replicas: the effective minimum is 2 (Kafka >= 3.7), met.
    create(&broker, "capped", 3).await;
    let waiting = {
        let addr = running.local_addr;
        let io = io.clone();
        tokio::spawn(async move {
            let mut c = Client::connect(&io, addr).await.unwrap();
            c.set_timeout(Duration::from_secs(10));
            code(c.produce("capped", 0, batch(), -1).await)
        })
    };
    wait_for_end(&broker, "capped", 1).await;
    follower_caught_up(&broker, "capped", epoch);
    assert_eq!(waiting.await.unwrap(), Ok(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_acks_all_produce_ends_when_leadership_moves() {
    let disk = MemDisk::new(23);
    let io = io(&disk);
    let (running, _) = start_with_peer(&io).await;
    let broker = running.broker.clone();
    create(&broker, "l", 1).await;
    let waiting = {
        let addr = running.local_addr;
        let io = io.clone();
        tokio::spawn(async move {
            let mut c = Client::connect(&io, addr).await.unwrap();
            c.set_timeout(Duration::from_secs(10));
            code(c.produce("l", 0, batch(), -1).await)
        })
    };
    wait_for_end(&broker, "l", 1).await;
    let id = broker.image().topic("l").unwrap().id;
    let mut moved = PartitionChange::new(id, 0);
    moved.leader = Some(2);
    commit(&broker, vec![MetadataRecord::PartitionChange(moved)]).await;
    assert_eq!(
        waiting.await.unwrap(),
        Err(ResponseError::NotLeaderOrFollower)
    );
    assert!(broker
        .partition("l", 0)
        .unwrap()
        .lock()
        .replica_set()
        .is_none());
    let mut c = client(&running, &io, Duration::from_secs(5)).await;
    assert_eq!(
        code(c.produce("l", 0, batch(), -1).await),
        Err(ResponseError::NotLeaderOrFollower)
    );
}

/// KIP-890 part 1: the coordinator's "no" reaches each Produce version as Kafka's leader
/// answers it (`ReplicaManager`'s mapping): not in the transaction is INVALID_TXN_STATE before
/// v11 and TRANSACTION_ABORTABLE from v11; fenced is INVALID_PRODUCER_EPOCH; coordinator trouble
/// is NOT_ENOUGH_REPLICAS, which every client retries.
#[test]
fn a_coordinators_no_reaches_each_produce_version_as_kafka_answers_it() {
    use crate::txn::TxnError::*;
    let code = |e, version| super::verification_failure(e, version).code;
    assert_eq!(code(NotInTransaction, 10), ResponseError::InvalidTxnState);
    assert_eq!(
        code(NotInTransaction, 11),
        ResponseError::TransactionAbortable
    );
    assert_eq!(
        code(InvalidProducerIdMapping, 3),
        ResponseError::InvalidTxnState
    );
    assert_eq!(
        code(ProducerFenced, 10),
        ResponseError::InvalidProducerEpoch
    );
    assert_eq!(code(InvalidTxnState, 11), ResponseError::InvalidTxnState);
    for e in [
        ConcurrentTransactions,
        NotCoordinator,
        CoordinatorLoadInProgress,
        CoordinatorNotAvailable,
    ] {
        assert_eq!(code(e, 10), ResponseError::NotEnoughReplicas, "{e:?}");
        assert_eq!(code(e, 11), ResponseError::NotEnoughReplicas, "{e:?}");
    }
}
