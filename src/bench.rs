//! `weir bench produce|consume`: load generators that print msg/s, MB/s and latency percentiles.
//! They use the project's client with pipelining (several requests in flight on one
//! connection), one pre-built batch per partition per request, so the generator itself does no
//! per-record work in the loop. Every run is bounded by a record count and a time limit.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;

use crate::client::{produce_offsets, produce_request, Client, ClientError};
use crate::io::Io;
use crate::log::batch::{self, BatchBuilder};

#[derive(Clone, Debug)]
pub struct ProduceBench {
    pub addr: SocketAddr,
    pub topic: String,
    pub partitions: i32,
    pub record_size: usize,
    pub records: u64,
    pub records_per_batch: usize,
    pub acks: i16,
    pub in_flight: usize,
    pub time_limit: Duration,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub records: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Request latency percentiles in microseconds: p50, p99, p99.9, max.
    pub latency_us: Option<[u64; 4]>,
}

impl Report {
    pub fn render(&self, what: &str) -> String {
        let rate = self.records as f64 / self.seconds.max(1e-9);
        let mb = self.bytes as f64 / self.seconds.max(1e-9) / 1e6;
        let mut s = format!(
            "{what}: {} records in {:.2} s = {:.0} msg/s, {:.1} MB/s",
            self.records, self.seconds, rate, mb
        );
        if let Some([p50, p99, p999, max]) = self.latency_us {
            s += &format!(
                "; request latency p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
                p50 as f64 / 1e3,
                p99 as f64 / 1e3,
                p999 as f64 / 1e3,
                max as f64 / 1e3
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

async fn ensure_topic(client: &mut Client, topic: &str, partitions: i32) -> Result<(), ClientError> {
    match client.create_topic(topic, partitions, 1, &BTreeMap::new()).await {
        Ok(()) => Ok(()),
        Err(ClientError::Kafka(kafka_protocol::error::ResponseError::TopicAlreadyExists, _)) => Ok(()),
        Err(e) => Err(e),
    }
}

pub async fn produce(io: &Io, bench: &ProduceBench) -> Result<Report, ClientError> {
    assert!(bench.partitions > 0 && bench.records_per_batch > 0 && bench.in_flight > 0);
    let mut client = Client::connect(io, bench.addr).await?;
    ensure_topic(&mut client, &bench.topic, bench.partitions).await?;
    // One batch per partition, built once: the broker stores bytes, so reusing them is fair.
    let value = vec![b'x'; bench.record_size];
    let now = io.clock.wall_ms();
    let batches: Vec<(i32, Bytes)> = (0..bench.partitions)
        .map(|p| {
            let mut b = BatchBuilder::with_capacity(now, bench.records_per_batch * (bench.record_size + 16));
            for i in 0..bench.records_per_batch {
                let key = format!("k{i}");
                b.push(Some(key.as_bytes()), Some(&value), now);
            }
            (p, Bytes::from(b.finish(-1, -1, -1)))
        })
        .collect();
    let per_request = bench.records_per_batch as u64 * bench.partitions as u64;
    let bytes_per_request = per_request * bench.record_size as u64;
    let request = produce_request(&bench.topic, &batches, bench.acks, Duration::from_secs(30));
    let conn = client.connection();
    let version = conn.version(kafka_protocol::messages::ApiKey::Produce, crate::client::PRODUCE_VERSION)?;
    let start = io.clock.monotonic();
    let deadline = start + bench.time_limit;
    let mut sent_at = std::collections::VecDeque::new();
    let mut latencies = Vec::new();
    let mut sent = 0u64;
    let mut acked = 0u64;
    loop {
        let now = io.clock.monotonic();
        let can_send = sent < bench.records && now < deadline;
        if can_send && sent_at.len() < bench.in_flight {
            if bench.acks == 0 {
                conn.send_oneway(&request, version).await?;
                acked += per_request;
            } else {
                conn.send(&request, version).await?;
                sent_at.push_back(now);
            }
            sent += per_request;
            continue;
        }
        let Some(t0) = sent_at.pop_front() else { break };
        let response = conn
            .receive::<kafka_protocol::messages::ProduceRequest>()
            .await?;
        produce_offsets(&response)?;
        latencies.push(io.clock.monotonic().saturating_sub(t0).as_micros() as u64);
        acked += per_request;
    }
    let seconds = io.clock.monotonic().saturating_sub(start).as_secs_f64();
    Ok(Report {
        records: acked,
        bytes: acked / per_request * bytes_per_request,
        seconds,
        latency_us: percentiles(latencies),
    })
}

#[derive(Clone, Debug)]
pub struct ConsumeBench {
    pub addr: SocketAddr,
    pub topic: String,
    pub partitions: i32,
    pub records: u64,
    pub fetch_bytes: i32,
    pub time_limit: Duration,
}

/// Reads every partition from the start until `records` records (counted from batch headers,
/// not decoded) or the time limit.
pub async fn consume(io: &Io, bench: &ConsumeBench) -> Result<Report, ClientError> {
    let mut client = Client::connect(io, bench.addr).await?;
    let start = io.clock.monotonic();
    let deadline = start + bench.time_limit;
    let mut offsets = vec![0i64; bench.partitions as usize];
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut latencies = Vec::new();
    let mut idle_rounds = 0;
    while records < bench.records && io.clock.monotonic() < deadline && idle_rounds < 3 {
        let mut progressed = false;
        for p in 0..bench.partitions {
            let t0 = io.clock.monotonic();
            let fetched = client
                .fetch(&bench.topic, p, offsets[p as usize], bench.fetch_bytes, Duration::from_millis(100))
                .await?;
            latencies.push(io.clock.monotonic().saturating_sub(t0).as_micros() as u64);
            for item in batch::iter(&fetched.records) {
                let Ok((_, header)) = item else { break };
                if header.last_offset() < offsets[p as usize] {
                    continue;
                }
                records += header.record_count as u64;
                bytes += header.total_len() as u64;
                offsets[p as usize] = header.next_offset();
                progressed = true;
            }
        }
        idle_rounds = if progressed { 0 } else { idle_rounds + 1 };
    }
    Ok(Report {
        records,
        bytes,
        seconds: io.clock.monotonic().saturating_sub(start).as_secs_f64(),
        latency_us: percentiles(latencies),
    })
}
