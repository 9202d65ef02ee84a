//! `producer-availability`: the errors the producers handed to the application (their
//! delivery reports, `Event::Fail`) that a correct broker should not have caused. An error a
//! user sees counts, as with `admin-availability`:
//!
//! - a **permanent** error librdkafka surfaces instead of retrying (UNKNOWN_SERVER_ERROR,
//!   MESSAGE_TOO_LARGE, INVALID_RECORD, TOPIC_AUTHORIZATION_FAILED, ...: `produce_errors`):
//!   nothing in the workload asks for one, so a broker that gives one is wrong. Retriable
//!   errors that ran out of a scenario's `retries` are the scenario's setting, not judged.
//! - an idempotent producer's **sequence error** (OUT_OF_ORDER_SEQUENCE_NUMBER,
//!   UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH, ...): judged only where the scenario
//!   promises that no acknowledged write is lost (acks=all and the `lost` check), since a log
//!   that legitimately lost acknowledged batches (acks=1, no fsync) is out of step with the
//!   producer by design; nor where the producer had retried a batch with later ones in
//!   flight (`produce_errors::AFTER_RETRY_WITH_OTHERS_IN_FLIGHT`: Kafka accepts a later batch
//!   from a producer it has no state for, so the retry may be out of sequence on a correct
//!   broker); nor on a partition after its acknowledged writes were lost beyond acks=all's
//!   promise (`beyond_promise`): the log the producer's sequence numbers counted on is gone.
//! - a **delivery timeout** (`_MSG_TIMED_OUT`) whose whole wait, from the batch's produce
//!   to its timeout, fell in a quiet stretch: no fault of the nemesis's schedule active and
//!   none ended within [`RECOVERY_MS`] before, and the partition led by a broker throughout
//!   (its committed leader, where the run traces one). Outside such stretches a timeout is
//!   what the nemesis may legitimately cause, and stays indeterminate (the batch may or may
//!   not be in the log) for the other checks.

use std::collections::BTreeMap;

use crate::beyond_promise::BeyondPromise;
use crate::history::{Entry, Event};
use crate::partition_trace::PartitionEvent;
use crate::produce_errors::{self as errors, Action};

/// After a fault ends, how long the cluster may take to be whole again (a restarted broker
/// registers, is unfenced, rejoins the ISR; a new leader is elected), in simulated ms: a
/// timeout overlapping this is not judged.
pub const RECOVERY_MS: u64 = 10_000;

/// What the scenario promises.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    /// Sequence errors are judged (acks=all, idempotent, and no acknowledged write may be
    /// lost).
    pub judge_sequence_errors: bool,
}

/// The run's unavailability windows: the schedule's fault stretches [start, end], and every
/// fault or heal note as an instant.
pub fn fault_windows(entries: &[Entry]) -> Vec<(u64, u64)> {
    entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::Scheduled(f) => Some((f.at_ms, f.at_ms + f.duration_ms.unwrap_or(0))),
            Event::Fault(_) | Event::Heal(_) | Event::Inject(_) => Some((e.at_ms, e.at_ms)),
            _ => None,
        })
        .collect()
}

/// No fault of `faults` active in [from, to], and none ended within [`RECOVERY_MS`] before.
pub fn quiet(faults: &[(u64, u64)], from: u64, to: u64) -> bool {
    faults
        .iter()
        .all(|&(start, end)| start > to || end + RECOVERY_MS < from)
}

