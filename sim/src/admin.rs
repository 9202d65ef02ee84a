//! A simulated admin client: creates and deletes topics, adds partitions and alters topic
//! configs through `weir::client` while the nemesis works, recording each change and its
//! outcome; and, after healing, reads the metadata back (Metadata, DescribeConfigs) for
//! `metadata_check`. It works on its own topics (`admin-N`), never the workload's, and gives
//! every created topic a fresh name, so each topic's history is one sequence of operations.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use madsim::rand::Rng;
use weir::client::{ClientError, CONFIG_SOURCE_TOPIC};
use weir::io::Io;

use crate::history::{AdminChange, Event, History};
use crate::metadata_check::FinalMetadata;
use crate::workload::{connect, RunClock};

/// Topic names the admin client owns.
pub const PREFIX: &str = "admin-";

#[derive(Clone, Debug)]
pub struct AdminSpec {
    /// The brokers to bootstrap from: operation n goes to `addrs[n % len]`.
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
        "max.message.bytes" => (1_000_000 + n).to_string(),
        _ => (3_600_000 + n as u64 * 1000).to_string(),
    }
}

pub async fn run_admin(io: Io, spec: AdminSpec, history: History, clock: RunClock) {
    // What the client believes exists (acknowledged), to pick sensible operations; the checker
    // does not rely on it.
    let mut live: BTreeMap<String, i32> = BTreeMap::new();
    let mut created = 0u64;
    let mut op = 0u64;
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
            let addr = spec.addrs[op as usize % spec.addrs.len()];
            let mut c = connect(&io, addr, spec.timeout).await?;
            match &change {
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
            }
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
                        error: e.to_string(),
                    },
                );
            }
        }
    }
}

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
