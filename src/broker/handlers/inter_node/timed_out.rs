//! REQUEST_TIMED_OUT answers for the APIs a broker forwards to the controller, built from the
//! request (each topic, resource, creation or filter answered with the error): what a client
//! gets when its request could not be carried out within its own bound, as Kafka's
//! `getErrorResponse(TimeoutException)` answers it.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AlterClientQuotasEntity, EntryData as AlterClientQuotasEntry,
};
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalResult;
use kafka_protocol::messages::{
    AlterClientQuotasResponse, AlterConfigsResponse, AlterUserScramCredentialsResponse,
    CreateAclsResponse, CreatePartitionsResponse, CreateTopicsResponse, DeleteAclsResponse,
    DeleteTopicsResponse, DescribeQuorumResponse, ElectLeadersResponse,
    IncrementalAlterConfigsResponse, InitProducerIdResponse, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

/// The answer to `request` when its bound passed before it could be carried out; `None` for
/// an API that is not forwarded.
pub(crate) fn response(request: &RequestKind) -> Option<ResponseKind> {
    error_response(
        request,
        ResponseError::RequestTimedOut,
        "the request's timeout passed before the controller could carry it out",
    )
}

/// The answer to `request` with `error` for each topic, resource, creation or filter of it;
/// `None` for an API that is not forwarded.
pub(crate) fn error_response(
    request: &RequestKind,
    error: ResponseError,
    why: &'static str,
) -> Option<ResponseKind> {
    let code = error.code();
    let message = || Some(StrBytes::from_static_str(why));
    Some(match request {
        RequestKind::CreateTopics(r) => ResponseKind::CreateTopics(
            CreateTopicsResponse::default().with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        CreatableTopicResult::default()
                            .with_name(t.name.clone())
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteTopics(r) => {
            let by_name = r.topic_names.iter().map(|n| (Some(n.clone()), None));
            let by_state = r.topics.iter().map(|t| (t.name.clone(), Some(t.topic_id)));
            ResponseKind::DeleteTopics(
                DeleteTopicsResponse::default().with_responses(
                    by_name
                        .chain(by_state)
                        .map(|(name, id)| {
                            DeletableTopicResult::default()
                                .with_name(name)
                                .with_topic_id(id.unwrap_or_default())
                                .with_error_code(code)
                                .with_error_message(message())
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::CreatePartitions(r) => ResponseKind::CreatePartitions(
            CreatePartitionsResponse::default().with_results(
                r.topics
                    .iter()
                    .map(|t| {
                        CreatePartitionsTopicResult::default()
                            .with_name(t.name.clone())
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(
            AlterConfigsResponse::default().with_responses(
                r.resources
                    .iter()
                    .map(|c| {
                        AlterConfigsResourceResponse::default()
                            .with_resource_type(c.resource_type)
                            .with_resource_name(c.resource_name.clone())
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsResponse::default().with_responses(
                r.resources
                    .iter()
                    .map(|c| {
                        IncrementalResult::default()
                            .with_resource_type(c.resource_type)
                            .with_resource_name(c.resource_name.clone())
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::DescribeQuorum(_) => ResponseKind::DescribeQuorum(
            DescribeQuorumResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::InitProducerId(_) => ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id((-1).into())
                .with_producer_epoch(-1),
        ),
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(
            CreateAclsResponse::default().with_results(
                r.creations
                    .iter()
                    .map(|_| {
                        AclCreationResult::default()
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(
            DeleteAclsResponse::default().with_filter_results(
                r.filters
                    .iter()
                    .map(|_| {
                        DeleteAclsFilterResult::default()
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::AlterUserScramCredentials(r) => {
            let users = r
                .deletions
                .iter()
                .map(|d| d.name.clone())
                .chain(r.upsertions.iter().map(|u| u.name.clone()));
            ResponseKind::AlterUserScramCredentials(
                AlterUserScramCredentialsResponse::default().with_results(
                    users
                        .map(|user| {
                            AlterUserScramCredentialsResult::default()
                                .with_user(user)
                                .with_error_code(code)
                                .with_error_message(message())
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::AlterClientQuotas(r) => ResponseKind::AlterClientQuotas(
            AlterClientQuotasResponse::default().with_entries(
                r.entries
                    .iter()
                    .map(|e| {
                        AlterClientQuotasEntry::default()
                            .with_entity(
                                e.entity
                                    .iter()
                                    .map(|p| {
                                        AlterClientQuotasEntity::default()
                                            .with_entity_type(p.entity_type.clone())
                                            .with_entity_name(p.entity_name.clone())
                                    })
                                    .collect(),
                            )
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::ElectLeaders(_) => {
            ResponseKind::ElectLeaders(ElectLeadersResponse::default().with_error_code(code))
        }
        RequestKind::AlterPartitionReassignments(_) => ResponseKind::AlterPartitionReassignments(
            kafka_protocol::messages::AlterPartitionReassignmentsResponse::default()
                .with_error_code(code),
        ),
        RequestKind::UnregisterBroker(_) => ResponseKind::UnregisterBroker(
            kafka_protocol::messages::UnregisterBrokerResponse::default().with_error_code(code),
        ),
        RequestKind::ListPartitionReassignments(_) => ResponseKind::ListPartitionReassignments(
            kafka_protocol::messages::ListPartitionReassignmentsResponse::default()
                .with_error_code(code),
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};

    use super::*;

    #[test]
    fn every_topic_of_a_create_gets_the_error() {
        let request = RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default().with_name(TopicName(StrBytes::from_static_str("a"))),
            CreatableTopic::default().with_name(TopicName(StrBytes::from_static_str("b"))),
        ]));
        let Some(ResponseKind::CreateTopics(r)) = response(&request) else {
            panic!("no CreateTopics answer");
        };
        assert_eq!(r.topics.len(), 2);
        assert!(r
            .topics
            .iter()
            .all(|t| t.error_code == ResponseError::RequestTimedOut.code()));
        assert!(response(&RequestKind::Produce(Default::default())).is_none());
    }
}
