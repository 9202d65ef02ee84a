//! `weir bench produce|consume`: load generators that print msg/s, MB/s and latency percentiles.
//! They use the project's client with pipelining (several requests in flight on one
//! connection), one pre-built batch per partition per request, so the generator itself does no
//! per-record work in the loop. Every run is bounded by a record count and a time limit.
//!
//! Produce can spread the load over several connections (`connections`), each with its own
//! window of requests in flight: a broker answers one connection's requests one at a time, so
//! only concurrent connections let it share one fsync between requests (group commit). The
//! consumer fetches every partition in one request per round, as Kafka consumers do.
//!
//! Produce routes each partition's batches to its leader (Metadata), as a Kafka producer does,
//! with `connections` connections per leader; on one broker that is the bootstrap address.
//!
//! Latency is per request, from its send to its answer; with several requests in flight it
//! includes the wait behind the earlier ones on the same connection. With a fixed rate
//! (`rate`), requests are sent on a schedule and latency counts from the scheduled time, so a
//! late answer that delays the next send is not hidden (no coordinated omission). An acks=0
//! run ends when the log end offsets show every record appended.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::{
    produce_offsets, produce_request, BrokerInfo, Client, ClientError, FETCH_VERSION,
    PRODUCE_VERSION,
};
use crate::io::Io;
use crate::log::batch::{self, BatchBuilder};

/// No single answer may take longer than this: a stalled broker ends the run with an error.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// How far a run has got, for whoever draws a progress line (`weir bench`): records and bytes
/// answered so far. Added to once per answered request (or per sent one with acks=0, per
/// fetch round, per long-poll round), never per record, so the hot loop stays as it was.
#[derive(Debug, Default)]
pub struct Progress {
    records: AtomicU64,
    bytes: AtomicU64,
}

impl Progress {
    fn add(&self, records: u64, bytes: u64) {
        self.records.fetch_add(records, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records acknowledged (produce), received (consume) or rounds done (long poll).
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Record value bytes acknowledged (produce), batch bytes received (consume, long poll).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

#[derive(Clone, Debug)]
pub struct ProduceBench {
    /// The bootstrap broker; each partition's batches go to its leader, as a Kafka producer
    /// routes them (on one broker that is this address).
    pub addr: SocketAddr,
    pub topic: String,
    pub partitions: i32,
    /// For the topic this run creates.
    pub replication_factor: i16,
    /// Topic configs for the topic this run creates (e.g. `min.insync.replicas`).
    pub topic_configs: BTreeMap<String, String>,
    pub record_size: usize,
    pub records: u64,
    pub records_per_batch: usize,
    pub acks: i16,
    /// Requests in flight per connection (Kafka's `max.in.flight.requests.per.connection`).
    pub in_flight: usize,
    /// Connections per leader, sharing the records, each with its own requests in flight.
    pub connections: usize,
    /// Create the topic first (CreateTopics); off for brokers that lack it, such as
    /// librdkafka's mock cluster, where the topic is made when the cluster starts.
    pub create_topic: bool,
    /// A fixed offered load, in bytes of record values per second over the whole run: each
    /// connection sends its requests on a schedule, and latency counts from the scheduled send
    /// time (so a broker that falls behind the schedule shows it). `None`: as fast as the
    /// window of requests in flight allows.
    pub rate: Option<f64>,
    pub time_limit: Duration,
    /// Advanced as answers come (see [`Progress`]).
    pub progress: Arc<Progress>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub records: u64,
    /// Record batch bytes as stored by the broker (values, keys and framing).
    pub bytes: u64,
    /// Record value bytes alone, where the generator knows them (produce).
    pub value_bytes: Option<u64>,
    pub seconds: f64,
    /// Request latency percentiles in microseconds: p50, p99, p99.9, max.
    pub latency_us: Option<[u64; 4]>,
    /// Requests that had an answer (the latency sample count).
    pub requests: u64,
    /// With a fixed rate: how far behind its scheduled time each request was sent, in
    /// microseconds (p50, p99, p99.9, max). Lateness counts in the latency; this shows how
    /// much of it the generator (or the broker holding its answers) caused.
    pub behind_us: Option<[u64; 4]>,
}

impl Report {
    pub fn render(&self, what: &str) -> String {
        let secs = self.seconds.max(1e-9);
        let rate = self.records as f64 / secs;
        let mut s = format!(
            "{what}: {} records in {:.2} s = {:.0} msg/s",
            self.records, self.seconds, rate
        );
        if let Some(v) = self.value_bytes {
            s += &format!(", {:.1} MB/s values", v as f64 / secs / 1e6);
        }
        s += &format!(", {:.1} MB/s batches", self.bytes as f64 / secs / 1e6);
        if let Some([p50, p99, p999, max]) = self.latency_us {
            s += &format!(
                "; request latency p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms ({} requests)",
                p50 as f64 / 1e3,
                p99 as f64 / 1e3,
                p999 as f64 / 1e3,
                max as f64 / 1e3,
                self.requests
            );
        }
        if let Some([p50, p99, p999, max]) = self.behind_us {
            s += &format!(
                "; sent behind schedule p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
                p50 as f64 / 1e3,
                p99 as f64 / 1e3,
                p999 as f64 / 1e3,
                max as f64 / 1e3,
            );
        }
        s
    }
}

fn percentiles(mut samples: Vec<u64>) -> Option<[u64; 4]> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Some([at(0.50), at(0.99), at(0.999), *samples.last().unwrap()])
}

async fn ensure_topic(
    client: &mut Client,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &BTreeMap<String, String>,
) -> Result<(), ClientError> {
    match client
        .create_topic(topic, partitions, replication_factor, configs)
        .await
    {
        Ok(()) => Ok(()),
        Err(ClientError::Kafka(ResponseError::TopicAlreadyExists, _)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The address to reach a broker that Metadata lists. Advertised hosts here are IP literals
/// (the bench resolves no names); `localhost` is loopback; a single-broker target that
/// advertises a name is reached at the bootstrap address it was found through.
fn broker_addr(broker: &BrokerInfo, bootstrap: SocketAddr) -> Result<SocketAddr, ClientError> {
    if let Ok(ip) = broker.host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, broker.port));
    }
    if broker.host == "localhost" {
        return Ok(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), broker.port));
    }
    if broker.port == bootstrap.port() {
        return Ok(bootstrap);
    }
    Err(ClientError::Protocol(format!(
        "broker {} advertises {}:{}, not an IP address",
        broker.id, broker.host, broker.port
    )))
}

