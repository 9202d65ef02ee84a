//! The quorum core's messages as Kafka wire messages (kafka-protocol's `Vote`,
//! `BeginQuorumEpoch`, `EndQuorumEpoch` and `Fetch` of `__cluster_metadata-0`), both ways.
//! Nodes speak fixed versions to each other (Weir to Weir); any valid version is decoded.
//! A message that does not describe exactly the metadata partition, or carries nonsense
//! (negative epochs or offsets), is a [`WireError`] with the protocol's error code.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    begin_quorum_epoch_request, begin_quorum_epoch_response, end_quorum_epoch_request,
    end_quorum_epoch_response, fetch_request, fetch_response, fetch_snapshot_request,
    fetch_snapshot_response, vote_request, vote_response, ApiKey, BeginQuorumEpochRequest,
    BeginQuorumEpochResponse, BrokerId, EndQuorumEpochRequest, EndQuorumEpochResponse,
    FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, RequestKind,
    ResponseKind, TopicName, VoteRequest, VoteResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::raft::{self, Message, NodeId, OffsetAndEpoch, RaftError};

use super::batches;

pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Kafka's fixed topic id of `__cluster_metadata` (`Topic.CLUSTER_METADATA_TOPIC_ID`).
pub const METADATA_TOPIC_ID: Uuid = Uuid::from_u64_pair(0, 1);

pub const VOTE_VERSION: i16 = 2;
pub const BEGIN_QUORUM_EPOCH_VERSION: i16 = 1;
pub const END_QUORUM_EPOCH_VERSION: i16 = 1;
/// Fetch v13: topic ids, diverging epoch, current leader; replica id still top level.
pub const FETCH_VERSION: i16 = 13;
/// What one metadata fetch carries at most.
pub const FETCH_MAX_BYTES: usize = 1 << 20;
pub const FETCH_SNAPSHOT_VERSION: i16 = 0;
/// What one FetchSnapshot chunk carries at most (the request's `MaxBytes`).
pub const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;

/// Why an inbound message cannot go to the core: answered with `code` (or dropped).
#[derive(Clone, Debug, PartialEq)]
pub struct WireError {
    pub code: ResponseError,
    pub reason: String,
}

fn invalid(reason: impl Into<String>) -> WireError {
    WireError {
        code: ResponseError::InvalidRequest,
        reason: reason.into(),
    }
}

pub fn error_code(e: Option<RaftError>) -> i16 {
    match e {
        None => 0,
        Some(RaftError::FencedLeaderEpoch) => ResponseError::FencedLeaderEpoch.code(),
        Some(RaftError::UnknownLeaderEpoch) => ResponseError::UnknownLeaderEpoch.code(),
        Some(RaftError::NotLeaderOrFollower) => ResponseError::NotLeaderOrFollower.code(),
        Some(RaftError::InconsistentVoterSet) => ResponseError::InconsistentVoterSet.code(),
        Some(RaftError::InvalidRequest) => ResponseError::InvalidRequest.code(),
        Some(RaftError::SnapshotNotFound) => ResponseError::SnapshotNotFound.code(),
        Some(RaftError::PositionOutOfRange) => ResponseError::PositionOutOfRange.code(),
    }
}

/// A wire code as the core's error. `Err` for codes the core has no word for (the caller
/// drops the response: the core retries).
pub fn raft_error(code: i16) -> Result<Option<RaftError>, WireError> {
    let e = match code {
        0 => return Ok(None),
        c if c == ResponseError::FencedLeaderEpoch.code() => RaftError::FencedLeaderEpoch,
        c if c == ResponseError::UnknownLeaderEpoch.code() => RaftError::UnknownLeaderEpoch,
        c if c == ResponseError::NotLeaderOrFollower.code() => RaftError::NotLeaderOrFollower,
        c if c == ResponseError::InconsistentVoterSet.code() => RaftError::InconsistentVoterSet,
        c if c == ResponseError::InvalidRequest.code() => RaftError::InvalidRequest,
        c if c == ResponseError::SnapshotNotFound.code() => RaftError::SnapshotNotFound,
        c if c == ResponseError::PositionOutOfRange.code() => RaftError::PositionOutOfRange,
        other => {
            return Err(WireError {
                code: ResponseError::UnknownServerError,
                reason: format!("error code {other} in a quorum response"),
            })
        }
    };
    Ok(Some(e))
}

fn epoch(value: i32, what: &str) -> Result<raft::Epoch, WireError> {
    u32::try_from(value).map_err(|_| invalid(format!("negative {what} {value}")))
}

fn offset(value: i64, what: &str) -> Result<raft::Offset, WireError> {
    u64::try_from(value).map_err(|_| invalid(format!("negative {what} {value}")))
}

