//! The coordinator driven message by message, without a runtime: a tiny harness plays the
//! driver (answers appends, collects responses) and the tests check each transition, error code
//! and timeout.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::*;

const G: &str = "g";

struct Harness {
    c: Coordinator,
    now: i64,
    next_request: RequestId,
    responses: BTreeMap<RequestId, Response>,
    /// Appends not yet reported done (when `auto_commit` is off).
    appends: Vec<(AppendToken, i32, Vec<OffsetRecord>)>,
    /// Everything ever appended, per partition, in order (for replay tests).
    log: BTreeMap<i32, Vec<OffsetRecord>>,
    auto_commit: bool,
    fresh: u128,
}

impl Harness {
    fn new(delay: i64) -> Harness {
        let config = GroupConfig {
            initial_rebalance_delay_ms: delay,
            ..GroupConfig::default()
        };
        let mut c = Coordinator::new(config);
        c.set_partition_count(50);
        for p in 0..50 {
            c.partition_ready(p, 0);
        }
        Harness {
            c,
            now: 0,
            next_request: 1,
            responses: BTreeMap::new(),
            appends: Vec::new(),
            log: BTreeMap::new(),
            auto_commit: true,
            fresh: 1,
        }
    }

    fn apply(&mut self, actions: Vec<Action>) {
        let mut queue = actions;
        while !queue.is_empty() {
            let mut next = Vec::new();
            for a in queue {
                match a {
                    Action::Respond(id, r) => {
                        assert!(self.responses.insert(id, r).is_none(), "answered twice");
                    }
                    Action::Append {
                        partition,
                        token,
                        records,
                        ..
                    } => {
                        if self.auto_commit {
                            self.log.entry(partition).or_default().extend(records);
                            next.extend(self.c.append_done(token, Ok(()), self.now));
                        } else {
                            self.appends.push((token, partition, records));
                        }
                    }
                    // Logged by the driver; nothing to play.
                    Action::MemberExpired { .. } => {}
                }
            }
            queue = next;
        }
    }

    fn request(&mut self) -> RequestId {
        self.next_request += 1;
        self.next_request
    }

    fn join_req(
        &mut self,
        member: &str,
        instance: Option<&str>,
        protocols: &[&str],
    ) -> JoinRequest {
        self.fresh += 1;
        JoinRequest {
            group_id: G.into(),
            member_id: member.into(),
            instance_id: instance.map(String::from),
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 20_000,
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|p| (p.to_string(), Bytes::from(format!("meta-{p}"))))
                .collect(),
            require_known_member: true,
            supports_skip_assignment: false,
            fresh_id: self.fresh,
        }
    }

    fn send_join(&mut self, req: JoinRequest) -> RequestId {
        let id = self.request();
        let actions = self.c.join(id, req, self.now);
        self.apply(actions);
        id
    }

    fn take(&mut self, id: RequestId) -> Option<Response> {
        self.responses.remove(&id)
    }

    fn join_response(&mut self, id: RequestId) -> JoinResponse {
        match self.take(id) {
            Some(Response::Join(j)) => j,
            other => panic!("expected a join response, got {other:?}"),
        }
    }

    /// Two-step join (KIP-394); returns the parked request and the minted member id.
    fn join_new(&mut self) -> (RequestId, String) {
        let req = self.join_req("", None, &["range", "roundrobin"]);
        let first = self.send_join(req);
        let r = self.join_response(first);
        assert_eq!(r.error, Some(GroupError::MemberIdRequired));
        assert!(r.member_id.starts_with("client-"));
        let req = self.join_req(&r.member_id, None, &["range", "roundrobin"]);
        (self.send_join(req), r.member_id)
    }

    fn sync(&mut self, member: &str, generation: i32, assignments: &[(&str, &str)]) -> RequestId {
        let id = self.request();
        let req = SyncRequest {
            group_id: G.into(),
            member_id: member.into(),
            instance_id: None,
            generation,
            protocol_type: None,
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
                .collect(),
        };
        let actions = self.c.sync(id, req, self.now);
        self.apply(actions);
        id
    }

    fn sync_response(&mut self, id: RequestId) -> SyncResponse {
        match self.take(id) {
            Some(Response::Sync(s)) => s,
            other => panic!("expected a sync response, got {other:?}"),
        }
    }

    fn heartbeat(&mut self, member: &str, generation: i32) -> Option<GroupError> {
        let id = self.request();
        let req = HeartbeatRequest {
            group_id: G.into(),
            member_id: member.into(),
            instance_id: None,
            generation,
        };
        let actions = self.c.heartbeat(id, req, self.now);
        self.apply(actions);
        match self.take(id) {
            Some(Response::Heartbeat(e)) => e,
            other => panic!("expected a heartbeat response, got {other:?}"),
        }
    }

    fn commit(&mut self, member: &str, generation: i32, offset: i64) -> RequestId {
        let id = self.request();
        let req = CommitRequest {
            group_id: G.into(),
            member_id: member.into(),
            instance_id: None,
            generation,
            retention_ms: -1,
            unknown_group: GroupError::IllegalGeneration,
            offsets: vec![OffsetToCommit {
                topic: "t".into(),
                partition: 0,
                offset,
                leader_epoch: -1,
                metadata: None,
            }],
        };
        let actions = self.c.commit(id, req, self.now);
        self.apply(actions);
        id
    }

    fn commit_error(&mut self, id: RequestId) -> Option<GroupError> {
        match self.take(id) {
            Some(Response::Commit(c)) => c.partitions[0].2,
            other => panic!("expected a commit response, got {other:?}"),
        }
    }

    fn advance(&mut self, ms: i64) {
        self.now += ms;
        let actions = self.c.tick(self.now);
        self.apply(actions);
    }

    fn state(&self) -> (GroupState, i32) {
        self.c.group_state(G).expect("group exists")
    }

    /// One member, Stable at generation 1, with assignment "a".
    fn stable_one(&mut self) -> String {
        let (join, m) = self.join_new();
        let r = self.join_response(join);
        assert_eq!((r.generation, r.leader.as_str()), (1, m.as_str()));
        let s = self.sync(&m, 1, &[(&m, "a")]);
        assert_eq!(self.sync_response(s).assignment, Bytes::from("a"));
        m
    }
}

