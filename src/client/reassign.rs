//! AlterPartitionReassignments and ListPartitionReassignments for `weir reassign` (Kafka's
//! `Admin.alterPartitionReassignments` / `listPartitionReassignments`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, ListPartitionReassignmentsRequest,
};

use super::{check, name, Client, Result};

/// v1: `AllowReplicationFactorChange` (KIP-860).
const ALTER_VERSION: i16 = 1;
const LIST_VERSION: i16 = 0;

/// A partition being reassigned.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: i32,
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// One partition's outcome of AlterPartitionReassignments: `None` accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReassignOutcome {
    pub topic: String,
    pub partition: i32,
    pub error: Option<(ResponseError, String)>,
}

impl Client {
    /// Starts (`Some(replicas)`) or cancels (`None`) reassignments. A request-level error fails
    /// the whole call; each partition's own error is in its outcome.
    pub async fn alter_partition_reassignments(
        &mut self,
        plan: &[(String, i32, Option<Vec<i32>>)],
        allow_rf_change: bool,
    ) -> Result<Vec<ReassignOutcome>> {
        let mut topics: Vec<ReassignableTopic> = Vec::new();
        for (topic, partition, replicas) in plan {
            let p = ReassignablePartition::default()
                .with_partition_index(*partition)
                .with_replicas(
                    replicas
                        .as_ref()
                        .map(|rs| rs.iter().map(|r| BrokerId(*r)).collect()),
                );
            match topics.iter_mut().find(|t| t.name.as_str() == topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(
                    ReassignableTopic::default()
                        .with_name(name(topic))
                        .with_partitions(vec![p]),
                ),
            }
        }
        let request = AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.timeout.as_millis() as i32)
            .with_allow_replication_factor_change(allow_rf_change)
            .with_topics(topics);
        let response = self.call(&request, ALTER_VERSION).await?;
        check(response.error_code, response.error_message.as_ref())?;
        let mut out = Vec::new();
        for t in response.responses {
            for p in t.partitions {
                out.push(ReassignOutcome {
                    topic: t.name.to_string(),
                    partition: p.partition_index,
                    error: super::error_of(p.error_code, p.error_message.as_ref()),
                });
            }
        }
        Ok(out)
    }

    /// The reassignments in progress: all (`None`) or among the named partitions.
    pub async fn list_partition_reassignments(
        &mut self,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<OngoingReassignment>> {
        let topics = partitions.map(|list| {
            let mut topics: Vec<ListPartitionReassignmentsTopics> = Vec::new();
            for (topic, partition) in list {
                match topics.iter_mut().find(|t| t.name.as_str() == topic) {
                    Some(t) => t.partition_indexes.push(*partition),
                    None => topics.push(
                        ListPartitionReassignmentsTopics::default()
                            .with_name(name(topic))
                            .with_partition_indexes(vec![*partition]),
                    ),
                }
            }
            topics
        });
        let request = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(self.timeout.as_millis() as i32)
            .with_topics(topics);
        let response = self.call(&request, LIST_VERSION).await?;
        check(response.error_code, response.error_message.as_ref())?;
        let ids = |v: Vec<BrokerId>| v.into_iter().map(|b| b.0).collect::<Vec<i32>>();
        Ok(response
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.name.to_string();
                t.partitions.into_iter().map(move |p| OngoingReassignment {
                    topic: topic.clone(),
                    partition: p.partition_index,
                    replicas: ids(p.replicas),
                    adding: ids(p.adding_replicas),
                    removing: ids(p.removing_replicas),
                })
            })
            .collect())
    }
}
