//! A classic consumer-group member's side of the protocol, as Kafka's Java consumer speaks it:
//! JoinGroup (with KIP-394's two-step join), SyncGroup, Heartbeat, LeaveGroup, member commits
//! (OffsetCommit with a generation), and the client-side `range` assignor with the consumer
//! protocol's subscription and assignment encodings. The loop that drives these calls (when to
//! heartbeat, rejoin, fetch and commit) belongs to the caller: the simulator's group workload
//! runs one per member.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};

use super::{check, name, Client, ClientError, Result};
use kafka_protocol::error::ResponseError;

/// The protocol type of consumer groups, and the one assignor this client offers.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";
pub const RANGE_ASSIGNOR: &str = "range";

const JOIN_GROUP_VERSION: i16 = 5;
const SYNC_GROUP_VERSION: i16 = 3;
const HEARTBEAT_VERSION: i16 = 3;
const LEAVE_GROUP_VERSION: i16 = 3;
const MEMBER_COMMIT_VERSION: i16 = 8;
/// The consumer protocol's subscription and assignment versions this client writes (v0: topics
/// and user data; what every broker and assignor reads).
const CONSUMER_PROTOCOL_VERSION: i16 = 0;
/// Bound on the partitions of one decoded assignment (a hostile or broken leader).
const MAX_ASSIGNED: usize = 100_000;

/// A completed JoinGroup: this member's id and generation; the member list if it leads.
#[derive(Clone, Debug)]
pub struct Joined {
    pub member_id: String,
    pub generation: i32,
    pub leader: String,
    pub protocol: Option<String>,
    /// (member id, subscription metadata): only the leader gets them.
    pub members: Vec<(String, Bytes)>,
}

impl Joined {
    pub fn is_leader(&self) -> bool {
        self.leader == self.member_id
    }
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The consumer protocol's subscription bytes for `topics`.
pub fn encode_subscription(topics: &[&str]) -> Bytes {
    let sub = ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| text(t)).collect())
        .with_user_data(None);
    versioned(&sub)
}

/// The topics of a subscription; `None` if it does not decode.
pub fn decode_subscription(bytes: &[u8]) -> Option<Vec<String>> {
    let mut buf = Bytes::copy_from_slice(bytes);
    let version = read_version(&mut buf)?;
    let sub = ConsumerProtocolSubscription::decode(&mut buf, version).ok()?;
    Some(sub.topics.iter().map(|t| t.to_string()).collect())
}

/// The consumer protocol's assignment bytes for `partitions` of `topic`.
pub fn encode_assignment(partitions: &BTreeMap<String, Vec<i32>>) -> Bytes {
    let assignment = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            partitions
                .iter()
                .map(|(t, ps)| {
                    AssignedTopic::default()
                        .with_topic(name(t))
                        .with_partitions(ps.clone())
                })
                .collect(),
        )
        .with_user_data(None);
    versioned(&assignment)
}

/// The (topic → partitions) of an assignment. Empty bytes are an empty assignment (the leader
/// gave this member nothing); bytes that do not decode are an error.
pub fn decode_assignment(bytes: &[u8]) -> Result<BTreeMap<String, Vec<i32>>> {
    let mut out = BTreeMap::new();
    if bytes.is_empty() {
        return Ok(out);
    }
    let bad = || ClientError::Protocol("undecodable consumer assignment".into());
    let mut buf = Bytes::copy_from_slice(bytes);
    let version = read_version(&mut buf).ok_or_else(bad)?;
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version).map_err(|_| bad())?;
    let total: usize = assignment
        .assigned_partitions
        .iter()
        .map(|t| t.partitions.len())
        .sum();
    if total > MAX_ASSIGNED {
        return Err(bad());
    }
    for t in assignment.assigned_partitions {
        let list: &mut Vec<i32> = out.entry(t.topic.to_string()).or_default();
        list.extend(t.partitions);
        list.sort_unstable();
        list.dedup();
    }
    Ok(out)
}

fn versioned<M: Encodable>(message: &M) -> Bytes {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&CONSUMER_PROTOCOL_VERSION.to_be_bytes());
    // Encoding a message built here at a version it supports cannot fail.
    message
        .encode(&mut buf, CONSUMER_PROTOCOL_VERSION)
        .expect("consumer protocol message encodes");
    buf.freeze()
}

