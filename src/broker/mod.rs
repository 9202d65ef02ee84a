//! The broker: wires the configuration, the controller, the partitions and the network
//! together, and answers Kafka requests. Request handlers live one API family per file; they
//! translate wire types to core calls and back, so nothing below this layer sees the wire.

mod acls;
mod admin;
mod configs;
mod coordinator;
mod delete_records;
mod errors;
mod fetch;
mod groups;
mod health;
mod metadata;
mod produce;
pub mod quorum_status;
mod server;
mod state;
mod versions;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use uuid::Uuid;

use crate::config::{ServerConfig, TopicConfig};
use crate::controller::store::{MetadataStore, METADATA_DIR};
use crate::controller::{Controller, ControllerError, MetadataImage, MetadataRecord};
use crate::io::{read_file, write_file_atomic, Io};
use crate::log::Log;
use crate::replica::Partition;
use health::LogDirHealth;
pub use state::{Lifecycle, PartitionHandle};

/// File in each partition directory naming the topic id it belongs to (Kafka's name).
const PARTITION_METADATA: &str = "partition.metadata";

/// Why a metadata change did not happen.
#[derive(Debug)]
pub enum CommitError {
    /// The controller refused it (it does not fit the current metadata).
    Rejected(ControllerError),
    /// It could not be made durable.
    Storage(io::Error),
}

impl std::fmt::Display for CommitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommitError::Rejected(e) => write!(f, "{e}"),
            CommitError::Storage(e) => write!(f, "could not persist metadata: {e}"),
        }
    }
}

pub struct Broker {
    config: ServerConfig,
    io: Io,
    log_dir: PathBuf,
    cluster_id: String,
    controller: Controller,
    /// Writers serialise here (commits await an fsync).
    metadata: tokio::sync::Mutex<MetadataStore>,
    /// What readers see: replaced after each commit.
    image: RwLock<Arc<MetadataImage>>,
    partitions: RwLock<BTreeMap<(String, i32), Arc<PartitionHandle>>>,
    /// Wakes long-polling fetches when anything is appended.
    appended: Notify,
    /// The consumer-group coordinator and its driver state.
    groups: coordinator::Groups,
    next_producer_id: Mutex<i64>,
    /// The address clients are told to use (known once the listener is bound).
    advertised: RwLock<(String, u16)>,
    shutdown: watch::Sender<bool>,
    /// Offline after a failed fsync: nothing is served or written any more.
    health: LogDirHealth,
}

/// A running broker: its address and the way to stop it.
pub struct RunningBroker {
    pub broker: Arc<Broker>,
    pub local_addr: SocketAddr,
}

