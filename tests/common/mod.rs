//! Set-up shared by the in-process cluster tests (`tests/cluster.rs`, `replication.rs`,
//! `acks_all.rs`, `groups_cluster.rs`, `acls.rs`, `dynamic_configs.rs`): loopback ports, scratch
//! directories, an in-memory-disk `Io`, the combined-node
//! configuration and bounded waits. Each test binary uses the part it needs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::sync::Arc;

use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use weir::io::Io;

pub const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qk";

/// A port free on 127.0.0.1 when asked (the OS picks it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An empty scratch directory for this process, `weir-<prefix>-<pid>-<name>`.
pub fn temp_dir(prefix: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-{prefix}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Node `id` (1-based) of a cluster of combined broker+controller nodes, one controller port
/// each, with time-outs short enough for tests; `extra` adds or overrides keys. An `id` past
/// the controller ports is a broker-only node (an added broker).
pub fn combined_config(
    id: usize,
    dir: &Path,
    controller_ports: &[u16],
    client_port: u16,
    extra: &[(&str, &str)],
) -> ServerConfig {
    let voters: Vec<String> = controller_ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
        .collect();
    let (roles, listeners) = match controller_ports.get(id - 1) {
        Some(cport) => (
            "broker,controller",
            format!("PLAINTEXT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{cport}"),
        ),
        None => ("broker", format!("PLAINTEXT://127.0.0.1:{client_port}")),
    };
    let mut props: BTreeMap<String, String> = [
        ("process.roles", roles.to_string()),
        ("node.id", id.to_string()),
        ("controller.quorum.voters", voters.join(",")),
        ("listeners", listeners),
        ("controller.listener.names", "CONTROLLER".to_string()),
        ("inter.broker.listener.name", "PLAINTEXT".to_string()),
        ("log.dirs", dir.display().to_string()),
        ("controller.quorum.election.timeout.ms", "300".to_string()),
        ("controller.quorum.fetch.timeout.ms", "600".to_string()),
        ("broker.heartbeat.interval.ms", "200".to_string()),
        ("broker.session.timeout.ms", "1500".to_string()),
        ("replica.fetch.wait.max.ms", "200".to_string()),
        ("replica.fetch.backoff.ms", "100".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (k, v) in extra {
        props.insert(k.to_string(), v.to_string());
    }
    ServerConfig::from_properties(&props).unwrap().0
}

/// Polls `f` every 10 ms until it gives a value; fails the test after `limit`.
pub async fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until every address accepts connections: a clustered broker binds a fixed client
/// port only once its own image shows it registered and unfenced (Kafka's start-up order),
/// a moment after the controller's image says so.
pub async fn wait_listening(addrs: &[std::net::SocketAddr]) {
    let listening = |a: &std::net::SocketAddr| {
        std::net::TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok()
    };
    wait_for("every broker to listen", Duration::from_secs(20), || {
        addrs.iter().all(listening).then_some(())
    })
    .await
}

/// Like [`wait_for`] for an async check, polled every 100 ms.
pub async fn wait_for_async<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    limit: Duration,
    mut f: impl FnMut() -> F,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Real clock, network and spawner over an in-memory disk (seeded entropy): a one-process
/// broker whose files the test can inspect or damage.
pub fn memdisk_io(disk: &MemDisk) -> Io {
    Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(7)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(disk.clone()),
    }
}
