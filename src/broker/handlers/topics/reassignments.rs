//! AlterPartitionReassignments and ListPartitionReassignments (KIP-455,
//! `kafka-reassign-partitions.sh`), on the active controller (forwarded there like the other
//! admin requests). Each partition's entry is decided by `controller::reassignment` against
//! the committed image and the accepted ones are committed as one batch of PartitionChange
//! records; the brokers then reconcile (a new replica opens and fetches from the leader, a
//! removed one deletes its log).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};
use crate::controller::reassignment::{self, Reassign};
use crate::controller::MetadataRecord;

pub(crate) async fn alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    // v0 has no such field: a change of replication factor is allowed.
    let allow_rf_change = ctx.version < 1 || req.allow_replication_factor_change;
    let requests: Vec<Reassign> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Reassign {
                topic: t.name.to_string(),
                partition: p.partition_index,
                replicas: p
                    .replicas
                    .as_ref()
                    .map(|rs| rs.iter().map(|r| r.0).collect()),
                allow_rf_change,
            })
        })
        .collect();
    let mut response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_rf_change);
    if !broker.authz(ctx).cluster(Operation::Alter) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return response;
    }
    let decided = broker
        .change_metadata_until(Some(ctx.deadline), false, |controller, image| {
            let config = |t: &crate::controller::TopicMeta| controller.election_config(image, t);
            let mut records = Vec::new();
            let mut outcomes = Vec::with_capacity(requests.len());
            let mut seen = std::collections::BTreeSet::new();
            for request in &requests {
                // Each partition is decided against the committed image: one named twice
                // would be decided twice against the same registration.
                let outcome = if !seen.insert((request.topic.clone(), request.partition)) {
                    Err((
                        ResponseError::InvalidRequest,
                        Some(format!(
                            "{}-{} named twice",
                            request.topic, request.partition
                        )),
                    ))
                } else {
                    match reassignment::reassign(image, request, &config) {
                        Ok(change) => {
                            records.extend(change.map(MetadataRecord::PartitionChange));
                            Ok(())
                        }
                        Err(e) => Err((errors::controller(&e), Some(e.to_string()))),
                    }
                };
                outcomes.push(outcome);
            }
            Ok((records, outcomes))
        })
        .await;
    let outcomes = match decided {
        Ok(outcomes) => outcomes,
        Err(e) => {
            // Nothing was committed: the whole request failed.
            response.error_code = errors::commit(&e).code();
            return response;
        }
    };
    let mut outcomes = outcomes.into_iter();
    for t in req.topics {
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                let (code, message) = match outcomes.next().expect("one outcome a partition") {
                    Ok(()) => (0, None),
                    Err((code, message)) => (code.code(), message),
                };
                ReassignablePartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_error_message(message.map(StrBytes::from_string))
            })
            .collect();
        response.responses.push(
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions),
        );
    }
    response
}

pub(crate) fn list(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let mut response = ListPartitionReassignmentsResponse::default();
    if !broker.authz(ctx).cluster(Operation::Describe) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return response;
    }
    let named: Option<Vec<(String, Vec<i32>)>> = req.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    let image = broker.image();
    let ids = |v: Vec<i32>| v.into_iter().map(BrokerId).collect::<Vec<_>>();
    for ongoing in reassignment::list(&image, named.as_deref()) {
        let partition = OngoingPartitionReassignment::default()
            .with_partition_index(ongoing.partition)
            .with_replicas(ids(ongoing.replicas))
            .with_adding_replicas(ids(ongoing.adding))
            .with_removing_replicas(ids(ongoing.removing));
        match response.topics.last_mut() {
            Some(t) if t.name.as_str() == ongoing.topic => t.partitions.push(partition),
            _ => response.topics.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(StrBytes::from_string(ongoing.topic)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    response
}
