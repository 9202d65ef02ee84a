//! `weir bench`: load generators that print throughput and latency (produce, consume,
//! long-poll wake-up).

use std::time::Duration;

use clap::Subcommand;

use weir::bench;
use weir::io::Io;

use super::{acks, addr, key_values};

#[derive(Subcommand)]
pub enum BenchKind {
    Produce {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(long, default_value = "weir-bench")]
        topic: String,
        #[arg(long, default_value_t = 3)]
        partitions: i32,
        /// Replication factor of the topic the run creates.
        #[arg(long, default_value_t = 1)]
        replication_factor: i16,
        /// A config of the topic the run creates, as key=value (repeatable), e.g.
        /// min.insync.replicas=2.
        #[arg(long = "topic-config")]
        topic_configs: Vec<String>,
        #[arg(long, default_value_t = 100)]
        record_size: usize,
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        #[arg(long, default_value_t = 100)]
        batch: usize,
        /// A fixed offered load in MB/s (10^6 bytes) of record values; latency then counts from
        /// each request's scheduled send time. Default: as fast as the requests in flight allow.
        #[arg(long)]
        rate_mb: Option<f64>,
        /// 0, 1 or all.
        #[arg(long, default_value = "1")]
        acks: String,
        /// Requests in flight per connection.
        #[arg(long, default_value_t = 5)]
        in_flight: usize,
        /// Connections sharing the records, each with its own requests in flight.
        #[arg(long, default_value_t = 1)]
        connections: usize,
        /// Do not create the topic first (for brokers without CreateTopics, e.g. librdkafka's
        /// mock cluster, where it must already exist with --partitions partitions).
        #[arg(long)]
        no_create: bool,
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// Long-poll wake-up latency: produce one record to partition 0, time until the consumer's
    /// parked fetch answers; idle pollers long-poll the other partitions meanwhile.
    Longpoll {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(long, default_value = "weir-longpoll")]
        topic: String,
        #[arg(long, default_value_t = 8)]
        partitions: i32,
        #[arg(long, default_value_t = 2000)]
        rounds: u64,
        /// Connections long-polling partitions nothing is produced to.
        #[arg(long, default_value_t = 0)]
        idle_pollers: usize,
        #[arg(long)]
        no_create: bool,
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    Consume {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(long, default_value = "weir-bench")]
        topic: String,
        #[arg(long, default_value_t = 3)]
        partitions: i32,
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        /// Bytes per partition per fetch (max.partition.fetch.bytes).
        #[arg(long, default_value_t = 1 << 20)]
        fetch_bytes: i32,
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
}

pub async fn run(io: &Io, which: BenchKind) -> anyhow::Result<()> {
    match which {
        BenchKind::Produce {
            bootstrap,
            topic,
            partitions,
            replication_factor,
            topic_configs,
            record_size,
            records,
            batch,
            rate_mb,
            acks: a,
            in_flight,
            connections,
            no_create,
            seconds,
        } => {
            if rate_mb.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
                anyhow::bail!("--rate-mb must be a positive number");
            }
            let spec = bench::ProduceBench {
                addr: addr(&bootstrap)?,
                topic,
                partitions,
                replication_factor,
                topic_configs: key_values(&topic_configs)?,
                rate: rate_mb.map(|r| r * 1e6),
                record_size,
                records,
                records_per_batch: batch,
                acks: acks(&a)?,
                in_flight,
                connections,
                create_topic: !no_create,
                time_limit: Duration::from_secs(seconds),
            };
            let report = bench::produce(io, &spec).await?;
            let offered = rate_mb.map_or(String::new(), |r| format!(" offered {r} MB/s"));
            println!(
                "{}",
                report.render(&format!("produce {record_size} B acks={a}{offered}"))
            );
            Ok(())
        }
        BenchKind::Longpoll {
            bootstrap,
            topic,
            partitions,
            rounds,
            idle_pollers,
            no_create,
            seconds,
        } => {
            let spec = bench::LongPollBench {
                addr: addr(&bootstrap)?,
                topic,
                partitions,
                rounds,
                idle_pollers,
                create_topic: !no_create,
                time_limit: Duration::from_secs(seconds),
            };
            let report = bench::longpoll(io, &spec).await?;
            println!(
                "{}",
                report.render(&format!("long-poll wake-up, {idle_pollers} idle pollers"))
            );
            Ok(())
        }
        BenchKind::Consume {
            bootstrap,
            topic,
            partitions,
            records,
            fetch_bytes,
            seconds,
        } => {
            let spec = bench::ConsumeBench {
                addr: addr(&bootstrap)?,
                topic,
                partitions,
                records,
                fetch_bytes,
                time_limit: Duration::from_secs(seconds),
            };
            let report = bench::consume(io, &spec).await?;
            println!("{}", report.render("consume"));
            Ok(())
        }
    }
}
