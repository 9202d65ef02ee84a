//! Forwarding: a client request that changes metadata (or asks DescribeQuorum, or a producer
//! id: InitProducerId reserves ids in the metadata log), arriving at a
//! node that is not the active controller, is relayed to the quorum leader's controller
//! listener in an Envelope (KIP-590, `api::envelope`) and its answer returned to the client
//! (only the correlation id is rewritten). The envelope carries the client's frame byte for
//! byte (every version and field intact), who asked, and the controller epoch it was sent
//! for: a controller carries it out only in that epoch, so a relay that arrives late, after
//! this broker gave up on it, is refused rather than applied over what happened meanwhile.
//! While no controller is known, or the relay fails, the request waits for the next
//! controller (bounded by its own timeout; see [`deadline`]); past the bound it is answered
//! REQUEST_TIMED_OUT (`timed_out`). With an authorizer, a request is relayed only if this
//! node allows all of it (`Broker::relay_allowed`): the controller listener does not check
//! what arrives.
//!
//! Topics this broker creates on its own account (auto-creation on Metadata, as a producer
//! asks it; the offsets topic) go to the active controller as a CreateTopics request of
//! their own ([`create_topic`]), as Kafka's `AutoTopicCreationManager` sends them.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::broker::api::{envelope, Request};
use crate::broker::{errors::CommitError, peer, shared::Broker};
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
    ApiKey::AlterClientQuotas,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::UpdateFeatures,
    ApiKey::UnregisterBroker,
];

/// Whether requests of `key` go to the active controller (and may wait for one).
pub(crate) fn is_forwarded(key: ApiKey) -> bool {
    FORWARDED.contains(&key)
}

/// Whether this request goes to the active controller: a transactional InitProducerId is the
/// transaction coordinator's, answered where the client sent it.
pub(crate) fn is_forwarded_request(key: ApiKey, body: &RequestKind) -> bool {
    match body {
        RequestKind::InitProducerId(r) if r.transactional_id.is_some() => false,
        _ => is_forwarded(key),
    }
}

/// After a failed relay (connection refused by a dead controller, or an answer that it is no
/// longer the controller) with the same controller still named, the next try waits for a
/// controller change or this long, whichever comes first (Kafka's reconnect backoff).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// The relayed response frame (size prefix included), or `None` to handle the request here.
/// `request` was decoded on the client listener (so its version is one served).
///
/// Kafka's broker holds a forwarded request until a controller is known and retries it there
/// (`NodeToControllerChannelManager`): clients never see NOT_CONTROLLER from a broker during a
/// controller failover. Here the request waits, as a delayed operation bounded by
/// [`FORWARD_TIMEOUT`], on the quorum's controller changes: when no leader is known, when the
/// leader is this node but not active yet, or after a failed relay. `None` past the bound too:
/// the caller then answers REQUEST_TIMED_OUT ([`expired`]).
pub(crate) async fn forward(
    broker: &Broker,
    request: &Request<'_, Broker>,
    (peer, principal): (SocketAddr, &str),
    deadline: Duration,
) -> Option<BytesMut> {
    let quorum = &broker.quorum;
    let key = request.key;
    if !FORWARDED.contains(&key) {
        return None;
    }
    if !broker.relay_allowed(peer, principal, &request.body) {
        return None;
    }
    let mut changes = quorum.controller_changes();
    let mut shutdown = broker.shutdown_signal();
    loop {
        changes.borrow_and_update();
        let leader_side = if key == ApiKey::DescribeQuorum {
            quorum.status().leader == Some(quorum.node_id())
        } else {
            quorum.is_active()
        };
        if leader_side {
            return None;
        }
        let remaining = deadline.saturating_sub(broker.io.clock.monotonic());
        if remaining.is_zero() {
            tracing::debug!(?key, "no controller answered within the forwarding bound");
            return None;
        }
        // With no other controller to try yet (none known, or this node about to be active),
        // wait for the next change; after a failed try, at most the backoff.
        let mut wait = remaining;
        if let Some(controller) = quorum.leader_link() {
            let caller = (principal, peer.ip());
            let tried = tokio::select! {
                biased;
                r = relay(broker, controller, request, caller, remaining) => Some(r),
                // The controller changed while this one had the request: try the new one.
                _ = changes.changed() => None,
            };
            match tried {
                Some(Ok(out)) => return Some(out),
                Some(Err(why)) => {
                    if crate::planted!(broker.config, ForwardFailureAnsweredUnknownServerError) {
                        if let Some(out) = planted_unknown_server_error(request) {
                            return Some(out);
                        }
                    }
                    tracing::debug!(?key, leader = %controller.0.addr(), %why,
                        "forwarding to the controller failed; waiting for a controller");
                    wait = RETRY_BACKOFF.min(remaining);
                }
                None => continue,
            }
        }
        tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => return None,
            _ = changes.changed() => {}
            _ = broker.io.clock.sleep(wait) => {}
        }
    }
}