fn leader_id(value: i32) -> Option<NodeId> {
    (value >= 0).then_some(value)
}

fn wire_epoch(e: raft::Epoch) -> i32 {
    i32::try_from(e).unwrap_or(i32::MAX)
}

fn wire_offset(o: raft::Offset) -> i64 {
    i64::try_from(o).unwrap_or(i64::MAX)
}

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str(METADATA_TOPIC))
}

fn cluster(id: &str) -> Option<StrBytes> {
    Some(StrBytes::from_string(id.to_string()))
}

/// A request the core sends, as the wire request to node `to`. `None` for responses.
pub fn encode_request(
    message: &Message,
    cluster_id: &str,
    from: NodeId,
    to: NodeId,
) -> Option<(ApiKey, i16, RequestKind)> {
    let request = match message {
        Message::VoteRequest(v) => {
            let partition = vote_request::PartitionData::default()
                .with_partition_index(0)
                .with_replica_epoch(wire_epoch(v.candidate_epoch))
                .with_replica_id(BrokerId(v.candidate_id))
                .with_last_offset_epoch(wire_epoch(v.last_offset_epoch))
                .with_last_offset(wire_offset(v.last_offset))
                .with_pre_vote(v.pre_vote);
            let req = VoteRequest::default()
                .with_cluster_id(cluster(cluster_id))
                .with_voter_id(BrokerId(to))
                .with_topics(vec![vote_request::TopicData::default()
                    .with_topic_name(topic_name())
                    .with_partitions(vec![partition])]);
            (ApiKey::Vote, VOTE_VERSION, RequestKind::Vote(req))
        }
        Message::BeginQuorumEpochRequest(b) => {
            let partition = begin_quorum_epoch_request::PartitionData::default()
                .with_partition_index(0)
                .with_leader_id(BrokerId(b.leader_id))
                .with_leader_epoch(wire_epoch(b.leader_epoch));
            let req = BeginQuorumEpochRequest::default()
                .with_cluster_id(cluster(cluster_id))
                .with_voter_id(BrokerId(to))
                .with_topics(vec![begin_quorum_epoch_request::TopicData::default()
                    .with_topic_name(topic_name())
                    .with_partitions(vec![partition])]);
            (
                ApiKey::BeginQuorumEpoch,
                BEGIN_QUORUM_EPOCH_VERSION,
                RequestKind::BeginQuorumEpoch(req),
            )
        }
        Message::EndQuorumEpochRequest(e) => {
            let partition = end_quorum_epoch_request::PartitionData::default()
                .with_partition_index(0)
                .with_leader_id(BrokerId(e.leader_id))
                .with_leader_epoch(wire_epoch(e.leader_epoch))
                .with_preferred_candidates(
                    e.preferred_successors
                        .iter()
                        .map(|id| {
                            end_quorum_epoch_request::ReplicaInfo::default()
                                .with_candidate_id(BrokerId(*id))
                        })
                        .collect(),
                );
            let req = EndQuorumEpochRequest::default()
                .with_cluster_id(cluster(cluster_id))
                .with_topics(vec![end_quorum_epoch_request::TopicData::default()
                    .with_topic_name(topic_name())
                    .with_partitions(vec![partition])]);
            (
                ApiKey::EndQuorumEpoch,
                END_QUORUM_EPOCH_VERSION,
                RequestKind::EndQuorumEpoch(req),
            )
        }
        Message::FetchRequest(f) => {
            let partition = fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(wire_epoch(f.current_leader_epoch))
                .with_fetch_offset(wire_offset(f.fetch_offset))
                .with_last_fetched_epoch(wire_epoch(f.last_fetched_epoch))
                .with_log_start_offset(-1)
                .with_partition_max_bytes(FETCH_MAX_BYTES as i32);
            let req = FetchRequest::default()
                .with_cluster_id(cluster(cluster_id))
                .with_replica_id(BrokerId(from))
                .with_max_wait_ms(0)
                .with_min_bytes(0)
                .with_max_bytes(FETCH_MAX_BYTES as i32)
                .with_session_id(0)
                .with_session_epoch(-1)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic(topic_name())
                    .with_topic_id(METADATA_TOPIC_ID)
                    .with_partitions(vec![partition])]);
            (ApiKey::Fetch, FETCH_VERSION, RequestKind::Fetch(req))
        }
        Message::FetchSnapshotRequest(f) => {
            let partition = fetch_snapshot_request::PartitionSnapshot::default()
                .with_partition(0)
                .with_current_leader_epoch(wire_epoch(f.current_leader_epoch))
                .with_snapshot_id(
                    fetch_snapshot_request::SnapshotId::default()
                        .with_end_offset(wire_offset(f.snapshot_id.offset))
                        .with_epoch(wire_epoch(f.snapshot_id.epoch)),
                )
                .with_position(wire_offset(f.position));
            let req = FetchSnapshotRequest::default()
                .with_cluster_id(cluster(cluster_id))
                .with_replica_id(BrokerId(from))
                .with_max_bytes(SNAPSHOT_CHUNK_BYTES as i32)
                .with_topics(vec![fetch_snapshot_request::TopicSnapshot::default()
                    .with_name(topic_name())
                    .with_partitions(vec![partition])]);
            (
                ApiKey::FetchSnapshot,
                FETCH_SNAPSHOT_VERSION,
                RequestKind::FetchSnapshot(req),
            )
        }
        _ => return None,
    };
    Some(request)
}

