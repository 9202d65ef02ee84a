//! `Broker`: the state the rooms share (configuration, I/O, metadata image, partitions, and
//! each driver's state), with its small accessors. It names only the drivers' state types,
//! which live in files that do not import `Broker` (`drivers::*::state`,
//! `drivers::quorum::handle`, `connection_slot::state`, `startup_gate::state`), so no driver or
//! handler is reached from here: the rooms depend on this module, never the other way (`tests/broker_rooms.rs`).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, RwLock};

use crate::sync::watch;
use bytes::Bytes;

use crate::broker::connection_slot::state::Counts;
use crate::broker::drivers::active_controller::state::ActiveControllerState;
use crate::broker::drivers::broker_session::state::SessionState;
use crate::broker::drivers::dir_mover::state::DirMoves;
use crate::broker::drivers::group_coordinator::state::Groups;
use crate::broker::drivers::quorum::applied::AppliedRecords;
use crate::broker::drivers::quorum::handle::QuorumHandle;
use crate::broker::drivers::quorum_status::QuorumStatus;
use crate::broker::drivers::replica_fetcher::state::ReplicaFetchers;
use crate::broker::drivers::txn_coordinator::state::Txns;
use crate::broker::health::LogDirHealth;
use crate::broker::startup_gate::state::StartupGate;
use crate::broker::state::PartitionHandle;
use crate::broker::{delayed, log_dirs, peer, replication_events};
use crate::config::{ServerConfig, TopicConfig};
use crate::controller::{Controller, MetadataImage};
use crate::io::Io;
use crate::replica::key::PartitionKey;

pub struct Broker {
    /// This broker, for work a request starts but does not wait for (an acks=all produce's
    /// fsync in durable mode: the request waits for the high watermark instead).
    pub(super) this: std::sync::Weak<Broker>,
    pub(super) config: ServerConfig,
    pub(super) io: Io,
    /// The first log directory: the metadata log's.
    pub(super) log_dir: PathBuf,
    /// Every log directory and the partitions placed in each (`log_dirs`).
    pub(super) dirs: log_dirs::LogDirs,
    pub(super) cluster_id: String,
    pub(super) controller: Controller,
    /// Writers serialise here (a commit awaits the quorum's commit and its application here).
    pub(super) metadata: tokio::sync::Mutex<()>,
    /// The metadata quorum's driver: it owns the metadata log (of one voter on a single node).
    pub(super) quorum: Arc<QuorumHandle>,
    /// What readers see: replaced after each commit.
    pub(super) image: RwLock<Arc<MetadataImage>>,
    /// The committed metadata records, in order (`committed_metadata`).
    pub(super) committed: AppliedRecords,
    pub(super) partitions: RwLock<BTreeMap<(String, i32), Arc<PartitionHandle>>>,
    /// The bound on delayed operations (waiting produces and fetches) across all partitions;
    /// each partition keeps its own waiters (`PartitionHandle::waiters`).
    pub(super) wait_budget: Arc<delayed::WaitBudget>,
    /// The consumer-group coordinator and its driver state.
    pub(super) groups: Groups,
    /// The transaction coordinator and its driver state.
    pub(super) txns: Txns,
    /// The active controller's core: broker sessions, producer ids, timers
    /// (`drivers::active_controller`).
    pub(super) active_controller: ActiveControllerState,
    /// The address clients are told to use (known once the listener is bound).
    pub(super) advertised: RwLock<(String, u16)>,
    /// The other client listeners' advertised endpoints (each serves clients too, with its
    /// own security), in `listeners` order.
    pub(super) more_advertised: RwLock<Vec<crate::controller::BrokerEndpoint>>,
    pub(super) shutdown: watch::Sender<bool>,
    /// Offline after a failed fsync: nothing is served or written any more.
    pub(super) health: LogDirHealth,
    /// The image offset the local partitions last matched (`reconcile`); -1: never.
    pub(super) reconciled: AtomicI64,
    /// Held by whoever reconciles (the quorum driver after a commit, the background loop's
    /// retries), so two passes never open or delete the same partition at once.
    pub(super) reconcile_gate: tokio::sync::Mutex<()>,
    /// This broker's own session with the active controller (in a cluster).
    pub(super) session: SessionState,
    /// The follower side: one fetcher per leader broker (`replica_fetcher`).
    pub(super) replica_fetchers: ReplicaFetchers,
    /// Replicas moving between this broker's log directories (`dir_mover`).
    pub(super) dir_moves: DirMoves,
    /// No partition role before the registration is applied (`startup_gate`).
    pub(super) startup_gate: StartupGate,
    /// Who is told of follower truncations (the simulator's trace), if anyone.
    pub(super) replication_events: replication_events::ReplicationEvents,
    /// The ACL authorizer's settings, when `authorizer.class.name` configures one.
    pub(super) authorizer: Option<Arc<crate::acl::AuthorizerSettings>>,
    /// Counters and histograms (the gauges are computed per scrape: `metrics_scrape`).
    pub(super) metrics: crate::metrics::Metrics,
    /// Client quota rates (`handlers::security::throttle`).
    pub(super) quotas: std::sync::Mutex<crate::quota::ClientQuotaCore>,
    /// Replication throttles (`handlers::records::replication_throttle`).
    pub(super) replication_throttles:
        std::sync::Mutex<crate::quota::replication::ReplicationThrottles>,
    /// Open client connections against `max.connections*` (`connection_slot`).
    pub(super) connections: Counts,
    /// TLS and SASL towards the other brokers' inter-broker listener (replica fetches,
    /// transaction markers); `None`: PLAINTEXT.
    pub(super) inter_broker_dialer: Option<Arc<peer::Dialer>>,
}