/// The planted bug `ForwardFailureAnsweredUnknownServerError`: the request answered
/// UNKNOWN_SERVER_ERROR (every topic or resource of it) instead of held for the next controller.
fn planted_unknown_server_error(request: &Request<'_, Broker>) -> Option<BytesMut> {
    let response = super::timed_out::error_response(
        &request.body,
        ResponseError::UnknownServerError,
        "forwarding to the controller failed",
    )?;
    let mut out = BytesMut::new();
    request.encode_answer(&mut out, &response).ok()?;
    Some(out)
}

/// Until when (monotonic) a request may be carried out, relayed or here: its own `timeout_ms`
/// where it has one (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders), at most the
/// forwarding bound, as Kafka's controller drops an event whose deadline passed. Past it the
/// request is answered REQUEST_TIMED_OUT and not carried out by this broker, so a client that
/// gave up and retried elsewhere does not see its first try applied later through this path.
/// (A relay already on the wire is fenced by its envelope's epoch instead.)
pub(crate) fn deadline(broker: &Broker, body: &RequestKind) -> Duration {
    let own = match body {
        RequestKind::CreateTopics(r) => r.timeout_ms,
        RequestKind::DeleteTopics(r) => r.timeout_ms,
        RequestKind::CreatePartitions(r) => r.timeout_ms,
        RequestKind::ElectLeaders(r) => r.timeout_ms,
        RequestKind::AlterPartitionReassignments(r) => r.timeout_ms,
        RequestKind::ListPartitionReassignments(r) => r.timeout_ms,
        _ => 0,
    };
    // 0 (or less) asks for no wait on the outcome, not for no bound.
    let bound = if own > 0 {
        FORWARD_TIMEOUT.min(Duration::from_millis(own as u64))
    } else {
        FORWARD_TIMEOUT
    };
    broker.io.clock.monotonic() + bound
}

/// Whether `deadline` ([`deadline`]) has passed.
pub(crate) fn expired(broker: &Broker, deadline: Duration) -> bool {
    broker.io.clock.monotonic() >= deadline
}

/// After a forwardable request was handled here as the active controller: whether its answer
/// (`response`, the whole frame) is NOT_CONTROLLER because this node lost the leadership
/// during the commit, with time left to try the next controller. Kafka's combined node
/// forwards to its own controller too and retries such an answer; so does this one, after the
/// quorum has published the change (or the backoff).
pub(crate) async fn lost_control_while_handling(
    broker: &Broker,
    request: &Request<'_, Broker>,
    response: &[u8],
    deadline: Duration,
) -> bool {
    let quorum = &broker.quorum;
    let (key, version) = (request.key, request.version);
    if !FORWARDED.contains(&key) || response.len() < 4 {
        return false;
    }
    let remaining = deadline.saturating_sub(broker.io.clock.monotonic());
    if remaining.is_zero() || !answered_not_controller(key, version, &response[4..]) {
        return false;
    }
    let mut changes = quorum.controller_changes();
    if quorum.is_active() {
        let _ = broker
            .io
            .timeout(RETRY_BACKOFF.min(remaining), changes.changed())
            .await;
    }
    true
}

