//! The broker: wires the configuration, the controller, the partitions and the network
//! together, and answers Kafka requests. Rooms: `api` (request context, the one header decode,
//! framing, the route table's shape), `handlers` (the route table and the handlers by area,
//! which translate wire types to core calls and back, so nothing below this layer sees the
//! wire), `drivers` (the cores' drivers and their state), `server` (the connection loop), and
//! this file's `Broker`, the wiring. No two broker modules import each other
//! (`tests/broker_rooms.rs`).

mod api;
pub mod bootstrap_records;
mod connection_slot;
pub mod delayed;
mod drivers;
mod errors;
mod handlers;
mod health;
pub mod identity;
pub mod log_dirs;
mod peer;
mod replayed_stream;
pub mod replication_events;
mod secure_connection;
mod server;
mod startup_gate;
mod state;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use uuid::Uuid;

use crate::config::{ServerConfig, TopicConfig};
use crate::controller::{Controller, ControllerError, MetadataImage, MetadataRecord};
use crate::io::{read_file, write_file_atomic, Io};
use crate::log::Log;
use crate::replica::Partition;
use drivers::quorum::applied::{AppliedRecords, METADATA_DIR};
use drivers::reconcile::plan::{effects, Delta, Effect};
pub use drivers::reconcile::Leadership;
pub use drivers::{quorum, quorum_status, replica_fetcher};
use health::LogDirHealth;
pub use identity::format_log_dir;
pub use state::{Lifecycle, PartitionHandle};

/// How long a metadata change waits for the quorum's commit before REQUEST_TIMED_OUT.
const METADATA_COMMIT_TIMEOUT_MS: u64 = 10_000;

/// How long a cluster broker waits at shutdown for the controller to move its leaderships.
const CONTROLLED_SHUTDOWN_MS: u64 = 10_000;

/// File in each partition directory naming the topic id it belongs to (Kafka's name).
const PARTITION_METADATA: &str = "partition.metadata";

/// Why a metadata change did not happen.
#[derive(Debug)]
pub enum CommitError {
    /// The controller refused it (it does not fit the current metadata).
    Rejected(ControllerError),
    /// It could not be made durable.
    Storage(io::Error),
    /// This node is not the active controller (no leader known, or leadership moved).
    NotController,
    /// The quorum did not commit it in time (it may still commit).
    Timeout,
    /// The active controller refused it, with this code and message (the change was relayed
    /// to it).
    Remote(kafka_protocol::error::ResponseError, Option<String>),
}

impl std::fmt::Display for CommitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommitError::Rejected(e) => write!(f, "{e}"),
            CommitError::Storage(e) => write!(f, "could not persist metadata: {e}"),
            CommitError::NotController => f.write_str("this node is not the active controller"),
            CommitError::Timeout => f.write_str("the metadata quorum did not commit in time"),
            CommitError::Remote(code, message) => match message {
                Some(m) => write!(f, "the controller refused it: {code:?}: {m}"),
                None => write!(f, "the controller refused it: {code:?}"),
            },
        }
    }
}

pub struct Broker {
    /// This broker, for work a request starts but does not wait for (an acks=all produce's
    /// fsync in durable mode: the request waits for the high watermark instead).
    this: std::sync::Weak<Broker>,
    config: ServerConfig,
    io: Io,
    /// The first log directory: the metadata log's.
    log_dir: PathBuf,
    /// Every log directory and the partitions placed in each (`log_dirs`).
    dirs: log_dirs::LogDirs,
    cluster_id: String,
    controller: Controller,
    /// Writers serialise here (a commit awaits the quorum's commit and its application here).
    metadata: tokio::sync::Mutex<()>,
    /// The metadata quorum's driver: it owns the metadata log (of one voter on a single node).
    quorum: Arc<drivers::quorum::QuorumHandle>,
    /// What readers see: replaced after each commit.
    image: RwLock<Arc<MetadataImage>>,
    /// The committed metadata records, in order (`committed_metadata`).
    committed: AppliedRecords,
    partitions: RwLock<BTreeMap<(String, i32), Arc<PartitionHandle>>>,
    /// The bound on delayed operations (waiting produces and fetches) across all partitions;
    /// each partition keeps its own waiters (`PartitionHandle::waiters`).
    wait_budget: Arc<delayed::WaitBudget>,
    /// The consumer-group coordinator and its driver state.
    groups: drivers::group_coordinator::Groups,
    /// The transaction coordinator and its driver state.
    txns: drivers::txn_coordinator::Txns,
    /// The active controller's core: broker sessions, producer ids, timers
    /// (`drivers::active_controller`).
    active_controller: drivers::active_controller::ActiveControllerState,
    /// The address clients are told to use (known once the listener is bound).
    advertised: RwLock<(String, u16)>,
    /// The other client listeners' advertised endpoints (each serves clients too, with its
    /// own security), in `listeners` order.
    more_advertised: RwLock<Vec<crate::controller::BrokerEndpoint>>,
    shutdown: watch::Sender<bool>,
    /// Offline after a failed fsync: nothing is served or written any more.
    health: LogDirHealth,
    /// The image offset the local partitions last matched (`reconcile`); -1: never.
    reconciled: AtomicI64,
    /// Held by whoever reconciles (the quorum driver after a commit, the background loop's
    /// retries), so two passes never open or delete the same partition at once.
    reconcile_gate: tokio::sync::Mutex<()>,
    /// This broker's own session with the active controller (in a cluster).
    session: drivers::broker_session::SessionState,
    /// The follower side: one fetcher per leader broker (`replica_fetcher`).
    replica_fetchers: drivers::replica_fetcher::ReplicaFetchers,
    /// No partition role before the registration is applied (`startup_gate`).
    startup_gate: startup_gate::StartupGate,
    /// Who is told of follower truncations (the simulator's trace), if anyone.
    replication_events: replication_events::ReplicationEvents,
    /// The ACL authorizer's settings, when `authorizer.class.name` configures one.
    authorizer: Option<Arc<crate::acl::AuthorizerSettings>>,
    /// Counters and histograms (the gauges are computed per scrape: `metrics_scrape`).
    metrics: crate::metrics::Metrics,
    /// Client quota rates (`handlers::security::throttle`).
    quotas: std::sync::Mutex<crate::quota::ClientQuotaCore>,
    /// Replication throttles (`handlers::records::replication_throttle`).
    replication_throttles: std::sync::Mutex<crate::quota::replication::ReplicationThrottles>,
    /// Open client connections against `max.connections*` (`connection_slot`).
    connections: connection_slot::Counts,
    /// TLS and SASL towards the other brokers' inter-broker listener (replica fetches,
    /// transaction markers); `None`: PLAINTEXT.
    inter_broker_dialer: Option<Arc<peer::Dialer>>,
}

