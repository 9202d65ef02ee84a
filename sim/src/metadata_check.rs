//! Checks admin operations against the metadata the broker shows once the faults have healed.
//!
//! Each admin topic is modelled as a sequential object: absent, or present with a partition
//! count and topic config overrides. Walking its operations in order, the checker keeps every
//! state the topic could be in: an acknowledged change is applied (a state in which it could
//! not have succeeded is dropped), a definite refusal changes nothing, and an operation whose
//! answer never came may or may not have happened (both states are kept). The final state
//! must be one of them, exactly: an acknowledged change that is missing, a topic with fewer
//! partitions than any sequence of its operations gives, or half of a config change, all fail.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{AdminChange, Entry, Event};

/// One topic's metadata: partition count and overrides; `None` when it does not exist.
pub type TopicState = Option<(i32, BTreeMap<String, String>)>;

/// What the final Metadata and DescribeConfigs showed for the admin topics.
pub type FinalMetadata = BTreeMap<String, (i32, BTreeMap<String, String>)>;

/// Bound on the states kept per topic; every indeterminate operation can double them.
const MAX_STATES: usize = 4096;

/// The state after `change` from `state`, or `None` if it cannot succeed from there.
fn apply(state: &TopicState, change: &AdminChange) -> Option<TopicState> {
    match (state, change) {
        (
            None,
            AdminChange::CreateTopic {
                partitions,
                configs,
                ..
            },
        ) => Some(Some((*partitions, configs.clone()))),
        (Some(_), AdminChange::DeleteTopic { .. }) => Some(None),
        (Some((n, configs)), AdminChange::CreatePartitions { count, .. }) if count > n => {
            Some(Some((*count, configs.clone())))
        }
        (Some((n, configs)), AdminChange::AlterConfigs { changes, .. }) => {
            let mut configs = configs.clone();
            for (k, v) in changes {
                match v {
                    Some(v) => configs.insert(k.clone(), v.clone()),
                    None => configs.remove(k),
                };
            }
            Some(Some((*n, configs)))
        }
        _ => None,
    }
}

/// A state the topic may be in, with the operations still in flight there (invoked, not yet
/// taken effect): each may take effect at any later point, or never if its answer never came.
type Candidate = (TopicState, BTreeSet<u64>);

/// Every state reachable by letting in-flight operations take effect (in any order). `false`
/// when the bound was hit.
fn close(states: &mut BTreeSet<Candidate>, changes: &BTreeMap<u64, &AdminChange>) -> bool {
    let mut frontier: Vec<Candidate> = states.iter().cloned().collect();
    while let Some((state, pending)) = frontier.pop() {
        for op in &pending {
            // An operation that cannot succeed from here is refused there: no new state.
            let Some(next) = apply(&state, changes[op]) else {
                continue;
            };
            let mut rest = pending.clone();
            rest.remove(op);
            let candidate = (next, rest);
            if !states.contains(&candidate) {
                if states.len() >= MAX_STATES {
                    return false;
                }
                states.insert(candidate.clone());
                frontier.push(candidate);
            }
        }
    }
    true
}

/// Violations, one line each (empty when the final metadata is consistent with the history).
///
/// An operation takes effect at one instant between its invoke and its answer — or, when no
/// answer came (a time-out, a dropped connection), at any instant after its invoke, even after
/// later operations were acknowledged: a request stuck on a cut-off broker may still be
/// forwarded and committed once the network heals.
/// Admin requests a broker answered NOT_CONTROLLER, with their time: librdkafka hands that
/// error to the application, where a Kafka broker would have held the request for the next
/// controller.
pub fn not_controller(entries: &[Entry]) -> Vec<(u64, String)> {
    entries
        .iter()
        .filter_map(|e| match &e.event {
            Event::AdminFail { op, error, .. } if error.contains("NotController") => {
                Some((e.at_ms, format!("op {op} at {} ms: {error}", e.at_ms)))
            }
            _ => None,
        })
        .collect()
}

