//! One member's step towards its target assignment (Kafka's `CurrentAssignmentBuilder`):
//! revoke first, and take a partition only once nobody else holds it. The member stays at its
//! epoch while it must revoke, so its commits and fetches stay valid until it has let go.

use uuid::Uuid;

use super::types::{Assignment, MemberState};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Reconciled {
    pub epoch: i32,
    pub previous_epoch: i32,
    pub state: MemberState,
    /// What the member may hold (and is told it holds).
    pub assigned: Assignment,
    /// What it still holds but must give up.
    pub revoking: Assignment,
}

/// Whether the member, by its own report, still holds any of `revoking` (`None`: it did not say,
/// so assume it does).
fn still_holds(owned: Option<&Assignment>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else {
        return !revoking.is_empty();
    };
    owned.iter().any(|(t, ps)| {
        revoking
            .get(t)
            .is_some_and(|r| ps.iter().any(|p| r.contains(p)))
    })
}

/// The member's next step. `is_free(t, p)`: no other member holds the partition.
pub(super) fn next(
    current: &Reconciled,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
    is_free: impl Fn(Uuid, i32) -> bool,
) -> Reconciled {
    match current.state {
        MemberState::Stable if current.epoch == target_epoch => current.clone(),
        MemberState::UnrevokedPartitions if still_holds(owned, &current.revoking) => {
            current.clone()
        }
        _ => compute(current, target_epoch, target, owned, is_free),
    }
}

fn compute(
    current: &Reconciled,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&Assignment>,
    is_free: impl Fn(Uuid, i32) -> bool,
) -> Reconciled {
    let mut kept = Assignment::new();
    let mut revoking = Assignment::new();
    let mut granted = Assignment::new();
    let mut unreleased = false;
    let topics: std::collections::BTreeSet<Uuid> = target
        .keys()
        .chain(current.assigned.keys())
        .copied()
        .collect();
    let empty = Default::default();
    for t in topics {
        let want = target.get(&t).unwrap_or(&empty);
        let have = current.assigned.get(&t).unwrap_or(&empty);
        let k: std::collections::BTreeSet<i32> = have.intersection(want).copied().collect();
        let r: std::collections::BTreeSet<i32> = have.difference(want).copied().collect();
        let mut g = std::collections::BTreeSet::new();
        for &p in want.difference(have) {
            if is_free(t, p) {
                g.insert(p);
            } else {
                unreleased = true;
            }
        }
        if !k.is_empty() {
            kept.insert(t, k);
        }
        if !r.is_empty() {
            revoking.insert(t, r);
        }
        if !g.is_empty() {
            granted.insert(t, g);
        }
    }
    if !revoking.is_empty() && still_holds(owned, &revoking) {
        // Give up first; the epoch moves only once the member says it has.
        return Reconciled {
            epoch: current.epoch,
            previous_epoch: current.epoch,
            state: MemberState::UnrevokedPartitions,
            assigned: kept,
            revoking,
        };
    }
    let mut assigned = kept;
    for (t, ps) in granted {
        assigned.entry(t).or_default().extend(ps);
    }
    Reconciled {
        epoch: target_epoch,
        previous_epoch: current.epoch,
        state: if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        },
        assigned,
        revoking: Assignment::new(),
    }
}
