//! A consumer-protocol (KIP-848) group member's side, as Kafka's Java consumer speaks it with
//! `group.protocol=consumer`: ConsumerGroupHeartbeat v1 (the member id is made up by the client,
//! KIP-1082), the server-side assignor, and OffsetCommit v9 carrying the member epoch.
//!
//! [`Membership`] is the member's state machine, pure (no I/O, no clock): what the next heartbeat
//! says, what an answer changes (which partitions to revoke, which are new), and what an error
//! means (fenced: drop everything and rejoin at epoch 0; otherwise retry). The loop that fetches,
//! commits and decides when to heartbeat belongs to the caller: the simulator's group workload
//! runs one per member. Revocation order is the caller's duty and the protocol's point: commit
//! what it processed of a revoked partition, drop it, and only then heartbeat (which tells the
//! coordinator the partition is free for its next owner).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{check, name, Client, ClientError, Result};
use crate::io::Io;

/// v1: client-made member ids (what librdkafka and the Java consumer speak).
const CONSUMER_GROUP_HEARTBEAT_VERSION: i16 = 1;
/// v9: the generation field carries the member epoch of a consumer-protocol member.
const MEMBER_EPOCH_COMMIT_VERSION: i16 = 9;
/// Member epoch sentinels (KIP-848).
pub const JOIN_EPOCH: i32 = 0;
pub const LEAVE_EPOCH: i32 = -1;
/// Bound on the partitions of one answer (a broken coordinator).
const MAX_ASSIGNED: usize = 100_000;

/// Partitions by topic id: what a member holds or is told to hold.
pub type Owned = BTreeMap<Uuid, BTreeSet<i32>>;

/// A member id as KIP-1082 asks: a random UUID the consumer makes up once and keeps for its
/// lifetime (across fencing and rejoining; a new process makes a new one).
pub fn new_member_id(io: &Io) -> String {
    let bits = ((io.rng.next_u64() as u128) << 64) | io.rng.next_u64() as u128;
    uuid::Builder::from_random_bytes(bits.to_be_bytes())
        .into_uuid()
        .to_string()
}

/// One ConsumerGroupHeartbeat. `None` fields are "unchanged since the last heartbeat".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    pub group: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub rebalance_timeout_ms: Option<i32>,
    pub topics: Option<Vec<String>>,
    pub assignor: Option<String>,
    pub owned: Option<Owned>,
}

/// What a ConsumerGroupHeartbeat answered (without error).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's whole assignment; `None`: unchanged.
    pub assignment: Option<Owned>,
}

/// What an answer asks of the member, in this order: commit and drop `revoked`, then start
/// consuming `gained` (from the committed offsets), then heartbeat at once to acknowledge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reconcile {
    pub revoked: Owned,
    pub gained: Owned,
}

impl Reconcile {
    pub fn is_empty(&self) -> bool {
        self.revoked.is_empty() && self.gained.is_empty()
    }
}

/// What a failed heartbeat or commit means for the member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    /// Fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): its partitions may already be someone
    /// else's. Drop them without committing and rejoin at epoch 0 with the same member id.
    Fenced,
    /// A commit's epoch is behind (STALE_MEMBER_EPOCH): heartbeat now, then commit again.
    Refresh,
    /// Coordinator trouble or another broker error: keep everything, retry after a pause.
    Retry,
    /// The connection is gone or timed out: reconnect, then send a full heartbeat.
    Reconnect,
}

pub fn on_error(e: &ClientError) -> OnError {
    match e {
        ClientError::Kafka(ResponseError::FencedMemberEpoch, _)
        | ClientError::Kafka(ResponseError::UnknownMemberId, _) => OnError::Fenced,
        ClientError::Kafka(ResponseError::StaleMemberEpoch, _) => OnError::Refresh,
        ClientError::Kafka(_, _) => OnError::Retry,
        ClientError::Io(_) | ClientError::Timeout | ClientError::Protocol(_) => OnError::Reconnect,
    }
}

