//! ElectLeaders for `weir leader-election` (Kafka's `Admin.electLeaders`): preferred or
//! unclean elections for named partitions or for all of them.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::ElectLeadersRequest;

use super::{check, name, Client, Result};

/// v2: per-request error code and error messages (v1 added the election type).
const ELECT_LEADERS_VERSION: i16 = 2;

/// Kafka's `ElectionType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionType {
    Preferred,
    Unclean,
}

impl ElectionType {
    fn code(self) -> i8 {
        match self {
            ElectionType::Preferred => 0,
            ElectionType::Unclean => 1,
        }
    }
}

/// One partition's outcome: `None` elected, else the error (ELECTION_NOT_NEEDED included) and
/// the broker's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionOutcome {
    pub topic: String,
    pub partition: i32,
    pub error: Option<(ResponseError, String)>,
}

impl Client {
    /// Elections for `partitions` (`None`: every partition; the broker then leaves out the
    /// ones that needed none). A request-level error fails the whole call.
    pub async fn elect_leaders(
        &mut self,
        election: ElectionType,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<ElectionOutcome>> {
        let topics = partitions.map(|list| {
            let mut topics: Vec<TopicPartitions> = Vec::new();
            for (topic, partition) in list {
                match topics.iter_mut().find(|t| t.topic.as_str() == topic) {
                    Some(t) => t.partitions.push(*partition),
                    None => topics.push(
                        TopicPartitions::default()
                            .with_topic(name(topic))
                            .with_partitions(vec![*partition]),
                    ),
                }
            }
            topics
        });
        let request = ElectLeadersRequest::default()
            .with_election_type(election.code())
            .with_topic_partitions(topics)
            .with_timeout_ms(self.timeout.as_millis() as i32);
        let response = self.call(&request, ELECT_LEADERS_VERSION).await?;
        check(response.error_code, None)?;
        let mut out = Vec::new();
        for t in response.replica_election_results {
            for p in t.partition_result {
                out.push(ElectionOutcome {
                    topic: t.topic.to_string(),
                    partition: p.partition_id,
                    error: super::error_of(p.error_code, p.error_message.as_ref()),
                });
            }
        }
        Ok(out)
    }
}
