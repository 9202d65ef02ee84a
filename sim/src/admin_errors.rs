//! What librdkafka's Admin API does with the errors of CreateTopics, DeleteTopics,
//! CreatePartitions and IncrementalAlterConfigs (`rdkafka_admin.c`), and `admin-availability`,
//! which judges what the simulated admin client (`admin.rs`) surfaced.
//!
//! librdkafka's admin worker retries nothing the broker answers. It waits for the controller
//! (`rd_kafka_admin_common_get_controller`: until a broker that Metadata names as controller
//! is up, bounded by the request's `request_timeout`, default `socket.timeout.ms`), sends the
//! request once, and hands each topic's error code to the application as the broker gave it
//! (`rd_kafka_CreateTopicsResponse_parse` and its siblings); a broken connection or no answer
//! in time fail the whole request (`_TRANSPORT`, `_TIMED_OUT`). The only code it hides is
//! CreateTopics' REQUEST_TIMED_OUT with a non-positive `operation_timeout` (not the default).
//! So NOT_CONTROLLER reaches the application: a Kafka broker holds a forwarded request until
//! a controller is known (KIP-590).
//!
//! `admin-availability` counts a surfaced error a correct broker would not answer then:
//!
//! - never legitimate for the workload's requests (valid names, counts and configs):
//!   NOT_CONTROLLER, UNKNOWN_SERVER_ERROR, INVALID_REQUEST, INVALID_CONFIG, POLICY_VIOLATION,
//!   INVALID_TOPIC_EXCEPTION, an answer the client could not parse, ...;
//! - legitimate while the cluster is unavailable (REQUEST_TIMED_OUT, `_TIMED_OUT`,
//!   `_TRANSPORT`, INVALID_REPLICATION_FACTOR with brokers fenced, ...): judged only when the
//!   whole request, sent to answered, fell in a quiet stretch (no fault active, none ended
//!   within `delivery_check::RECOVERY_MS` before);
//! - definite refusals a correct broker gives: TOPIC_ALREADY_EXISTS and INVALID_PARTITIONS (the
//!   broker retried the request at the next controller after the first had carried it out, or
//!   an earlier change that timed out had happened), UNKNOWN_TOPIC_OR_PARTITION answering a
//!   delete (the same retry) or a change of a topic an earlier delete may have removed,
//!   KAFKA_STORAGE_ERROR (the simulated disks fail outside the schedule too): not judged.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use weir::client::ClientError;

use crate::delivery_check::{fault_windows, quiet};
use crate::history::{AdminChange, Entry, Event};
use crate::produce_errors::{self, BAD_MSG, TIMED_OUT, TRANSPORT};

/// How a surfaced admin error is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judged {
    /// A correct broker never answers it to the workload's requests.
    Wrong,
    /// Legitimate while the cluster is unavailable: judged in quiet stretches only.
    Unavailable,
    /// A legitimate refusal (or one the checker cannot blame on the broker).
    Refusal,
}

/// The code the application sees for `e` (Kafka's, or librdkafka's local ones).
pub fn code(e: &ClientError) -> i16 {
    produce_errors::code(e)
}

/// How `code` is judged, before the history-dependent exception for
/// UNKNOWN_TOPIC_OR_PARTITION (see [`check`]).
pub fn judge(code: i16) -> Judged {
    if code == TIMED_OUT || code == TRANSPORT {
        return Judged::Unavailable;
    }
    if code == BAD_MSG {
        return Judged::Wrong;
    }
    let Some(e) = ResponseError::try_from_code(code) else {
        return Judged::Refusal;
    };
    match e {
        ResponseError::TopicAlreadyExists
        | ResponseError::InvalidPartitions
        | ResponseError::KafkaStorageError => Judged::Refusal,
        // Judged against the history in `check`.
        ResponseError::UnknownTopicOrPartition => Judged::Wrong,
        ResponseError::RequestTimedOut
        | ResponseError::InvalidReplicationFactor
        | ResponseError::BrokerNotAvailable
        | ResponseError::LeaderNotAvailable
        | ResponseError::NotEnoughReplicas
        | ResponseError::NetworkException
        | ResponseError::CoordinatorLoadInProgress => Judged::Unavailable,
        _ => Judged::Wrong,
    }
}

/// How an `AdminFail` error string carries its code: `[code] error`.
pub fn describe(e: &ClientError) -> String {
    format!("[{}] {e}", code(e))
}

/// The code of an `AdminFail` error written by [`describe`]; `None` for histories written
/// before codes were recorded.
pub fn code_in(error: &str) -> Option<i16> {
    let rest = error.strip_prefix('[')?;
    let (code, _) = rest.split_once(']')?;
    code.parse().ok()
}

