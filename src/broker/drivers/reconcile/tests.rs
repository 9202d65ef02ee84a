//! A single broker whose image names other brokers (records committed through its own quorum,
//! as the quorum will deliver them): Metadata lists them, the partitions placed here open as
//! leader or follower, a non-leader refuses produce and consumer fetch, and a replica moved
//! away is deleted.

use std::collections::BTreeMap;
use std::path::Path;
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
use crate::io::{Disk, Io};
use crate::log::batch::BatchBuilder;

fn io(disk: &MemDisk) -> Io {
    Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(11)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(disk.clone()),
    }
}

async fn start(io: &Io, extra: &[(&str, &str)]) -> RunningBroker {
    let mut props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        ("node.id".to_string(), "1".to_string()),
    ]);
    for (k, v) in extra {
        props.insert(k.to_string(), v.to_string());
    }
    let config = ServerConfig::from_properties(&props).unwrap().0;
    Broker::start(config, io.clone()).await.unwrap()
}

async fn commit(broker: &Broker, records: Vec<MetadataRecord>) {
    broker
        .change_metadata(false, |_, _| Ok((records, ())))
        .await
        .unwrap();
}

fn batch() -> bytes::Bytes {
    let mut b = BatchBuilder::new(1_000);
    b.push(None, Some(b"v"), 1_000);
    bytes::Bytes::from(b.finish(-1, -1, -1))
}