/// Checks a request's cluster id (absent is accepted, as Kafka does for old versions).
fn check_cluster(found: &Option<StrBytes>, ours: &str) -> Result<(), WireError> {
    match found {
        Some(id) if id.as_str() != ours => Err(WireError {
            code: ResponseError::InconsistentClusterId,
            reason: format!("cluster id {} is not ours ({ours})", id.as_str()),
        }),
        _ => Ok(()),
    }
}

fn only<'a, T>(items: &'a [T], what: &str) -> Result<&'a T, WireError> {
    match items {
        [one] => Ok(one),
        _ => Err(invalid(format!(
            "{} {what} entries; the quorum has exactly one",
            items.len()
        ))),
    }
}

fn check_topic(name: &TopicName) -> Result<(), WireError> {
    if name.0.as_str() != METADATA_TOPIC {
        return Err(invalid(format!(
            "topic {} is not {METADATA_TOPIC}",
            name.0.as_str()
        )));
    }
    Ok(())
}

fn check_partition(index: i32) -> Result<(), WireError> {
    if index != 0 {
        return Err(invalid(format!("partition {index} of {METADATA_TOPIC}")));
    }
    Ok(())
}

/// Whether a Fetch is for the metadata partition (it goes to the quorum, not to a partition).
pub fn is_metadata_fetch(req: &FetchRequest) -> bool {
    req.topics
        .iter()
        .any(|t| t.topic_id == METADATA_TOPIC_ID || t.topic.0.as_str() == METADATA_TOPIC)
}

/// An inbound request as `(sender, message)` for the core.
pub fn decode_request(request: &RequestKind, ours: &str) -> Result<(NodeId, Message), WireError> {
    match request {
        RequestKind::Vote(req) => {
            check_cluster(&req.cluster_id, ours)?;
            let topic = only(&req.topics, "topic")?;
            check_topic(&topic.topic_name)?;
            let p = only(&topic.partitions, "partition")?;
            check_partition(p.partition_index)?;
            let message = raft::VoteRequest {
                candidate_epoch: epoch(p.replica_epoch, "candidate epoch")?,
                candidate_id: p.replica_id.0,
                last_offset_epoch: epoch(p.last_offset_epoch, "last offset epoch")?,
                last_offset: offset(p.last_offset, "last offset")?,
                pre_vote: p.pre_vote,
            };
            Ok((p.replica_id.0, Message::VoteRequest(message)))
        }
        RequestKind::BeginQuorumEpoch(req) => {
            check_cluster(&req.cluster_id, ours)?;
            let topic = only(&req.topics, "topic")?;
            check_topic(&topic.topic_name)?;
            let p = only(&topic.partitions, "partition")?;
            check_partition(p.partition_index)?;
            let message = raft::BeginQuorumEpochRequest {
                leader_epoch: epoch(p.leader_epoch, "leader epoch")?,
                leader_id: p.leader_id.0,
            };
            Ok((p.leader_id.0, Message::BeginQuorumEpochRequest(message)))
        }
        RequestKind::EndQuorumEpoch(req) => {
            check_cluster(&req.cluster_id, ours)?;
            let topic = only(&req.topics, "topic")?;
            check_topic(&topic.topic_name)?;
            let p = only(&topic.partitions, "partition")?;
            check_partition(p.partition_index)?;
            let mut successors: Vec<NodeId> = p.preferred_successors.clone();
            successors.extend(p.preferred_candidates.iter().map(|c| c.candidate_id.0));
            successors.dedup();
            if successors.len() > raft::MAX_VOTERS {
                return Err(invalid("more preferred successors than voters"));
            }
            let message = raft::EndQuorumEpochRequest {
                leader_epoch: epoch(p.leader_epoch, "leader epoch")?,
                leader_id: p.leader_id.0,
                preferred_successors: successors,
            };
            Ok((p.leader_id.0, Message::EndQuorumEpochRequest(message)))
        }
        RequestKind::Fetch(req) => {
            check_cluster(&req.cluster_id, ours)?;
            let replica = if req.replica_id.0 >= 0 {
                req.replica_id.0
            } else {
                req.replica_state.replica_id.0
            };
            if replica < 0 {
                return Err(invalid(
                    "a fetch of the metadata log from a consumer (replica id < 0)",
                ));
            }
            let topic = only(&req.topics, "topic")?;
            if topic.topic_id != METADATA_TOPIC_ID {
                check_topic(&topic.topic)?;
            }
            let p = only(&topic.partitions, "partition")?;
            check_partition(p.partition)?;
            let message = raft::FetchRequest {
                current_leader_epoch: epoch(p.current_leader_epoch, "current leader epoch")?,
                fetch_offset: offset(p.fetch_offset, "fetch offset")?,
                last_fetched_epoch: epoch(p.last_fetched_epoch, "last fetched epoch")?,
            };
            Ok((replica, Message::FetchRequest(message)))
        }
        RequestKind::FetchSnapshot(req) => {
            check_cluster(&req.cluster_id, ours)?;
            if req.replica_id.0 < 0 {
                return Err(invalid("a FetchSnapshot without a replica id"));
            }
            let topic = only(&req.topics, "topic")?;
            check_topic(&topic.name)?;
            let p = only(&topic.partitions, "partition")?;
            check_partition(p.partition)?;
            let message = raft::FetchSnapshotRequest {
                current_leader_epoch: epoch(p.current_leader_epoch, "current leader epoch")?,
                snapshot_id: OffsetAndEpoch {
                    offset: offset(p.snapshot_id.end_offset, "snapshot end offset")?,
                    epoch: epoch(p.snapshot_id.epoch, "snapshot epoch")?,
                },
                position: offset(p.position, "position")?,
            };
            Ok((req.replica_id.0, Message::FetchSnapshotRequest(message)))
        }
        _ => Err(invalid("not a quorum request")),
    }
}

