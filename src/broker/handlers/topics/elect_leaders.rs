//! ElectLeaders (`kafka-leader-election.sh`): preferred or unclean elections, decided by
//! `controller::election::elect_on_request` and committed as one batch of PartitionChange
//! records. Without named partitions every partition is tried and the ones that needed no
//! election are left out of the answer, as Kafka does.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};
use crate::controller::election;
use crate::controller::{ControllerError, MetadataRecord};

/// Kafka's `ElectionType`.
const UNCLEAN: i8 = 1;

pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: ElectLeadersRequest,
) -> ElectLeadersResponse {
    // v0 has no election type: preferred.
    let unclean = ctx.version >= 1 && req.election_type == UNCLEAN;
    let named: Option<Vec<(String, Vec<i32>)>> = req.topic_partitions.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.topic.to_string(), t.partitions))
            .collect()
    });
    let all = named.is_none();
    if !broker.authz(ctx).cluster(Operation::Alter) {
        // As Kafka: every named partition fails, and v1+ says so for the request too.
        let denied = ResponseError::ClusterAuthorizationFailed.code();
        let mut response = ElectLeadersResponse::default();
        if ctx.version >= 1 {
            response.error_code = denied;
        }
        response.replica_election_results = named
            .unwrap_or_default()
            .into_iter()
            .map(|(topic, partitions)| {
                ReplicaElectionResult::default()
                    .with_topic(TopicName(StrBytes::from_string(topic)))
                    .with_partition_result(
                        partitions
                            .into_iter()
                            .map(|p| {
                                PartitionResult::default()
                                    .with_partition_id(p)
                                    .with_error_code(denied)
                            })
                            .collect(),
                    )
            })
            .collect();
        return response;
    }
    let decided = broker
        .change_metadata_until(Some(ctx.deadline), false, |controller, image| {
            let wanted: Vec<(String, i32)> = match &named {
                Some(list) => list
                    .iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
                    .collect(),
                None => image
                    .partitions()
                    .filter_map(|((id, p), _)| image.topic_by_id(id).map(|t| (t.name.clone(), p)))
                    .collect(),
            };
            let config = |t: &crate::controller::TopicMeta| controller.election_config(image, t);
            let mut records = Vec::new();
            let mut outcomes = Vec::new();
            for (topic, partition) in wanted {
                let outcome = match image.topic(&topic) {
                    None => Err(ControllerError::UnknownTopic(format!(
                        "{topic}-{partition}"
                    ))),
                    Some(t) => {
                        election::elect_on_request(image, (t.id, partition), unclean, &config)
                    }
                };
                let result = match outcome {
                    Ok(Some(change)) => {
                        records.push(MetadataRecord::PartitionChange(change));
                        Ok(())
                    }
                    Ok(None) => Err((ResponseError::ElectionNotNeeded, None)),
                    Err(e) => Err((errors::controller(&e), Some(e.to_string()))),
                };
                outcomes.push((topic, partition, result));
            }
            Ok((records, outcomes))
        })
        .await;
    let mut response = ElectLeadersResponse::default();
    let outcomes = match decided {
        Ok(outcomes) => outcomes,
        Err(e) => {
            // Nothing was committed: the whole request failed.
            if ctx.version >= 1 {
                response.error_code = errors::commit(&e).code();
            }
            return response;
        }
    };
    for (topic, partition, result) in outcomes {
        let (code, message) = match result {
            Ok(()) => (0, None),
            Err((ResponseError::ElectionNotNeeded, _)) if all => continue,
            Err((code, message)) => (code.code(), message),
        };
        let entry = match response
            .replica_election_results
            .iter_mut()
            .position(|r| r.topic.as_str() == topic)
        {
            Some(i) => &mut response.replica_election_results[i],
            None => {
                response.replica_election_results.push(
                    ReplicaElectionResult::default()
                        .with_topic(TopicName(StrBytes::from_string(topic))),
                );
                response.replica_election_results.last_mut().unwrap()
            }
        };
        entry.partition_result.push(
            PartitionResult::default()
                .with_partition_id(partition)
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string)),
        );
    }
    response
}
