//! SyncGroup: members wait for the leader's assignment, which is written to the offsets log
//! before anyone is answered; a Stable group hands back the current assignment.

use bytes::Bytes;

use super::super::*;
use super::sync_answer;
use crate::group::records;

impl Coordinator {
    pub(in crate::group::coordinator) fn on_sync(
        &mut self,
        request: RequestId,
        req: SyncRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        if req.group_id.is_empty() {
            return respond(out, request, sync_error(GroupError::InvalidGroupId));
        }
        match self.gate(&req.group_id) {
            // Legacy answer while loading: old clients rejoin on it.
            Err(GroupError::CoordinatorLoadInProgress) => {
                return respond(out, request, sync_error(GroupError::RebalanceInProgress));
            }
            Err(e) => return respond(out, request, sync_error(e)),
            Ok(()) => {}
        }
        let id = req.group_id.clone();
        let found = self.with_group(&id, |c, g| c.sync_group(g, request, req, now, out));
        if found.is_none() {
            respond(out, request, sync_error(GroupError::UnknownMemberId));
        }
    }

    fn sync_group(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: SyncRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        if let Err(e) = check_sync(g, &req) {
            return respond(out, request, sync_error(e));
        }
        g.awaiting_sync.remove(&req.member_id);
        match g.state {
            GroupState::Empty => respond(out, request, sync_error(GroupError::UnknownMemberId)),
            GroupState::PreparingRebalance => {
                respond(out, request, sync_error(GroupError::RebalanceInProgress))
            }
            GroupState::Stable => {
                g.members.get_mut(&req.member_id).unwrap().last_heard = now;
                respond(out, request, sync_answer(g, &req.member_id));
            }
            GroupState::CompletingRebalance => {
                let m = g.members.get_mut(&req.member_id).unwrap();
                if let Some(old) = m.sync.replace(request) {
                    respond(out, old, sync_error(GroupError::RebalanceInProgress));
                }
                let is_leader = g.leader.as_deref() == Some(req.member_id.as_str());
                if is_leader && g.assignment_in_flight != Some(g.generation) {
                    self.write_assignment(g, req.assignments, now, out);
                }
            }
            GroupState::Dead => unreachable!("checked above"),
        }
    }

    /// Persists the leader's assignment in the group record; it applies once durable.
    fn write_assignment(
        &mut self,
        g: &mut Group,
        given: Vec<(String, Bytes)>,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let mut given: BTreeMap<String, Bytes> = given.into_iter().collect();
        let assignments: BTreeMap<String, Bytes> = g
            .members
            .keys()
            .map(|id| (id.clone(), given.remove(id).unwrap_or_default()))
            .collect();
        let mut snapshot = g.clone();
        for (id, a) in &assignments {
            snapshot.members.get_mut(id).unwrap().assignment = a.clone();
        }
        let record = (
            records::group_key(&g.id),
            Some(records::group_value(&snapshot.value(now))),
        );
        g.assignment_in_flight = Some(g.generation);
        let pending = Pending::Assignment {
            group: g.id.clone(),
            generation: g.generation,
            assignments,
        };
        self.append_for(g, vec![record], pending, out);
    }

    /// The leader's assignment is written (or not): answer every parked sync and go Stable, or
    /// rebalance.
    pub(in crate::group::coordinator) fn assignment_written(
        &mut self,
        g: &mut Group,
        pending: Pending,
        error: Option<GroupError>,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let Pending::Assignment {
            generation,
            assignments,
            ..
        } = pending
        else {
            unreachable!("not an assignment")
        };
        if g.assignment_in_flight == Some(generation) {
            g.assignment_in_flight = None;
        }
        if g.generation != generation || g.state != GroupState::CompletingRebalance {
            return; // A rebalance already failed the parked syncs.
        }
        if let Some(e) = error {
            for m in g.members.values_mut() {
                if let Some(sync) = m.sync.take() {
                    respond(out, sync, sync_error(e));
                }
            }
            return self.prepare_rebalance(g, now, out);
        }
        for (id, assignment) in assignments {
            if let Some(m) = g.members.get_mut(&id) {
                m.assignment = assignment;
            }
        }
        let parked: Vec<String> = g
            .members
            .values()
            .filter(|m| m.sync.is_some())
            .map(|m| m.id.clone())
            .collect();
        for id in parked {
            let m = g.members.get_mut(&id).unwrap();
            let sync = m.sync.take().unwrap();
            m.last_heard = now;
            respond(out, sync, sync_answer(g, &id));
        }
        g.transition(GroupState::Stable, now);
    }
}

/// The checks of a SyncGroup against the group (`validateSyncGroup`).
fn check_sync(g: &Group, req: &SyncRequest) -> Result<(), GroupError> {
    if g.state == GroupState::Dead {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    g.validate(&req.member_id, req.instance_id.as_deref())?;
    if req.generation != g.generation {
        return Err(GroupError::IllegalGeneration);
    }
    let type_differs = req
        .protocol_type
        .as_ref()
        .is_some_and(|t| Some(t) != g.protocol_type.as_ref());
    let name_differs = req
        .protocol_name
        .as_ref()
        .is_some_and(|n| Some(n) != g.protocol.as_ref());
    if type_differs || name_differs {
        return Err(GroupError::InconsistentGroupProtocol);
    }
    Ok(())
}