/// A response the core sends, as the wire response. `records` holds the batches read for a
/// fetch (raw v2 batches from the log).
pub fn encode_response(message: &Message, records: Option<Bytes>) -> Option<ResponseKind> {
    let response = match message {
        Message::VoteResponse(v) => {
            let partition = vote_response::PartitionData::default()
                .with_partition_index(0)
                .with_error_code(error_code(v.error))
                .with_leader_id(BrokerId(v.leader_id.unwrap_or(-1)))
                .with_leader_epoch(wire_epoch(v.leader_epoch))
                .with_vote_granted(v.vote_granted);
            ResponseKind::Vote(VoteResponse::default().with_topics(
                vec![vote_response::TopicData::default()
                    .with_topic_name(topic_name())
                    .with_partitions(vec![partition])],
            ))
        }
        Message::BeginQuorumEpochResponse(b) => {
            let partition = begin_quorum_epoch_response::PartitionData::default()
                .with_partition_index(0)
                .with_error_code(error_code(b.error))
                .with_leader_id(BrokerId(b.leader_id.unwrap_or(-1)))
                .with_leader_epoch(wire_epoch(b.leader_epoch));
            ResponseKind::BeginQuorumEpoch(BeginQuorumEpochResponse::default().with_topics(vec![
                begin_quorum_epoch_response::TopicData::default()
                    .with_topic_name(topic_name())
                    .with_partitions(vec![partition]),
            ]))
        }
        Message::EndQuorumEpochResponse(e) => {
            let partition = end_quorum_epoch_response::PartitionData::default()
                .with_partition_index(0)
                .with_error_code(error_code(e.error))
                .with_leader_id(BrokerId(e.leader_id.unwrap_or(-1)))
                .with_leader_epoch(wire_epoch(e.leader_epoch));
            ResponseKind::EndQuorumEpoch(EndQuorumEpochResponse::default().with_topics(vec![
                end_quorum_epoch_response::TopicData::default()
                    .with_topic_name(topic_name())
                    .with_partitions(vec![partition]),
            ]))
        }
        Message::FetchResponse(f) => {
            let diverging = match f.diverging_epoch {
                Some(d) => fetch_response::EpochEndOffset::default()
                    .with_epoch(wire_epoch(d.epoch))
                    .with_end_offset(wire_offset(d.offset)),
                None => fetch_response::EpochEndOffset::default()
                    .with_epoch(-1)
                    .with_end_offset(-1),
            };
            let partition = fetch_response::PartitionData::default()
                .with_partition_index(0)
                .with_error_code(error_code(f.error))
                .with_high_watermark(f.high_watermark.map_or(-1, wire_offset))
                .with_last_stable_offset(-1)
                .with_log_start_offset(0)
                .with_diverging_epoch(diverging)
                .with_snapshot_id(match f.snapshot_id {
                    Some(id) => fetch_response::SnapshotId::default()
                        .with_end_offset(wire_offset(id.offset))
                        .with_epoch(wire_epoch(id.epoch)),
                    None => fetch_response::SnapshotId::default(),
                })
                .with_current_leader(
                    fetch_response::LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(f.leader_id.unwrap_or(-1)))
                        .with_leader_epoch(wire_epoch(f.leader_epoch)),
                )
                .with_records(Some(records.unwrap_or_default()));
            ResponseKind::Fetch(FetchResponse::default().with_responses(vec![
                fetch_response::FetchableTopicResponse::default()
                    .with_topic(topic_name())
                    .with_topic_id(METADATA_TOPIC_ID)
                    .with_partitions(vec![partition]),
            ]))
        }
        Message::FetchSnapshotResponse(f) => {
            let partition = fetch_snapshot_response::PartitionSnapshot::default()
                .with_index(0)
                .with_error_code(error_code(f.error))
                .with_snapshot_id(
                    fetch_snapshot_response::SnapshotId::default()
                        .with_end_offset(wire_offset(f.snapshot_id.offset))
                        .with_epoch(wire_epoch(f.snapshot_id.epoch)),
                )
                .with_current_leader(
                    fetch_snapshot_response::LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(f.leader_id.unwrap_or(-1)))
                        .with_leader_epoch(wire_epoch(f.leader_epoch)),
                )
                .with_size(wire_offset(f.size))
                .with_position(wire_offset(f.position))
                .with_unaligned_records(f.bytes.clone());
            ResponseKind::FetchSnapshot(FetchSnapshotResponse::default().with_topics(vec![
                fetch_snapshot_response::TopicSnapshot::default()
                    .with_name(topic_name())
                    .with_partitions(vec![partition]),
            ]))
        }
        _ => return None,
    };
    Some(response)
}

