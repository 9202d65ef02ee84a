//! Cluster calls for `weir cluster status`: the metadata quorum as DescribeQuorum reports it
//! (leader, epoch, high watermark, each voter's and observer's progress); and for `weir
//! cluster unregister`, UnregisterBroker. The live brokers come
//! from `Client::brokers` (Metadata leaves fenced brokers out, as in Kafka).

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, TopicName, UnregisterBrokerRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{check, Client, ClientError, Result};

const DESCRIBE_QUORUM_VERSION: i16 = 2;
const UNREGISTER_BROKER_VERSION: i16 = 0;
/// The metadata partition KRaft's quorum replicates.
const METADATA_TOPIC: &str = "__cluster_metadata";

/// One replica of the metadata partition, as the quorum leader sees it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct QuorumReplica {
    pub node_id: i32,
    /// -1 when the leader has not heard from it.
    pub log_end_offset: i64,
    /// Milliseconds since the epoch; -1 when unknown.
    pub last_fetch_timestamp: i64,
    pub last_caught_up_timestamp: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct QuorumDescription {
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<QuorumReplica>,
    pub observers: Vec<QuorumReplica>,
}

impl QuorumDescription {
    /// How far `replica` is behind the leader's high watermark (0 when caught up, None when
    /// its end is unknown).
    pub fn lag(&self, replica: &QuorumReplica) -> Option<i64> {
        (replica.log_end_offset >= 0).then(|| (self.high_watermark - replica.log_end_offset).max(0))
    }
}

impl Client {
    /// DescribeQuorum for `__cluster_metadata-0` (any broker forwards it to the leader).
    /// UnregisterBroker (`kafka-cluster.sh unregister --id N`): removes a retired broker's
    /// registration (BROKER_ID_NOT_REGISTERED for an id that has none).
    pub async fn unregister_broker(&mut self, id: i32) -> Result<()> {
        let request = UnregisterBrokerRequest::default().with_broker_id(BrokerId(id));
        let response = self.call(&request, UNREGISTER_BROKER_VERSION).await?;
        check(response.error_code, response.error_message.as_ref())
    }

    pub async fn describe_quorum(&mut self) -> Result<QuorumDescription> {
        let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        let response = self.call(&request, DESCRIBE_QUORUM_VERSION).await?;
        check(response.error_code, response.error_message.as_ref())?;
        let partition = response
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| ClientError::Protocol("empty DescribeQuorum response".into()))?;
        check(partition.error_code, partition.error_message.as_ref())?;
        let replica =
            |r: &kafka_protocol::messages::describe_quorum_response::ReplicaState| QuorumReplica {
                node_id: r.replica_id.0,
                log_end_offset: r.log_end_offset,
                last_fetch_timestamp: r.last_fetch_timestamp,
                last_caught_up_timestamp: r.last_caught_up_timestamp,
            };
        Ok(QuorumDescription {
            leader_id: partition.leader_id.0,
            leader_epoch: partition.leader_epoch,
            high_watermark: partition.high_watermark,
            voters: partition.current_voters.iter().map(replica).collect(),
            observers: partition.observers.iter().map(replica).collect(),
        })
    }
}
