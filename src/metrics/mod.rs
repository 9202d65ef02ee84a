//! Metrics in Prometheus text, named as the common JMX-exporter rules render Kafka's MBeans
//! (`kafka_server_replicamanager_underreplicatedpartitions`, ...), so dashboards and alerts
//! written for Kafka work unchanged; Weir's own carry a `weir_` prefix.
//!
//! Two kinds, kept apart so that nothing on the per-record path pays for metrics:
//! - [`Metrics`]: counters and histograms the request path and the drivers update, once per
//!   request, per batch header or per fsync (atomics and short locks, never per record);
//! - [`Snapshot`]: gauges computed from the broker's state when a scrape asks for them
//!   (partition and leader counts, the controller's image, groups, lag).
//!
//! [`render`] encodes both with the `prometheus-client` crate; [`http`] serves the result.
//! Nothing here knows the broker: the broker fills a [`Snapshot`] and hands it over.

pub mod http;
mod names;
pub mod wire;

use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use names::request_name;

/// Label sets: (key, value) pairs; an empty set is the broker-wide series of a per-topic
/// metric (Kafka's MBean without the `topic` key).
pub type Labels = Vec<(&'static str, String)>;

type Counters = Family<Labels, Counter>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Upper bounds (milliseconds) of the request-time histograms.
const TIME_MS_BUCKETS: [f64; 15] = [
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
    30000.0,
];

/// Upper bounds (seconds) of the fsync and log-open histograms.
const SECONDS_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

fn time_ms_histogram() -> Histogram {
    Histogram::new(TIME_MS_BUCKETS)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// How long one request took, split as Kafka's RequestMetrics split it.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestTimes {
    /// From the frame being read to the handler starting (decode; Weir has no queue).
    pub queue: Duration,
    /// In the handler, outside waits.
    pub local: Duration,
    /// In waits for other replicas or data (acks=all, fetch min.bytes): Kafka's purgatory.
    pub remote: Duration,
    /// Writing the response to the socket.
    pub send: Duration,
}

impl RequestTimes {
    pub fn total(&self) -> Duration {
        self.queue + self.local + self.remote + self.send
    }
}

/// The counters and histograms updated as the broker works. Cloning shares them.
#[derive(Clone)]
pub struct Metrics {
    requests: Counters,
    total_time: Histograms,
    queue_time: Histograms,
    local_time: Histograms,
    remote_time: Histograms,
    send_time: Histograms,
    request_errors: Counters,
    bytes_in: Counters,
    messages_in: Counters,
    bytes_out: Counters,
    replication_bytes_out: Counters,
    produce_requests: Counters,
    failed_produce_requests: Counters,
    isr_shrinks: Counter,
    isr_expands: Counter,
    failed_isr_updates: Counter,
    fsync: Histogram,
    log_open: Histogram,
    logs_recovered: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let histograms = || Histograms::new_with_constructor(time_ms_histogram as fn() -> _);
        Metrics {
            requests: Counters::default(),
            total_time: histograms(),
            queue_time: histograms(),
            local_time: histograms(),
            remote_time: histograms(),
            send_time: histograms(),
            request_errors: Counters::default(),
            bytes_in: Counters::default(),
            messages_in: Counters::default(),
            bytes_out: Counters::default(),
            replication_bytes_out: Counters::default(),
            produce_requests: Counters::default(),
            failed_produce_requests: Counters::default(),
            isr_shrinks: Counter::default(),
            isr_expands: Counter::default(),
            failed_isr_updates: Counter::default(),
            fsync: Histogram::new(SECONDS_BUCKETS),
            log_open: Histogram::new(SECONDS_BUCKETS),
            logs_recovered: Counter::default(),
        }
    }

    /// One request answered (or dropped, acks=0): counted per API name and version, timed per
    /// API name.
    pub fn request(&self, name: &str, version: i16, times: &RequestTimes) {
        self.requests
            .get_or_create(&vec![
                ("request", name.to_string()),
                ("version", version.to_string()),
            ])
            .inc();
        let api = vec![("request", name.to_string())];
        self.total_time
            .get_or_create(&api)
            .observe(ms(times.total()));
        self.queue_time.get_or_create(&api).observe(ms(times.queue));
        self.local_time.get_or_create(&api).observe(ms(times.local));
        self.remote_time
            .get_or_create(&api)
            .observe(ms(times.remote));
        self.send_time.get_or_create(&api).observe(ms(times.send));
    }

    /// A request whose connection was closed instead of answered (malformed, codec error).
    pub fn request_error(&self, name: &str) {
        self.request_errors
            .get_or_create(&vec![("request", name.to_string())])
            .inc();
    }

    /// A produce's outcome for one topic: `bytes` and `messages` appended (by the partitions
    /// that succeeded), and whether any partition failed; counted for the topic and the broker.
    pub fn produced(&self, topic: &str, bytes: u64, messages: u64, failed: bool) {
        for labels in [vec![("topic", topic.to_string())], Vec::new()] {
            self.produce_requests.get_or_create(&labels).inc();
            if failed {
                self.failed_produce_requests.get_or_create(&labels).inc();
            }
            self.bytes_in.get_or_create(&labels).inc_by(bytes);
            self.messages_in.get_or_create(&labels).inc_by(messages);
        }
    }

    /// Record bytes a fetch returned for one topic: to a consumer, or to a follower
    /// (replication, which Kafka counts apart).
    pub fn fetched(&self, topic: &str, bytes: u64, follower: bool) {
        let counters = if follower {
            &self.replication_bytes_out
        } else {
            &self.bytes_out
        };
        for labels in [vec![("topic", topic.to_string())], Vec::new()] {
            counters.get_or_create(&labels).inc_by(bytes);
        }
    }

    /// A committed ISR change of a partition this broker leads.
    pub fn isr_changed(&self, before: usize, after: usize) {
        if after < before {
            self.isr_shrinks.inc();
        } else if after > before {
            self.isr_expands.inc();
        }
    }

    /// An ISR change the controller refused or never answered.
    pub fn isr_update_failed(&self) {
        self.failed_isr_updates.inc();
    }

    pub fn fsync(&self, took: Duration) {
        self.fsync.observe(took.as_secs_f64());
    }

    /// A partition's log opened; `recovered`: it was not closed cleanly and was checked.
    pub fn log_opened(&self, took: Duration, recovered: bool) {
        self.log_open.observe(took.as_secs_f64());
        if recovered {
            self.logs_recovered.inc();
        }
    }

    fn register(&self, r: &mut Registry) {
        use names::*;
        r.register(
            REQUESTS,
            "Requests answered, per API and version",
            self.requests.clone(),
        );
        r.register(
            TOTAL_TIME,
            "Request time, read to written (ms)",
            self.total_time.clone(),
        );
        r.register(
            QUEUE_TIME,
            "Request decode time before the handler (ms)",
            self.queue_time.clone(),
        );
        r.register(
            LOCAL_TIME,
            "Request time in the handler outside waits (ms)",
            self.local_time.clone(),
        );
        r.register(
            REMOTE_TIME,
            "Request time waiting for replicas or data (ms)",
            self.remote_time.clone(),
        );
        r.register(
            SEND_TIME,
            "Response write time (ms)",
            self.send_time.clone(),
        );
        r.register(
            REQUEST_ERRORS,
            "Requests that closed their connection",
            self.request_errors.clone(),
        );
        r.register(
            BYTES_IN,
            "Record bytes appended by produces",
            self.bytes_in.clone(),
        );
        r.register(
            MESSAGES_IN,
            "Records appended by produces",
            self.messages_in.clone(),
        );
        r.register(
            BYTES_OUT,
            "Record bytes fetched by consumers",
            self.bytes_out.clone(),
        );
        r.register(
            REPLICATION_BYTES_OUT,
            "Record bytes fetched by followers",
            self.replication_bytes_out.clone(),
        );
        r.register(
            PRODUCE_REQUESTS,
            "Produce requests per topic",
            self.produce_requests.clone(),
        );
        r.register(
            FAILED_PRODUCE_REQUESTS,
            "Produce requests that failed per topic",
            self.failed_produce_requests.clone(),
        );
        r.register(
            ISR_SHRINKS,
            "ISR shrinks of partitions led here",
            self.isr_shrinks.clone(),
        );
        r.register(
            ISR_EXPANDS,
            "ISR expansions of partitions led here",
            self.isr_expands.clone(),
        );
        r.register(
            FAILED_ISR_UPDATES,
            "ISR changes refused or unanswered",
            self.failed_isr_updates.clone(),
        );
        r.register(
            FSYNC_SECONDS,
            "Partition fsync latency (s)",
            self.fsync.clone(),
        );
        r.register(
            LOG_OPEN_SECONDS,
            "Time to open (and recover) a partition's log (s)",
            self.log_open.clone(),
        );
        r.register(
            LOGS_RECOVERED,
            "Partition logs recovered after an unclean shutdown",
            self.logs_recovered.clone(),
        );
    }
}

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
    fn register(&self, r: &mut Registry) {
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

/// The Prometheus text (format 0.0.4) of `metrics` and `snapshot`.
pub fn render(metrics: &Metrics, snapshot: &Snapshot) -> String {
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    snapshot.register(&mut registry);
    let mut out = String::with_capacity(16 * 1024);
    prometheus_text::encode(&mut out, &registry).expect("writing to a String cannot fail");
    out
}

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

#[cfg(test)]
mod tests;
