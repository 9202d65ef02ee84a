//! OffsetForLeaderEpoch (API 23, KIP-101/279/320): for each partition, the largest leader epoch
//! at or below the one asked for and where it ends, from the partition's leader-epoch cache.
//! Followers use it to find where their log diverges; consumers to detect truncation. Only the
//! leader answers, and a request whose current leader epoch is not ours is fenced.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};

pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    // A consumer needs DESCRIBE on the topic; a follower (replica id ≥ 0) is not checked, as
    // for its fetches (`authz`).
    let authz = broker.authz(ctx);
    let from_replica = req.replica_id.0 >= 0;
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.topic.to_string();
            let described = from_replica || authz.topic(Operation::Describe, &name);
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let answer = EpochEndOffset::default().with_partition(p.partition);
                    if !described {
                        return answer
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    match end_offset(
                        broker,
                        &name,
                        p.partition,
                        p.current_leader_epoch,
                        p.leader_epoch,
                    ) {
                        Ok((epoch, end)) => answer.with_leader_epoch(epoch).with_end_offset(end),
                        Err(e) => answer.with_error_code(e.code()),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

fn end_offset(
    broker: &Broker,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    leader_epoch: i32,
) -> Result<(i32, i64), ResponseError> {
    let handle = broker
        .partition(topic, partition)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    if broker.is_partition_offline(topic, partition) {
        return Err(ResponseError::KafkaStorageError);
    }
    if !broker.serving_partitions() {
        // Not a leader before the start-up gate opens: its log may have lost a suffix.
        return Err(ResponseError::NotLeaderOrFollower);
    }
    let p = handle.lock();
    let end = p
        .offset_for_leader_epoch(current_leader_epoch, leader_epoch)
        .map_err(|e| errors::epoch(&e))?;
    Ok((end.epoch, end.end_offset))
}
