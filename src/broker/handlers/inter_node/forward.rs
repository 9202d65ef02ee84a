//! Forwarding: a client request that changes metadata (or asks DescribeQuorum, or a producer
//! id: InitProducerId reserves ids in the metadata log), arriving at a
//! node that is not the active controller, is relayed byte for byte to the quorum leader's
//! controller listener and its answer returned to the client (only the correlation id is
//! rewritten). Kafka's brokers forward these to the controller (KIP-590); relaying the raw
//! frame keeps every version and field intact. The wait is bounded; when no leader is known
//! or the relay fails, the request is handled locally, which answers NOT_CONTROLLER (or
//! NOT_LEADER_OR_FOLLOWER for DescribeQuorum), both retriable. With an authorizer, a request is
//! relayed only if this node allows all of it (`Broker::relay_allowed`): the controller
//! listener does not check what arrives.
//!
//! Topics this broker creates on its own account (auto-creation on Metadata, as a producer
//! asks it; the offsets topic) go to the active controller as a CreateTopics request of
//! their own ([`create_topic`]), as Kafka's `AutoTopicCreationManager` sends them.

use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::broker::api::Request;
use crate::broker::{peer, Broker, CommitError};
use crate::controller::{ControllerError, NewTopic};
use crate::protocol::frame::{finish_frame, start_frame};

/// The CreateTopics version this broker sends the controller (v7: topic ids in the answer).
const CREATE_TOPICS_VERSION: i16 = 7;

/// How long a relayed request may take (a commit waits up to 10 s on the leader).
const FORWARD_TIMEOUT: Duration = Duration::from_millis(15_000);

const FORWARDED: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeQuorum,
    ApiKey::InitProducerId,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::AlterUserScramCredentials,
];

/// The relayed response frame (size prefix included), or `None` to handle the request here.
/// `request` was decoded on the client listener (so its version is one served).
pub(crate) async fn forward(
    broker: &Broker,
    request: &Request<'_, Broker>,
    peer: std::net::SocketAddr,
) -> Option<BytesMut> {
    let quorum = broker.quorum.as_ref()?;
    let (key, frame) = (request.key, &request.frame);
    if !FORWARDED.contains(&key) {
        return None;
    }
    let leader_side = if key == ApiKey::DescribeQuorum {
        quorum.status().leader == Some(quorum.node_id())
    } else {
        quorum.is_active()
    };
    if leader_side || !broker.relay_allowed(peer, &request.body) {
        return None;
    }
    let link = quorum.leader_link()?;
    let correlation = [frame[4], frame[5], frame[6], frame[7]];
    let rx = link.call(frame.to_vec());
    let response = match broker.io.timeout(FORWARD_TIMEOUT, rx).await {
        Some(Ok(Ok(r))) => r,
        other => {
            let why = match other {
                Some(Ok(Err(e))) => e.to_string(),
                None => "timed out".to_string(),
                _ => "connection lost".to_string(),
            };
            tracing::debug!(?key, leader = %link.addr(), %why, "forwarding to the controller failed");
            return None;
        }
    };
    let mut out = BytesMut::with_capacity(response.len() + 4);
    start_frame(&mut out);
    out.extend_from_slice(&correlation);
    out.extend_from_slice(&response[4..]);
    finish_frame(&mut out);
    Some(out)
}

/// Creates a topic through the active controller: here when this node is it (or is a single
/// node), else by a CreateTopics request to it. Its refusal comes back as the controller's
/// error code (TOPIC_ALREADY_EXISTS as [`ControllerError::TopicAlreadyExists`], so callers
/// that tolerate a race see the same error either way).
pub(crate) async fn create_topic(
    broker: &Broker,
    new: NewTopic,
    validate_only: bool,
) -> Result<(), CommitError> {
    let Some(quorum) = broker.quorum.as_ref().filter(|q| !q.is_active()) else {
        return broker.create_topic(new, validate_only).await;
    };
    let link = quorum.leader_link().ok_or(CommitError::NotController)?;
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(new.name.clone())))
        .with_num_partitions(new.partitions)
        .with_replication_factor(new.replication_factor)
        .with_assignments(
            new.assignments
                .iter()
                .enumerate()
                .map(|(i, replicas)| {
                    CreatableReplicaAssignment::default()
                        .with_partition_index(i as i32)
                        .with_broker_ids(replicas.iter().map(|b| BrokerId(*b)).collect())
                })
                .collect(),
        )
        .with_configs(
            new.configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.clone()))
                        .with_value(Some(StrBytes::from_string(v.clone())))
                })
                .collect(),
        );
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(FORWARD_TIMEOUT.as_millis() as i32)
        .with_validate_only(validate_only);
    let client_id = format!("weir-broker-{}", broker.config.node_id);
    let frame = peer::encode_request(
        ApiKey::CreateTopics,
        CREATE_TOPICS_VERSION,
        &client_id,
        &RequestKind::CreateTopics(request),
    )
    .map_err(|e| CommitError::Storage(std::io::Error::other(e.to_string())))?;
    let rx = link.call(frame);
    let response = match broker.io.timeout(FORWARD_TIMEOUT, rx).await {
        Some(Ok(Ok(r))) => r,
        None => return Err(CommitError::Timeout),
        _ => return Err(CommitError::NotController),
    };
    let decoded = peer::decode_response(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, response);
    let Ok(ResponseKind::CreateTopics(answer)) = decoded else {
        return Err(CommitError::NotController);
    };
    let Some(result) = answer.topics.first() else {
        return Err(CommitError::NotController);
    };
    match ResponseError::try_from_code(result.error_code) {
        None => Ok(()),
        Some(ResponseError::TopicAlreadyExists) => Err(CommitError::Rejected(
            ControllerError::TopicAlreadyExists(new.name),
        )),
        Some(ResponseError::NotController) => Err(CommitError::NotController),
        Some(code) => Err(CommitError::Remote(
            code,
            result.error_message.as_ref().map(|m| m.to_string()),
        )),
    }
}
