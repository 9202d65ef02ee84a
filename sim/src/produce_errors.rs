//! What librdkafka's producer does with each error a Produce attempt can end in
//! (`rd_kafka_err_action` and `rd_kafka_handle_Produce_error` in its `rdkafka_request.c`):
//! retry (after a metadata refresh when the leader may have moved), surface the error in the
//! batch's delivery report (permanent), or, for the idempotent producer, raise a fatal error
//! (the producer instance is unusable; the application starts a new one). The simulated
//! producer (`producer.rs`) acts on it and the checker (`delivery_check.rs`) judges what was
//! surfaced, so both read the same table.
//!
//! Delivery reports carry Kafka's error codes, or librdkafka's local (negative) ones for what
//! the client decided by itself: a batch that outlived `delivery.timeout.ms` fails with
//! `_MSG_TIMED_OUT`, the rest of a fatal producer's batches with `_FATAL`, what the
//! application purges when it stops with `_PURGE_QUEUE`.

use kafka_protocol::error::ResponseError;
use weir::client::ClientError;

/// `RD_KAFKA_RESP_ERR__MSG_TIMED_OUT`: `delivery.timeout.ms` passed (possibly persisted).
pub const MSG_TIMED_OUT: i16 = -192;
/// `RD_KAFKA_RESP_ERR__FATAL`: failed because the idempotent producer raised a fatal error.
pub const FATAL: i16 = -150;
/// `RD_KAFKA_RESP_ERR__PURGE_QUEUE`: purged by the application at its end (`rd_kafka_purge`).
pub const PURGE_QUEUE: i16 = -152;
/// `RD_KAFKA_RESP_ERR__TRANSPORT`: the connection broke.
pub const TRANSPORT: i16 = -195;
/// `RD_KAFKA_RESP_ERR__TIMED_OUT`: no answer within `request.timeout.ms`.
pub const TIMED_OUT: i16 = -185;
/// `RD_KAFKA_RESP_ERR__BAD_MSG`: an answer the client could not parse.
pub const BAD_MSG: i16 = -199;
/// Not an error an application sees: this simulator's producer gave the batch up for its own
/// reasons (the batches in flight behind one that failed, which librdkafka renumbers under a
/// bumped epoch and retries; here they fail, indeterminate).
pub const RENUMBERED: i16 = 0;

/// What the producer does with an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Retry the batch; `refresh`: the leader may have moved, ask Metadata first.
    Retry { refresh: bool },
    /// Fail the batch with this error (the delivery report the application sees). The
    /// idempotent producer then bumps its epoch (KIP-360) and carries on.
    Permanent,
    /// The idempotent producer's state is out of step with the broker's: fatal.
    Fatal,
    /// UNKNOWN_PRODUCER_ID on a batch's first attempt at the head of the line: bump the epoch
    /// and retry it (no risk of duplication).
    BumpAndRetry,
}

/// The code a delivery report would carry for `e`.
pub fn code(e: &ClientError) -> i16 {
    match e {
        ClientError::Kafka(code, _) => code.code(),
        ClientError::Io(_) => TRANSPORT,
        ClientError::Timeout => TIMED_OUT,
        ClientError::Protocol(_) => BAD_MSG,
    }
}

/// librdkafka's action for Produce error `code` (Kafka's or a local one). `first_attempt`: the
/// batch had not been sent before this attempt.
pub fn action(code: i16, idempotent: bool, first_attempt: bool) -> Action {
    let retry = |refresh| Action::Retry { refresh };
    // librdkafka closes a connection whose request timed out, and a broker gone down makes
    // it query the leaders it led: both refresh.
    if code == TRANSPORT || code == TIMED_OUT {
        return retry(true);
    }
    let Some(e) = ResponseError::try_from_code(code) else {
        return Action::Permanent;
    };
    match e {
        ResponseError::LeaderNotAvailable
        | ResponseError::NotLeaderOrFollower
        | ResponseError::BrokerNotAvailable
        | ResponseError::ReplicaNotAvailable
        | ResponseError::UnknownTopicOrPartition
        | ResponseError::KafkaStorageError => retry(true),
        // librdkafka's INVALID_MSG is Kafka's CORRUPT_MESSAGE: retried, not surfaced.
        ResponseError::RequestTimedOut
        | ResponseError::NotEnoughReplicas
        | ResponseError::NotEnoughReplicasAfterAppend
        | ResponseError::CorruptMessage
        | ResponseError::CoordinatorLoadInProgress => retry(false),
        ResponseError::OutOfOrderSequenceNumber if idempotent => Action::Fatal,
        ResponseError::UnknownProducerId if idempotent && first_attempt => Action::BumpAndRetry,
        ResponseError::UnknownProducerId if idempotent => Action::Fatal,
        _ => Action::Permanent,
    }
}

