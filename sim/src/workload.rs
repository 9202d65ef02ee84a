//! Simulated clients: producers and consumers built on Weir's own Kafka client, speaking the real
//! wire protocol over the simulated network, recording everything they do in the history.
//! Every loop is bounded by the run's deadline and by explicit retry limits.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use weir::client::{Client, ClientError};
use weir::io::Io;
use weir::log::batch::{self, BatchBuilder, BatchError};

use crate::history::{value, Event, History};

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
const RECONNECT_BACKOFF: Duration = Duration::from_millis(100);

async fn connect(io: &Io, addr: SocketAddr, timeout: Duration) -> Result<Client, ClientError> {
    let mut client = io
        .timeout(timeout, Client::connect(io, addr))
        .await
        .ok_or(ClientError::Timeout)??;
    client.set_timeout(timeout);
    Ok(client)
}

#[derive(Clone, Debug)]
pub struct ProducerSpec {
    pub id: u32,
    pub addr: SocketAddr,
    pub topic: String,
    pub partitions: i32,
    pub acks: i16,
    pub idempotent: bool,
    pub interval: Duration,
    pub batch_records: u32,
    pub retries: u32,
    pub timeout: Duration,
    /// Stop starting new batches at this run time (ms).
    pub until_ms: u64,
}

/// Idempotent-producer identity: reset (new id) whenever the sequence can no longer be trusted.
struct Identity {
    producer_id: i64,
    epoch: i16,
    sequences: Vec<i32>,
}

pub async fn run_producer(io: Io, spec: ProducerSpec, history: History, clock: RunClock) {
    let mut client: Option<Client> = None;
    let mut identity: Option<Identity> = None;
    let mut batch_number = 0u64;
    while clock.now_ms() < spec.until_ms {
        let partition = (batch_number % spec.partitions as u64) as i32;
        let op = ((spec.id as u64) << 40) | batch_number;
        let values: Vec<String> = (0..spec.batch_records)
            .map(|r| value(spec.id, batch_number, r))
            .collect();
        batch_number += 1;
        history.record(
            clock.now_ms(),
            Event::Invoke {
                op,
                partition,
                values: values.clone(),
            },
        );
        let mut outcome: Result<Option<i64>, String> = Err("not attempted".into());
        let mut bytes: Option<Bytes> = None;
        for attempt in 0..=spec.retries {
            if attempt > 0 {
                io.clock.sleep(RECONNECT_BACKOFF).await;
            }
            if client.is_none() {
                match connect(&io, spec.addr, spec.timeout).await {
                    Ok(c) => client = Some(c),
                    Err(e) => {
                        outcome = Err(format!("connect: {e}"));
                        continue;
                    }
                }
            }
            let c = client.as_mut().expect("connected above");
            if spec.idempotent && identity.is_none() {
                match c.init_producer_id().await {
                    Ok((producer_id, epoch)) => {
                        identity = Some(Identity {
                            producer_id,
                            epoch,
                            sequences: vec![0; spec.partitions as usize],
                        })
                    }
                    Err(e) => {
                        outcome = Err(format!("init producer id: {e}"));
                        client = None;
                        continue;
                    }
                }
            }
            // Built once per identity: a retry must resend the very same sequence numbers.
            let batch = bytes.get_or_insert_with(|| {
                let now = io.clock.wall_ms();
                let mut builder = BatchBuilder::new(now);
                for v in &values {
                    builder.push(None, Some(v.as_bytes()), now);
                }
                let (pid, epoch, seq) = match &identity {
                    Some(id) => (id.producer_id, id.epoch, id.sequences[partition as usize]),
                    None => (-1, -1, -1),
                };
                Bytes::from(builder.finish(pid, epoch, seq))
            });
            match c
                .produce(&spec.topic, partition, batch.clone(), spec.acks)
                .await
            {
                Ok(offset) => {
                    outcome = Ok(offset);
                    break;
                }
                Err(e) => {
                    outcome = Err(e.to_string());
                    let sequence_broken = matches!(
                        e,
                        ClientError::Kafka(
                            ResponseError::OutOfOrderSequenceNumber
                                | ResponseError::InvalidProducerEpoch
                                | ResponseError::UnknownProducerId,
                            _
                        )
                    );
                    if sequence_broken {
                        break;
                    }
                    if matches!(
                        e,
                        ClientError::Io(_) | ClientError::Timeout | ClientError::Protocol(_)
                    ) {
                        client = None;
                    }
                    if !e.is_retriable() {
                        break;
                    }
                }
            }
        }
        match outcome {
            Ok(Some(offset)) => {
                history.record(clock.now_ms(), Event::Ack { op, offset });
                if let Some(id) = identity.as_mut() {
                    let seq = &mut id.sequences[partition as usize];
                    *seq = seq.wrapping_add(spec.batch_records as i32) & i32::MAX;
                }
            }
            Ok(None) => {} // acks=0: nothing to learn
            Err(error) => {
                history.record(clock.now_ms(), Event::Fail { op, error });
                // The batch may or may not be in the log: its sequence can't be reused safely.
                identity = None;
            }
        }
        io.clock.sleep(spec.interval).await;
    }
}

#[derive(Clone, Debug)]
pub struct ConsumerSpec {
    pub id: u32,
    pub addr: SocketAddr,
    pub topic: String,
    pub partitions: i32,
    pub max_wait: Duration,
    pub timeout: Duration,
    pub until_ms: u64,
}

/// Reads every partition from offset 0 onwards, following the log, until the deadline.
pub async fn run_consumer(io: Io, spec: ConsumerSpec, history: History, clock: RunClock) {
    let mut client: Option<Client> = None;
    let mut positions = vec![0i64; spec.partitions as usize];
    while clock.now_ms() < spec.until_ms {
        if client.is_none() {
            match connect(&io, spec.addr, spec.timeout).await {
                Ok(c) => client = Some(c),
                Err(_) => {
                    io.clock.sleep(RECONNECT_BACKOFF).await;
                    continue;
                }
            }
        }
        for partition in 0..spec.partitions {
            let Some(c) = client.as_mut() else { break };
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
                    if matches!(
                        e,
                        ClientError::Io(_) | ClientError::Timeout | ClientError::Protocol(_)
                    ) {
                        client = None;
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
