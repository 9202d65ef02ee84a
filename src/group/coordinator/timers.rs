//! Timers: one index of each group's next deadline (join and sync timeouts, member sessions,
//! pending member ids, the KIP-848 group's own), so a tick touches only due groups; and what
//! a due group runs.

use super::*;

impl Coordinator {
    /// The earliest time [`Coordinator::tick`] has work to do.
    pub fn next_deadline(&self) -> Option<i64> {
        self.timers.first().map(|(at, _)| *at)
    }

    /// Files the group under its current deadline (or none).
    pub(super) fn rearm(&mut self, group_id: &str) {
        if let Some(old) = self.armed.remove(group_id) {
            self.timers.remove(&(old, group_id.to_string()));
        }
        if let Some(at) = self.groups.get(group_id).and_then(Group::deadline) {
            self.armed.insert(group_id.to_string(), at);
            self.timers.insert((at, group_id.to_string()));
        }
    }

    pub(super) fn on_tick(&mut self, now: i64, out: &mut Vec<Action>) {
        let due: Vec<String> = self
            .timers
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, g)| g.clone())
            .collect();
        for id in due {
            self.with_group(&id, |c, g| c.run_timers(g, now, out));
        }
    }

    fn run_timers(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        if g.state == GroupState::Dead {
            return;
        }
        self.expire_consumer_members(g, now, out);
        self.expire_pending_ids(g, now, out);
        if g.join_deadline.is_some_and(|at| at <= now) {
            self.on_join_timer(g, now, out);
        }
        if g.sync_deadline.is_some_and(|at| at <= now) {
            self.on_sync_timer(g, now, out);
        }
        self.expire_sessions(g, now, out);
    }

    /// KIP-848 members past their session or rebalance timeout.
    fn expire_consumer_members(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        let Some(c) = g.consumer.as_mut() else { return };
        let gone = c.expire(now);
        for member in &gone {
            out.push(Action::MemberExpired {
                group: g.id.clone(),
                member: member.to_string(),
            });
        }
        if !gone.is_empty() {
            self.persist_consumer(g, out);
        }
    }

    /// KIP-394 member ids handed out and never used.
    fn expire_pending_ids(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        let before = g.pending.len();
        g.pending.retain(|_, at| *at > now);
        if g.pending.len() < before {
            self.maybe_complete_join(g, now, out);
        }
    }

    /// Classic members whose session ran out.
    fn expire_sessions(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        let due = |m: &Member| m.session_deadline().is_some_and(|at| at <= now);
        let dead: Vec<String> = g
            .members
            .values()
            .filter(|m| due(m))
            .map(|m| m.id.clone())
            .collect();
        for id in dead {
            // An earlier removal may have rebalanced and changed this member's deadline.
            if g.members.get(&id).is_some_and(due) {
                self.remove_member_and_react(g, &id, now, out);
            }
        }
    }

    fn on_join_timer(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        assert_eq!(g.state, GroupState::PreparingRebalance);
        if let Some(mut delay) = g.initial_delay {
            if delay.joined_during && delay.remaining_ms > 0 {
                let step = self
                    .config
                    .initial_rebalance_delay_ms
                    .min(delay.remaining_ms);
                delay.remaining_ms -= step;
                delay.joined_during = false;
                g.initial_delay = Some(delay);
                g.join_deadline = Some(now + step);
                return;
            }
            g.initial_delay = None;
        }
        self.complete_join(g, now, out);
    }

    fn on_sync_timer(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        g.sync_deadline = None;
        if !matches!(
            g.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) || g.awaiting_sync.is_empty()
        {
            g.awaiting_sync.clear();
            return;
        }
        // KAFKA-12890: members that never synced are gone; the rest rebalance without them.
        let missing: Vec<String> = std::mem::take(&mut g.awaiting_sync).into_iter().collect();
        for id in &missing {
            self.remove_member(g, id, out);
        }
        self.prepare_rebalance(g, now, out);
    }
}
