//! The coordinator's vocabulary: requests in, responses and actions out. No wire types: the
//! broker translates Kafka's messages to these and back.

use bytes::Bytes;

/// Identifies one request the driver is waiting to answer.
pub type RequestId = u64;
/// Identifies one append to the offsets log the coordinator is waiting on.
pub type AppendToken = u64;
/// One record for the offsets log: key, and value (`None` is a tombstone).
pub type OffsetRecord = (Vec<u8>, Option<Vec<u8>>);

/// Errors a group request can end with; each is one Kafka error code (see `broker::errors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupError {
    CoordinatorNotAvailable,
    NotCoordinator,
    CoordinatorLoadInProgress,
    InvalidGroupId,
    UnknownMemberId,
    InvalidSessionTimeout,
    RebalanceInProgress,
    IllegalGeneration,
    InconsistentGroupProtocol,
    MemberIdRequired,
    GroupMaxSizeReached,
    FencedInstanceId,
    FencedMemberEpoch,
    UnreleasedInstanceId,
    UnsupportedAssignor,
    StaleMemberEpoch,
    InvalidRequest,
    InvalidRegularExpression,
    NonEmptyGroup,
    GroupIdNotFound,
    GroupSubscribedToTopic,
    OffsetMetadataTooLarge,
    InvalidCommitOffsetSize,
    /// A transactional commit of an epoch older than the producer's on the offsets partition.
    InvalidProducerEpoch,
    UnknownServerError,
}

/// Why an append to the offsets log failed (the driver's view of the partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The partition is not here, or is closing.
    NotLeader,
    /// Disk error (append or fsync).
    Storage,
    /// The batch exceeds the partition's `max.message.bytes`.
    TooLarge,
    /// Not replicated in time (kept for replication; never produced on one node).
    Timeout,
    /// A transactional batch of a producer epoch older than the partition knows (a zombie).
    ProducerFenced,
}

impl AppendError {
    /// Kafka's mapping of append errors for group writes (`maybeConvertOffsetCommitError`).
    pub fn to_group_error(self) -> GroupError {
        match self {
            AppendError::NotLeader | AppendError::Storage => GroupError::NotCoordinator,
            AppendError::Timeout => GroupError::CoordinatorNotAvailable,
            AppendError::TooLarge => GroupError::InvalidCommitOffsetSize,
            AppendError::ProducerFenced => GroupError::InvalidProducerEpoch,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The names Kafka puts on the wire (DescribeGroups, ListGroups).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// The edges Kafka allows (`GroupMetadata` state table).
    pub fn may_become(self, next: GroupState) -> bool {
        use GroupState::*;
        matches!(
            (self, next),
            (Empty, PreparingRebalance)
                | (PreparingRebalance, CompletingRebalance)
                | (PreparingRebalance, Empty)
                | (CompletingRebalance, Stable)
                | (CompletingRebalance, PreparingRebalance)
                | (Stable, PreparingRebalance)
                | (_, Dead)
        )
    }
}

#[derive(Clone, Debug)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    /// v0 has none: pass the session timeout (KAFKA-8653).
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member must first get an id (KIP-394).
    pub require_known_member: bool,
    /// JoinGroup v9+: a replaced static leader can be told to skip assignment (KIP-814).
    pub supports_skip_assignment: bool,
    /// Randomness for a new member id (the core draws none itself).
    pub fresh_id: u128,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinResponse {
    pub error: Option<GroupError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub skip_assignment: bool,
    /// Only the leader gets the members.
    pub members: Vec<JoinedMember>,
}

#[derive(Clone, Debug)]
pub struct SyncRequest {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    /// v5+ (KIP-559): must match the group's when given.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncResponse {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

#[derive(Clone, Debug)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
}

#[derive(Clone, Debug)]
pub struct LeavingMember {
    pub member_id: String,
    pub instance_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaveResponse {
    pub error: Option<GroupError>,
    /// One per leaving member, in request order.
    pub members: Vec<Option<GroupError>>,
}

#[derive(Clone, Debug)]
pub struct OffsetToCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

#[derive(Clone, Debug)]
pub struct CommitRequest {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    /// -1 for simple (`assign()`) and admin commits.
    pub generation: i32,
    /// OffsetCommit v2–v4 `RetentionTimeMs`; -1 means the broker's retention.
    pub retention_ms: i64,
    /// What a member commit (generation >= 0) to a group that does not exist gets: Kafka
    /// answers ILLEGAL_GENERATION before OffsetCommit v9 and GROUP_ID_NOT_FOUND from v9.
    pub unknown_group: GroupError,
    pub offsets: Vec<OffsetToCommit>,
}

/// TxnOffsetCommit: a commit written as part of producer (`producer_id`, `producer_epoch`)'s
/// transaction. It is fenced like a commit (KIP-447: only when it names a member, an instance
/// or a generation), written as a transactional batch, and stays pending (invisible to
/// OffsetFetch) until the transaction's marker reaches the group's offsets partition.
#[derive(Clone, Debug)]
pub struct TxnCommitRequest {
    pub commit: CommitRequest,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitResponse {
    /// One per offset in request order: `(topic, partition, error)`.
    pub partitions: Vec<(String, i32, Option<GroupError>)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    /// -1 when nothing is committed.
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    /// A transactional commit for this partition waits for its transaction's marker
    /// (OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT). Read in the same
    /// look at the group as the offset: a marker settling between two looks would otherwise
    /// let a fetch answer the old offset as stable.
    pub unstable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    /// The classic state (a consumer group's classic side is always Empty).
    pub state: GroupState,
    /// The state as ListGroups v4+ names it (a consumer group's own: Assigning, Reconciling…).
    pub state_name: &'static str,
    /// `classic` or `consumer` (ListGroups v5).
    pub group_type: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    pub error: Option<GroupError>,
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Join(JoinResponse),
    Sync(SyncResponse),
    Heartbeat(Option<GroupError>),
    Leave(LeaveResponse),
    Commit(CommitResponse),
    /// ConsumerGroupHeartbeat (KIP-848): never parked.
    ConsumerHeartbeat(super::consumer::HeartbeatResponse),
    /// DeleteGroups (one group) and OffsetDelete.
    Delete(Result<Vec<(String, i32, Option<GroupError>)>, GroupError>),
}

/// The producer a transactional append is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// What the driver must do after an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Answer a request (immediately, or one that was parked).
    Respond(RequestId, Response),
    /// Append these `(key, value)` records, as one batch, to `__consumer_offsets-partition`,
    /// then report with `append_done(token, ..)` once committed (on one node: written, and
    /// fsynced when `weir.fsync.before.ack` is set; with replication: below the HW).
    Append {
        partition: i32,
        token: AppendToken,
        records: Vec<OffsetRecord>,
        /// A transactional batch of this producer (TxnOffsetCommit): its id and epoch, no
        /// sequence, the transactional attribute (Kafka's coordinator-origin append).
        transaction: Option<TxnProducer>,
    },
    /// The coordinator's own timer removed a KIP-848 member (session or rebalance timeout).
    /// Nothing to do but tell the operator: the core does not log, its driver does.
    MemberExpired { group: String, member: String },
}
