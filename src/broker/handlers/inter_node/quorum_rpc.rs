//! The quorum's RPCs on the controller listener: Vote, BeginQuorumEpoch, EndQuorumEpoch,
//! Fetch and FetchSnapshot of `__cluster_metadata-0` are decoded (kafka-protocol), converted ([`codec`]) and
//! handed to the quorum driver, whose answer is encoded back; DescribeQuorum (v0–v2, also on
//! the client listener) is answered from the driver's status. Malformed or foreign input is
//! answered with the protocol's error (`INCONSISTENT_CLUSTER_ID`, `INVALID_REQUEST`...) or
//! closes the connection, never a panic.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    self, Listener as QuorumListener, Node, ReplicaState,
};
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::drivers::quorum::codec::{self, METADATA_TOPIC};
use crate::broker::drivers::quorum::Answer;
use crate::broker::drivers::quorum_status::QuorumRole;
use crate::broker::shared::Broker;

/// How long an inbound quorum request waits for the driver.
const ANSWER_TIMEOUT: Duration = Duration::from_millis(5000);

/// Answers one quorum RPC (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot of
/// the metadata log, on the controller listener). `Err` closes the connection.
pub(crate) async fn answer(
    broker: &Broker,
    ctx: &RequestContext,
    request: RequestKind,
) -> Result<Option<ResponseKind>, String> {
    let response = answer_quorum(broker, &request).await;
    let mut response = response.ok_or_else(|| "no quorum answer".to_string())?;
    if let ResponseKind::Fetch(f) = &mut response {
        // The metadata topic is named before v13 and identified after.
        for t in &mut f.responses {
            if ctx.version >= 13 {
                t.topic = TopicName::default();
            } else {
                t.topic_id = uuid::Uuid::nil();
            }
        }
    }
    Ok(Some(response))
}

async fn answer_quorum(broker: &Broker, request: &RequestKind) -> Option<ResponseKind> {
    // A node that is its own quorum has no peers: its core refuses whoever asks (not a voter).
    let quorum = &broker.quorum;
    if let RequestKind::Fetch(f) = request {
        if !codec::is_metadata_fetch(f) {
            return codec::error_response(request, ResponseError::InvalidRequest);
        }
    }
    let (from, message) = match codec::decode_request(request, &broker.cluster_id) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(reason = %e.reason, code = ?e.code, "quorum request refused");
            return codec::error_response(request, e.code);
        }
    };
    let rx = quorum.request(from, message);
    match broker.io.timeout(ANSWER_TIMEOUT, rx).await {
        Some(Ok(Answer::Message(m, records))) => codec::encode_response(&m, records),
        Some(Ok(Answer::Error(code))) => codec::error_response(request, code),
        _ => codec::error_response(request, ResponseError::RequestTimedOut),
    }
}

/// DescribeQuorum from this node's status: the leader answers with every voter's progress;
/// another node answers NOT_LEADER_OR_FOLLOWER (the client listener forwards to the leader
/// first, see `forward`).
pub(crate) fn describe_quorum(
    broker: &Broker,
    ctx: &RequestContext,
    request: &DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    let version = ctx.version;
    // DESCRIBE on the cluster, as Kafka asks (relayed requests were checked where they came in).
    if !broker.authz(ctx).cluster(Operation::Describe) {
        return DescribeQuorumResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let status = broker.quorum_status();
    let asks_metadata = request.topics.iter().any(|t| {
        t.topic_name.0.as_str() == METADATA_TOPIC
            && t.partitions.iter().any(|p| p.partition_index == 0)
    });
    if !asks_metadata {
        return DescribeQuorumResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code());
    }
    let mut partition = describe_quorum_response::PartitionData::default().with_partition_index(0);
    if status.role != QuorumRole::Leader {
        partition = partition
            .with_error_code(ResponseError::NotLeaderOrFollower.code())
            .with_leader_id(BrokerId(status.leader.unwrap_or(-1)))
            .with_leader_epoch(status.epoch as i32);
    } else {
        let now = broker.io.clock.wall_ms();
        let state = |id: i32, end: u64, at: Option<i64>| {
            let mut s = ReplicaState::default()
                .with_replica_id(BrokerId(id))
                .with_log_end_offset(end as i64);
            if version >= 1 {
                // Kafka reports the leader's own fetch time as "now".
                let at = if id == status.node_id { Some(now) } else { at };
                s = s
                    .with_last_fetch_timestamp(at.unwrap_or(-1))
                    .with_last_caught_up_timestamp(at.unwrap_or(-1));
            }
            s
        };
        partition = partition
            .with_leader_id(BrokerId(status.node_id))
            .with_leader_epoch(status.epoch as i32)
            .with_high_watermark(status.high_watermark as i64)
            .with_current_voters(
                status
                    .replicas
                    .iter()
                    .filter(|r| r.voter)
                    .map(|r| state(r.node_id, r.end_offset, r.last_fetch_ms))
                    .collect(),
            )
            .with_observers(
                status
                    .replicas
                    .iter()
                    .filter(|r| !r.voter)
                    .map(|r| state(r.node_id, r.end_offset, r.last_fetch_ms))
                    .collect(),
            );
    }
    let mut response = DescribeQuorumResponse::default().with_topics(vec![
        describe_quorum_response::TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![partition]),
    ]);
    if version >= 2 {
        response = response.with_nodes(quorum_nodes(broker));
    }
    response
}

/// The voters' controller endpoints (DescribeQuorum v2's `Nodes`).
fn quorum_nodes(broker: &Broker) -> Vec<Node> {
    let name = broker
        .config
        .controller_listener_names
        .first()
        .cloned()
        .unwrap_or_else(|| "CONTROLLER".into());
    broker
        .config
        .controller_quorum_voters
        .iter()
        .filter(|v| v.id >= 0)
        .map(|v| {
            Node::default()
                .with_node_id(BrokerId(v.id))
                .with_listeners(vec![QuorumListener::default()
                    .with_name(StrBytes::from_string(name.clone()))
                    .with_host(StrBytes::from_string(v.host.clone()))
                    .with_port(v.port)])
        })
        .collect()
}
