//! Metric names. Kafka's are its MBeans as the JMX-exporter rules (jmx_exporter's
//! `kafka-kraft-3_0_0.yml`, Strimzi's `kafka-metrics.yaml`) render them: `kafka_<domain>_<type>_
//! <name>`, lowercased, a `…PerSec` meter as a counter ending in `_total` (the encoder adds the
//! suffix to every counter, so the names here leave it out). Request times are histograms
//! (`_bucket`, `_sum`, `_count`) where the exporter shows quantile gauges; `_count` matches.

use std::borrow::Cow;
use std::sync::OnceLock;

use kafka_protocol::messages::ApiKey;

// kafka.network:type=RequestMetrics,name=X,request=Y
pub const REQUESTS: &str = "kafka_network_requestmetrics_requests";
pub const TOTAL_TIME: &str = "kafka_network_requestmetrics_totaltimems";
pub const QUEUE_TIME: &str = "kafka_network_requestmetrics_requestqueuetimems";
pub const LOCAL_TIME: &str = "kafka_network_requestmetrics_localtimems";
pub const REMOTE_TIME: &str = "kafka_network_requestmetrics_remotetimems";
pub const SEND_TIME: &str = "kafka_network_requestmetrics_responsesendtimems";
pub const REQUEST_ERRORS: &str = "weir_network_request_errors";

// kafka.server:type=BrokerTopicMetrics,name=XPerSec[,topic=T]
pub const BYTES_IN: &str = "kafka_server_brokertopicmetrics_bytesin";
pub const MESSAGES_IN: &str = "kafka_server_brokertopicmetrics_messagesin";
pub const BYTES_OUT: &str = "kafka_server_brokertopicmetrics_bytesout";
pub const REPLICATION_BYTES_OUT: &str = "kafka_server_brokertopicmetrics_replicationbytesout";
pub const PRODUCE_REQUESTS: &str = "kafka_server_brokertopicmetrics_totalproducerequests";
pub const FAILED_PRODUCE_REQUESTS: &str = "kafka_server_brokertopicmetrics_failedproducerequests";

// kafka.server:type=ReplicaManager
pub const LEADER_COUNT: &str = "kafka_server_replicamanager_leadercount";
pub const PARTITION_COUNT: &str = "kafka_server_replicamanager_partitioncount";
pub const UNDER_REPLICATED: &str = "kafka_server_replicamanager_underreplicatedpartitions";
pub const UNDER_MIN_ISR: &str = "kafka_server_replicamanager_underminisrpartitioncount";
pub const AT_MIN_ISR: &str = "kafka_server_replicamanager_atminisrpartitioncount";
pub const OFFLINE_REPLICAS: &str = "kafka_server_replicamanager_offlinereplicacount";
pub const ISR_SHRINKS: &str = "kafka_server_replicamanager_isrshrinks";
pub const ISR_EXPANDS: &str = "kafka_server_replicamanager_isrexpands";
pub const FAILED_ISR_UPDATES: &str = "kafka_server_replicamanager_failedisrupdates";

// kafka.log:type=LogManager
pub const OFFLINE_LOG_DIRS: &str = "kafka_log_logmanager_offlinelogdirectorycount";
pub const REMAINING_LOGS: &str = "kafka_log_logmanager_remaininglogstorecover";

// kafka.controller:type=KafkaController
pub const ACTIVE_CONTROLLER: &str = "kafka_controller_kafkacontroller_activecontrollercount";
pub const OFFLINE_PARTITIONS: &str = "kafka_controller_kafkacontroller_offlinepartitionscount";
pub const GLOBAL_PARTITIONS: &str = "kafka_controller_kafkacontroller_globalpartitioncount";
pub const GLOBAL_TOPICS: &str = "kafka_controller_kafkacontroller_globaltopiccount";
pub const FENCED_BROKERS: &str = "kafka_controller_kafkacontroller_fencedbrokercount";
pub const ACTIVE_BROKERS: &str = "kafka_controller_kafkacontroller_activebrokercount";
pub const PREFERRED_IMBALANCE: &str =
    "kafka_controller_kafkacontroller_preferredreplicaimbalancecount";
