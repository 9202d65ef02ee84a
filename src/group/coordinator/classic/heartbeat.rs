//! Heartbeat (keeps a member's session, tells it of a rebalance) and LeaveGroup (a member, or
//! an admin naming static instances, leaves).

use super::super::*;

impl Coordinator {
    pub(in crate::group::coordinator) fn on_heartbeat(
        &mut self,
        request: RequestId,
        req: HeartbeatRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let result = self.heartbeat_result(&req, now);
        respond(out, request, Response::Heartbeat(result));
    }

    fn heartbeat_result(&mut self, req: &HeartbeatRequest, now: i64) -> Option<GroupError> {
        if req.group_id.is_empty() {
            return Some(GroupError::InvalidGroupId);
        }
        match self.gate(&req.group_id) {
            Err(GroupError::CoordinatorLoadInProgress) => return None,
            Err(e) => return Some(e),
            Ok(()) => {}
        }
        let id = req.group_id.clone();
        self.with_group(&id, |_, g| heartbeat_member(g, req, now).err())
            .unwrap_or(Some(GroupError::UnknownMemberId))
    }

    pub(in crate::group::coordinator) fn on_leave(
        &mut self,
        request: RequestId,
        group_id: &str,
        members: Vec<LeavingMember>,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let top = if group_id.is_empty() {
            Some(GroupError::InvalidGroupId)
        } else {
            self.gate(group_id).err()
        };
        if let Some(e) = top {
            let response = LeaveResponse {
                error: Some(e),
                members: vec![Some(e); members.len()],
            };
            return respond(out, request, Response::Leave(response));
        }
        let results = self
            .with_group(group_id, |c, g| {
                let leave = |leaving| c.leave_one(g, leaving, now, out);
                members.iter().map(leave).collect::<Vec<_>>()
            })
            .unwrap_or_else(|| vec![Some(GroupError::UnknownMemberId); members.len()]);
        let response = LeaveResponse {
            error: None,
            members: results,
        };
        respond(out, request, Response::Leave(response));
    }

    fn leave_one(
        &mut self,
        g: &mut Group,
        leaving: &LeavingMember,
        now: i64,
        out: &mut Vec<Action>,
    ) -> Option<GroupError> {
        if g.state == GroupState::Dead {
            return Some(GroupError::CoordinatorNotAvailable);
        }
        let member_id = if leaving.member_id.is_empty() {
            // An admin removing a static member by instance id.
            match leaving
                .instance_id
                .as_ref()
                .and_then(|i| g.instances.get(i))
            {
                Some(id) => id.clone(),
                None => return Some(GroupError::UnknownMemberId),
            }
        } else {
            if g.pending.remove(&leaving.member_id).is_some() {
                self.maybe_complete_join(g, now, out);
                return None;
            }
            if let Err(e) = g.validate(&leaving.member_id, leaving.instance_id.as_deref()) {
                return Some(e);
            }
            leaving.member_id.clone()
        };
        self.remove_member_and_react(g, &member_id, now, out);
        None
    }
}

/// A heartbeat against the group: refreshes the member's session unless it is refused.
fn heartbeat_member(g: &mut Group, req: &HeartbeatRequest, now: i64) -> Result<(), GroupError> {
    if g.state == GroupState::Dead {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    g.validate(&req.member_id, req.instance_id.as_deref())?;
    if req.generation != g.generation {
        return Err(GroupError::IllegalGeneration);
    }
    let m = g.members.get_mut(&req.member_id).unwrap();
    match g.state {
        GroupState::Empty => Err(GroupError::UnknownMemberId),
        GroupState::PreparingRebalance => {
            m.last_heard = now;
            Err(GroupError::RebalanceInProgress)
        }
        _ => {
            m.last_heard = now;
            Ok(())
        }
    }
}
