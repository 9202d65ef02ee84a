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
mod snapshot;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use names::request_name;
pub use snapshot::{LagGauge, PartitionGauge, Snapshot};

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
    /// Handles on the series of `requests` and the five request-time families, by API name:
    /// every request updates six series, and finding them in the families costs six label
    /// vectors, their strings and six SipHash lookups (3 % of a simulated run's instructions).
    /// The handles share their values with the families (a series is created on first use,
    /// as before), so what a scrape renders is unchanged.
    request_series: Arc<Mutex<BTreeMap<String, RequestSeries>>>,
    /// Handles on the per-topic counters' series, for the same reason: every produce and fetch
    /// response updated up to eight series through fresh label vectors and SipHash lookups.
    topic_series: Arc<Mutex<TopicSeriesCache>>,
}

/// The per-topic counters' handles: the broker-wide series (empty label set) and each topic's.
#[derive(Default)]
struct TopicSeriesCache {
    all: TopicSeries,
    topics: BTreeMap<String, TopicSeries>,
}

/// One label set's series of the per-topic counters. Each handle is taken on the series' first
/// use, when `get_or_create` creates it, so a scrape shows the same series as before.
#[derive(Default)]
struct TopicSeries {
    produce_requests: Option<Counter>,
    failed_produce_requests: Option<Counter>,
    bytes_in: Option<Counter>,
    messages_in: Option<Counter>,
    bytes_out: Option<Counter>,
    replication_bytes_out: Option<Counter>,
}

/// The handle in `slot`, taken from `family` at `topic`'s label set on first use.
fn series<'a>(
    slot: &'a mut Option<Counter>,
    family: &Counters,
    topic: Option<&str>,
) -> &'a Counter {
    slot.get_or_insert_with(|| {
        let labels: Labels = match topic {
            Some(topic) => vec![("topic", topic.to_string())],
            None => Vec::new(),
        };
        family.get_or_create(&labels).clone()
    })
}

/// One API name's series: its count per version and its five time histograms.
struct RequestSeries {
    versions: Vec<(i16, Counter)>,
    total: Histogram,
    queue: Histogram,
    local: Histogram,
    remote: Histogram,
    send: Histogram,
}

impl RequestSeries {
    /// Counts one request of `version` (its series in `requests` created on first use) and
    /// times it.
    fn observe(&mut self, requests: &Counters, name: &str, version: i16, times: &RequestTimes) {
        let at = match self.versions.iter().position(|(v, _)| *v == version) {
            Some(at) => at,
            None => {
                let labels = vec![
                    ("request", name.to_string()),
                    ("version", version.to_string()),
                ];
                let counter = requests.get_or_create(&labels).clone();
                self.versions.push((version, counter));
                self.versions.len() - 1
            }
        };
        self.versions[at].1.inc();
        self.total.observe(ms(times.total()));
        self.queue.observe(ms(times.queue));
        self.local.observe(ms(times.local));
        self.remote.observe(ms(times.remote));
        self.send.observe(ms(times.send));
    }
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
            request_series: Arc::default(),
            topic_series: Arc::default(),
        }
    }

    /// One request answered (or dropped, acks=0): counted per API name and version, timed per
    /// API name.
    pub fn request(&self, name: &str, version: i16, times: &RequestTimes) {
        let mut cache = self.request_series.lock().unwrap();
        // One look-up per request once the name's series exist (they do after its first).
        if let Some(series) = cache.get_mut(name) {
            series.observe(&self.requests, name, version, times);
            return;
        }
        let api = vec![("request", name.to_string())];
        let series = RequestSeries {
            versions: Vec::new(),
            total: self.total_time.get_or_create(&api).clone(),
            queue: self.queue_time.get_or_create(&api).clone(),
            local: self.local_time.get_or_create(&api).clone(),
            remote: self.remote_time.get_or_create(&api).clone(),
            send: self.send_time.get_or_create(&api).clone(),
        };
        let series = cache.entry(name.to_string()).or_insert(series);
        series.observe(&self.requests, name, version, times);
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
        self.each_topic_series(topic, |s, topic| {
            series(&mut s.produce_requests, &self.produce_requests, topic).inc();
            if failed {
                series(
                    &mut s.failed_produce_requests,
                    &self.failed_produce_requests,
                    topic,
                )
                .inc();
            }
            series(&mut s.bytes_in, &self.bytes_in, topic).inc_by(bytes);
            series(&mut s.messages_in, &self.messages_in, topic).inc_by(messages);
        });
    }

    /// Calls `update` with `topic`'s series, then with the broker-wide ones (`None`).
    fn each_topic_series(
        &self,
        topic: &str,
        mut update: impl FnMut(&mut TopicSeries, Option<&str>),
    ) {
        let mut cache = self.topic_series.lock().unwrap();
        let cache = &mut *cache;
        match cache.topics.get_mut(topic) {
            Some(series) => update(series, Some(topic)),
            None => update(
                cache.topics.entry(topic.to_string()).or_default(),
                Some(topic),
            ),
        }
        update(&mut cache.all, None);
    }

    /// Record bytes a fetch returned for one topic: to a consumer, or to a follower
    /// (replication, which Kafka counts apart).
    pub fn fetched(&self, topic: &str, bytes: u64, follower: bool) {
        self.each_topic_series(topic, |s, topic| {
            let counter = match follower {
                true => series(
                    &mut s.replication_bytes_out,
                    &self.replication_bytes_out,
                    topic,
                ),
                false => series(&mut s.bytes_out, &self.bytes_out, topic),
            };
            counter.inc_by(bytes);
        });
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