/// A running broker: its address and the way to stop it.
pub struct RunningBroker {
    pub broker: Arc<Broker>,
    /// The client listener (a pure controller: its controller listener).
    pub local_addr: SocketAddr,
    /// The controller listener, when `listeners` names one.
    pub controller_addr: Option<SocketAddr>,
}

impl Broker {
    /// Opens the data directory (recovering it), binds the listeners and starts serving. The
    /// metadata comes from the quorum driver, which starts here too: in a cluster (voters other
    /// than this node) the image fills as commits are learned; a single node is its own quorum
    /// of one, elects itself at once, and is registered and serving its partitions when this
    /// returns.
    pub async fn start(config: ServerConfig, io: Io) -> anyhow::Result<RunningBroker> {
        let paths: Vec<PathBuf> = config.log_dirs.iter().map(PathBuf::from).collect();
        let identity::OpenedDirs {
            cluster_id,
            online,
            failed,
        } = identity::load_log_dirs(&io, &paths, config.node_id, !config.needs_formatting())
            .await?;
        // The metadata log and the clean-shutdown file live in the first (`log_dirs`).
        let log_dir = online[0].0.clone();
        let dirs = log_dirs::LogDirs::new(online);
        for (path, reason) in failed {
            dirs.add_failed(path, reason);
        }
        let (shutdown, _) = watch::channel(false);
        let clustered = config.is_clustered();
        let (quorum, starter) = drivers::quorum::open(
            &io,
            &config,
            log_dir.clone(),
            cluster_id.clone(),
            shutdown.subscribe(),
        )
        .await?;
        // The node starts from the metadata snapshot it loaded (if any); the records after it
        // are applied as their commit is learned.
        let committed = AppliedRecords::default();
        let image = Arc::new(match starter.initial_image() {
            Some((image, end)) => {
                committed.advance_to(end);
                image
            }
            None => MetadataImage::default(),
        });
        let mut controller = Controller::new(
            config.num_partitions,
            config.default_replication_factor,
            config.delete_topic_enable,
            config.topic_defaults.clone(),
        );
        controller.set_unclean_leader_election(config.unclean_leader_election_enable);
        controller.set_recovery(crate::controller::RecoverySettings {
            enabled: config.unclean_recovery_manager_enabled,
            timeout_ms: config.unclean_recovery_timeout_ms,
            strategy: crate::controller::election::RecoveryStrategy::parse(
                config.topic_defaults.unclean_recovery_strategy(),
            ),
        });
        controller.set_group_bounds(config.group_config_bounds.clone());
        #[cfg(any(madsim, test))]
        controller.set_planted(crate::config::planted::Planted::new(config.planted_bug));
        // Key and trust stores are read now, so a bad one stops the start.
        for e in &config.listeners {
            secure_connection::Secure::for_listener(&config, &io, &e.listener_name)
                .map_err(|err| anyhow::anyhow!("listener '{}': {err}", e.listener_name))?;
        }
        let inter_broker_dialer = match clustered && config.is_broker() {
            true => {
                let outbound = config.inter_broker_outbound()?;
                peer::Dialer::new(&outbound, &io).map_err(|e| {
                    anyhow::anyhow!("inter-broker listener '{}': {e}", outbound.listener)
                })?
            }
            false => None,
        };
        let endpoint = config.broker_endpoints().into_iter().next();
        if endpoint.is_none() && config.is_broker() {
            anyhow::bail!("no broker listener in 'listeners'");
        }
        let bind = match &endpoint {
            Some(e) => Some(listener_addr(&io, &e.host, e.port).await?),
            None => None,
        };
        let controller_bind = match config.controller_endpoint() {
            Some(e) => Some(listener_addr(&io, &e.host, e.port).await?),
            None => None,
        };
        let group_config = drivers::group_coordinator::group_config(&config);
        let advertised = endpoint
            .as_ref()
            .map(|e| (e.host.clone(), e.port))
            .unwrap_or_default();
        let quota_windows = crate::quota::QuotaWindows {
            samples: config.quota_window_num,
            window: Duration::from_secs(config.quota_window_size_seconds.into()),
        };
        let broker = Arc::new_cyclic(|this| Broker {
            this: this.clone(),
            active_controller: drivers::active_controller::ActiveControllerState::new(
                &config,
                controller.clone(),
            ),
            authorizer: handlers::security::authz::settings(&config),
            config,
            io: io.clone(),
            log_dir,
            dirs,
            cluster_id,
            controller,
            committed,
            metadata: tokio::sync::Mutex::new(()),
            quorum,
            image: RwLock::new(image),
            partitions: RwLock::new(BTreeMap::new()),
            wait_budget: delayed::WaitBudget::new(delayed::MAX_WAITERS),
            groups: drivers::group_coordinator::Groups::new(group_config),
            txns: drivers::txn_coordinator::Txns::new(),
            advertised: RwLock::new(advertised),
            more_advertised: RwLock::default(),
            shutdown,
            health: LogDirHealth::new(),
            reconciled: AtomicI64::new(-1),
            reconcile_gate: tokio::sync::Mutex::new(()),
            session: drivers::broker_session::SessionState::default(),
            replica_fetchers: drivers::replica_fetcher::ReplicaFetchers::default(),
            startup_gate: startup_gate::StartupGate::default(),
            replication_events: replication_events::ReplicationEvents::default(),
            metrics: crate::metrics::Metrics::new(),
            quotas: std::sync::Mutex::new(crate::quota::ClientQuotaCore::new(quota_windows)),
            replication_throttles: Default::default(),
            connections: connection_slot::new_counts(quota_windows),
            inter_broker_dialer,
        });
        // The client listener is bound first so that the registration carries the real port
        // (port 0 in tests); nothing is accepted before its accept loop starts, below. A
        // clustered broker serves clients only once ready (`startup_gate`): a fixed port is
        // then bound only at that point, as Kafka defers opening it, so that a listening port
        // means a serving broker; here it is only checked to be free, to fail at start.
        let gated = clustered && broker.config.is_broker();
        let client_listener = match bind {
            Some(bind) if gated && bind.port() != 0 => {
                drop(io.net.bind(bind).await?);
                *broker.advertised.write().unwrap() = broker.advertised_endpoint(bind, None);
                Some((ClientListener::Deferred, bind))
            }
            Some(bind) => {
                let listener = io.net.bind(bind).await?;
                let local_addr = listener.local_addr()?;
                *broker.advertised.write().unwrap() = broker.advertised_endpoint(local_addr, None);
                Some((ClientListener::Bound(listener), local_addr))
            }
            None => None,
        };
        // Every other client listener, bound (or checked free) the same way.
        let mut more_listeners = Vec::new();
        for e in broker.config.broker_endpoints().into_iter().skip(1) {
            let bind = listener_addr(&io, &e.host, e.port).await?;
            let (listener, bound) = if gated && bind.port() != 0 {
                drop(io.net.bind(bind).await?);
                (ClientListener::Deferred, bind)
            } else {
                let listener = io.net.bind(bind).await?;
                let bound = listener.local_addr()?;
                (ClientListener::Bound(listener), bound)
            };
            let (host, port) = broker.advertised_endpoint(bound, Some(&e.listener_name));
            broker
                .more_advertised
                .write()
                .unwrap()
                .push(crate::controller::BrokerEndpoint {
                    name: e.listener_name.clone(),
                    host,
                    port,
                });
            more_listeners.push((listener, bound, e.listener_name));
        }
        let controller_addr = match controller_bind {
            Some(addr) => {
                let listener = io.net.bind(addr).await.map_err(|e| {
                    anyhow::anyhow!("cannot bind the controller listener {addr}: {e}")
                })?;
                let bound = listener.local_addr()?;
                tracing::info!(%bound, "controller listener bound");
                let name = broker.config.controller_endpoint().map(|e| e.listener_name);
                io.spawn({
                    let broker = broker.clone();
                    async move {
                        let name = name.unwrap_or_default();
                        let kind = api::ListenerKind::Controller;
                        server::accept_loop(broker, listener, kind, &name).await
                    }
                });
                Some(bound)
            }
            None => None,
        };
        starter.start(broker.clone());
        if !clustered {
            // Its own quorum of one: once elected, its image holds the whole log, so
            // directories it does not know are stale (in a cluster the image fills as commits
            // are learned: removing them would delete live data).
            broker.wait_sole_voter_active().await?;
            broker.register_single_node().await?;
            broker.open_partitions().await?;
        }
        let local_addr = match client_listener {
            Some((listener, local_addr)) => {
                let name = handlers::topics::metadata::client_listener(&broker);
                io.spawn(serve_clients_when_ready(
                    broker.clone(),
                    listener,
                    local_addr,
                    name,
                ));
                for (listener, bound, name) in more_listeners {
                    io.spawn(serve_clients_when_ready(
                        broker.clone(),
                        listener,
                        bound,
                        name,
                    ));
                }
                local_addr
            }
            None => controller_addr.expect("a node without a broker listener is a controller"),
        };
        if clustered && broker.config.is_broker() {
            // The broker registers with the active controller and heartbeats.
            broker.take_clean_shutdown_epoch();
            io.spawn(drivers::broker_session::run(broker.clone()));
            // Leaders' ISR changes go to the same controller.
            io.spawn(drivers::isr::run(broker.clone()));
        }
        tracing::info!(%local_addr, cluster_id = %broker.cluster_id, node_id = broker.config.node_id,
            clustered, "weir node listening");
        drivers::metrics_endpoint::start(&broker).await?;
        broker.start_offsets_load();
        io.spawn(background_loop(broker.clone()));
        io.spawn(drivers::active_controller::run(broker.clone()));
        io.spawn(drivers::cleaning::cleaner_loop(broker.clone()));
        io.spawn(drivers::group_coordinator::timer_loop(broker.clone()));
        io.spawn(drivers::txn_coordinator::timer_loop(broker.clone()));
        Ok(RunningBroker {
            broker,
            local_addr,
            controller_addr,
        })
    }

