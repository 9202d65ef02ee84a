//! `weir bench`: load generators that print throughput and latency (produce, consume,
//! long-poll wake-up). While one runs, a progress line on standard error (a terminal only)
//! shows records answered against the run's count and its time limit, and the current MB/s;
//! the figures printed at the end are the run's result, on standard output as before.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use clap::Subcommand;

use weir::bench;
use weir::io::Io;

use super::progress::{fraction, Progress};
use super::{acks, addr, key_values};

#[derive(Subcommand)]
pub enum BenchKind {
    Produce {
        #[arg(long, alias = "bootstrap-server", default_value = "127.0.0.1:9092")]
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
        /// Records to send (also `--num-records`, as kafka-producer-perf-test.sh spells it).
        #[arg(long, alias = "num-records", default_value_t = 1_000_000)]
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
        #[arg(long, alias = "bootstrap-server", default_value = "127.0.0.1:9092")]
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
        #[arg(long, alias = "bootstrap-server", default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(long, default_value = "weir-bench")]
        topic: String,
        #[arg(long, default_value_t = 3)]
        partitions: i32,
        /// Records to read (also `--messages`, as kafka-consumer-perf-test.sh spells it).
        #[arg(long, alias = "messages", default_value_t = 1_000_000)]
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
                progress: Arc::default(),
            };
            let shown = Shown {
                unit: "records",
                total: records,
                limit: spec.time_limit,
                rate: true,
            };
            let report = drawing(io, &spec.progress, shown, bench::produce(io, &spec)).await?;
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
                progress: Arc::default(),
            };
            let shown = Shown {
                unit: "rounds",
                total: rounds,
                limit: spec.time_limit,
                rate: false,
            };
            let report = drawing(io, &spec.progress, shown, bench::longpoll(io, &spec)).await?;
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
                progress: Arc::default(),
            };
            let shown = Shown {
                unit: "records",
                total: records,
                limit: spec.time_limit,
                rate: true,
            };
            let report = drawing(io, &spec.progress, shown, bench::consume(io, &spec)).await?;
            println!("{}", report.render("consume"));
            Ok(())
        }
    }
}

/// What a bench's progress line shows: `unit` done of `total`, the time against `limit`, and
/// (with `rate`) the MB/s of the last redraw interval.
struct Shown {
    unit: &'static str,
    total: u64,
    limit: Duration,
    rate: bool,
}

/// How often the counters are read for the progress line.
const SAMPLE: Duration = Duration::from_millis(200);

/// Runs `run`, showing its progress (read from `progress`) until it ends.
async fn drawing<T>(
    io: &Io,
    progress: &bench::Progress,
    shown: Shown,
    run: impl Future<Output = T>,
) -> T {
    let line = Progress::on_stderr();
    if line.is_hidden() {
        return run.await;
    }
    tokio::pin!(run);
    let start = io.clock.monotonic();
    let mut last = (start, 0u64);
    loop {
        tokio::select! {
            biased;
            out = &mut run => {
                line.finish();
                return out;
            }
            _ = io.clock.sleep(SAMPLE) => {
                let now = io.clock.monotonic();
                let bytes = progress.bytes();
                let interval = now.saturating_sub(last.0).as_secs_f64();
                let mb_per_s = (shown.rate && interval > 0.0)
                    .then(|| bytes.saturating_sub(last.1) as f64 / interval / 1e6);
                last = (now, bytes);
                let (done, message) =
                    bench_line(&shown, progress.records(), now.saturating_sub(start), mb_per_s);
                line.update(done, message);
            }
        }
    }
}

/// The fraction of the run done (by count or by time, whichever is further: either ends it)
/// and the line's text.
fn bench_line(shown: &Shown, done: u64, elapsed: Duration, mb_per_s: Option<f64>) -> (f64, String) {
    let by_time = elapsed.as_secs_f64() / shown.limit.as_secs_f64().max(1e-9);
    let mut text = format!(
        "{done}/{} {}, {:.0}/{} s",
        shown.total,
        shown.unit,
        elapsed.as_secs_f64(),
        shown.limit.as_secs()
    );
    if let Some(rate) = mb_per_s {
        text += &format!(", {rate:.1} MB/s");
    }
    (fraction(done, shown.total).max(by_time), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_count_time_and_rate() {
        let shown = Shown {
            unit: "records",
            total: 1000,
            limit: Duration::from_secs(60),
            rate: true,
        };
        let (done, text) = bench_line(&shown, 250, Duration::from_secs(6), Some(12.34));
        assert_eq!(done, 0.25);
        assert_eq!(text, "250/1000 records, 6/60 s, 12.3 MB/s");
        // A time-bound run: the time is the further of the two.
        let (done, _) = bench_line(&shown, 10, Duration::from_secs(30), None);
        assert_eq!(done, 0.5);
        let rounds = Shown {
            unit: "rounds",
            rate: false,
            ..shown
        };
        let (_, text) = bench_line(&rounds, 3, Duration::from_millis(1500), None);
        assert_eq!(text, "3/1000 rounds, 2/60 s");
    }
}
