//! Simulated consumers (and what all simulated clients share) built on Weir's own Kafka client,
//! speaking the real wire protocol over the simulated network, recording everything they read
//! in the history. Producers are in `producer.rs`, admin clients in `admin.rs`. Every loop is
//! bounded by the run's deadline and by explicit retry limits.

use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use weir::client::{Client, ClientError};
use weir::io::Io;
use weir::log::batch::{self, BatchError};

use crate::history::{Event, History};

/// Simulated milliseconds since the run began: the history's time axis.
#[derive(Clone, Copy)]
pub struct RunClock {
    origin: tokio::time::Instant,
}

impl RunClock {
    pub fn start() -> RunClock {
        RunClock {
            origin: tokio::time::Instant::now(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        tokio::time::Instant::now()
            .duration_since(self.origin)
            .as_millis() as u64
    }
}

/// Pause after a connection failure before trying again.
pub(crate) const RECONNECT_BACKOFF: Duration = Duration::from_millis(100);

pub(crate) async fn connect(
    io: &Io,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<Client, ClientError> {
    let mut client = io
        .timeout(timeout, Client::connect(io, addr))
        .await
        .ok_or(ClientError::Timeout)??;
    client.set_timeout(timeout);
    Ok(client)
}

#[derive(Clone, Debug)]
pub struct ConsumerSpec {
    pub id: u32,
    pub addr: SocketAddr,
    /// A cluster's brokers: when not empty, each partition is fetched from its leader (found
    /// through them) on a connection of its own, instead of everything from `addr`.
    pub bootstrap: Vec<SocketAddr>,
    pub topic: String,
    pub partitions: i32,
    pub max_wait: Duration,
    pub timeout: Duration,
    pub until_ms: u64,
    /// `client.rack` (empty: none); only the validating consumer sends it.
    pub rack: String,
}

/// Reads every partition from offset 0 onwards, following the log, until the deadline.
pub async fn run_consumer(io: Io, spec: ConsumerSpec, history: History, clock: RunClock) {
    let routed = !spec.bootstrap.is_empty();
    // One connection for everything on a single broker; one per partition (to its leader)
    // in a cluster.
    let mut clients: Vec<Option<Client>> = (0..if routed { spec.partitions } else { 1 })
        .map(|_| None)
        .collect();
    let mut routes = routed.then(|| {
        crate::routing::Routes::new(
            spec.bootstrap.clone(),
            crate::routing::DEFAULT_MAX_AGE,
            spec.id as u64,
        )
    });
    let mut positions = vec![0i64; spec.partitions as usize];
    while clock.now_ms() < spec.until_ms {
        if !routed && clients[0].is_none() {
            match connect(&io, spec.addr, spec.timeout).await {
                Ok(c) => clients[0] = Some(c),
                Err(_) => {
                    io.clock.sleep(RECONNECT_BACKOFF).await;
                    continue;
                }
            }
        }
        for partition in 0..spec.partitions {
            let slot = if routed { partition as usize } else { 0 };
            if let (Some(routes), None) = (routes.as_mut(), clients[slot].as_ref()) {
                match routes
                    .connect_leader(&io, &spec.topic, partition, spec.timeout)
                    .await
                {
                    Ok(c) => clients[slot] = Some(c),
                    Err(_) => {
                        io.clock.sleep(RECONNECT_BACKOFF).await;
                        continue;
                    }
                }
            }
            let Some(c) = clients[slot].as_mut() else {
                break;
            };
            let position = &mut positions[partition as usize];
            match c
                .fetch(&spec.topic, partition, *position, 1 << 20, spec.max_wait)
                .await
            {
                Ok(fetched) => {
                    let reads = decode(&fetched.records, *position);
                    for read in reads {
                        match read {
                            Ok((offset, v)) => {
                                *position = offset + 1;
                                history.record(
                                    clock.now_ms(),
                                    Event::Read {
                                        consumer: spec.id,
                                        partition,
                                        offset,
                                        value: v,
                                        high_watermark: fetched.high_watermark,
                                    },
                                );
                            }
                            Err((offset, error)) => {
                                history.record(
                                    clock.now_ms(),
                                    Event::CorruptRead {
                                        consumer: spec.id,
                                        partition,
                                        offset,
                                        error,
                                    },
                                );
                                break;
                            }
                        }
                    }
                }
                Err(ClientError::Kafka(ResponseError::OffsetOutOfRange, _)) => {
                    // The log is shorter than our position (data was lost) or was trimmed:
                    // start again from its end, as auto.offset.reset=latest would.
                    if let Ok((latest, _)) = c.list_offset(&spec.topic, partition, -1).await {
                        history.record(
                            clock.now_ms(),
                            Event::Reset {
                                consumer: spec.id,
                                partition,
                                from: *position,
                                to: latest,
                            },
                        );
                        *position = latest;
                    }
                }
                Err(e) => {
                    // In a cluster any other error may mean the leader moved: ask again.
                    if routed
                        || matches!(
                            e,
                            ClientError::Io(_) | ClientError::Timeout | ClientError::Protocol(_)
                        )
                    {
                        clients[slot] = None;
                        if let Some(routes) = routes.as_mut() {
                            routes.stale(&spec.topic, partition);
                        }
                    }
                    io.clock.sleep(RECONNECT_BACKOFF).await;
                }
            }
        }
    }
}

/// The records at or after `from` in fetched bytes: (offset, value), or where decoding failed.
/// A torn last batch is how Kafka may end a response and is not an error.
pub fn decode(records: &[u8], from: i64) -> Vec<Result<(i64, String), (i64, String)>> {
    let mut out = Vec::new();
    let mut expected = from;
    for item in batch::iter(records) {
        let (at, header) = match item {
            Ok(ok) => ok,
            Err(BatchError::Truncated { .. }) => break,
            Err(e) => {
                out.push(Err((expected, e.to_string())));
                break;
            }
        };
        let bytes = &records[at..at + header.total_len()];
        match batch::records(bytes, &header) {
            Some(Ok(records)) => {
                for r in records {
                    if r.offset < from {
                        continue;
                    }
                    let v = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
                    out.push(Ok((r.offset, v)));
                }
            }
            Some(Err(e)) => {
                out.push(Err((header.base_offset, e.to_string())));
                break;
            }
            None => {
                out.push(Err((header.base_offset, "compressed batch".into())));
                break;
            }
        }
        expected = header.next_offset();
    }
    out
}