/// One consumer's membership of one group.
#[derive(Clone, Debug)]
pub struct Membership {
    group: String,
    member_id: String,
    topics: Vec<String>,
    assignor: Option<String>,
    rebalance_timeout_ms: i32,
    /// 0 until the coordinator answers the join.
    epoch: i32,
    owned: Owned,
    /// As the coordinator last said (until then, Kafka's default).
    interval_ms: u64,
    /// The next heartbeat carries every field (joining, or after an error).
    full: bool,
    /// An assignment was reconciled: acknowledge it without waiting for the interval.
    ack_due: bool,
}

impl Membership {
    pub fn new(
        group: &str,
        member_id: &str,
        topics: &[&str],
        assignor: Option<&str>,
        rebalance_timeout_ms: i32,
    ) -> Membership {
        Membership {
            group: group.to_string(),
            member_id: member_id.to_string(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            assignor: assignor.map(str::to_string),
            rebalance_timeout_ms,
            epoch: JOIN_EPOCH,
            owned: Owned::new(),
            interval_ms: 5000,
            full: true,
            ack_due: false,
        }
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The epoch commits carry; 0 while (re)joining.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    pub fn is_joined(&self) -> bool {
        self.epoch > JOIN_EPOCH
    }

    pub fn owned(&self) -> &Owned {
        &self.owned
    }

    /// The partitions of `topic` it owns.
    pub fn owned_partitions(&self, topic: Uuid) -> Vec<i32> {
        self.owned
            .get(&topic)
            .map(|ps| ps.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Whether a heartbeat is due `since_ms` after the last one was answered.
    pub fn heartbeat_due(&self, since_ms: u64) -> bool {
        !self.is_joined() || self.ack_due || since_ms >= self.interval_ms
    }

    /// The next heartbeat. It always reports what the member owns: the coordinator frees a
    /// revoked partition only once a heartbeat leaves it out.
    pub fn heartbeat(&self) -> Heartbeat {
        let full = self.full || !self.is_joined();
        Heartbeat {
            group: self.group.clone(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            rebalance_timeout_ms: full.then_some(self.rebalance_timeout_ms),
            topics: full.then(|| self.topics.clone()),
            assignor: if full { self.assignor.clone() } else { None },
            owned: Some(self.owned.clone()),
        }
    }

    /// The heartbeat that leaves the group for good.
    pub fn leave(&self) -> Heartbeat {
        Heartbeat {
            member_epoch: LEAVE_EPOCH,
            rebalance_timeout_ms: None,
            topics: None,
            assignor: None,
            owned: None,
            ..self.heartbeat()
        }
    }

    /// Takes an answer: the new epoch and, when the assignment changed, what to revoke and what
    /// is new. The caller commits the revoked partitions (at [`Membership::epoch`], which the
    /// coordinator keeps until it hears they are gone) before its next heartbeat.
    pub fn on_answer(&mut self, answer: &HeartbeatAnswer) -> Reconcile {
        self.epoch = answer.member_epoch;
        if answer.heartbeat_interval_ms > 0 {
            self.interval_ms = answer.heartbeat_interval_ms as u64;
        }
        self.full = false;
        self.ack_due = false;
        let Some(target) = &answer.assignment else {
            return Reconcile::default();
        };
        let target: Owned = target
            .iter()
            .filter(|(_, ps)| !ps.is_empty())
            .map(|(t, ps)| (*t, ps.clone()))
            .collect();
        let change = Reconcile {
            revoked: minus(&self.owned, &target),
            gained: minus(&target, &self.owned),
        };
        self.owned = target;
        self.ack_due = !change.is_empty();
        change
    }

    /// Fenced or left: nothing owned, the next heartbeat joins at epoch 0 (same member id).
    pub fn reset(&mut self) {
        self.epoch = JOIN_EPOCH;
        self.owned.clear();
        self.full = true;
        self.ack_due = false;
    }

    /// After a failed call that did not fence it: the next heartbeat carries every field (the
    /// coordinator may have lost the previous answer's context), and a refresh is due at once.
    pub fn retry(&mut self, refresh_now: bool) {
        self.full = true;
        if refresh_now {
            self.ack_due = true;
        }
    }
}

fn minus(a: &Owned, b: &Owned) -> Owned {
    let empty = BTreeSet::new();
    a.iter()
        .filter_map(|(t, ps)| {
            let rest: BTreeSet<i32> = ps.difference(b.get(t).unwrap_or(&empty)).copied().collect();
            (!rest.is_empty()).then_some((*t, rest))
        })
        .collect()
}

impl Client {
    /// One ConsumerGroupHeartbeat; a broker error comes back as `Err`.
    pub async fn consumer_heartbeat(&mut self, hb: &Heartbeat) -> Result<HeartbeatAnswer> {
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(hb.group.clone())))
            .with_member_id(StrBytes::from_string(hb.member_id.clone()))
            .with_member_epoch(hb.member_epoch)
            .with_instance_id(None)
            .with_rack_id(None)
            .with_rebalance_timeout_ms(hb.rebalance_timeout_ms.unwrap_or(-1))
            .with_subscribed_topic_names(
                hb.topics
                    .as_ref()
                    .map(|ts| ts.iter().map(|t| name(t)).collect()),
            )
            .with_subscribed_topic_regex(None)
            .with_server_assignor(hb.assignor.clone().map(StrBytes::from_string))
            .with_topic_partitions(hb.owned.as_ref().map(|owned| {
                owned
                    .iter()
                    .map(|(t, ps)| {
                        TopicPartitions::default()
                            .with_topic_id(*t)
                            .with_partitions(ps.iter().copied().collect())
                    })
                    .collect()
            }));
        let response = self
            .call(&request, CONSUMER_GROUP_HEARTBEAT_VERSION)
            .await?;
        check(response.error_code, response.error_message.as_ref())?;
        let assignment = match response.assignment {
            None => None,
            Some(a) => {
                let total: usize = a.topic_partitions.iter().map(|t| t.partitions.len()).sum();
                if total > MAX_ASSIGNED {
                    return Err(ClientError::Protocol("oversized assignment".into()));
                }
                let mut owned = Owned::new();
                for t in a.topic_partitions {
                    owned.entry(t.topic_id).or_default().extend(t.partitions);
                }
                Some(owned)
            }
        };
        Ok(HeartbeatAnswer {
            member_epoch: response.member_epoch,
            heartbeat_interval_ms: response.heartbeat_interval_ms,
            assignment,
        })
    }

    /// Commits offsets as consumer-protocol member `member_id` at `member_epoch` (OffsetCommit
    /// v9; the coordinator refuses any other epoch): (partition, offset, leader epoch of the
    /// record before it, -1 if unknown). The first partition error fails it.
    pub async fn commit_consumer_offsets(
        &mut self,
        group: &str,
        member_id: &str,
        member_epoch: i32,
        topic: &str,
        offsets: &[(i32, i64, i32)],
    ) -> Result<()> {
        self.commit_as(
            group,
            member_epoch,
            member_id,
            topic,
            offsets,
            MEMBER_EPOCH_COMMIT_VERSION,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic() -> Uuid {
        Uuid::from_u128(7)
    }

    fn owned(ps: &[i32]) -> Owned {
        if ps.is_empty() {
            return Owned::new();
        }
        Owned::from([(topic(), ps.iter().copied().collect())])
    }

    fn answer(epoch: i32, assignment: Option<&[i32]>) -> HeartbeatAnswer {
        HeartbeatAnswer {
            member_epoch: epoch,
            heartbeat_interval_ms: 1000,
            assignment: assignment.map(owned),
        }
    }

    #[test]
    fn joins_with_every_field_then_sends_only_what_it_owns() {
        let mut m = Membership::new("g", "id-1", &["t"], Some("range"), 8000);
        let join = m.heartbeat();
        assert_eq!(join.member_epoch, JOIN_EPOCH);
        assert_eq!(join.topics, Some(vec!["t".to_string()]));
        assert_eq!(join.rebalance_timeout_ms, Some(8000));
        assert_eq!(join.assignor.as_deref(), Some("range"));
        assert_eq!(join.owned, Some(Owned::new()));
        assert!(m.heartbeat_due(0));

        let change = m.on_answer(&answer(3, Some(&[0, 1])));
        assert_eq!(change.gained, owned(&[0, 1]));
        assert!(change.revoked.is_empty());
        // The new assignment is acknowledged at once, then at the coordinator's interval.
        assert!(m.heartbeat_due(0));
        let ack = m.heartbeat();
        assert_eq!(
            (ack.member_epoch, ack.topics, ack.rebalance_timeout_ms),
            (3, None, None)
        );
        assert_eq!(ack.owned, Some(owned(&[0, 1])));
        assert!(m.on_answer(&answer(3, None)).is_empty());
        assert!(!m.heartbeat_due(999));
        assert!(m.heartbeat_due(1000));
    }

    #[test]
    fn revokes_then_takes_new_partitions_and_tracks_the_epoch() {
        let mut m = Membership::new("g", "id-1", &["t"], None, 8000);
        m.on_answer(&answer(1, Some(&[0, 1, 2])));
        // Revocation: same epoch, fewer partitions.
        let change = m.on_answer(&answer(1, Some(&[0])));
        assert_eq!(change.revoked, owned(&[1, 2]));
        assert_eq!(m.epoch(), 1);
        assert_eq!(m.heartbeat().owned, Some(owned(&[0])));
        // The acknowledgement is answered with the next epoch and a new partition.
        let change = m.on_answer(&answer(2, Some(&[0, 3])));
        assert_eq!((change.revoked, change.gained), (Owned::new(), owned(&[3])));
        assert_eq!(m.owned_partitions(topic()), vec![0, 3]);
        // An epoch bump alone changes nothing owned.
        assert!(m.on_answer(&answer(4, None)).is_empty());
        assert_eq!(m.epoch(), 4);
    }

    #[test]
    fn fencing_drops_everything_and_rejoins_with_the_same_id() {
        let mut m = Membership::new("g", "id-1", &["t"], None, 8000);
        m.on_answer(&answer(5, Some(&[0, 1])));
        let fenced = ClientError::Kafka(ResponseError::FencedMemberEpoch, String::new());
        assert_eq!(on_error(&fenced), OnError::Fenced);
        let unknown = ClientError::Kafka(ResponseError::UnknownMemberId, String::new());
        assert_eq!(on_error(&unknown), OnError::Fenced);
        let stale = ClientError::Kafka(ResponseError::StaleMemberEpoch, String::new());
        assert_eq!(on_error(&stale), OnError::Refresh);
        assert_eq!(on_error(&ClientError::Timeout), OnError::Reconnect);
        m.reset();
        let rejoin = m.heartbeat();
        assert_eq!(
            (rejoin.member_epoch, rejoin.member_id.as_str()),
            (0, "id-1")
        );
        assert_eq!(rejoin.owned, Some(Owned::new()));
        assert!(rejoin.topics.is_some());
        let leave = m.leave();
        assert_eq!((leave.member_epoch, leave.owned), (LEAVE_EPOCH, None));
    }

    #[test]
    fn after_an_error_the_next_heartbeat_is_full() {
        let mut m = Membership::new("g", "id-1", &["t"], None, 8000);
        m.on_answer(&answer(2, Some(&[0])));
        m.on_answer(&answer(2, None));
        assert!(m.heartbeat().topics.is_none());
        m.retry(true);
        let hb = m.heartbeat();
        assert!(hb.topics.is_some() && hb.rebalance_timeout_ms.is_some());
        assert_eq!(hb.member_epoch, 2);
        assert!(m.heartbeat_due(0));
    }
}
