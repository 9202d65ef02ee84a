//! JoinGroup: the checks before a group is touched, new and pending members (KIP-394), and a
//! known member rejoining.

use bytes::Bytes;

use super::super::*;
use super::mint_member_id;
use crate::group::member::ParkedJoin;

impl Coordinator {
    pub(in crate::group::coordinator) fn on_join(
        &mut self,
        request: RequestId,
        mut req: JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        if req.rebalance_timeout_ms <= 0 {
            // A zero rebalance timeout would spin the join timer (apache/kafka#7072).
            req.rebalance_timeout_ms = req.session_timeout_ms;
        }
        if let Err(e) = self.admit_join(&req, now, out) {
            return respond(out, request, join_error(e, &req.member_id));
        }
        let id = req.group_id.clone();
        self.with_group(&id, |c, g| c.join_group(g, request, req, now, out));
    }

    /// The checks before the group is touched; creates the group for a first join, and turns an
    /// empty consumer group back into a classic one.
    fn admit_join(
        &mut self,
        req: &JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) -> Result<(), GroupError> {
        if req.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        self.gate(&req.group_id)?;
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return Err(GroupError::InvalidSessionTimeout);
        }
        if !self.groups.contains_key(&req.group_id) {
            if !req.member_id.is_empty() {
                return Err(GroupError::UnknownMemberId);
            }
            if self.groups.len() >= self.config.max_groups {
                return Err(GroupError::CoordinatorNotAvailable);
            }
            let g = Group::new(&req.group_id, now);
            self.groups.insert(req.group_id.clone(), g);
        }
        let g = self.groups.get(&req.group_id).expect("just ensured");
        match &g.consumer {
            Some(c) if !c.is_empty() => Err(GroupError::InconsistentGroupProtocol),
            Some(_) => {
                self.convert_to_classic(&req.group_id, out);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// An empty consumer group becomes classic again (Kafka converts empty groups); its
    /// consumer-group records go, so a restart does not bring the old type back. (Not through
    /// `with_group`: the converted group may look forgettable, and the join still needs it.)
    fn convert_to_classic(&mut self, group_id: &str, out: &mut Vec<Action>) {
        let g = self.groups.get_mut(group_id).expect("a held group");
        let converted = g.consumer.take().expect("a consumer group").tombstones();
        g.protocol_type = None;
        if converted.is_empty() {
            return;
        }
        g.appends_in_flight += 1;
        let partition = self
            .partition_of(group_id)
            .expect("a held group's partition");
        let pending = Pending::GroupRecord {
            group: group_id.to_string(),
        };
        self.append(partition, converted, pending, out);
    }

    fn join_group(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let fail = |out: &mut Vec<Action>, e| respond(out, request, join_error(e, &req.member_id));
        if g.state == GroupState::Dead {
            return fail(out, GroupError::CoordinatorNotAvailable);
        }
        if !self.fits(g, &req) {
            if g.members.contains_key(&req.member_id) {
                self.remove_member_and_react(g, &req.member_id, now, out);
            }
            return fail(out, GroupError::GroupMaxSizeReached);
        }
        if !g.accepts_protocols(&req.protocol_type, &req.protocols, &req.member_id) {
            return fail(out, GroupError::InconsistentGroupProtocol);
        }
        if req.member_id.is_empty() {
            return self.unknown_member_join(g, request, req, now, out);
        }
        if g.pending.remove(&req.member_id).is_some() {
            let member_id = req.member_id.clone();
            return self.add_member(g, request, member_id, req, now, out);
        }
        if let Err(e) = g.validate(&req.member_id, req.instance_id.as_deref()) {
            return fail(out, e);
        }
        self.current_member_join(g, request, req, now, out)
    }

    /// Whether the joiner fits under `group.max.size` (and the hard bound on members).
    fn fits(&self, g: &Group, req: &JoinRequest) -> bool {
        let known = g.members.contains_key(&req.member_id)
            || g.pending.contains_key(&req.member_id)
            || req
                .instance_id
                .as_ref()
                .is_some_and(|i| g.instances.contains_key(i));
        let max = self.config.max_size.min(MAX_MEMBERS);
        let fits = match g.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                let parked = g.members.values().filter(|m| m.join.is_some()).count();
                let rejoining = g
                    .members
                    .get(&req.member_id)
                    .is_some_and(|m| m.join.is_some());
                (known && rejoining) || parked < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => known || g.members.len() < max,
        };
        fits && (known || g.members.len() + g.pending.len() < MAX_MEMBERS)
    }

    /// A join without a member id: a static member (KIP-345), a new member told to come back
    /// with its id (KIP-394), or a new member added at once (old clients).
    fn unknown_member_join(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        if let Some(instance) = req.instance_id.clone() {
            return self.static_join(g, request, req, &instance, now, out);
        }
        let member_id = mint_member_id(&req.client_id, req.fresh_id);
        if req.require_known_member {
            let expiry = now + req.session_timeout_ms as i64;
            g.pending.insert(member_id.clone(), expiry);
            let response = join_error(GroupError::MemberIdRequired, &member_id);
            return respond(out, request, response);
        }
        self.add_member(g, request, member_id, req, now, out)
    }

    pub(super) fn add_member(
        &mut self,
        g: &mut Group,
        request: RequestId,
        member_id: String,
        req: JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        assert!(!g.members.contains_key(&member_id));
        if g.members.is_empty() {
            g.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.instance_id {
            g.instances.insert(instance.clone(), member_id.clone());
        }
        let seq = self.take_seq();
        let member = Member {
            id: member_id.clone(),
            instance_id: req.instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            session_timeout_ms: req.session_timeout_ms,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            protocol_type: req.protocol_type,
            protocols: req.protocols,
            assignment: Bytes::new(),
            join: Some(ParkedJoin { request }),
            sync: None,
            last_heard: now,
            is_new: true,
            seq,
        };
        g.members.insert(member_id.clone(), member);
        if g.leader.is_none() {
            g.leader = Some(member_id);
        }
        if let Some(delay) = &mut g.initial_delay {
            delay.joined_during = true;
        }
        match g.state {
            GroupState::PreparingRebalance => self.maybe_complete_join(g, now, out),
            _ => self.prepare_rebalance(g, now, out),
        }
    }

    /// Updates a known member from its JoinGroup and parks it (a retried join replaces the
    /// earlier one, which is told to rejoin).
    pub(super) fn park_join(
        g: &mut Group,
        request: RequestId,
        req: &JoinRequest,
        out: &mut Vec<Action>,
    ) {
        let m = g.members.get_mut(&req.member_id).unwrap();
        m.protocols = req.protocols.clone();
        m.protocol_type = req.protocol_type.clone();
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        if let Some(old) = m.join.replace(ParkedJoin { request }) {
            let response = join_error(GroupError::RebalanceInProgress, &m.id);
            respond(out, old.request, response);
        }
    }

    /// Parks the join and starts a rebalance (or completes the one under way).
    pub(super) fn park_and_rebalance(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: &JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        Self::park_join(g, request, req, out);
        match g.state {
            GroupState::PreparingRebalance => self.maybe_complete_join(g, now, out),
            _ => self.prepare_rebalance(g, now, out),
        }
    }

    fn current_member_join(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let member_id = req.member_id.clone();
        let same_protocols = g.members[&member_id].protocols == req.protocols;
        let is_leader = g.leader.as_deref() == Some(member_id.as_str());
        match g.state {
            GroupState::PreparingRebalance => self.park_and_rebalance(g, request, &req, now, out),
            // A lost JoinGroup response: answer it again.
            GroupState::CompletingRebalance if same_protocols => {
                respond(out, request, Response::Join(g.join_response(&member_id)))
            }
            GroupState::Stable if same_protocols && !is_leader => {
                g.members.get_mut(&member_id).unwrap().last_heard = now;
                respond(out, request, Response::Join(g.join_response(&member_id)));
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.park_and_rebalance(g, request, &req, now, out)
            }
            GroupState::Empty | GroupState::Dead => {
                let response = join_error(GroupError::UnknownMemberId, &member_id);
                respond(out, request, response)
            }
        }
    }
}