/// One relay of `request` to the controller behind `link`, leader in `epoch`: its answer
/// (correlation id restored), or why to try again (no answer, or the controller says it is
/// not the active one, in that epoch or at all).
async fn relay(
    broker: &Broker,
    controller: (&peer::Link, u32),
    request: &Request<'_, Broker>,
    caller: (&str, IpAddr),
    limit: Duration,
) -> Result<BytesMut, String> {
    let (key, version, frame) = (request.key, request.version, &request.frame);
    let correlation = [frame[4], frame[5], frame[6], frame[7]];
    let response = call(broker, controller, frame, caller, limit)
        .await
        .map_err(|why| why.to_string())?;
    if answered_not_controller(key, version, &response) {
        return Err("the controller answered that it no longer is one".to_string());
    }
    let mut out = BytesMut::with_capacity(response.len() + 4);
    start_frame(&mut out);
    out.extend_from_slice(&correlation);
    out.extend_from_slice(&response[4..]);
    finish_frame(&mut out);
    Ok(out)
}

/// Sends `frame` (a request frame, no size prefix) in an envelope sealed for the controller
/// of `epoch` behind `link`, on behalf of `caller` (principal, address); its answer (the
/// inner response frame, correlation id first) within `limit`, or why not.
async fn call(
    broker: &Broker,
    (link, epoch): (&peer::Link, u32),
    frame: &[u8],
    (principal, client): (&str, IpAddr),
    limit: Duration,
) -> Result<Bytes, Failed> {
    let client_id = format!("weir-broker-{}", broker.config.node_id);
    let sealed =
        envelope::seal(frame, epoch, principal, client, &client_id).map_err(Failed::Other)?;
    let answer = match broker.io.timeout(limit, link.call(sealed)).await {
        Some(Ok(Ok(r))) => r,
        Some(Ok(Err(e))) => return Err(Failed::Other(e.to_string())),
        None => return Err(Failed::TimedOut),
        _ => return Err(Failed::Other("connection lost".to_string())),
    };
    match envelope::open_answer(answer).map_err(Failed::Other)? {
        Ok(inner) => Ok(inner),
        Err(ResponseError::NotController) => Err(Failed::Other(format!(
            "not the active controller of epoch {epoch}"
        ))),
        Err(code) => Err(Failed::Other(format!(
            "the controller refused the envelope: {code:?}"
        ))),
    }
}

/// Why a call to the controller brought no answer.
#[derive(Debug)]
enum Failed {
    TimedOut,
    Other(String),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::TimedOut => f.write_str("timed out"),
            Failed::Other(why) => f.write_str(why),
        }
    }
}

/// Asks the active controller (this node, or the leader it knows) to carry out `body`, a
/// request of this broker's own (auto-created topics, producer ids): its decoded answer,
/// within `limit`; NOT_CONTROLLER (or a timeout) when none is known or none answered.
pub(crate) async fn ask_controller(
    broker: &Broker,
    key: ApiKey,
    version: i16,
    body: &RequestKind,
    limit: Duration,
) -> Result<ResponseKind, CommitError> {
    let controller = broker
        .quorum
        .leader_link()
        .ok_or(CommitError::NotController)?;
    let client_id = format!("weir-broker-{}", broker.config.node_id);
    let frame = peer::encode_request(key, version, &client_id, body)
        .map_err(|e| CommitError::Storage(std::io::Error::other(e.to_string())))?;
    let own = (crate::acl::ANONYMOUS, controller.0.addr().ip());
    let response = call(broker, controller, &frame, own, limit)
        .await
        .map_err(|why| {
            tracing::debug!(?key, %why, "the controller did not carry out this broker's request");
            match why {
                Failed::TimedOut => CommitError::Timeout,
                Failed::Other(_) => CommitError::NotController,
            }
        })?;
    peer::decode_response(key, version, response).map_err(|_| CommitError::NotController)
}

