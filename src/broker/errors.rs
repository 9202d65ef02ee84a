//! Core errors as Kafka error codes: the one place where the cores' vocabulary meets the wire's.

use std::io;

use kafka_protocol::error::ResponseError;

use crate::controller::ControllerError;
use crate::group::GroupError;
use crate::log::ReadError;
use crate::replica::{EpochRefusal, ProduceError};

/// Why a metadata change did not happen.
#[derive(Debug)]
pub enum CommitError {
    /// The controller refused it (it does not fit the current metadata).
    Rejected(ControllerError),
    /// It could not be made durable.
    Storage(io::Error),
    /// This node is not the active controller (no leader known, or leadership moved).
    NotController,
    /// The quorum did not commit it in time (it may still commit).
    Timeout,
    /// The active controller refused it, with this code and message (the change was relayed
    /// to it).
    Remote(kafka_protocol::error::ResponseError, Option<String>),
}

impl std::fmt::Display for CommitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommitError::Rejected(e) => write!(f, "{e}"),
            CommitError::Storage(e) => write!(f, "could not persist metadata: {e}"),
            CommitError::NotController => f.write_str("this node is not the active controller"),
            CommitError::Timeout => f.write_str("the metadata quorum did not commit in time"),
            CommitError::Remote(code, message) => match message {
                Some(m) => write!(f, "the controller refused it: {code:?}: {m}"),
                None => write!(f, "the controller refused it: {code:?}"),
            },
        }
    }
}

pub fn controller(e: &ControllerError) -> ResponseError {
    match e {
        ControllerError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
        ControllerError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        ControllerError::InvalidTopic(_) => ResponseError::InvalidTopicException,
        ControllerError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        ControllerError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
        ControllerError::InvalidConfig(_) => ResponseError::InvalidConfig,
        ControllerError::TopicDeletionDisabled => ResponseError::TopicDeletionDisabled,
        ControllerError::TooLarge => ResponseError::PolicyViolation,
        ControllerError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        ControllerError::InvalidRequest(_) => ResponseError::InvalidRequest,
        ControllerError::UnknownTopicId(_) => ResponseError::UnknownTopicId,
        ControllerError::StaleBrokerEpoch(_) => ResponseError::StaleBrokerEpoch,
        ControllerError::DuplicateBrokerRegistration(_) => {
            ResponseError::DuplicateBrokerRegistration
        }
        ControllerError::NotController(_) => ResponseError::NotController,
        ControllerError::FencedLeaderEpoch(_) => ResponseError::FencedLeaderEpoch,
        ControllerError::InvalidUpdateVersion(_) => ResponseError::InvalidUpdateVersion,
        ControllerError::IneligibleReplica(_) => ResponseError::IneligibleReplica,
        ControllerError::PreferredLeaderNotAvailable(_) => {
            ResponseError::PreferredLeaderNotAvailable
        }
        ControllerError::EligibleLeadersNotAvailable(_) => {
            ResponseError::EligibleLeadersNotAvailable
        }
        ControllerError::NoReassignmentInProgress(_) => ResponseError::NoReassignmentInProgress,
        ControllerError::BrokerIdNotRegistered(_) => ResponseError::BrokerIdNotRegistered,
        ControllerError::ThrottlingQuotaExceeded(_) => ResponseError::ThrottlingQuotaExceeded,
    }
}

pub fn commit(e: &CommitError) -> ResponseError {
    match e {
        CommitError::Rejected(e) => controller(e),
        CommitError::Storage(_) => ResponseError::KafkaStorageError,
        CommitError::NotController => ResponseError::NotController,
        CommitError::Timeout => ResponseError::RequestTimedOut,
        CommitError::Remote(code, _) => *code,
    }
}

pub fn produce(e: &ProduceError) -> ResponseError {
    match e {
        ProduceError::Corrupt(_) => ResponseError::CorruptMessage,
        ProduceError::InvalidRecord(_) | ProduceError::RecordErrors(_) => {
            ResponseError::InvalidRecord
        }
        ProduceError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
        ProduceError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        ProduceError::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
        ProduceError::InvalidTxnState => ResponseError::InvalidTxnState,
        ProduceError::CoordinatorFenced => ResponseError::TransactionCoordinatorFenced,
        ProduceError::NotLeader => ResponseError::NotLeaderOrFollower,
        ProduceError::Storage(_) => ResponseError::KafkaStorageError,
    }
}

pub fn epoch(e: &EpochRefusal) -> ResponseError {
    match e {
        EpochRefusal::Fenced => ResponseError::FencedLeaderEpoch,
        EpochRefusal::Unknown => ResponseError::UnknownLeaderEpoch,
        EpochRefusal::NotLeader => ResponseError::NotLeaderOrFollower,
        EpochRefusal::OffsetOutOfRange => ResponseError::OffsetOutOfRange,
    }
}

pub fn read(e: &ReadError) -> ResponseError {
    match e {
        ReadError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        ReadError::Io(_) => ResponseError::KafkaStorageError,
    }
}

pub fn group(e: GroupError) -> ResponseError {
    match e {
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        GroupError::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor => ResponseError::UnsupportedAssignor,
        GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        GroupError::InvalidRequest => ResponseError::InvalidRequest,
        GroupError::InvalidRegularExpression => ResponseError::InvalidRegularExpression,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::InvalidCommitOffsetSize => ResponseError::InvalidCommitOffsetSize,
        GroupError::InvalidProducerEpoch => ResponseError::InvalidProducerEpoch,
        GroupError::UnknownServerError => ResponseError::UnknownServerError,
    }
}

/// The code for an optional group error (0 for none).
pub fn group_code(e: Option<GroupError>) -> i16 {
    e.map(|e| group(e).code()).unwrap_or(0)
}
