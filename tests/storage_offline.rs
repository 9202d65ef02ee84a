//! A broker whose fsync fails takes its log directory offline for good (the fsyncgate answer):
//! every later produce and fetch is refused, even once the disk works again, no clean shutdown
//! is recorded, and a restart on the same disk serves again with every acknowledged record.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use weir::broker::Broker;
use weir::client::{Client, ClientError};
use weir::config::ServerConfig;
use weir::io::memdisk::{Faults, MemDisk};
use weir::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use weir::io::{Disk, Io};
use weir::log::batch::BatchBuilder;

fn io_on(disk: &MemDisk) -> Io {
    Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(11)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(disk.clone()),
    }
}

fn config() -> ServerConfig {
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        ("weir.fsync.before.ack".to_string(), "true".to_string()),
    ]);
    ServerConfig::from_properties(&props).unwrap().0
}

fn batch(value: &str) -> Bytes {
    let mut b = BatchBuilder::new(1);
    b.push(None, Some(value.as_bytes()), 1);
    Bytes::from(b.finish(-1, -1, -1))
}

fn storage_error<T: std::fmt::Debug>(result: Result<T, ClientError>) -> bool {
    matches!(
        result,
        Err(ClientError::Kafka(ResponseError::KafkaStorageError, _))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_takes_the_log_directory_offline_until_a_restart() {
    let disk = MemDisk::new(3);
    let io = io_on(&disk);
    let running = Broker::start(config(), io.clone()).await.unwrap();
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let acked = client.produce("t", 0, batch("before"), -1).await.unwrap();
    assert_eq!(acked, Some(0));

    disk.set_faults(Faults {
        sync_error_rate: 1.0,
        ..Faults::default()
    });
    assert!(storage_error(
        client.produce("t", 0, batch("lost?"), -1).await
    ));
    disk.set_faults(Faults::default());
    assert!(running.broker.is_storage_offline());
    let reason = tokio::time::timeout(Duration::from_secs(5), running.broker.storage_offline())
        .await
        .expect("the offline signal fires");
    assert!(reason.contains("fsync"), "{reason}");
    // The disk works again, but the directory stays offline: a later fsync could "succeed"
    // over pages the failure dropped.
    assert!(storage_error(
        client.produce("t", 0, batch("after"), -1).await
    ));
    assert!(storage_error(
        client
            .fetch("t", 0, 0, 1 << 20, Duration::from_millis(10))
            .await
    ));
    assert!(
        running.broker.shutdown().await.is_err(),
        "no clean shutdown"
    );
    assert!(!disk.exists(Path::new("/data/t-0/clean-shutdown")));
    drop(client);
    drop(running);

    // The process is restarted (the page cache survives) and recovers.
    disk.process_crash();
    let running = Broker::start(config(), io.clone()).await.unwrap();
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let next = client
        .produce("t", 0, batch("again"), -1)
        .await
        .unwrap()
        .unwrap();
    assert!(next >= 1);
    let fetched = client
        .fetch("t", 0, 0, 1 << 20, Duration::from_millis(10))
        .await
        .unwrap();
    assert!(
        !fetched.records.is_empty(),
        "the acknowledged record is served"
    );
    drop(client);
    drop(running);

    // Everything acknowledged is on the medium: a power loss now loses none of it.
    disk.power_loss();
    let running = Broker::start(config(), io.clone()).await.unwrap();
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let (end, _) = client.list_offset("t", 0, -1).await.unwrap();
    assert!(
        end > next,
        "end {end} lost the record acknowledged at {next}"
    );
}
