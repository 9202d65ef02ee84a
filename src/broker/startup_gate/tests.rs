//! The gate's rule, and a pure broker (no controller reachable) whose image names it leader:
//! it takes up no role until its registration is accepted and applied.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use uuid::Uuid;

use super::{caught_up_past_registration, ready_for_clients};
use crate::broker::{drivers::reconcile::Leadership, shared::Broker};
use crate::config::ServerConfig;
use crate::controller::image::PartitionRecord;
use crate::controller::{BrokerEndpoint, MetadataRecord};
use crate::io::memdisk::MemDisk;
use crate::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use crate::io::Io;

#[test]
fn the_gate_opens_only_past_the_registration_record() {
    assert!(!caught_up_past_registration(None, 100));
    // Registered at offset 40: the image must have applied record 40 itself.
    assert!(!caught_up_past_registration(Some(40), 0));
    assert!(!caught_up_past_registration(Some(40), 40));
    assert!(caught_up_past_registration(Some(40), 41));
}

#[test]
fn clients_are_served_only_past_the_registration_and_unfenced() {
    assert!(!ready_for_clients(false, false));
    // An old registration of this broker, unfenced, before the new one is applied.
    assert!(!ready_for_clients(false, true));
    // Registered, but still fenced: Metadata would not list it.
    assert!(!ready_for_clients(true, false));
    assert!(ready_for_clients(true, true));
}

const T: Uuid = Uuid::from_u128(5);

fn register(id: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker {
        log_dirs: Vec::new(),
        id,
        incarnation: Uuid::from_u128(id as u128),
        listeners: vec![BrokerEndpoint {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9000 + id as u16,
        }],
        rack: None,
        fenced: false,
    }
}

fn values(first: u64, records: &[MetadataRecord]) -> Vec<(u64, Bytes)> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                first + i as u64,
                Bytes::from(serde_json::to_vec(r).unwrap()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_broker_leads_nothing_before_its_registration_is_applied() {
    let disk = MemDisk::new(3);
    let io = Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(3)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(disk.clone()),
    };
    // A pure broker whose only voter does not answer: it never registers by itself.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    // A fixed client port: not bound until the broker may serve clients.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client_port = free.local_addr().unwrap().port();
    drop(free);
    let client = std::net::SocketAddr::from(([127, 0, 0, 1], client_port));
    let listening = || std::net::TcpStream::connect(client).is_ok();
    let props: BTreeMap<String, String> = [
        ("process.roles", "broker".to_string()),
        ("node.id", "1".to_string()),
        (
            "controller.quorum.voters",
            format!("9@127.0.0.1:{dead_port}"),
        ),
        ("listeners", format!("PLAINTEXT://127.0.0.1:{client_port}")),
        ("controller.listener.names", "CONTROLLER".to_string()),
        ("log.dirs", "/data".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let config = ServerConfig::from_properties(&props).unwrap().0;
    crate::broker::identity::format_log_dir(
        &io,
        std::path::Path::new("/data"),
        "MkU3OEVBNTcwNTJENDM2Qk",
        1,
    )
    .await
    .unwrap();
    let running = Broker::start(config, io).await.unwrap();
    let broker = running.broker.clone();
    // The image it starts from names it leader of g-0 at epoch 3 (as before its power loss).
    broker
        .apply_committed(&values(
            0,
            &[
                register(1),
                register(2),
                MetadataRecord::topic("g", T, Default::default()),
                MetadataRecord::Partition(PartitionRecord {
                    directories: Vec::new(),
                    topic_id: T,
                    partition: 0,
                    replicas: vec![1, 2],
                    isr: vec![1, 2],
                    elr: vec![],
                    last_known_elr: vec![],
                    leader: 1,
                    leader_epoch: 3,
                    partition_epoch: 3,
                    leader_recovering: false,
                }),
            ],
        ))
        .await;
    assert!(broker.partition("g", 0).is_some(), "the log is opened");
    let not_leading = Leadership::NotLeader {
        leader: -1,
        leader_epoch: 3,
    };
    assert!(!broker.serving_partitions());
    assert!(
        !broker.ready_for_clients(),
        "its old registration does not count"
    );
    assert_eq!(broker.leadership("g", 0), not_leading);
    // Registered at offset 5, not applied yet: still nothing.
    broker.session.set_registered_for_test(5);
    assert!(!broker.serving_partitions());
    assert!(!broker.ready_for_clients());
    assert!(!listening(), "the client port is closed while not ready");
    assert_eq!(broker.leadership("g", 0), not_leading);
    // Its registration (offset 5) is applied: it serves from the image it now has.
    broker
        .apply_committed(&values(4, &[register(3), register(1)]))
        .await;
    assert!(broker.serving_partitions());
    assert!(
        broker.ready_for_clients(),
        "registered unfenced and applied"
    );
    assert!(broker.wait_ready_for_clients().await);
    // The listener task binds once woken: give it its turn (bounded).
    let mut tries = 0;
    while !listening() && tries < 200 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        tries += 1;
    }
    assert!(listening(), "the client port opens once ready");
    assert_eq!(broker.leadership("g", 0), Leadership::Leader(3));
    broker.halt();
}
