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
}

fn subset(owned: Option<&Assignment>, of: &Assignment) -> bool {
    let Some(owned) = owned else { return false };
    owned
        .iter()
        .all(|(t, ps)| ps.is_empty() || of.get(t).is_some_and(|a| ps.is_subset(a)))
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

    // ------------------------------------------------------------ heartbeat

    pub fn heartbeat(
        &mut self,
        req: &HeartbeatRequest,
        topics: &Topics,
        config: &ConsumerConfig,
        now: i64,
    ) -> HeartbeatResponse {
        let response = match self.heartbeat_inner(req, topics, config, now) {
            Ok(r) => r,
            Err((e, message)) => HeartbeatResponse::error(e, message),
        };
        self.check();
        response
    }

    fn heartbeat_inner(
        &mut self,
        req: &HeartbeatRequest,
        topics: &Topics,
        config: &ConsumerConfig,
        now: i64,
    ) -> Result<HeartbeatResponse, (GroupError, String)> {
        let server_assignor = parse_assignor(req, config)?;
        let regex_update = parse_regex_update(req)?;
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == STATIC_LEAVE_EPOCH {
            return self.leave(req);
        }
        let member_id = if req.version == 0 && req.member_id.is_empty() {
            let uuid = uuid::Builder::from_random_bytes(req.fresh_id.to_be_bytes()).into_uuid();
            uuid.to_string()
        } else {
            req.member_id.clone()
        };
        if let Some(instance) = &req.instance_id {
            self.claim_instance(instance, &member_id, req.member_epoch)?;
        }
        let mut bump = self.admit(&member_id, req, config, now)?;
        let before = self.members[&member_id].now.assigned.clone();
        bump |= self.update_member(&member_id, req, config, regex_update, server_assignor, now);
        bump |= self.refresh_subscribed_topics(topics);
        if bump {
            self.group_epoch += 1;
            self.all_dirty = true;
        }
        if self.group_epoch > self.assignment_epoch {
            self.assign(config);
        }
        self.reconcile(&member_id, req.owned.as_ref(), now);
        let m = &self.members[&member_id];
        let full = req.rebalance_timeout_ms != -1
            && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
            && req.owned.is_some();
        let changed = m.now.assigned != before;
        let send = req.member_epoch == JOIN_EPOCH || full || changed;
        Ok(HeartbeatResponse {
            error: None,
            error_message: None,
            member_id,
            member_epoch: m.now.epoch,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            assignment: send.then(|| m.now.assigned.clone()),
        })
    }

    /// KIP-345 for the consumer protocol: a static member's instance id, held by another member
    /// id, passes to this one only on a join after the holder left with epoch -2.
    fn claim_instance(
        &mut self,
        instance: &str,
        member_id: &str,
        epoch: i32,
    ) -> Result<(), (GroupError, String)> {
        match self.instances.get(instance).cloned() {
            Some(old) if old != member_id => {
                if epoch != JOIN_EPOCH {
                    return Err((
                        GroupError::FencedInstanceId,
                        format!("Instance {instance} is held by another member."),
                    ));
                }
                if self.members.contains_key(member_id) {
                    return Err((
                        GroupError::InvalidRequest,
                        format!("Member id {member_id} is already used by another member."),
                    ));
                }
                if self.members[&old].now.epoch != STATIC_LEAVE_EPOCH {
                    return Err((
                        GroupError::UnreleasedInstanceId,
                        format!("Static member with instance id {instance} is still active."),
                    ));
                }
                self.replace_static(&old, member_id);
                Ok(())
            }
            None if epoch != JOIN_EPOCH => Err((
                GroupError::UnknownMemberId,
                format!("Instance id {instance} is unknown."),
            )),
            Some(_) | None => Ok(()),
        }
    }

    /// A joining member is added (within `group.consumer.max.size`); a known member's epoch is
    /// fenced unless it is current or a lost reply's. Returns whether the group epoch must move.
    fn admit(
        &mut self,
        member_id: &str,
        req: &HeartbeatRequest,
        config: &ConsumerConfig,
        now: i64,
    ) -> Result<bool, (GroupError, String)> {
        match self.members.get(member_id) {
            None if req.member_epoch != JOIN_EPOCH => Err((
                GroupError::UnknownMemberId,
                format!("Member {member_id} is not a member of group {}.", self.id),
            )),
            None => {
                if self.members.len() >= config.max_size {
                    return Err((
                        GroupError::GroupMaxSizeReached,
                        format!(
                            "The consumer group has reached its maximum capacity of {} members.",
                            config.max_size
                        ),
                    ));
                }
                let member = new_member(member_id, req, config, now);
                self.members.insert(member_id.to_string(), member);
                if let Some(instance) = &req.instance_id {
                    self.instances
                        .insert(instance.clone(), member_id.to_string());
                }
                Ok(true)
            }
            Some(m) if req.member_epoch != JOIN_EPOCH => {
                let e = m.now.epoch;
                let lost_reply = req.member_epoch == m.now.previous_epoch
                    && subset(req.owned.as_ref(), &m.now.assigned);
                if req.member_epoch > e || (req.member_epoch < e && !lost_reply) {
                    return Err((
                        GroupError::FencedMemberEpoch,
                        format!(
                            "The consumer group member has epoch {} but the coordinator has {e}.",
                            req.member_epoch
                        ),
                    ));
                }
                Ok(false)
            }
            Some(_) => Ok(false),
        }
    }

    /// Takes what the heartbeat says about the member; whether its subscription or assignor
    /// changed (the group epoch must move).
    fn update_member(
        &mut self,
        member_id: &str,
        req: &HeartbeatRequest,
        config: &ConsumerConfig,
        regex_update: Option<Option<(String, TopicRegex)>>,
        server_assignor: Option<Assignor>,
        now: i64,
    ) -> bool {
        let mut bump = false;
        let m = self.members.get_mut(member_id).expect("member exists");
        // Re-armed at every heartbeat with the group's current value (a group config change
        // reaches members already in the group).
        m.session_timeout_ms = config.session_timeout_ms;
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        if req.rack_id.is_some() {
            m.rack_id = req.rack_id.clone();
        }
        if req.rebalance_timeout_ms > 0 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if let Some(names) = &req.subscribed_topic_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            if names != m.subscribed {
                m.subscribed = names;
                bump = true;
            }
        }
        if let Some(update) = regex_update {
            bump |= self.update_regex(member_id, update);
        }
        let m = self.members.get_mut(member_id).expect("member exists");
        if server_assignor.is_some() && server_assignor != m.server_assignor {
            m.server_assignor = server_assignor;
            bump = true;
        }
        m.last_heard = now;
        self.touched.insert(member_id.to_string());
        bump
    }

    /// A new or cleared regex subscription; resolved at once when another member already uses
    /// the same pattern, at the next heartbeat otherwise. Whether it changed.
    fn update_regex(&mut self, member_id: &str, update: Option<(String, TopicRegex)>) -> bool {
        let pattern = update.as_ref().map(|(p, _)| p.clone());
        let m = self.members.get_mut(member_id).expect("member exists");
        if pattern == m.regex {
            return false;
        }
        m.regex = pattern.clone();
        m.matcher = update.map(|(_, r)| r);
        let in_use = pattern.is_some()
            && self.members.iter().any(|(id, other)| {
                *id != member_id && !other.regex_pending && other.regex == pattern
            });
        let m = self.members.get_mut(member_id).expect("member exists");
        m.regex_pending = pattern.is_some() && !in_use;
        true
    }

    /// Re-resolves regexes and the metadata of every subscribed topic; whether any changed.
    fn refresh_subscribed_topics(&mut self, topics: &Topics) -> bool {
        let mut changed = self.refresh_regex_topics(topics);
        let wanted: BTreeMap<String, TopicView> = self
            .subscribed_topic_names()
            .into_iter()
            .filter_map(|name| topics.get(&name).map(|t| (name, *t)))
            .collect();
        if wanted != self.subscribed_topics {
            self.subscribed_topics = wanted;
            changed = true;
        }
        changed
    }

    /// Re-resolves every member's regex against the topics that exist; whether any changed.
    fn refresh_regex_topics(&mut self, topics: &Topics) -> bool {
        let mut changed = false;
        for m in self.members.values_mut() {
            if m.regex_pending {
                // Taken at this heartbeat: resolved at the next one.
                m.regex_pending = false;
                continue;
            }
            let matched: BTreeSet<String> = match &m.matcher {
                None => BTreeSet::new(),
                Some(r) => topics
                    .keys()
                    .filter(|t| !t.starts_with("__") && r.matches(t))
                    .cloned()
                    .collect(),
            };
            if matched != m.matched {
                m.matched = matched;
                changed = true;
            }
        }
        changed
    }

    /// Leaving: for good (-1), or a static member for a while (-2, it keeps its partitions until
    /// its session ends or its instance comes back).
    fn leave(&mut self, req: &HeartbeatRequest) -> Result<HeartbeatResponse, (GroupError, String)> {
        let id = match &req.instance_id {
            Some(instance) => match self.instances.get(instance) {
                Some(id) if *id == req.member_id => id.clone(),
                Some(_) => {
                    return Err((
                        GroupError::FencedInstanceId,
                        format!("Instance {instance} is held by another member."),
                    ))
                }
                None => {
                    return Err((
                        GroupError::UnknownMemberId,
                        format!("Instance id {instance} is unknown."),
                    ))
                }
            },
            None if req.member_epoch == STATIC_LEAVE_EPOCH => {
                return Err((
                    GroupError::InvalidRequest,
                    "InstanceId can't be null when MemberEpoch is -2.".to_string(),
                ))
            }
            None => req.member_id.clone(),
        };
        if !self.members.contains_key(&id) {
            return Err((
                GroupError::UnknownMemberId,
                format!("Member {id} is not a member of group {}.", self.id),
            ));
        }
        if req.member_epoch == STATIC_LEAVE_EPOCH {
            let m = self.members.get_mut(&id).unwrap();
            m.now.epoch = STATIC_LEAVE_EPOCH;
            m.revoke_deadline = None;
            self.touched.insert(id.clone());
        } else {
            self.remove(&id);
        }
        Ok(HeartbeatResponse {
            member_id: id,
            member_epoch: req.member_epoch,
            ..HeartbeatResponse::default()
        })
    }

    /// A static member's instance comes back under a new member id: the new id takes the old
    /// one's place and partitions, without a rebalance.
    fn replace_static(&mut self, old: &str, new: &str) {
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
    fn remove(&mut self, id: &str) {
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

    fn assign(&mut self, config: &ConsumerConfig) {
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
    fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now: i64) {
        let empty = Assignment::new();
        let target = self.target.get(id).unwrap_or(&empty);
        let m = &self.members[id];
        let owners = &self.owners;
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
        #[cfg(madsim)]
        if epoch > JOIN_EPOCH
            && crate::config::planted::active(
                crate::config::PlantedBug::ConsumerGroupCommitStaleEpoch,
            )
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

/// The heartbeat's server assignor, when this broker offers it.
fn parse_assignor(
    req: &HeartbeatRequest,
    config: &ConsumerConfig,
) -> Result<Option<Assignor>, (GroupError, String)> {
    let Some(name) = &req.server_assignor else {
        return Ok(None);
    };
    match Assignor::parse(name) {
        Some(a) if config.assignors.contains(&a) => Ok(Some(a)),
        _ => Err((
            GroupError::UnsupportedAssignor,
            format!("ServerAssignor {name} is not supported."),
        )),
    }
}

/// `None`: unchanged; an empty regex means none (librdkafka sends "" beside names).
fn parse_regex_update(
    req: &HeartbeatRequest,
) -> Result<Option<Option<(String, TopicRegex)>>, (GroupError, String)> {
    match req.subscribed_topic_regex.as_deref() {
        None => Ok(None),
        Some("") => Ok(Some(None)),
        Some(pattern) => match TopicRegex::parse(pattern) {
            Ok(r) => Ok(Some(Some((pattern.to_string(), r)))),
            Err(why) => Err((GroupError::InvalidRegularExpression, why)),
        },
    }
}

/// A member joining with epoch 0, before its first assignment.
fn new_member(id: &str, req: &HeartbeatRequest, config: &ConsumerConfig, now: i64) -> Member {
    Member {
        id: id.to_string(),
        instance_id: req.instance_id.clone(),
        rack_id: None,
        client_id: String::new(),
        client_host: String::new(),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        session_timeout_ms: config.session_timeout_ms,
        subscribed: BTreeSet::new(),
        regex: None,
        matcher: None,
        matched: BTreeSet::new(),
        regex_pending: false,
        server_assignor: None,
        now: Reconciled {
            epoch: 0,
            previous_epoch: -1,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
        },
        last_heard: now,
        revoke_deadline: None,
    }
}
