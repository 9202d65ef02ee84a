//! The invariants stated on [`Coordinator`], checked after every step in tests,
//! debug builds and the simulator (a full sweep over every group: too slow for a release
//! broker with many groups), and the cheap per-step checks that always run.

use std::collections::BTreeSet;

use super::*;

/// Whether the full sweep runs after every step.
const FULL_CHECKS: bool = cfg!(any(test, madsim, debug_assertions));

impl Coordinator {
    /// After a step: each request answered at most once, and not left parked once answered.
    pub(super) fn check_after_step(&self, out: &[Action]) {
        let mut answered = BTreeSet::new();
        for action in out {
            if let Action::Respond(request, _) = action {
                assert!(
                    answered.insert(*request),
                    "request {request} answered twice"
                );
            }
        }
        if FULL_CHECKS {
            let parked = self.parked_requests();
            assert!(
                answered.iter().all(|r| !parked.contains(r)),
                "a request answered and still parked"
            );
            self.check_invariants();
        }
    }

    /// A new request's id is not one the coordinator still holds.
    pub(super) fn assert_request_unused(&self, request: RequestId) {
        if FULL_CHECKS {
            assert!(
                !self.parked_requests().contains(&request),
                "request id {request} reused while parked"
            );
        }
    }

    /// Every request the coordinator holds, each once (parked joins and syncs, requests
    /// waiting on an append).
    fn parked_requests(&self) -> BTreeSet<RequestId> {
        let mut parked = BTreeSet::new();
        let mut hold = |r: RequestId| assert!(parked.insert(r), "request {r} parked twice");
        for g in self.groups.values() {
            for m in g.members.values() {
                m.join.iter().for_each(|j| hold(j.request));
                m.sync.iter().for_each(|&s| hold(s));
            }
        }
        self.pending
            .values()
            .filter_map(Pending::request)
            .for_each(hold);
        parked
    }

    fn check_invariants(&self) {
        self.check_timers();
        self.check_appends();
        self.check_loading();
        for g in self.groups.values() {
            assert!(
                self.partition_of(&g.id).is_some(),
                "group {} held without an offsets topic",
                g.id
            );
            g.check(self.next_seq);
        }
    }

    fn check_timers(&self) {
        assert_eq!(
            self.timers.len(),
            self.armed.len(),
            "timer index out of step"
        );
        for (id, at) in &self.armed {
            assert!(
                self.timers.contains(&(*at, id.clone())),
                "group {id}: timer lost"
            );
            let due = self.groups.get(id).and_then(Group::deadline);
            assert_eq!(due, Some(*at), "group {id}: armed deadline is stale");
        }
        for (id, g) in &self.groups {
            if g.deadline().is_some() {
                assert!(
                    self.armed.contains_key(id),
                    "group {id}: deadline not armed"
                );
            }
        }
    }

    fn check_appends(&self) {
        let mut per_group: BTreeMap<&str, usize> = BTreeMap::new();
        for (token, p) in &self.pending {
            assert!(
                *token < self.next_token,
                "append token {token} from the future"
            );
            let g = self.groups.get(p.group());
            let g = g.unwrap_or_else(|| panic!("append {token} for unknown group {}", p.group()));
            if let Some(generation) = p.generation() {
                assert!(
                    generation <= g.generation,
                    "group {}: append of a later generation",
                    g.id
                );
            }
            *per_group.entry(p.group()).or_default() += 1;
        }
        for (id, g) in &self.groups {
            let n = per_group.get(id.as_str()).copied().unwrap_or(0);
            assert_eq!(
                g.appends_in_flight, n,
                "group {id}: appends in flight miscounted"
            );
        }
    }

    fn check_loading(&self) {
        for partition in self.loading.keys() {
            assert_eq!(
                self.partitions.get(partition),
                Some(&Load::Loading),
                "partition {partition}: replay buffer without a load"
            );
        }
        for (partition, load) in &self.partitions {
            if *load == Load::Loading {
                assert!(
                    self.loading.contains_key(partition),
                    "partition {partition}: no buffer"
                );
            }
        }
    }
}

impl Group {
    /// One group's invariants (stated on `Coordinator`).
    fn check(&self, next_seq: u64) {
        let id = &self.id;
        assert!(self.generation >= 0, "group {id}: negative generation");
        assert!(
            self.assignment_in_flight
                .is_none_or(|g| g <= self.generation),
            "group {id}: assignment of a later generation"
        );
        assert!(
            self.offsets.values().all(|c| c.seq < next_seq),
            "group {id}: offset sequence from the future"
        );
        assert!(
            self.pending_txn
                .values()
                .all(|o| !o.is_empty() && o.values().all(|c| c.seq < next_seq)),
            "group {id}: empty or future pending transactional offsets"
        );
        if let Some(c) = &self.consumer {
            assert!(
                self.members.is_empty(),
                "group {id}: consumer group with classic members"
            );
            assert!(
                matches!(self.state, GroupState::Empty | GroupState::Dead),
                "group {id}: consumer group in classic state {:?}",
                self.state
            );
            c.check();
        }
        self.check_members();
        self.check_rebalance();
    }

