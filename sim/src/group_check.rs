//! Consumer groups in the history, and the checks on them (groups.md §8):
//!
//! - **group-ownership** (S3): classic groups: no partition is assigned to two members of one
//!   group in the same generation (from every SyncGroup answer a member got). KIP-848 groups:
//!   a partition reaches a new owner only after the previous one let go or was fenced. A member
//!   cannot see the second (a stalled member still believes it owns what it had), so what is
//!   judged is what the coordinator let it do: a commit of partition P that the coordinator
//!   accepted from member N, sent after another member M was handed P while N, by its own
//!   account, owned P since before that, is two owners at once. (A zombie may still *process*
//!   records; at-least-once tolerates that, and Kafka does not fence fetches.)
//! - **group-offsets** (S4, S5, S6): a group's committed offsets never go backwards. Each
//!   acknowledged commit and each observed OffsetFetch answer raises a floor; a commit the
//!   coordinator accepted, or an OffsetFetch answer, that was *sent* after the floor was
//!   known must not be below it. Members commit after processing and never seek, and a new
//!   owner starts from the committed offset, so only a commit from a fenced member (a stale
//!   generation) or a lost commit can lower it.
//! - **group-delivery** (L3): every acknowledged record still in the log at the end was
//!   processed by some member of every group, once the faults healed and the members drained.
//! - **group-settle** (L2): at the end every member of a group is in one generation, their
//!   partitions are disjoint and cover the topic, and that generation began within the bound
//!   after healing; for a KIP-848 group the coordinator agrees (ConsumerGroupDescribe: Stable,
//!   the assignment epoch at the group epoch, every member at it, so no revocation pending).

use std::collections::{BTreeMap, BTreeSet};

use crate::checker::FinalRead;
use crate::history::{Entry, Event};
use crate::partition_trace::PartitionEvent;
use crate::scenario::Check;

/// How a member stopped being one (churn the workload injects before healing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Churn {
    /// Sent LeaveGroup and went away; comes back later as a new member.
    Leave,
    /// Vanished without a word (its session expires); comes back later as a new member.
    Crash,
    /// Stopped heartbeating past its session timeout between processing and committing (a
    /// long GC pause); then goes on with its old generation, as a paused consumer does.
    Stall,
}

/// Serialized for history files (`history_file`), tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GroupEvent {
    /// A member's SyncGroup was answered: its partitions in `generation`.
    Assigned {
        group: u32,
        member: String,
        member_id: String,
        generation: i32,
        partitions: Vec<i32>,
    },
    /// KIP-848: what a member believes it owns now, at `epoch` (0: not in the group): after a
    /// heartbeat answer changed its assignment or epoch, after it dropped revoked partitions
    /// (before the heartbeat that reports them gone), and when it leaves, crashes or learns
    /// it was fenced (nothing).
    Owns {
        group: u32,
        member: String,
        member_id: String,
        epoch: i32,
        partitions: Vec<i32>,
    },
    /// A member processed a record.
    Read {
        group: u32,
        member: String,
        generation: i32,
        partition: i32,
        offset: i64,
        value: String,
    },
    /// A member processed a record it fetched as librdkafka does, which the replica that
    /// served it sent with `high_watermark` (the checker judges it as a consumer's read too:
    /// `uncommitted`, `lost-read`). A variant of its own so that the basic path's histories,
    /// and trace hashes, stay as they were.
    ReadServed {
        group: u32,
        member: String,
        generation: i32,
        partition: i32,
        offset: i64,
        value: String,
        high_watermark: i64,
    },
    /// A member commit was sent: (partition, next offset to process).
    Commit {
        op: u64,
        group: u32,
        member: String,
        generation: i32,
        offsets: Vec<(i32, i64)>,
    },
    CommitAck {
        op: u64,
    },
    CommitFail {
        op: u64,
        error: String,
    },
    /// The observer's OffsetFetch, sent at `invoked_ms`, answered now (committed partitions) by
    /// broker `coordinator` (-1: the one node of a single-node world).
    Offsets {
        group: u32,
        invoked_ms: u64,
        offsets: Vec<(i32, i64)>,
        coordinator: i32,
    },
    Churn {
        group: u32,
        member: String,
        what: Churn,
    },
    /// A member's call failed (what it does next follows from the error).
    Error {
        group: u32,
        member: String,
        call: String,
        error: String,
    },
    /// At the end, the coordinator's view of a KIP-848 group (ConsumerGroupDescribe).
    Described {
        group: u32,
        state: String,
        group_epoch: i32,
        assignment_epoch: i32,
        /// (member id, member epoch).
        member_epochs: Vec<(String, i32)>,
    },
    /// Every fault has healed; no more churn.
    Healed,
    /// At the end (multi-node): these partitions of the workload's topic are left leaderless on
    /// purpose (KIP-966: no eligible replica after unclean stops), so no group can consume
    /// them. Liveness (group-delivery, group-settle) is not judged; safety still is.
    Unavailable {
        partitions: Vec<i32>,
    },
    /// At the end: what the member holds (`None`: it is not in a generation).
    Final {
        group: u32,
        member: String,
        generation: Option<i32>,
        partitions: Vec<i32>,
    },
}

