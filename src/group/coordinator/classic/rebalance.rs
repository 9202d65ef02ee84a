//! The rebalance: starting one (with KIP-134's initial delay from Empty), completing the join
//! phase into a new generation, and removing members.

use bytes::Bytes;

use super::super::*;

impl Coordinator {
    pub(in crate::group::coordinator) fn prepare_rebalance(
        &mut self,
        g: &mut Group,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        if g.state == GroupState::CompletingRebalance {
            for m in g.members.values_mut() {
                if let Some(sync) = m.sync.take() {
                    respond(out, sync, sync_error(GroupError::RebalanceInProgress));
                }
                m.assignment = Bytes::new();
            }
        }
        g.sync_deadline = None;
        g.awaiting_sync.clear();
        let from_empty = g.state == GroupState::Empty;
        g.transition(GroupState::PreparingRebalance, now);
        let delay = self.config.initial_rebalance_delay_ms;
        if from_empty && delay > 0 {
            g.initial_delay = Some(InitialDelay {
                remaining_ms: (g.max_rebalance_timeout() - delay).max(0),
                joined_during: false,
            });
            g.join_deadline = Some(now + delay);
        } else {
            g.initial_delay = None;
            g.join_deadline = Some(now + g.max_rebalance_timeout());
            self.maybe_complete_join(g, now, out);
        }
    }

    /// Completes the join early once every member has rejoined and no id is pending (never
    /// during the initial delay, which always runs its course).
    pub(in crate::group::coordinator) fn maybe_complete_join(
        &mut self,
        g: &mut Group,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        if g.state != GroupState::PreparingRebalance || g.initial_delay.is_some() {
            return;
        }
        if g.pending.is_empty() && g.members.values().all(|m| m.join.is_some()) {
            self.complete_join(g, now, out);
        }
    }

    /// The join phase ends: members that did not rejoin go, and the rest get the next
    /// generation (or the group goes Empty).
    pub(in crate::group::coordinator) fn complete_join(
        &mut self,
        g: &mut Group,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        assert_eq!(g.state, GroupState::PreparingRebalance);
        g.join_deadline = None;
        g.initial_delay = None;
        let gone: Vec<String> = g
            .members
            .values()
            .filter(|m| m.join.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            self.remove_member(g, id, out);
        }
        if !g.members.is_empty() && g.members.values().all(|m| m.join.is_none()) {
            // Only static members that have not rejoined: wait another round for them.
            g.join_deadline = Some(now + g.max_rebalance_timeout());
            return;
        }
        let previous = g.generation;
        g.generation = g.generation.checked_add(1).expect("generation overflow");
        assert!(g.generation > previous, "generations never go back");
        if g.members.is_empty() {
            g.protocol = None;
            g.leader = None;
            g.transition(GroupState::Empty, now);
            let group = g.id.clone();
            self.append_group_record(g, now, Pending::GroupRecord { group }, out);
            return;
        }
        Self::start_completing(g, now, out);
    }

    /// Picks the leader and protocol of the new generation and answers every parked join.
    fn start_completing(g: &mut Group, now: i64, out: &mut Vec<Action>) {
        let leader_rejoined = g
            .leader
            .as_ref()
            .and_then(|l| g.members.get(l))
            .is_some_and(|m| m.join.is_some());
        if !leader_rejoined {
            g.leader = g.first_member(true);
        }
        g.protocol = g.select_protocol();
        assert!(g.protocol.is_some(), "members share no protocol");
        g.transition(GroupState::CompletingRebalance, now);
        let ids: Vec<String> = g.members.keys().cloned().collect();
        for id in &ids {
            let response = g.join_response(id);
            let m = g.members.get_mut(id).unwrap();
            m.last_heard = now;
            m.is_new = false;
            if let Some(join) = m.join.take() {
                respond(out, join.request, Response::Join(response));
            }
        }
        g.awaiting_sync = ids.into_iter().collect();
        g.sync_deadline = Some(now + g.max_rebalance_timeout());
    }

    /// Removes a member; its parked requests are told it is unknown.
    pub(in crate::group::coordinator) fn remove_member(
        &mut self,
        g: &mut Group,
        id: &str,
        out: &mut Vec<Action>,
    ) {
        let Some(m) = g.members.remove(id) else {
            return;
        };
        #[cfg(any(madsim, test))]
        if m.instance_id.is_none()
            && g.departed.len() < 8
            && (self.config.planted).is(crate::config::PlantedBug::GroupKeepsDepartedMember)
        {
            g.departed.push(m.clone());
        }
        if let Some(join) = m.join {
            let response = join_error(GroupError::UnknownMemberId, id);
            respond(out, join.request, response);
        }
        if let Some(sync) = m.sync {
            respond(out, sync, sync_error(GroupError::UnknownMemberId));
        }
        if let Some(instance) = &m.instance_id {
            if g.instances.get(instance).map(String::as_str) == Some(id) {
                g.instances.remove(instance);
            }
        }
        g.awaiting_sync.remove(id);
        if g.leader.as_deref() == Some(id) {
            g.leader = g.first_member(false);
        }
    }

    /// Removal by session expiry or LeaveGroup, then what the state calls for. Every removal
    /// path re-checks join completion, so a group never hangs in PreparingRebalance.
    pub(in crate::group::coordinator) fn remove_member_and_react(
        &mut self,
        g: &mut Group,
        id: &str,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        self.remove_member(g, id, out);
        match g.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(g, now, out)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(g, now, out),
            GroupState::Empty | GroupState::Dead => {}
        }
    }
}