impl Broker {
    /// Opens the data directory (recovering it), binds the client listener and starts serving.
    pub async fn start(config: ServerConfig, io: Io) -> anyhow::Result<RunningBroker> {
        let log_dir = PathBuf::from(config.log_dirs.first().cloned().unwrap_or_default());
        if config.log_dirs.len() > 1 {
            tracing::warn!(
                "several log.dirs given; Weir uses only the first: {}",
                log_dir.display()
            );
        }
        crate::io::create_dir_all_durable(io.disk.as_ref(), &log_dir).await?;
        let cluster_id = load_or_create_cluster_id(&io, &log_dir, config.node_id).await?;
        let now = io.clock.wall_ms();
        let store = MetadataStore::open(io.disk.clone(), &log_dir, now).await?;
        let image = Arc::new(store.image().clone());
        let controller = Controller::new(
            1,
            config.num_partitions,
            config.default_replication_factor,
            config.delete_topic_enable,
            config.topic_defaults.clone(),
        );
        let endpoint = config
            .broker_endpoints()
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("no broker listener in 'listeners'"))?;
        let bind: SocketAddr = format!("{}:{}", bracket_v6(&endpoint.host), endpoint.port)
            .parse()
            .map_err(|e| anyhow::anyhow!("listener {}:{}: {e}", endpoint.host, endpoint.port))?;
        let (shutdown, _) = watch::channel(false);
        let group_config = coordinator::group_config(&config);
        let broker = Arc::new(Broker {
            next_producer_id: Mutex::new(image.producer_ids_reserved()),
            config,
            io: io.clone(),
            log_dir,
            cluster_id,
            controller,
            metadata: tokio::sync::Mutex::new(store),
            image: RwLock::new(image),
            partitions: RwLock::new(BTreeMap::new()),
            appended: Notify::new(),
            groups: coordinator::Groups::new(group_config),
            advertised: RwLock::new((endpoint.host.clone(), endpoint.port)),
            shutdown,
            health: LogDirHealth::new(),
        });
        broker.open_partitions().await?;
        let listener = io.net.bind(bind).await?;
        let local_addr = listener.local_addr()?;
        *broker.advertised.write().unwrap() = broker.advertised_endpoint(local_addr);
        tracing::info!(%local_addr, cluster_id = %broker.cluster_id, node_id = broker.config.node_id,
            "weir broker listening");
        broker.start_offsets_load();
        io.spawn(server::accept_loop(broker.clone(), listener));
        io.spawn(background_loop(broker.clone()));
        io.spawn(coordinator::timer_loop(broker.clone()));
        Ok(RunningBroker { broker, local_addr })
    }

    fn advertised_endpoint(&self, bound: SocketAddr) -> (String, u16) {
        let listener = self.config.broker_endpoints().into_iter().next();
        let advertised = self
            .config
            .advertised_listeners
            .iter()
            .find(|a| {
                listener
                    .as_ref()
                    .is_some_and(|l| l.listener_name == a.listener_name)
            })
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

    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<PartitionHandle>> {
        self.partitions
            .read()
            .unwrap()
            .get(&(topic.to_string(), index))
            .cloned()
    }

    fn partition_dir(&self, topic: &str, index: i32) -> PathBuf {
        self.log_dir.join(format!("{topic}-{index}"))
    }

    fn topic_config(&self, topic: &str) -> Option<TopicConfig> {
        let image = self.image();
        image.topic(topic).map(|t| self.controller.topic_config(t))
    }

    /// Opens every partition the metadata knows; removes directories of deleted topics.
    async fn open_partitions(&self) -> io::Result<()> {
        let image = self.image();
        let known: BTreeMap<String, Uuid> = image
            .topics()
            .flat_map(|t| (0..t.partitions).map(move |p| (format!("{}-{p}", t.name), t.id)))
            .collect();
        for name in self.io.disk.list_dir(&self.log_dir)? {
            let dir = self.log_dir.join(&name);
            if name == METADATA_DIR || known.contains_key(&name) {
                continue;
            }
            // A directory whose topic id is not in the metadata belongs to a deleted topic
            // (the delete crashed before removing it). Anything else is left alone.
            if let Some(id) = read_topic_id(&self.io, &dir) {
                if image.topic_by_id(id).is_none() {
                    tracing::info!(dir = %dir.display(), "removing data of a deleted topic");
                    self.io.disk.remove_dir_all(&dir)?;
                }
            }
        }
        for topic in image.topics() {
            for index in 0..topic.partitions {
                self.open_partition(&topic.name, topic.id, index).await?;
            }
        }
        Ok(())
    }

    async fn open_partition(&self, topic: &str, id: Uuid, index: i32) -> io::Result<()> {
        let dir = self.partition_dir(topic, index);
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
            .unwrap_or_else(|| self.controller.topic_defaults().clone());
        let now = self.io.clock.wall_ms();
        let (mut partition, recovery) =
            Partition::open(self.io.disk.clone(), &dir, topic, index, config, now).await?;
        partition.set_durable_reads(self.config.fsync_before_ack);
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
        let handle = Arc::new(PartitionHandle::new(partition, id));
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
        let mut store = self.metadata.lock().await;
        let (records, out) =
            decide(&self.controller, store.image()).map_err(CommitError::Rejected)?;
        if validate_only || records.is_empty() {
            return Ok(out);
        }
        let now = self.io.clock.wall_ms();
        self.check_online().map_err(CommitError::Storage)?;
        if let Err(e) = store.commit(&records, now).await {
            self.storage_failed("a metadata commit", &e);
            return Err(CommitError::Storage(e));
        }
        *self.image.write().unwrap() = Arc::new(store.image().clone());
        // Still under the lock: local effects apply in commit order.
        for record in &records {
            self.apply_locally(record)
                .await
                .map_err(CommitError::Storage)?;
        }
        Ok(out)
    }

    async fn apply_locally(&self, record: &MetadataRecord) -> io::Result<()> {
        match record {
            MetadataRecord::Topic {
                name,
                id,
                partitions,
                ..
            } => {
                for index in 0..*partitions {
                    self.open_partition(name, *id, index).await?;
                }
                if name == crate::group::OFFSETS_TOPIC {
                    self.offsets_topic_created(*partitions);
                }
            }
            MetadataRecord::Partitions { name, count } => {
                let image = self.image();
                let Some(topic) = image.topic(name) else {
                    return Ok(());
                };
                for index in 0..*count {
                    if self.partition(name, index).is_none() {
                        self.open_partition(name, topic.id, index).await?;
                    }
                }
            }
            MetadataRecord::RemoveTopic { name, .. } => {
                let removed: Vec<(i32, Arc<PartitionHandle>)> = {
                    let mut partitions = self.partitions.write().unwrap();
                    let keys: Vec<(String, i32)> = partitions
                        .range((name.clone(), i32::MIN)..=(name.clone(), i32::MAX))
                        .map(|(k, _)| k.clone())
                        .collect();
                    keys.into_iter()
                        .filter_map(|k| partitions.remove(&k).map(|h| (k.1, h)))
                        .collect()
                };
                for (index, handle) in removed {
                    // No fsync or checkpoint of this partition is in flight past the gate, and
                    // none starts after it (they skip deleted partitions): nothing writes into
                    // the directory once it is gone, nor into a new topic's of the same name.
                    let _gate = handle.flush_gate.lock().await;
                    let _start_gate = handle.log_start_gate.lock().await;
                    handle.set_lifecycle(Lifecycle::Deleted);
                    let dir = self.partition_dir(name, index);
                    if let Err(e) = self.io.disk.remove_dir_all(&dir) {
                        tracing::warn!(dir = %dir.display(), error = %e, "could not remove deleted partition");
                    }
                }
                self.appended.notify_waiters();
            }
            MetadataRecord::TopicConfig { name, .. } => {
                if let Some(config) = self.topic_config(name) {
                    for handle in self.topic_partitions(name) {
                        handle.lock().set_config(config.clone());
                    }
                }
            }
            MetadataRecord::ProducerIds { .. } => {}
        }
        Ok(())
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

    /// Creates topics that a Metadata request named and auto-creation allows.
    async fn auto_create(&self, names: &[String]) -> Vec<(String, Result<(), CommitError>)> {
        let mut results = Vec::new();
        for name in names {
            let new = crate::controller::NewTopic {
                name: name.clone(),
                partitions: -1,
                replication_factor: -1,
                configs: BTreeMap::new(),
            };
            results.push((name.clone(), self.create_topic(new, false).await));
        }
        results
    }

    async fn create_topic(
        &self,
        new: crate::controller::NewTopic,
        validate_only: bool,
    ) -> Result<(), CommitError> {
        let id = Uuid::from_u64_pair(self.io.rng.next_u64(), self.io.rng.next_u64());
        self.change_metadata(validate_only, |controller, image| {
            Ok((vec![controller.create_topic(image, &new, id)?], ()))
        })
        .await
    }

    /// A new producer id, never handed out before: ids are reserved in blocks in the metadata
    /// log before any of them is given out.
    async fn allocate_producer_id(&self) -> io::Result<i64> {
        let allocated = self
            .change_metadata(false, |controller, image| {
                let mut next = self.next_producer_id.lock().unwrap();
                let reserve = controller.reserve_producer_ids(image, *next);
                let id = *next;
                *next += 1;
                Ok((reserve.into_iter().collect(), id))
            })
            .await;
        match allocated {
            Ok(id) => Ok(id),
            Err(CommitError::Storage(e)) => Err(e),
            Err(CommitError::Rejected(e)) => Err(io::Error::other(e.to_string())),
        }
    }

    /// fsyncs a partition up to `up_to`. Concurrent callers share one fsync (group commit).
    async fn flush_partition(&self, handle: &PartitionHandle, up_to: i64) -> io::Result<()> {
        if handle.lock().log().recovery_point() >= up_to {
            return Ok(());
        }
        let _gate = handle.flush_gate.lock().await;
        let plan = {
            let (partition, lifecycle) = handle.lock_with_lifecycle();
            // A deleted partition's data is gone with its topic: nothing left to make durable.
            if lifecycle == Lifecycle::Deleted || partition.log().recovery_point() >= up_to {
                return Ok(());
            }
            partition.log().flush_plan()
        };
        // Checked under the gate: a flush queued behind the one that failed must not run, or
        // its fsync could "succeed" over pages the failure dropped.
        self.check_online()?;
        if crate::planted!(self.config, RecoveryPointBeforeFsync) {
            handle.lock().flushed(&plan, self.io.clock.wall_ms());
        }
        if let Err(e) = Log::sync_files(&plan).await {
            // Still under the gate, so no later flush of this partition runs first.
            self.storage_failed("fsync of a partition", &e);
            return Err(e);
        }
        handle.lock().flushed(&plan, self.io.clock.wall_ms());
        // The high watermark may have moved (durable reads): wake long polls.
        self.appended.notify_waiters();
        Ok(())
    }

    /// A failed fsync (or a failed write of durable bookkeeping): the log directory goes
    /// offline for good (see `health`).
    fn storage_failed(&self, what: &str, e: &io::Error) {
        if crate::planted!(self.config, ServeAfterFsyncError) {
            return;
        }
        self.health.fail(format!("{what} failed: {e}"));
        // Long polls answer at once with the error.
        self.appended.notify_waiters();
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
        let _ = self.shutdown.send(true);
        self.check_online()?;
        let handles = self.all_partitions();
        for handle in &handles {
            handle.set_lifecycle(Lifecycle::Stopping);
        }
        for handle in handles {
            // Closed above, so nothing is appended after this flush.
            let end = handle.lock().log_end_offset();
            self.flush_partition(&handle, end).await?;
            self.checkpoint_partition(&handle, true).await?;
        }
        self.metadata
            .lock()
            .await
            .close(self.io.clock.wall_ms())
            .await?;
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
        let (checkpoint, (snapshot_path, snapshot)) = {
            let (p, lifecycle) = handle.lock_with_lifecycle();
            if lifecycle == Lifecycle::Deleted {
                return Ok(());
            }
            assert!(
                !clean || lifecycle == Lifecycle::Stopping,
                "a clean close stops appends first"
            );
            (p.log().checkpoint(), p.producer_snapshot())
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
            self.storage_failed("a checkpoint", e);
        }
        written
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
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
        since_retention += tick;
        since_checkpoint += tick;
        since_expiry += tick;
        let now = broker.io.clock.wall_ms();
        for handle in broker.all_partitions() {
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
            for handle in broker.all_partitions() {
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
            for handle in broker.all_partitions() {
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
            for handle in broker.all_partitions() {
                if let Err(e) = broker.checkpoint_partition(&handle, false).await {
                    tracing::warn!(error = %e, "partition checkpoint failed");
                }
            }
        }
    }
}

fn bracket_v6(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else if host.is_empty() {
        "0.0.0.0".to_string()
    } else {
        host.to_string()
    }
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

/// Kafka's `meta.properties`: the cluster id, made once and kept; the node id must not change.
async fn load_or_create_cluster_id(
    io: &Io,
    log_dir: &Path,
    node_id: i32,
) -> anyhow::Result<String> {
    let path = log_dir.join("meta.properties");
    if let Ok(raw) = read_file(io.disk.as_ref(), &path) {
        let props = crate::config::parse_properties(&String::from_utf8_lossy(&raw))?;
        if let Some(stored) = props.get("node.id").and_then(|n| n.parse::<i32>().ok()) {
            if stored != node_id {
                anyhow::bail!(
                    "{} belongs to node.id={stored}, but this broker is node.id={node_id}",
                    path.display()
                );
            }
        }
        if let Some(id) = props.get("cluster.id") {
            return Ok(id.clone());
        }
    }
    let uuid = Uuid::from_u64_pair(io.rng.next_u64(), io.rng.next_u64());
    let id = base64_url(uuid.as_bytes());
    let text = format!("version=1\ncluster.id={id}\nnode.id={node_id}\n");
    write_file_atomic(io.disk.as_ref(), &path, text.as_bytes()).await?;
    Ok(id)
}

/// URL-safe base64 without padding (how Kafka prints cluster ids).
fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |acc, &b| (acc << 8) | b as u32) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}