/// What the group checks found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupFindings {
    /// Partitions assigned twice in one generation (classic), or committed by a member after
    /// another was handed them (KIP-848).
    pub ownership: Vec<String>,
    /// Committed offsets that went backwards.
    pub offsets: Vec<String>,
    /// OffsetFetch answers below a known commit from a coordinator the committed metadata had
    /// already deposed (count, and examples): stale reads Kafka allows, not judged.
    pub stale_reads: usize,
    pub stale_examples: Vec<String>,
    /// Acknowledged records some group never processed (count, and examples).
    pub undelivered: usize,
    pub undelivered_examples: Vec<String>,
    /// Groups not settled at the end, or settled too late.
    pub unsettled: Vec<String>,
    /// Per group: ms from healing to the generation the group ended in (0 if it was already
    /// in it). The figure behind `group-settle`.
    pub settle_ms: Vec<(u32, u64)>,
    /// Commits acknowledged, and records processed, by all groups.
    pub commits_acked: usize,
    pub processed: usize,
    pub evidence_ms: BTreeMap<Check, u64>,
}

/// The group id of workload group `group` (the checker places it on an offsets partition).
pub fn group_name(group: u32) -> String {
    format!("group-{group}")
}

/// Bound on examples kept per anomaly.
const EXAMPLES: usize = 20;

/// An offset the broker gave out for one partition (an accepted commit, an OffsetFetch
/// answer): (sent at, offset, what it was, answered at, the broker that answered an
/// OffsetFetch in a cluster).
type Claim = (u64, i64, String, u64, Option<i32>);
type Claims = BTreeMap<(u32, i32), Vec<Claim>>;
/// What a member held at the end: (member, generation, partitions).
type FinalState<'a> = (&'a str, Option<i32>, &'a [i32]);
type Finals<'a> = BTreeMap<u32, Vec<FinalState<'a>>>;

impl GroupFindings {
    fn evidence(&mut self, check: Check, at: u64) {
        let t = self.evidence_ms.entry(check).or_insert(at);
        *t = (*t).min(at);
    }
}

/// What the settle check needs to know about the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    pub groups: u32,
    pub members: u32,
    pub partitions: i32,
    pub settle_bound_ms: u64,
}

