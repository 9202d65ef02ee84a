//! DescribeLogDirs and AlterReplicaLogDirs (`kafka-log-dirs.sh`, `kafka-reassign-partitions.sh`
//! with `log_dirs`), over this broker's directories (`broker::log_dirs`).
//!
//! DescribeLogDirs answers every directory with its partitions' sizes and offset lag (the high
//! watermark minus the log end, never below 0, as Kafka reports a current replica) and the
//! future replicas moving into it (`is_future_key`, lag: the current log's end minus the
//! future's); a failed directory answers KAFKA_STORAGE_ERROR and no partitions. Total and
//! usable bytes are not known through the `io` layer: -1, Kafka's "unknown". v5 (KIP-1066)
//! says whether each directory is cordoned.
//!
//! AlterReplicaLogDirs (Kafka's `ReplicaManager.alterReplicaLogDirs`): a path that is not one
//! of this broker's directories is LOG_DIR_NOT_FOUND; a failed target directory, or any failed
//! directory at all (Kafka creates no future log then), or a replica whose own directory failed,
//! KAFKA_STORAGE_ERROR; a cordoned target KAFKA_STORAGE_ERROR too (KIP-1066's error handling:
//! "the target directory is cordoned", as for an offline one); a replica not
//! hosted here REPLICA_NOT_AVAILABLE, and the directory is remembered: the replica is created
//! there. Otherwise NONE: a replica elsewhere starts moving (`drivers::dir_mover`), one already
//! there cancels its move if it had one.

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
    let futures = broker.dir_moves.views();
    let results = broker
        .log_dir_views()
        .into_iter()
        .map(|dir| {
            let result = DescribeLogDirsResult::default()
                .with_log_dir(StrBytes::from_string(dir.path.display().to_string()))
                .with_total_bytes(-1)
                .with_usable_bytes(-1)
                .with_is_cordoned(dir.offline.is_none() && broker.dirs.is_cordoned(dir.id));
            if dir.offline.is_some() {
                return result.with_error_code(ResponseError::KafkaStorageError.code());
            }
            let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
            for ((topic, index), future) in &futures {
                let named = wanted
                    .as_ref()
                    .is_none_or(|w| w.get(topic).is_some_and(|ps| ps.contains(index)));
                if future.dest != dir.id || !named {
                    continue;
                }
                let Some(handle) = broker.partition(topic, *index) else {
                    continue;
                };
                let lag = (handle.lock().log_end_offset() - future.end).max(0);
                topics.entry(topic.clone()).or_default().push(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(*index)
                        .with_partition_size(future.size as i64)
                        .with_offset_lag(lag)
                        .with_is_future_key(true),
                );
            }
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
                        // KIP-1066: nothing moves into a cordoned directory; the KIP answers
                        // as for an offline one.
                        Some(t) if broker.dirs.is_cordoned(t.id) => {
                            Some(ResponseError::KafkaStorageError)
                        }
                        Some(t) => match broker.partition(&name, index) {
                            None => {
                                broker.dirs.prefer(&name, index, t.id);
                                Some(ResponseError::ReplicaNotAvailable)
                            }
                            Some(_) if broker.dirs.is_offline(&name, index) => {
                                Some(ResponseError::KafkaStorageError)
                            }
                            // Kafka creates no future log while a directory is offline.
                            Some(_)
                                if !t.partitions.contains(&(name.clone(), index))
                                    && broker.dirs.any_offline() =>
                            {
                                Some(ResponseError::KafkaStorageError)
                            }
                            Some(_) => {
                                broker.request_dir_move(&name, index, t.id);
                                None
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
