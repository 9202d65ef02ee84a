//! The consumer protocol's vocabulary: heartbeat in, answer out, and what describe shows. No wire
//! types: the broker translates `ConsumerGroupHeartbeat`/`ConsumerGroupDescribe` to these.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::Assignor;
use crate::group::GroupError;

/// Partitions by topic id: what a member holds or should hold.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// One topic of the metadata image, as assignors see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopicView {
    pub id: Uuid,
    pub partitions: i32,
}

/// The topics that exist, by name (the driver passes the metadata image's).
pub type Topics = BTreeMap<String, TopicView>;

/// Member epoch sentinels (KIP-848).
pub const JOIN_EPOCH: i32 = 0;
pub const LEAVE_EPOCH: i32 = -1;
/// A static member leaving for a while: it keeps its assignment until its session expires.
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// Broker settings of the consumer protocol (Kafka's `group.consumer.*` keys).
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    /// `group.consumer.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`; the first is the default.
    pub assignors: Vec<Assignor>,
    /// `group.consumer.max.size`.
    pub max_size: usize,
    /// Simulator and tests: the bug planted in the consumer protocol
    /// (`ConsumerGroupCommitStaleEpoch`, `ConsumerGroupAssignBeforeRevoke`).
    #[cfg(any(madsim, test))]
    pub planted: crate::config::planted::Planted,
}

impl Default for ConsumerConfig {
    fn default() -> ConsumerConfig {
        ConsumerConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignors: vec![Assignor::Uniform, Assignor::Range],
            max_size: crate::group::MAX_MEMBERS,
            #[cfg(any(madsim, test))]
            planted: Default::default(),
        }
    }
}

impl ConsumerConfig {
    /// These settings with a group's own overrides on top.
    pub fn with_overrides(&self, overrides: &GroupOverrides) -> ConsumerConfig {
        ConsumerConfig {
            session_timeout_ms: overrides
                .session_timeout_ms
                .unwrap_or(self.session_timeout_ms),
            heartbeat_interval_ms: overrides
                .heartbeat_interval_ms
                .unwrap_or(self.heartbeat_interval_ms),
            ..self.clone()
        }
    }
}

/// A group's own settings (KIP-848 group configs `consumer.session.timeout.ms` and
/// `consumer.heartbeat.interval.ms`), which the driver reads from the metadata image and passes
/// with each heartbeat; `None` follows the broker's [`ConsumerConfig`]. They take effect at the
/// member's next heartbeat, as in Kafka (its session timer is re-armed with the group's value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupOverrides {
    pub session_timeout_ms: Option<i32>,
    pub heartbeat_interval_ms: Option<i32>,
}

#[derive(Clone, Debug, Default)]
pub struct HeartbeatRequest {
    pub group_id: String,
    /// v1 (KIP-1082): the client makes it up; v0: empty on the first join, the server mints it.
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when unchanged since the last heartbeat.
    pub rebalance_timeout_ms: i32,
    /// `None` when unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// What the member owns now; `None` when unchanged.
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
    /// The request's version: v0 has server-minted member ids.
    pub version: i16,
    /// Randomness for a v0 member id (the core draws none itself).
    pub fresh_id: u128,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeartbeatResponse {
    pub error: Option<GroupError>,
    pub error_message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent on a full request, a join, or when the assignment changed.
    pub assignment: Option<Assignment>,
}

impl HeartbeatResponse {
    pub fn error(e: GroupError, message: impl Into<String>) -> HeartbeatResponse {
        HeartbeatResponse {
            error: Some(e),
            error_message: Some(message.into()),
            ..HeartbeatResponse::default()
        }
    }
}

/// A consumer group's state, as ListGroups and ConsumerGroupDescribe name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    /// The group epoch is ahead of the assignment epoch: the assignor has not run yet.
    Assigning,
    /// Some member has not reached the target assignment.
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// Where a member stands in reconciling to its target (Kafka's `MemberState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// At the target epoch with everything it may have.
    Stable,
    /// Holds partitions it must give up; stays at its epoch until it says it has.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions another member still holds.
    UnreleasedPartitions,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Assignment,
    pub target_assignment: Assignment,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    pub state: ConsumerGroupState,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<MemberDescription>,
}