pub fn check(
    entries: &[Entry],
    final_read: Option<&FinalRead>,
    expected: Expected,
) -> GroupFindings {
    let mut f = GroupFindings::default();
    let end = entries.last().map_or(0, |e| e.at_ms);
    // (group, generation) → partition → member id.
    let mut owners: BTreeMap<(u32, i32), BTreeMap<i32, &str>> = BTreeMap::new();
    // (group, generation) → when its first assignment was answered.
    let mut generation_start: BTreeMap<(u32, i32), u64> = BTreeMap::new();
    // Commits sent: op → (group, member, generation, offsets, sent at).
    type Sent<'a> = (u32, &'a str, i32, &'a [(i32, i64)], u64);
    let mut commits: BTreeMap<u64, Sent> = BTreeMap::new();
    // (group, partition) → floor raises (known at, offset) and claims to judge
    // (sent at, offset, what).
    let mut raises: BTreeMap<(u32, i32), Vec<(u64, i64)>> = BTreeMap::new();
    let mut claims: Claims = BTreeMap::new();
    let mut processed: BTreeMap<u32, BTreeSet<&str>> = BTreeMap::new();
    let mut finals: Finals = BTreeMap::new();
    let mut healed_ms = None;
    let mut unavailable = false;
    // KIP-848: (group, member) → partition → since when it has owned it without a break;
    // (group, partition) → when a member was handed it; commits sent after a handover of one of
    // their partitions to another member: op → why.
    let mut holding: BTreeMap<(u32, &str), BTreeMap<i32, u64>> = BTreeMap::new();
    let mut handovers: BTreeMap<(u32, i32), Vec<(u64, &str)>> = BTreeMap::new();
    let mut suspect: BTreeMap<u64, String> = BTreeMap::new();
    // KIP-848 groups the observer described at the end: why each is not settled, if it is not.
    let mut described: BTreeMap<u32, Option<String>> = BTreeMap::new();
    // Produced values: op → values, and the acknowledged ones.
    let mut ops: BTreeMap<u64, &[String]> = BTreeMap::new();
    let mut acked: Vec<&str> = Vec::new();
    let mut coordinators = Coordinators::default();
    for entry in entries {
        let at = entry.at_ms;
        let g = match &entry.event {
            Event::Invoke { op, values, .. } => {
                ops.insert(*op, values.as_slice());
                continue;
            }
            Event::Ack { op, .. } => {
                // The liveness probe's records (op in the top range) are written after the
                // members stopped; they are not the workload's.
                if op >> 32 != u32::MAX as u64 {
                    if let Some(values) = ops.get(op) {
                        acked.extend(values.iter().map(String::as_str));
                    }
                }
                continue;
            }
            Event::Group(g) => g,
            Event::Partition(PartitionEvent::CoordinatorLeader {
                partition,
                partitions,
                leader,
                epoch,
            }) => {
                coordinators.partitions = coordinators.partitions.max(*partitions);
                coordinators
                    .leaders
                    .entry(*partition)
                    .or_default()
                    .push((at, *leader, *epoch));
                continue;
            }
            _ => continue,
        };
        match g {
            GroupEvent::Assigned {
                group,
                member_id,
                generation,
                partitions,
                ..
            } => {
                generation_start.entry((*group, *generation)).or_insert(at);
                let owned = owners.entry((*group, *generation)).or_default();
                for p in partitions {
                    match owned.get(p) {
                        Some(other) if *other != member_id.as_str() => {
                            f.evidence(Check::GroupOwnership, at);
                            if f.ownership.len() < EXAMPLES {
                                f.ownership.push(format!(
                                    "group {group} generation {generation}: partition {p} assigned to {other} and {member_id}"
                                ));
                            }
                        }
                        _ => {
                            owned.insert(*p, member_id.as_str());
                        }
                    }
                }
            }
            GroupEvent::Owns {
                group,
                member,
                epoch,
                partitions,
                ..
            } => {
                if *epoch > 0 {
                    generation_start.entry((*group, *epoch)).or_insert(at);
                }
                let held = holding.entry((*group, member.as_str())).or_default();
                let mut now: BTreeMap<i32, u64> = BTreeMap::new();
                for p in partitions {
                    let since = held.get(p).copied().unwrap_or_else(|| {
                        handovers
                            .entry((*group, *p))
                            .or_default()
                            .push((at, member.as_str()));
                        at
                    });
                    now.insert(*p, since);
                }
                *held = now;
            }
            GroupEvent::Read { group, value, .. } | GroupEvent::ReadServed { group, value, .. } => {
                f.processed += 1;
                processed.entry(*group).or_default().insert(value.as_str());
            }
            GroupEvent::Commit {
                op,
                group,
                member,
                generation,
                offsets,
            } => {
                commits.insert(*op, (*group, member.as_str(), *generation, offsets, at));
                let Some(held) = holding.get(&(*group, member.as_str())) else {
                    continue;
                };
                for (p, _) in offsets.iter() {
                    let Some(&since) = held.get(p) else { continue };
                    let list = handovers.get(&(*group, *p)).map(Vec::as_slice);
                    let taken = list
                        .unwrap_or_default()
                        .iter()
                        .find(|(t, other)| *other != member.as_str() && since < *t && *t < at);
                    if let Some((t, other)) = taken {
                        suspect.entry(*op).or_insert(format!(
                            "group {group} partition {p}: {member} (owning it since {since} ms) committed at epoch {generation}, sent at {at} ms, after {other} was handed it at {t} ms"
                        ));
                    }
                }
            }
            GroupEvent::CommitAck { op } => {
                f.commits_acked += 1;
                if let Some(why) = suspect.get(op) {
                    f.evidence(Check::GroupOwnership, at);
                    if f.ownership.len() < EXAMPLES {
                        f.ownership.push(format!("{why}, accepted at {at} ms"));
                    }
                }
                let Some(&(group, member, generation, offsets, sent)) = commits.get(op) else {
                    continue;
                };
                for &(p, o) in offsets {
                    raises.entry((group, p)).or_default().push((at, o));
                    claims.entry((group, p)).or_default().push((
                        sent,
                        o,
                        format!("commit of {o} by {member} (generation {generation}) sent at {sent} ms, accepted at {at} ms"),
                        at,
                        None,
                    ));
                }
            }
            GroupEvent::CommitFail { .. } => {}
            GroupEvent::Offsets {
                group,
                invoked_ms,
                offsets,
                coordinator,
            } => {
                let by = (*coordinator >= 0).then_some(*coordinator);
                let whom = by.map_or(String::new(), |b| format!(" by broker {b}"));
                for &(p, o) in offsets {
                    raises.entry((*group, p)).or_default().push((at, o));
                    claims.entry((*group, p)).or_default().push((
                        *invoked_ms,
                        o,
                        format!(
                            "OffsetFetch sent at {invoked_ms} ms answered {o}{whom} at {at} ms"
                        ),
                        at,
                        by,
                    ));
                }
            }
            GroupEvent::Churn { .. } | GroupEvent::Error { .. } => {}
            GroupEvent::Healed => {
                healed_ms.get_or_insert(at);
            }
            GroupEvent::Unavailable { .. } => unavailable = true,
            GroupEvent::Described {
                group,
                state,
                group_epoch,
                assignment_epoch,
                member_epochs,
            } => {
                // The last description counts (the observer may retry its final round).
                let behind: Vec<&(String, i32)> = member_epochs
                    .iter()
                    .filter(|(_, e)| e != group_epoch)
                    .collect();
                let settled = state == "Stable"
                    && assignment_epoch == group_epoch
                    && behind.is_empty()
                    && member_epochs.len() == expected.members as usize;
                described.insert(
                    *group,
                    (!settled).then(|| {
                        format!(
                            "group {group}: the coordinator says {state}, group epoch {group_epoch}, assignment epoch {assignment_epoch}, {} members, behind the group epoch {behind:?}",
                            member_epochs.len()
                        )
                    }),
                );
            }
            GroupEvent::Final {
                group,
                member,
                generation,
                partitions,
            } => finals.entry(*group).or_default().push((
                member.as_str(),
                *generation,
                partitions.as_slice(),
            )),
        }
    }
    check_floors(&raises, &claims, &coordinators, &mut f);
    if let Some(read) = final_read.filter(|_| !unavailable) {
        check_delivery(&acked, read, &processed, expected, end, &mut f);
        check_settled(&finals, &generation_start, healed_ms, expected, end, &mut f);
        for why in described.into_values().flatten() {
            f.evidence(Check::GroupSettle, end);
            if f.unsettled.len() < EXAMPLES {
                f.unsettled.push(why);
            }
        }
    }
    f
}

