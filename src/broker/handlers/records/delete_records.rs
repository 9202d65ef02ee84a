//! DeleteRecords: moves partitions' log start offsets forward. The leader makes the new start
//! durable (`log-start-offset`, fsynced) before it takes effect; its followers adopt it from
//! its fetch answers (durably too, `replica_fetcher::local_log::adopt_log_start`) and report
//! their own log start in their fetches. The answer waits (Kafka's `DelayedDeleteRecords`, one
//! deadline: the request's `timeout_ms`) until the partition's low watermark — the lowest log
//! start over the leader and its live followers — reaches the requested offset, so a client
//! told "deleted up to N" never sees those records again, not after a kill -9, a power loss or
//! a leader change. Past the deadline the partition answers REQUEST_TIMED_OUT.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::delayed::{self, FetchWake, Isolation, WaitError};
use crate::broker::shared::Broker;
use crate::broker::state::PartitionHandle;
use crate::replica::DeleteRecordsError;

pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let deadline = broker.io.clock.monotonic()
        + std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    // First every partition's leader moves its log start; then one deadline for the waits.
    let mut moved = Vec::with_capacity(req.topics.len());
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
            partitions.push((p.partition_index, outcome));
        }
        moved.push((topic.name, partitions));
    }
    let mut topics = Vec::with_capacity(moved.len());
    for (name, partitions_moved) in moved {
        let mut partitions = Vec::with_capacity(partitions_moved.len());
        for (index, outcome) in partitions_moved {
            let outcome = match outcome {
                Ok((handle, required)) => {
                    wait_low_watermark(broker, ctx, &handle, required, deadline).await
                }
                Err(e) => Err(e),
            };
            let mut r = DeleteRecordsPartitionResult::default().with_partition_index(index);
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
                .with_name(name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// The leader's half: moves its log start to `offset` (`-1`: the high watermark) durably.
/// Returns the partition and the offset its low watermark must reach.
async fn delete_one(
    broker: &Broker,
    topic: &str,
    index: i32,
    offset: i64,
) -> Result<(std::sync::Arc<PartitionHandle>, i64), ResponseError> {
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
        // The log already starts there; the followers may still have to catch up.
        Ok(None) => {
            let required = match offset {
                crate::replica::partition::DELETE_TO_HIGH_WATERMARK => {
                    handle.lock().log_start_offset()
                }
                offset => offset,
            };
            return Ok((handle.clone(), required));
        }
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
    let required = write.offset();
    let mut partition = handle.lock();
    if let Err(e) = partition.advance_log_start(required) {
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
    drop(partition);
    Ok((handle.clone(), required))
}

/// Waits until the partition's low watermark reaches `required` (at once without other live
/// replicas) and returns it; REQUEST_TIMED_OUT past `deadline`, NOT_LEADER_OR_FOLLOWER if this
/// broker stops leading meanwhile.
async fn wait_low_watermark(
    broker: &Broker,
    ctx: &RequestContext,
    handle: &PartitionHandle,
    required: i64,
    deadline: std::time::Duration,
) -> Result<i64, ResponseError> {
    #[cfg(any(madsim, test))]
    if crate::planted!(broker.config, FollowerIgnoresLogStart) {
        // Planted: the leader's own log start is taken as the answer, followers unheard.
        return match handle.lock_open() {
            Some(p) if p.role() == crate::replica::Role::Leader => Ok(p.log_start_offset()),
            _ => Err(ResponseError::NotLeaderOrFollower),
        };
    }
    let wake = FetchWake::new();
    let mut registration = None;
    loop {
        let low = handle.lock_open().and_then(|p| p.low_watermark());
        match low {
            None => return Err(ResponseError::NotLeaderOrFollower),
            Some(low) if low >= required => return Ok(low),
            Some(_) => {}
        }
        if registration.is_none() {
            // Registered, then looked at again: a move in between is seen by the second look,
            // any later one wakes the waiter.
            match handle
                .waiters
                .register_fetch(required, Isolation::LowWatermark, &wake)
            {
                Ok(r) => registration = Some(r),
                Err(WaitError::Closed(_)) => return Err(ResponseError::NotLeaderOrFollower),
                Err(e) => {
                    tracing::warn!(reason = ?e, "DeleteRecords answered without waiting");
                    return Err(ResponseError::RequestTimedOut);
                }
            }
            continue;
        }
        match delayed::wait_fetch(broker.io.clock.as_ref(), &wake, deadline, &ctx.gone).await {
            Ok(()) => {}
            Err(_) => {
                // At the deadline, a move that arrived meanwhile still counts.
                let low = handle.lock_open().and_then(|p| p.low_watermark());
                return match low {
                    Some(low) if low >= required => Ok(low),
                    _ => Err(ResponseError::RequestTimedOut),
                };
            }
        }
    }
}