    /// What listener `name` (None: the first client listener) advertises, bound at `bound`.
    fn advertised_endpoint(&self, bound: SocketAddr, name: Option<&str>) -> (String, u16) {
        let listener = match name {
            Some(name) => Some(name.to_string()),
            None => (self.config.broker_endpoints().into_iter().next()).map(|l| l.listener_name),
        };
        let advertised = self
            .config
            .advertised_listeners
            .iter()
            .find(|a| listener.as_ref().is_some_and(|l| *l == a.listener_name))
            .cloned();
        let wildcard =
            |host: &str| host.is_empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
        let (host, port) = match advertised {
            Some(a) => (a.host, if a.port != 0 { a.port } else { bound.port() }),
            None => (bound.ip().to_string(), bound.port()),
        };
        if wildcard(&host) {
            // Clients cannot connect to a wildcard address: only local ones can be served.
            tracing::warn!(
                "the broker listens on a wildcard address and advertised.listeners is not set; \
                advertising 127.0.0.1 (set advertised.listeners for remote clients)"
            );
            return ("127.0.0.1".to_string(), port);
        }
        (host, port)
    }

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
        self.partitions
            .read()
            .unwrap()
            .get(&(topic.to_string(), index))
            .cloned()
    }

    /// Where `topic`-`index`'s data is: the directory it was placed in or, new here, the one
    /// `log_dirs` places it in now.
    fn partition_dir(&self, topic: &str, index: i32) -> PathBuf {
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
    fn topic_config(&self, topic: &str) -> Option<TopicConfig> {
        let image = self.image();
        image.topic(topic).map(|t| {
            self.controller
                .topic_config_on(&image, self.config.node_id, t)
        })
    }

    /// This broker's topic defaults: the static `log.*` keys under the dynamic broker configs.
    fn topic_defaults(&self) -> TopicConfig {
        self.controller
            .topic_defaults_on(&self.image(), self.config.node_id)
    }

    /// Opens every partition the metadata knows; removes directories of deleted topics.
    async fn open_partitions(&self) -> io::Result<()> {
        // Serialised with the quorum's applier, which reconciles after each commit.
        let _gate = self.reconcile_gate.lock().await;
        let image = self.image();
        let known: BTreeMap<String, Uuid> = image
            .partitions_hosted_on(self.config.node_id)
            .filter_map(|((id, p), _)| {
                image
                    .topic_by_id(id)
                    .map(|t| (format!("{}-{p}", t.name), id))
            })
            .collect();
        for log_dir in self.dirs.online_paths() {
            for name in self.io.disk.list_dir(&log_dir)? {
                let dir = log_dir.join(&name);
                if name == METADATA_DIR || known.contains_key(&name) {
                    continue;
                }
                // A directory whose topic id is not in the metadata belongs to a deleted topic
                // (the delete crashed before removing it); one of a known topic that is not
                // placed here any more, to a replica that moved away. Anything else is left
                // alone.
                if read_topic_id(&self.io, &dir).is_some() {
                    tracing::info!(dir = %dir.display(), "removing data of a partition not hosted here");
                    self.io.disk.remove_dir_all(&dir)?;
                }
            }
        }
        self.reconcile().await
    }

    async fn open_partition(&self, topic: &str, id: Uuid, index: i32) -> io::Result<()> {
        let dir = self.partition_dir(topic, index);
        if self.dirs.is_offline(topic, index) {
            // Its directory failed: it stays closed until a restart (the controller knows).
            return Ok(());
        }
        match read_topic_id(&self.io, &dir) {
            Some(existing) if existing != id => {
                // Same name, other topic (re-created after a delete that did not finish).
                tracing::warn!(dir = %dir.display(), "removing stale data of an earlier topic with this name");
                self.io.disk.remove_dir_all(&dir)?;
            }
            _ => {}
        }
        let config = self
            .topic_config(topic)
            .unwrap_or_else(|| self.topic_defaults());
        let now = self.io.clock.wall_ms();
        let started = self.io.clock.monotonic();
        #[allow(unused_mut)]
        let mut options = crate::replica::partition::OpenOptions::default();
        #[cfg(any(madsim, test))]
        {
            options.planted = crate::config::planted::Planted::new(self.config.planted_bug);
        }
        let (mut partition, recovery) = Partition::open(
            self.io.disk.clone(),
            &dir,
            topic,
            index,
            config,
            options,
            now,
        )
        .await?;
        let took = self.io.clock.monotonic().saturating_sub(started);
        self.metrics.log_opened(took, !recovery.clean);
        partition.set_durable_reads(self.config.fsync_before_ack);
        let replicated = self
            .image()
            .partition(id, index)
            .is_some_and(|p| p.replicas.len() > 1);
        if replicated {
            // Its log end is not what was committed (see `forget_high_watermark`).
            partition.forget_high_watermark();
        }
        // Rebuilt state (from a snapshot or the log) may name producers long idle.
        let expired = partition.expire_producers(now, self.config.producer_id_expiration_ms);
        if expired > 0 {
            tracing::debug!(topic, partition = index, expired, "expired idle producers");
        }
        #[cfg(any(madsim, test))]
        if crate::planted!(self.config, NoReadCrc) {
            partition.log_mut().set_verify_reads(false);
        }
        write_topic_id(&self.io, &dir, id).await?;
        if !recovery.clean && (recovery.truncated_at.is_some() || recovery.segments_dropped > 0) {
            tracing::warn!(
                topic,
                partition = index,
                ?recovery,
                "recovered partition after unclean shutdown"
            );
        }
        let handle = Arc::new(PartitionHandle::new(partition, id, &self.wait_budget));
        self.partitions
            .write()
            .unwrap()
            .insert((topic.to_string(), index), handle);
        Ok(())
    }

    /// Decides a metadata change against the current image and makes it durable, all under the
    /// metadata lock (so two requests cannot both pass validation against the same image), then
    /// publishes the new image and applies the change to local partitions. With
    /// `validate_only`, only decides.
    async fn change_metadata<T>(
        &self,
        validate_only: bool,
        decide: impl FnOnce(
            &Controller,
            &MetadataImage,
        ) -> Result<(Vec<MetadataRecord>, T), ControllerError>,
    ) -> Result<T, CommitError> {
        self.change_metadata_until(None, validate_only, decide)
            .await
    }

    /// [`Broker::change_metadata`] for a client's request with its `deadline` (monotonic,
    /// `RequestContext::deadline`): it waits for the metadata lock at most until then, and once
    /// the deadline has passed decides nothing (REQUEST_TIMED_OUT), as Kafka's controller drops
    /// an event past its deadline. A request queued behind a stuck commit (a controller cut off
    /// from its quorum holds the lock up to the commit bound) must not be carried out seconds
    /// after its client gave up: the sweep caught one re-creating a topic deleted meanwhile.
    async fn change_metadata_until<T>(
        &self,
        deadline: Option<Duration>,
        validate_only: bool,
        decide: impl FnOnce(
            &Controller,
            &MetadataImage,
        ) -> Result<(Vec<MetadataRecord>, T), ControllerError>,
    ) -> Result<T, CommitError> {
        let _writer = match deadline {
            None => self.metadata.lock().await,
            Some(deadline) => {
                let wait = deadline.saturating_sub(self.io.clock.monotonic());
                let locked = self.io.timeout(wait, self.metadata.lock()).await;
                match locked {
                    Some(guard) if self.io.clock.monotonic() < deadline => guard,
                    _ => return Err(CommitError::Timeout),
                }
            }
        };
        self.commit_through_quorum(validate_only, decide).await
    }

    /// `change_metadata` (the caller holds the metadata lock, so writes are serial): on the
    /// active controller only, decide against the committed image, propose, and answer once
    /// the quorum has committed and this node applied the records.
    async fn commit_through_quorum<T>(
        &self,
        validate_only: bool,
        decide: impl FnOnce(
            &Controller,
            &MetadataImage,
        ) -> Result<(Vec<MetadataRecord>, T), ControllerError>,
    ) -> Result<T, CommitError> {
        let quorum = &self.quorum;
        if !quorum.is_active() {
            return Err(CommitError::NotController);
        }
        let image = self.image();
        let (records, out) = decide(&self.controller, &image).map_err(CommitError::Rejected)?;
        if validate_only || records.is_empty() {
            return Ok(out);
        }
        self.check_online().map_err(CommitError::Storage)?;
        let values = records
            .iter()
            .map(|r| serde_json::to_vec(r).map(Bytes::from))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CommitError::Storage(io::Error::other(e)))?;
        let limit = Duration::from_millis(METADATA_COMMIT_TIMEOUT_MS);
        match self.io.timeout(limit, quorum.propose(values)).await {
            Some(Ok(_)) => Ok(out),
            Some(Err(drivers::quorum::ProposeError::NotController)) => {
                Err(CommitError::NotController)
            }
            Some(Err(drivers::quorum::ProposeError::Stopped)) => Err(CommitError::Storage(
                io::Error::other("the metadata quorum stopped"),
            )),
            None => Err(CommitError::Timeout),
        }
    }

    /// Committed records from the quorum, in order (the driver calls this), published as the
    /// new image. A record this version cannot read is logged and skipped, never guessed at.
    pub(crate) async fn apply_committed(&self, values: &[(u64, Bytes)]) {
        if values.is_empty() {
            return;
        }
        let mut image = (*self.image()).clone();
        let mut parsed = Vec::with_capacity(values.len());
        for (offset, value) in values {
            self.committed.push(*offset, value.clone());
            match serde_json::from_slice::<MetadataRecord>(value) {
                Ok(record) => {
                    image.apply(*offset as i64, &record);
                    parsed.push(record);
                }
                Err(e) => {
                    tracing::error!(offset, error = %e, "unreadable committed metadata record skipped")
                }
            }
        }
        self.publish(Arc::new(image), Delta::Records(&parsed)).await;
    }

    /// Replaces the image with a snapshot's (loaded at start, or fetched from the quorum
    /// leader): everything below `end` is in it.
    pub(crate) async fn install_snapshot(&self, image: Arc<MetadataImage>, end: u64) {
        self.committed.advance_to(end);
        self.publish(image, Delta::Snapshot).await;
    }

    /// The one place a new image takes effect here: readers see it, the local partitions are
    /// reconciled with it (`reconcile::plan`, retried by the background loop if a pass fails:
    /// the change itself is committed), then the other local effects of `delta` are carried
    /// out (`reconcile::plan::effects`: the offsets topic, topic configs).
    async fn publish(&self, new: Arc<MetadataImage>, delta: Delta<'_>) {
        *self.image.write().unwrap() = new.clone();
        {
            // Serialised with the background loop's retries.
            let _gate = self.reconcile_gate.lock().await;
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %e, "reconciliation after a new image failed; will retry");
            }
        }
        for effect in effects(&new, self.config.node_id, &delta) {
            match effect {
                Effect::OffsetsTopic { partitions } => self.offsets_topic_created(partitions),
                Effect::ReconfigureTopic(name) => {
                    if let Some(config) = self.topic_config(&name) {
                        for handle in self.topic_partitions(&name) {
                            handle.lock().set_config(config.clone());
                        }
                    }
                }
                Effect::ReconfigureAll => self.reconfigure_all_topics(),
            }
        }
        self.note_client_readiness();
    }

    /// Gives every open partition its topic's current config (after the defaults changed).
    fn reconfigure_all_topics(&self) {
        let image = self.image();
        for topic in image.topics() {
            if let Some(config) = self.topic_config(&topic.name) {
                for handle in self.topic_partitions(&topic.name) {
                    handle.lock().set_config(config.clone());
                }
            }
        }
    }

    /// Whether this node decides metadata: the quorum leader once its epoch's LeaderChange is
    /// applied (a single node from its start on).
    pub fn is_active_controller(&self) -> bool {
        self.quorum.is_active()
    }

    fn topic_partitions(&self, topic: &str) -> Vec<Arc<PartitionHandle>> {
        let partitions = self.partitions.read().unwrap();
        partitions
            .range((topic.to_string(), i32::MIN)..=(topic.to_string(), i32::MAX))
            .map(|(_, h)| h.clone())
            .collect()
    }

    fn all_partitions(&self) -> Vec<Arc<PartitionHandle>> {
        self.partitions.read().unwrap().values().cloned().collect()
    }

    /// The open partitions whose log directory has not failed.
    fn online_partitions(&self) -> Vec<Arc<PartitionHandle>> {
        let partitions = self.partitions.read().unwrap();
        partitions
            .iter()
            .filter(|((topic, index), _)| !self.dirs.is_offline(topic, *index))
            .map(|(_, h)| h.clone())
            .collect()
    }

    /// Creates topics that a Metadata request named and auto-creation allows.
    async fn auto_create(&self, names: &[String]) -> Vec<(String, Result<(), CommitError>)> {
        let mut results = Vec::new();
        for name in names {
            let new = crate::controller::NewTopic {
                name: name.clone(),
                partitions: -1,
                replication_factor: -1,
                ..Default::default()
            };
            results.push((
                name.clone(),
                handlers::inter_node::forward::create_topic(self, new, false).await,
            ));
        }
        results
    }

    async fn create_topic(
        &self,
        new: crate::controller::NewTopic,
        validate_only: bool,
    ) -> Result<(), CommitError> {
        self.create_topic_until(None, new, validate_only, |_| Ok(()))
            .await
    }

    /// [`Broker::create_topic`] for a client's request with its deadline
    /// ([`Broker::change_metadata_until`]); `charge` sees the records decided (validated)
    /// and may still refuse them (the controller mutation quota).
    async fn create_topic_until(
        &self,
        deadline: Option<Duration>,
        new: crate::controller::NewTopic,
        validate_only: bool,
        charge: impl FnOnce(&[MetadataRecord]) -> Result<(), ControllerError>,
    ) -> Result<(), CommitError> {
        let id = Uuid::from_u64_pair(self.io.rng.next_u64(), self.io.rng.next_u64());
        let entropy = self.io.rng.next_u64();
        self.change_metadata_until(deadline, validate_only, |controller, image| {
            let records = controller.create_topic(image, &new, id, entropy)?;
            charge(&records)?;
            Ok((records, ()))
        })
        .await
    }

    /// fsyncs a partition up to `up_to`. Concurrent callers share one fsync (group commit).
    async fn flush_partition(&self, handle: &PartitionHandle, up_to: i64) -> io::Result<()> {
        if handle.lock().log().recovery_point() >= up_to {
            return Ok(());
        }
        let _gate = handle.flush_gate.lock().await;
        let (plan, key) = {
            let (partition, lifecycle) = handle.lock_with_lifecycle();
            // A deleted partition's data is gone with its topic: nothing left to make durable.
            if lifecycle == Lifecycle::Deleted || partition.log().recovery_point() >= up_to {
                return Ok(());
            }
            let key = (partition.topic().to_string(), partition.index());
            (partition.log().flush_plan(), key)
        };
        // Checked under the gate: a flush queued behind the one that failed must not run, or
        // its fsync could "succeed" over pages the failure dropped.
        self.check_partition_online(&key.0, key.1)?;
        if crate::planted!(self.config, RecoveryPointBeforeFsync) {
            handle.lock().flushed(&plan, self.io.clock.wall_ms());
        }
        let started = self.io.clock.monotonic();
        let synced = Log::sync_files(&plan).await;
        self.metrics
            .fsync(self.io.clock.monotonic().saturating_sub(started));
        if let Err(e) = synced {
            // Still under the gate, so no later flush of this partition runs first.
            self.partition_storage_failed(&key.0, key.1, "fsync of a partition", &e);
            return Err(e);
        }
        // In durable mode this moves the high watermark, which completes this partition's
        // waiting acks=all produces and wakes its long polls (through the guard).
        handle.lock().flushed(&plan, self.io.clock.wall_ms());
        Ok(())
    }

    /// A failed fsync (or a failed write of durable bookkeeping): the log directory goes
    /// offline for good (see `health`).
    fn storage_failed(&self, what: &str, e: &io::Error) {
        if crate::planted!(self.config, ServeAfterFsyncError) {
            return;
        }
        self.health.fail(format!("{what} failed: {e}"));
        // Every partition's waits end at once: produces with the storage error, long polls
        // re-read and answer it.
        for handle in self.all_partitions() {
            handle.waiters.close(delayed::Closed::Offline);
        }
    }

    /// An I/O error on `topic`-`index`'s files: its log directory goes offline for good, and
    /// with it only the partitions placed there (`log_dirs`); the broker as a whole once every
    /// directory has failed.
    fn partition_storage_failed(&self, topic: &str, index: i32, what: &str, e: &io::Error) {
        if crate::planted!(self.config, ServeAfterFsyncError) {
            return;
        }
        let reason = format!("{what} failed: {e}");
        let Some(failed) = self.dirs.fail_dir_of(topic, index, reason.clone()) else {
            if !self.dirs.is_offline(topic, index) {
                // Not placed in any directory (cannot happen for an open partition).
                self.storage_failed(what, e);
            }
            return;
        };
        if failed.all_offline {
            self.storage_failed(what, e);
            return;
        }
        tracing::error!(dir = %failed.path.display(), %reason, partitions = failed.partitions.len(),
            "log directory is offline: its partitions are not served until a restart; the \
             other directories keep serving");
        for (t, i) in &failed.partitions {
            if let Some(handle) = self.partition(t, *i) {
                handle.waiters.close(delayed::Closed::Offline);
            }
            self.stop_following(t, *i);
        }
    }

    /// [`Broker::partition_storage_failed`] for the partition behind `handle` (not locked by
    /// the caller).
    fn handle_storage_failed(&self, handle: &PartitionHandle, what: &str, e: &io::Error) {
        let (topic, index) = {
            let p = handle.lock();
            (p.topic().to_string(), p.index())
        };
        self.partition_storage_failed(&topic, index, what, e);
    }

    /// Fails once `topic`-`index`'s log directory (or every directory) is offline.
    fn check_partition_online(&self, topic: &str, index: i32) -> io::Result<()> {
        self.check_online()?;
        if self.dirs.is_offline(topic, index) {
            return Err(io::Error::other(format!(
                "the log directory of {topic}-{index} is offline"
            )));
        }
        Ok(())
    }

    /// Fails once the log directory is offline.
    fn check_online(&self) -> io::Result<()> {
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

    /// Stops accepting work and closes every log cleanly (flushed, checkpointed, marked clean).
    /// An offline log directory is left as it is: marking it clean would make the next start
    /// trust data a failed fsync may have dropped.
    pub async fn shutdown(&self) -> io::Result<()> {
        if self.config.is_clustered() && self.config.is_broker() && !self.is_storage_offline() {
            // Controlled shutdown: leaderships move away before this broker stops.
            if !self
                .controlled_shutdown(Duration::from_millis(CONTROLLED_SHUTDOWN_MS))
                .await
            {
                tracing::warn!("controlled shutdown not granted in time; stopping anyway");
            }
        }
        // Resign first (EndQuorumEpoch lets the others elect at once), while links run; the
        // driver then closes the metadata log.
        self.quorum
            .shutdown(&self.io, Duration::from_millis(2000))
            .await;
        let _ = self.shutdown.send(true);
        self.check_online()?;
        // A failed directory's partitions are left as they are (a restart recovers them).
        let handles = self.online_partitions();
        for handle in &handles {
            handle.set_lifecycle(Lifecycle::Stopping);
        }
        for handle in handles {
            // Closed above, so nothing is appended after this flush.
            let end = handle.lock().log_end_offset();
            self.flush_partition(&handle, end).await?;
            self.checkpoint_partition(&handle, true).await?;
        }
        if self.config.is_clustered()
            && self.config.is_broker()
            && self.dirs.offline_ids().is_empty()
        {
            // Every log is clean: the next start may say so (KIP-966).
            self.write_clean_shutdown_epoch().await?;
        }
        tracing::info!("weir broker stopped cleanly");
        Ok(())
    }

    /// Writes a partition's producer-state snapshot and recovery point; with `clean` (after a
    /// final flush) also the clean-shutdown marker.
    /// Skips a deleted partition. Holds the flush gate, so a delete cannot remove the directory
    /// (and a new topic of the same name take it) while the files are written.
    async fn checkpoint_partition(&self, handle: &PartitionHandle, clean: bool) -> io::Result<()> {
        self.check_online()?;
        let _gate = handle.flush_gate.lock().await;
        let (checkpoint, (snapshot_path, snapshot), key) = {
            let (p, lifecycle) = handle.lock_with_lifecycle();
            if lifecycle == Lifecycle::Deleted {
                return Ok(());
            }
            let key = (p.topic().to_string(), p.index());
            self.check_partition_online(&key.0, key.1)?;
            assert!(
                !clean || lifecycle == Lifecycle::Stopping,
                "a clean close stops appends first"
            );
            (p.log().checkpoint(), p.producer_snapshot(), key)
        };
        let written = async {
            write_file_atomic(self.io.disk.as_ref(), &snapshot_path, &snapshot).await?;
            if clean {
                checkpoint.write_clean().await
            } else {
                checkpoint.write().await
            }
        }
        .await;
        if let Err(e) = &written {
            self.partition_storage_failed(&key.0, key.1, "a checkpoint", e);
        }
        written
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
}

/// The client listener at start: bound, or (a clustered broker's fixed port) to be bound once
/// the broker is ready for clients.
enum ClientListener {
    Bound(Box<dyn crate::io::Listener>),
    Deferred,
}

/// Waits for the client gate (`startup_gate`; open at once for a single node), then binds the
/// client listener if deferred and accepts. A port taken since the start check is retried:
/// the process stays up for its partitions and the controller it may host.
async fn serve_clients_when_ready(
    broker: Arc<Broker>,
    listener: ClientListener,
    addr: SocketAddr,
    name: String,
) {
    if !broker.wait_ready_for_clients().await {
        return;
    }
    let listener = match listener {
        ClientListener::Bound(l) => l,
        ClientListener::Deferred => loop {
            match broker.io.net.bind(addr).await {
                Ok(l) => break l,
                Err(e) => {
                    tracing::error!(%addr, error = %e, "cannot bind the client listener; retrying");
                    let mut shutdown = broker.shutdown_signal();
                    tokio::select! {
                        biased;
                        _ = shutdown.wait_for(|stop| *stop) => return,
                        _ = broker.io.clock.sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        },
    };
    tracing::info!(%addr, listener = %name, "client listener serving");
    server::accept_loop(broker, listener, api::ListenerKind::Client, &name).await;
}

/// Periodic work: retention, time-based flushes, recovery-point checkpoints.
async fn background_loop(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    let tick = Duration::from_millis(
        broker
            .config
            .log_flush_scheduler_interval_ms
            .clamp(10, 1000),
    );
    let retention_every =
        Duration::from_millis(broker.config.log_retention_check_interval_ms.max(10));
    let mut since_retention = Duration::ZERO;
    let mut since_checkpoint = Duration::ZERO;
    let mut since_expiry = Duration::ZERO;
    let expiry_every = Duration::from_millis(
        broker
            .config
            .producer_id_expiration_check_interval_ms
            .max(10),
    );
    let checkpoint_every = Duration::from_millis(
        broker
            .config
            .log_flush_offset_checkpoint_interval_ms
            .max(10),
    );
    loop {
        tokio::select! {
            biased;
            _ = broker.io.clock.sleep(tick) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        if broker.is_storage_offline() {
            // Nothing is written to an offline directory; the process waits to be restarted.
            continue;
        }
        broker.reconcile_if_behind().await;
        since_retention += tick;
        since_checkpoint += tick;
        since_expiry += tick;
        let now = broker.io.clock.wall_ms();
        for handle in broker.online_partitions() {
            let (due, end) = {
                let p = handle.lock();
                let c = p.config();
                (
                    p.log().flush_due(c.flush_messages, c.flush_ms, now),
                    p.log().end_offset(),
                )
            };
            if due {
                if let Err(e) = broker.flush_partition(&handle, end).await {
                    tracing::error!(error = %e, "scheduled flush failed");
                }
            }
        }
        if since_retention >= retention_every {
            since_retention = Duration::ZERO;
            for handle in broker.online_partitions() {
                let (mut p, lifecycle) = handle.lock_with_lifecycle();
                // A deleted partition's directory may already hold a new topic's segments.
                if lifecycle == Lifecycle::Deleted {
                    continue;
                }
                match p.apply_retention(now) {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(
                        topic = p.topic(),
                        partition = p.index(),
                        segments = n,
                        "retention deleted segments"
                    ),
                    Err(e) => tracing::error!(error = %e, "retention failed"),
                }
            }
        }
        if since_expiry >= expiry_every {
            since_expiry = Duration::ZERO;
            let expiration_ms = broker.config.producer_id_expiration_ms;
            for handle in broker.online_partitions() {
                let mut p = handle.lock();
                let expired = p.expire_producers(now, expiration_ms);
                if expired > 0 {
                    tracing::debug!(
                        topic = p.topic(),
                        partition = p.index(),
                        expired,
                        "expired idle producers (producer.id.expiration.ms)"
                    );
                }
            }
        }
        if since_checkpoint >= checkpoint_every {
            since_checkpoint = Duration::ZERO;
            for handle in broker.online_partitions() {
                if let Err(e) = broker.checkpoint_partition(&handle, false).await {
                    tracing::warn!(error = %e, "partition checkpoint failed");
                }
            }
        }
    }
}

/// The address a listener binds: an empty host is every interface (as in Kafka), a name is
/// resolved through the `io` layer (`listeners=PLAINTEXT://localhost:9092` works).
async fn listener_addr(io: &Io, host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    io.net
        .resolve(host, port)
        .await
        .map_err(|e| anyhow::anyhow!("listener {host}:{port}: {e}"))
}

fn read_topic_id(io: &Io, dir: &Path) -> Option<Uuid> {
    let raw = read_file(io.disk.as_ref(), &dir.join(PARTITION_METADATA)).ok()?;
    let text = String::from_utf8(raw).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("topic_id: "))
        .and_then(|id| Uuid::parse_str(id.trim()).ok())
}

async fn write_topic_id(io: &Io, dir: &Path, id: Uuid) -> io::Result<()> {
    if read_topic_id(io, dir) == Some(id) {
        return Ok(());
    }
    let text = format!("version: 0\ntopic_id: {id}\n");
    write_file_atomic(
        io.disk.as_ref(),
        &dir.join(PARTITION_METADATA),
        text.as_bytes(),
    )
    .await
}