/// A wire answer to a request from the core, as a message for the core. The request restores
/// what the wire does not carry (a vote's pre-vote flag, a fetch's position).
pub fn decode_response(response: &ResponseKind, request: &Message) -> Result<Message, WireError> {
    match (response, request) {
        (ResponseKind::Vote(resp), Message::VoteRequest(req)) => {
            top_level(resp.error_code)?;
            let topic = only(&resp.topics, "topic")?;
            let p = only(&topic.partitions, "partition")?;
            Ok(Message::VoteResponse(raft::VoteResponse {
                error: raft_error(p.error_code)?,
                leader_epoch: epoch(p.leader_epoch, "leader epoch")?,
                leader_id: leader_id(p.leader_id.0),
                vote_granted: p.vote_granted,
                pre_vote: req.pre_vote,
            }))
        }
        (ResponseKind::BeginQuorumEpoch(resp), Message::BeginQuorumEpochRequest(_)) => {
            top_level(resp.error_code)?;
            let topic = only(&resp.topics, "topic")?;
            let p = only(&topic.partitions, "partition")?;
            Ok(Message::BeginQuorumEpochResponse(
                raft::BeginQuorumEpochResponse {
                    error: raft_error(p.error_code)?,
                    leader_epoch: epoch(p.leader_epoch, "leader epoch")?,
                    leader_id: leader_id(p.leader_id.0),
                },
            ))
        }
        (ResponseKind::EndQuorumEpoch(resp), Message::EndQuorumEpochRequest(_)) => {
            top_level(resp.error_code)?;
            let topic = only(&resp.topics, "topic")?;
            let p = only(&topic.partitions, "partition")?;
            Ok(Message::EndQuorumEpochResponse(
                raft::EndQuorumEpochResponse {
                    error: raft_error(p.error_code)?,
                    leader_epoch: epoch(p.leader_epoch, "leader epoch")?,
                    leader_id: leader_id(p.leader_id.0),
                },
            ))
        }
        (ResponseKind::Fetch(resp), Message::FetchRequest(req)) => {
            top_level(resp.error_code)?;
            let topic = only(&resp.responses, "topic")?;
            let p = only(&topic.partitions, "partition")?;
            check_partition(p.partition_index)?;
            let error = raft_error(p.error_code)?;
            let diverging_epoch = if p.diverging_epoch.epoch >= 0 {
                Some(OffsetAndEpoch {
                    epoch: epoch(p.diverging_epoch.epoch, "diverging epoch")?,
                    offset: offset(p.diverging_epoch.end_offset, "diverging end offset")?,
                })
            } else {
                None
            };
            let snapshot_id = if p.snapshot_id.epoch >= 0 && p.snapshot_id.end_offset >= 0 {
                Some(OffsetAndEpoch {
                    epoch: epoch(p.snapshot_id.epoch, "snapshot epoch")?,
                    offset: offset(p.snapshot_id.end_offset, "snapshot end offset")?,
                })
            } else {
                None
            };
            let records = match &p.records {
                Some(bytes) if !bytes.is_empty() => {
                    batches::parse(bytes).map_err(|e| invalid(format!("fetched records: {e}")))?
                }
                _ => Vec::new(),
            };
            Ok(Message::FetchResponse(raft::FetchResponse {
                error,
                leader_epoch: epoch(p.current_leader.leader_epoch, "leader epoch")?,
                leader_id: leader_id(p.current_leader.leader_id.0),
                high_watermark: (p.high_watermark >= 0).then_some(p.high_watermark as u64),
                diverging_epoch,
                snapshot_id,
                records,
                request: OffsetAndEpoch {
                    epoch: req.last_fetched_epoch,
                    offset: req.fetch_offset,
                },
            }))
        }
        (ResponseKind::FetchSnapshot(resp), Message::FetchSnapshotRequest(_)) => {
            top_level(resp.error_code)?;
            let topic = only(&resp.topics, "topic")?;
            let p = only(&topic.partitions, "partition")?;
            check_partition(p.index)?;
            Ok(Message::FetchSnapshotResponse(
                raft::FetchSnapshotResponse {
                    error: raft_error(p.error_code)?,
                    leader_epoch: epoch(p.current_leader.leader_epoch, "leader epoch")?,
                    leader_id: leader_id(p.current_leader.leader_id.0),
                    snapshot_id: OffsetAndEpoch {
                        offset: offset(p.snapshot_id.end_offset, "snapshot end offset")?,
                        epoch: epoch(p.snapshot_id.epoch, "snapshot epoch")?,
                    },
                    size: offset(p.size, "snapshot size")?,
                    position: offset(p.position, "position")?,
                    bytes: p.unaligned_records.clone(),
                },
            ))
        }
        _ => Err(invalid("a response that does not answer its request")),
    }
}