fn kafka_error(e: ClientError) -> ResponseError {
    match e {
        ClientError::Kafka(code, _) => code,
        other => panic!("not a Kafka error: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_follow_the_image_of_a_cluster() {
    let disk = MemDisk::new(7);
    let io = io(&disk);
    let running = start(&io, &[]).await;
    let broker = running.broker.clone();
    // Broker 2 joins the image: registered, then unfenced.
    add_broker_2(&broker, Some("r2")).await;
    let epoch = broker.image().broker(2).unwrap().epoch;
    let new = NewTopic {
        name: "f".into(),
        partitions: -1,
        replication_factor: -1,
        assignments: vec![vec![2, 1], vec![1, 2]],
        ..NewTopic::default()
    };
    broker.create_topic(new, false).await.unwrap();
    // Both partitions are hosted here: 0 as follower, 1 as leader.
    assert!(broker.partition("f", 0).is_some() && broker.partition("f", 1).is_some());
    assert_eq!(broker.leadership("f", 1), super::Leadership::Leader(0));
    // The follower fetches from its leader; the partition it leads is in no fetcher.
    let fetching = |b: &Broker| b.replica_fetcher_membership();
    let from_2 = BTreeMap::from([(2, vec![("f".to_string(), 0)])]);
    assert_eq!(fetching(&broker), from_2);

    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client.set_timeout(Duration::from_secs(10));
    let brokers = client.brokers().await.unwrap();
    let ids: Vec<(i32, u16)> = brokers.iter().map(|b| (b.id, b.port)).collect();
    assert_eq!(ids, [(1, running.local_addr.port()), (2, 9999)]);
    let topics = client.describe_topics(Some(&["f"])).await.unwrap();
    let text = crate::client::render_topic_descriptions(&topics);
    assert!(
        text.contains("PartitionCount: 2\tReplicationFactor: 2"),
        "{text}"
    );
    assert!(
        text.contains("Partition: 0\tLeader: 2\tReplicas: 2,1\tIsr: 2,1\tElr: "),
        "{text}"
    );
    assert!(
        text.contains("Partition: 1\tLeader: 1\tReplicas: 1,2\tIsr: 1,2"),
        "{text}"
    );

    // Only the leader takes produce and consumer fetches.
    let refused = client.produce("f", 0, batch(), 1).await.unwrap_err();
    assert_eq!(kafka_error(refused), ResponseError::NotLeaderOrFollower);
    assert_eq!(client.produce("f", 1, batch(), 1).await.unwrap(), Some(0));
    let refused = client
        .fetch("f", 0, 0, 1 << 20, Duration::ZERO)
        .await
        .unwrap_err();
    assert_eq!(kafka_error(refused), ResponseError::NotLeaderOrFollower);
    let refused = client.list_offset("f", 0, -1).await.unwrap_err();
    assert_eq!(kafka_error(refused), ResponseError::NotLeaderOrFollower);

    // ElectLeaders: partition 0's leadership moved to 1; a preferred election moves it back
    // to 2, and asking again is not needed.
    let id = broker.image().topic("f").unwrap().id;
    let mut moved = PartitionChange::new(id, 0);
    moved.leader = Some(1);
    commit(&broker, vec![MetadataRecord::PartitionChange(moved)]).await;
    assert_eq!(broker.leadership("f", 0), super::Leadership::Leader(1));
    assert!(fetching(&broker).is_empty(), "a leader fetches from nobody");
    let elect = kafka_protocol::messages::ElectLeadersRequest::default()
        .with_election_type(0)
        .with_topic_partitions(Some(vec![
            kafka_protocol::messages::elect_leaders_request::TopicPartitions::default()
                .with_topic(kafka_protocol::messages::TopicName(
                    kafka_protocol::protocol::StrBytes::from_static_str("f"),
                ))
                .with_partitions(vec![0, 1]),
        ]))
        .with_timeout_ms(1000);
    let response = client.connection().call(&elect, 2).await.unwrap();
    let codes: Vec<(i32, i16)> = response.replica_election_results[0]
        .partition_result
        .iter()
        .map(|r| (r.partition_id, r.error_code))
        .collect();
    let not_needed = ResponseError::ElectionNotNeeded.code();
    assert_eq!(codes, [(0, 0), (1, not_needed)]);
    assert_eq!(
        broker.leadership("f", 0),
        super::Leadership::NotLeader {
            leader: 2,
            leader_epoch: 2
        }
    );
    assert_eq!(fetching(&broker), from_2, "following broker 2 again");

    // The replica of partition 0 moves away from this node: it is closed and deleted.
    let mut change = PartitionChange::new(id, 0);
    change.replicas = Some(vec![2]);
    change.isr = Some(vec![2]);
    commit(&broker, vec![MetadataRecord::PartitionChange(change)]).await;
    assert!(broker.partition("f", 0).is_none());
    assert!(!disk.exists(Path::new("/data/f-0")));
    assert!(
        fetching(&broker).is_empty(),
        "no fetcher for a partition not hosted"
    );
    assert!(disk.exists(Path::new("/data/f-1")));
    // Broker 2 fenced: no longer listed; its replicas are offline.
    commit(
        &broker,
        vec![MetadataRecord::BrokerChange {
            id: 2,
            epoch,
            fenced: Some(true),
            in_controlled_shutdown: None,
        }],
    )
    .await;
    let brokers = client.brokers().await.unwrap();
    assert_eq!(brokers.len(), 1);
    let topics = client.describe_topics(Some(&["f"])).await.unwrap();
    assert_eq!(topics[0].partitions[0].offline, [2]);
    // Reconciling again changes nothing (idempotent).
    broker.reconcile().await.unwrap();
    assert!(broker.partition("f", 0).is_none() && broker.partition("f", 1).is_some());
    broker.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_auto_creates_a_missing_topic_when_the_broker_allows() {
    let disk = MemDisk::new(8);
    let io = io(&disk);
    let running = start(&io, &[]).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let leader = client.wait_for_leader("fresh", 0).await.unwrap();
    assert_eq!((leader.id, leader.port), (1, running.local_addr.port()));
    let topics = client.describe_topics(None).await.unwrap();
    assert_eq!(topics.len(), 1);
    assert_eq!(topics[0].partitions[0].leader, 1);
    let missing = client.wait_for_leader("fresh", 5).await.unwrap_err();
    assert_eq!(kafka_error(missing), ResponseError::UnknownTopicOrPartition);
    running.broker.shutdown().await.unwrap();

    let disk = MemDisk::new(9);
    let io = self::io(&disk);
    let running = start(&io, &[("auto.create.topics.enable", "false")]).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let refused = client.wait_for_leader("fresh", 0).await.unwrap_err();
    assert_eq!(kafka_error(refused), ResponseError::UnknownTopicOrPartition);
    assert!(client.describe_topics(None).await.unwrap().is_empty());
    running.broker.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_single_node_reregisters_only_when_its_endpoint_changed() {
    let disk = MemDisk::new(10);
    let io = io(&disk);
    let running = start(&io, &[]).await;
    let broker = running.broker.clone();
    broker
        .create_topic(
            NewTopic {
                name: "kept".into(),
                partitions: 2,
                replication_factor: 1,
                ..NewTopic::default()
            },
            false,
        )
        .await
        .unwrap();
    let first = broker.image().broker(1).unwrap().clone();
    broker.shutdown().await.unwrap();
    drop(running);
    drop(broker);
    // Port 0: the new start binds another port, so it registers again (a new incarnation).
    let running = start(&io, &[]).await;
    let image = running.broker.image();
    let second = image.broker(1).unwrap().clone();
    assert!(second.epoch > first.epoch && second.incarnation != first.incarnation);
    assert!(!second.fenced);
    // Advertising a fixed endpoint twice: the second start writes nothing.
    running.broker.shutdown().await.unwrap();
    drop(running);
    let fixed = [("advertised.listeners", "PLAINTEXT://127.0.0.1:19999")];
    let running = start(&io, &fixed).await;
    let third = running.broker.image().broker(1).unwrap().clone();
    assert_eq!(third.listeners[0].port, 19999);
    running.broker.shutdown().await.unwrap();
    drop(running);
    let running = start(&io, &fixed).await;
    let image = running.broker.image();
    assert_eq!(image.broker(1).unwrap(), &third);
    let t = image.topic("kept").unwrap();
    let p = image.partition(t.id, 1).unwrap();
    assert_eq!(
        (p.leader, p.leader_epoch),
        (1, 0),
        "a restart moves no leadership"
    );
    assert!(running.broker.partition("kept", 1).is_some());
    running.broker.shutdown().await.unwrap();
}

/// Registers broker 2 (on a port nobody listens on, in `rack`) and unfences it.
async fn add_broker_2(broker: &Broker, rack: Option<&str>) {
    commit(
        broker,
        vec![MetadataRecord::RegisterBroker {
            log_dirs: Vec::new(),
            id: 2,
            incarnation: Uuid::from_u128(2),
            listeners: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9999,
            }],
            rack: rack.map(str::to_string),
            fenced: true,
        }],
    )
    .await;
    let epoch = broker.image().broker(2).unwrap().epoch;
    commit(
        broker,
        vec![MetadataRecord::BrokerChange {
            id: 2,
            epoch,
            fenced: Some(false),
            in_controlled_shutdown: None,
        }],
    )
    .await;
}

/// The group and transaction coordinators begin loading a `__consumer_offsets` /
/// `__transaction_state` partition this node newly leads only once its replica has taken the
/// leadership up (`sync_role`), as Kafka's load from the replica's become-leader transition:
/// an image that already names this node while the replica still follows the old leader
/// loads nothing (the fetcher could still append behind the replay's end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinators_load_a_newly_led_partition_only_once_its_replica_leads() {
    use crate::group::OFFSETS_TOPIC;
    use crate::txn::TRANSACTION_STATE_TOPIC;
    let disk = MemDisk::new(7);
    let io = io(&disk);
    let running = start(&io, &[]).await;
    let broker = running.broker.clone();
    add_broker_2(&broker, None).await;
    let internal = [OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC];
    for name in internal {
        let new = NewTopic {
            name: name.into(),
            partitions: -1,
            replication_factor: -1,
            assignments: vec![vec![2, 1]],
            ..NewTopic::default()
        };
        broker.create_topic(new, false).await.unwrap();
        assert_eq!(
            broker.leadership(name, 0),
            super::Leadership::NotLeader {
                leader: 2,
                leader_epoch: 0
            }
        );
    }
    let holds = |b: &Broker| (b.holds_offsets_partition(0), b.holds_txn_partition(0));
    broker.sync_offsets_roles();
    broker.sync_txn_roles();
    assert_eq!(holds(&broker), (false, false), "led by broker 2");
    {
        // No reconcile pass runs meanwhile (the background loop's waits on this gate).
        let _gate = broker.reconcile_gate.lock().await;
        // The image names this node leader; its replicas have not taken it up yet.
        let mut image = (*broker.image()).clone();
        for name in internal {
            let mut moved = PartitionChange::new(image.topic(name).unwrap().id, 0);
            moved.leader = Some(1);
            image.apply(image.applied() + 1, &MetadataRecord::PartitionChange(moved));
        }
        *broker.image.write().unwrap() = Arc::new(image);
        for name in internal {
            assert_eq!(broker.leadership(name, 0), super::Leadership::Leader(1));
            let p = broker.partition(name, 0).unwrap();
            assert_eq!(p.lock().role(), crate::replica::Role::Follower, "{name}");
        }
        broker.sync_offsets_roles();
        broker.sync_txn_roles();
        assert_eq!(holds(&broker), (false, false), "loaded behind a follower");
        // The replicas take the leadership up: now both load.
        for name in internal {
            broker.sync_role(name, 0);
        }
        broker.sync_offsets_roles();
        broker.sync_txn_roles();
        assert_eq!(holds(&broker), (true, true));
    }
    broker.shutdown().await.unwrap();
}
