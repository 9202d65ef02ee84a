//! DeleteRecords: moves partitions' log start offsets forward. The new start is made durable
//! (`log-start-offset`, fsynced) before it takes effect and before the answer, so a client told
//! "deleted up to N" never sees those records again, even after a kill -9 or a power loss.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::shared::Broker;
use crate::replica::DeleteRecordsError;

pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    let authz = broker.authz(ctx);
    for topic in req.topics {
        let name = topic.name.to_string();
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        // DELETE on the topic, as Kafka asks.
        let deletable = authz.topic(Operation::Delete, &name);
        for p in topic.partitions {
            let outcome = match deletable {
                true => delete_one(broker, &name, p.partition_index, p.offset).await,
                false => Err(ResponseError::TopicAuthorizationFailed),
            };
            let mut r =
                DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
            match outcome {
                Ok(low_watermark) => r.low_watermark = low_watermark,
                Err(error) => {
                    r.low_watermark = -1;
                    r.error_code = error.code();
                }
            }
            partitions.push(r);
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// Returns the partition's low watermark (its log start offset) afterwards.
async fn delete_one(
    broker: &Broker,
    topic: &str,
    index: i32,
    offset: i64,
) -> Result<i64, ResponseError> {
    if topic == crate::group::OFFSETS_TOPIC {
        // As Kafka: the coordinator replays this log from its start; cutting it loses commits.
        return Err(ResponseError::InvalidTopicException);
    }
    let handle = broker
        .partition(topic, index)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    if broker.is_partition_offline(topic, index) {
        return Err(ResponseError::KafkaStorageError);
    }
    // A delete takes this gate too before it removes the directory, so the start-offset file
    // is never written into a deleted (or re-created) partition's directory.
    let _gate = handle.log_start_gate.lock().await;
    let plan = match handle.lock_open() {
        // Only the leader moves the log start (followers learn it from its fetch answers): a
        // follower answering would leave the records readable at the leader (as Kafka's
        // `deleteRecordsOnLeader`).
        Some(partition) if partition.role() != crate::replica::Role::Leader => {
            return Err(ResponseError::NotLeaderOrFollower)
        }
        Some(partition) => partition.delete_records_plan(offset),
        None => return Err(ResponseError::NotLeaderOrFollower),
    };
    let write = match plan {
        Ok(Some(write)) => write,
        Ok(None) => return Ok(handle.lock().log_start_offset()),
        Err(DeleteRecordsError::PolicyViolation) => return Err(ResponseError::PolicyViolation),
        Err(e @ DeleteRecordsError::OffsetOutOfRange { .. }) => {
            tracing::debug!(topic, partition = index, error = ?e, "DeleteRecords refused");
            return Err(ResponseError::OffsetOutOfRange);
        }
    };
    if let Err(e) = write.write().await {
        tracing::error!(topic, partition = index, error = %e, "could not record the log start offset");
        broker.partition_storage_failed(topic, index, "a log start offset write", &e);
        return Err(ResponseError::KafkaStorageError);
    }
    let mut partition = handle.lock();
    if let Err(e) = partition.advance_log_start(write.offset()) {
        // The start offset is durable and in effect; only some old segment files remain, and
        // the next open deletes them.
        tracing::warn!(topic, partition = index, error = %e, "could not delete segments below the log start");
    }
    tracing::info!(
        topic,
        partition = index,
        log_start_offset = partition.log_start_offset(),
        "deleted records"
    );
    Ok(partition.log_start_offset())
}
