//! A simulated admin client: creates and deletes topics, adds partitions and alters topic
//! configs through `weir::client` while the nemesis works, recording each change and its
//! outcome; and, after healing, reads the metadata back (Metadata, DescribeConfigs) for
//! `metadata_check`. It works on its own topics (`admin-N`), never the workload's, and gives
//! every created topic a fresh name, so each topic's history is one sequence of operations.
//!
//! It behaves as librdkafka's Admin API (`admin_errors` has the rules read from
//! `rdkafka_admin.c`): each request goes to the broker a Metadata answer names as controller
//! (cached, as librdkafka caches its metadata, until a connection to it fails, a request
//! times out, it answers NOT_CONTROLLER, or [`crate::routing::DEFAULT_MAX_AGE`] passes); while
//! none is known or reachable it waits, asking the bootstrap brokers in turn with a backoff,
//! up to the request's timeout (`request_timeout_ms`, also the request's own
//! `timeout_ms`); then it sends the request once and surfaces whatever comes back: the
//! topic's error code, or `_TRANSPORT` / `_TIMED_OUT`. Every failure is recorded with its
//! code (`AdminFail`'s error starts `[code]`) for `admin-availability`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use madsim::rand::Rng;
use weir::client::{Client, ClientError, CONFIG_SOURCE_TOPIC};
use weir::io::Io;

use crate::history::{AdminChange, Event, History};
use crate::metadata_check::FinalMetadata;
use crate::workload::{connect, RunClock};

/// Topic names the admin client owns.
pub const PREFIX: &str = "admin-";

#[derive(Clone, Debug)]
pub struct AdminSpec {
    /// The brokers to bootstrap from (asked in turn for the controller).
    pub addrs: Vec<SocketAddr>,
    pub interval: Duration,
    pub timeout: Duration,
    pub until_ms: u64,
}

/// Bound on admin topics created in one run.
const MAX_TOPICS: u64 = 200;

/// Overrides the admin client sets: harmless for topics nobody writes to, and each with values
/// the broker accepts.
const CONFIG_KEYS: [&str; 3] = ["retention.ms", "segment.ms", "max.message.bytes"];

fn config_value(key: &str, n: u32) -> String {
    match key {
        // An int: kept well inside i32 (a value past it is refused INVALID_CONFIG, which the
        // admin-availability check would rightly count against the workload).
        "max.message.bytes" => (1_000_000 + n % 1_000_000).to_string(),
        _ => (3_600_000 + n as u64 * 1000).to_string(),
    }
}