impl Broker {
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    pub fn io(&self) -> &Io {
        &self.io
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().unwrap().clone()
    }

    /// Tells `observer` of every follower truncation from now on (set once; `false` if an
    /// observer was already set).
    pub fn observe_replication(&self, observer: replication_events::ReplicationObserver) -> bool {
        self.replication_events.set(observer)
    }

    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<PartitionHandle>> {
        // Looked up by the borrowed name: no `String` built per look-up (the fetch path, the
        // replica fetchers and every reconciliation ask here).
        let key: &dyn PartitionKey = &(topic, index);
        self.partitions.read().unwrap().get(key).cloned()
    }

    /// Where `topic`-`index`'s data is: the directory it was placed in or, new here, the one
    /// `log_dirs` places it in now.
    pub(super) fn partition_dir(&self, topic: &str, index: i32) -> PathBuf {
        let name = format!("{topic}-{index}");
        let located = self
            .dirs
            .locate(topic, index, |d| self.io.disk.exists(&d.join(&name)));
        // Every directory failed: the broker is offline, and nothing is written there.
        located.unwrap_or_else(|| self.log_dir.clone()).join(name)
    }

    /// Whether `topic`-`index` cannot be served here: its directory failed (or all did).
    pub fn is_partition_offline(&self, topic: &str, index: i32) -> bool {
        self.health.is_offline() || self.dirs.is_offline(topic, index)
    }

    /// The log directories as DescribeLogDirs shows them.
    pub fn log_dir_views(&self) -> Vec<log_dirs::DirView> {
        self.dirs.views()
    }

    /// A topic's effective config here: its overrides over this broker's topic defaults.
    pub(super) fn topic_config(&self, topic: &str) -> Option<TopicConfig> {
        let image = self.image();
        image.topic(topic).map(|t| {
            self.controller
                .topic_config_on(&image, self.config.node_id, t)
        })
    }

    /// This broker's topic defaults: the static `log.*` keys under the dynamic broker configs.
    pub(super) fn topic_defaults(&self) -> TopicConfig {
        self.controller
            .topic_defaults_on(&self.image(), self.config.node_id)
    }

    /// Whether this node decides metadata: the quorum leader once its epoch's LeaderChange is
    /// applied (a single node from its start on).
    pub fn is_active_controller(&self) -> bool {
        self.quorum.is_active()
    }

