//! A consumer's fetch path as librdkafka and the Java consumer drive it (KIP-320, KIP-392):
//! Metadata for each partition's leader, its leader epoch and every replica's endpoint; Fetch
//! v11 carrying `current_leader_epoch` and the client's rack (`client.rack`), answered perhaps
//! with a `preferred_read_replica` to read from instead; OffsetForLeaderEpoch to validate a
//! position after the leader changed; ListOffsets with the leader epoch of the offset found.
//! The policy (when to refresh, validate, reset) is the caller's; these are the calls.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, OffsetForLeaderEpochRequest};
use kafka_protocol::protocol::StrBytes;

use super::{check, name, BrokerInfo, Client, ClientError, Result};

/// Fetch v11: the first with `rack_id` and `preferred_read_replica` (KIP-392); it carries
/// `current_leader_epoch` (v9+), as librdkafka's consumer sends it.
pub const CONSUMER_FETCH_VERSION: i16 = 11;
/// OffsetForLeaderEpoch v3 (`current_leader_epoch`, a consumer's replica id -1 implied).
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 3;

/// A partition as the last Metadata answer described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRoute {
    /// `None`: no leader right now.
    pub leader: Option<BrokerInfo>,
    pub leader_epoch: i32,
    /// Every broker Metadata listed (a preferred read replica is looked up here).
    pub brokers: Vec<BrokerInfo>,
}

impl PartitionRoute {
    pub fn broker(&self, id: i32) -> Option<&BrokerInfo> {
        self.brokers.iter().find(|b| b.id == id)
    }
}

/// One consumer fetch of one partition.
#[derive(Clone, Debug)]
pub struct ConsumerFetch<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    /// The leader epoch the consumer knows from Metadata (-1: none, unchecked).
    pub current_leader_epoch: i32,
    /// `client.rack`; empty: none.
    pub rack: &'a str,
    pub max_bytes: i32,
    pub max_wait_ms: i32,
}

/// What a consumer fetch of one partition returned (errors are `Err`).
#[derive(Clone, Debug)]
pub struct ConsumerFetched {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// -1: read here; else the replica the leader wants this consumer to read from.
    pub preferred_read_replica: i32,
    pub records: Bytes,
}

impl Client {
    /// `topic`-`partition`'s leader, leader epoch and the brokers, from one Metadata request.
    pub async fn partition_route(&mut self, topic: &str, partition: i32) -> Result<PartitionRoute> {
        let response = self.metadata_full(Some(&[topic]), false).await?;
        let brokers: Vec<BrokerInfo> = response
            .brokers
            .iter()
            .map(|b| BrokerInfo {
                id: b.node_id.0,
                host: b.host.to_string(),
                port: b.port as u16,
            })
            .collect();
        let t = super::describe::metadata_topic(&response, topic)?;
        check(t.error_code, None)?;
        let p = t
            .partitions
            .iter()
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| ClientError::Protocol("partition missing from Metadata".into()))?;
        check(p.error_code, None)?;
        let leader = brokers.iter().find(|b| b.id == p.leader_id.0).cloned();
        Ok(PartitionRoute {
            leader,
            leader_epoch: p.leader_epoch,
            brokers,
        })
    }

    /// One Fetch v11 of one partition as a consumer (replica id -1), with its leader epoch and
    /// rack. FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER and
    /// OFFSET_OUT_OF_RANGE come back as `Err` for the caller's policy.
    pub async fn consumer_fetch(&mut self, f: &ConsumerFetch<'_>) -> Result<ConsumerFetched> {
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(f.max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(f.max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_rack_id(StrBytes::from_string(f.rack.to_string()))
            .with_topics(vec![FetchTopic::default()
                .with_topic(name(f.topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(f.partition)
                    .with_current_leader_epoch(f.current_leader_epoch)
                    .with_fetch_offset(f.offset)
                    .with_partition_max_bytes(f.max_bytes)])]);
        let response = self.call(&request, CONSUMER_FETCH_VERSION).await?;
        check(response.error_code, None)?;
        let data = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == f.partition)
            .ok_or_else(|| ClientError::Protocol("partition missing from fetch response".into()))?;
        check(data.error_code, None)?;
        Ok(ConsumerFetched {
            high_watermark: data.high_watermark,
            log_start_offset: data.log_start_offset,
            preferred_read_replica: data.preferred_read_replica.0,
            records: data.records.unwrap_or_default(),
        })
    }

    /// OffsetForLeaderEpoch for a consumer validating its position (KIP-320): where
    /// `leader_epoch` (the epoch of the last record consumed) ends on the leader, which must
    /// be at `current_leader_epoch`. Returns (epoch, end offset); (-1, -1) when the leader
    /// knows no epoch that old or new.
    pub async fn offset_for_leader_epoch(
        &mut self,
        topic: &str,
        partition: i32,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> Result<(i32, i64)> {
        let request = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(current_leader_epoch)
                    .with_leader_epoch(leader_epoch)])]);
        let response = self.call(&request, OFFSET_FOR_LEADER_EPOCH_VERSION).await?;
        let p = response
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition == partition)
            .ok_or_else(|| {
                ClientError::Protocol("partition missing from OffsetForLeaderEpoch".into())
            })?;
        check(p.error_code, None)?;
        Ok((p.leader_epoch, p.end_offset))
    }

    /// ListOffsets (-1 latest, -2 earliest, or a timestamp) at the leader's
    /// `current_leader_epoch`: (offset, leader epoch of that offset).
    pub async fn list_offset_with_epoch(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        current_leader_epoch: i32,
    ) -> Result<(i64, i32)> {
        let p = self
            .list_one_offset(topic, partition, timestamp, current_leader_epoch)
            .await?;
        Ok((p.offset, p.leader_epoch))
    }
}