#[test]
fn first_member_becomes_leader_and_group_goes_stable() {
    let mut h = Harness::new(0);
    let (join, m) = h.join_new();
    let r = h.join_response(join);
    assert_eq!(r.error, None);
    assert_eq!(r.generation, 1);
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(r.leader, m);
    assert_eq!(r.members.len(), 1);
    assert_eq!(h.state(), (GroupState::CompletingRebalance, 1));
    let s = h.sync(&m, 1, &[(&m, "assigned")]);
    let s = h.sync_response(s);
    assert_eq!(s.assignment, Bytes::from("assigned"));
    assert_eq!(h.state(), (GroupState::Stable, 1));
    assert_eq!(h.heartbeat(&m, 1), None);
}

#[test]
fn initial_delay_holds_the_first_rebalance_and_collects_joiners() {
    let mut h = Harness::new(3000);
    let (j1, m1) = h.join_new();
    h.advance(1000);
    let (j2, m2) = h.join_new();
    assert!(
        h.take(j1).is_none() && h.take(j2).is_none(),
        "parked during the delay"
    );
    assert_eq!(h.state().0, GroupState::PreparingRebalance);
    // Someone joined during the delay: it is extended once more (3000 ms of budget left).
    h.advance(2000);
    assert!(h.responses.is_empty());
    h.advance(3000);
    let r1 = h.join_response(j1);
    let r2 = h.join_response(j2);
    assert_eq!((r1.generation, r2.generation), (1, 1));
    assert_eq!(r1.leader, m1);
    assert_eq!(r1.members.len(), 2, "the leader gets everyone");
    assert!(r2.members.is_empty(), "followers get no member list");
    assert_eq!(r2.member_id, m2);
}

#[test]
fn follower_sync_waits_for_the_leader_and_missing_members_get_empty_bytes() {
    let mut h = Harness::new(0);
    let (j1, m1) = h.join_new();
    h.join_response(j1);
    let s = h.sync(&m1, 1, &[(&m1, "x")]);
    h.sync_response(s);
    // A second member joins a Stable group: the leader learns by heartbeat and rejoins.
    let (j2, m2) = h.join_new();
    assert!(h.take(j2).is_none());
    assert_eq!(h.heartbeat(&m1, 1), Some(GroupError::RebalanceInProgress));
    let req = h.join_req(&m1, None, &["range", "roundrobin"]);
    let j1 = h.send_join(req);
    let (r1, r2) = (h.join_response(j1), h.join_response(j2));
    assert_eq!((r1.generation, r2.generation), (2, 2));
    let follower = h.sync(&m2, 2, &[]);
    assert!(h.take(follower).is_none(), "parked until the leader syncs");
    let leader = h.sync(&m1, 2, &[(&m1, "p0")]);
    assert_eq!(h.sync_response(leader).assignment, Bytes::from("p0"));
    assert_eq!(h.sync_response(follower).assignment, Bytes::new());
    assert_eq!(h.state(), (GroupState::Stable, 2));
}

