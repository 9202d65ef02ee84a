//! KIP-345 static membership: a static member joining with an empty member id replaces its
//! old incarnation, and in a Stable group whose protocol would not change it takes the old
//! one's place without a rebalance once the replacement is written.

use super::super::*;
use super::mint_member_id;

impl Coordinator {
    pub(super) fn static_join(
        &mut self,
        g: &mut Group,
        request: RequestId,
        mut req: JoinRequest,
        instance: &str,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let new_id = mint_member_id(instance, req.fresh_id);
        let Some(old_id) = g.instances.get(instance).cloned() else {
            return self.add_member(g, request, new_id, req, now, out);
        };
        let old = replace_incarnation(g, instance, &old_id, &new_id, &req, now, out);
        req.member_id = new_id.clone();
        match g.state {
            GroupState::Stable => self.static_rejoin_stable(g, request, req, old, now, out),
            GroupState::CompletingRebalance | GroupState::PreparingRebalance => {
                self.park_and_rebalance(g, request, &req, now, out)
            }
            GroupState::Empty | GroupState::Dead => {
                unreachable!("a group with members is neither Empty nor Dead")
            }
        }
    }

    /// In a Stable group: if the protocol stays, persist the replacement and hand back the
    /// generation once written; otherwise rebalance.
    fn static_rejoin_stable(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        old: Member,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let new_id = req.member_id.clone();
        let previous = g.protocol.clone();
        let before = g.members[&new_id].clone();
        {
            let m = g.members.get_mut(&new_id).unwrap();
            m.protocols = req.protocols.clone();
            m.session_timeout_ms = req.session_timeout_ms;
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if g.select_protocol() != previous {
            *g.members.get_mut(&new_id).unwrap() = before;
            return self.park_and_rebalance(g, request, &req, now, out);
        }
        let pending = Pending::StaticReplace {
            request,
            group: g.id.clone(),
            was_leader: g.leader.as_deref() == Some(new_id.as_str()),
            old: Box::new(old),
            new_id,
            skip_assignment: req.supports_skip_assignment,
            generation: g.generation,
        };
        self.append_group_record(g, now, pending, out);
    }

    /// The replacement is written (or not): answer the join, or put the old incarnation back.
    pub(in crate::group::coordinator) fn static_replace_written(
        g: &mut Group,
        pending: Pending,
        error: Option<GroupError>,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let Pending::StaticReplace {
            request,
            old,
            new_id,
            was_leader,
            skip_assignment,
            generation,
            ..
        } = pending
        else {
            unreachable!("not a static replacement")
        };
        let still = g.generation == generation
            && g.state == GroupState::Stable
            && g.members.contains_key(&new_id);
        if let Some(e) = error {
            if still {
                revert_incarnation(g, *old, &new_id, was_leader);
            }
            return respond(out, request, join_error(e, ""));
        }
        if !still {
            let response = join_error(GroupError::RebalanceInProgress, &new_id);
            return respond(out, request, response);
        }
        let mut response = g.join_response(&new_id);
        if was_leader {
            if skip_assignment {
                response.skip_assignment = true;
            } else {
                // Below v9 the leader is told the old leader id so it does not reassign.
                response.leader = old.id.clone();
                response.members.clear();
            }
        }
        g.members.get_mut(&new_id).unwrap().last_heard = now;
        respond(out, request, Response::Join(response));
    }
}

/// The new incarnation takes the old one's place (member record, instance, leadership, pending
/// sync); the old one's parked requests are fenced. Returns the old incarnation.
fn replace_incarnation(
    g: &mut Group,
    instance: &str,
    old_id: &str,
    new_id: &str,
    req: &JoinRequest,
    now: i64,
    out: &mut Vec<Action>,
) -> Member {
    let mut old = g.members.remove(old_id).expect("instance maps to a member");
    if let Some(join) = old.join.take() {
        let response = join_error(GroupError::FencedInstanceId, old_id);
        respond(out, join.request, response);
    }
    if let Some(sync) = old.sync.take() {
        respond(out, sync, sync_error(GroupError::FencedInstanceId));
    }
    let mut member = old.clone();
    member.id = new_id.to_string();
    member.client_id = req.client_id.clone();
    member.client_host = req.client_host.clone();
    member.last_heard = now;
    g.members.insert(new_id.to_string(), member);
    g.instances.insert(instance.to_string(), new_id.to_string());
    if g.awaiting_sync.remove(old_id) {
        g.awaiting_sync.insert(new_id.to_string());
    }
    if g.leader.as_deref() == Some(old_id) {
        g.leader = Some(new_id.to_string());
    }
    old
}

/// The replacement could not be written: the old incarnation keeps its place.
fn revert_incarnation(g: &mut Group, old: Member, new_id: &str, was_leader: bool) {
    let instance = old.instance_id.clone().expect("a static member");
    g.members.remove(new_id);
    g.instances.insert(instance, old.id.clone());
    if was_leader {
        g.leader = Some(old.id.clone());
    }
    g.members.insert(old.id.clone(), old);
}