/// The leading version of a consumer-protocol blob, clamped to what the crate decodes (newer
/// versions only add fields at the end, which Kafka's readers also skip).
fn read_version(buf: &mut Bytes) -> Option<i16> {
    if buf.len() < 2 {
        return None;
    }
    let v = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = bytes::Buf::get_i16(buf);
    (v >= 0).then_some(v.min(3))
}

/// Kafka's `RangeAssignor`: per topic, the subscribed members sorted by member id each take a
/// contiguous range, the first `partitions % members` one partition more.
pub fn range_assign(
    members: &[(String, Vec<String>)],
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<i32>>> = members
        .iter()
        .map(|(id, _)| (id.clone(), BTreeMap::new()))
        .collect();
    for (topic, &count) in partition_counts {
        let mut subscribed: Vec<&str> = members
            .iter()
            .filter(|(_, topics)| topics.iter().any(|t| t == topic))
            .map(|(id, _)| id.as_str())
            .collect();
        subscribed.sort_unstable();
        subscribed.dedup();
        if subscribed.is_empty() || count <= 0 {
            continue;
        }
        let n = subscribed.len() as i32;
        let (per, extra) = (count / n, count % n);
        for (i, id) in subscribed.iter().enumerate() {
            let i = i as i32;
            let start = i * per + i.min(extra);
            let len = per + i32::from(i < extra);
            if len > 0 {
                out.get_mut(*id)
                    .expect("every subscribed member has an entry")
                    .insert(topic.clone(), (start..start + len).collect());
            }
        }
    }
    out
}

impl Client {
    /// Like `call`, bounded by `timeout` instead of the client's: a JoinGroup stays parked at
    /// the coordinator for up to the rebalance timeout.
    async fn call_within<R: Request>(
        &mut self,
        request: &R,
        ours: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let api = ApiKey::try_from(R::KEY).map_err(|_| ClientError::Protocol("api key".into()))?;
        let version = self.conn.version(api, ours)?;
        self.io
            .timeout(timeout, self.conn.call(request, version))
            .await
            .ok_or(ClientError::Timeout)?
    }