    fn check_members(&self) {
        let id = &self.id;
        assert!(
            self.members.len() + self.pending.len() <= MAX_MEMBERS,
            "group {id}: too many members"
        );
        match &self.leader {
            Some(l) => assert!(
                self.members.contains_key(l),
                "group {id}: leader {l} not a member"
            ),
            None => assert!(
                self.members.is_empty(),
                "group {id}: members without a leader"
            ),
        }
        if self.state == GroupState::Empty {
            assert!(self.members.is_empty(), "group {id}: Empty with members");
        }
        for (key, m) in &self.members {
            assert_eq!(key, &m.id, "group {id}: member filed under another id");
            assert!(
                !self.pending.contains_key(key),
                "group {id}: {key} both member and pending"
            );
        }
        for (instance, member) in &self.instances {
            let m = self.members.get(member);
            assert!(
                m.is_some_and(|m| m.instance_id.as_deref() == Some(instance)),
                "group {id}: instance {instance} maps to {member}, not a member of that instance"
            );
        }
        assert!(
            self.awaiting_sync
                .iter()
                .all(|m| self.members.contains_key(m)),
            "group {id}: awaiting sync from a non-member"
        );
    }

    /// Parked requests and timers match the rebalance state.
    fn check_rebalance(&self) {
        let id = &self.id;
        let preparing = self.state == GroupState::PreparingRebalance;
        let completing = self.state == GroupState::CompletingRebalance;
        for m in self.members.values() {
            assert!(
                m.join.is_none() || preparing,
                "group {id}: join parked in {:?}",
                self.state
            );
            assert!(
                m.sync.is_none() || completing,
                "group {id}: sync parked in {:?}",
                self.state
            );
        }
        assert_eq!(
            self.join_deadline.is_some(),
            preparing,
            "group {id}: join deadline in {:?}",
            self.state
        );
        assert!(
            self.initial_delay.is_none() || preparing,
            "group {id}: stray initial delay"
        );
        assert!(
            self.sync_deadline.is_none() || completing || self.state == GroupState::Stable,
            "group {id}: sync deadline in {:?}",
            self.state
        );
    }
}

/// The checks catch what they claim to: each test breaks one invariant by hand.
#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    /// A coordinator holding one partition with group `g` in PreparingRebalance: one new
    /// member parked in the initial delay.
    fn with_member() -> (Coordinator, String) {
        let mut c = Coordinator::new(GroupConfig::default());
        c.set_partition_count(1);
        c.partition_ready(0, 0);
        let req = JoinRequest {
            group_id: "g".into(),
            member_id: String::new(),
            instance_id: None,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 20_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::new())],
            require_known_member: false,
            supports_skip_assignment: false,
            fresh_id: 7,
        };
        assert!(c.join(1, req, 0).is_empty(), "parked in the initial delay");
        let member = c.member_ids("g").pop().expect("a member");
        c.check_invariants();
        (c, member)
    }

    #[test]
    #[should_panic(expected = "armed deadline is stale")]
    fn a_stale_timer_is_caught() {
        let (mut c, _) = with_member();
        c.groups.get_mut("g").unwrap().join_deadline = Some(1);
        c.check_invariants();
    }

    #[test]
    #[should_panic(expected = "appends in flight miscounted")]
    fn a_miscounted_append_is_caught() {
        let (mut c, _) = with_member();
        c.groups.get_mut("g").unwrap().appends_in_flight += 1;
        c.check_invariants();
    }

    #[test]
    #[should_panic(expected = "not a member")]
    fn a_leader_outside_the_group_is_caught() {
        let (mut c, _) = with_member();
        c.groups.get_mut("g").unwrap().leader = Some("ghost".into());
        c.check_invariants();
    }

    #[test]
    #[should_panic(expected = "sync parked in PreparingRebalance")]
    fn a_sync_parked_in_the_wrong_state_is_caught() {
        let (mut c, member) = with_member();
        let g = c.groups.get_mut("g").unwrap();
        g.members.get_mut(&member).unwrap().sync = Some(9);
        c.check_invariants();
    }

    #[test]
    #[should_panic(expected = "reused while parked")]
    fn a_reused_request_id_is_refused() {
        let (mut c, _) = with_member();
        let hb = HeartbeatRequest {
            group_id: "g".into(),
            member_id: "x".into(),
            instance_id: None,
            generation: 0,
        };
        c.heartbeat(1, hb, 0);
    }

    #[test]
    #[should_panic(expected = "consumer group with classic members")]
    fn a_consumer_group_with_classic_members_is_caught() {
        let (mut c, _) = with_member();
        let g = c.groups.get_mut("g").unwrap();
        g.consumer = Some(Box::new(ConsumerGroup::new("g", &c.config.consumer)));
        c.check_invariants();
    }
}