/// Each claim (a value the broker gave out, sent at some time) must be at least every floor
/// raise known before it was sent.
/// The committed leaders of the `__consumer_offsets` partitions, as the trace saw them.
#[derive(Default)]
struct Coordinators {
    /// The offsets topic's partition count (the largest seen: it grows as it is created).
    partitions: i32,
    /// Offsets partition → (seen at, leader, leader epoch), in run order.
    leaders: BTreeMap<i32, Vec<(u64, i32, i32)>>,
}

impl Coordinators {
    /// Whether broker `by`, answering `group`'s OffsetFetch sent at `sent`, had been deposed:
    /// the newest leader of the group's offsets partition seen by `sent` is another broker (or
    /// none), at epoch E, and `by` is never seen leading the partition at E or later, anywhere
    /// in the run. The trace's times only bound a commit from above (it is fed every 100 ms
    /// while the faults run and again at the end, not while the workloads finish after
    /// healing), so a later election of `by` may have begun before its answer: one anywhere
    /// in the run withholds the excuse. Such a deposed coordinator answers from the state it
    /// had when it last led: Kafka's brokers act on their metadata image, with no lease, until
    /// a newer image reaches them. Returns the deposing leader and epoch.
    fn deposed(&self, group: u32, by: i32, sent: u64) -> Option<(i32, i32)> {
        if self.partitions <= 0 {
            return None;
        }
        let p = weir::group::placement::partition_for(&group_name(group), self.partitions);
        let list = self.leaders.get(&p)?;
        let &(_, leader, epoch) = list.iter().take_while(|(t, _, _)| *t <= sent).last()?;
        let again = list.iter().any(|&(_, l, e)| l == by && e >= epoch);
        (leader != by && !again).then_some((leader, epoch))
    }
}

