//! Weir inside someone else's simulation: start a simulated Weir cluster from a madsim test of
//! your own, so your service and the brokers run under one seed, and crash, restart, cut off
//! and heal brokers while your service runs. No Kafka tool offers this; the recipe is in
//! `docs/SIMULATION.md` ("Weir inside your simulation") and `sim/tests/embedded_service.rs` is
//! the worked example.
//!
//! ```ignore
//! #[madsim::test]
//! async fn my_service_survives_a_broker_crash() {
//!     let cluster = SimCluster::start(ClusterSpec::default()).await.unwrap();
//!     let node = madsim::runtime::Handle::current().create_node().ip(..).build();
//!     let service = node.spawn(run_my_service(cluster.bootstrap().to_vec()));
//!     cluster.kill(0);
//!     cluster.restart(0);
//!     ...
//! }
//! ```
//!
//! Clients run on nodes of your own (madsim gives each node its own address and network
//! faults); [`client_io`] is the `Io` for Weir's own client there. Every broker keeps its disk
//! (an in-memory disk that forgets unsynced writes on a power loss) across restarts.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::net::NetSim;
use madsim::runtime::Handle;
use madsim::task::NodeId;
use weir::broker::Broker;
use weir::client::Client;
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use weir::io::Io;

use crate::clock::NodeClock;

const BROKER_PORT: u16 = 9092;
const CONTROLLER_PORT: u16 = 9093;
/// How long [`SimCluster::start`] waits for every broker to serve (simulated time).
const START_BOUND: Duration = Duration::from_secs(60);
/// At most this many brokers (one /24 of simulated addresses, and a quorum that stays quick).
pub const MAX_BROKERS: u32 = 9;

/// The cluster to start: combined nodes (broker and controller, every one a voter), with
/// Kafka broker keys applied to every node after Weir's (e.g. `min.insync.replicas`).
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub brokers: u32,
    pub properties: BTreeMap<String, String>,
}

impl Default for ClusterSpec {
    /// Three nodes, replication defaults of a durable cluster (RF 3, min ISR 2), and timers
    /// scaled down so a failover takes seconds, not the 30 s of Kafka's defaults.
    fn default() -> ClusterSpec {
        let properties = [
            ("default.replication.factor", "3"),
            ("min.insync.replicas", "2"),
            ("offsets.topic.replication.factor", "3"),
            ("replica.lag.time.max.ms", "3000"),
            ("broker.session.timeout.ms", "3000"),
            ("broker.heartbeat.interval.ms", "500"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        ClusterSpec {
            brokers: 3,
            properties,
        }
    }
}

/// One broker machine: its madsim node and the hardware that outlives restarts.
struct Machine {
    node: NodeId,
    addr: SocketAddr,
    disk: MemDisk,
    /// Set while its broker serves.
    up: Arc<AtomicBool>,
    broker: Arc<Mutex<Option<Arc<Broker>>>>,
}

/// A running simulated Weir cluster.
pub struct SimCluster {
    machines: Vec<Machine>,
    /// A node of the cluster's own, from which [`SimCluster::wait_serving`] asks Metadata.
    probe: madsim::runtime::NodeHandle,
}

/// The simulated address of broker `index` (10.0.9.x: clear of the simulator's own ranges).
fn address(index: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 9, index as u8 + 1))
}

fn config(spec: &ClusterSpec, index: u32) -> Result<ServerConfig, String> {
    let voters: Vec<String> = (0..spec.brokers)
        .map(|i| format!("{}@{}:{CONTROLLER_PORT}", i + 1, address(i)))
        .collect();
    let ip = address(index);
    let mut props: BTreeMap<String, String> = [
        ("node.id", (index + 1).to_string()),
        ("process.roles", "broker,controller".to_string()),
        ("controller.quorum.voters", voters.join(",")),
        (
            "listeners",
            format!("PLAINTEXT://{ip}:{BROKER_PORT},CONTROLLER://{ip}:{CONTROLLER_PORT}"),
        ),
        (
            "advertised.listeners",
            format!("PLAINTEXT://{ip}:{BROKER_PORT}"),
        ),
        ("inter.broker.listener.name", "PLAINTEXT".to_string()),
        ("controller.listener.names", "CONTROLLER".to_string()),
        ("log.dirs", "/data".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    props.extend(spec.properties.clone());
    ServerConfig::from_properties(&props)
        .map(|(config, _warnings)| config)
        .map_err(|e| format!("broker {}: {e}", index + 1))
}

/// The `Io` of a broker node: its own clock, the seed's randomness, madsim's network and its
/// in-memory disk.
fn node_io(disk: &MemDisk) -> Io {
    Io {
        clock: Arc::new(NodeClock::new(0, 0)),
        rng: Arc::new(OsRng::with_seed(madsim::rand::random())),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(disk.clone()),
    }
}

/// The `Io` for Weir's client (`weir::client`) on a node of your own: madsim's clock, network
/// and randomness; clients touch no disk.
pub fn client_io() -> Io {
    Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(madsim::rand::random())),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(MemDisk::new(0)),
    }
}

