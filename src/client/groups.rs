//! Consumer-group admin calls for the CLI (`weir groups`): list, describe, delete, committed
//! offsets and simple (generation -1) commits, like `kafka-consumer-groups.sh`. The broker this
//! client talks to must be the group's coordinator (always true on one node).

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, DeleteGroupsRequest, DescribeGroupsRequest,
    FindCoordinatorRequest, GroupId, ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{check, name, BrokerInfo, Client, ClientError, Result};

const FIND_COORDINATOR_VERSION: i16 = 3;
/// v5 names each group's type (classic or consumer).
const LIST_GROUPS_VERSION: i16 = 5;
const CONSUMER_GROUP_DESCRIBE_VERSION: i16 = 0;
const DESCRIBE_GROUPS_VERSION: i16 = 5;
const DELETE_GROUPS_VERSION: i16 = 2;
const OFFSET_FETCH_VERSION: i16 = 7;
const OFFSET_COMMIT_VERSION: i16 = 8;

#[derive(Clone, Debug, serde::Serialize)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    /// `classic` or `consumer` (KIP-848).
    pub group_type: String,
}

#[derive(Clone, Debug)]
pub struct GroupMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// `(topic, partitions)` of a consumer's assignment (protocol type `consumer`); empty for
    /// other protocol types or an assignment that does not decode.
    pub assignment: Vec<(String, Vec<i32>)>,
}

/// A member of a consumer-protocol group (ConsumerGroupDescribe).
#[derive(Clone, Debug)]
pub struct ConsumerGroupMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    /// `(topic, partitions)` it holds now.
    pub assignment: Vec<(String, Vec<i32>)>,
}

/// A KIP-848 consumer group as ConsumerGroupDescribe shows it.
#[derive(Clone, Debug)]
pub struct ConsumerGroupDescription {
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<ConsumerGroupMember>,
}

#[derive(Clone, Debug)]
pub struct GroupDescription {
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<GroupMember>,
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

impl Client {
    /// Makes sure the broker coordinates `group` (creating `__consumer_offsets` if needed).
    pub async fn find_coordinator(&mut self, group: &str) -> Result<()> {
        self.coordinator(group).await.map(|_| ())
    }

