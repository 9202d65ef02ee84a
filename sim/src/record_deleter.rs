//! A simulated operator deleting old records of the workload topic under the faults
//! (`[deleter]`): every `interval` (drawn from the seed) it picks a partition and a fraction,
//! asks the partition's leader for its high watermark (ListOffsets latest: the committed end),
//! and sends DeleteRecords below that fraction of it — or, with `keep_ms`, of the high
//! watermark it saw at least `keep_ms` earlier (records older than that: a follower down for
//! less than that still holds the new log start, see `docs/SIMULATION.md`). It behaves as Kafka's Java AdminClient's
//! `deleteRecords`: the request goes to the leader its cached metadata names
//! (`routing::Routes`); a retriable answer (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
//! REQUEST_TIMED_OUT, a broken connection or a time-out) marks the leader stale and is retried
//! after a backoff until the call's own bound (`api_timeout`, `default.api.timeout.ms`); any
//! other error is final. Each deletion is recorded as sent, then deleted (with the low
//! watermark answered) or failed (with the last error): `delete_check` judges them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use madsim::rand::Rng;
use weir::client::ClientError;
use weir::io::Io;

use crate::admin::{RETRY_BACKOFF, RETRY_BACKOFF_MAX};
use crate::delete_check::DeleteEvent;
use crate::history::{Event, History};
use crate::routing::Routes;
use crate::workload::RunClock;

#[derive(Clone, Debug)]
pub struct DeleterSpec {
    /// The brokers to find partition leaders through (the one broker, on a single node).
    pub bootstrap: Vec<SocketAddr>,
    pub topic: String,
    pub partitions: i32,
    /// Bounds of the pause before each deletion, drawn uniformly.
    pub interval_ms: [u64; 2],
    /// At most this many deletions a run.
    pub count: u32,
    /// Delete only below a high watermark seen at least this long ago (0: the current one).
    pub keep_ms: u64,
    /// Each attempt's bound (the client's time-out); the request asks the leader to answer
    /// within half of it.
    pub timeout: Duration,
    /// The whole call's bound, retries included.
    pub api_timeout: Duration,
    pub until_ms: u64,
}

pub async fn run_deleter(io: Io, spec: DeleterSpec, history: History, clock: RunClock) {
    let mut routes = Routes::new(spec.bootstrap.clone(), crate::routing::DEFAULT_MAX_AGE, 0);
    let mut op = 0u64;
    // Per partition, the high watermarks seen and when (run time).
    let mut seen: BTreeMap<i32, Vec<(u64, i64)>> = BTreeMap::new();
    while u64::from(spec.count) > op && clock.now_ms() < spec.until_ms {
        // Drawn in a block: the generator is not held across an await.
        let (pause, partition, fraction) = {
            let mut rng = madsim::rand::thread_rng();
            let [lo, hi] = spec.interval_ms;
            (
                rng.gen_range(lo..=hi),
                rng.gen_range(0..spec.partitions.max(1)),
                rng.gen_range(0.0..=1.0f64),
            )
        };
        io.clock.sleep(Duration::from_millis(pause)).await;
        if clock.now_ms() >= spec.until_ms {
            break;
        }
        // The committed end, from the leader (a record below it is acknowledged or committed).
        let asked = async {
            let mut c = routes
                .connect_leader(&io, &spec.topic, partition, spec.timeout)
                .await?;
            c.list_offset(&spec.topic, partition, -1).await
        };
        let high_watermark = match asked.await {
            Ok((hw, _)) => hw,
            Err(_) => {
                routes.stale(&spec.topic, partition);
                continue;
            }
        };
        let now = clock.now_ms();
        let samples = seen.entry(partition).or_default();
        samples.push((now, high_watermark));
        let bound = match spec.keep_ms {
            0 => high_watermark,
            keep => samples
                .iter()
                .rev()
                .find(|&&(at, _)| at + keep <= now)
                .map_or(0, |&(_, hw)| hw),
        };
        // A fraction of the whole range, so that a deletion after a leader change may well
        // ask for less than an earlier one (an offset below the log start changes nothing).
        let offset = (bound as f64 * fraction) as i64;
        if offset <= 0 {
            continue;
        }
        op += 1;
        history.record(
            clock.now_ms(),
            Event::Delete(DeleteEvent::Sent {
                op,
                partition,
                offset,
            }),
        );
        let event = match delete(&io, &spec, &mut routes, partition, offset).await {
            Ok(low_watermark) => DeleteEvent::Deleted { op, low_watermark },
            Err(e) => DeleteEvent::Failed {
                op,
                error: e.to_string(),
            },
        };
        history.record(clock.now_ms(), Event::Delete(event));
    }
}

/// One `deleteRecords` call: attempts until an answer that is not retriable or the call's
/// bound. Returns the low watermark, or the last error.
async fn delete(
    io: &Io,
    spec: &DeleterSpec,
    routes: &mut Routes,
    partition: i32,
    offset: i64,
) -> Result<i64, ClientError> {
    let deadline = io.clock.monotonic() + spec.api_timeout;
    let wait_ms = (spec.timeout.as_millis() / 2).min(i32::MAX as u128) as i32;
    let mut backoff = RETRY_BACKOFF;
    loop {
        let attempt = async {
            let mut c = routes
                .connect_leader(io, &spec.topic, partition, spec.timeout)
                .await?;
            c.delete_records(&spec.topic, partition, offset, wait_ms)
                .await
        }
        .await;
        let e = match attempt {
            Ok(low_watermark) => return Ok(low_watermark),
            Err(e) => e,
        };
        routes.stale(&spec.topic, partition);
        let left = deadline.saturating_sub(io.clock.monotonic());
        if !e.is_retriable() || left.is_zero() {
            return Err(e);
        }
        io.clock.sleep(backoff.min(left)).await;
        backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
    }
}
