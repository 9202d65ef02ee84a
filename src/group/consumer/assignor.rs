//! Server-side assignors (`group.consumer.assignors`): `uniform` (balanced and sticky, Kafka's
//! default) and `range` (contiguous ranges per topic, in member-id order). Both are pure
//! functions of the members' subscriptions, the topics and the previous target; BTreeMaps keep
//! every choice deterministic.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::types::Assignment;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Assignor {
    Uniform,
    Range,
}

impl Assignor {
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    pub fn parse(name: &str) -> Option<Assignor> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            _ => None,
        }
    }

    /// The target assignment: every partition of a subscribed topic goes to exactly one member
    /// subscribed to it. `members`: member id → (subscribed topic ids, previous target).
    pub(super) fn assign(
        self,
        members: &BTreeMap<String, (BTreeSet<Uuid>, Assignment)>,
        topics: &BTreeMap<Uuid, i32>,
    ) -> BTreeMap<String, Assignment> {
        let result = match self {
            Assignor::Uniform => uniform(members, topics),
            Assignor::Range => range(members, topics),
        };
        check(members, topics, &result);
        result
    }
}

type Tp = (Uuid, i32);

fn load(a: &BTreeSet<Tp>) -> usize {
    a.len()
}

fn to_assignment(set: &BTreeSet<Tp>) -> Assignment {
    let mut out = Assignment::new();
    for (t, p) in set {
        out.entry(*t).or_default().insert(*p);
    }
    out
}

/// Sticky first (a member keeps what it had if still subscribed), then unowned partitions to the
/// least-loaded subscriber, then moves from the most to the least loaded until no eligible pair
/// differs by more than one.
fn uniform(
    members: &BTreeMap<String, (BTreeSet<Uuid>, Assignment)>,
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut held: BTreeMap<&str, BTreeSet<Tp>> = members
        .keys()
        .map(|m| (m.as_str(), BTreeSet::new()))
        .collect();
    let mut taken: BTreeSet<Tp> = BTreeSet::new();
    for (id, (subscribed, previous)) in members {
        for (t, ps) in previous {
            let Some(&n) = topics.get(t) else { continue };
            if !subscribed.contains(t) {
                continue;
            }
            for &p in ps {
                if p < n && taken.insert((*t, p)) {
                    held.get_mut(id.as_str()).unwrap().insert((*t, p));
                }
            }
        }
    }
    let wanted: BTreeSet<Uuid> = members
        .values()
        .flat_map(|(s, _)| s.iter().copied())
        .collect();
    for t in &wanted {
        let Some(&n) = topics.get(t) else { continue };
        for p in 0..n {
            if taken.contains(&(*t, p)) {
                continue;
            }
            let Some(to) = members
                .iter()
                .filter(|(_, (s, _))| s.contains(t))
                .map(|(id, _)| id.as_str())
                .min_by_key(|id| (load(&held[id]), *id))
            else {
                continue;
            };
            held.get_mut(to).unwrap().insert((*t, p));
            taken.insert((*t, p));
        }
    }
    // Each move lowers the sum of squared loads, so this ends; the bound is a backstop.
    let bound = taken.len() * members.len().max(1) + 1;
    for _ in 0..bound {
        let mut by_load: Vec<&str> = held.keys().copied().collect();
        by_load.sort_by_key(|id| (load(&held[id]), *id));
        let mut moved = false;
        'search: for heavy in by_load.iter().rev() {
            for light in &by_load {
                if load(&held[heavy]) <= load(&held[light]) + 1 {
                    break;
                }
                let subscribed = &members[*light].0;
                if let Some(&tp) = held[heavy]
                    .iter()
                    .rev()
                    .find(|(t, _)| subscribed.contains(t))
                {
                    held.get_mut(heavy).unwrap().remove(&tp);
                    held.get_mut(light).unwrap().insert(tp);
                    moved = true;
                    break 'search;
                }
            }
        }
        if !moved {
            break;
        }
    }
    held.into_iter()
        .map(|(id, set)| (id.to_string(), to_assignment(&set)))
        .collect()
}

/// Per topic, its subscribers in member-id order each get a contiguous range: ⌊n/m⌋
/// partitions, the first n mod m one more.
fn range(
    members: &BTreeMap<String, (BTreeSet<Uuid>, Assignment)>,
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (t, &n) in topics {
        let subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, (s, _))| s.contains(t))
            .map(|(id, _)| id)
            .collect();
        if subscribers.is_empty() || n <= 0 {
            continue;
        }
        let m = subscribers.len() as i32;
        let (base, extra) = (n / m, n % m);
        let mut next = 0;
        for (i, id) in subscribers.into_iter().enumerate() {
            let count = base + i32::from((i as i32) < extra);
            if count > 0 {
                out.get_mut(id)
                    .unwrap()
                    .insert(*t, (next..next + count).collect());
            }
            next += count;
        }
        debug_assert_eq!(next, n);
    }
    out
}

/// Every subscribed partition assigned exactly once, only to a subscriber.
fn check(
    members: &BTreeMap<String, (BTreeSet<Uuid>, Assignment)>,
    topics: &BTreeMap<Uuid, i32>,
    result: &BTreeMap<String, Assignment>,
) {
    let mut seen = BTreeSet::new();
    for (id, a) in result {
        for (t, ps) in a {
            assert!(members[id].0.contains(t), "assigned an unsubscribed topic");
            for &p in ps {
                assert!(
                    p >= 0 && p < topics[t],
                    "assigned a partition that does not exist"
                );
                assert!(seen.insert((*t, p)), "partition {t}-{p} assigned twice");
            }
        }
    }
    let wanted: usize = topics
        .iter()
        .filter(|(t, _)| members.values().any(|(s, _)| s.contains(t)))
        .map(|(_, &n)| n.max(0) as usize)
        .sum();
    assert_eq!(
        seen.len(),
        wanted,
        "some subscribed partition left unassigned"
    );
}
