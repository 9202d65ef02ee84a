//! The consumer protocol driven heartbeat by heartbeat through the coordinator, without a
//! runtime: joins, revoke-then-assign, leaves, session and rebalance timeouts, fencing, static
//! members, both protocols in one namespace, and commits with member epochs.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use uuid::Uuid;

use super::*;
use crate::group::{
    Action, CommitRequest, Coordinator, GroupConfig, GroupError, JoinRequest, OffsetToCommit,
    RequestId, Response,
};

const G: &str = "g";
const T: &str = "t";

fn topic_id() -> Uuid {
    Uuid::from_u128(0x7)
}

struct Harness {
    c: Coordinator,
    now: i64,
    next_request: RequestId,
    topics: Topics,
    /// Every record appended, per offsets partition, in order (for reload tests).
    log: BTreeMap<i32, Vec<crate::group::OffsetRecord>>,
    /// The group's own configs, as the driver passes them from the metadata image.
    overrides: GroupOverrides,
}

fn parts(list: &[i32]) -> Assignment {
    let mut a = Assignment::new();
    if !list.is_empty() {
        a.insert(topic_id(), list.iter().copied().collect());
    }
    a
}

impl Harness {
    fn new() -> Harness {
        Harness::with(ConsumerConfig::default())
    }

    fn with(consumer: ConsumerConfig) -> Harness {
        let mut c = Coordinator::new(GroupConfig {
            initial_rebalance_delay_ms: 0,
            consumer,
            ..GroupConfig::default()
        });
        c.set_partition_count(50);
        for p in 0..50 {
            c.partition_ready(p, 0);
        }
        let mut topics = Topics::new();
        topics.insert(
            T.to_string(),
            TopicView {
                id: topic_id(),
                partitions: 3,
            },
        );
        Harness {
            c,
            now: 0,
            next_request: 1,
            topics,
            log: BTreeMap::new(),
            overrides: GroupOverrides::default(),
        }
    }

    /// Plays the driver: appends commit at once; returns every answer.
    fn run(&mut self, actions: Vec<Action>) -> BTreeMap<RequestId, Response> {
        let mut answers = BTreeMap::new();
        let mut queue = actions;
        while !queue.is_empty() {
            let mut next = Vec::new();
            for a in queue {
                match a {
                    Action::Respond(id, r) => {
                        assert!(answers.insert(id, r).is_none(), "answered twice");
                    }
                    Action::Append {
                        partition,
                        token,
                        records,
                        ..
                    } => {
                        self.log.entry(partition).or_default().extend(records);
                        next.extend(self.c.append_done(token, Ok(()), self.now));
                    }
                    // Logged by the driver; nothing to play.
                    Action::MemberExpired { .. } => {}
                }
            }
            queue = next;
        }
        answers
    }

    /// A new coordinator that replays what this one wrote (a restart).
    fn restart(&mut self) {
        let mut c = Coordinator::new(self.c.config().clone());
        c.set_partition_count(50);
        for p in 0..50 {
            c.load_begin(p);
            for (k, v) in self.log.get(&p).into_iter().flatten() {
                c.load_record(p, k, v.as_deref()).unwrap();
            }
            c.load_finish(p, self.now);
        }
        self.c = c;
    }

    fn answer(&mut self, actions: Vec<Action>, request: RequestId) -> Response {
        self.run(actions)
            .remove(&request)
            .expect("the request was answered")
    }

