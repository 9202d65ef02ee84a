//! KIP-890 part 1 across brokers (issue 19): in a three-node cluster where the transaction's
//! coordinator and the partition's leader are different nodes, a transactional produce that
//! would open the producer's transaction on the partition is appended only once the leader has
//! asked the coordinator (AddPartitionsToTxn v4, verify-only) — so a write to a partition never
//! added (INVALID_TXN_STATE before Produce v11, TRANSACTION_ABORTABLE from v11) and a late
//! write of a transaction already aborted are refused, and no hanging transaction is left.
//! With `transaction.partition.verification.enable=false` set cluster-wide the same late write
//! goes in and hangs: what verification prevents.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use weir::broker::{Broker, RunningBroker};
use weir::client::txn_producer::{TxnMode, TxnProducer};
use weir::client::{produce_request, Client, ConfigResource};
use weir::config::ServerConfig;
use weir::io::Io;
use weir::log::batch::{compute_crc, BatchBuilder};

mod common;

use common::{free_port, wait_for, wait_listening, CLUSTER_ID};

const NODES: usize = 3;
const TOPIC: &str = "verified";
const PARTITIONS: i32 = 6;
const ID: &str = "verify-across-brokers";
const INVALID_TXN_STATE: i16 = 48;
const TRANSACTION_ABORTABLE: i16 = 120;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn start_cluster() -> (Vec<ServerConfig>, Vec<RunningBroker>) {
    let io = Io::os();
    let controller_ports: Vec<u16> = (0..NODES).map(|_| free_port()).collect();
    let mut configs = Vec::new();
    for id in 1..=NODES {
        let dir: PathBuf = common::temp_dir("txn-verify", &format!("n{id}"));
        weir::broker::format_log_dir(&io, &dir, CLUSTER_ID, id as i32)
            .await
            .unwrap();
        configs.push(config(id, &dir, &controller_ports, free_port()));
    }
    let mut nodes = Vec::new();
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
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.local_addr).collect();
    wait_listening(&addrs).await;
    let start = Instant::now();
    loop {
        let mut c = Client::connect(&io, addrs[0]).await.unwrap();
        match c.create_topic(TOPIC, PARTITIONS, 1, &BTreeMap::new()).await {
            Ok(()) => break,
            Err(e) => {
                assert!(start.elapsed() < Duration::from_secs(20), "create: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    wait_for(
        "every node applied the topic",
        Duration::from_secs(20),
        || {
            nodes
                .iter()
                .all(|n| n.broker.image().topic(TOPIC).is_some())
                .then_some(())
        },
    )
    .await;
    (configs, nodes)
}

fn config(id: usize, dir: &Path, controller_ports: &[u16], client_port: u16) -> ServerConfig {
    common::combined_config(
        id,
        dir,
        controller_ports,
        client_port,
        &[("transaction.state.log.num.partitions", "3")],
    )
}

/// AddPartitionsToTxn v3 (a v1 client's) for `partition` at the coordinator.
async fn add_partition(coordinator: &mut Client, p: &TxnProducer, partition: i32) {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(ID)))
        .with_v3_and_below_producer_id(ProducerId(p.producer_id))
        .with_v3_and_below_producer_epoch(p.producer_epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(vec![partition])]);
    let response = coordinator.connection().call(&request, 3).await.unwrap();
    let code =
        response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
    assert_eq!(code, 0, "AddPartitionsToTxn");
}