    pub(super) fn topic_partitions(&self, topic: &str) -> Vec<Arc<PartitionHandle>> {
        let partitions = self.partitions.read().unwrap();
        partitions
            .range((topic.to_string(), i32::MIN)..=(topic.to_string(), i32::MAX))
            .map(|(_, h)| h.clone())
            .collect()
    }

    pub(super) fn all_partitions(&self) -> Vec<Arc<PartitionHandle>> {
        self.partitions.read().unwrap().values().cloned().collect()
    }

    /// The open partitions whose log directory has not failed.
    pub(super) fn online_partitions(&self) -> Vec<Arc<PartitionHandle>> {
        let partitions = self.partitions.read().unwrap();
        if !self.dirs.any_offline() {
            return partitions.values().cloned().collect();
        }
        partitions
            .iter()
            .filter(|((topic, index), _)| !self.dirs.is_offline(topic, *index))
            .map(|(_, h)| h.clone())
            .collect()
    }

    /// Fails once `topic`-`index`'s log directory (or every directory) is offline.
    pub(super) fn check_partition_online(&self, topic: &str, index: i32) -> io::Result<()> {
        self.check_online()?;
        if self.dirs.is_offline(topic, index) {
            return Err(io::Error::other(format!(
                "the log directory of {topic}-{index} is offline"
            )));
        }
        Ok(())
    }

    /// Fails once the log directory is offline.
    pub(super) fn check_online(&self) -> io::Result<()> {
        match self.health.reason() {
            None => Ok(()),
            Some(reason) => Err(io::Error::other(format!("log directory offline: {reason}"))),
        }
    }

    pub fn is_storage_offline(&self) -> bool {
        self.health.is_offline()
    }

    /// Resolves once the log directory has gone offline, with the reason. A supervisor then
    /// restarts the process (`weir serve` exits).
    pub async fn storage_offline(&self) -> String {
        self.health.offline().await
    }

    /// Stops every task of this node at once, as a crash would (no resignation, nothing
    /// flushed or marked clean): for in-process cluster tests. The data directory is left as a
    /// killed process leaves it.
    pub fn halt(&self) {
        let _ = self.shutdown.send(true);
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// A link to another broker's inter-broker listener at `addr`, reached as `host`, secured
    /// as that listener asks.
    pub(crate) fn inter_broker_link(&self, addr: SocketAddr, host: &str) -> peer::Link {
        let security = self
            .inter_broker_dialer
            .clone()
            .map(|d| (d, host.to_string()));
        peer::Link::secured(&self.io, addr, self.shutdown_signal(), security)
    }

    /// One request to another broker's inter-broker listener, answered within `timeout`:
    /// encoded, sent on a link secured as that listener asks, and decoded; the error says why.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn inter_broker_call(
        &self,
        addr: SocketAddr,
        host: &str,
        client_id: &str,
        key: kafka_protocol::messages::ApiKey,
        version: i16,
        body: &kafka_protocol::messages::RequestKind,
        timeout: std::time::Duration,
    ) -> Result<kafka_protocol::messages::ResponseKind, String> {
        let frame =
            peer::encode_request(key, version, client_id, body).map_err(|e| e.to_string())?;
        let link = self.inter_broker_link(addr, host);
        let reply = tokio::select! {
            biased;
            r = link.call(frame) => r.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?,
            _ = self.io.clock.sleep(timeout) => return Err("timed out".into()),
        };
        peer::decode_response(key, version, reply).map_err(|e| e.to_string())
    }
    /// This node's view of the metadata quorum.
    pub fn quorum_status(&self) -> QuorumStatus {
        self.quorum.status()
    }

    /// Committed metadata records this node applied, from offset `from`, at most `max`:
    /// (offset, the record's raw value bytes). For the simulator's prefix check.
    pub fn committed_metadata(&self, from: u64, max: usize) -> Vec<(u64, Bytes)> {
        self.committed.read(from, max)
    }
}
