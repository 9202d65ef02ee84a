//! DescribeLogDirs and AlterReplicaLogDirs (`kafka-log-dirs.sh`, `kafka-reassign-partitions.sh`
//! with `log_dirs`), over this broker's directories (`broker::log_dirs`).
//!
//! DescribeLogDirs answers every directory with its partitions' sizes and offset lag (the high
//! watermark minus the log end, never below 0, as Kafka reports a current replica); a failed
//! directory answers KAFKA_STORAGE_ERROR and no partitions. Total and usable bytes are not
//! known through the `io` layer: -1, Kafka's "unknown".
//!
//! AlterReplicaLogDirs: a replica already in the named directory is NONE; a path that is not one
//! of this broker's directories LOG_DIR_NOT_FOUND; a failed target directory
//! KAFKA_STORAGE_ERROR; a replica not hosted here REPLICA_NOT_AVAILABLE. Moving a replica
//! between two directories (Kafka's `-future` log and its copier) is not implemented: such a
//! request is refused with INVALID_REQUEST, and the replica stays where it is.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::shared::Broker;

pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    if !broker.authz(ctx).cluster(Operation::Describe) {
        return DescribeLogDirsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    // None: every partition; otherwise the named ones.
    let wanted: Option<BTreeMap<String, Vec<i32>>> = req.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.topic.to_string(), t.partitions))
            .collect()
    });
    let results = broker
        .log_dir_views()
        .into_iter()
        .map(|dir| {
            let result = DescribeLogDirsResult::default()
                .with_log_dir(StrBytes::from_string(dir.path.display().to_string()))
                .with_total_bytes(-1)
                .with_usable_bytes(-1);
            if dir.offline.is_some() {
                return result.with_error_code(ResponseError::KafkaStorageError.code());
            }
            let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
            for (topic, index) in dir.partitions {
                let named = wanted
                    .as_ref()
                    .is_none_or(|w| w.get(&topic).is_some_and(|ps| ps.contains(&index)));
                if !named {
                    continue;
                }
                let Some(handle) = broker.partition(&topic, index) else {
                    continue;
                };
                let (size, lag) = {
                    let p = handle.lock();
                    let lag = (p.high_watermark() - p.log_end_offset()).max(0);
                    (p.log().size_bytes() as i64, lag)
                };
                topics.entry(topic).or_default().push(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(index)
                        .with_partition_size(size)
                        .with_offset_lag(lag)
                        .with_is_future_key(false),
                );
            }
            result.with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        DescribeLogDirsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(name)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}

pub(crate) fn alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let allowed = broker.authz(ctx).cluster(Operation::Alter);
    let views = broker.log_dir_views();
    let mut results: BTreeMap<String, Vec<AlterReplicaLogDirPartitionResult>> = BTreeMap::new();
    for dir in &req.dirs {
        let target = views
            .iter()
            .find(|v| v.path.display().to_string() == dir.path.as_str());
        for topic in &dir.topics {
            for &index in &topic.partitions {
                let name = topic.name.to_string();
                // None: the replica is already there.
                let error = if !allowed {
                    Some(ResponseError::ClusterAuthorizationFailed)
                } else {
                    match target {
                        None => Some(ResponseError::LogDirNotFound),
                        Some(t) if t.offline.is_some() => Some(ResponseError::KafkaStorageError),
                        // KIP-1066: nothing moves into a cordoned directory.
                        Some(t) if broker.dirs.is_cordoned(t.id) => {
                            Some(ResponseError::InvalidReplicaAssignment)
                        }
                        Some(t) => match broker.partition(&name, index) {
                            None => Some(ResponseError::ReplicaNotAvailable),
                            Some(_) if t.partitions.contains(&(name.clone(), index)) => None,
                            Some(_) => {
                                tracing::warn!(topic = name, partition = index, dir = %t.path.display(),
                                    "AlterReplicaLogDirs: moving a replica between directories is not implemented");
                                Some(ResponseError::InvalidRequest)
                            }
                        },
                    }
                };
                let code = error.map_or(0, |e| e.code());
                results.entry(name).or_default().push(
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code),
                );
            }
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(
        results
            .into_iter()
            .map(|(name, partitions)| {
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(partitions)
            })
            .collect(),
    )
}
