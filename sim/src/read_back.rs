//! After the faults heal: the liveness probe (a produce and a fetch per partition within a
//! bound) and the final read of every partition from its start to its high watermark. Plain
//! code over [`Io`]: the simulator runs it on its client machine, the real-process fault suite
//! (`jepsen`) against real brokers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weir::client::{Client, ClientError};
use weir::io::Io;
use weir::log::batch::BatchBuilder;

use crate::checker::{FinalRead, PartitionRead};
use crate::history::{Event, History};
use crate::workload::{self, RunClock};

/// Partitions left leaderless by design (KIP-966), which the end of a run does not judge.
pub type Exempt = Arc<std::sync::Mutex<std::collections::BTreeSet<i32>>>;

/// Where and how long: a single broker (`addr`, `bootstrap` empty) or a cluster (each
/// partition through its leader, found through `bootstrap`), and the bound on the whole.
#[derive(Clone, Copy)]
pub struct Probe<'a> {
    pub addr: SocketAddr,
    pub bootstrap: &'a [SocketAddr],
    pub topic: &'a str,
    pub bound: Duration,
}

/// Produces one record per partition and fetches it back (through the partition's leader when
/// `bootstrap` names a cluster's brokers); `Some(reason)` if that cannot be done within
/// `probe.bound`.
pub async fn liveness_check(
    io: &Io,
    probe: Probe<'_>,
    partitions: i32,
    exempt: &Exempt,
    history: History,
    clock: RunClock,
) -> Option<String> {
    let Probe {
        addr,
        bootstrap,
        topic,
        bound,
    } = probe;
    let deadline = clock.now_ms() + bound.as_millis() as u64;
    let mut last_error = String::from("no attempt");
    // In a cluster the probe finds leaders as the producers do: a cached leader map
    // (`routing::Routes`), marked stale when an attempt fails.
    let mut routes = (!bootstrap.is_empty()).then(|| {
        crate::routing::Routes::new(bootstrap.to_vec(), crate::routing::DEFAULT_MAX_AGE, 0)
    });
    for partition in 0..partitions {
        let value = format!("liveness-{partition}");
        let op = (u32::MAX as u64) << 32 | partition as u64;
        history.record(
            clock.now_ms(),
            Event::Invoke {
                op,
                partition,
                session: 0,
                values: vec![value.clone()],
            },
        );
        let mut done = false;
        while clock.now_ms() < deadline && !done {
            if exempt.lock().unwrap().contains(&partition) {
                // Leaderless by design (noted in the trace): its probe stays unanswered.
                done = true;
                break;
            }
            let attempt = async {
                let mut c = match routes.as_mut() {
                    None => Client::connect(io, addr).await?,
                    Some(routes) => {
                        routes
                            .connect_leader(io, topic, partition, Duration::from_secs(5))
                            .await?
                    }
                };
                c.set_timeout(Duration::from_secs(5));
                let mut b = BatchBuilder::new(io.clock.wall_ms());
                b.push(None, Some(value.as_bytes()), io.clock.wall_ms());
                let offset = c
                    .produce(topic, partition, Bytes::from(b.finish(-1, -1, -1)), -1)
                    .await?
                    .unwrap_or(-1);
                let fetched = c
                    .fetch(
                        topic,
                        partition,
                        offset,
                        1 << 20,
                        Duration::from_millis(100),
                    )
                    .await?;
                let found = workload::decode(&fetched.records, offset)
                    .into_iter()
                    .any(|r| matches!(r, Ok((o, ref v)) if o == offset && *v == value));
                Ok::<_, ClientError>((offset, found))
            };
            let attempt = io.timeout(Duration::from_secs(10), attempt).await;
            if let (Some(routes), false) = (routes.as_mut(), matches!(attempt, Some(Ok(_)))) {
                routes.stale(topic, partition);
            }
            match attempt {
                Some(Ok((offset, true))) => {
                    history.record(clock.now_ms(), Event::Ack { op, offset });
                    done = true;
                }
                Some(Ok((offset, false))) => {
                    last_error = format!("record at {offset} not fetched back")
                }
                Some(Err(e)) => last_error = e.to_string(),
                None => last_error = "timed out".into(),
            }
            if !done {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        if !done {
            return Some(format!("partition {partition}: {last_error}"));
        }
    }
    None
}

/// Reads every partition from its start to its high watermark (from the partition's leader
/// when `bootstrap` names a cluster's brokers). A partition the broker cannot serve past some
/// offset (say, a batch rotted on disk) is read up to there, and noted.
pub async fn final_read(
    io: &Io,
    probe: Probe<'_>,
    parts: std::ops::Range<i32>,
    history: History,
    clock: RunClock,
) -> Result<FinalRead, String> {
    let Probe {
        addr,
        bootstrap,
        topic,
        bound,
    } = probe;
    let mut last_error = String::new();
    let deadline = clock.now_ms() + bound.as_millis() as u64;
    // Bounded retries for connection trouble; broker errors end a partition's read instead.
    for attempt in 0..50u64 {
        if clock.now_ms() >= deadline {
            last_error = format!("{last_error} (gave up after {bound:?})");
            break;
        }
        let result = async {
            let mut c = Client::connect(io, addr).await?;
            c.set_timeout(Duration::from_secs(10));
            let mut read = FinalRead::new();
            for p in parts.clone() {
                if !bootstrap.is_empty() {
                    c = crate::routing::connect_leader(
                        io,
                        bootstrap,
                        attempt,
                        topic,
                        p,
                        Duration::from_secs(10),
                    )
                    .await?;
                }
                let offsets = async {
                    Ok::<_, ClientError>((
                        c.list_offset(topic, p, -2).await?.0,
                        c.list_offset(topic, p, -1).await?.0,
                    ))
                }
                .await;
                let (start, end) = match offsets {
                    Ok(o) => o,
                    // In a cluster a retriable error (the leader moved) means: read again.
                    Err(ClientError::Kafka(code, _))
                        if bootstrap.is_empty() || !code.is_retriable() =>
                    {
                        history.record(
                            clock.now_ms(),
                            Event::Note(format!("final read of partition {p}: {code}")),
                        );
                        // Unreadable: no knowledge of it, so no lost-read verdicts either.
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let mut records = Vec::new();
                let mut offset = start;
                while offset < end {
                    let fetched = match c
                        .fetch(topic, p, offset, 1 << 20, Duration::from_millis(10))
                        .await
                    {
                        Ok(f) => f,
                        Err(ClientError::Kafka(code, _))
                            if bootstrap.is_empty() || !code.is_retriable() =>
                        {
                            history.record(
                                clock.now_ms(),
                                Event::Note(format!(
                                    "final read of partition {p} stops at {offset}: {code}"
                                )),
                            );
                            break;
                        }
                        Err(e) => return Err(e),
                    };
                    let before = offset;
                    for r in workload::decode(&fetched.records, offset) {
                        match r {
                            Ok((o, v)) if o < end => {
                                records.push((o, v));
                                offset = o + 1;
                            }
                            Ok(_) => break,
                            Err((o, e)) => {
                                history.record(
                                    clock.now_ms(),
                                    Event::CorruptRead {
                                        consumer: u32::MAX,
                                        partition: p,
                                        offset: o,
                                        error: e,
                                    },
                                );
                                break;
                            }
                        }
                    }
                    // Every round makes progress or ends the partition.
                    if offset == before {
                        break;
                    }
                }
                // Where the read broke off (a batch the broker cannot serve), if it did.
                let stopped_at = (offset < end).then_some(offset);
                read.insert(
                    p,
                    PartitionRead {
                        start,
                        stopped_at,
                        records,
                    },
                );
            }
            Ok::<_, ClientError>(read)
        };
        match io.timeout(bound, result).await {
            Some(Ok(read)) => return Ok(read),
            Some(Err(e)) => last_error = e.to_string(),
            None => last_error = "timed out".into(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("final read failed: {last_error}"))
}
