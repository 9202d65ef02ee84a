//! DescribeLogDirs for `weir log-dirs` (Kafka's `Admin.describeLogDirs`): one broker's log
//! directories, each with its error and its replicas' sizes and offset lags.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::DescribeLogDirsRequest;

use super::{check, name, Client, Result};

/// v4: total and usable bytes (KIP-827); v1 is the oldest Kafka 4 serves.
const DESCRIBE_LOG_DIRS_VERSION: i16 = 4;

/// One log directory of a broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDirDescription {
    pub path: String,
    /// KAFKA_STORAGE_ERROR for a failed directory.
    pub error: Option<ResponseError>,
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
}