pub const LAST_APPLIED_OFFSET: &str = "kafka_controller_kafkacontroller_lastappliedrecordoffset";
pub const LAST_COMMITTED_OFFSET: &str =
    "kafka_controller_kafkacontroller_lastcommittedrecordoffset";

// kafka.server:type=broker-metadata-metrics (Strimzi's rendering)
pub const BROKER_LAST_APPLIED_OFFSET: &str =
    "kafka_server_brokermetadatametrics_last_applied_record_offset";

// kafka.server:type=raft-metrics (Strimzi's rendering)
pub const RAFT_STATE: &str = "kafka_server_raftmetrics_current_state";
pub const RAFT_LEADER: &str = "kafka_server_raftmetrics_current_leader";
pub const RAFT_EPOCH: &str = "kafka_server_raftmetrics_current_epoch";
pub const RAFT_HIGH_WATERMARK: &str = "kafka_server_raftmetrics_high_watermark";

// kafka.server:type=GroupMetadataManager
pub const NUM_GROUPS: &str = "kafka_server_groupmetadatamanager_numgroups";
/// (state as `GroupState::name` gives it, the gauge counting groups in it)
pub const GROUP_STATES: [(&str, &str); 5] = [
    (
        "Stable",
        "kafka_server_groupmetadatamanager_numgroupsstable",
    ),
    (
        "PreparingRebalance",
        "kafka_server_groupmetadatamanager_numgroupspreparingrebalance",
    ),
    (
        "CompletingRebalance",
        "kafka_server_groupmetadatamanager_numgroupscompletingrebalance",
    ),
    ("Empty", "kafka_server_groupmetadatamanager_numgroupsempty"),
    ("Dead", "kafka_server_groupmetadatamanager_numgroupsdead"),
];

// Weir's own (operations memo §5.4): what Kafka's metrics never show.
pub const PARTITION_ISR: &str = "weir_partition_isr_size";
pub const PARTITION_ELR: &str = "weir_partition_elr_size";
pub const PARTITION_RECOVERY: &str = "weir_partition_leader_recovery_state";
pub const GROUP_OFFSET: &str = "weir_consumergroup_current_offset";
pub const GROUP_LAG: &str = "weir_consumergroup_lag";
pub const FSYNC_SECONDS: &str = "weir_log_fsync_seconds";
pub const LOG_OPEN_SECONDS: &str = "weir_log_open_seconds";
pub const LOGS_RECOVERED: &str = "weir_log_recovered_logs";
pub const BUILD_INFO: &str = "weir_build_info";

/// The `request` label Kafka gives an API: its name, with Fetch split into FetchConsumer and
/// FetchFollower by who asks (`replica_id` ≥ 0: a follower).
pub fn request_name(key: ApiKey, fetch_replica_id: Option<i32>) -> Cow<'static, str> {
    match (key, fetch_replica_id) {
        (ApiKey::Fetch, Some(id)) if id >= 0 => Cow::Borrowed("FetchFollower"),
        (ApiKey::Fetch, _) => Cow::Borrowed("FetchConsumer"),
        (ApiKey::Produce, _) => Cow::Borrowed("Produce"),
        (other, _) => api_name(other),
    }
}

/// An API's name as its `Debug` spells it, formatted once per key and process (the request
/// metrics name every request: quorum RPCs and heartbeats were formatted anew each time).
fn api_name(key: ApiKey) -> Cow<'static, str> {
    static NAMES: [OnceLock<&'static str>; 128] = [const { OnceLock::new() }; 128];
    match NAMES.get(key as i16 as usize) {
        // Leaked once per API key (under a hundred short names) for the process's lifetime.
        Some(name) => Cow::Borrowed(name.get_or_init(|| format!("{key:?}").leak())),
        None => Cow::Owned(format!("{key:?}")),
    }
}