impl SimCluster {
    /// Formats every node with one cluster id, starts them, and returns once every broker
    /// serves clients (Metadata from the first lists them all); an error if that takes more
    /// than a minute of simulated time or a config is refused.
    pub async fn start(spec: ClusterSpec) -> Result<SimCluster, String> {
        if spec.brokers == 0 || spec.brokers > MAX_BROKERS {
            return Err(format!(
                "a simulated cluster has 1 to {MAX_BROKERS} brokers, not {}",
                spec.brokers
            ));
        }
        let handle = Handle::current();
        let cluster_id = weir::broker::identity::random_cluster_id(&client_io());
        let mut machines = Vec::new();
        for index in 0..spec.brokers {
            let config = config(&spec, index)?;
            let disk = MemDisk::new(madsim::rand::random());
            weir::broker::format_log_dir(
                &node_io(&disk),
                std::path::Path::new("/data"),
                &cluster_id,
                config.node_id,
            )
            .await
            .map_err(|e| format!("format broker {}: {e}", index + 1))?;
            let up = Arc::new(AtomicBool::new(false));
            let broker: Arc<Mutex<Option<Arc<Broker>>>> = Arc::default();
            let (init_disk, init_up, init_broker) = (disk.clone(), up.clone(), broker.clone());
            let node = handle
                .create_node()
                .name(format!("weir-{}", index + 1))
                .ip(address(index))
                .init(move || {
                    let (io, config) = (node_io(&init_disk), config.clone());
                    let (up, slot) = (init_up.clone(), init_broker.clone());
                    async move {
                        match Broker::start(config, io).await {
                            Ok(running) => {
                                slot.lock().unwrap().replace(running.broker.clone());
                                up.store(true, Ordering::SeqCst);
                                // Serve until killed, or until the log directory fails
                                // (then the process is as good as exited).
                                running.broker.storage_offline().await;
                                up.store(false, Ordering::SeqCst);
                                let _keep = running;
                                std::future::pending::<()>().await;
                            }
                            // Like a process that exits: down until restarted.
                            Err(e) => eprintln!("weir broker failed to start: {e:#}"),
                        }
                    }
                })
                .build();
            machines.push(Machine {
                node: node.id(),
                addr: SocketAddr::new(address(index), BROKER_PORT),
                disk,
                up,
                broker,
            });
        }
        let cluster = SimCluster {
            machines,
            probe: handle
                .create_node()
                .name("weir-probe")
                .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 9, 254)))
                .build(),
        };
        cluster.wait_serving().await?;
        Ok(cluster)
    }

    /// Every broker's client address (a `bootstrap.servers` list).
    pub fn bootstrap(&self) -> Vec<SocketAddr> {
        self.machines.iter().map(|m| m.addr).collect()
    }

    /// The bootstrap list as a `bootstrap.servers` string.
    pub fn bootstrap_servers(&self) -> String {
        let addrs: Vec<String> = self.bootstrap().iter().map(|a| a.to_string()).collect();
        addrs.join(",")
    }

    pub fn brokers(&self) -> usize {
        self.machines.len()
    }

    /// Whether broker `index` (0-based) serves now.
    pub fn is_up(&self, index: usize) -> bool {
        self.machines[index].up.load(Ordering::SeqCst)
    }

    /// The running broker `index`, for assertions on its state (its quorum status, say).
    pub fn broker(&self, index: usize) -> Option<Arc<Broker>> {
        self.machines[index].broker.lock().unwrap().clone()
    }

    /// kill -9: the process dies; what it wrote stays in the page cache (as on Linux).
    pub fn kill(&self, index: usize) {
        let m = &self.machines[index];
        Handle::current().kill(m.node);
        m.up.store(false, Ordering::SeqCst);
        m.broker.lock().unwrap().take();
        m.disk.process_crash();
    }

    /// Power loss: the process dies and every write not yet fsynced is lost.
    pub fn power_loss(&self, index: usize) {
        self.kill(index);
        self.machines[index].disk.power_loss();
    }

    /// Starts broker `index` again on its disk (after [`SimCluster::kill`] or
    /// [`SimCluster::power_loss`]).
    pub fn restart(&self, index: usize) {
        Handle::current().restart(self.machines[index].node);
    }

    /// Cuts broker `index` off the network (every packet to and from it is lost).
    pub fn isolate(&self, index: usize) {
        NetSim::current().clog_node(self.machines[index].node);
    }

    /// Ends every network cut made by [`SimCluster::isolate`].
    pub fn heal_network(&self) {
        let net = NetSim::current();
        for m in &self.machines {
            net.unclog_node(m.node);
        }
    }

    /// Waits until every broker serves and Metadata lists them all (bounded: a minute of
    /// simulated time).
    pub async fn wait_serving(&self) -> Result<(), String> {
        let addrs = self.bootstrap();
        let up: Vec<Arc<AtomicBool>> = self.machines.iter().map(|m| m.up.clone()).collect();
        let want = addrs.len();
        let probe = self.probe.spawn(async move {
            let io = client_io();
            let deadline = tokio::time::Instant::now() + START_BOUND;
            while tokio::time::Instant::now() < deadline {
                if up.iter().all(|u| u.load(Ordering::SeqCst)) {
                    for addr in &addrs {
                        if let Ok(mut c) = Client::connect(&io, *addr).await {
                            if c.brokers().await.is_ok_and(|b| b.len() == want) {
                                return true;
                            }
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            false
        });
        match probe.await {
            Ok(true) => Ok(()),
            _ => Err(format!(
                "the simulated cluster did not serve with {want} brokers within {START_BOUND:?}"
            )),
        }
    }
}