    /// Joins `group` (an empty `member_id` for a new member), subscribing to `topics` with the
    /// range assignor. A new member is handed an id first (MEMBER_ID_REQUIRED, KIP-394) and
    /// joins again with it, as the Java consumer does. The call waits for the rebalance, so it
    /// is bounded by the rebalance timeout plus the client's own.
    pub async fn join_group(
        &mut self,
        group: &str,
        member_id: &str,
        session_timeout_ms: i32,
        rebalance_timeout_ms: i32,
        topics: &[&str],
    ) -> Result<Joined> {
        let metadata = encode_subscription(topics);
        let wait = self.timeout + Duration::from_millis(rebalance_timeout_ms.max(0) as u64);
        let mut member_id = member_id.to_string();
        // At most two rounds: the id-less join, then the join with the minted id.
        for _round in 0..2 {
            let request = JoinGroupRequest::default()
                .with_group_id(group_id(group))
                .with_session_timeout_ms(session_timeout_ms)
                .with_rebalance_timeout_ms(rebalance_timeout_ms)
                .with_member_id(text(&member_id))
                .with_group_instance_id(None)
                .with_protocol_type(text(CONSUMER_PROTOCOL_TYPE))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(text(RANGE_ASSIGNOR))
                    .with_metadata(metadata.clone())]);
            let response = self.call_within(&request, JOIN_GROUP_VERSION, wait).await?;
            if ResponseError::try_from_code(response.error_code)
                == Some(ResponseError::MemberIdRequired)
                && !response.member_id.is_empty()
            {
                member_id = response.member_id.to_string();
                continue;
            }
            check(response.error_code, None)?;
            return Ok(Joined {
                member_id: response.member_id.to_string(),
                generation: response.generation_id,
                leader: response.leader.to_string(),
                protocol: response.protocol_name.map(|p| p.to_string()),
                members: response
                    .members
                    .into_iter()
                    .map(|m| (m.member_id.to_string(), m.metadata))
                    .collect(),
            });
        }
        Err(ClientError::Protocol(
            "JoinGroup asked for a member id twice".into(),
        ))
    }

    /// Sends this member's SyncGroup (the leader's carries every member's assignment) and
    /// returns its own assignment bytes. Bounded like a join: the coordinator parks followers
    /// until the leader's assignment is stored.
    pub async fn sync_group(
        &mut self,
        group: &str,
        joined: &Joined,
        assignments: &BTreeMap<String, Bytes>,
        rebalance_timeout_ms: i32,
    ) -> Result<Bytes> {
        let request = SyncGroupRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(joined.generation)
            .with_member_id(text(&joined.member_id))
            .with_group_instance_id(None)
            .with_protocol_type(Some(text(CONSUMER_PROTOCOL_TYPE)))
            .with_protocol_name(joined.protocol.as_deref().map(text))
            .with_assignments(
                assignments
                    .iter()
                    .map(|(id, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(text(id))
                            .with_assignment(a.clone())
                    })
                    .collect(),
            );
        let wait = self.timeout + Duration::from_millis(rebalance_timeout_ms.max(0) as u64);
        let response = self.call_within(&request, SYNC_GROUP_VERSION, wait).await?;
        check(response.error_code, None)?;
        Ok(response.assignment)
    }

    pub async fn heartbeat(&mut self, group: &str, generation: i32, member_id: &str) -> Result<()> {
        let request = HeartbeatRequest::default()
            .with_group_id(group_id(group))
            .with_generation_id(generation)
            .with_member_id(text(member_id))
            .with_group_instance_id(None);
        let response = self.call(&request, HEARTBEAT_VERSION).await?;
        check(response.error_code, None)
    }

    pub async fn leave_group(&mut self, group: &str, member_id: &str) -> Result<()> {
        let request = LeaveGroupRequest::default()
            .with_group_id(group_id(group))
            .with_members(vec![MemberIdentity::default()
                .with_member_id(text(member_id))
                .with_group_instance_id(None)]);
        let response = self.call(&request, LEAVE_GROUP_VERSION).await?;
        check(response.error_code, None)?;
        for m in &response.members {
            check(m.error_code, None)?;
        }
        Ok(())
    }

    /// Commits offsets as member `member_id` of `generation` (fenced by the coordinator, unlike
    /// the admin commit of [`Client::commit_offsets`]): (partition, offset, leader epoch of
    /// the record before it, -1 if unknown). The first partition error fails it.
    pub async fn commit_member_offsets(
        &mut self,
        group: &str,
        generation: i32,
        member_id: &str,
        topic: &str,
        offsets: &[(i32, i64, i32)],
    ) -> Result<()> {
        self.commit_as(
            group,
            generation,
            member_id,
            topic,
            offsets,
            MEMBER_COMMIT_VERSION,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(ids: &[&str]) -> Vec<(String, Vec<String>)> {
        ids.iter()
            .map(|id| (id.to_string(), vec!["t".to_string()]))
            .collect()
    }

    #[test]
    fn range_gives_the_first_members_the_extra_partitions() {
        let counts = BTreeMap::from([("t".to_string(), 7)]);
        let out = range_assign(&members(&["c", "a", "b"]), &counts);
        assert_eq!(out["a"]["t"], vec![0, 1, 2]);
        assert_eq!(out["b"]["t"], vec![3, 4]);
        assert_eq!(out["c"]["t"], vec![5, 6]);
    }

    #[test]
    fn range_leaves_surplus_members_empty_and_skips_unsubscribed() {
        let counts = BTreeMap::from([("t".to_string(), 2), ("u".to_string(), 3)]);
        let out = range_assign(&members(&["a", "b", "c"]), &counts);
        assert_eq!(out["a"]["t"], vec![0]);
        assert_eq!(out["b"]["t"], vec![1]);
        assert!(out["c"].is_empty());
        assert!(out.values().all(|m| !m.contains_key("u")));
    }

    #[test]
    fn subscription_and_assignment_round_trip() {
        let sub = encode_subscription(&["events", "other"]);
        assert_eq!(
            decode_subscription(&sub),
            Some(vec!["events".to_string(), "other".to_string()])
        );
        // The broker's own reader agrees on the layout.
        assert_eq!(
            crate::group::records::subscribed_topics(&sub),
            Some(vec!["events".to_string(), "other".to_string()])
        );
        let given = BTreeMap::from([("events".to_string(), vec![2, 0])]);
        let decoded = decode_assignment(&encode_assignment(&given)).unwrap();
        assert_eq!(decoded["events"], vec![0, 2]);
        assert!(decode_assignment(&[]).unwrap().is_empty());
        assert!(decode_assignment(&[0, 0, 0xff]).is_err());
    }
}