    fn send(&mut self, req: HeartbeatRequest) -> HeartbeatResponse {
        self.next_request += 1;
        let id = self.next_request;
        let topics = self.topics.clone();
        let overrides = self.overrides;
        let actions = self
            .c
            .consumer_heartbeat(id, req, &topics, &overrides, self.now);
        match self.answer(actions, id) {
            Response::ConsumerHeartbeat(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A join (epoch 0) with the full set of fields, as librdkafka sends it.
    fn join(&mut self, member: &str) -> HeartbeatResponse {
        self.send(HeartbeatRequest {
            group_id: G.to_string(),
            member_id: member.to_string(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec![T.to_string()]),
            owned: Some(Assignment::new()),
            version: 1,
            ..HeartbeatRequest::default()
        })
    }

    /// A steady heartbeat: epoch and (optionally) what the member owns now.
    fn beat(&mut self, member: &str, epoch: i32, owned: Option<&[i32]>) -> HeartbeatResponse {
        self.send(HeartbeatRequest {
            group_id: G.to_string(),
            member_id: member.to_string(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            owned: owned.map(parts),
            version: 1,
            ..HeartbeatRequest::default()
        })
    }

    fn leave(&mut self, member: &str, epoch: i32, instance: Option<&str>) -> HeartbeatResponse {
        self.send(HeartbeatRequest {
            group_id: G.to_string(),
            member_id: member.to_string(),
            member_epoch: epoch,
            instance_id: instance.map(str::to_string),
            rebalance_timeout_ms: -1,
            version: 1,
            ..HeartbeatRequest::default()
        })
    }

    fn tick(&mut self, to: i64) {
        self.now = to;
        let actions = self.c.tick(to);
        assert!(
            self.run(actions).is_empty(),
            "consumer timers answer nothing"
        );
    }

    fn commit(&mut self, member: &str, epoch: i32) -> Option<GroupError> {
        self.next_request += 1;
        let id = self.next_request;
        let req = CommitRequest {
            group_id: G.to_string(),
            member_id: member.to_string(),
            instance_id: None,
            generation: epoch,
            retention_ms: -1,
            unknown_group: GroupError::GroupIdNotFound,
            offsets: vec![OffsetToCommit {
                topic: T.to_string(),
                partition: 0,
                offset: 42,
                leader_epoch: -1,
                metadata: None,
            }],
        };
        let actions = self.c.commit(id, req, self.now);
        match self.answer(actions, id) {
            Response::Commit(r) => r.partitions[0].2,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn state(&self) -> ConsumerGroupState {
        self.c.consumer_describe(G).unwrap().state
    }
}

/// What an answer says the member now has; `None` when it carries no assignment (unchanged).
fn news(r: &HeartbeatResponse) -> Option<Vec<i32>> {
    r.assignment.as_ref().map(|a| {
        a.get(&topic_id())
            .map(|ps| ps.iter().copied().collect())
            .unwrap_or_default()
    })
}

fn assigned(r: &HeartbeatResponse) -> Vec<i32> {
    let a = r.assignment.as_ref().expect("an assignment in the answer");
    a.get(&topic_id())
        .map(|ps| ps.iter().copied().collect())
        .unwrap_or_default()
}

#[test]
fn first_member_joins_and_gets_every_partition() {
    let mut h = Harness::new();
    let r = h.join("a");
    assert_eq!(r.error, None);
    assert_eq!(r.member_id, "a");
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.heartbeat_interval_ms, 5000);
    assert_eq!(assigned(&r), vec![0, 1, 2]);
    assert_eq!(h.state(), ConsumerGroupState::Stable);
    // A steady heartbeat with nothing new carries no assignment.
    let r = h.beat("a", 1, None);
    assert_eq!((r.error, r.member_epoch, r.assignment), (None, 1, None));
}

#[test]
fn second_member_waits_until_the_first_revokes() {
    let mut h = Harness::new();
    assert_eq!(h.join("a").member_epoch, 1);
    // b joins: epoch 2, target {a: [0,1], b: [2]}; 2 is still a's, so b gets nothing yet.
    let b = h.join("b");
    assert_eq!(b.member_epoch, 2);
    assert_eq!(assigned(&b), Vec::<i32>::new());
    assert_eq!(h.state(), ConsumerGroupState::Reconciling);
    // a learns: keep [0,1], give up 2; it stays at epoch 1 until it has.
    let a = h.beat("a", 1, Some(&[0, 1, 2]));
    assert_eq!(a.member_epoch, 1);
    assert_eq!(assigned(&a), vec![0, 1]);
    // Still not b's while a owns it.
    let b = h.beat("b", 2, Some(&[]));
    assert_eq!((b.member_epoch, news(&b)), (2, None));
    let a = h.beat("a", 1, Some(&[0, 1, 2]));
    assert_eq!(a.member_epoch, 1, "a still owns 2: no epoch bump");
    // a reports it let 2 go: it moves to epoch 2, and 2 is free.
    let a = h.beat("a", 1, Some(&[0, 1]));
    assert_eq!(
        (a.member_epoch, news(&a)),
        (2, None),
        "[0,1] unchanged: not resent"
    );
    let b = h.beat("b", 2, Some(&[]));
    assert_eq!(assigned(&b), vec![2]);
    assert_eq!(h.state(), ConsumerGroupState::Stable);
}

#[test]
fn a_third_member_gets_one_partition_after_revocations() {
    let mut h = Harness::new();
    h.join("a");
    h.join("b");
    h.beat("a", 1, Some(&[0, 1]));
    h.beat("b", 2, Some(&[]));
    let c = h.join("c");
    assert_eq!((c.member_epoch, assigned(&c)), (3, vec![]));
    let a = h.beat("a", 2, Some(&[0, 1]));
    assert_eq!(assigned(&a).len(), 1, "a revokes down to one");
    let a = h.beat("a", 2, Some(&assigned(&a)));
    assert_eq!(a.member_epoch, 3);
    let b = h.beat("b", 2, Some(&[2]));
    assert_eq!((b.member_epoch, news(&b)), (3, None), "b keeps [2]");
    let c = h.beat("c", 3, Some(&[]));
    assert_eq!(
        c.assignment
            .as_ref()
            .map(|a| a.values().map(BTreeSet::len).sum::<usize>()),
        Some(1)
    );
    assert_eq!(h.state(), ConsumerGroupState::Stable);
}

#[test]
fn leaving_with_epoch_minus_one_frees_partitions_at_once() {
    let mut h = Harness::new();
    h.join("a");
    h.join("b");
    h.beat("a", 1, Some(&[0, 1]));
    h.beat("b", 2, Some(&[]));
    let r = h.leave("a", LEAVE_EPOCH, None);
    assert_eq!(
        (r.error, r.member_epoch, r.member_id.as_str()),
        (None, -1, "a")
    );
    let b = h.beat("b", 2, Some(&[2]));
    assert_eq!((b.member_epoch, assigned(&b)), (3, vec![0, 1, 2]));
    // Gone for good: a stale heartbeat from it is refused.
    assert_eq!(
        h.beat("a", 2, None).error,
        Some(GroupError::UnknownMemberId)
    );
}

#[test]
fn a_silent_member_is_removed_after_the_session_timeout() {
    let mut h = Harness::new();
    h.join("a");
    h.join("b");
    h.beat("a", 1, Some(&[0, 1]));
    h.beat("b", 2, Some(&[]));
    // a keeps heartbeating; b goes silent.
    for t in (5_000..45_000).step_by(5_000) {
        h.tick(t);
        assert_eq!(h.beat("a", 2, Some(&[0, 1])).member_epoch, 2);
    }
    h.tick(45_000);
    let a = h.beat("a", 2, Some(&[0, 1]));
    assert_eq!((a.member_epoch, assigned(&a)), (3, vec![0, 1, 2]));
    assert_eq!(
        h.beat("b", 2, None).error,
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(h.c.next_deadline(), Some(h.now + 45_000));
}

#[test]
fn group_configs_set_the_session_timeout_and_heartbeat_interval_of_members_already_in() {
    let mut h = Harness::new();
    h.join("a");
    h.join("b");
    h.beat("a", 1, Some(&[0, 1]));
    assert_eq!(h.beat("b", 2, Some(&[])).heartbeat_interval_ms, 5_000);
    // consumer.session.timeout.ms=60000 and consumer.heartbeat.interval.ms=6000 are set on the
    // group: the next heartbeat of each member takes them.
    h.overrides = GroupOverrides {
        session_timeout_ms: Some(60_000),
        heartbeat_interval_ms: Some(6_000),
    };
    assert_eq!(h.beat("b", 2, Some(&[])).heartbeat_interval_ms, 6_000);
    for t in (5_000..60_000).step_by(5_000) {
        h.tick(t);
        let a = h.beat("a", 2, Some(&[0, 1]));
        // Past the broker's 45 s, b is still in: its session is the group's 60 s.
        assert_eq!((a.member_epoch, a.heartbeat_interval_ms), (2, 6_000));
    }
    h.tick(60_000);
    let a = h.beat("a", 2, Some(&[0, 1]));
    assert_eq!((a.member_epoch, assigned(&a)), (3, vec![0, 1, 2]));
    assert_eq!(
        h.beat("b", 2, None).error,
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(h.c.next_deadline(), Some(h.now + 60_000));
    // The overrides deleted: back to the broker's settings at the next heartbeat.
    h.overrides = GroupOverrides::default();
    assert_eq!(h.beat("a", 3, None).heartbeat_interval_ms, 5_000);
    assert_eq!(h.c.next_deadline(), Some(h.now + 45_000));
}

#[test]
fn a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout() {
    let mut h = Harness::new();
    h.join("a");
    h.join("b");
    assert_eq!(h.beat("a", 1, Some(&[0, 1, 2])).member_epoch, 1);
    // a keeps heartbeating but never lets go of 2.
    for t in (5_000..30_000).step_by(5_000) {
        h.tick(t);
        assert_eq!(h.beat("a", 1, Some(&[0, 1, 2])).member_epoch, 1);
        let b = h.beat("b", 2, Some(&[]));
        assert_eq!(news(&b), None, "2 is never given to b while a holds it");
    }
    h.tick(30_000);
    assert_eq!(
        h.beat("a", 1, Some(&[0, 1, 2])).error,
        Some(GroupError::UnknownMemberId)
    );
    let b = h.beat("b", 2, Some(&[]));
    assert_eq!((b.member_epoch, assigned(&b)), (3, vec![0, 1, 2]));
}

#[test]
fn fenced_member_epochs() {
    let mut h = Harness::new();
    h.join("a");
    h.join("b");
    h.beat("a", 1, Some(&[0, 1]));
    // a is at 2 now (previous 1).
    assert_eq!(
        h.beat("a", 3, None).error,
        Some(GroupError::FencedMemberEpoch)
    );
    assert_eq!(
        h.beat("a", 5, Some(&[0])).error,
        Some(GroupError::FencedMemberEpoch)
    );
    // The previous epoch with owned ⊆ assigned: a lost reply, accepted.
    let r = h.beat("a", 1, Some(&[0, 1]));
    assert_eq!((r.error, r.member_epoch), (None, 2));
    // The previous epoch claiming a partition it does not have: fenced.
    assert_eq!(
        h.beat("a", 1, Some(&[2])).error,
        Some(GroupError::FencedMemberEpoch)
    );
    // Unknown member at a non-zero epoch.
    assert_eq!(
        h.beat("zz", 2, None).error,
        Some(GroupError::UnknownMemberId)
    );
}

#[test]
fn invalid_heartbeats_get_kafkas_errors() {
    let mut h = Harness::new();
    let mut req = HeartbeatRequest {
        group_id: G.to_string(),
        member_id: "a".to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 1000,
        owned: Some(Assignment::new()),
        version: 1,
        ..HeartbeatRequest::default()
    };
    assert_eq!(
        h.send(req.clone()).error,
        Some(GroupError::InvalidRequest),
        "no subscription"
    );
    req.subscribed_topic_names = Some(vec![T.to_string()]);
    req.server_assignor = Some("sticky".to_string());
    assert_eq!(
        h.send(req.clone()).error,
        Some(GroupError::UnsupportedAssignor)
    );
    req.server_assignor = None;
    req.member_id = String::new();
    assert_eq!(
        h.send(req.clone()).error,
        Some(GroupError::InvalidRequest),
        "v1 needs an id"
    );
    req.member_id = "a".to_string();
    req.member_epoch = -3;
    assert_eq!(h.send(req.clone()).error, Some(GroupError::InvalidRequest));
    req.member_epoch = STATIC_LEAVE_EPOCH;
    assert_eq!(
        h.send(req.clone()).error,
        Some(GroupError::InvalidRequest),
        "-2 needs an instance"
    );
    req.member_epoch = 0;
    req.group_id = String::new();
    assert_eq!(h.send(req).error, Some(GroupError::InvalidRequest));
}

#[test]
fn v0_members_get_a_server_minted_id() {
    let mut h = Harness::new();
    let r = h.send(HeartbeatRequest {
        group_id: G.to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 1000,
        subscribed_topic_names: Some(vec![T.to_string()]),
        owned: Some(Assignment::new()),
        version: 0,
        fresh_id: 99,
        ..HeartbeatRequest::default()
    });
    assert_eq!(r.error, None);
    assert_eq!(
        r.member_id,
        uuid::Builder::from_random_bytes(99u128.to_be_bytes())
            .into_uuid()
            .to_string()
    );
    assert_eq!(h.c.consumer_member_epoch(G, &r.member_id), Some(1));
}

#[test]
fn a_static_member_comes_back_under_a_new_id_without_a_rebalance() {
    let mut h = Harness::new();
    let join = |h: &mut Harness, member: &str| {
        h.send(HeartbeatRequest {
            group_id: G.to_string(),
            member_id: member.to_string(),
            member_epoch: 0,
            instance_id: Some("i1".to_string()),
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec![T.to_string()]),
            owned: Some(Assignment::new()),
            version: 1,
            ..HeartbeatRequest::default()
        })
    };
    assert_eq!(assigned(&join(&mut h, "a")), vec![0, 1, 2]);
    // The instance is held by a live member: a second process is refused.
    assert_eq!(
        join(&mut h, "a2").error,
        Some(GroupError::UnreleasedInstanceId)
    );
    let r = h.leave("a", STATIC_LEAVE_EPOCH, Some("i1"));
    assert_eq!((r.error, r.member_epoch), (None, -2));
    let epoch = h.c.consumer_describe(G).unwrap().group_epoch;
    let r = join(&mut h, "a2");
    assert_eq!(r.error, None);
    assert_eq!((r.member_epoch, assigned(&r)), (1, vec![0, 1, 2]));
    assert_eq!(
        h.c.consumer_describe(G).unwrap().group_epoch,
        epoch,
        "no rebalance"
    );
    // The old id is gone.
    assert_eq!(
        h.beat("a", 1, None).error,
        Some(GroupError::UnknownMemberId)
    );
    // Another member's id cannot take the instance over.
    h.join("b");
    h.leave("a2", STATIC_LEAVE_EPOCH, Some("i1"));
    assert_eq!(join(&mut h, "b").error, Some(GroupError::InvalidRequest));
}

#[test]
fn a_static_members_temporary_leave_and_its_replacement_survive_restarts() {
    let mut h = Harness::new();
    let join = |h: &mut Harness, member: &str| {
        h.send(HeartbeatRequest {
            group_id: G.to_string(),
            member_id: member.to_string(),
            member_epoch: 0,
            instance_id: Some("i1".to_string()),
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec![T.to_string()]),
            owned: Some(Assignment::new()),
            version: 1,
            ..HeartbeatRequest::default()
        })
    };
    assert_eq!(assigned(&join(&mut h, "a")), vec![0, 1, 2]);
    h.leave("a", STATIC_LEAVE_EPOCH, Some("i1"));
    h.restart();
    let d = h.c.consumer_describe(G).unwrap();
    assert_eq!(
        (d.members[0].member_id.as_str(), d.members[0].member_epoch),
        ("a", STATIC_LEAVE_EPOCH),
        "the temporary leave was written"
    );
    assert_eq!(d.members[0].instance_id.as_deref(), Some("i1"));
    let r = join(&mut h, "a2");
    assert_eq!(
        (r.error, r.member_epoch, assigned(&r)),
        (None, 1, vec![0, 1, 2])
    );
    h.restart();
    let after = h.c.consumer_describe(G).unwrap();
    let ids: Vec<&str> = after.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(
        ids,
        ["a2"],
        "the replacement was written, the old id tombstoned"
    );
    assert_eq!(after.group_epoch, d.group_epoch, "no rebalance");
    assert_eq!(h.beat("a2", 1, Some(&[0, 1, 2])).error, None);
    assert_eq!(
        h.beat("a", 1, None).error,
        Some(GroupError::UnknownMemberId)
    );
}

#[test]
fn an_empty_consumer_group_without_offsets_is_deleted_by_the_expiry_check() {
    let mut h = Harness::new();
    h.join("a");
    h.leave("a", LEAVE_EPOCH, None);
    h.restart();
    // Empty, but its records keep it: listed, and its epoch goes on.
    assert_eq!(h.c.consumer_describe(G).unwrap().group_epoch, 2);
    assert_eq!(h.c.list_groups().1.len(), 1);
    let actions = h.c.expire_offsets(h.now);
    assert!(h.run(actions).is_empty());
    assert!(h.c.list_groups().1.is_empty());
    h.restart();
    assert_eq!(h.c.consumer_describe(G), Err(GroupError::GroupIdNotFound));
    // A new group of that name starts over at epoch 1.
    assert_eq!(h.join("b").member_epoch, 1);
}

#[test]
fn range_assignor_splits_contiguously_by_member_id() {
    let mut h = Harness::with(ConsumerConfig {
        assignors: vec![Assignor::Range, Assignor::Uniform],
        ..ConsumerConfig::default()
    });
    h.join("m1");
    h.join("m2");
    let m1 = h.beat("m1", 1, Some(&[0, 1, 2]));
    assert_eq!(assigned(&m1), vec![0, 1]);
    assert_eq!(h.beat("m1", 1, Some(&[0, 1])).member_epoch, 2);
    let m2 = h.beat("m2", 2, Some(&[]));
    assert_eq!(assigned(&m2), vec![2]);
    assert_eq!(h.c.consumer_describe(G).unwrap().assignor, "range");
}

#[test]
fn uniform_is_balanced_and_sticky() {
    let topic = Uuid::from_u128(1);
    let topics = BTreeMap::from([(topic, 7)]);
    let subscribed = BTreeSet::from([topic]);
    let mut members: BTreeMap<String, (BTreeSet<Uuid>, Assignment)> = ["a", "b"]
        .iter()
        .map(|m| (m.to_string(), (subscribed.clone(), Assignment::new())))
        .collect();
    let first = Assignor::Uniform.assign(&members, &topics);
    let sizes: Vec<usize> = first.values().map(|a| a[&topic].len()).collect();
    assert_eq!(sizes, vec![4, 3]);
    for (m, a) in &first {
        members.get_mut(m).unwrap().1 = a.clone();
    }
    members.insert("c".to_string(), (subscribed, Assignment::new()));
    let second = Assignor::Uniform.assign(&members, &topics);
    let sizes: Vec<usize> = second
        .values()
        .map(|a| a.get(&topic).map_or(0, BTreeSet::len))
        .collect();
    assert_eq!(sizes, vec![3, 2, 2]);
    // Sticky: a and b keep only partitions they had.
    for m in ["a", "b"] {
        assert!(second[m][&topic].is_subset(&first[m][&topic]));
    }
}

#[test]
fn a_group_id_is_classic_or_consumer() {
    let mut h = Harness::new();
    h.join("a");
    // A classic JoinGroup onto a live consumer group.
    h.next_request += 1;
    let id = h.next_request;
    let join = JoinRequest {
        group_id: G.to_string(),
        member_id: String::new(),
        instance_id: None,
        client_id: "c".to_string(),
        client_host: "/127.0.0.1".to_string(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".to_string(),
        protocols: vec![("range".to_string(), Bytes::new())],
        require_known_member: false,
        supports_skip_assignment: false,
        fresh_id: 5,
    };
    let actions = h.c.join(id, join.clone(), h.now);
    match h.answer(actions, id) {
        Response::Join(r) => assert_eq!(r.error, Some(GroupError::InconsistentGroupProtocol)),
        other => panic!("{other:?}"),
    }
    // ListGroups names its type and its own state; DescribeGroups does not know it.
    let (_, listed) = h.c.list_groups();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].group_type, listed[0].state_name),
        ("consumer", "Stable")
    );
    assert_eq!(listed[0].protocol_type, "consumer");
    assert_eq!(h.c.describe_group(G).state, crate::group::GroupState::Dead);
    // A classic group with members refuses consumer heartbeats.
    h.next_request += 1;
    let id = h.next_request;
    let mut classic = join;
    classic.group_id = "classic".to_string();
    let actions = h.c.join(id, classic, h.now);
    h.answer(actions, id);
    h.now += 1;
    h.c.tick(h.now);
    let r = h.send(HeartbeatRequest {
        group_id: "classic".to_string(),
        member_id: "x".to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 1000,
        subscribed_topic_names: Some(vec![T.to_string()]),
        owned: Some(Assignment::new()),
        version: 1,
        ..HeartbeatRequest::default()
    });
    assert_eq!(r.error, Some(GroupError::GroupIdNotFound));
    assert_eq!(
        h.c.consumer_describe("classic").unwrap_err(),
        GroupError::GroupIdNotFound
    );
}

#[test]
fn commits_are_fenced_by_member_epoch() {
    let mut h = Harness::new();
    h.join("a");
    assert_eq!(h.commit("a", 1), None);
    assert_eq!(h.commit("a", 0), Some(GroupError::StaleMemberEpoch));
    assert_eq!(h.commit("a", 2), Some(GroupError::StaleMemberEpoch));
    assert_eq!(h.commit("zz", 1), Some(GroupError::UnknownMemberId));
    // An admin commit (epoch -1) to a group with members is refused; to an empty one accepted.
    assert_eq!(h.commit("", -1), Some(GroupError::UnknownMemberId));
    let fetched = h.c.fetch_offsets(G, Some(&[(T.to_string(), 0)])).unwrap();
    assert_eq!(fetched[0].offset, 42);
    h.leave("a", LEAVE_EPOCH, None);
    assert_eq!(h.commit("", -1), None);
    // Offsets outlive the members: a new member finds them.
    h.join("b");
    let fetched = h.c.fetch_offsets(G, Some(&[(T.to_string(), 0)])).unwrap();
    assert_eq!(fetched[0].offset, 42);
    // And an empty consumer group keeps its offsets when it turns classic.
    h.leave("b", LEAVE_EPOCH, None);
    assert_eq!(h.c.list_groups().1[0].state_name, "Empty");
}

/// The key versions of the records appended for `G`, in log order.
fn versions_written(h: &Harness) -> Vec<(i16, bool)> {
    let p = h.c.partition_of(G).unwrap();
    h.log[&p]
        .iter()
        .map(|(k, v)| (i16::from_be_bytes([k[0], k[1]]), v.is_some()))
        .collect()
}

#[test]
fn a_consumer_group_survives_a_restart_with_its_epochs_and_members() {
    let mut h = Harness::new();
    h.join("a");
    h.join("b");
    // a gives up partition 2 and moves to epoch 2; b still waits for it (unreleased).
    assert_eq!(h.beat("a", 1, Some(&[0, 1])).member_epoch, 2);
    assert_eq!(h.commit("a", 2), None);
    let written: BTreeSet<i16> = versions_written(&h).iter().map(|(v, _)| *v).collect();
    // Kafka's records: group epoch, topic metadata, member metadata, target metadata and
    // member, current assignment; plus the commit (1).
    assert_eq!(written, BTreeSet::from([1, 3, 4, 5, 6, 7, 8]));
    let before = h.c.consumer_describe(G).unwrap();
    h.now = 40_000;
    h.restart();
    let after = h.c.consumer_describe(G).unwrap();
    assert_eq!(after, before, "the replay rebuilds the group as it was");
    assert_eq!(
        (after.group_epoch, after.assignment_epoch, after.state),
        (2, 2, ConsumerGroupState::Reconciling)
    );
    // Sessions restart at the load (40 s), not at the last heartbeat (0 s).
    h.tick(84_999);
    assert_eq!(h.c.consumer_describe(G).unwrap().members.len(), 2);
    // Both members go on at their epochs: kept, not fenced; b now gets partition 2.
    let b = h.beat("b", 2, Some(&[]));
    assert_eq!((b.error, b.member_epoch, assigned(&b)), (None, 2, vec![2]));
    let a = h.beat("a", 2, Some(&[0, 1]));
    assert_eq!((a.error, a.member_epoch), (None, 2));
    assert_eq!(h.commit("a", 2), None);
    assert_eq!(
        h.c.consumer_describe(G).unwrap().state,
        ConsumerGroupState::Stable
    );
    let fetched = h.c.fetch_offsets(G, Some(&[(T.to_string(), 0)])).unwrap();
    assert_eq!(fetched[0].offset, 42, "offsets came back too");
    // A leave writes a's tombstones (current assignment, target, metadata) and the new epoch.
    let mark = versions_written(&h).len();
    h.leave("a", LEAVE_EPOCH, None);
    let tail = &versions_written(&h)[mark..];
    assert_eq!(&tail[..3], &[(8, false), (7, false), (5, false)]);
    assert!(tail[3..].contains(&(3, true)));
    h.restart();
    let d = h.c.consumer_describe(G).unwrap();
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.group_epoch, 3);
    let b = h.beat("b", 2, Some(&[2]));
    assert_eq!(
        (b.error, b.member_epoch, assigned(&b)),
        (None, 3, vec![0, 1, 2])
    );
    // A session timeout is written too: after b's, the group comes back empty at epoch 4.
    h.tick(h.now + 45_000);
    h.restart();
    let d = h.c.consumer_describe(G).unwrap();
    assert_eq!((d.members.len(), d.group_epoch), (0, 4));
    let (_, listed) = h.c.list_groups();
    assert_eq!(
        (listed[0].group_type, listed[0].state_name),
        ("consumer", "Empty")
    );
    // Deleted: every record of the group is tombstoned and nothing comes back.
    h.next_request += 1;
    let id = h.next_request;
    let actions = h.c.delete_group(id, G, h.now);
    assert!(matches!(h.answer(actions, id), Response::Delete(Ok(_))));
    h.restart();
    assert_eq!(h.c.consumer_describe(G), Err(GroupError::GroupIdNotFound));
    assert!(h.c.list_groups().1.is_empty());
}

#[test]
fn a_heartbeat_that_changes_the_group_is_answered_only_once_written() {
    let mut h = Harness::new();
    h.join("a");
    h.next_request += 1;
    let id = h.next_request;
    let topics = h.topics.clone();
    let req = HeartbeatRequest {
        group_id: G.to_string(),
        member_id: "b".to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec![T.to_string()]),
        owned: Some(Assignment::new()),
        version: 1,
        ..HeartbeatRequest::default()
    };
    let actions =
        h.c.consumer_heartbeat(id, req, &topics, &GroupOverrides::default(), h.now);
    let [Action::Append { token, records, .. }] = &actions[..] else {
        panic!("one append and no answer yet: {actions:?}");
    };
    assert!(records.iter().any(|(k, _)| k[..2] == 5i16.to_be_bytes()));
    // The append fails (leadership lost): the member is told, nothing is acknowledged.
    let answers =
        h.c.append_done(*token, Err(crate::group::AppendError::NotLeader), h.now);
    match &answers[..] {
        [Action::Respond(r, Response::ConsumerHeartbeat(resp))] => {
            assert_eq!(*r, id);
            assert_eq!(resp.error, Some(GroupError::NotCoordinator));
        }
        other => panic!("unexpected {other:?}"),
    }
    // A heartbeat that changes nothing is answered at once.
    let a = h.beat("a", 1, Some(&[0, 1, 2]));
    assert_eq!(a.error, None);
}

#[test]
fn a_replay_refuses_damaged_consumer_records_and_keeps_the_rest() {
    use crate::group::records::consumer as rec;
    let mut h = Harness::new();
    h.join("a");
    let p = h.c.partition_of(G).unwrap();
    let key = rec::member_record_key(rec::CURRENT_ASSIGNMENT, G, "a");
    h.log
        .get_mut(&p)
        .unwrap()
        .push((key.clone(), Some(vec![0, 0, 1])));
    let mut c = Coordinator::new(h.c.config().clone());
    c.set_partition_count(50);
    c.load_begin(p);
    let mut refused = 0;
    for (k, v) in &h.log[&p] {
        refused += c.load_record(p, k, v.as_deref()).is_err() as usize;
    }
    c.load_finish(p, 0);
    assert_eq!(refused, 1);
    let d = c.consumer_describe(G).unwrap();
    assert_eq!((d.members[0].member_epoch, d.group_epoch), (1, 1));
    assert_eq!(d.members[0].assignment.values().next().unwrap().len(), 3);
}

#[test]
fn a_regex_subscription_follows_the_topics_that_exist() {
    let mut h = Harness::new();
    let join = |h: &mut Harness, member: &str, regex: &str| {
        h.send(HeartbeatRequest {
            group_id: G.to_string(),
            member_id: member.to_string(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(Vec::new()),
            subscribed_topic_regex: Some(regex.to_string()),
            owned: Some(Assignment::new()),
            version: 1,
            ..HeartbeatRequest::default()
        })
    };
    assert_eq!(
        join(&mut h, "a", "(unclosed").error,
        Some(GroupError::InvalidRegularExpression)
    );
    // A new regex is resolved after the answer that takes it, as Kafka resolves it
    // asynchronously: nothing yet, then the matching topic at the next heartbeat.
    let a = join(&mut h, "a", "^t.*");
    assert_eq!((a.member_epoch, assigned(&a)), (1, vec![]));
    let a = h.beat("a", 1, Some(&[]));
    assert_eq!((a.member_epoch, assigned(&a)), (2, vec![0, 1, 2]));
    // A new matching topic moves the epoch at the next heartbeat and is assigned; internal ones
    // never match.
    let other = Uuid::from_u128(0x8);
    h.topics.insert(
        "t2".to_string(),
        TopicView {
            id: other,
            partitions: 1,
        },
    );
    h.topics.insert(
        "__consumer_offsets".to_string(),
        TopicView {
            id: Uuid::from_u128(9),
            partitions: 50,
        },
    );
    let a = h.beat("a", 2, Some(&[0, 1, 2]));
    assert_eq!(a.member_epoch, 3);
    let got = a.assignment.expect("the assignment changed");
    assert_eq!(got.get(&other).map(|p| p.len()), Some(1));
    assert_eq!(got.len(), 2);
    let d = h.c.consumer_describe(G).unwrap();
    assert_eq!(d.members[0].subscribed_topic_regex.as_deref(), Some("^t.*"));
}

#[test]
fn a_new_regex_is_assigned_after_the_literal_topics_and_a_resolved_one_at_once() {
    let mut h = Harness::new();
    let other = Uuid::from_u128(0x8);
    h.topics.insert(
        "r1".to_string(),
        TopicView {
            id: other,
            partitions: 2,
        },
    );
    let join = |h: &mut Harness, member: &str| {
        h.send(HeartbeatRequest {
            group_id: G.to_string(),
            member_id: member.to_string(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec![T.to_string()]),
            subscribed_topic_regex: Some("^r.*".to_string()),
            owned: Some(Assignment::new()),
            version: 1,
            ..HeartbeatRequest::default()
        })
    };
    // librdkafka 0045 (resubscribe with regex): the literal topic in the first answer, the
    // regex's topics in a later one.
    let a = join(&mut h, "a");
    let got = a
        .assignment
        .expect("a join is answered with its assignment");
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![topic_id()]);
    let a = h.beat("a", a.member_epoch, Some(&[0, 1, 2]));
    let got = a.assignment.expect("the regex's topic is added");
    assert_eq!(got.get(&other).map(|p| p.len()), Some(2));
    assert_eq!(got.get(&topic_id()).map(|p| p.len()), Some(3));
    // A second member with the same, already resolved, regex has it resolved at its join: the
    // group's target covers both topics at once.
    let b = join(&mut h, "b");
    assert_eq!(b.error, None);
    let d = h.c.consumer_describe(G).unwrap();
    let targets: usize = d
        .members
        .iter()
        .flat_map(|m| m.target_assignment.values())
        .map(|ps| ps.len())
        .sum();
    assert_eq!(
        targets, 5,
        "both topics' partitions are in the target: {d:?}"
    );
}

#[test]
fn offset_fetches_naming_a_member_are_fenced_by_its_epoch() {
    let mut h = Harness::new();
    h.join("a");
    assert_eq!(h.c.validate_fetch(G, Some("a"), 1), Ok(()));
    assert_eq!(
        h.c.validate_fetch(G, Some("a"), 0),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        h.c.validate_fetch(G, Some("zz"), 1),
        Err(GroupError::UnknownMemberId)
    );
    // Admin tools and classic clients name no member.
    assert_eq!(h.c.validate_fetch(G, None, -1), Ok(()));
    assert_eq!(h.c.validate_fetch(G, Some(""), -1), Ok(()));
    assert_eq!(
        h.c.validate_fetch("classic-or-missing", Some("x"), 3),
        Ok(())
    );
}

/// Random joins, heartbeats (some with stale epochs or owned lists), leaves and silences, with
/// the core asserting its invariants after every step (a partition held by two members panics);
/// then every live client heartbeats until the group must be Stable with each partition owned
/// exactly once.
#[test]
fn random_histories_never_share_a_partition_and_settle() {
    for seed in 1..=150u64 {
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut h = Harness::new();
        // client → (epoch, what it owns); epoch 0 = not joined
        let mut clients: BTreeMap<String, (i32, Vec<i32>)> =
            (0..4).map(|i| (format!("c{i}"), (0, Vec::new()))).collect();
        for _ in 0..200 {
            let id = format!("c{}", next(4));
            let (epoch, owned) = clients[&id].clone();
            let r = match next(10) {
                0 if epoch > 0 => h.leave(&id, LEAVE_EPOCH, None),
                1 => {
                    h.now += 1_000 * next(20) as i64;
                    h.tick(h.now);
                    continue;
                }
                2 if epoch > 1 => h.beat(&id, (epoch - 1 - next(2) as i32).max(1), Some(&owned)),
                _ if epoch == 0 => h.join(&id),
                _ => h.beat(&id, epoch, Some(&owned)),
            };
            let state = clients.get_mut(&id).unwrap();
            match r.error {
                None if r.member_epoch < 0 => *state = (0, Vec::new()),
                None => {
                    state.0 = r.member_epoch;
                    if let Some(a) = &r.assignment {
                        state.1 = a
                            .get(&topic_id())
                            .map(|p| p.iter().copied().collect())
                            .unwrap_or_default();
                    }
                }
                // Fenced or forgotten: drop everything and rejoin (what librdkafka does).
                Some(GroupError::FencedMemberEpoch) | Some(GroupError::UnknownMemberId) => {
                    *state = (0, Vec::new())
                }
                Some(e) => panic!("seed {seed}: unexpected {e:?}"),
            }
        }
        // Heal: every client heartbeats promptly for a while.
        for _ in 0..20 {
            h.now += 100;
            h.tick(h.now);
            let ids: Vec<String> = clients.keys().cloned().collect();
            for id in ids {
                let (epoch, owned) = clients[&id].clone();
                let r = if epoch == 0 {
                    h.join(&id)
                } else {
                    h.beat(&id, epoch, Some(&owned))
                };
                let state = clients.get_mut(&id).unwrap();
                match r.error {
                    None => {
                        state.0 = r.member_epoch;
                        if let Some(a) = &r.assignment {
                            state.1 = a
                                .get(&topic_id())
                                .map(|p| p.iter().copied().collect())
                                .unwrap_or_default();
                        }
                    }
                    Some(_) => *state = (0, Vec::new()),
                }
            }
        }
        assert_eq!(h.state(), ConsumerGroupState::Stable, "seed {seed}");
        let mut all: Vec<i32> = clients.values().flat_map(|(_, o)| o.clone()).collect();
        all.sort();
        assert_eq!(all, vec![0, 1, 2], "seed {seed}: {clients:?}");
    }
}
