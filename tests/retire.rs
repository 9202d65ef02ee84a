//! Retiring a broker end to end on real loopback nodes (notes operations §3.5, KIP-1066's
//! order): three combined nodes and a broker-only node 4 hosting replicas; node 4 is cordoned
//! (`cordoned.log.dirs=*`, a dynamic broker config), so a topic created next gets no replica
//! on it; its replicas are moved away; it stops; UnregisterBroker removes it, and it is gone
//! from the image, Metadata and DescribeCluster. Unregistering it again, or an id never seen,
//! is BROKER_ID_NOT_REGISTERED.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use weir::broker::{Broker, RunningBroker};
use weir::client::{Client, ClientError, ConfigResource};
use weir::io::Io;

use common::{combined_config, free_port, temp_dir, wait_for, wait_for_async, CLUSTER_ID};

async fn start(id: i32, controller_ports: &[u16]) -> RunningBroker {
    let io = Io::os();
    let dir = temp_dir("retire", &format!("n{id}"));
    weir::broker::format_log_dir(&io, &dir, CLUSTER_ID, id)
        .await
        .unwrap();
    let extra = [("replica.fetch.wait.max.ms", "100")];
    let config = combined_config(id as usize, &dir, controller_ports, free_port(), &extra);
    Broker::start(config, io).await.unwrap()
}

/// The replicas of every partition of `topic` in `broker`'s image.
fn replicas(broker: &Broker, topic: &str) -> Vec<Vec<i32>> {
    let image = broker.image();
    let Some(t) = image.topic(topic) else {
        return Vec::new();
    };
    (0..t.partitions)
        .filter_map(|p| image.partition(t.id, p).map(|r| r.replicas.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordoned_broker_is_emptied_stopped_and_unregistered() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
    let io = Io::os();
    let controller_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut nodes = Vec::new();
    for id in 1..=4 {
        nodes.push(start(id, &controller_ports).await);
    }
    let one = nodes[0].broker.clone();
    wait_for("four unfenced brokers", Duration::from_secs(20), || {
        (one.image().live_brokers().count() == 4).then_some(())
    })
    .await;
    let addr = nodes[0].local_addr;
    let mut admin = wait_for_async("a client", Duration::from_secs(20), || async {
        Client::connect(&io, addr).await.ok()
    })
    .await;
    // Eight partitions of RF 3 over four brokers: node 4 hosts some of them.
    admin
        .create_topic("before", 8, 3, &BTreeMap::new())
        .await
        .unwrap();
    wait_for("the topic in the image", Duration::from_secs(10), || {
        (replicas(&one, "before").len() == 8).then_some(())
    })
    .await;
    assert!(replicas(&one, "before").iter().any(|r| r.contains(&4)));

    // 1. Cordon node 4: its heartbeat reports every directory cordoned.
    let cordon = BTreeMap::from([("cordoned.log.dirs".to_string(), Some("*".to_string()))]);
    admin
        .alter_configs(&ConfigResource::Broker(4), &cordon)
        .await
        .unwrap();
    wait_for(
        "node 4 cordoned in the image",
        Duration::from_secs(10),
        || {
            one.image()
                .broker(4)
                .is_some_and(|b| b.is_cordoned())
                .then_some(())
        },
    )
    .await;
    admin
        .create_topic("after", 8, 3, &BTreeMap::new())
        .await
        .unwrap();
    wait_for("the second topic", Duration::from_secs(10), || {
        (replicas(&one, "after").len() == 8).then_some(())
    })
    .await;
    assert!(
        replicas(&one, "after").iter().all(|r| !r.contains(&4)),
        "a cordoned broker took new replicas: {:?}",
        replicas(&one, "after")
    );

    // 2. Move node 4's replicas away: each to the one broker of 1..=3 it lacks.
    let plan: Vec<(String, i32, Option<Vec<i32>>)> = replicas(&one, "before")
        .into_iter()
        .enumerate()
        .filter(|(_, r)| r.contains(&4))
        .map(|(p, r)| {
            let spare = (1..=3).find(|b| !r.contains(b)).unwrap();
            let target = r.iter().map(|b| if *b == 4 { spare } else { *b }).collect();
            ("before".to_string(), p as i32, Some(target))
        })
        .collect();
    let outcomes = admin
        .alter_partition_reassignments(&plan, true)
        .await
        .unwrap();
    assert!(outcomes.iter().all(|o| o.error.is_none()), "{outcomes:?}");
    wait_for("node 4 to host nothing", Duration::from_secs(30), || {
        let image = one.image();
        let hosts = image.partitions().any(|(_, p)| p.replicas.contains(&4));
        (!hosts).then_some(())
    })
    .await;

    // 3. Stop it; 4. unregister it.
    let four = nodes.pop().unwrap();
    four.broker.shutdown().await.unwrap();
    admin.unregister_broker(4).await.unwrap();
    wait_for(
        "node 4 gone from every image",
        Duration::from_secs(10),
        || {
            nodes
                .iter()
                .all(|n| n.broker.image().broker(4).is_none())
                .then_some(())
        },
    )
    .await;
    let listed: Vec<i32> = admin
        .brokers()
        .await
        .unwrap()
        .iter()
        .map(|b| b.id)
        .collect();
    assert_eq!(listed, vec![1, 2, 3], "Metadata");
    let mut conn = weir::client::connection::Connection::connect(&io, addr, "t")
        .await
        .unwrap();
    let described = conn
        .call(
            &kafka_protocol::messages::DescribeClusterRequest::default(),
            0,
        )
        .await
        .unwrap();
    assert_eq!(
        described
            .brokers
            .iter()
            .map(|b| b.broker_id.0)
            .collect::<Vec<_>>(),
        vec![1, 2, 3],
        "DescribeCluster"
    );
    for id in [4, 99] {
        match admin.unregister_broker(id).await {
            Err(ClientError::Kafka(e, _)) => {
                assert_eq!(
                    e,
                    kafka_protocol::error::ResponseError::BrokerIdNotRegistered
                )
            }
            other => panic!("unregistering {id} again: {other:?}"),
        }
    }
    for n in nodes.iter().rev() {
        let _ = n.broker.shutdown().await;
    }
}
