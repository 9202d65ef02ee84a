//! The gauges a scrape computes from the broker's state ([`Snapshot`]), and how they render.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{names, Labels};

/// One partition as the scrape sees it (from the metadata image, on its leader).
#[derive(Clone, Debug)]
pub struct PartitionGauge {
    pub topic: String,
    pub partition: i32,
    pub isr: usize,
    pub elr: usize,
    pub recovering: bool,
}

/// A group's committed offset on one partition, and its lag when this node holds a replica.
#[derive(Clone, Debug)]
pub struct LagGauge {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub committed: i64,
    pub lag: Option<i64>,
}

/// The gauges a scrape computes from the broker's state.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    // ReplicaManager: this broker's replicas (under-* counted by leaders only, as Kafka does).
    pub leaders: i64,
    pub partitions: i64,
    pub under_replicated: i64,
    pub under_min_isr: i64,
    pub at_min_isr: i64,
    pub offline_replicas: i64,
    // LogManager.
    pub offline_log_dirs: i64,
    /// Partitions placed here whose log is not open yet (loading/recovering).
    pub remaining_logs_to_recover: i64,
    // KafkaController, from the committed image (every node computes them: aggregate by max).
    pub active_controller: bool,
    pub offline_partitions: i64,
    pub global_partitions: i64,
    pub global_topics: i64,
    pub fenced_brokers: i64,
    pub active_brokers: i64,
    pub preferred_replica_imbalance: i64,
    pub last_applied_offset: i64,
    pub last_committed_offset: i64,
    // Raft.
    pub raft_state: &'static str,
    pub raft_leader: i64,
    pub raft_epoch: i64,
    pub raft_high_watermark: i64,
    // Groups coordinated here: (classic state name, count).
    pub groups: Vec<(&'static str, i64)>,
    pub groups_total: i64,
    pub partition_gauges: Vec<PartitionGauge>,
    pub lag: Vec<LagGauge>,
    pub version: &'static str,
}

fn gauge(r: &mut Registry, name: &str, help: &str, value: i64) {
    let g: Gauge = Gauge::default();
    g.set(value);
    r.register(name, help, g);
}

fn gauge_family(r: &mut Registry, name: &str, help: &str, rows: Vec<(Labels, i64)>) {
    let family: Family<Labels, Gauge> = Family::default();
    for (labels, value) in rows {
        family.get_or_create(&labels).set(value);
    }
    r.register(name, help, family);
}

impl Snapshot {
    pub(super) fn register(&self, r: &mut Registry) {
        use names::*;
        gauge(
            r,
            LEADER_COUNT,
            "Partitions led by this broker",
            self.leaders,
        );
        gauge(
            r,
            PARTITION_COUNT,
            "Partitions with a replica on this broker",
            self.partitions,
        );
        gauge(
            r,
            UNDER_REPLICATED,
            "Partitions led here whose ISR is smaller than their replicas",
            self.under_replicated,
        );
        gauge(
            r,
            UNDER_MIN_ISR,
            "Partitions led here whose ISR is below min.insync.replicas",
            self.under_min_isr,
        );
        gauge(
            r,
            AT_MIN_ISR,
            "Partitions led here whose ISR is exactly min.insync.replicas",
            self.at_min_isr,
        );
        gauge(
            r,
            OFFLINE_REPLICAS,
            "Replicas on this broker that cannot be served",
            self.offline_replicas,
        );
        gauge(
            r,
            OFFLINE_LOG_DIRS,
            "Log directories offline",
            self.offline_log_dirs,
        );
        gauge(
            r,
            REMAINING_LOGS,
            "Partition logs placed here and not open yet",
            self.remaining_logs_to_recover,
        );
        gauge(
            r,
            ACTIVE_CONTROLLER,
            "1 on the active controller",
            self.active_controller as i64,
        );
        gauge(
            r,
            OFFLINE_PARTITIONS,
            "Partitions without a leader",
            self.offline_partitions,
        );
        gauge(
            r,
            GLOBAL_PARTITIONS,
            "Partitions in the cluster",
            self.global_partitions,
        );
        gauge(
            r,
            GLOBAL_TOPICS,
            "Topics in the cluster",
            self.global_topics,
        );
        gauge(
            r,
            FENCED_BROKERS,
            "Registered brokers that are fenced",
            self.fenced_brokers,
        );
        gauge(
            r,
            ACTIVE_BROKERS,
            "Registered brokers that are unfenced",
            self.active_brokers,
        );
        gauge(
            r,
            PREFERRED_IMBALANCE,
            "Partitions not led by their preferred replica",
            self.preferred_replica_imbalance,
        );
        gauge(
            r,
            LAST_APPLIED_OFFSET,
            "Offset of the last metadata record applied",
            self.last_applied_offset,
        );
        gauge(
            r,
            LAST_COMMITTED_OFFSET,
            "Metadata log high watermark",
            self.last_committed_offset,
        );
        gauge(
            r,
            BROKER_LAST_APPLIED_OFFSET,
            "Offset of the last metadata record applied",
            self.last_applied_offset,
        );
        gauge_family(
            r,
            RAFT_STATE,
            "This node's metadata quorum role",
            vec![(vec![("current_state", self.raft_state.to_lowercase())], 1)],
        );
        gauge(
            r,
            RAFT_LEADER,
            "The metadata quorum leader (-1: none known)",
            self.raft_leader,
        );
        gauge(r, RAFT_EPOCH, "The metadata quorum epoch", self.raft_epoch);
        gauge(
            r,
            RAFT_HIGH_WATERMARK,
            "The metadata log high watermark",
            self.raft_high_watermark,
        );
        gauge(r, NUM_GROUPS, "Groups coordinated here", self.groups_total);
        for (state, name) in GROUP_STATES {
            let n = self
                .groups
                .iter()
                .filter(|(s, _)| *s == state)
                .map(|(_, n)| n)
                .sum();
            gauge(r, name, "Groups coordinated here in this state", n);
        }
        let label = |p: &PartitionGauge| {
            vec![
                ("topic", p.topic.clone()),
                ("partition", p.partition.to_string()),
            ]
        };
        gauge_family(
            r,
            PARTITION_ISR,
            "ISR size of partitions led here",
            self.partition_gauges
                .iter()
                .map(|p| (label(p), p.isr as i64))
                .collect(),
        );
        gauge_family(
            r,
            PARTITION_ELR,
            "ELR size of partitions led here",
            self.partition_gauges
                .iter()
                .map(|p| (label(p), p.elr as i64))
                .collect(),
        );
        gauge_family(
            r,
            PARTITION_RECOVERY,
            "1 while a partition led here is RECOVERING (unclean election)",
            self.partition_gauges
                .iter()
                .map(|p| (label(p), p.recovering as i64))
                .collect(),
        );
        let lag_label = |l: &LagGauge| {
            vec![
                ("group", l.group.clone()),
                ("topic", l.topic.clone()),
                ("partition", l.partition.to_string()),
            ]
        };
        gauge_family(
            r,
            GROUP_OFFSET,
            "Committed offset per group and partition (groups coordinated here)",
            self.lag
                .iter()
                .map(|l| (lag_label(l), l.committed))
                .collect(),
        );
        gauge_family(
            r,
            GROUP_LAG,
            "High watermark minus committed offset (where this node holds a replica)",
            self.lag
                .iter()
                .filter_map(|l| Some((lag_label(l), l.lag?)))
                .collect(),
        );
        gauge_family(
            r,
            BUILD_INFO,
            "Weir's version",
            vec![(vec![("version", self.version.to_string())], 1)],
        );
    }
}