/// `admin-availability`: each violation with its time ("op N (change) at T ms: ...").
pub fn check(entries: &[Entry]) -> Vec<(u64, String)> {
    let faults = fault_windows(entries);
    let mut invoked: BTreeMap<u64, (u64, &AdminChange)> = BTreeMap::new();
    // Per topic, the deletes sent and not definitely refused: any of them may have removed it.
    let mut deletes: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    let mut out = Vec::new();
    for e in entries {
        let Event::AdminFail {
            op,
            definite,
            error,
        } = &e.event
        else {
            if let Event::AdminInvoke { op, change } = &e.event {
                invoked.insert(*op, (e.at_ms, change));
                if let AdminChange::DeleteTopic { topic } = change {
                    deletes.entry(topic).or_default().insert(*op);
                }
            }
            continue;
        };
        let Some(&(sent_ms, change)) = invoked.get(op) else {
            continue;
        };
        let topic = change.topic();
        // Another delete of the topic (not this one) may have run.
        let maybe_deleted = deletes
            .get(topic)
            .is_some_and(|ops| ops.iter().any(|o| o != op));
        if *definite {
            if let (AdminChange::DeleteTopic { .. }, Some(ops)) = (change, deletes.get_mut(topic)) {
                ops.remove(op);
            }
        }
        let at = e.at_ms;
        let unknown_topic = ResponseError::UnknownTopicOrPartition.code();
        let why = match code_in(error) {
            // A delete refused as unknown: this very request may have been carried out by a
            // controller that died before answering, and the broker retried it at the next
            // (as a create may come back TOPIC_ALREADY_EXISTS).
            Some(code)
                if code == unknown_topic
                    && (maybe_deleted || matches!(change, AdminChange::DeleteTopic { .. })) =>
            {
                None
            }
            Some(code) => match judge(code) {
                Judged::Wrong => Some("which a correct broker does not answer"),
                Judged::Unavailable if quiet(&faults, sent_ms, at) => Some(
                    "with no fault active from its sending to its answer, nor within the \
                     recovery allowance before",
                ),
                _ => None,
            },
            // Histories without codes: NOT_CONTROLLER, as before.
            None => error
                .contains("NotController")
                .then_some("which a correct broker does not answer"),
        };
        if let Some(why) = why {
            out.push((
                at,
                format!(
                    "op {op} ({}) sent at {sent_ms} ms, failed at {at} ms, {why}: {error}",
                    change.describe()
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{FaultKind, TimedFault};

    fn at(at_ms: u64, event: Event) -> Entry {
        Entry { at_ms, event }
    }

    fn invoke(at_ms: u64, op: u64, change: AdminChange) -> Entry {
        at(at_ms, Event::AdminInvoke { op, change })
    }

    fn fail(at_ms: u64, op: u64, code: i16, definite: bool) -> Entry {
        at(
            at_ms,
            Event::AdminFail {
                op,
                definite,
                error: format!("[{code}] x"),
            },
        )
    }

    fn create(topic: &str) -> AdminChange {
        AdminChange::CreateTopic {
            topic: topic.into(),
            partitions: 1,
            configs: BTreeMap::new(),
        }
    }

    fn delete(topic: &str) -> AdminChange {
        AdminChange::DeleteTopic {
            topic: topic.into(),
        }
    }

    #[test]
    fn codes_round_trip_through_the_history() {
        let e = ClientError::Kafka(ResponseError::NotController, "moved".into());
        assert_eq!(code_in(&describe(&e)), Some(41));
        assert_eq!(code_in(&describe(&ClientError::Timeout)), Some(TIMED_OUT));
        assert_eq!(code_in("NotController: moved"), None);
    }

    #[test]
    fn wrong_answers_count_and_refusals_do_not() {
        let unknown_server = ResponseError::UnknownServerError.code();
        let exists = ResponseError::TopicAlreadyExists.code();
        let entries = vec![
            invoke(10, 1, create("a")),
            fail(20, 1, unknown_server, true),
            invoke(30, 2, create("b")),
            fail(40, 2, exists, false),
            invoke(50, 3, create("c")),
            at(
                60,
                Event::AdminFail {
                    op: 3,
                    definite: true,
                    error: "NotController: old history".into(),
                },
            ),
        ];
        let found = check(&entries);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].0, found[1].0), (20, 60));
    }

    #[test]
    fn unknown_topic_counts_unless_a_delete_may_have_run() {
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let timed_out = ResponseError::RequestTimedOut.code();
        let after_delete = vec![
            invoke(10, 1, delete("a")),
            fail(20, 1, timed_out, false),
            invoke(30, 2, delete("a")),
            fail(40, 2, unknown, true),
        ];
        // The first delete's time-out is judged (no faults at all), the unknown topic is not.
        let found = check(&after_delete);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, 20);
        let refused_delete = vec![
            invoke(10, 1, delete("a")),
            fail(20, 1, ResponseError::PolicyViolation.code(), true),
            invoke(
                30,
                2,
                AdminChange::CreatePartitions {
                    topic: "a".into(),
                    count: 2,
                },
            ),
            fail(40, 2, unknown, true),
            // A delete answered unknown: the broker may have retried it after it was done.
            invoke(50, 3, delete("a")),
            fail(60, 3, unknown, true),
        ];
        assert_eq!(check(&refused_delete).len(), 2);
        // A second delete refused as unknown does not hide the first one's possible effect.
        let twice = vec![
            invoke(10, 1, delete("a")),
            fail(20, 1, timed_out, false),
            invoke(30, 2, delete("a")),
            fail(40, 2, unknown, true),
            invoke(
                50,
                3,
                AdminChange::CreatePartitions {
                    topic: "a".into(),
                    count: 3,
                },
            ),
            fail(60, 3, unknown, true),
        ];
        assert_eq!(check(&twice).len(), 1);
    }

    #[test]
    fn unavailability_counts_only_in_a_quiet_stretch() {
        let fault = at(
            5_000,
            Event::Scheduled(TimedFault {
                at_ms: 5_000,
                fault: FaultKind::Kill,
                node: 0,
                duration_ms: Some(2_000),
                partition: None,
                stream: None,
            }),
        );
        let entries = vec![
            fault,
            invoke(6_000, 1, create("a")),
            fail(7_000, 1, TIMED_OUT, false),
            invoke(15_000, 2, create("b")),
            fail(16_000, 2, TRANSPORT, false),
            invoke(30_000, 3, create("c")),
            fail(31_000, 3, TRANSPORT, false),
        ];
        let found = check(&entries);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, 31_000);
    }
}
