//! DeleteRecords for one partition (Kafka's `Admin.deleteRecords`): moves the partition's log
//! start forward. Sent to the partition's leader; the simulator's record deleter
//! (`sim/src/record_deleter.rs`) uses it.

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::DeleteRecordsRequest;

use super::{check, name, Client, ClientError, Result};

/// v2: flexible versions; the fields are v0's.
const DELETE_RECORDS_VERSION: i16 = 2;

impl Client {
    /// Deletes the records of `topic`-`partition` below `offset` (-1: below the high
    /// watermark). `timeout_ms`: how long the leader may wait for its followers' log starts
    /// before it answers REQUEST_TIMED_OUT (below the client's own time-out, or the answer
    /// races it). Returns the low watermark the leader answered.
    pub async fn delete_records(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        timeout_ms: i32,
    ) -> Result<i64> {
        let request = DeleteRecordsRequest::default()
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(partition)
                    .with_offset(offset)])])
            .with_timeout_ms(timeout_ms);
        let response = self.call(&request, DELETE_RECORDS_VERSION).await?;
        let answer = response
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| ClientError::Protocol("partition missing from DeleteRecords".into()))?;
        check(answer.error_code, None)?;
        Ok(answer.low_watermark)
    }
}