pub async fn run_admin(io: Io, spec: AdminSpec, history: History, clock: RunClock) {
    // What the client believes exists (acknowledged), to pick sensible operations; the checker
    // does not rely on it.
    let mut live: BTreeMap<String, i32> = BTreeMap::new();
    let mut created = 0u64;
    let mut op = 0u64;
    let mut controller = Controller::new(spec.addrs.clone());
    while clock.now_ms() < spec.until_ms {
        io.clock.sleep(spec.interval).await;
        // Drawn in a block: the generator is not held across an await.
        let Some(change) = ({
            let mut rng = madsim::rand::thread_rng();
            let pick = rng.gen_range(0..4u32);
            let target = if live.is_empty() {
                None
            } else {
                let i = rng.gen_range(0..live.len());
                live.iter().nth(i).map(|(t, n)| (t.clone(), *n))
            };
            match (pick, target) {
                (1, Some((topic, _))) => Some(AdminChange::DeleteTopic { topic }),
                (2, Some((topic, n))) => Some(AdminChange::CreatePartitions {
                    topic,
                    count: n + rng.gen_range(1..=2),
                }),
                (3, Some((topic, _))) => {
                    let mut changes = BTreeMap::new();
                    for key in CONFIG_KEYS {
                        match rng.gen_range(0..3u32) {
                            0 => {}
                            1 => {
                                changes.insert(key.to_string(), Some(config_value(key, rng.gen())));
                            }
                            _ => {
                                changes.insert(key.to_string(), None);
                            }
                        }
                    }
                    if changes.is_empty() {
                        changes.insert(
                            CONFIG_KEYS[0].to_string(),
                            Some(config_value(CONFIG_KEYS[0], 1)),
                        );
                    }
                    Some(AdminChange::AlterConfigs { topic, changes })
                }
                _ if created < MAX_TOPICS => {
                    created += 1;
                    let mut configs = BTreeMap::new();
                    if rng.gen_bool(0.5) {
                        configs.insert(
                            CONFIG_KEYS[0].to_string(),
                            config_value(CONFIG_KEYS[0], rng.gen()),
                        );
                    }
                    Some(AdminChange::CreateTopic {
                        topic: format!("{PREFIX}{created}"),
                        partitions: rng.gen_range(1..=4),
                        configs,
                    })
                }
                _ => None,
            }
        }) else {
            continue;
        };
        op += 1;
        history.record(
            clock.now_ms(),
            Event::AdminInvoke {
                op,
                change: change.clone(),
            },
        );
        let result = async {
            let mut c = controller.client(&io, spec.timeout).await?;
            let result = match &change {
                AdminChange::CreateTopic {
                    topic,
                    partitions,
                    configs,
                } => c.create_topic(topic, *partitions, 1, configs).await,
                AdminChange::DeleteTopic { topic } => c.delete_topic(topic).await,
                AdminChange::CreatePartitions { topic, count } => {
                    c.create_partitions(topic, *count).await
                }
                AdminChange::AlterConfigs { topic, changes } => {
                    c.alter_topic_configs(topic, changes).await
                }
            };
            if matches!(
                result,
                Err(ClientError::Io(_)
                    | ClientError::Timeout
                    | ClientError::Kafka(ResponseError::NotController, _))
            ) {
                controller.stale();
            }
            result
        }
        .await;
        match result {
            Ok(()) => {
                history.record(clock.now_ms(), Event::AdminAck { op });
                match &change {
                    AdminChange::CreateTopic {
                        topic, partitions, ..
                    } => {
                        live.insert(topic.clone(), *partitions);
                    }
                    AdminChange::DeleteTopic { topic } => {
                        live.remove(topic);
                    }
                    AdminChange::CreatePartitions { topic, count } => {
                        live.insert(topic.clone(), *count);
                    }
                    AdminChange::AlterConfigs { .. } => {}
                }
            }
            Err(e) => {
                // A refusal from the broker is definite unless it is one a client retries
                // (a storage error, a time-out on the broker's side): those may have landed.
                // So may a create of a fresh name refused as existing, or partitions added
                // refused as already there: the broker retried the request at the next
                // controller after the first one took it and died (Kafka's forwarding
                // retries too), so what is there may be this very operation's.
                let retried_create = matches!(
                    (&change, &e),
                    (
                        AdminChange::CreateTopic { .. },
                        ClientError::Kafka(ResponseError::TopicAlreadyExists, _)
                    ) | (
                        AdminChange::CreatePartitions { .. },
                        ClientError::Kafka(ResponseError::InvalidPartitions, _)
                    )
                );
                let definite =
                    matches!(e, ClientError::Kafka(..)) && !e.is_retriable() && !retried_create;
                history.record(
                    clock.now_ms(),
                    Event::AdminFail {
                        op,
                        definite,
                        error: crate::admin_errors::describe(&e),
                    },
                );
            }
        }
    }
}

/// librdkafka's controller look-up for admin requests: the controller a Metadata answer
/// named, kept until it fails or grows old (see the module comment).
struct Controller {
    bootstrap: Vec<SocketAddr>,
    /// Metadata requests so far (which bootstrap broker to ask next).
    asked: u64,
    /// The controller and when it was learnt (monotonic).
    cached: Option<(SocketAddr, Duration)>,
}