pub fn check(entries: &[Entry], final_metadata: &FinalMetadata) -> Vec<String> {
    let mut changes: BTreeMap<u64, &AdminChange> = BTreeMap::new();
    let mut states: BTreeMap<&str, BTreeSet<Candidate>> = BTreeMap::new();
    let mut gave_up: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for entry in entries {
        let (op, outcome) = match &entry.event {
            Event::AdminInvoke { op, change } => {
                changes.insert(*op, change);
                let current = states
                    .entry(change.topic())
                    .or_insert_with(|| BTreeSet::from([(None, BTreeSet::new())]));
                *current = current
                    .iter()
                    .map(|(s, pending)| {
                        let mut pending = pending.clone();
                        pending.insert(*op);
                        (s.clone(), pending)
                    })
                    .collect();
                continue;
            }
            Event::AdminAck { op } => (op, Some(true)),
            Event::AdminFail { op, definite, .. } => (op, (*definite).then_some(false)),
            _ => continue,
        };
        let Some(&change) = changes.get(op) else {
            continue;
        };
        let topic = change.topic();
        if gave_up.contains(topic) {
            continue;
        }
        let current = states.get_mut(topic).expect("invoked before answered");
        if !close(current, &changes) {
            gave_up.insert(topic);
            continue;
        }
        let next: BTreeSet<Candidate> = match outcome {
            // Took effect: now, where it is still in flight, or earlier, where it is not.
            Some(true) => current
                .iter()
                .filter_map(|(s, pending)| {
                    if pending.contains(op) {
                        let mut rest = pending.clone();
                        rest.remove(op);
                        apply(s, change).map(|next| (next, rest))
                    } else {
                        Some((s.clone(), pending.clone()))
                    }
                })
                .collect(),
            // Definitely never took effect: only the states where it is still in flight.
            Some(false) => current
                .iter()
                .filter(|(_, pending)| pending.contains(op))
                .map(|(s, pending)| {
                    let mut rest = pending.clone();
                    rest.remove(op);
                    (s.clone(), rest)
                })
                .collect(),
            // No answer: it stays in flight (it may take effect later, or never).
            None => current.clone(),
        };
        if next.is_empty() {
            out.push(format!(
                "{topic}: the broker acknowledged {change:?}, which no earlier state allows"
            ));
            gave_up.insert(topic);
        }
        *current = next;
    }
    for (topic, possible) in &mut states {
        if gave_up.contains(topic) || !close(possible, &changes) {
            continue;
        }
        let actual: TopicState = final_metadata.get(*topic).cloned();
        if !possible.iter().any(|(s, _)| *s == actual) {
            let shown: Vec<String> = possible
                .iter()
                .map(|(s, _)| s)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .take(4)
                .map(|s| format!("{s:?}"))
                .collect();
            out.push(format!(
                "{topic}: final metadata {actual:?}, but the operations allow only {}",
                shown.join(" or ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(event: Event) -> Entry {
        Entry { at_ms: 0, event }
    }

    fn create(op: u64, topic: &str, partitions: i32) -> Entry {
        at(Event::AdminInvoke {
            op,
            change: AdminChange::CreateTopic {
                topic: topic.into(),
                partitions,
                configs: BTreeMap::new(),
            },
        })
    }

    fn ack(op: u64) -> Entry {
        at(Event::AdminAck { op })
    }

    fn lost(op: u64) -> Entry {
        at(Event::AdminFail {
            op,
            definite: false,
            error: "timed out".into(),
        })
    }

    fn alter(op: u64, topic: &str, kv: &[(&str, Option<&str>)]) -> Entry {
        at(Event::AdminInvoke {
            op,
            change: AdminChange::AlterConfigs {
                topic: topic.into(),
                changes: kv
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                    .collect(),
            },
        })
    }

    fn state(partitions: i32, configs: &[(&str, &str)]) -> (i32, BTreeMap<String, String>) {
        (
            partitions,
            configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn acknowledged_changes_must_hold() {
        let entries = vec![
            create(1, "a", 2),
            ack(1),
            at(Event::AdminInvoke {
                op: 2,
                change: AdminChange::CreatePartitions {
                    topic: "a".into(),
                    count: 4,
                },
            }),
            ack(2),
        ];
        let good = FinalMetadata::from([("a".to_string(), state(4, &[]))]);
        assert!(check(&entries, &good).is_empty());
        // The acknowledged growth is missing.
        let bad = FinalMetadata::from([("a".to_string(), state(2, &[]))]);
        assert_eq!(check(&entries, &bad).len(), 1);
        // The acknowledged topic is gone.
        assert_eq!(check(&entries, &FinalMetadata::new()).len(), 1);
    }

    #[test]
    fn an_unanswered_change_is_all_or_nothing() {
        let entries = vec![
            create(1, "a", 1),
            ack(1),
            alter(
                2,
                "a",
                &[("retention.ms", Some("5")), ("segment.ms", Some("6"))],
            ),
            lost(2),
            create(3, "b", 3),
            lost(3),
        ];
        let none = FinalMetadata::from([("a".to_string(), state(1, &[]))]);
        assert!(check(&entries, &none).is_empty());
        let all = FinalMetadata::from([
            (
                "a".to_string(),
                state(1, &[("retention.ms", "5"), ("segment.ms", "6")]),
            ),
            ("b".to_string(), state(3, &[])),
        ]);
        assert!(check(&entries, &all).is_empty());
        // Half a config change, and a topic with fewer partitions than requested.
        let half = FinalMetadata::from([
            ("a".to_string(), state(1, &[("retention.ms", "5")])),
            ("b".to_string(), state(2, &[])),
        ]);
        assert_eq!(check(&entries, &half).len(), 2);
    }

    #[test]
    fn a_definite_refusal_changes_nothing() {
        let entries = vec![
            create(1, "a", 1),
            at(Event::AdminFail {
                op: 1,
                definite: true,
                error: "invalid".into(),
            }),
        ];
        assert!(check(&entries, &FinalMetadata::new()).is_empty());
        let appeared = FinalMetadata::from([("a".to_string(), state(1, &[]))]);
        assert_eq!(check(&entries, &appeared).len(), 1);
    }

    /// A delete that timed out may still commit after later changes were acknowledged (it was
    /// stuck on a cut-off broker, forwarded once the network healed): quorum-3-partitions seed
    /// 146. A delete acknowledged before an acknowledged change is still a violation.
    #[test]
    fn an_unanswered_change_may_take_effect_after_later_ones() {
        let delete = |op| {
            at(Event::AdminInvoke {
                op,
                change: AdminChange::DeleteTopic { topic: "a".into() },
            })
        };
        let entries = vec![
            create(1, "a", 1),
            ack(1),
            delete(2),
            lost(2),
            alter(3, "a", &[("retention.ms", Some("5"))]),
            ack(3),
        ];
        assert!(check(&entries, &FinalMetadata::new()).is_empty());
        let kept = FinalMetadata::from([("a".to_string(), state(1, &[("retention.ms", "5")]))]);
        assert!(check(&entries, &kept).is_empty());
        let acked = vec![
            create(1, "a", 1),
            ack(1),
            delete(2),
            ack(2),
            alter(3, "a", &[("retention.ms", Some("5"))]),
            ack(3),
        ];
        assert_eq!(check(&acked, &FinalMetadata::new()).len(), 1);
    }
}
