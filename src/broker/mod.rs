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
mod metadata_commit;
mod partition_metadata;
mod partition_storage;
mod peer;
mod replayed_stream;
pub mod replication_events;
mod secure_connection;
mod server;
mod shared;
mod startup_gate;
mod state;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::sync::watch;

use crate::config::ServerConfig;
use crate::controller::{Controller, MetadataImage};
use crate::io::Io;
use drivers::quorum::applied::AppliedRecords;
pub use drivers::reconcile::Leadership;
pub use drivers::{quorum, quorum_status, replica_fetcher};
use health::LogDirHealth;
pub use identity::format_log_dir;
pub use shared::Broker;
pub use state::{Lifecycle, PartitionHandle};

/// How long a cluster broker waits at shutdown for the controller to move its leaderships.
const CONTROLLED_SHUTDOWN_MS: u64 = 10_000;

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
        let dir_moves = drivers::dir_mover::state::DirMoves::new(
            config.replica_fetch_max_bytes,
            Duration::from_millis(config.replica_fetch_backoff_ms),
        );
        let broker = Arc::new_cyclic(|this| Broker {
            this: this.clone(),
            active_controller: drivers::active_controller::state::ActiveControllerState::new(
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
            groups: drivers::group_coordinator::state::Groups::new(group_config),
            txns: drivers::txn_coordinator::state::Txns::new(),
            advertised: RwLock::new(advertised),
            more_advertised: RwLock::default(),
            shutdown,
            health: LogDirHealth::new(),
            reconciled: AtomicI64::new(-1),
            reconcile_gate: tokio::sync::Mutex::new(()),
            session: drivers::broker_session::state::SessionState::default(),
            replica_fetchers: drivers::replica_fetcher::state::ReplicaFetchers::default(),
            dir_moves,
            startup_gate: startup_gate::state::StartupGate::default(),
            replication_events: replication_events::ReplicationEvents::default(),
            metrics: crate::metrics::Metrics::new(),
            quotas: std::sync::Mutex::new(crate::quota::ClientQuotaCore::new(quota_windows)),
            replication_throttles: Default::default(),
            connections: connection_slot::state::new_counts(quota_windows),
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
        io.spawn(partition_storage::background_loop(broker.clone()));
        io.spawn(drivers::active_controller::run(broker.clone()));
        io.spawn(drivers::cleaning::cleaner_loop(broker.clone()));
        io.spawn(drivers::dir_mover::mover_loop(broker.clone()));
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

/// The address a listener binds: an empty host is every interface (as in Kafka), a name is
/// resolved through the `io` layer (`listeners=PLAINTEXT://localhost:9092` works).
async fn listener_addr(io: &Io, host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    io.net
        .resolve(host, port)
        .await
        .map_err(|e| anyhow::anyhow!("listener {host}:{port}: {e}"))
}