/// librdkafka's (and the Java AdminClient's) `retry.backoff.ms` and `retry.backoff.max.ms`
/// (100 ms and 1 s): between controller look-ups that found none, and between the record
/// deleter's attempts.
pub(crate) const RETRY_BACKOFF: Duration = Duration::from_millis(100);
pub(crate) const RETRY_BACKOFF_MAX: Duration = Duration::from_millis(1000);

impl Controller {
    fn new(bootstrap: Vec<SocketAddr>) -> Controller {
        assert!(
            !bootstrap.is_empty(),
            "the admin client needs a bootstrap broker"
        );
        Controller {
            bootstrap,
            asked: 0,
            cached: None,
        }
    }

    fn stale(&mut self) {
        self.cached = None;
    }

    /// A connection to the controller, waiting for one up to `timeout` (then `_TIMED_OUT`, as
    /// librdkafka fails a request whose controller look-up outlived its `request_timeout`).
    /// The client's time-out is what is left of `timeout`: the request's whole bound.
    async fn client(&mut self, io: &Io, timeout: Duration) -> Result<Client, ClientError> {
        let deadline = io.clock.monotonic() + timeout;
        let mut backoff = RETRY_BACKOFF;
        loop {
            let left = deadline.saturating_sub(io.clock.monotonic());
            if left.is_zero() {
                return Err(ClientError::Timeout);
            }
            if let Ok(mut c) = self.connect(io, left).await {
                c.set_timeout(deadline.saturating_sub(io.clock.monotonic()).max(MIN_LEFT));
                return Ok(c);
            }
            let left = deadline.saturating_sub(io.clock.monotonic());
            io.clock.sleep(backoff.min(left)).await;
            backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
        }
    }

    async fn connect(&mut self, io: &Io, timeout: Duration) -> Result<Client, ClientError> {
        let now = io.clock.monotonic();
        let addr = match self.cached {
            Some((addr, at)) if now.saturating_sub(at) < crate::routing::DEFAULT_MAX_AGE => addr,
            _ => {
                self.cached = None;
                let via = self.bootstrap[(self.asked % self.bootstrap.len() as u64) as usize];
                self.asked += 1;
                let asked = async {
                    let mut c = connect(io, via, timeout).await?;
                    c.controller().await
                };
                let named = io
                    .timeout(timeout, asked)
                    .await
                    .ok_or(ClientError::Timeout)??
                    .ok_or_else(|| {
                        ClientError::Kafka(
                            ResponseError::BrokerNotAvailable,
                            format!("{via} named no controller"),
                        )
                    })?;
                let addr: SocketAddr =
                    format!("{}:{}", named.host, named.port)
                        .parse()
                        .map_err(|e| {
                            ClientError::Protocol(format!("controller address {}: {e}", named.host))
                        })?;
                self.cached = Some((addr, now));
                addr
            }
        };
        let connected = connect(io, addr, timeout).await;
        if connected.is_err() {
            self.stale();
        }
        connected
    }
}

/// The least time a request is given once its controller is found (a look-up that used the
/// whole bound still sends, as librdkafka's worker does once the controller is up).
const MIN_LEFT: Duration = Duration::from_millis(1);

/// The admin topics as the broker now shows them: partition counts (Metadata) and topic
/// overrides (DescribeConfigs, source = topic).
pub async fn read_metadata(io: &Io, addr: SocketAddr) -> Result<FinalMetadata, ClientError> {
    let mut c = connect(io, addr, Duration::from_secs(10)).await?;
    let mut out = FinalMetadata::new();
    for topic in c.metadata(None).await? {
        if !topic.name.starts_with(PREFIX) || topic.error.is_some() {
            continue;
        }
        let configs = c
            .describe_topic_configs(&topic.name)
            .await?
            .into_iter()
            .filter(|(_, e)| e.source == CONFIG_SOURCE_TOPIC)
            .filter_map(|(k, e)| e.value.map(|v| (k, v)))
            .collect();
        out.insert(topic.name, (topic.partitions, configs));
    }
    Ok(out)
}