/// A transactional batch of `p` at `sequence` to `partition` on its leader with Produce
/// `version`: the partition's error code.
async fn produce(
    leader: &mut Client,
    p: &TxnProducer,
    partition: i32,
    sequence: i32,
    version: i16,
) -> i16 {
    let now = Io::os().clock.wall_ms();
    let mut builder = BatchBuilder::new(now);
    builder.push(None, Some(b"v"), now);
    let mut batch = builder.finish(p.producer_id, p.producer_epoch, sequence);
    batch[22] |= 0x10; // transactional
    let crc = compute_crc(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    let request = produce_request(
        TOPIC,
        &[(partition, Bytes::from(batch))],
        -1,
        Duration::from_secs(5),
    )
    .with_transactional_id(Some(TransactionalId(s(ID))));
    let response = leader.connection().call(&request, version).await.unwrap();
    response.responses[0].partition_responses[0].error_code
}

/// The start offset of the producer's open transaction on `partition`, if one is open.
async fn open_transaction(leader: &mut Client, partition: i32, producer_id: i64) -> Option<i64> {
    let described = leader
        .describe_producers(TOPIC, &[partition])
        .await
        .unwrap();
    let producers = described[0].1.as_ref().unwrap();
    producers
        .iter()
        .find(|d| d.producer_id == producer_id)
        .map(|d| d.current_txn_start_offset)
        .filter(|&o| o >= 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_verifies_with_a_coordinator_on_another_node() {
    let io = Io::os();
    let (configs, nodes) = start_cluster().await;
    let addr = |node: i32| nodes[node as usize - 1].local_addr;
    // The coordinator (FindCoordinator creates `__transaction_state` on first use).
    let mut any = Client::connect(&io, addr(1)).await.unwrap();
    let start = Instant::now();
    let coordinator = loop {
        match any.transaction_coordinator(ID).await {
            Ok(b) => break b.id,
            Err(e) => {
                assert!(start.elapsed() < Duration::from_secs(20), "{e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    // A partition led elsewhere.
    let image = nodes[0].broker.image();
    let topic = image.topic(TOPIC).unwrap();
    let (partition, leader) = (0..PARTITIONS)
        .map(|p| (p, image.partition(topic.id, p).unwrap().leader))
        .find(|&(_, l)| l != coordinator)
        .expect("six partitions over three nodes: one is led elsewhere");
    let mut coord = Client::connect(&io, addr(coordinator)).await.unwrap();
    let mut lead = Client::connect(&io, addr(leader)).await.unwrap();
    let mut p = coord
        .init_transactions(ID, 60_000, TxnMode::V1)
        .await
        .unwrap();

    // A write to a partition never added: refused, by client version, and nothing opened.
    assert_eq!(
        produce(&mut lead, &p, partition, 0, 10).await,
        INVALID_TXN_STATE
    );
    assert_eq!(
        produce(&mut lead, &p, partition, 0, 11).await,
        TRANSACTION_ABORTABLE
    );
    assert_eq!(
        open_transaction(&mut lead, partition, p.producer_id).await,
        None
    );

    // Added, then written: the coordinator's node says yes.
    add_partition(&mut coord, &p, partition).await;
    assert_eq!(produce(&mut lead, &p, partition, 0, 10).await, 0);
    assert!(open_transaction(&mut lead, partition, p.producer_id)
        .await
        .is_some());
    coord.end_txn(&mut p, false).await.unwrap();
    wait_for_async_state(&mut coord, "CompleteAbort").await;
    assert_eq!(
        open_transaction(&mut lead, partition, p.producer_id).await,
        None
    );

    // A late write of the aborted transaction (same producer id and epoch under v1): refused.
    assert_eq!(
        produce(&mut lead, &p, partition, 1, 10).await,
        INVALID_TXN_STATE
    );
    assert_eq!(
        produce(&mut lead, &p, partition, 1, 11).await,
        TRANSACTION_ABORTABLE
    );
    assert_eq!(
        open_transaction(&mut lead, partition, p.producer_id).await,
        None,
        "no hanging transaction"
    );

    // Verification off (cluster-wide, dynamic): the same late write goes in and hangs.
    coord
        .alter_configs(
            &ConfigResource::BrokerDefault,
            &BTreeMap::from([(
                "transaction.partition.verification.enable".to_string(),
                Some("false".to_string()),
            )]),
        )
        .await
        .unwrap();
    let start = Instant::now();
    while produce(&mut lead, &p, partition, 1, 10).await != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the leader never saw verification turned off"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(open_transaction(&mut lead, partition, p.producer_id)
        .await
        .is_some());

    for n in &nodes {
        n.broker.halt();
    }
    for c in &configs {
        let _ = std::fs::remove_dir_all(&c.log_dirs[0]);
    }
}

/// Waits (bounded) until the transaction reaches `state` at its coordinator.
async fn wait_for_async_state(coordinator: &mut Client, state: &str) {
    let start = Instant::now();
    loop {
        let d = coordinator.describe_transaction(ID).await.unwrap();
        if d.state == state {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{ID} is {} not {state}",
            d.state
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