/// Whether a relayed answer says its node is not the controller (NOT_CONTROLLER; for
/// DescribeQuorum NOT_LEADER_OR_FOLLOWER): then the request is retried at the next one.
/// An undecodable answer is passed on as it is.
fn answered_not_controller(key: ApiKey, version: i16, response: &[u8]) -> bool {
    let Ok(decoded) = peer::decode_response(key, version, Bytes::copy_from_slice(response)) else {
        return false;
    };
    let codes: Vec<i16> = match decoded {
        ResponseKind::CreateTopics(r) => r.topics.iter().map(|t| t.error_code).collect(),
        ResponseKind::DeleteTopics(r) => r.responses.iter().map(|t| t.error_code).collect(),
        ResponseKind::CreatePartitions(r) => r.results.iter().map(|t| t.error_code).collect(),
        ResponseKind::AlterConfigs(r) => r.responses.iter().map(|t| t.error_code).collect(),
        ResponseKind::IncrementalAlterConfigs(r) => {
            r.responses.iter().map(|t| t.error_code).collect()
        }
        ResponseKind::CreateAcls(r) => r.results.iter().map(|t| t.error_code).collect(),
        ResponseKind::DeleteAcls(r) => r.filter_results.iter().map(|t| t.error_code).collect(),
        ResponseKind::AlterUserScramCredentials(r) => {
            r.results.iter().map(|t| t.error_code).collect()
        }
        ResponseKind::AlterClientQuotas(r) => r.entries.iter().map(|e| e.error_code).collect(),
        ResponseKind::InitProducerId(r) => vec![r.error_code],
        ResponseKind::AlterPartitionReassignments(r) => std::iter::once(r.error_code)
            .chain(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
            .collect(),
        ResponseKind::ListPartitionReassignments(r) => vec![r.error_code],
        ResponseKind::UpdateFeatures(r) => vec![r.error_code],
        ResponseKind::UnregisterBroker(r) => vec![r.error_code],
        ResponseKind::ElectLeaders(r) => std::iter::once(r.error_code)
            .chain(
                r.replica_election_results
                    .iter()
                    .flat_map(|t| t.partition_result.iter().map(|p| p.error_code)),
            )
            .collect(),
        ResponseKind::DescribeQuorum(r) => {
            let mut codes = vec![r.error_code];
            for t in &r.topics {
                codes.extend(t.partitions.iter().map(|p| p.error_code));
            }
            return codes.contains(&ResponseError::NotLeaderOrFollower.code())
                || codes.contains(&ResponseError::NotController.code());
        }
        _ => return false,
    };
    codes.contains(&ResponseError::NotController.code())
}

/// Creates a topic through the active controller: here when this node is it (always on a
/// single node), else by a CreateTopics request to it. Its refusal comes back as the controller's
/// error code (TOPIC_ALREADY_EXISTS as [`ControllerError::TopicAlreadyExists`], so callers
/// that tolerate a race see the same error either way).
pub(crate) async fn create_topic(
    broker: &Broker,
    new: NewTopic,
    validate_only: bool,
) -> Result<(), CommitError> {
    let quorum = &broker.quorum;
    if quorum.is_active() {
        return broker.create_topic(new, validate_only).await;
    }
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
    let body = RequestKind::CreateTopics(request);
    let (key, version) = (ApiKey::CreateTopics, CREATE_TOPICS_VERSION);
    let ResponseKind::CreateTopics(answer) =
        ask_controller(broker, key, version, &body, FORWARD_TIMEOUT).await?
    else {
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
