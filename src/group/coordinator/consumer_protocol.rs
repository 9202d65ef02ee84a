//! The consumer protocol's entry points (ConsumerGroupHeartbeat,
//! ConsumerGroupDescribe): one group namespace for both protocols. A group id is classic or
//! consumer; an empty group of either kind converts to the other on first use, as Kafka's does,
//! and keeps its committed offsets.

use super::*;
use crate::group::consumer::{self, Topics};
use crate::group::records;

/// Checks Kafka makes before looking at the group
/// (`throwIfConsumerGroupHeartbeatRequestIsInvalid`).
fn validate(req: &consumer::HeartbeatRequest) -> Result<(), (GroupError, &'static str)> {
    let invalid = |m| Err((GroupError::InvalidRequest, m));
    if req.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.version >= 1 && req.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if req.version == 0 && req.member_epoch != consumer::JOIN_EPOCH && req.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if req.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    match req.member_epoch {
        consumer::JOIN_EPOCH => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        consumer::STATIC_LEAVE_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null when MemberEpoch is -2.");
        }
        e if e < consumer::STATIC_LEAVE_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    Ok(())
}

impl Coordinator {
    pub(super) fn on_consumer_heartbeat(
        &mut self,
        request: RequestId,
        req: consumer::HeartbeatRequest,
        topics: &Topics,
        overrides: &consumer::GroupOverrides,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let drop_classic_record = match self.admit_consumer_heartbeat(&req, now) {
            Ok(drop) => drop,
            Err((e, m)) => {
                let response = consumer::HeartbeatResponse::error(e, m);
                return respond(out, request, Response::ConsumerHeartbeat(response));
            }
        };
        let id = req.group_id.clone();
        let config = self.config.consumer.with_overrides(overrides);
        self.with_group(&id, |c, g| {
            let group = g.consumer.as_mut().expect("a consumer group");
            let response = group.heartbeat(&req, topics, &config, now);
            let mut batch = group.changes();
            if drop_classic_record {
                batch.push((records::group_key(&id), None));
            }
            if batch.is_empty() {
                return respond(out, request, Response::ConsumerHeartbeat(response));
            }
            // Answered once the change is written (Kafka answers after its records commit):
            // a restart or failover never hands out an epoch twice and finds every member
            // where its last answer left it.
            let pending = Pending::ConsumerHeartbeat {
                request,
                group: id.clone(),
                response,
            };
            c.append_for(g, batch, pending, out);
        })
        .expect("group exists");
    }

    /// The checks before the group's state machine sees the heartbeat; creates the group on a
    /// first join and converts an empty classic group. Returns whether the classic group's
    /// record must go (a classic group that had a generation has one).
    fn admit_consumer_heartbeat(
        &mut self,
        req: &consumer::HeartbeatRequest,
        now: i64,
    ) -> Result<bool, (GroupError, String)> {
        validate(req).map_err(|(e, m)| (e, m.to_string()))?;
        self.gate(&req.group_id).map_err(|e| (e, String::new()))?;
        let joining = req.member_epoch == consumer::JOIN_EPOCH;
        // What a durable coordinator answers once the member is gone; the client rejoins with
        // epoch 0.
        let unknown = || {
            (
                GroupError::UnknownMemberId,
                "The group has no such member.".to_string(),
            )
        };
        match self.groups.get_mut(&req.group_id) {
            None => {
                if !joining {
                    return Err(unknown());
                }
                if self.groups.len() >= self.config.max_groups {
                    return Err((
                        GroupError::CoordinatorNotAvailable,
                        "Too many groups.".to_string(),
                    ));
                }
                let mut g = Group::new(&req.group_id, now);
                g.become_consumer(&self.config.consumer);
                self.groups.insert(req.group_id.clone(), g);
                Ok(false)
            }
            Some(g) if g.consumer.is_none() => {
                if !g.is_classic_and_empty() {
                    let m = format!("Group {} is not a consumer group.", req.group_id);
                    return Err((GroupError::GroupIdNotFound, m));
                }
                if !joining {
                    return Err(unknown());
                }
                g.become_consumer(&self.config.consumer);
                Ok(g.generation > 0)
            }
            Some(_) => Ok(false),
        }
    }

    /// A heartbeat's change is written (or not): answer it, or tell the member it failed.
    pub(super) fn consumer_change_written(
        pending: Pending,
        error: Option<GroupError>,
        out: &mut Vec<Action>,
    ) {
        let Pending::ConsumerHeartbeat {
            request, response, ..
        } = pending
        else {
            unreachable!("not a consumer heartbeat")
        };
        let response = match error {
            Some(e) => consumer::HeartbeatResponse::error(
                e,
                "The group change could not be written to __consumer_offsets.",
            ),
            None => response,
        };
        respond(out, request, Response::ConsumerHeartbeat(response));
    }

    /// Persists a consumer group's changes no request waits on (a session or rebalance timeout).
    pub(super) fn persist_consumer(&mut self, g: &mut Group, out: &mut Vec<Action>) {
        let Some(c) = g.consumer.as_mut() else { return };
        let batch = c.changes();
        if batch.is_empty() {
            return;
        }
        let pending = Pending::GroupRecord {
            group: g.id.clone(),
        };
        self.append_for(g, batch, pending, out);
    }

    /// ConsumerGroupDescribe for one group.
    pub fn consumer_describe(
        &self,
        group_id: &str,
    ) -> Result<consumer::GroupDescription, GroupError> {
        self.gate(group_id)?;
        self.groups
            .get(group_id)
            .and_then(|g| g.consumer.as_ref())
            .map(|c| c.describe())
            .ok_or(GroupError::GroupIdNotFound)
    }

    /// OffsetFetch v9 names the member asking: in a consumer group it must be a member at its
    /// current epoch (`ConsumerGroup.validateOffsetFetch`). Other groups, and requests naming no
    /// member, are not checked.
    pub fn validate_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        epoch: i32,
    ) -> Result<(), GroupError> {
        let member_id = member_id.filter(|m| !m.is_empty());
        if member_id.is_none() && epoch < 0 {
            return Ok(());
        }
        match self.groups.get(group_id).and_then(|g| g.consumer.as_ref()) {
            Some(c) => c.validate_fetch(member_id.unwrap_or_default(), epoch),
            None => Ok(()),
        }
    }

    /// The consumer group's member epoch of one member (tests, checks).
    pub fn consumer_member_epoch(&self, group_id: &str, member_id: &str) -> Option<i32> {
        self.groups
            .get(group_id)?
            .consumer
            .as_ref()?
            .member_epoch(member_id)
    }
}
