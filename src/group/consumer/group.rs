//! One consumer group (KIP-848): members with their epochs, the group epoch, the target
//! assignment the assignor computed for the assignment epoch, and who holds each partition now.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::assignor::Assignor;
use super::reconcile::{self, Reconciled};
use super::regex::TopicRegex;
use super::types::*;
use crate::group::GroupError;

#[derive(Clone, Debug)]
pub(super) struct Member {
    pub(super) id: String,
    pub(super) instance_id: Option<String>,
    pub(super) rack_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) rebalance_timeout_ms: i32,
    pub(super) session_timeout_ms: i32,
    pub(super) subscribed: BTreeSet<String>,
    pub(super) regex: Option<String>,
    pub(super) matcher: Option<TopicRegex>,
    /// The topics its regex matches now (internal `__` topics never).
    pub(super) matched: BTreeSet<String>,
    /// Its regex is new to the group since this heartbeat: resolved from the next heartbeat on
    /// (of any member). Kafka resolves a new regex asynchronously after answering, so the answer
    /// that takes a new subscription assigns its literal topics first and the regex's later;
    /// librdkafka's 0045 test expects exactly that. A pattern another member already uses is
    /// resolved at once, as Kafka reuses a resolved regex.
    pub(super) regex_pending: bool,
    pub(super) server_assignor: Option<Assignor>,
    pub(super) now: Reconciled,
    /// Last heartbeat: the session ends `session_timeout_ms` after it.
    pub(super) last_heard: i64,
    /// While it must revoke: when the rebalance timeout fences it.
    pub(super) revoke_deadline: Option<i64>,
}

impl Member {
    /// Everything it subscribes to: by name and by regex.
    fn topics(&self) -> impl Iterator<Item = &String> + '_ {
        self.subscribed.iter().chain(self.matched.iter())
    }

    fn held(&self) -> impl Iterator<Item = (Uuid, i32)> + '_ {
        self.now
            .assigned
            .iter()
            .chain(self.now.revoking.iter())
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
    }
}

#[derive(Clone, Debug)]
pub struct ConsumerGroup {
    pub(super) id: String,
    pub(super) group_epoch: i32,
    pub(super) assignment_epoch: i32,
    pub(super) members: BTreeMap<String, Member>,
    /// Static members: instance id → member id.
    pub(super) instances: BTreeMap<String, String>,
    /// The target assignment of `assignment_epoch`, per member.
    pub(super) target: BTreeMap<String, Assignment>,
    /// Who holds each partition (assigned or still revoking): at most one member.
    pub(super) owners: BTreeMap<(Uuid, i32), String>,
    /// The subscribed topics as the last assignment saw them: a change bumps the group epoch.
    pub(super) subscribed_topics: BTreeMap<String, TopicView>,
    pub(super) assignor: Assignor,
    /// The records last appended (or replayed) for this group, by key: what `changes` diffs
    /// against.
    pub(super) written: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Every member's records may have changed (epoch bump, removal): `changes` looks at all.
    pub(super) all_dirty: bool,
    /// Members whose own records may have changed since the last `changes`.
    pub(super) touched: BTreeSet<String>,
    /// Simulator and tests: the bug planted here, from [`ConsumerConfig::planted`].
    #[cfg(any(madsim, test))]
    planted: crate::config::planted::Planted,
}

impl ConsumerGroup {
    pub fn new(id: &str, config: &ConsumerConfig) -> ConsumerGroup {
        ConsumerGroup {
            id: id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            instances: BTreeMap::new(),
            target: BTreeMap::new(),
            owners: BTreeMap::new(),
            subscribed_topics: BTreeMap::new(),
            assignor: config
                .assignors
                .first()
                .copied()
                .unwrap_or(Assignor::Uniform),
            written: BTreeMap::new(),
            all_dirty: false,
            touched: BTreeSet::new(),
            #[cfg(any(madsim, test))]
            planted: config.planted,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.now.epoch != self.assignment_epoch || m.now.state != MemberState::Stable)
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    /// Topic names some member subscribes to (OffsetDelete refuses those, expiry keeps them).
    pub fn subscribed_topic_names(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.topics().cloned())
            .collect()
    }

    /// The earliest session or rebalance deadline.
    pub fn deadline(&self) -> Option<i64> {
        self.members
            .values()
            .flat_map(|m| {
                [
                    Some(m.last_heard + m.session_timeout_ms as i64),
                    m.revoke_deadline,
                ]
            })
            .flatten()
            .min()
    }

    /// A member's epoch, for tests and describe.
    pub fn member_epoch(&self, member_id: &str) -> Option<i32> {
        self.members.get(member_id).map(|m| m.now.epoch)
    }

    /// A static member's instance comes back under a new member id: the new id takes the old
    /// one's place and partitions, without a rebalance.
    pub(super) fn replace_static(&mut self, old: &str, new: &str) {
        let mut m = self.members.remove(old).expect("mapped member exists");
        m.id = new.to_string();
        if let Some(target) = self.target.remove(old) {
            self.target.insert(new.to_string(), target);
        }
        for owner in self.owners.values_mut() {
            if owner == old {
                *owner = new.to_string();
            }
        }
        if let Some(instance) = &m.instance_id {
            self.instances.insert(instance.clone(), new.to_string());
        }
        self.members.insert(new.to_string(), m);
        self.all_dirty = true;
    }

    /// Takes a member out (left, session or rebalance timeout): its partitions are free at once
    /// and the group epoch moves so the rest get a new target.
    pub(super) fn remove(&mut self, id: &str) {
        let Some(m) = self.members.remove(id) else {
            return;
        };
        if let Some(instance) = &m.instance_id {
            if self.instances.get(instance).is_some_and(|i| i == id) {
                self.instances.remove(instance);
            }
        }
        self.target.remove(id);
        self.owners.retain(|_, owner| owner != id);
        self.group_epoch += 1;
        self.all_dirty = true;
    }