#[test]
fn assignment_is_answered_only_once_durable() {
    let mut h = Harness::new(0);
    let (j, m) = h.join_new();
    h.join_response(j);
    h.auto_commit = false;
    let s = h.sync(&m, 1, &[(&m, "a")]);
    assert!(h.take(s).is_none());
    assert_eq!(h.appends.len(), 1);
    let (token, _, _) = h.appends.pop().unwrap();
    let actions = h.c.append_done(token, Err(AppendError::Storage), h.now);
    h.apply(actions);
    assert_eq!(h.sync_response(s).error, Some(GroupError::NotCoordinator));
    assert_eq!(h.state().0, GroupState::PreparingRebalance);
}

#[test]
fn session_timeout_removes_a_silent_member_and_rebalances() {
    let mut h = Harness::new(0);
    let m1 = h.stable_one();
    let (j2, m2) = h.join_new();
    let req = h.join_req(&m1, None, &["range", "roundrobin"]);
    let j1 = h.send_join(req);
    h.join_response(j1);
    h.join_response(j2);
    let s1 = h.sync(&m1, 2, &[(&m1, "a"), (&m2, "b")]);
    let s2 = h.sync(&m2, 2, &[]);
    h.sync_response(s1);
    h.sync_response(s2);
    // m2 keeps heartbeating, m1 goes silent past its 10 s session.
    for _ in 0..3 {
        h.advance(3000);
        assert_eq!(h.heartbeat(&m2, 2), None);
    }
    h.advance(1001);
    assert_eq!(h.state().0, GroupState::PreparingRebalance);
    assert_eq!(h.c.member_ids(G), vec![m2.clone()]);
    assert_eq!(h.heartbeat(&m2, 2), Some(GroupError::RebalanceInProgress));
    let req = h.join_req(&m2, None, &["range", "roundrobin"]);
    let j = h.send_join(req);
    let r = h.join_response(j);
    assert_eq!((r.generation, r.leader.as_str()), (3, m2.as_str()));
}

#[test]
fn join_timer_drops_members_that_do_not_rejoin() {
    let mut h = Harness::new(0);
    let m1 = h.stable_one();
    let (j2, _m2) = h.join_new();
    // m1 never rejoins; heartbeats keep its session alive but the rebalance timeout (20 s) ends it.
    for _ in 0..6 {
        h.advance(3000);
        let _ = h.heartbeat(&m1, 1);
    }
    h.advance(3000);
    let r2 = h.join_response(j2);
    assert_eq!(r2.generation, 2);
    assert_eq!(r2.members.len(), 1, "m1 was dropped");
    assert_eq!(h.heartbeat(&m1, 2), Some(GroupError::UnknownMemberId));
}

#[test]
fn sync_timer_removes_members_that_never_sync() {
    let mut h = Harness::new(0);
    let (j1, m1) = h.join_new();
    h.join_response(j1);
    h.advance(20_000);
    assert!(h
        .c
        .group_state(G)
        .is_some_and(|(s, _)| s == GroupState::Empty));
    assert_eq!(h.heartbeat(&m1, 1), Some(GroupError::UnknownMemberId));
}

