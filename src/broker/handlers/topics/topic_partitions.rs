//! DescribeTopicPartitions (KIP-966): Metadata's per-partition view plus the eligible leader
//! replicas, paged by a cursor. `kafka-topics.sh --describe` (3.7+) and `weir topics describe`
//! use it to show ELR and last known ELR.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::{Operation, ResourceType};
use crate::broker::api::RequestContext;
use crate::broker::handlers::security::authz::Authz;
use crate::broker::shared::Broker;
use crate::controller::{MetadataImage, TopicMeta, NO_LEADER};

/// Kafka's `max.request.partition.size.limit` default: the most partitions one answer holds.
const PARTITION_LIMIT: i32 = 2000;

pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let image = broker.image();
    let authz = broker.authz(ctx);
    // Topics in name order (as Kafka pages them); all of them (that the caller may describe)
    // when none are named.
    let mut names: Vec<String> = if req.topics.is_empty() {
        image
            .topics()
            .filter(|t| authz.topic(Operation::Describe, &t.name))
            .map(|t| t.name.clone())
            .collect()
    } else {
        req.topics.iter().map(|t| t.name.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let (start_topic, start_partition) = match &req.cursor {
        Some(c) => (Some(c.topic_name.to_string()), c.partition_index.max(0)),
        None => (None, 0),
    };
    let mut budget = if req.response_partition_limit > 0 {
        req.response_partition_limit.min(PARTITION_LIMIT)
    } else {
        PARTITION_LIMIT
    };
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in names {
        if start_topic.as_ref().is_some_and(|s| name < *s) {
            continue;
        }
        let from = if start_topic.as_ref() == Some(&name) {
            start_partition
        } else {
            0
        };
        if !authz.topic(Operation::Describe, &name) {
            response.topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_name(Some(TopicName(StrBytes::from_string(name)))),
            );
            continue;
        }
        let Some(topic) = image.topic(&name) else {
            response.topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    .with_name(Some(TopicName(StrBytes::from_string(name)))),
            );
            continue;
        };
        if budget == 0 {
            response.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partition_index(from),
            );
            break;
        }
        let (entry, next) = topic_entry(&image, &authz, topic, from, &mut budget);
        response.topics.push(entry);
        if let Some(next) = next {
            response.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partition_index(next),
            );
            break;
        }
    }
    response
}

/// The topic's partitions from `from` while the budget lasts; the index to continue at when
/// it ran out first.
fn topic_entry(
    image: &MetadataImage,
    authz: &Authz,
    topic: &TopicMeta,
    from: i32,
    budget: &mut i32,
) -> (DescribeTopicPartitionsResponseTopic, Option<i32>) {
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let mut partitions = Vec::new();
    let mut next = None;
    for (index, reg) in image.topic_partitions(topic.id).filter(|(i, _)| *i >= from) {
        if *budget == 0 {
            next = Some(index);
            break;
        }
        *budget -= 1;
        let offline: Vec<i32> = reg
            .replicas
            .iter()
            .copied()
            .filter(|r| image.broker(*r).is_none_or(|b| b.fenced))
            .collect();
        let mut p = DescribeTopicPartitionsResponsePartition::default()
            .with_partition_index(index)
            .with_leader_id(BrokerId(reg.leader))
            .with_leader_epoch(reg.leader_epoch)
            .with_replica_nodes(ids(&reg.replicas))
            .with_isr_nodes(ids(&reg.isr))
            .with_eligible_leader_replicas(Some(ids(&reg.elr)))
            .with_last_known_elr(Some(ids(&reg.last_known_elr)))
            .with_offline_replicas(ids(&offline));
        if reg.leader == NO_LEADER {
            p.error_code = ResponseError::LeaderNotAvailable.code();
        }
        partitions.push(p);
    }
    let entry = DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_is_internal(topic.name == crate::group::OFFSETS_TOPIC)
        .with_partitions(partitions)
        .with_topic_authorized_operations(authz.operations(ResourceType::Topic, &topic.name));
    (entry, next)
}