    /// The broker that coordinates `group` (the leader of its `__consumer_offsets` partition)
    /// as this broker knows it; asking creates `__consumer_offsets` if needed.
    pub async fn coordinator(&mut self, group: &str) -> Result<BrokerInfo> {
        let request =
            FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_string()));
        let response = self.call(&request, FIND_COORDINATOR_VERSION).await?;
        check(response.error_code, response.error_message.as_ref())?;
        let port = u16::try_from(response.port).map_err(|_| {
            ClientError::Protocol(format!("coordinator port {} out of range", response.port))
        })?;
        Ok(BrokerInfo {
            id: response.node_id.0,
            host: response.host.to_string(),
            port,
        })
    }

    pub async fn list_groups(&mut self) -> Result<Vec<GroupListing>> {
        let response = self
            .call(&ListGroupsRequest::default(), LIST_GROUPS_VERSION)
            .await?;
        check(response.error_code, None)?;
        Ok(response
            .groups
            .into_iter()
            .map(|g| GroupListing {
                group_id: g.group_id.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
                group_type: g.group_type.to_string(),
            })
            .collect())
    }

    /// `None` when there is no consumer-protocol group of that name (a classic group, or none:
    /// Kafka answers GROUP_ID_NOT_FOUND for both).
    pub async fn describe_consumer_group(
        &mut self,
        group: &str,
    ) -> Result<Option<ConsumerGroupDescription>> {
        let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id(group)]);
        let response = self.call(&request, CONSUMER_GROUP_DESCRIBE_VERSION).await?;
        let g =
            response.groups.into_iter().next().ok_or_else(|| {
                ClientError::Protocol("empty ConsumerGroupDescribe response".into())
            })?;
        if ResponseError::try_from_code(g.error_code) == Some(ResponseError::GroupIdNotFound) {
            return Ok(None);
        }
        check(g.error_code, g.error_message.as_ref())?;
        Ok(Some(ConsumerGroupDescription {
            state: g.group_state.to_string(),
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            assignor: g.assignor_name.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| ConsumerGroupMember {
                    member_id: m.member_id.to_string(),
                    instance_id: m.instance_id.map(|i| i.to_string()),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    assignment: m
                        .assignment
                        .topic_partitions
                        .into_iter()
                        .map(|t| (t.topic_name.to_string(), t.partitions))
                        .collect(),
                })
                .collect(),
        }))
    }

    /// `None` when the group does not exist (Kafka reports it as `Dead`).
    pub async fn describe_group(&mut self, group: &str) -> Result<Option<GroupDescription>> {
        let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
        let response = self.call(&request, DESCRIBE_GROUPS_VERSION).await?;
        let g = response
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Protocol("empty DescribeGroups response".into()))?;
        check(g.error_code, g.error_message.as_ref())?;
        if g.group_state.as_str() == "Dead" {
            return Ok(None);
        }
        Ok(Some(GroupDescription {
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            protocol: g.protocol_data.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| GroupMember {
                    member_id: m.member_id.to_string(),
                    instance_id: m.group_instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    client_host: m.client_host.to_string(),
                    assignment: if g.protocol_type.as_str() == "consumer" {
                        super::group_member::decode_assignment(&m.member_assignment)
                            .map(|a| a.into_iter().collect())
                            .unwrap_or_default()
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        }))
    }

    pub async fn delete_group(&mut self, group: &str) -> Result<()> {
        let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]);
        let response = self.call(&request, DELETE_GROUPS_VERSION).await?;
        let r = response
            .results
            .first()
            .ok_or_else(|| ClientError::Protocol("empty DeleteGroups response".into()))?;
        check(r.error_code, None)
    }

    /// Committed offsets: `(topic, partition, offset)`, every committed partition when `topic`
    /// is `None`, else the given partitions (offset -1 where nothing is committed).
    pub async fn committed_offsets(
        &mut self,
        group: &str,
        topic: Option<(&str, &[i32])>,
    ) -> Result<Vec<(String, i32, i64)>> {
        let positions = self.committed_positions(group, topic).await?;
        Ok(positions
            .into_iter()
            .map(|(t, p, o, _)| (t, p, o))
            .collect())
    }

    /// As [`Client::committed_offsets`], with each offset's `committed_leader_epoch` (-1 when
    /// the commit carried none): the leader epoch a consumer validates a committed position
    /// with before fetching from it (KIP-320).
    pub async fn committed_positions(
        &mut self,
        group: &str,
        topic: Option<(&str, &[i32])>,
    ) -> Result<Vec<(String, i32, i64, i32)>> {
        let request = OffsetFetchRequest::default()
            .with_group_id(group_id(group))
            .with_topics(topic.map(|(t, partitions)| {
                vec![OffsetFetchRequestTopic::default()
                    .with_name(name(t))
                    .with_partition_indexes(partitions.to_vec())]
            }));
        let response = self.call(&request, OFFSET_FETCH_VERSION).await?;
        check(response.error_code, None)?;
        let mut out = Vec::new();
        for t in response.topics {
            for p in t.partitions {
                check(p.error_code, None)?;
                out.push((
                    t.name.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                ));
            }
        }
        Ok(out)
    }

    /// Commits offsets as an admin (generation -1, no member): only accepted by a group with
    /// no members, which is what a reset needs.
    pub async fn commit_offsets(
        &mut self,
        group: &str,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<()> {
        let offsets: Vec<(i32, i64, i32)> = offsets.iter().map(|&(p, o)| (p, o, -1)).collect();
        self.commit_as(group, -1, "", topic, &offsets, OFFSET_COMMIT_VERSION)
            .await
    }

    /// One OffsetCommit of `offsets` in `topic`: by `member_id` at its generation (classic) or
    /// member epoch (consumer protocol), or by an admin (-1, ""): (partition, offset, leader
    /// epoch of the record before the offset, -1 if unknown). The first partition error fails
    /// it.
    pub(super) async fn commit_as(
        &mut self,
        group: &str,
        generation_or_epoch: i32,
        member_id: &str,
        topic: &str,
        offsets: &[(i32, i64, i32)],
        version: i16,
    ) -> Result<()> {
        let request = OffsetCommitRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id_or_member_epoch(generation_or_epoch)
            .with_member_id(StrBytes::from_string(member_id.to_string()))
            .with_group_instance_id(None)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name(topic))
                .with_partitions(
                    offsets
                        .iter()
                        .map(|&(p, o, epoch)| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(o)
                                .with_committed_leader_epoch(epoch)
                        })
                        .collect(),
                )]);
        let response = self.call(&request, version).await?;
        for t in &response.topics {
            for p in &t.partitions {
                check(p.error_code, None)?;
            }
        }
        Ok(())
    }
}