fn check_floors(
    raises: &BTreeMap<(u32, i32), Vec<(u64, i64)>>,
    claims: &Claims,
    coordinators: &Coordinators,
    f: &mut GroupFindings,
) {
    for (key, list) in claims {
        let mut known = raises.get(key).cloned().unwrap_or_default();
        known.sort_unstable();
        // Prefix maxima: the floor known by each raise's time.
        let mut floor = Vec::with_capacity(known.len());
        let mut top = i64::MIN;
        for &(t, o) in &known {
            top = top.max(o);
            floor.push((t, top));
        }
        // The last OffsetFetch answer is always judged: however stale reads came and went, the
        // run ends with the commit there to read, or the commit was lost.
        let last_fetch = list.iter().filter(|c| c.4.is_some()).map(|c| c.3).max();
        for (sent, offset, what, at, by) in list {
            let by = by.filter(|_| Some(*at) != last_fetch);
            // Raises strictly before the claim was sent.
            let i = floor.partition_point(|&(t, _)| t < *sent);
            if i == 0 {
                continue;
            }
            let (t, top) = floor[i - 1];
            let deposed = by.and_then(|b| coordinators.deposed(key.0, b, *sent));
            if let (true, Some((leader, epoch))) = (*offset < top, deposed) {
                f.stale_reads += 1;
                if f.stale_examples.len() < EXAMPLES {
                    f.stale_examples.push(format!(
                        "group {} partition {}: {what}, below {top} known at {t} ms; broker {leader} led the group's offsets partition at epoch {epoch} before it was sent",
                        key.0, key.1
                    ));
                }
                continue;
            }
            if *offset < top {
                f.evidence(Check::GroupOffsets, *at);
                if f.offsets.len() < EXAMPLES {
                    f.offsets.push(format!(
                        "group {} partition {}: {what}, below {top} known at {t} ms",
                        key.0, key.1
                    ));
                }
            }
        }
    }
}

fn check_delivery(
    acked: &[&str],
    read: &FinalRead,
    processed: &BTreeMap<u32, BTreeSet<&str>>,
    expected: Expected,
    end: u64,
    f: &mut GroupFindings,
) {
    if expected.groups == 0 {
        return;
    }
    let stored: BTreeSet<&str> = read
        .values()
        .flat_map(|r| r.records.iter().map(|(_, v)| v.as_str()))
        .collect();
    let empty = BTreeSet::new();
    for group in 0..expected.groups {
        let seen = processed.get(&group).unwrap_or(&empty);
        for v in acked {
            // A value missing from the log is `lost`'s business.
            if stored.contains(v) && !seen.contains(v) {
                f.undelivered += 1;
                if f.undelivered_examples.len() < EXAMPLES {
                    f.undelivered_examples.push(format!("group {group}: {v}"));
                }
            }
        }
    }
    if f.undelivered > 0 {
        f.evidence(Check::GroupDelivery, end);
    }
}

