//! Topic descriptions as `kafka-topics.sh --describe` prints them: Metadata for brokers,
//! leaders, replicas and ISR, DescribeTopicPartitions (when the broker has it) for the
//! eligible leader replicas, DescribeConfigs for the topic's overrides. Also the wait for a
//! topic's leader that a producer does before its first send (auto-creating the topic when
//! the broker allows it, as Kafka's producer does through Metadata).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, DescribeTopicPartitionsRequest, MetadataRequest, MetadataResponse,
};
use uuid::Uuid;

use super::{name, Client, ClientError, Result, CONFIG_SOURCE_TOPIC, METADATA_VERSION};

/// A broker as Metadata lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerInfo {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

/// [`Client::topic_leaders`]' answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicLeaders {
    /// The topic's id (nil from a broker too old to send one).
    pub id: Uuid,
    /// Partition → its live leader and leader epoch (-1: the broker sent none).
    pub leaders: BTreeMap<i32, (BrokerInfo, i32)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PartitionDescription {
    pub partition: i32,
    /// -1: none.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub elr: Vec<i32>,
    pub last_known_elr: Vec<i32>,
    pub offline: Vec<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TopicDescription {
    pub name: String,
    pub id: Uuid,
    pub internal: bool,
    pub partitions: Vec<PartitionDescription>,
    /// The topic-level overrides.
    pub configs: BTreeMap<String, String>,
}

/// How long [`Client::wait_for_leader`] tries at most.
const LEADER_WAIT_ATTEMPTS: u32 = 50;
const LEADER_WAIT_BACKOFF: Duration = Duration::from_millis(100);

impl Client {
    pub(super) async fn metadata_full(
        &mut self,
        topics: Option<&[&str]>,
        auto_create: bool,
    ) -> Result<MetadataResponse> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|list| {
                list.iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
                    .collect()
            }))
            .with_allow_auto_topic_creation(auto_create);
        self.call(&request, METADATA_VERSION).await
    }

    /// The cluster id Metadata reports.
    pub async fn cluster_id(&mut self) -> Result<Option<String>> {
        let response = self.metadata_full(Some(&[]), false).await?;
        Ok(response.cluster_id.map(|c| c.to_string()))
    }

    /// The brokers the cluster lists (live, unfenced), by id.
    pub async fn brokers(&mut self) -> Result<Vec<BrokerInfo>> {
        let response = self.metadata_full(Some(&[]), false).await?;
        let mut brokers: Vec<BrokerInfo> = response
            .brokers
            .into_iter()
            .map(|b| BrokerInfo {
                id: b.node_id.0,
                host: b.host.to_string(),
                port: b.port as u16,
            })
            .collect();
        brokers.sort_by_key(|b| b.id);
        Ok(brokers)
    }

    /// Descriptions of the named topics (all, without names), sorted by name. An unknown topic
    /// named is an error, as in `kafka-topics.sh`.
    pub async fn describe_topics(
        &mut self,
        topics: Option<&[&str]>,
    ) -> Result<Vec<TopicDescription>> {
        let response = self.metadata_full(topics, false).await?;
        let mut out = Vec::new();
        for t in response.topics {
            let topic_name = t.name.map(|n| n.to_string()).unwrap_or_default();
            if let Some(e) = ResponseError::try_from_code(t.error_code) {
                return Err(ClientError::Kafka(e, format!("topic '{topic_name}'")));
            }
            let ids = |v: &[kafka_protocol::messages::BrokerId]| v.iter().map(|b| b.0).collect();
            let mut partitions: Vec<PartitionDescription> = t
                .partitions
                .iter()
                .map(|p| PartitionDescription {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    replicas: ids(&p.replica_nodes),
                    isr: ids(&p.isr_nodes),
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
                    offline: ids(&p.offline_replicas),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            out.push(TopicDescription {
                name: topic_name,
                id: t.topic_id,
                internal: t.is_internal,
                partitions,
                configs: BTreeMap::new(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        self.add_elr(&mut out).await?;
        for topic in &mut out {
            topic.configs = self
                .describe_topic_configs(&topic.name)
                .await?
                .into_iter()
                .filter(|(_, e)| e.source == CONFIG_SOURCE_TOPIC)
                .filter_map(|(k, e)| e.value.map(|v| (k, v)))
                .collect();
        }
        Ok(out)
    }

    /// Fills in ELR and last known ELR from DescribeTopicPartitions, page by page; a broker
    /// without that API leaves them empty.
    async fn add_elr(&mut self, topics: &mut [TopicDescription]) -> Result<()> {
        if topics.is_empty()
            || self
                .conn
                .version(ApiKey::DescribeTopicPartitions, 0)
                .is_err()
        {
            return Ok(());
        }
        let mut request = DescribeTopicPartitionsRequest::default()
            .with_topics(
                topics
                    .iter()
                    .map(|t| TopicRequest::default().with_name(name(&t.name)))
                    .collect(),
            )
            .with_response_partition_limit(2000);
        // Bounded: each page carries at least one partition.
        let total: usize = topics.iter().map(|t| t.partitions.len()).sum();
        for _ in 0..=total {
            let response = self.call(&request, 0).await?;
            for t in response.topics {
                let Some(topic) = topics
                    .iter_mut()
                    .find(|d| t.name.as_ref().is_some_and(|n| n.as_str() == d.name))
                else {
                    continue;
                };
                for p in t.partitions {
                    if let Some(d) = topic
                        .partitions
                        .iter_mut()
                        .find(|d| d.partition == p.partition_index)
                    {
                        let ids = |v: Option<Vec<kafka_protocol::messages::BrokerId>>| {
                            v.unwrap_or_default().into_iter().map(|b| b.0).collect()
                        };
                        d.elr = ids(p.eligible_leader_replicas);
                        d.last_known_elr = ids(p.last_known_elr);
                    }
                }
            }
            match response.next_cursor {
                Some(cursor) => request.cursor = Some(
                    kafka_protocol::messages::describe_topic_partitions_request::Cursor::default()
                        .with_topic_name(cursor.topic_name)
                        .with_partition_index(cursor.partition_index),
                ),
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// The broker a Metadata answer names as the controller, where admin clients (librdkafka's
    /// Admin API) send CreateTopics, DeleteTopics, CreatePartitions and topic config changes;
    /// `None` when it names none or one it does not list.
    pub async fn controller(&mut self) -> Result<Option<BrokerInfo>> {
        let response = self.metadata_full(Some(&[]), false).await?;
        Ok(metadata_broker(&response, response.controller_id.0))
    }

    /// The live leader of every partition of `topic` with its leader epoch, from one Metadata
    /// request (no auto-creation), as a client caches it: partitions without a live leader are
    /// left out. Also the topic's id, so a cache can tell a topic deleted and created again
    /// (whose leader epochs start over) from stale metadata (KAFKA-12257).
    pub async fn topic_leaders(&mut self, topic: &str) -> Result<TopicLeaders> {
        let response = self.metadata_full(Some(&[topic]), false).await?;
        let t = metadata_topic(&response, topic)?;
        if let Some(e) = ResponseError::try_from_code(t.error_code) {
            return Err(ClientError::Kafka(e, format!("topic '{topic}'")));
        }
        let leaders = t
            .partitions
            .iter()
            .filter_map(|p| {
                let broker = metadata_broker(&response, p.leader_id.0)?;
                Some((p.partition_index, (broker, p.leader_epoch)))
            })
            .collect();
        Ok(TopicLeaders {
            id: t.topic_id,
            leaders,
        })
    }

    /// Waits (bounded) until `partition` of `topic` has a leader, asking Metadata with
    /// auto-creation allowed: a missing topic is created if the broker allows it. Returns the
    /// leader's endpoint. Fails with UNKNOWN_TOPIC_OR_PARTITION when the topic stays missing
    /// (auto-creation disabled) or the partition does not exist.
    pub async fn wait_for_leader(&mut self, topic: &str, partition: i32) -> Result<BrokerInfo> {
        let mut last = ClientError::Timeout;
        for attempt in 0..LEADER_WAIT_ATTEMPTS {
            if attempt > 0 {
                self.io.clock.sleep(LEADER_WAIT_BACKOFF).await;
            }
            let response = self.metadata_full(Some(&[topic]), true).await?;
            let t = metadata_topic(&response, topic)?;
            match ResponseError::try_from_code(t.error_code) {
                None => {}
                // Kafka answers the request that created a topic with LEADER_NOT_AVAILABLE.
                Some(e @ ResponseError::LeaderNotAvailable) => {
                    last = ClientError::Kafka(e, format!("topic '{topic}' has no leader yet"));
                    continue;
                }
                // Asked twice with auto-creation allowed and still missing: the broker does not
                // create topics (auto.create.topics.enable=false).
                Some(e @ ResponseError::UnknownTopicOrPartition) if attempt >= 1 => {
                    return Err(ClientError::Kafka(
                        e,
                        format!("topic '{topic}' does not exist and the broker did not create it"),
                    ))
                }
                Some(e) if e.is_retriable() => {
                    last = ClientError::Kafka(e, format!("topic '{topic}'"));
                    continue;
                }
                Some(e) => return Err(ClientError::Kafka(e, format!("topic '{topic}'"))),
            }
            let Some(p) = t.partitions.iter().find(|p| p.partition_index == partition) else {
                return Err(ClientError::Kafka(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{topic}' has no partition {partition}"),
                ));
            };
            if let Some(leader) = metadata_broker(&response, p.leader_id.0) {
                return Ok(leader);
            }
            last = ClientError::Kafka(
                ResponseError::LeaderNotAvailable,
                format!("{topic}-{partition} has no live leader"),
            );
        }
        Err(last)
    }
}

/// `kafka-topics.sh --describe` output: one header line per topic, one line per partition.
pub fn render(topics: &[TopicDescription]) -> String {
    let list = |v: &[i32]| {
        v.iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut out = String::new();
    for t in topics {
        let rf = t.partitions.first().map_or(0, |p| p.replicas.len());
        let configs = t
            .configs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let _ = writeln!(
            out,
            "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {rf}\tConfigs: {configs}",
            t.name,
            kafka_uuid(t.id),
            t.partitions.len()
        );
        for p in &t.partitions {
            let leader = if p.leader < 0 {
                "none".to_string()
            } else {
                p.leader.to_string()
            };
            let _ = write!(
                out,
                "\tTopic: {}\tPartition: {}\tLeader: {leader}\tReplicas: {}\tIsr: {}\tElr: {}\tLastKnownElr: {}",
                t.name,
                p.partition,
                list(&p.replicas),
                list(&p.isr),
                list(&p.elr),
                list(&p.last_known_elr)
            );
            if !p.offline.is_empty() {
                let _ = write!(out, "\tOffline: {}", list(&p.offline));
            }
            out.push('\n');
        }
    }
    out
}

/// How Kafka prints a topic id: URL-safe base64 of the 16 bytes, without padding.
fn kafka_uuid(id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// `topic`'s entry of a Metadata answer (a broker always answers for each topic asked).
pub(super) fn metadata_topic<'a>(
    response: &'a MetadataResponse,
    topic: &str,
) -> Result<&'a kafka_protocol::messages::metadata_response::MetadataResponseTopic> {
    response
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
        .ok_or_else(|| ClientError::Protocol("topic missing from Metadata".into()))
}

/// Broker `id`'s endpoint in a Metadata answer; `None` for no leader (-1) or a broker the
/// answer does not list (not live).
pub(super) fn metadata_broker(response: &MetadataResponse, id: i32) -> Option<BrokerInfo> {
    response
        .brokers
        .iter()
        .find(|b| b.node_id.0 == id)
        .map(|b| BrokerInfo {
            id,
            host: b.host.to_string(),
            port: b.port as u16,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_output_matches_kafka_topics() {
        let topics = vec![TopicDescription {
            name: "orders".into(),
            id: Uuid::from_u128(1),
            internal: false,
            partitions: vec![
                PartitionDescription {
                    partition: 0,
                    leader: 1,
                    leader_epoch: 0,
                    replicas: vec![1, 2, 3],
                    isr: vec![1, 2],
                    elr: vec![3],
                    last_known_elr: vec![],
                    offline: vec![],
                },
                PartitionDescription {
                    partition: 1,
                    leader: -1,
                    leader_epoch: 4,
                    replicas: vec![2, 3, 1],
                    isr: vec![],
                    elr: vec![2],
                    last_known_elr: vec![3],
                    offline: vec![3, 1],
                },
            ],
            configs: BTreeMap::from([
                ("min.insync.replicas".into(), "2".into()),
                ("retention.ms".into(), "1000".into()),
            ]),
        }];
        assert_eq!(
            render(&topics),
            "Topic: orders\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: min.insync.replicas=2,retention.ms=1000\n\
             \tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2\tElr: 3\tLastKnownElr: \n\
             \tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: \tElr: 2\tLastKnownElr: 3\tOffline: 3,1\n"
        );
    }
}