    /// The members' most requested assignor, else the configured default.
    pub(super) fn chosen_assignor(&self, config: &ConsumerConfig) -> Assignor {
        let mut votes: BTreeMap<Assignor, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.server_assignor {
                *votes.entry(a).or_default() += 1;
            }
        }
        let default = config
            .assignors
            .first()
            .copied()
            .unwrap_or(Assignor::Uniform);
        votes
            .iter()
            .max_by_key(|(a, n)| (**n, std::cmp::Reverse(**a)))
            .map(|(a, _)| *a)
            .unwrap_or(default)
    }

    pub(super) fn assign(&mut self, config: &ConsumerConfig) {
        self.assignor = self.chosen_assignor(config);
        let topics: BTreeMap<Uuid, i32> = self
            .subscribed_topics
            .values()
            .map(|t| (t.id, t.partitions))
            .collect();
        let specs: BTreeMap<String, (BTreeSet<Uuid>, Assignment)> = self
            .members
            .values()
            .map(|m| {
                let ids = m
                    .topics()
                    .filter_map(|n| self.subscribed_topics.get(n).map(|t| t.id))
                    .collect();
                let previous = self.target.get(&m.id).cloned().unwrap_or_default();
                (m.id.clone(), (ids, previous))
            })
            .collect();
        self.target = self.assignor.assign(&specs, &topics);
        self.assignment_epoch = self.group_epoch;
        self.all_dirty = true;
    }

    /// Moves one member towards its target, keeping the owners map in step.
    pub(super) fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now: i64) {
        let empty = Assignment::new();
        let target = self.target.get(id).unwrap_or(&empty);
        let m = &self.members[id];
        let owners = &self.owners;
        // Planted `consumer-group-assign-before-revoke`: take every revocation as done at once
        // (a member that reports owning nothing holds nothing to revoke).
        #[cfg(any(madsim, test))]
        let owned = if (self.planted).is(crate::config::PlantedBug::ConsumerGroupAssignBeforeRevoke)
        {
            Some(&empty)
        } else {
            owned
        };
        let next = reconcile::next(&m.now, self.assignment_epoch, target, owned, |t, p| {
            owners.get(&(t, p)).is_none_or(|o| o == id)
        });
        if next == m.now {
            return;
        }
        let old: Vec<(Uuid, i32)> = m.held().collect();
        for tp in old {
            self.owners.remove(&tp);
        }
        let m = self.members.get_mut(id).unwrap();
        if next.state == MemberState::UnrevokedPartitions {
            if m.now.state != MemberState::UnrevokedPartitions || m.revoke_deadline.is_none() {
                m.revoke_deadline = Some(now + m.rebalance_timeout_ms.max(0) as i64);
            }
        } else {
            m.revoke_deadline = None;
        }
        m.now = next;
        let held: Vec<(Uuid, i32)> = m.held().collect();
        for tp in held {
            let previous = self.owners.insert(tp, id.to_string());
            assert!(
                previous.is_none(),
                "group {}: partition {}-{} given to {id} while {previous:?} holds it",
                self.id,
                tp.0,
                tp.1
            );
        }
    }

    /// Ends sessions and revocations that ran out; returns the members taken out.
    pub fn expire(&mut self, now: i64) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.last_heard + m.session_timeout_ms as i64 <= now
                    || m.revoke_deadline.is_some_and(|at| at <= now)
            })
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            self.remove(id);
        }
        self.check();
        gone
    }

    // ------------------------------------------------------------ commits, describe

    /// Whether an OffsetCommit with this member id and epoch may be written
    /// (`ConsumerGroup.validateOffsetCommit`).
    pub fn validate_commit(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        #[cfg(any(madsim, test))]
        if epoch > JOIN_EPOCH
            && (self.planted).is(crate::config::PlantedBug::ConsumerGroupCommitStaleEpoch)
            && self
                .members
                .get(member_id)
                .is_none_or(|m| epoch < m.now.epoch)
        {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if epoch != m.now.epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// An OffsetFetch naming a member: it must exist and be at its current epoch.
    pub fn validate_fetch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if epoch != m.now.epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    pub fn describe(&self) -> GroupDescription {
        GroupDescription {
            state: self.state(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor: self.assignor.name().to_string(),
            members: self
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.now.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed.iter().cloned().collect(),
                    subscribed_topic_regex: m.regex.clone(),
                    assignment: m.now.assigned.clone(),
                    target_assignment: self.target.get(&m.id).cloned().unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// The protocol's invariants (KIP-848 S8): epochs ordered, each partition held by at most one
    /// member, and the owners map exactly what the members hold.
    pub(in crate::group) fn check(&self) {
        assert!(
            self.assignment_epoch <= self.group_epoch,
            "group {}: epochs",
            self.id
        );
        let mut held = BTreeMap::new();
        for m in self.members.values() {
            assert!(
                m.now.epoch <= self.assignment_epoch,
                "group {}: member {} at epoch {} beyond assignment epoch {}",
                self.id,
                m.id,
                m.now.epoch,
                self.assignment_epoch
            );
            for tp in m.held() {
                if let Some(other) = held.insert(tp, m.id.clone()) {
                    panic!("group {}: {tp:?} held by {other} and {}", self.id, m.id);
                }
            }
        }
        assert_eq!(
            held, self.owners,
            "group {}: owners map out of step",
            self.id
        );
    }
}