/// How often, and how far apart, a leader is asked whether it serves a new partition yet.
const LEADER_READY_ATTEMPTS: u32 = 100;
const LEADER_READY_BACKOFF: Duration = Duration::from_millis(100);

/// Partitions grouped by their leader's address (waiting, bounded, for each to have one).
/// Metadata may name a leader before that broker has applied the change that makes it one
/// (each broker applies the metadata log on its own); a Kafka producer retries the
/// NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION it then gets. The bench instead waits
/// until each leader answers ListOffsets for its partitions, so the timed run starts clean.
async fn leaders(
    io: &Io,
    control: &mut Client,
    bench: &ProduceBench,
) -> Result<BTreeMap<SocketAddr, Vec<i32>>, ClientError> {
    let mut out: BTreeMap<SocketAddr, Vec<i32>> = BTreeMap::new();
    for p in 0..bench.partitions {
        let leader = control.wait_for_leader(&bench.topic, p).await?;
        out.entry(broker_addr(&leader, bench.addr)?)
            .or_default()
            .push(p);
    }
    for (addr, partitions) in &out {
        let mut client = Client::connect(io, *addr).await?;
        for p in partitions {
            let mut attempt = 0;
            loop {
                match client.list_offset(&bench.topic, *p, -1).await {
                    Ok(_) => break,
                    Err(ClientError::Kafka(e, _))
                        if e.is_retriable() && attempt + 1 < LEADER_READY_ATTEMPTS =>
                    {
                        attempt += 1;
                        io.clock.sleep(LEADER_READY_BACKOFF).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(out)
}

/// What one producing connection achieved.
struct Worker {
    acked: u64,
    latencies: Vec<u64>,
    /// With a rate: each send's lateness against its schedule (µs).
    behind: Vec<u64>,
    /// Kept open until the run is over: a broker may drop requests it has not read yet when
    /// the connection closes (the mock does, with acks=0).
    _client: Client,
}

/// One producing connection's share of the run.
struct Plan {
    request: ProduceRequest,
    records: u64,
    per_request: u64,
    /// Time between scheduled sends (with a fixed rate).
    interval: Option<Duration>,
}

pub async fn produce(io: &Io, bench: &ProduceBench) -> Result<Report, ClientError> {
    assert!(bench.partitions > 0 && bench.records_per_batch > 0 && bench.in_flight > 0);
    assert!(bench.rate.is_none_or(|r| r > 0.0));
    let connections = bench.connections.max(1);
    let mut control = Client::connect(io, bench.addr).await?;
    if bench.create_topic {
        ensure_topic(
            &mut control,
            &bench.topic,
            bench.partitions,
            bench.replication_factor,
            &bench.topic_configs,
        )
        .await?;
    }
    let leaders = leaders(io, &mut control, bench).await?;
    // With acks=0 nothing tells the generator when the broker has appended what it sent; the
    // log end offsets do (see `wait_for_end_offsets`), asked of each partition's leader.
    let mut offset_clients = BTreeMap::new();
    let ends_before = if bench.acks == 0 {
        for addr in leaders.keys() {
            offset_clients.insert(*addr, Client::connect(io, *addr).await?);
        }
        Some(total_end_offset(&mut offset_clients, &leaders, &bench.topic).await?)
    } else {
        None
    };
    // One batch per partition, built once: the broker stores bytes, so reusing them is fair.
    let value = vec![b'x'; bench.record_size];
    let now = io.clock.wall_ms();
    let batches: BTreeMap<i32, Bytes> = (0..bench.partitions)
        .map(|p| {
            let mut b = BatchBuilder::with_capacity(
                now,
                bench.records_per_batch * (bench.record_size + 16),
            );
            for i in 0..bench.records_per_batch {
                let key = format!("k{i}");
                b.push(Some(key.as_bytes()), Some(&value), now);
            }
            (p, Bytes::from(b.finish(-1, -1, -1)))
        })
        .collect();
    let batch_bytes: u64 = batches.values().map(|b| b.len() as u64).sum();
    let batch_bytes_per_record =
        batch_bytes as f64 / (bench.records_per_batch as u64 * bench.partitions as u64) as f64;
    // Each connection carries its leader's partitions, and a share of the records and of the
    // rate in proportion to them.
    let mut plans = Vec::with_capacity(leaders.len() * connections);
    for (addr, partitions) in &leaders {
        let mine: Vec<(i32, Bytes)> = partitions
            .iter()
            .map(|p| (*p, batches[p].clone()))
            .collect();
        let fraction = partitions.len() as f64 / bench.partitions as f64 / connections as f64;
        let per_request = bench.records_per_batch as u64 * partitions.len() as u64;
        let interval = bench.rate.map(|rate| {
            let value_bytes = (per_request * bench.record_size as u64) as f64;
            Duration::from_secs_f64(value_bytes / (rate * fraction))
        });
        for _ in 0..connections {
            plans.push((
                *addr,
                Plan {
                    request: produce_request(&bench.topic, &mine, bench.acks, ANSWER_TIMEOUT),
                    records: (bench.records as f64 * fraction).ceil() as u64,
                    per_request,
                    interval,
                },
            ));
        }
    }
    let mut clients = Vec::with_capacity(plans.len());
    for (addr, plan) in plans {
        clients.push((Client::connect(io, addr).await?, plan));
    }
    let start = io.clock.monotonic();
    let deadline = start + bench.time_limit;
    let mut results = Vec::with_capacity(clients.len());
    for (client, plan) in clients {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (io2, bench2) = (io.clone(), bench.clone());
        io.spawn(async move {
            let outcome = produce_on(&io2, client, &plan, &bench2, deadline).await;
            let _ = tx.send(outcome);
        });
        results.push(rx);
    }
    let mut acked = 0u64;
    let mut latencies = Vec::new();
    let mut behind = Vec::new();
    let mut workers = Vec::with_capacity(results.len());
    for rx in results {
        let mut worker = rx
            .await
            .map_err(|_| ClientError::Protocol("a producing connection's task died".into()))??;
        acked += worker.acked;
        latencies.extend(std::mem::take(&mut worker.latencies));
        behind.extend(std::mem::take(&mut worker.behind));
        workers.push(worker);
    }
    if let Some(before) = ends_before {
        wait_for_end_offsets(io, &mut offset_clients, &leaders, bench, before, acked).await?;
    }
    let seconds = io.clock.monotonic().saturating_sub(start).as_secs_f64();
    drop(workers);
    Ok(Report {
        records: acked,
        bytes: (acked as f64 * batch_bytes_per_record).round() as u64,
        value_bytes: Some(acked * bench.record_size as u64),
        seconds,
        requests: latencies.len() as u64,
        latency_us: percentiles(latencies),
        behind_us: percentiles(behind),
    })
}

/// How early a scheduled send may go out. The runtime's timer has millisecond ticks and fires
/// at the first tick at or after its deadline, so a sleep up to the scheduled time itself
/// sends 0–1 ms late (about 1 ms at p50 here), and that lateness would count as broker
/// latency. Sleeping up to a tick before it instead sends at most this early; such a
/// request's latency counts from its actual send, never from the later scheduled time.
const SCHEDULE_SLACK: Duration = Duration::from_millis(1);

/// The time a request's latency counts from: its scheduled time if it goes out late (the
/// delay is part of what is measured, so a broker that holds the generator back shows it),
/// its actual send if early (by at most [`SCHEDULE_SLACK`]); as fast as possible, the send.
fn latency_origin(now: Duration, scheduled: Option<Duration>) -> Duration {
    scheduled.map_or(now, |at| at.min(now))
}

/// One connection's produce loop: keeps up to `in_flight` requests outstanding until its
/// records are sent or the deadline passes, then drains the answers. With a rate, a request
/// is sent at its scheduled time (at most [`SCHEDULE_SLACK`] early) even while earlier ones
/// are unanswered, and its latency counts from [`latency_origin`].
async fn produce_on(
    io: &Io,
    mut client: Client,
    plan: &Plan,
    bench: &ProduceBench,
    deadline: Duration,
) -> Result<Worker, ClientError> {
    let conn = client.connection();
    let version = conn.version(ApiKey::Produce, PRODUCE_VERSION)?;
    let mut sent_at = VecDeque::with_capacity(bench.in_flight);
    let mut latencies = Vec::with_capacity((plan.records / plan.per_request) as usize + 1);
    let mut behind = Vec::with_capacity(latencies.capacity());
    let mut sent = 0u64;
    let mut acked = 0u64;
    let mut next_due = io.clock.monotonic();
    // Bounded: every turn sends, sleeps until a due time (at most one interval), or receives.
    loop {
        let now = io.clock.monotonic();
        let can_send = sent < plan.records && now < deadline;
        let due = plan.interval.is_none() || now + SCHEDULE_SLACK >= next_due;
        let window_open = sent_at.len() < bench.in_flight;
        if can_send && due && window_open {
            let scheduled = plan.interval.map(|_| next_due);
            let t0 = latency_origin(now, scheduled);
            if scheduled.is_some() {
                behind.push(now.saturating_sub(next_due).as_micros() as u64);
            }
            if bench.acks == 0 {
                conn.send_oneway(&plan.request, version).await?;
                acked += plan.per_request;
                bench.progress.add(
                    plan.per_request,
                    plan.per_request * bench.record_size as u64,
                );
            } else {
                conn.send(&plan.request, version).await?;
                // Diagnostics (`latency` target, see scripts/latency-breakdown).
                tracing::debug!(target: "latency", "bench sent");
                sent_at.push_back(t0);
            }
            sent += plan.per_request;
            if let Some(interval) = plan.interval {
                next_due += interval;
            }
            continue;
        }
        let wake_for_send = next_due.saturating_sub(SCHEDULE_SLACK);
        if sent_at.is_empty() {
            if can_send {
                io.clock.sleep(wake_for_send.saturating_sub(now)).await;
                continue;
            }
            break;
        }
        if can_send && window_open {
            // A send falls due before the oldest answer may come: wait for whichever is
            // first, so outstanding answers do not push the schedule back. Only the buffered
            // read is awaited here (cancel-safe); the answer itself is read below.
            let wait = wake_for_send.saturating_sub(now);
            let answer_first = tokio::select! {
                biased;
                r = conn.readable() => { r?; true }
                _ = io.clock.sleep(wait) => false,
            };
            if !answer_first {
                continue;
            }
        }
        let t0 = sent_at.pop_front().expect("checked non-empty");
        let response = io
            .timeout(ANSWER_TIMEOUT, conn.receive::<ProduceRequest>())
            .await
            .ok_or(ClientError::Timeout)??;
        produce_offsets(&response)?;
        let latency = io.clock.monotonic().saturating_sub(t0).as_micros() as u64;
        tracing::debug!(target: "latency", us = latency, "bench answered");
        latencies.push(latency);
        acked += plan.per_request;
        bench.progress.add(
            plan.per_request,
            plan.per_request * bench.record_size as u64,
        );
    }
    Ok(Worker {
        acked,
        latencies,
        behind,
        _client: client,
    })
}

async fn end_offsets(
    client: &mut Client,
    topic: &str,
    partitions: i32,
) -> Result<Vec<i64>, ClientError> {
    let mut ends = Vec::with_capacity(partitions as usize);
    for p in 0..partitions {
        ends.push(client.list_offset(topic, p, -1).await?.0);
    }
    Ok(ends)
}

/// The sum of the partitions' end offsets, each asked of its leader.
async fn total_end_offset(
    clients: &mut BTreeMap<SocketAddr, Client>,
    leaders: &BTreeMap<SocketAddr, Vec<i32>>,
    topic: &str,
) -> Result<i64, ClientError> {
    let mut total = 0;
    for (addr, partitions) in leaders {
        let client = clients
            .get_mut(addr)
            .ok_or_else(|| ClientError::Protocol(format!("no connection to leader {addr}")))?;
        for p in partitions {
            total += client.list_offset(topic, *p, -1).await?.0;
        }
    }
    Ok(total)
}

/// After an acks=0 run: waits until the partitions' end offsets have grown by `records`, so the
/// time measured covers the broker's appends, not only the socket buffers filling. (Waiting
/// for the answer to a later request on the same connection would do on Kafka, which answers
/// a connection's requests in order and acks=0 produces not at all, but librdkafka's mock
/// answers acks=0 produces too.)
async fn wait_for_end_offsets(
    io: &Io,
    clients: &mut BTreeMap<SocketAddr, Client>,
    leaders: &BTreeMap<SocketAddr, Vec<i32>>,
    bench: &ProduceBench,
    before: i64,
    records: u64,
) -> Result<(), ClientError> {
    let give_up = io.clock.monotonic() + ANSWER_TIMEOUT;
    loop {
        let grown = total_end_offset(clients, leaders, &bench.topic).await? - before;
        if grown >= records as i64 {
            return Ok(());
        }
        if io.clock.monotonic() >= give_up {
            return Err(ClientError::Protocol(format!(
                "acks=0: only {grown} of {records} records appeared in the log"
            )));
        }
        io.clock.sleep(Duration::from_millis(1)).await;
    }
}

#[derive(Clone, Debug)]
pub struct ConsumeBench {
    pub addr: SocketAddr,
    pub topic: String,
    pub partitions: i32,
    pub records: u64,
    /// Per-partition fetch size (`max.partition.fetch.bytes`); the request may carry
    /// `partitions` times this.
    pub fetch_bytes: i32,
    pub time_limit: Duration,
    /// Advanced once per fetch round (see [`Progress`]).
    pub progress: Arc<Progress>,
}

/// Reads every partition from its earliest offset (ListOffsets, as a consumer with
/// `auto.offset.reset=earliest` does) until `records` records (counted from batch headers, not
/// decoded; each batch's CRC is checked), the time limit, or three rounds that bring nothing.
/// Each round is one Fetch request for all partitions. The time reported ends at the last batch
/// received, so the empty rounds that confirm the end are not counted.
pub async fn consume(io: &Io, bench: &ConsumeBench) -> Result<Report, ClientError> {
    assert!(bench.partitions > 0);
    let mut client = Client::connect(io, bench.addr).await?;
    let mut offsets = Vec::with_capacity(bench.partitions as usize);
    for p in 0..bench.partitions {
        // Brokers that keep little data (librdkafka's mock) have moved their log start.
        offsets.push(client.list_offset(&bench.topic, p, -2).await?.0.max(0));
    }
    let conn = client.connection();
    let version = conn.version(ApiKey::Fetch, FETCH_VERSION)?;
    let topic = TopicName(StrBytes::from_string(bench.topic.clone()));
    let start = io.clock.monotonic();
    let deadline = start + bench.time_limit;
    let mut last_progress = start;
    let mut samples_at_progress = 0;
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut latencies = Vec::new();
    let mut idle_rounds = 0;
    while records < bench.records && io.clock.monotonic() < deadline && idle_rounds < 3 {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(bench.fetch_bytes.saturating_mul(bench.partitions))
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic.clone())
                .with_partitions(
                    (0..bench.partitions)
                        .map(|p| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(offsets[p as usize])
                                .with_partition_max_bytes(bench.fetch_bytes)
                        })
                        .collect(),
                )]);
        let t0 = io.clock.monotonic();
        let response = io
            .timeout(ANSWER_TIMEOUT, conn.call(&request, version))
            .await
            .ok_or(ClientError::Timeout)??;
        latencies.push(io.clock.monotonic().saturating_sub(t0).as_micros() as u64);
        if let Some(e) = ResponseError::try_from_code(response.error_code) {
            return Err(ClientError::Kafka(e, "fetch".into()));
        }
        let (records_before, bytes_before) = (records, bytes);
        for data in response.responses.into_iter().flat_map(|t| t.partitions) {
            if let Some(e) = ResponseError::try_from_code(data.error_code) {
                return Err(ClientError::Kafka(
                    e,
                    format!("fetch partition {}", data.partition_index),
                ));
            }
            let Some(offset) = usize::try_from(data.partition_index)
                .ok()
                .and_then(|p| offsets.get_mut(p))
            else {
                return Err(ClientError::Protocol(format!(
                    "fetch answered for partition {} that was not asked for",
                    data.partition_index
                )));
            };
            let Some(fetched) = data.records else {
                continue;
            };
            for item in batch::iter(&fetched) {
                // A broker may end a fetch inside a batch (Kafka does): the rest comes next time.
                let Ok((_, header)) = item else { break };
                if header.last_offset() < *offset {
                    continue;
                }
                records += header.record_count as u64;
                bytes += header.total_len() as u64;
                *offset = header.next_offset();
            }
        }
        let progressed = bytes > bytes_before;
        bench
            .progress
            .add(records - records_before, bytes - bytes_before);
        if progressed {
            last_progress = io.clock.monotonic();
            samples_at_progress = latencies.len();
            idle_rounds = 0;
        } else {
            idle_rounds += 1;
        }
    }
    // The empty rounds that confirmed the end are long polls that waited on purpose.
    latencies.truncate(samples_at_progress);
    Ok(Report {
        records,
        bytes,
        value_bytes: None,
        seconds: last_progress.saturating_sub(start).as_secs_f64(),
        requests: latencies.len() as u64,
        latency_us: percentiles(latencies),
        behind_us: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_nearest_rank() {
        assert_eq!(percentiles(vec![]), None);
        let samples: Vec<u64> = (1..=1000).rev().collect();
        assert_eq!(percentiles(samples), Some([501, 990, 999, 1000]));
    }

    #[test]
    fn render_shows_rates_and_latency() {
        let r = Report {
            records: 1000,
            bytes: 2_000_000,
            value_bytes: Some(1_000_000),
            seconds: 2.0,
            latency_us: Some([1000, 2000, 3000, 4000]),
            requests: 10,
            behind_us: None,
        };
        assert_eq!(
            r.render("produce"),
            "produce: 1000 records in 2.00 s = 500 msg/s, 0.5 MB/s values, 1.0 MB/s batches; \
             request latency p50 1.00 ms, p99 2.00 ms, p99.9 3.00 ms, max 4.00 ms (10 requests)"
        );
        let paced = Report {
            behind_us: Some([10, 250, 1500, 2000]),
            ..r
        };
        assert!(paced.render("produce").ends_with(
            "(10 requests); sent behind schedule p50 0.01 ms, p99 0.25 ms, p99.9 1.50 ms, max 2.00 ms"
        ));
    }

    #[test]
    fn latency_counts_from_the_earlier_of_schedule_and_send() {
        let ms = Duration::from_millis;
        // Late: the delay behind the schedule is part of the latency.
        assert_eq!(latency_origin(ms(12), Some(ms(10))), ms(10));
        // Early (within the timer's slack): from the actual send, never from the schedule.
        assert_eq!(latency_origin(ms(9), Some(ms(10))), ms(9));
        // As fast as possible: from the send.
        assert_eq!(latency_origin(ms(7), None), ms(7));
    }
}

/// `weir bench longpoll`: how long a long-polling consumer waits, after a record is produced to
/// its partition, for the fetch to answer. One consumer parks a fetch at partition 0's end
/// (`min_bytes` 1), one producer then sends a one-record batch (acks=1) to it, and the latency
/// is from that send to the fetch's answer. `idle_pollers` more connections meanwhile
/// long-poll the other partitions, where nothing is produced: a broker that wakes every fetch
/// on any append makes them re-read on every round.
#[derive(Clone, Debug)]
pub struct LongPollBench {
    pub addr: SocketAddr,
    pub topic: String,
    /// Partition 0 is the measured one; the idle pollers spread over the others.
    pub partitions: i32,
    pub rounds: u64,
    pub idle_pollers: usize,
    pub create_topic: bool,
    pub time_limit: Duration,
    /// Advanced once per round (see [`Progress`]).
    pub progress: Arc<Progress>,
}

/// How long the consumer's fetch may park: far longer than a round takes.
const LONG_POLL_WAIT: Duration = Duration::from_secs(5);
/// Given to the consumer's fetch to park before the record is produced.
const PARK_TIME: Duration = Duration::from_millis(2);

fn long_poll_request(topic: &str, partition: i32, offset: i64, max_wait: Duration) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait.as_millis() as i32)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

pub async fn longpoll(io: &Io, bench: &LongPollBench) -> Result<Report, ClientError> {
    assert!(bench.partitions > 0 && bench.rounds > 0);
    assert!(
        bench.idle_pollers == 0 || bench.partitions > 1,
        "idle pollers need partitions > 1"
    );
    let mut control = Client::connect(io, bench.addr).await?;
    if bench.create_topic {
        ensure_topic(
            &mut control,
            &bench.topic,
            bench.partitions,
            1,
            &BTreeMap::new(),
        )
        .await?;
    }
    let ends = end_offsets(&mut control, &bench.topic, bench.partitions).await?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut idle = Vec::with_capacity(bench.idle_pollers);
    for i in 0..bench.idle_pollers {
        let partition = 1 + (i as i32 % (bench.partitions - 1));
        let mut client = Client::connect(io, bench.addr).await?;
        let request = long_poll_request(
            &bench.topic,
            partition,
            ends[partition as usize],
            LONG_POLL_WAIT,
        );
        let (tx, rx) = tokio::sync::oneshot::channel();
        let stop = stop.clone();
        io.spawn(async move {
            // Bounded by the stop flag, which the run sets when it ends (time-limited).
            let mut polls = 0u64;
            let outcome = loop {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break Ok(polls);
                }
                match client.connection().call(&request, FETCH_VERSION).await {
                    Ok(_) => polls += 1,
                    Err(e) => break Err(e),
                }
            };
            let _ = tx.send(outcome);
        });
        idle.push(rx);
    }
    let mut consumer = Client::connect(io, bench.addr).await?;
    let mut producer = Client::connect(io, bench.addr).await?;
    let mut b = BatchBuilder::new(io.clock.wall_ms());
    b.push(Some(b"k"), Some(b"x"), io.clock.wall_ms());
    let record = Bytes::from(b.finish(-1, -1, -1));
    let mut latencies = Vec::with_capacity(bench.rounds as usize);
    let mut bytes = 0u64;
    let start = io.clock.monotonic();
    let deadline = start + bench.time_limit;
    let mut failure = None;
    for offset in (ends[0]..).take(bench.rounds as usize) {
        if io.clock.monotonic() >= deadline {
            break;
        }
        let request = long_poll_request(&bench.topic, 0, offset, LONG_POLL_WAIT);
        consumer.connection().send(&request, FETCH_VERSION).await?;
        io.clock.sleep(PARK_TIME).await;
        let sent = io.clock.monotonic();
        if let Err(e) = producer.produce(&bench.topic, 0, record.clone(), 1).await {
            failure = Some(e);
            break;
        }
        let answer = io
            .timeout(
                ANSWER_TIMEOUT,
                consumer.connection().receive::<FetchRequest>(),
            )
            .await
            .ok_or(ClientError::Timeout)??;
        latencies.push((io.clock.monotonic() - sent).as_micros() as u64);
        let got = answer
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
            .sum::<usize>();
        if got == 0 {
            failure = Some(ClientError::Protocol(
                "a long poll answered without the record".into(),
            ));
            break;
        }
        bytes += got as u64;
        bench.progress.add(1, got as u64);
    }
    let seconds = (io.clock.monotonic() - start).as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    // Each idle poller ends after its parked fetch answers (at most LONG_POLL_WAIT).
    for rx in idle {
        rx.await
            .map_err(|_| ClientError::Protocol("an idle poller's task died".into()))??;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Report {
        records: latencies.len() as u64,
        bytes,
        value_bytes: None,
        seconds,
        requests: latencies.len() as u64,
        latency_us: percentiles(latencies),
        behind_us: None,
    })
}