fn top_level(code: i16) -> Result<(), WireError> {
    if code == 0 {
        return Ok(());
    }
    Err(WireError {
        code: ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError),
        reason: format!("top-level error code {code}"),
    })
}

/// The wire answer to a quorum request that cannot reach the core (`WireError`): the
/// protocol's error code at the top level, everything else empty.
pub fn error_response(request: &RequestKind, code: ResponseError) -> Option<ResponseKind> {
    let code = code.code();
    Some(match request {
        RequestKind::Vote(_) => ResponseKind::Vote(VoteResponse::default().with_error_code(code)),
        RequestKind::BeginQuorumEpoch(_) => ResponseKind::BeginQuorumEpoch(
            BeginQuorumEpochResponse::default().with_error_code(code),
        ),
        RequestKind::EndQuorumEpoch(_) => {
            ResponseKind::EndQuorumEpoch(EndQuorumEpochResponse::default().with_error_code(code))
        }
        RequestKind::Fetch(_) => {
            ResponseKind::Fetch(FetchResponse::default().with_error_code(code))
        }
        RequestKind::FetchSnapshot(_) => {
            ResponseKind::FetchSnapshot(FetchSnapshotResponse::default().with_error_code(code))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::{Batch, Payload};
    use bytes::BytesMut;
    use kafka_protocol::messages::{RequestHeader, ResponseHeader};
    use kafka_protocol::protocol::{Decodable, Encodable};

    /// Encodes and decodes a request body as a peer would see it.
    fn through_wire_request(key: ApiKey, version: i16, req: &RequestKind) -> RequestKind {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        req.encode(&mut buf, version).unwrap();
        let mut bytes = buf.freeze();
        RequestHeader::decode(&mut bytes, key.request_header_version(version)).unwrap();
        RequestKind::decode(key, &mut bytes, version).unwrap()
    }

    fn through_wire_response(key: ApiKey, version: i16, resp: &ResponseKind) -> ResponseKind {
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .encode(&mut buf, key.response_header_version(version))
            .unwrap();
        resp.encode(&mut buf, version).unwrap();
        let mut bytes = buf.freeze();
        ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
        ResponseKind::decode(key, &mut bytes, version).unwrap()
    }

    fn round_trip_request(message: Message, sender: NodeId) {
        let (key, version, req) = encode_request(&message, "c", sender, 9).unwrap();
        let back = through_wire_request(key, version, &req);
        assert_eq!(
            decode_request(&back, "c").unwrap(),
            (sender, message.clone())
        );
        let e = decode_request(&back, "other").unwrap_err();
        assert_eq!(e.code, ResponseError::InconsistentClusterId);
    }

    fn round_trip_response(response: Message, request: Message, records: Option<Bytes>) {
        let (key, version, _) = encode_request(&request, "c", 1, 2).unwrap();
        let wire = encode_response(&response, records).unwrap();
        let back = through_wire_response(key, version, &wire);
        assert_eq!(decode_response(&back, &request).unwrap(), response);
    }

    #[test]
    fn every_request_round_trips() {
        round_trip_request(
            Message::VoteRequest(raft::VoteRequest {
                candidate_epoch: 7,
                candidate_id: 2,
                last_offset_epoch: 5,
                last_offset: 120,
                pre_vote: true,
            }),
            2,
        );
        round_trip_request(
            Message::BeginQuorumEpochRequest(raft::BeginQuorumEpochRequest {
                leader_epoch: 3,
                leader_id: 1,
            }),
            1,
        );
        round_trip_request(
            Message::EndQuorumEpochRequest(raft::EndQuorumEpochRequest {
                leader_epoch: 3,
                leader_id: 1,
                preferred_successors: vec![3, 2],
            }),
            1,
        );
        round_trip_request(
            Message::FetchRequest(raft::FetchRequest {
                current_leader_epoch: 4,
                fetch_offset: 17,
                last_fetched_epoch: 3,
            }),
            5,
        );
        round_trip_request(
            Message::FetchSnapshotRequest(raft::FetchSnapshotRequest {
                current_leader_epoch: 4,
                snapshot_id: OffsetAndEpoch {
                    epoch: 3,
                    offset: 900,
                },
                position: 4096,
            }),
            5,
        );
    }

    #[test]
    fn snapshot_messages_round_trip() {
        let id = OffsetAndEpoch {
            epoch: 3,
            offset: 900,
        };
        let fetch = raft::FetchRequest {
            current_leader_epoch: 4,
            fetch_offset: 10,
            last_fetched_epoch: 2,
        };
        // A fetch below the leader's log start is answered with the snapshot to load.
        round_trip_response(
            Message::FetchResponse(raft::FetchResponse {
                error: None,
                leader_epoch: 4,
                leader_id: Some(1),
                high_watermark: Some(950),
                diverging_epoch: None,
                snapshot_id: Some(id),
                records: vec![],
                request: OffsetAndEpoch {
                    epoch: 2,
                    offset: 10,
                },
            }),
            Message::FetchRequest(fetch),
            None,
        );
        let request = Message::FetchSnapshotRequest(raft::FetchSnapshotRequest {
            current_leader_epoch: 4,
            snapshot_id: id,
            position: 5,
        });
        for (error, bytes) in [
            (None, Bytes::from_static(b"chunk")),
            (Some(RaftError::SnapshotNotFound), Bytes::new()),
            (Some(RaftError::PositionOutOfRange), Bytes::new()),
        ] {
            round_trip_response(
                Message::FetchSnapshotResponse(raft::FetchSnapshotResponse {
                    error,
                    leader_epoch: 4,
                    leader_id: Some(1),
                    snapshot_id: id,
                    size: 70,
                    position: 5,
                    bytes,
                }),
                request.clone(),
                None,
            );
        }
        // Nonsense is refused with the protocol's error, never a panic.
        let (_, _, wire) = encode_request(&request, "c", 2, 1).unwrap();
        let RequestKind::FetchSnapshot(mut bad) = wire else {
            unreachable!()
        };
        bad.topics[0].partitions[0].position = -1;
        let e = decode_request(&RequestKind::FetchSnapshot(bad.clone()), "c").unwrap_err();
        assert_eq!(e.code, ResponseError::InvalidRequest);
        bad.topics[0].partitions[0].position = 0;
        bad.topics[0].partitions[0].partition = 3;
        assert!(decode_request(&RequestKind::FetchSnapshot(bad), "c").is_err());
    }

    #[test]
    fn every_response_round_trips() {
        let vote = raft::VoteRequest {
            candidate_epoch: 7,
            candidate_id: 2,
            last_offset_epoch: 5,
            last_offset: 120,
            pre_vote: false,
        };
        for (granted, error, leader) in [
            (true, None, None),
            (false, Some(RaftError::FencedLeaderEpoch), Some(3)),
        ] {
            round_trip_response(
                Message::VoteResponse(raft::VoteResponse {
                    error,
                    leader_epoch: 7,
                    leader_id: leader,
                    vote_granted: granted,
                    pre_vote: false,
                }),
                Message::VoteRequest(vote.clone()),
                None,
            );
        }
        round_trip_response(
            Message::BeginQuorumEpochResponse(raft::BeginQuorumEpochResponse {
                error: Some(RaftError::InconsistentVoterSet),
                leader_epoch: 2,
                leader_id: Some(1),
            }),
            Message::BeginQuorumEpochRequest(raft::BeginQuorumEpochRequest {
                leader_epoch: 2,
                leader_id: 1,
            }),
            None,
        );
        round_trip_response(
            Message::EndQuorumEpochResponse(raft::EndQuorumEpochResponse {
                error: None,
                leader_epoch: 2,
                leader_id: None,
            }),
            Message::EndQuorumEpochRequest(raft::EndQuorumEpochRequest {
                leader_epoch: 2,
                leader_id: 1,
                preferred_successors: vec![],
            }),
            None,
        );
        let fetch = raft::FetchRequest {
            current_leader_epoch: 4,
            fetch_offset: 10,
            last_fetched_epoch: 3,
        };
        let data = batches::data_batch(&[b"{\"a\":1}".as_slice(), b"{}".as_slice()], 0);
        let leader_change = Batch {
            base_offset: 10,
            epoch: 4,
            count: 1,
            payload: Payload::LeaderChange {
                leader: 1,
                voters: vec![1, 2, 3],
            },
        };
        let mut raw = batches::encode(&leader_change, 0);
        let mut second = batches::encode(
            &Batch {
                base_offset: 11,
                epoch: 4,
                count: 2,
                payload: Payload::Data(data.into()),
            },
            0,
        );
        raw.append(&mut second);
        let records = batches::parse(&raw).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0], leader_change);
        round_trip_response(
            Message::FetchResponse(raft::FetchResponse {
                error: None,
                leader_epoch: 4,
                leader_id: Some(1),
                high_watermark: Some(9),
                diverging_epoch: None,
                snapshot_id: None,
                records,
                request: OffsetAndEpoch {
                    epoch: 3,
                    offset: 10,
                },
            }),
            Message::FetchRequest(fetch.clone()),
            Some(Bytes::from(raw)),
        );
        round_trip_response(
            Message::FetchResponse(raft::FetchResponse {
                error: None,
                leader_epoch: 4,
                leader_id: Some(1),
                high_watermark: Some(9),
                diverging_epoch: Some(OffsetAndEpoch {
                    epoch: 2,
                    offset: 8,
                }),
                snapshot_id: None,
                records: vec![],
                request: OffsetAndEpoch {
                    epoch: 3,
                    offset: 10,
                },
            }),
            Message::FetchRequest(fetch.clone()),
            None,
        );
        round_trip_response(
            Message::FetchResponse(raft::FetchResponse {
                error: Some(RaftError::NotLeaderOrFollower),
                leader_epoch: 5,
                leader_id: None,
                high_watermark: None,
                diverging_epoch: None,
                snapshot_id: None,
                records: vec![],
                request: OffsetAndEpoch {
                    epoch: 3,
                    offset: 10,
                },
            }),
            Message::FetchRequest(fetch),
            None,
        );
    }

    #[test]
    fn nonsense_is_an_error_not_a_panic() {
        let (_, _, req) = encode_request(
            &Message::FetchRequest(raft::FetchRequest {
                current_leader_epoch: 1,
                fetch_offset: 0,
                last_fetched_epoch: 0,
            }),
            "c",
            1,
            2,
        )
        .unwrap();
        let RequestKind::Fetch(mut fetch) = req else {
            unreachable!()
        };
        fetch.topics[0].partitions[0].fetch_offset = -5;
        assert!(decode_request(&RequestKind::Fetch(fetch.clone()), "c").is_err());
        fetch.topics[0].partitions[0].fetch_offset = 0;
        fetch.topics[0].partitions[0].partition = 3;
        assert!(decode_request(&RequestKind::Fetch(fetch.clone()), "c").is_err());
        fetch.topics[0].partitions.clear();
        assert!(decode_request(&RequestKind::Fetch(fetch.clone()), "c").is_err());
        fetch.replica_id = BrokerId(-1);
        assert!(decode_request(&RequestKind::Fetch(fetch), "c").is_err());
        let garbage = ResponseKind::Fetch(FetchResponse::default().with_responses(vec![
            fetch_response::FetchableTopicResponse::default().with_partitions(vec![
                fetch_response::PartitionData::default()
                    .with_records(Some(Bytes::from_static(b"not a batch at all, no"))),
            ]),
        ]));
        let request = Message::FetchRequest(raft::FetchRequest {
            current_leader_epoch: 1,
            fetch_offset: 0,
            last_fetched_epoch: 0,
        });
        assert!(decode_response(&garbage, &request).is_err());
    }
}
