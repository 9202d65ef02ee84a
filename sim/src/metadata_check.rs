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

/// Violations, one line each (empty when the final metadata is consistent with the history).
pub fn check(entries: &[Entry], final_metadata: &FinalMetadata) -> Vec<String> {
    let mut changes: BTreeMap<u64, &AdminChange> = BTreeMap::new();
    let mut states: BTreeMap<&str, BTreeSet<TopicState>> = BTreeMap::new();
    let mut gave_up: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for entry in entries {
        let (op, outcome) = match &entry.event {
            Event::AdminInvoke { op, change } => {
                changes.insert(*op, change);
                states
                    .entry(change.topic())
                    .or_insert_with(|| BTreeSet::from([None]));
                continue;
            }
            Event::AdminAck { op } => (op, Some(true)),
            Event::AdminFail { op, definite, .. } => (op, (*definite).then_some(false)),
            _ => continue,
        };
        let Some(change) = changes.get(op) else {
            continue;
        };
        let topic = change.topic();
        let current = states.get_mut(topic).expect("invoked before answered");
        let next: BTreeSet<TopicState> = match outcome {
            Some(true) => current.iter().filter_map(|s| apply(s, change)).collect(),
            Some(false) => current.clone(),
            None => current
                .iter()
                .cloned()
                .chain(current.iter().filter_map(|s| apply(s, change)))
                .collect(),
        };
        if next.is_empty() {
            out.push(format!(
                "{topic}: the broker acknowledged {change:?}, which no earlier state allows"
            ));
            gave_up.insert(topic);
        }
        if next.len() > MAX_STATES {
            gave_up.insert(topic);
        }
        *current = next;
    }
    for (topic, possible) in &states {
        if gave_up.contains(topic) {
            continue;
        }
        let actual: TopicState = final_metadata.get(*topic).cloned();
        if !possible.contains(&actual) {
            let shown: Vec<String> = possible.iter().take(4).map(|s| format!("{s:?}")).collect();
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
}