fn check_settled(
    finals: &Finals,
    generation_start: &BTreeMap<(u32, i32), u64>,
    healed_ms: Option<u64>,
    expected: Expected,
    end: u64,
    f: &mut GroupFindings,
) {
    let unsettled = |f: &mut GroupFindings, why: String| {
        f.evidence(Check::GroupSettle, end);
        if f.unsettled.len() < EXAMPLES {
            f.unsettled.push(why);
        }
    };
    for group in 0..expected.groups {
        let members = finals.get(&group).map(Vec::as_slice).unwrap_or_default();
        if members.len() != expected.members as usize {
            unsettled(
                f,
                format!(
                    "group {group}: {} of {} members reported at the end",
                    members.len(),
                    expected.members
                ),
            );
            continue;
        }
        let generations: BTreeSet<Option<i32>> = members.iter().map(|m| m.1).collect();
        let generation = match generations.iter().next() {
            Some(Some(g)) if generations.len() == 1 => *g,
            _ => {
                unsettled(
                    f,
                    format!("group {group}: members end in generations {generations:?}"),
                );
                continue;
            }
        };
        let mut owned: BTreeMap<i32, &str> = BTreeMap::new();
        let mut twice = Vec::new();
        for (member, _, partitions) in members {
            for p in *partitions {
                if let Some(other) = owned.insert(*p, member) {
                    twice.push(format!("{p} ({other}, {member})"));
                }
            }
        }
        let missing: Vec<i32> = (0..expected.partitions)
            .filter(|p| !owned.contains_key(p))
            .collect();
        if !twice.is_empty() || !missing.is_empty() {
            unsettled(
                f,
                format!(
                    "group {group} generation {generation}: partitions owned twice {twice:?}, owned by nobody {missing:?}"
                ),
            );
            continue;
        }
        let began = generation_start
            .get(&(group, generation))
            .copied()
            .unwrap_or(end);
        let healed = healed_ms.unwrap_or(end);
        let took = began.saturating_sub(healed);
        f.settle_ms.push((group, took));
        if took > expected.settle_bound_ms {
            unsettled(
                f,
                format!(
                    "group {group}: settled in generation {generation} {took} ms after healing (bound {} ms)",
                    expected.settle_bound_ms
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::PartitionRead;

    fn at(at_ms: u64, g: GroupEvent) -> Entry {
        Entry {
            at_ms,
            event: Event::Group(g),
        }
    }

    fn expected() -> Expected {
        Expected {
            groups: 1,
            members: 2,
            partitions: 2,
            settle_bound_ms: 1000,
        }
    }

    fn assigned(t: u64, id: &str, generation: i32, partitions: Vec<i32>) -> Entry {
        at(
            t,
            GroupEvent::Assigned {
                group: 0,
                member: id.into(),
                member_id: id.into(),
                generation,
                partitions,
            },
        )
    }

    fn commit(t: u64, op: u64, id: &str, generation: i32, offset: i64) -> [Entry; 2] {
        [
            at(
                t,
                GroupEvent::Commit {
                    op,
                    group: 0,
                    member: id.into(),
                    generation,
                    offsets: vec![(0, offset)],
                },
            ),
            at(t + 1, GroupEvent::CommitAck { op }),
        ]
    }

    #[test]
    fn one_partition_two_owners_in_a_generation_is_caught() {
        let entries = vec![
            assigned(1, "a", 1, vec![0]),
            assigned(2, "b", 1, vec![0, 1]),
            assigned(3, "b", 2, vec![0]),
        ];
        let f = check(&entries, None, expected());
        assert_eq!(f.ownership.len(), 1, "{:?}", f.ownership);
    }

    fn owns(t: u64, id: &str, epoch: i32, partitions: Vec<i32>) -> Entry {
        at(
            t,
            GroupEvent::Owns {
                group: 0,
                member: id.into(),
                member_id: id.into(),
                epoch,
                partitions,
            },
        )
    }

    #[test]
    fn a_kip848_commit_after_the_partition_moved_on_is_caught() {
        // `a` owns 0 from 10 ms and stalls; `b` is handed 0 at 100 ms.
        let base = vec![
            owns(10, "a", 1, vec![0, 1]),
            owns(20, "b", 2, vec![]),
            owns(100, "b", 3, vec![0]),
        ];
        // A commit of `a`'s sent before the handover and accepted after: no evidence.
        let mut early = base.clone();
        early.insert(2, commit(90, 1, "a", 1, 5)[0].clone());
        early.push(at(110, GroupEvent::CommitAck { op: 1 }));
        assert!(check(&early, None, expected()).ownership.is_empty());
        // Sent after it and refused (what the coordinator must do): nothing either.
        let mut refused = base.clone();
        refused.push(commit(200, 2, "a", 1, 7)[0].clone());
        refused.push(at(
            201,
            GroupEvent::CommitFail {
                op: 2,
                error: "UNKNOWN_MEMBER_ID".into(),
            },
        ));
        assert!(check(&refused, None, expected()).ownership.is_empty());
        // Sent after it and accepted: two owners at once.
        let mut accepted = base.clone();
        accepted.extend(commit(200, 3, "a", 1, 7));
        let f = check(&accepted, None, expected());
        assert_eq!(f.ownership.len(), 1, "{:?}", f.ownership);
        assert!(f.ownership[0].contains("after b was handed it at 100 ms"));
        // Partition 1 did not move: its commit is fine.
        let mut other = base.clone();
        other.push(at(
            200,
            GroupEvent::Commit {
                op: 4,
                group: 0,
                member: "a".into(),
                generation: 1,
                offsets: vec![(1, 9)],
            },
        ));
        other.push(at(201, GroupEvent::CommitAck { op: 4 }));
        assert!(check(&other, None, expected()).ownership.is_empty());
        // `a` let go and was handed 0 again after `b` revoked it: a new ownership, fine.
        let mut back = base;
        back.insert(2, owns(50, "a", 2, vec![1]));
        back.push(owns(150, "b", 4, vec![]));
        back.push(owns(160, "a", 5, vec![0, 1]));
        back.extend(commit(200, 5, "a", 5, 9));
        assert!(check(&back, None, expected()).ownership.is_empty());
    }

    #[test]
    fn the_coordinator_must_agree_a_kip848_group_settled() {
        let read: FinalRead = BTreeMap::new();
        let described = |state: &str, epochs: Vec<i32>| {
            let mut entries = vec![
                at(100, GroupEvent::Healed),
                owns(200, "a", 4, vec![0]),
                owns(201, "b", 4, vec![1]),
                at(
                    300,
                    GroupEvent::Final {
                        group: 0,
                        member: "a".into(),
                        generation: Some(4),
                        partitions: vec![0],
                    },
                ),
                at(
                    300,
                    GroupEvent::Final {
                        group: 0,
                        member: "b".into(),
                        generation: Some(4),
                        partitions: vec![1],
                    },
                ),
            ];
            entries.push(at(
                310,
                GroupEvent::Described {
                    group: 0,
                    state: state.into(),
                    group_epoch: 4,
                    assignment_epoch: 4,
                    member_epochs: epochs
                        .into_iter()
                        .enumerate()
                        .map(|(i, e)| (format!("m{i}"), e))
                        .collect(),
                },
            ));
            check(&entries, Some(&read), expected())
        };
        let f = described("Stable", vec![4, 4]);
        assert!(f.unsettled.is_empty(), "{:?}", f.unsettled);
        assert_eq!(f.settle_ms, vec![(0, 100)]);
        let f = described("Reconciling", vec![4, 3]);
        assert_eq!(f.unsettled.len(), 1, "{:?}", f.unsettled);
        assert!(f.unsettled[0].contains("Reconciling"), "{:?}", f.unsettled);
        // A member the clients do not know of (a zombie the coordinator still counts).
        assert_eq!(described("Stable", vec![4, 4, 4]).unsettled.len(), 1);
    }

    #[test]
    fn a_commit_sent_after_a_higher_one_was_acknowledged_is_caught() {
        let mut entries = Vec::new();
        entries.extend(commit(10, 1, "b", 2, 50));
        // Concurrent with the first: sent before it was acknowledged, so not judged by it.
        entries.extend(commit(10, 2, "a", 1, 40));
        let f = check(&entries, None, expected());
        assert!(f.offsets.is_empty(), "{:?}", f.offsets);
        entries.extend(commit(20, 3, "a", 1, 45));
        let f = check(&entries, None, expected());
        assert_eq!(f.offsets.len(), 1, "{:?}", f.offsets);
        // An observation below what was acknowledged before it was sent: a lost commit.
        let mut lost = commit(10, 1, "b", 2, 50).to_vec();
        lost.push(fetched(30, 20, 30, -1));
        assert_eq!(check(&lost, None, expected()).offsets.len(), 1);
    }

    fn fetched(t: u64, sent: u64, offset: i64, coordinator: i32) -> Entry {
        at(
            t,
            GroupEvent::Offsets {
                group: 0,
                invoked_ms: sent,
                offsets: vec![(0, offset)],
                coordinator,
            },
        )
    }

    /// A committed leader of `group-0`'s offsets partition (of 3: `group-0` is on partition 1).
    fn coordinator(t: u64, leader: i32, epoch: i32) -> Entry {
        assert_eq!(weir::group::placement::partition_for("group-0", 3), 1);
        Entry {
            at_ms: t,
            event: Event::Partition(PartitionEvent::CoordinatorLeader {
                partition: 1,
                partitions: 3,
                leader,
                epoch,
            }),
        }
    }

    #[test]
    fn a_deposed_coordinators_stale_answer_is_a_note_and_the_last_answer_is_judged() {
        // Broker 2 coordinates; broker 3 takes over at epoch 4 and accepts a commit of 50.
        let mut entries = vec![coordinator(5, 2, 3), coordinator(8, 3, 4)];
        entries.extend(commit(10, 1, "b", 2, 50));
        // Broker 2, not told yet, answers the old 30: stale, noted, not judged...
        entries.push(fetched(30, 20, 30, 2));
        // ...but the same answer from the current coordinator is a lost commit,
        entries.push(fetched(40, 35, 30, 3));
        entries.push(fetched(60, 55, 50, 3));
        let f = check(&entries, None, expected());
        assert_eq!(f.stale_reads, 1, "{:?}", f.stale_examples);
        assert_eq!(f.offsets.len(), 1, "{:?}", f.offsets);
        assert!(f.offsets[0].contains("by broker 3"), "{:?}", f.offsets);
        // and so is a stale answer from a broker elected again (seen however late),
        let mut again = entries.clone();
        again.push(coordinator(90_000, 2, 5));
        assert_eq!(check(&again, None, expected()).stale_reads, 0);
        // and the last answer, deposed or not: the run ends with the commit there or lost.
        let mut last = entries[..4].to_vec();
        last.push(fetched(30, 20, 30, 2));
        let f = check(&last, None, expected());
        assert_eq!((f.stale_reads, f.offsets.len()), (0, 1), "{:?}", f.offsets);
        // A deposition the trace saw only after the fetch was sent excuses nothing.
        let mut late = vec![coordinator(5, 2, 3), coordinator(25, 3, 4)];
        late.extend(commit(10, 1, "b", 2, 50));
        late.push(fetched(30, 20, 30, 2));
        late.push(fetched(60, 55, 50, 3));
        let f = check(&late, None, expected());
        assert_eq!((f.stale_reads, f.offsets.len()), (0, 1), "{:?}", f.offsets);
    }

    #[test]
    fn settle_and_delivery() {
        let read: FinalRead = BTreeMap::from([(
            0,
            PartitionRead {
                start: 0,
                stopped_at: None,
                records: vec![(0, "p0-0-0".into()), (1, "p0-0-1".into())],
            },
        )]);
        let produce = vec![
            Entry {
                at_ms: 1,
                event: Event::Invoke {
                    op: 7,
                    partition: 0,
                    session: 1,
                    values: vec!["p0-0-0".into(), "p0-0-1".into()],
                },
            },
            Entry {
                at_ms: 2,
                event: Event::Ack { op: 7, offset: 0 },
            },
        ];
        let final_of = |id: &str, generation, partitions| {
            at(
                5000,
                GroupEvent::Final {
                    group: 0,
                    member: id.into(),
                    generation,
                    partitions,
                },
            )
        };
        let read_of = |v: &str| {
            at(
                50,
                GroupEvent::Read {
                    group: 0,
                    member: "a".into(),
                    generation: 3,
                    partition: 0,
                    offset: 0,
                    value: v.into(),
                },
            )
        };
        let mut good = produce.clone();
        good.extend([
            read_of("p0-0-0"),
            read_of("p0-0-1"),
            at(100, GroupEvent::Healed),
            assigned(600, "a", 3, vec![0]),
            assigned(601, "b", 3, vec![1]),
            final_of("a", Some(3), vec![0]),
            final_of("b", Some(3), vec![1]),
        ]);
        let f = check(&good, Some(&read), expected());
        assert_eq!((f.undelivered, f.unsettled.len()), (0, 0), "{f:?}");
        assert_eq!(f.settle_ms, vec![(0, 500)]);

        let mut bad = produce;
        bad.extend([
            read_of("p0-0-0"),
            at(100, GroupEvent::Healed),
            assigned(2000, "a", 3, vec![0]),
            final_of("a", Some(3), vec![0]),
            final_of("b", Some(3), vec![]),
        ]);
        let f = check(&bad, Some(&read), expected());
        assert_eq!(f.undelivered, 1);
        assert_eq!(f.unsettled.len(), 1, "{:?}", f.unsettled);
        assert!(f.unsettled[0].contains("nobody [1]"), "{:?}", f.unsettled);

        // The same end with a partition left leaderless on purpose: liveness is not judged.
        bad.push(at(
            3000,
            GroupEvent::Unavailable {
                partitions: vec![1],
            },
        ));
        let f = check(&bad, Some(&read), expected());
        assert_eq!((f.undelivered, f.unsettled.len()), (0, 0), "{f:?}");
    }
}