#[test]
fn errors_of_join() {
    let mut h = Harness::new(0);
    let mut req = h.join_req("", None, &["range"]);
    req.group_id = String::new();
    let id = h.send_join(req);
    assert_eq!(h.join_response(id).error, Some(GroupError::InvalidGroupId));
    let mut req = h.join_req("", None, &["range"]);
    req.session_timeout_ms = 1000;
    let id = h.send_join(req);
    assert_eq!(
        h.join_response(id).error,
        Some(GroupError::InvalidSessionTimeout)
    );
    let req = h.join_req("nobody", None, &["range"]);
    let id = h.send_join(req);
    assert_eq!(h.join_response(id).error, Some(GroupError::UnknownMemberId));
    h.stable_one();
    let req = h.join_req("", None, &["sticky"]);
    let id = h.send_join(req);
    assert_eq!(
        h.join_response(id).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    let mut req = h.join_req("", None, &["range"]);
    req.protocol_type = "connect".into();
    let id = h.send_join(req);
    assert_eq!(
        h.join_response(id).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
}

#[test]
fn group_max_size_refuses_extra_members() {
    let mut h = Harness::new(0);
    let config = GroupConfig {
        initial_rebalance_delay_ms: 0,
        max_size: 1,
        ..GroupConfig::default()
    };
    h.c = Coordinator::new(config);
    h.c.set_partition_count(50);
    for p in 0..50 {
        h.c.partition_ready(p, 0);
    }
    h.stable_one();
    let mut req = h.join_req("", None, &["range"]);
    req.require_known_member = false;
    let id = h.send_join(req);
    assert_eq!(
        h.join_response(id).error,
        Some(GroupError::GroupMaxSizeReached)
    );
}

#[test]
fn errors_of_sync_and_heartbeat() {
    let mut h = Harness::new(0);
    let m = h.stable_one();
    assert_eq!(h.heartbeat(&m, 7), Some(GroupError::IllegalGeneration));
    assert_eq!(
        h.heartbeat("stranger", 1),
        Some(GroupError::UnknownMemberId)
    );
    let s = h.sync(&m, 9, &[]);
    assert_eq!(
        h.sync_response(s).error,
        Some(GroupError::IllegalGeneration)
    );
    let id = h.request();
    let mut req = SyncRequest {
        group_id: G.into(),
        member_id: m.clone(),
        instance_id: None,
        generation: 1,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("roundrobin".into()),
        assignments: vec![],
    };
    let a = h.c.sync(id, req.clone(), h.now);
    h.apply(a);
    assert_eq!(
        h.sync_response(id).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    req.protocol_name = Some("range".into());
    let id = h.request();
    let a = h.c.sync(id, req, h.now);
    h.apply(a);
    assert_eq!(
        h.sync_response(id).assignment,
        Bytes::from("a"),
        "Stable: stored bytes"
    );
}

#[test]
fn leave_removes_and_rebalances_to_empty() {
    let mut h = Harness::new(0);
    let m = h.stable_one();
    let id = h.request();
    let leaving = vec![
        LeavingMember {
            member_id: m.clone(),
            instance_id: None,
        },
        LeavingMember {
            member_id: "ghost".into(),
            instance_id: None,
        },
    ];
    let a = h.c.leave(id, G, leaving, h.now);
    h.apply(a);
    match h.take(id) {
        Some(Response::Leave(l)) => {
            assert_eq!(l.error, None);
            assert_eq!(l.members, vec![None, Some(GroupError::UnknownMemberId)]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.state(),
        (GroupState::Empty, 2),
        "generation advances going Empty"
    );
}

#[test]
fn commits_are_fenced_by_generation_and_state() {
    let mut h = Harness::new(0);
    // Simple (assign()) commit on an unknown group.
    let id = h.commit("", -1, 5);
    assert_eq!(h.commit_error(id), None);
    let id = h.commit("", 3, 5);
    assert_eq!(
        h.commit_error(id),
        Some(GroupError::UnknownMemberId),
        "gen ≥ 0 names a member"
    );
    assert_eq!(h.c.fetch_offsets(G, None).unwrap()[0].offset, 5);
}

#[test]
fn commit_rules_for_a_consumer_group() {
    let mut h = Harness::new(0);
    let id = h.commit("m", 1, 5);
    assert_eq!(
        h.commit_error(id),
        Some(GroupError::IllegalGeneration),
        "unknown group, gen ≥ 0"
    );
    let m = h.stable_one();
    let id = h.commit(&m, 1, 10);
    assert_eq!(h.commit_error(id), None);
    let id = h.commit(&m, 0, 11);
    assert_eq!(h.commit_error(id), Some(GroupError::IllegalGeneration));
    let id = h.commit("", -1, 11);
    assert_eq!(
        h.commit_error(id),
        Some(GroupError::UnknownMemberId),
        "non-empty group"
    );
    let id = h.commit("other", 1, 11);
    assert_eq!(h.commit_error(id), Some(GroupError::UnknownMemberId));
    let fetched =
        h.c.fetch_offsets(G, Some(&[("t".into(), 0), ("t".into(), 1)]))
            .unwrap();
    assert_eq!((fetched[0].offset, fetched[1].offset), (10, -1));
    // In PreparingRebalance a current member may still commit (eager revoke callbacks).
    let (_j2, _) = h.join_new();
    assert_eq!(h.state().0, GroupState::PreparingRebalance);
    let id = h.commit(&m, 1, 12);
    assert_eq!(h.commit_error(id), None);
    assert_eq!(h.c.fetch_offsets(G, None).unwrap()[0].offset, 12);
}

#[test]
fn commit_in_completing_rebalance_is_refused_and_metadata_is_bounded() {
    let mut h = Harness::new(0);
    let (j, m) = h.join_new();
    h.join_response(j);
    let id = h.commit(&m, 1, 1);
    assert_eq!(h.commit_error(id), Some(GroupError::RebalanceInProgress));
    let id = h.request();
    let req = CommitRequest {
        group_id: "simple".into(),
        member_id: String::new(),
        instance_id: None,
        generation: -1,
        retention_ms: -1,
        unknown_group: GroupError::IllegalGeneration,
        offsets: vec![
            OffsetToCommit {
                topic: "t".into(),
                partition: 0,
                offset: 1,
                leader_epoch: -1,
                metadata: Some("x".repeat(5000)),
            },
            OffsetToCommit {
                topic: "t".into(),
                partition: 1,
                offset: 2,
                leader_epoch: -1,
                metadata: None,
            },
        ],
    };
    let a = h.c.commit(id, req, h.now);
    h.apply(a);
    match h.take(id) {
        Some(Response::Commit(c)) => {
            assert_eq!(c.partitions[0].2, Some(GroupError::OffsetMetadataTooLarge));
            assert_eq!(c.partitions[1].2, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn commit_waits_for_its_append_and_a_failure_changes_nothing() {
    let mut h = Harness::new(0);
    h.auto_commit = false;
    let id = h.commit("", -1, 7);
    assert!(
        h.take(id).is_none(),
        "not answered before the append is committed"
    );
    assert_eq!(h.c.fetch_offsets(G, None).unwrap(), vec![]);
    let (token, _, _) = h.appends.pop().unwrap();
    let a = h.c.append_done(token, Err(AppendError::NotLeader), h.now);
    h.apply(a);
    assert_eq!(h.commit_error(id), Some(GroupError::NotCoordinator));
    assert_eq!(h.c.fetch_offsets(G, None).unwrap(), vec![]);
    // Two commits whose completions arrive out of order: the later one still wins.
    let first = h.commit("", -1, 1);
    let second = h.commit("", -1, 2);
    let (t2, _, _) = h.appends.pop().unwrap();
    let (t1, _, _) = h.appends.pop().unwrap();
    let a = h.c.append_done(t2, Ok(()), h.now);
    h.apply(a);
    let a = h.c.append_done(t1, Ok(()), h.now);
    h.apply(a);
    assert_eq!(h.commit_error(first), None);
    assert_eq!(h.commit_error(second), None);
    assert_eq!(h.c.fetch_offsets(G, None).unwrap()[0].offset, 2);
}

#[test]
fn loading_gates_requests_and_replay_restores_groups_and_offsets() {
    let mut h = Harness::new(0);
    let m = h.stable_one();
    let id = h.commit(&m, 1, 42);
    h.commit_error(id);
    let p = partition_for(G, 50);
    let log = h.log.get(&p).cloned().unwrap();
    // A new coordinator replays the partition.
    let mut c = Coordinator::new(GroupConfig::default());
    c.set_partition_count(50);
    c.load_begin(p);
    assert_eq!(
        c.fetch_offsets(G, None),
        Err(GroupError::CoordinatorLoadInProgress)
    );
    let a = c.heartbeat(
        1,
        HeartbeatRequest {
            group_id: G.into(),
            member_id: m.clone(),
            instance_id: None,
            generation: 1,
        },
        0,
    );
    assert_eq!(
        a,
        vec![Action::Respond(1, Response::Heartbeat(None))],
        "NONE while loading"
    );
    for (k, v) in &log {
        c.load_record(p, k, v.as_deref()).unwrap();
    }
    c.load_finish(p, 100);
    assert_eq!(c.group_state(G), Some((GroupState::Stable, 1)));
    assert_eq!(c.fetch_offsets(G, None).unwrap()[0].offset, 42);
    let d = c.describe_group(G);
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].assignment, Bytes::from("a"));
    assert_eq!(d.protocol, "range");
    // The loaded member's session runs from the load: silent, it expires.
    let a = c.tick(100 + 10_000);
    assert!(
        a.iter().any(|a| matches!(a, Action::Append { .. })),
        "empty group record"
    );
}

#[test]
fn static_member_restart_gets_its_assignment_back_without_rebalance() {
    let mut h = Harness::new(0);
    let req = h.join_req("", Some("inst-1"), &["range"]);
    let j = h.send_join(req);
    let r = h.join_response(j);
    assert_eq!(r.error, None, "static members skip MEMBER_ID_REQUIRED");
    assert!(r.member_id.starts_with("inst-1-"));
    let old = r.member_id.clone();
    let s = h.sync(&old, 1, &[(&old, "mine")]);
    h.sync_response(s);
    // The process restarts: same instance id, empty member id.
    let req = h.join_req("", Some("inst-1"), &["range"]);
    let j = h.send_join(req);
    let r = h.join_response(j);
    assert_eq!(r.error, None);
    assert_eq!(r.generation, 1, "no rebalance");
    assert_ne!(r.member_id, old);
    assert_eq!(
        r.leader, old,
        "a pre-v9 leader is told the old id so it does not reassign"
    );
    assert_eq!(h.state(), (GroupState::Stable, 1));
    let s = h.sync(&r.member_id, 1, &[]);
    assert_eq!(h.sync_response(s).assignment, Bytes::from("mine"));
    // The old incarnation is fenced.
    let id = h.request();
    let a = h.c.heartbeat(
        id,
        HeartbeatRequest {
            group_id: G.into(),
            member_id: old,
            instance_id: Some("inst-1".into()),
            generation: 1,
        },
        h.now,
    );
    h.apply(a);
    assert_eq!(
        h.take(id),
        Some(Response::Heartbeat(Some(GroupError::FencedInstanceId)))
    );
}

#[test]
fn static_member_survives_the_join_timeout_but_not_its_session() {
    let mut h = Harness::new(0);
    let req = h.join_req("", Some("inst"), &["range"]);
    let j = h.send_join(req);
    let s_id = h.join_response(j).member_id;
    let s = h.sync(&s_id, 1, &[]);
    h.sync_response(s);
    h.advance(10_001);
    assert_eq!(
        h.state().0,
        GroupState::Empty,
        "session expiry removes static members too"
    );
}

#[test]
fn delete_group_and_offsets() {
    let mut h = Harness::new(0);
    let m = h.stable_one();
    let id = h.commit(&m, 1, 3);
    h.commit_error(id);
    let id = h.request();
    let a = h.c.delete_group(id, G, h.now);
    h.apply(a);
    assert_eq!(
        h.take(id),
        Some(Response::Delete(Err(GroupError::NonEmptyGroup)))
    );
    // OffsetDelete on a subscribed topic of a live consumer group: the metadata here is not a
    // parseable subscription, so every topic counts as subscribed.
    let id = h.request();
    let a = h.c.delete_offsets(id, G, vec![("t".into(), 0)], h.now);
    h.apply(a);
    match h.take(id) {
        Some(Response::Delete(Ok(r))) => {
            assert_eq!(r[0].2, Some(GroupError::GroupSubscribedToTopic))
        }
        other => panic!("{other:?}"),
    }
    let id = h.request();
    let a = h.c.leave(
        id,
        G,
        vec![LeavingMember {
            member_id: m,
            instance_id: None,
        }],
        h.now,
    );
    h.apply(a);
    let id = h.request();
    let a = h.c.delete_group(id, G, h.now);
    h.apply(a);
    assert_eq!(h.take(id), Some(Response::Delete(Ok(vec![]))));
    assert_eq!(h.c.group_state(G), None);
    assert_eq!(h.c.fetch_offsets(G, None).unwrap(), vec![]);
    let id = h.request();
    let a = h.c.delete_group(id, G, h.now);
    h.apply(a);
    assert_eq!(
        h.take(id),
        Some(Response::Delete(Err(GroupError::GroupIdNotFound)))
    );
}

#[test]
fn offsets_of_an_empty_group_expire_after_retention() {
    let mut h = Harness::new(0);
    let id = h.commit("", -1, 3);
    h.commit_error(id);
    h.now += 7 * 24 * 3600 * 1000 - 1;
    let a = h.c.expire_offsets(h.now);
    assert!(a.is_empty());
    h.now += 1;
    let a = h.c.expire_offsets(h.now);
    h.apply(a);
    assert_eq!(h.c.fetch_offsets(G, None).unwrap(), vec![]);
    assert_eq!(
        h.c.group_state(G),
        None,
        "an empty group with no offsets is gone"
    );
}

#[test]
fn protocol_vote_prefers_the_common_choice() {
    let mut h = Harness::new(0);
    let mut req = h.join_req("", None, &["cooperative-sticky", "range"]);
    req.require_known_member = false;
    let j1 = h.send_join(req);
    let r1 = h.join_response(j1);
    assert_eq!(r1.protocol_name.as_deref(), Some("cooperative-sticky"));
    let s = h.sync(&r1.member_id, 1, &[]);
    h.sync_response(s);
    // A rolling upgrade: a member offering only range makes range the choice.
    let mut req = h.join_req("", None, &["range"]);
    req.require_known_member = false;
    let j2 = h.send_join(req);
    let mut req = h.join_req(&r1.member_id, None, &["cooperative-sticky", "range"]);
    req.require_known_member = false;
    let j1 = h.send_join(req);
    assert_eq!(h.join_response(j1).protocol_name.as_deref(), Some("range"));
    assert_eq!(h.join_response(j2).protocol_name.as_deref(), Some("range"));
}

#[test]
fn pending_member_id_expires_and_unblocks_the_join() {
    let mut h = Harness::new(0);
    let m1 = h.stable_one();
    // A client gets an id and never comes back.
    let req = h.join_req("", None, &["range", "roundrobin"]);
    let j = h.send_join(req);
    assert_eq!(h.join_response(j).error, Some(GroupError::MemberIdRequired));
    assert_eq!(
        h.state().0,
        GroupState::Stable,
        "a pending id changes nothing"
    );
    // m1 rejoins (as a leader does on metadata change); completion waits for the pending id.
    let req = h.join_req(&m1, None, &["range", "roundrobin"]);
    let j1 = h.send_join(req);
    assert!(h.take(j1).is_none());
    h.advance(10_000);
    assert_eq!(h.join_response(j1).generation, 2);
}

#[test]
fn a_group_deleted_while_a_commit_is_in_flight_stays_until_the_commit_completes() {
    let mut h = Harness::new(0);
    let id = h.commit("", -1, 1);
    h.commit_error(id);
    h.auto_commit = false;
    let commit = h.commit("", -1, 2);
    let delete = h.request();
    let a = h.c.delete_group(delete, G, h.now);
    h.apply(a);
    let (t_delete, _, _) = h.appends.pop().unwrap();
    let (t_commit, _, _) = h.appends.pop().unwrap();
    let a = h.c.append_done(t_delete, Ok(()), h.now);
    h.apply(a);
    assert_eq!(h.take(delete), Some(Response::Delete(Ok(vec![]))));
    let a = h.c.append_done(t_commit, Ok(()), h.now);
    h.apply(a);
    assert_eq!(h.commit_error(commit), None);
    assert_eq!(h.c.group_state(G), None, "gone once nothing is in flight");
}

#[test]
fn a_lost_join_response_is_answered_again_in_completing_rebalance() {
    let mut h = Harness::new(0);
    let (j, m) = h.join_new();
    let first = h.join_response(j);
    assert_eq!(h.state().0, GroupState::CompletingRebalance);
    let req = h.join_req(&m, None, &["range", "roundrobin"]);
    let again = h.send_join(req);
    assert_eq!(
        h.join_response(again),
        first,
        "same generation, same answer"
    );
    assert_eq!(h.state(), (GroupState::CompletingRebalance, 1));
}

#[test]
fn a_v9_static_leader_replacement_is_told_to_skip_assignment() {
    let mut h = Harness::new(0);
    let req = h.join_req("", Some("i"), &["range"]);
    let j = h.send_join(req);
    let old = h.join_response(j).member_id;
    let s = h.sync(&old, 1, &[(&old, "x")]);
    h.sync_response(s);
    let mut req = h.join_req("", Some("i"), &["range"]);
    req.supports_skip_assignment = true;
    let j = h.send_join(req);
    let r = h.join_response(j);
    assert!(r.skip_assignment);
    assert_eq!(
        r.leader, r.member_id,
        "v9: the new id leads, with the member list"
    );
    assert_eq!(r.members.len(), 1);
    assert_eq!(h.state(), (GroupState::Stable, 1));
}

#[test]
fn a_rebalance_fails_parked_syncs_and_leader_sync_during_loading_is_retriable() {
    let mut h = Harness::new(0);
    let (j1, m1) = h.join_new();
    h.join_response(j1);
    let s1 = h.sync(&m1, 1, &[(&m1, "a")]);
    h.sync_response(s1);
    let (j2, m2) = h.join_new();
    let req = h.join_req(&m1, None, &["range", "roundrobin"]);
    let j1 = h.send_join(req);
    h.join_response(j1);
    h.join_response(j2);
    // m2 syncs and waits; a third member arrives before the leader syncs.
    let s2 = h.sync(&m2, 2, &[]);
    assert!(h.take(s2).is_none());
    let (_j3, _) = h.join_new();
    assert_eq!(
        h.sync_response(s2).error,
        Some(GroupError::RebalanceInProgress)
    );
    assert_eq!(h.state().0, GroupState::PreparingRebalance);

    let mut c = Coordinator::new(GroupConfig::default());
    c.set_partition_count(50);
    c.load_begin(partition_for(G, 50));
    let a = c.sync(
        1,
        SyncRequest {
            group_id: G.into(),
            member_id: "m".into(),
            instance_id: None,
            generation: 1,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
        0,
    );
    assert_eq!(
        a,
        vec![Action::Respond(
            1,
            Response::Sync(SyncResponse {
                error: Some(GroupError::RebalanceInProgress),
                ..SyncResponse::default()
            })
        )]
    );
}

#[test]
fn a_leader_sync_of_a_new_generation_is_stored_while_the_old_assignment_is_in_flight() {
    // librdkafka 0113 (u_multiple_subscription_changes): the leader's SyncGroup of generation
    // N is being written when a join starts generation N+1; the leader's SyncGroup of N+1 must
    // be written too, not parked behind the stale write until the clients time out.
    let mut h = Harness::new(0);
    let m1 = h.stable_one();
    let (j2, m2) = h.join_new();
    let req = h.join_req(&m1, None, &["range", "roundrobin"]);
    let j1 = h.send_join(req);
    h.join_response(j1);
    h.join_response(j2);
    h.auto_commit = false;
    let s1 = h.sync(&m1, 2, &[(&m1, "a"), (&m2, "b")]);
    assert_eq!(
        h.appends.len(),
        1,
        "generation 2's assignment is being written"
    );
    // m2 changes its subscription before the write completes: generation 3.
    let mut req = h.join_req(&m2, None, &["range", "roundrobin"]);
    req.protocols[0].1 = Bytes::from("new-subscription");
    let j2 = h.send_join(req);
    assert_eq!(
        h.sync_response(s1).error,
        Some(GroupError::RebalanceInProgress)
    );
    let req = h.join_req(&m1, None, &["range", "roundrobin"]);
    let j1 = h.send_join(req);
    assert_eq!(h.join_response(j1).generation, 3);
    assert_eq!(h.join_response(j2).generation, 3);
    let s2 = h.sync(&m2, 3, &[]);
    let s1 = h.sync(&m1, 3, &[(&m1, "a3"), (&m2, "b3")]);
    assert_eq!(
        h.appends.len(),
        2,
        "generation 3's assignment is written at once"
    );
    // The stale write completes first, then the current one.
    for (token, _, _) in std::mem::take(&mut h.appends) {
        let actions = h.c.append_done(token, Ok(()), h.now);
        h.apply(actions);
    }
    assert_eq!(h.sync_response(s1).assignment, Bytes::from("a3"));
    assert_eq!(h.sync_response(s2).assignment, Bytes::from("b3"));
    assert_eq!(h.state(), (GroupState::Stable, 3));
}

#[test]
fn a_member_commit_to_an_unknown_group_gets_the_error_the_driver_names() {
    // OffsetCommit v9+ answers GROUP_ID_NOT_FOUND where older versions answer ILLEGAL_GENERATION.
    let mut h = Harness::new(0);
    let id = h.request();
    let req = CommitRequest {
        group_id: G.into(),
        member_id: "m".into(),
        instance_id: None,
        generation: 1,
        retention_ms: -1,
        unknown_group: GroupError::GroupIdNotFound,
        offsets: vec![OffsetToCommit {
            topic: "t".into(),
            partition: 0,
            offset: 3,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    let actions = h.c.commit(id, req, h.now);
    h.apply(actions);
    assert_eq!(h.commit_error(id), Some(GroupError::GroupIdNotFound));
    assert!(h.c.group_state(G).is_none(), "no group is created");
}

#[test]
fn unloading_a_partition_ends_its_groups_and_a_reload_restores_them() {
    let mut h = Harness::new(3000);
    let id = h.commit("", -1, 5);
    assert_eq!(h.commit_error(id), None);
    // A commit in flight when leadership moves, and a join parked in the initial delay.
    h.auto_commit = false;
    let commit = h.commit("", -1, 9);
    let (join, _) = h.join_new();
    assert!(h.take(join).is_none(), "parked during the initial delay");
    let p = partition_for(G, 50);
    let a = h.c.unload(p);
    h.apply(a);
    assert_eq!(
        h.join_response(join).error,
        Some(GroupError::NotCoordinator),
        "the parked join is answered NOT_COORDINATOR"
    );
    assert!(!h.c.holds_partition(p));
    assert_eq!(h.c.fetch_offsets(G, None), Err(GroupError::NotCoordinator));
    assert!(h.c.has_unloading_groups(p), "kept for its append in flight");
    assert_eq!(h.c.next_deadline(), None, "a Dead group runs no timers");
    assert!(h.c.unload(p).is_empty(), "unloading twice is a no-op");
    let (token, _, _) = h.appends.pop().unwrap();
    let a = h.c.append_done(token, Err(AppendError::NotLeader), h.now);
    h.apply(a);
    assert_eq!(h.commit_error(commit), Some(GroupError::NotCoordinator));
    assert!(!h.c.has_unloading_groups(p));
    assert_eq!(h.c.group_state(G), None);
    // Leading it again: the replay brings back what was committed (5, not the failed 9).
    let log = h.log.get(&p).cloned().unwrap();
    h.c.load_begin(p);
    for (k, v) in &log {
        h.c.load_record(p, k, v.as_deref()).unwrap();
    }
    h.c.load_finish(p, h.now);
    assert_eq!(h.c.fetch_offsets(G, None).unwrap()[0].offset, 5);
    // Other partitions were untouched.
    assert!(h.c.holds_partition((p + 1) % 50));
}

#[test]
fn before_the_offsets_topic_is_known_requests_are_retriable_in_place() {
    // A node that FindCoordinator names before it applied the offsets topic: the client must
    // retry where it is (librdkafka hands COORDINATOR_NOT_AVAILABLE on an OffsetFetch to the
    // application), and once the topic is known a group it does not hold is NOT_COORDINATOR.
    let mut c = Coordinator::new(GroupConfig::default());
    assert_eq!(
        c.fetch_offsets(G, None).map(|_| ()),
        Err(GroupError::CoordinatorLoadInProgress)
    );
    c.set_partition_count(50);
    assert_eq!(
        c.fetch_offsets(G, None).map(|_| ()),
        Err(GroupError::NotCoordinator)
    );
    c.partition_ready(c.partition_of(G).unwrap(), 0);
    assert_eq!(c.fetch_offsets(G, None).map(|_| ()), Ok(()));
}
