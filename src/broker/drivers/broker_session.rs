//! A cluster broker's session with the active controller (KIP-631): BrokerRegistration once
//! per process (a fresh incarnation id), then BrokerHeartbeat every
//! `broker.heartbeat.interval.ms` (faster while fenced, to be unfenced as soon as it caught
//! up) reporting the last metadata offset applied. A stale epoch registers again; no known or
//! reachable controller is retried with a short backoff. Controlled shutdown: heartbeats ask
//! `want_shut_down` until the controller answers `should_shut_down` (its leaderships moved),
//! bounded by the caller's timeout.
//!
//! KIP-966 clean-shutdown detection: a clean stop writes the broker epoch to
//! [`CLEAN_SHUTDOWN_FILE`] in the log directory; the next start reads and removes it and sends
//! it as BrokerRegistration v3 `PreviousBrokerEpoch` (-1 without one: the stop was a crash, so
//! the controller takes this broker out of every ISR and ELR before it serves).
//!
//! Requests go to the leader's controller listener over the quorum's peer link, or straight to
//! [`broker_rpc::answer`] when this node is the active controller itself.

pub(crate) mod state;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::broker_registration_request::{Feature, Listener};
use kafka_protocol::messages::{
    ApiKey, AssignReplicasToDirsRequest, BrokerHeartbeatRequest, BrokerId,
    BrokerRegistrationRequest, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::controller::brokers::DURABLE_FEATURE;
use crate::controller::ConfigResource;

use crate::broker::handlers::inter_node::{broker_rpc, cordoned_dirs, replica_logs};
use crate::broker::{peer, shared::Broker};
use state::SessionState;

const REGISTRATION_VERSION: i16 = 3;
/// Kafka's clean-shutdown file name, holding `{"version":0,"brokerEpoch":N}`.
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
const HEARTBEAT_VERSION: i16 = 1;
const CALL_TIMEOUT: Duration = Duration::from_millis(5000);
const RETRY: Duration = Duration::from_millis(100);
/// Heartbeat period while fenced or shutting down.
const FAST_HEARTBEAT: Duration = Duration::from_millis(100);

impl Broker {
    /// At start: the epoch a clean stop left in [`CLEAN_SHUTDOWN_FILE`], read and removed (a
    /// crash from now on must not look clean). Unreadable or absent: -1.
    pub(crate) fn take_clean_shutdown_epoch(&self) {
        let path = self.log_dir.join(CLEAN_SHUTDOWN_FILE);
        if !self.io.disk.exists(&path) {
            return;
        }
        let epoch = crate::io::read_file(self.io.disk.as_ref(), &path)
            .ok()
            .and_then(|raw| serde_json::from_slice::<serde_json::Value>(&raw).ok())
            .and_then(|v| v.get("brokerEpoch").and_then(|e| e.as_i64()))
            .unwrap_or(-1);
        if let Err(e) = self.io.disk.remove_file(&path) {
            // Left behind it names an epoch older than the next registration's: a later crash
            // still counts as unclean.
            tracing::warn!(error = %e, "could not remove the clean-shutdown file");
        }
        self.session.previous_epoch.store(epoch, Ordering::Release);
    }

    /// At a clean stop (every log flushed and marked clean): records this registration's
    /// epoch for the next start.
    pub(crate) async fn write_clean_shutdown_epoch(&self) -> std::io::Result<()> {
        let Some(epoch) = self.session.epoch() else {
            return Ok(());
        };
        let text = format!("{{\"version\":0,\"brokerEpoch\":{epoch}}}");
        let path = self.log_dir.join(CLEAN_SHUTDOWN_FILE);
        crate::io::write_file_atomic(self.io.disk.as_ref(), &path, text.as_bytes()).await
    }
}

impl Broker {
    /// The ids of the directories `cordoned.log.dirs` names (KIP-1066): this broker's dynamic
    /// value, else the cluster default, else `server.properties`. Also tells `dirs`, so new
    /// replicas avoid them.
    pub(crate) fn cordoned_dir_ids(&self) -> Vec<Uuid> {
        const KEY: &str = "cordoned.log.dirs";
        let image = self.image();
        let own = image.resource_configs(&ConfigResource::Broker(self.config.node_id.to_string()));
        let default = image.resource_configs(&ConfigResource::Broker(String::new()));
        let named: Vec<String> = match own.get(KEY).or_else(|| default.get(KEY)) {
            Some(v) => v
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect(),
            None => self.config.cordoned_log_dirs.clone(),
        };
        let ids = self.dirs.ids_named(&named);
        self.dirs.set_cordoned(ids.clone());
        ids
    }

    /// This broker's session with the active controller (cluster brokers only).
    pub fn broker_session(&self) -> &SessionState {
        &self.session
    }

    /// Controlled shutdown: asks the controller to move this broker's leaderships away and
    /// waits until it agrees, at most `limit`. Returns whether it agreed.
    pub(crate) async fn controlled_shutdown(&self, limit: Duration) -> bool {
        self.session.want_shutdown.store(true, Ordering::Release);
        let mut granted = self.session.granted.subscribe();
        let wait = async {
            while !*granted.borrow_and_update() {
                if granted.changed().await.is_err() {
                    return false;
                }
            }
            true
        };
        self.io.timeout(limit, wait).await.unwrap_or(false)
    }
}

/// Sends a session request (or an AlterPartition, from `isr_driver`) to the active controller
/// and returns its answer.
pub(crate) async fn call(
    broker: &Broker,
    key: ApiKey,
    version: i16,
    request: RequestKind,
) -> Result<ResponseKind, String> {
    if broker.is_active_controller() {
        return broker_rpc::answer(broker, &request)
            .await
            .ok_or_else(|| "no answer".to_string());
    }
    // Sessions and AlterPartition carry their own epochs: sent as they are, not in an envelope.
    let (link, _) = broker.quorum.leader_link().ok_or("no controller known")?;
    let client_id = format!("weir-broker-{}", broker.config.node_id);
    let frame =
        peer::encode_request(key, version, &client_id, &request).map_err(|e| e.to_string())?;
    let rx = link.call(frame);
    let response = match broker.io.timeout(CALL_TIMEOUT, rx).await {
        Some(Ok(Ok(r))) => r,
        Some(Ok(Err(e))) => return Err(e.to_string()),
        _ => return Err("no answer from the controller".into()),
    };
    peer::decode_response(key, version, response).map_err(|e| e.to_string())
}

/// The session task: runs until the broker shuts down.
pub(crate) async fn run(broker: Arc<Broker>) {
    let incarnation = Uuid::from_u64_pair(broker.io.rng.next_u64(), broker.io.rng.next_u64());
    let interval = Duration::from_millis(broker.config.broker_heartbeat_interval_ms.max(1));
    let mut shutdown = broker.shutdown_signal();
    let mut epoch: Option<i64> = None;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let pause = match epoch {
            None => match register(&broker, incarnation).await {
                Ok(e) => {
                    tracing::info!(epoch = e, "registered with the controller");
                    epoch = Some(e);
                    // The image may already hold the registration: hand out partition roles
                    // now rather than at the background loop's next pass (`startup_gate`).
                    broker.reconcile_if_behind().await;
                    broker.note_client_readiness();
                    Duration::ZERO
                }
                Err(e) => {
                    tracing::debug!(reason = %e, "broker registration will be retried");
                    RETRY
                }
            },
            Some(e) => match heartbeat(&broker, e).await {
                Ok(()) => {
                    if let Err(e) = assign_dirs(&broker, e).await {
                        tracing::debug!(reason = %e, "directory assignments will be sent again");
                    }
                    if broker.session.is_fenced()
                        || broker.session.want_shutdown.load(Ordering::Acquire)
                    {
                        FAST_HEARTBEAT.min(interval)
                    } else {
                        interval
                    }
                }
                Err(Some(ResponseError::StaleBrokerEpoch)) => {
                    epoch = None;
                    RETRY
                }
                Err(_) => RETRY,
            },
        };
        tokio::select! {
            biased;
            _ = broker.io.clock.sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
    }
}

async fn register(broker: &Broker, incarnation: Uuid) -> Result<i64, String> {
    let listeners = broker
        .registered_listeners()
        .into_iter()
        .map(|l| {
            Listener::default()
                .with_name(StrBytes::from_string(l.name))
                .with_host(StrBytes::from_string(l.host))
                .with_port(l.port)
                .with_security_protocol(0)
        })
        .collect();
    let request = BrokerRegistrationRequest::default()
        .with_broker_id(BrokerId(broker.config.node_id))
        .with_cluster_id(StrBytes::from_string(broker.cluster_id.clone()))
        .with_incarnation_id(incarnation)
        .with_listeners(listeners)
        .with_rack(broker.config.broker_rack.clone().map(StrBytes::from_string))
        .with_previous_broker_epoch(if broker.dirs.any_failed_at_start() {
            // Kafka's rule: a configured directory offline makes the stop count as unclean.
            -1
        } else {
            broker.session.previous_epoch.load(Ordering::Acquire)
        })
        .with_log_dirs(broker.dirs.online_ids())
        .with_features(durable_features(broker.config.fsync_before_ack));
    match call(
        broker,
        ApiKey::BrokerRegistration,
        REGISTRATION_VERSION,
        RequestKind::BrokerRegistration(request),
    )
    .await?
    {
        ResponseKind::BrokerRegistration(r) if r.error_code == 0 => {
            broker
                .session
                .epoch
                .store(r.broker_epoch, Ordering::Release);
            Ok(r.broker_epoch)
        }
        ResponseKind::BrokerRegistration(r) => Err(format!(
            "registration refused: {:?}",
            ResponseError::try_from_code(r.error_code)
        )),
        _ => Err("not a registration response".into()),
    }
}

/// One heartbeat. `Err(Some(code))` for a refusal, `Err(None)` when nobody answered.
async fn heartbeat(broker: &Broker, epoch: i64) -> Result<(), Option<ResponseError>> {
    let want_shutdown = broker.session.want_shutdown.load(Ordering::Acquire);
    let mut request = BrokerHeartbeatRequest::default()
        .with_broker_id(BrokerId(broker.config.node_id))
        .with_broker_epoch(epoch)
        .with_current_metadata_offset(broker.image().applied() - 1)
        .with_want_fence(false)
        .with_want_shut_down(want_shutdown)
        .with_offline_log_dirs(broker.dirs.offline_ids());
    // KIP-1066: the cordoned directories, in every heartbeat (KAFKA-20441: only once the
    // broker has caught up with the metadata, so a dynamic change is not lost).
    if !broker.session.is_fenced() {
        let cordoned = broker.cordoned_dir_ids();
        request = request.with_unknown_tagged_field(
            cordoned_dirs::CORDONED_LOG_DIRS_TAG,
            cordoned_dirs::encode(&cordoned),
        );
    }
    // KIP-966 part 2: the logs of partitions awaiting recovery (Weir's tagged field).
    let logs = replica_logs::local_report(broker);
    if !logs.is_empty() {
        request = request
            .with_unknown_tagged_field(replica_logs::REPLICA_LOGS_TAG, replica_logs::encode(&logs));
    }
    let response = call(
        broker,
        ApiKey::BrokerHeartbeat,
        HEARTBEAT_VERSION,
        RequestKind::BrokerHeartbeat(request),
    )
    .await
    .map_err(|e| {
        tracing::debug!(reason = %e, "heartbeat not answered");
        None
    })?;
    let ResponseKind::BrokerHeartbeat(r) = response else {
        return Err(None);
    };
    if r.error_code != 0 {
        return Err(ResponseError::try_from_code(r.error_code));
    }
    broker.session.fenced.store(r.is_fenced, Ordering::Release);
    if want_shutdown && r.should_shut_down {
        let _ = broker.session.granted.send(true);
    }
    Ok(())
}

/// AssignReplicasToDirs (KIP-858): tells the controller the directory of every open replica
/// whose directory the image does not show yet (or shows another), in one request. Derived
/// from the image each time, so a lost answer is simply sent again after the next heartbeat.
async fn assign_dirs(broker: &Broker, epoch: i64) -> Result<(), String> {
    use kafka_protocol::messages::assign_replicas_to_dirs_request::{
        DirectoryData, PartitionData, TopicData,
    };
    use std::collections::BTreeMap;
    let node = broker.config.node_id;
    let image = broker.image();
    let mut by_dir: BTreeMap<Uuid, BTreeMap<Uuid, Vec<i32>>> = BTreeMap::new();
    let open: Vec<((String, i32), Uuid)> = {
        let partitions = broker.partitions.read().unwrap();
        partitions
            .iter()
            .map(|(k, h)| (k.clone(), h.topic_id))
            .collect()
    };
    for ((topic, index), topic_id) in open {
        let Some(p) = image.partition(topic_id, index) else {
            continue;
        };
        let Some((dir, _)) = broker.dirs.dir_of(&topic, index) else {
            continue;
        };
        if broker.dirs.is_offline(&topic, index) || p.directory_of(node) == Some(dir) {
            continue;
        }
        if !p.replicas.contains(&node) {
            continue;
        }
        let topics = by_dir.entry(dir).or_default();
        topics.entry(topic_id).or_default().push(index);
    }
    if by_dir.is_empty() {
        return Ok(());
    }
    let directories = by_dir
        .into_iter()
        .map(|(dir, topics)| {
            let topics = topics
                .into_iter()
                .map(|(id, indexes)| {
                    let partitions = indexes
                        .into_iter()
                        .map(|i| PartitionData::default().with_partition_index(i))
                        .collect();
                    TopicData::default()
                        .with_topic_id(id)
                        .with_partitions(partitions)
                })
                .collect();
            DirectoryData::default().with_id(dir).with_topics(topics)
        })
        .collect();
    let request = AssignReplicasToDirsRequest::default()
        .with_broker_id(BrokerId(node))
        .with_broker_epoch(epoch)
        .with_directories(directories);
    match call(
        broker,
        ApiKey::AssignReplicasToDirs,
        0,
        RequestKind::AssignReplicasToDirs(request),
    )
    .await?
    {
        ResponseKind::AssignReplicasToDirs(r) if r.error_code == 0 => Ok(()),
        ResponseKind::AssignReplicasToDirs(r) => Err(format!(
            "refused: {:?}",
            ResponseError::try_from_code(r.error_code)
        )),
        _ => Err("not an AssignReplicasToDirs response".into()),
    }
}

/// The registration features: [`DURABLE_FEATURE`] when this broker fsyncs before
/// acknowledging, so the controller keeps it in the ISR/ELR across an unclean restart.
fn durable_features(fsync_before_ack: bool) -> Vec<Feature> {
    if !fsync_before_ack {
        return Vec::new();
    }
    vec![Feature::default()
        .with_name(StrBytes::from_static_str(DURABLE_FEATURE))
        .with_min_supported_version(1)
        .with_max_supported_version(1)]
}