/// Each violation with its time: "partition P at T ms: ...".
pub fn check(entries: &[Entry], rules: Rules, beyond: &BeyondPromise) -> Vec<(u64, String)> {
    // op → (produced at, partition).
    let mut produced: BTreeMap<u64, (u64, i32)> = BTreeMap::new();
    let faults = fault_windows(entries);
    // partition → (time, committed leader) in time order.
    let mut leaders: BTreeMap<i32, Vec<(u64, i32)>> = BTreeMap::new();
    for e in entries {
        match &e.event {
            Event::Invoke { op, partition, .. } => {
                produced.insert(*op, (e.at_ms, *partition));
            }
            Event::Partition(PartitionEvent::Leader {
                partition, leader, ..
            }) => leaders
                .entry(*partition)
                .or_default()
                .push((e.at_ms, *leader)),
            _ => {}
        }
    }
    // Led throughout [from, to]: a leader at `from` and no leaderless moment until `to`.
    // A run without a partition trace (one broker) has its one leader.
    let led = |partition: i32, from: u64, to: u64| match leaders.get(&partition) {
        None => true,
        Some(changes) => {
            let at_start = changes
                .iter()
                .take_while(|(t, _)| *t <= from)
                .last()
                .map(|(_, l)| *l);
            at_start.is_some_and(|l| l >= 0)
                && changes
                    .iter()
                    .filter(|(t, _)| *t > from && *t <= to)
                    .all(|(_, l)| *l >= 0)
        }
    };
    let mut out = Vec::new();
    for e in entries {
        let Event::Fail { op, code, error } = &e.event else {
            continue;
        };
        let Some(&(produced_ms, partition)) = produced.get(op) else {
            continue;
        };
        let code = *code;
        let at = e.at_ms;
        let name = errors::name(code);
        if code == errors::MSG_TIMED_OUT {
            if quiet(&faults, produced_ms, at) && led(partition, produced_ms, at) {
                out.push((
                    at,
                    format!(
                        "partition {partition} at {at} ms: delivery timed out ({name}) for a \
                         batch produced at {produced_ms} ms, with a leader and no fault \
                         throughout: {error}"
                    ),
                ));
            }
            continue;
        }
        // Kafka's codes only (librdkafka's local ones are below -100; -1 is
        // UNKNOWN_SERVER_ERROR).
        let from_broker = code > 0 || code == -1;
        if !from_broker || matches!(errors::action(code, false, true), Action::Retry { .. }) {
            continue;
        }
        if errors::is_sequence_error(code)
            && (!rules.judge_sequence_errors
                || error.contains(errors::AFTER_RETRY_WITH_OTHERS_IN_FLIGHT)
                || beyond.lost_before(partition, at))
        {
            continue;
        }
        out.push((
            at,
            format!(
                "partition {partition} at {at} ms: the producer surfaced {name}, which a \
                 correct broker does not answer here: {error}"
            ),
        ));
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

    fn invoke(at_ms: u64, op: u64) -> Entry {
        at(
            at_ms,
            Event::Invoke {
                op,
                partition: 0,
                session: 1,
                values: vec![format!("v{op}")],
            },
        )
    }

    fn fail(at_ms: u64, op: u64, code: i16) -> Entry {
        at(
            at_ms,
            Event::Fail {
                op,
                code,
                error: "x".into(),
            },
        )
    }

    fn leader(at_ms: u64, leader: i32) -> Entry {
        at(
            at_ms,
            Event::Partition(PartitionEvent::Leader {
                partition: 0,
                leader,
                epoch: 1,
            }),
        )
    }

    const STRICT: Rules = Rules {
        judge_sequence_errors: true,
    };

    #[test]
    fn permanent_errors_count_and_retriable_ones_do_not() {
        let entries = vec![
            invoke(10, 1),
            fail(20, 1, -1),
            invoke(30, 2),
            fail(40, 2, 6),
            invoke(50, 3),
            fail(60, 3, errors::FATAL),
            invoke(70, 4),
            fail(80, 4, errors::RENUMBERED),
        ];
        let found = check(&entries, STRICT, &BeyondPromise::default());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, 20);
        assert!(found[0].1.contains("UnknownServerError"), "{}", found[0].1);
    }

    #[test]
    fn sequence_errors_count_only_where_nothing_acknowledged_may_be_lost() {
        let entries = vec![invoke(10, 1), fail(20, 1, 45)];
        assert_eq!(check(&entries, STRICT, &BeyondPromise::default()).len(), 1);
        let explained = vec![
            invoke(10, 1),
            at(
                20,
                Event::Fail {
                    op: 1,
                    code: 45,
                    error: format!("x ({})", errors::AFTER_RETRY_WITH_OTHERS_IN_FLIGHT),
                },
            ),
        ];
        assert!(check(&explained, STRICT, &BeyondPromise::default()).is_empty());
        let lenient = Rules {
            judge_sequence_errors: false,
        };
        assert!(check(&entries, lenient, &BeyondPromise::default()).is_empty());
    }

    #[test]
    fn a_timeout_counts_only_in_a_quiet_stretch_with_a_leader() {
        let quiet = vec![
            leader(0, 1),
            invoke(20_000, 1),
            fail(50_000, 1, errors::MSG_TIMED_OUT),
        ];
        assert_eq!(check(&quiet, STRICT, &BeyondPromise::default()).len(), 1);
        let leaderless = vec![
            leader(0, 1),
            invoke(20_000, 1),
            leader(30_000, -1),
            fail(50_000, 1, errors::MSG_TIMED_OUT),
        ];
        assert!(check(&leaderless, STRICT, &BeyondPromise::default()).is_empty());
        let fault = at(
            5_000,
            Event::Scheduled(TimedFault {
                at_ms: 5_000,
                fault: FaultKind::Isolate,
                node: 0,
                duration_ms: Some(6_000),
                partition: None,
                stream: None,
            }),
        );
        // The fault ended at 11 s: 20 s is within its recovery allowance.
        let recovering = vec![
            leader(0, 1),
            fault,
            invoke(20_000, 1),
            fail(50_000, 1, errors::MSG_TIMED_OUT),
        ];
        assert!(check(&recovering, STRICT, &BeyondPromise::default()).is_empty());
    }
}
