//! A small Kafka client: admin, produce, fetch, offsets, group admin, a classic group member's
//! calls (`group_member`) and a KIP-848 member's (`consumer_member`) against one broker, over the [`Io`]
//! traits so it runs in production (CLI, bench) and in the simulator (workloads) alike. It builds
//! uncompressed batches itself and reads fetched batches without copying them.

mod acls;
mod cluster;
mod configs;
pub mod connection;
pub mod consumer_fetch;
pub mod consumer_member;
mod describe;
mod elect;
pub mod group_member;
mod groups;
mod log_dirs;
mod quorum;
mod quotas;
mod reassign;
mod records;
mod scram;
pub mod security;
mod transactions;
pub mod txn_producer;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    FetchRequest, InitProducerIdRequest, ListOffsetsRequest, MetadataRequest, ProduceRequest,
    ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

pub use cluster::ClusterClient;
pub use configs::{ConfigEntry, ConfigResource, ConfigSource};
pub use connection::{ClientError, Connection, Result};
pub use describe::{
    render as render_topic_descriptions, BrokerInfo, PartitionDescription, TopicDescription,
    TopicLeaders,
};
pub use elect::{ElectionOutcome, ElectionType};
pub use group_member::Joined;
pub use groups::{
    ConsumerGroupDescription, ConsumerGroupMember, GroupDescription, GroupListing, GroupMember,
};
pub use log_dirs::{LogDirDescription, ReplicaDirInfo};
pub use quorum::{QuorumDescription, QuorumReplica};
pub use quotas::{QuotaEntityParts, QuotaMatch};
pub use reassign::{OngoingReassignment, ReassignOutcome};
pub use scram::{mechanism_name, salt_password, ScramCredentialInfo, ScramUpsertion};
pub use security::{ClientSecurity, Security};
pub use transactions::{
    HangingTransaction, ProducerDescription, TransactionDescription, TransactionListing,
};

use crate::io::Io;

/// Versions this client speaks at most (negotiated down to the broker's).
pub const PRODUCE_VERSION: i16 = 9;
/// Fetch v10, the last without client metadata: this client reads from the leader Metadata
/// names and knows no leader epoch, rack or `preferred_read_replica`, so a broker must not
/// serve it as a follower (from v11 any replica may, KIP-392) — with stale metadata it would
/// read a lagging follower's high watermark instead of being told NOT_LEADER_OR_FOLLOWER.
pub const FETCH_VERSION: i16 = 10;
const METADATA_VERSION: i16 = 12;
const LIST_OFFSETS_VERSION: i16 = 7;
const CREATE_TOPICS_VERSION: i16 = 5;
const DELETE_TOPICS_VERSION: i16 = 5;
const INIT_PRODUCER_ID_VERSION: i16 = 4;
const CREATE_PARTITIONS_VERSION: i16 = 3;
/// Kafka's config source for a topic-level override.
pub const CONFIG_SOURCE_TOPIC: i8 = 1;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn check(code: i16, message: Option<&StrBytes>) -> Result<()> {
    match error_of(code, message) {
        None => Ok(()),
        Some((e, message)) => Err(ClientError::Kafka(e, message)),
    }
}

/// A per-partition answer's error and its message ("" without one); `None` for no error.
fn error_of(code: i16, message: Option<&StrBytes>) -> Option<(ResponseError, String)> {
    ResponseError::try_from_code(code)
        .map(|e| (e, message.map(StrBytes::to_string).unwrap_or_default()))
}

/// What a fetch of one partition returned.
#[derive(Clone, Debug)]
pub struct Fetched {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Whole record batches as stored by the broker.
    pub records: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub partitions: i32,
    /// Nil before Metadata v10.
    pub id: uuid::Uuid,
    pub error: Option<ResponseError>,
}

pub struct Client {
    io: Io,
    conn: Connection,
    timeout: Duration,
}

impl Client {
    pub async fn connect(io: &Io, addr: SocketAddr) -> Result<Client> {
        let timeout = Duration::from_secs(30);
        let conn = io
            .timeout(timeout, Connection::connect(io, addr, "weir-client"))
            .await
            .ok_or(ClientError::Timeout)??;
        Ok(Client {
            io: io.clone(),
            conn,
            timeout,
        })
    }

