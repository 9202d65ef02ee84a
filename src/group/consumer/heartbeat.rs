//! ConsumerGroupHeartbeat on one consumer group (KIP-848): the request's checks, static
//! instances, joining or fencing the member, taking its subscription, then the assignor and
//! the member's reconciliation when the group epoch moved; and leaving (-1, -2).

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::Assignor;
use super::group::{ConsumerGroup, Member};
use super::reconcile::Reconciled;
use super::regex::TopicRegex;
use super::types::*;
use crate::group::GroupError;

/// A member's new regex subscription: the pattern and its compiled form, or none.
type RegexUpdate = Option<(String, TopicRegex)>;

impl ConsumerGroup {
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
        regex_update: Option<RegexUpdate>,
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
    fn update_regex(&mut self, member_id: &str, update: RegexUpdate) -> bool {
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
}

fn subset(owned: Option<&Assignment>, of: &Assignment) -> bool {
    let Some(owned) = owned else { return false };
    owned
        .iter()
        .all(|(t, ps)| ps.is_empty() || of.get(t).is_some_and(|a| ps.is_subset(a)))
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
fn parse_regex_update(req: &HeartbeatRequest) -> Result<Option<RegexUpdate>, (GroupError, String)> {
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
