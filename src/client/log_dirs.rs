//! DescribeLogDirs for `weir log-dirs` (Kafka's `Admin.describeLogDirs`): one broker's log
//! directories, each with its error and its replicas' sizes and offset lags; and
//! AlterReplicaLogDirs for `weir reassign`'s `log_dirs` (Kafka's `Admin.alterReplicaLogDirs`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, DescribeLogDirsRequest};

use super::{check, name, Client, Result};

/// v5: whether each directory is cordoned (KIP-1066); v4 added total and usable bytes
/// (KIP-827); v1 is the oldest Kafka 4 serves.
const DESCRIBE_LOG_DIRS_VERSION: i16 = 5;
/// v2: the first flexible version; Kafka 4 serves 1-2.
const ALTER_REPLICA_LOG_DIRS_VERSION: i16 = 2;

/// One log directory of a broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDirDescription {
    pub path: String,
    /// KAFKA_STORAGE_ERROR for a failed directory.
    pub error: Option<ResponseError>,
    /// Cordoned (KIP-1066): no new replica goes there.
    pub cordoned: bool,
    pub replicas: Vec<ReplicaDirInfo>,
}

/// One replica in a log directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaDirInfo {
    pub topic: String,
    pub partition: i32,
    pub size: i64,
    pub offset_lag: i64,
    pub is_future: bool,
}

impl Client {
    /// The connected broker's log directories, with the replicas of `topics` (`None`: all;
    /// each topic with these partitions).
    pub async fn describe_log_dirs(
        &mut self,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<LogDirDescription>> {
        let topics = topics.map(|list| {
            list.iter()
                .map(|(topic, partitions)| {
                    DescribableLogDirTopic::default()
                        .with_topic(name(topic))
                        .with_partitions(partitions.clone())
                })
                .collect()
        });
        let request = DescribeLogDirsRequest::default().with_topics(topics);
        let response = self.call(&request, DESCRIBE_LOG_DIRS_VERSION).await?;
        check(response.error_code, None)?;
        Ok(response
            .results
            .into_iter()
            .map(|r| LogDirDescription {
                path: r.log_dir.to_string(),
                error: ResponseError::try_from_code(r.error_code),
                cordoned: r.is_cordoned,
                replicas: r
                    .topics
                    .into_iter()
                    .flat_map(|t| {
                        let topic = t.name.to_string();
                        t.partitions.into_iter().map(move |p| ReplicaDirInfo {
                            topic: topic.clone(),
                            partition: p.partition_index,
                            size: p.partition_size,
                            offset_lag: p.offset_lag,
                            is_future: p.is_future_key,
                        })
                    })
                    .collect(),
            })
            .collect())
    }

    /// Asks the connected broker to move its replicas to the named directories: `moves` are
    /// (directory path, topic, partition). Each replica's outcome: `None` accepted (a move
    /// started, or it is already there).
    pub async fn alter_replica_log_dirs(
        &mut self,
        moves: &[(String, String, i32)],
    ) -> Result<Vec<(String, i32, Option<ResponseError>)>> {
        let mut dirs: Vec<AlterReplicaLogDir> = Vec::new();
        for (path, topic, partition) in moves {
            let at = match dirs.iter().position(|d| d.path.as_str() == path) {
                Some(at) => at,
                None => {
                    dirs.push(AlterReplicaLogDir::default().with_path(
                        kafka_protocol::protocol::StrBytes::from_string(path.clone()),
                    ));
                    dirs.len() - 1
                }
            };
            let dir = &mut dirs[at];
            match dir.topics.iter_mut().find(|t| t.name.as_str() == topic) {
                Some(t) => t.partitions.push(*partition),
                None => dir.topics.push(
                    AlterReplicaLogDirTopic::default()
                        .with_name(name(topic))
                        .with_partitions(vec![*partition]),
                ),
            }
        }
        let request = AlterReplicaLogDirsRequest::default().with_dirs(dirs);
        let response = self.call(&request, ALTER_REPLICA_LOG_DIRS_VERSION).await?;
        Ok(response
            .results
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic_name.to_string();
                t.partitions.into_iter().map(move |p| {
                    (
                        topic.clone(),
                        p.partition_index,
                        ResponseError::try_from_code(p.error_code),
                    )
                })
            })
            .collect())
    }
}