    /// A connection to the broker at `addr` (named `host`, for its TLS certificate), secured
    /// as `security` says (TLS and SASL from `--command-config`).
    pub async fn connect_secure(
        io: &Io,
        addr: SocketAddr,
        host: &str,
        security: &Security,
    ) -> Result<Client> {
        let timeout = Duration::from_secs(30);
        let connecting = Connection::connect_secure(io, addr, host, "weir-client", security);
        let conn = io
            .timeout(timeout, connecting)
            .await
            .ok_or(ClientError::Timeout)??;
        Ok(Client {
            io: io.clone(),
            conn,
            timeout,
        })
    }

    /// Bounds every later call (default 30 s).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    pub fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    async fn call<R: kafka_protocol::protocol::Request>(
        &mut self,
        request: &R,
        ours: i16,
    ) -> Result<R::Response> {
        let api = ApiKey::try_from(R::KEY).map_err(|_| ClientError::Protocol("api key".into()))?;
        let version = self.conn.version(api, ours)?;
        self.io
            .timeout(self.timeout, self.conn.call(request, version))
            .await
            .ok_or(ClientError::Timeout)?
    }

    /// Topics and their partition counts (all topics when `topics` is `None`).
    pub async fn metadata(&mut self, topics: Option<&[&str]>) -> Result<Vec<TopicInfo>> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|list| {
                list.iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
                    .collect()
            }))
            .with_allow_auto_topic_creation(false);
        let response = self.call(&request, METADATA_VERSION).await?;
        Ok(response
            .topics
            .into_iter()
            .map(|t| TopicInfo {
                name: t.name.map(|n| n.to_string()).unwrap_or_default(),
                partitions: t.partitions.len() as i32,
                id: t.topic_id,
                error: ResponseError::try_from_code(t.error_code),
            })
            .collect())
    }

    pub async fn create_topic(
        &mut self,
        topic: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &BTreeMap<String, String>,
    ) -> Result<()> {
        let request = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(name(topic))
                .with_num_partitions(partitions)
                .with_replication_factor(replication_factor)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string(k.clone()))
                                .with_value(Some(StrBytes::from_string(v.clone())))
                        })
                        .collect(),
                )])
            .with_timeout_ms(self.timeout.as_millis() as i32);
        let response = self.call(&request, CREATE_TOPICS_VERSION).await?;
        let result = response
            .topics
            .first()
            .ok_or_else(|| ClientError::Protocol("empty CreateTopics response".into()))?;
        check(result.error_code, result.error_message.as_ref())
    }

    pub async fn delete_topic(&mut self, topic: &str) -> Result<()> {
        let request = DeleteTopicsRequest::default()
            .with_topic_names(vec![name(topic)])
            .with_timeout_ms(self.timeout.as_millis() as i32);
        let response = self.call(&request, DELETE_TOPICS_VERSION).await?;
        let result = response
            .responses
            .first()
            .ok_or_else(|| ClientError::Protocol("empty DeleteTopics response".into()))?;
        check(result.error_code, result.error_message.as_ref())
    }

    /// Grows `topic` to `count` partitions in total (CreatePartitions).
    pub async fn create_partitions(&mut self, topic: &str, count: i32) -> Result<()> {
        let request = CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(name(topic))
                .with_count(count)
                .with_assignments(None)])
            .with_timeout_ms(self.timeout.as_millis() as i32)
            .with_validate_only(false);
        let response = self.call(&request, CREATE_PARTITIONS_VERSION).await?;
        let result = response
            .results
            .first()
            .ok_or_else(|| ClientError::Protocol("empty CreatePartitions response".into()))?;
        check(result.error_code, result.error_message.as_ref())
    }

    /// A producer id and epoch for idempotent produce.
    pub async fn init_producer_id(&mut self) -> Result<(i64, i16)> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1);
        let response = self.call(&request, INIT_PRODUCER_ID_VERSION).await?;
        check(response.error_code, None)?;
        Ok((response.producer_id.0, response.producer_epoch))
    }

    /// Produces one batch (built with [`crate::log::batch::BatchBuilder`]) to one partition.
    /// Returns the batch's base offset; `None` with acks=0.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        batch: Bytes,
        acks: i16,
    ) -> Result<Option<i64>> {
        let request = produce_request(topic, &[(partition, batch)], acks, self.timeout);
        let version = self.conn.version(ApiKey::Produce, PRODUCE_VERSION)?;
        if acks == 0 {
            self.conn.send_oneway(&request, version).await?;
            return Ok(None);
        }
        let response = self
            .io
            .timeout(self.timeout, self.conn.call(&request, version))
            .await
            .ok_or(ClientError::Timeout)??;
        let offsets = produce_offsets(&response)?;
        Ok(offsets.first().map(|&(_, offset)| offset))
    }

    /// Sends one batch without waiting for its answer (pipelining, as Kafka clients do with
    /// `max.in.flight.requests.per.connection`); [`Client::receive_produce`] takes the answers
    /// in the order the requests went out. With acks=0 nothing is awaited.
    pub async fn send_produce(
        &mut self,
        topic: &str,
        partition: i32,
        batch: Bytes,
        acks: i16,
    ) -> Result<()> {
        let request = produce_request(topic, &[(partition, batch)], acks, self.timeout);
        let version = self.conn.version(ApiKey::Produce, PRODUCE_VERSION)?;
        let sent = self.io.timeout(self.timeout, async {
            if acks == 0 {
                self.conn.send_oneway(&request, version).await
            } else {
                self.conn.send(&request, version).await.map(|_| ())
            }
        });
        sent.await.ok_or(ClientError::Timeout)?
    }

    /// The answer to the oldest produce sent with [`Client::send_produce`]: its base offset.
    pub async fn receive_produce(&mut self) -> Result<i64> {
        let response = self
            .io
            .timeout(self.timeout, self.conn.receive::<ProduceRequest>())
            .await
            .ok_or(ClientError::Timeout)??;
        let offsets = produce_offsets(&response)?;
        offsets
            .first()
            .map(|&(_, offset)| offset)
            .ok_or_else(|| ClientError::Protocol("partition missing from produce response".into()))
    }

    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait: Duration,
    ) -> Result<Fetched> {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait.as_millis() as i32)
            .with_min_bytes(1)
            .with_max_bytes(max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(max_bytes)])]);
        let response = self.call(&request, FETCH_VERSION).await?;
        check(response.error_code, None)?;
        let data = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| ClientError::Protocol("partition missing from fetch response".into()))?;
        check(data.error_code, None)?;
        Ok(Fetched {
            high_watermark: data.high_watermark,
            log_start_offset: data.log_start_offset,
            records: data.records.unwrap_or_default(),
        })
    }

    /// ListOffsets for one partition: -1 latest, -2 earliest, or a timestamp.
    /// Returns (offset, timestamp); offset -1 when no record is that late.
    pub async fn list_offset(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<(i64, i64)> {
        let p = self
            .list_one_offset(topic, partition, timestamp, -1)
            .await?;
        Ok((p.offset, p.timestamp))
    }

    /// ListOffsets for one partition as a consumer, fenced by `current_leader_epoch` (-1:
    /// none); the partition's answer once its error code is checked.
    async fn list_one_offset(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        current_leader_epoch: i32,
    ) -> Result<kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_current_leader_epoch(current_leader_epoch)
                    .with_timestamp(timestamp)])]);
        let response = self.call(&request, LIST_OFFSETS_VERSION).await?;
        let p = response
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| ClientError::Protocol("partition missing from ListOffsets".into()))?;
        check(p.error_code, None)?;
        Ok(p)
    }
}

/// A produce request carrying one batch per listed partition of one topic.
pub fn produce_request(
    topic: &str,
    batches: &[(i32, Bytes)],
    acks: i16,
    timeout: Duration,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout.as_millis() as i32)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(
                batches
                    .iter()
                    .map(|(p, b)| {
                        PartitionProduceData::default()
                            .with_index(*p)
                            .with_records(Some(b.clone()))
                    })
                    .collect(),
            )])
}

/// The (partition, base offset) of each partition in a produce response, or its first error.
pub fn produce_offsets(response: &ProduceResponse) -> Result<Vec<(i32, i64)>> {
    let mut out = Vec::new();
    for topic in &response.responses {
        for p in &topic.partition_responses {
            check(p.error_code, p.error_message.as_ref())?;
            out.push((p.index, p.base_offset));
        }
    }
    Ok(out)
}