/// A surfaced code that only the idempotent producer's sequence bookkeeping produces: a
/// correct broker gives it only where the log lost what it acknowledged.
pub fn is_sequence_error(code: i16) -> bool {
    matches!(
        ResponseError::try_from_code(code),
        Some(
            ResponseError::OutOfOrderSequenceNumber
                | ResponseError::UnknownProducerId
                | ResponseError::InvalidProducerEpoch
                | ResponseError::ProducerFenced
                | ResponseError::DuplicateSequenceNumber
        )
    )
}

/// Marks a sequence error that followed a retried batch with later ones in flight. Kafka
/// accepts any first sequence number from a producer it has no state for (KIP-360), so when
/// the oldest batch is refused without being appended (UNKNOWN_TOPIC_OR_PARTITION while a new
/// leader sets up, NOT_LEADER_OR_FOLLOWER, a lost request) and the next one is accepted by a
/// leader that just took over, the retry of the oldest is out of sequence on a correct
/// broker too: librdkafka surfaces that as fatal, and the checker does not blame the broker.
pub const AFTER_RETRY_WITH_OTHERS_IN_FLIGHT: &str =
    "after a retried batch with later ones in flight";

/// The name of a code as librdkafka prints it (`NOT_LEADER_OR_FOLLOWER`, `_MSG_TIMED_OUT`).
pub fn name(code: i16) -> String {
    match code {
        MSG_TIMED_OUT => "_MSG_TIMED_OUT".into(),
        FATAL => "_FATAL".into(),
        PURGE_QUEUE => "_PURGE_QUEUE".into(),
        TRANSPORT => "_TRANSPORT".into(),
        TIMED_OUT => "_TIMED_OUT".into(),
        BAD_MSG => "_BAD_MSG".into(),
        RENUMBERED => "none".into(),
        c => match ResponseError::try_from_code(c) {
            Some(e) => e.to_string(),
            None => format!("error {c}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retriable_permanent_and_fatal_as_librdkafka() {
        let nl = ResponseError::NotLeaderOrFollower.code();
        assert_eq!(action(nl, true, false), Action::Retry { refresh: true });
        let ner = ResponseError::NotEnoughReplicasAfterAppend.code();
        assert_eq!(action(ner, true, false), Action::Retry { refresh: false });
        let corrupt = ResponseError::CorruptMessage.code();
        assert_eq!(
            action(corrupt, false, true),
            Action::Retry { refresh: false }
        );
        let unknown = ResponseError::UnknownServerError.code();
        assert_eq!(action(unknown, true, true), Action::Permanent);
        let too_large = ResponseError::MessageTooLarge.code();
        assert_eq!(action(too_large, false, true), Action::Permanent);
        let oos = ResponseError::OutOfOrderSequenceNumber.code();
        assert_eq!(action(oos, true, false), Action::Fatal);
        assert_eq!(action(oos, false, false), Action::Permanent);
        let upid = ResponseError::UnknownProducerId.code();
        assert_eq!(action(upid, true, true), Action::BumpAndRetry);
        assert_eq!(action(upid, true, false), Action::Fatal);
        assert_eq!(
            action(TRANSPORT, true, false),
            Action::Retry { refresh: true }
        );
        assert!(is_sequence_error(oos) && !is_sequence_error(unknown));
        assert_eq!(name(MSG_TIMED_OUT), "_MSG_TIMED_OUT");
    }
}
