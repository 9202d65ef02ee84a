//! Transactional offsets (TxnOffsetCommit) in the group core, message by message: pending until
//! the marker, committed or dropped by it, fenced like commits, and rebuilt the same by a
//! replay of the offsets log (batches and markers) as live.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::*;

const G: &str = "txn-group";
const PARTITIONS: i32 = 50;
const PID: i64 = 7;

/// What the harness's offsets log holds, in order.
#[derive(Clone, Debug)]
enum Entry {
    Batch {
        records: Vec<OffsetRecord>,
        transaction: Option<TxnProducer>,
    },
    Marker {
        producer_id: i64,
        commit: bool,
    },
}

struct Harness {
    c: Coordinator,
    now: i64,
    next_request: RequestId,
    responses: BTreeMap<RequestId, Response>,
    /// Appends written but not yet reported (when `hold` is on).
    held: Vec<AppendToken>,
    hold: bool,
    log: Vec<Entry>,
}

fn p() -> i32 {
    partition_for(G, PARTITIONS)
}

fn offset(topic: &str, partition: i32, offset: i64) -> OffsetToCommit {
    OffsetToCommit {
        topic: topic.into(),
        partition,
        offset,
        leader_epoch: -1,
        metadata: None,
    }
}

fn commit_request(member: &str, generation: i32, offsets: Vec<OffsetToCommit>) -> CommitRequest {
    CommitRequest {
        group_id: G.into(),
        member_id: member.into(),
        instance_id: None,
        generation,
        retention_ms: -1,
        unknown_group: GroupError::UnknownMemberId,
        offsets,
    }
}

impl Harness {
    fn new() -> Harness {
        let mut c = Coordinator::new(GroupConfig::default());
        c.set_partition_count(PARTITIONS);
        c.partition_ready(p(), 0);
        Harness {
            c,
            now: 1_000,
            next_request: 1,
            responses: BTreeMap::new(),
            held: Vec::new(),
            hold: false,
            log: Vec::new(),
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
                        transaction,
                    } => {
                        assert_eq!(partition, p());
                        self.log.push(Entry::Batch {
                            records,
                            transaction,
                        });
                        if self.hold {
                            self.held.push(token);
                        } else {
                            next.extend(self.c.append_done(token, Ok(()), self.now));
                        }
                    }
                    Action::MemberExpired { .. } => {}
                }
            }
            queue = next;
        }
    }

    fn request(&mut self) -> RequestId {
        let id = self.next_request;
        self.next_request += 1;
        id
    }

    fn errors(&mut self, id: RequestId) -> Vec<Option<GroupError>> {
        match self.responses.remove(&id) {
            Some(Response::Commit(r)) => r.partitions.iter().map(|(_, _, e)| *e).collect(),
            other => panic!("request {id}: {other:?}"),
        }
    }

    fn txn_commit_as(
        &mut self,
        member: &str,
        generation: i32,
        epoch: i16,
        offsets: Vec<OffsetToCommit>,
    ) -> RequestId {
        let id = self.request();
        let req = TxnCommitRequest {
            commit: commit_request(member, generation, offsets),
            producer_id: PID,
            producer_epoch: epoch,
        };
        let a = self.c.txn_commit(id, req, self.now);
        self.apply(a);
        id
    }

    /// A TxnOffsetCommit without member (v0-2, kafkajs), answered NONE.
    fn txn_commit(&mut self, offsets: Vec<OffsetToCommit>) {
        let id = self.txn_commit_as("", -1, 0, offsets);
        assert!(self.errors(id).iter().all(Option::is_none));
    }

    fn plain_commit(&mut self, offsets: Vec<OffsetToCommit>) {
        let id = self.request();
        let a = self.c.commit(id, commit_request("", -1, offsets), self.now);
        self.apply(a);
        assert!(self.errors(id).iter().all(Option::is_none));
    }

    fn marker(&mut self, commit: bool) {
        self.log.push(Entry::Marker {
            producer_id: PID,
            commit,
        });
        let a = self.c.txn_marker(p(), PID, commit, self.now);
        assert!(a.is_empty());
    }

    fn committed(&self, topic: &str, partition: i32) -> i64 {
        let wanted = [(topic.to_string(), partition)];
        self.c.fetch_offsets(G, Some(&wanted)).unwrap()[0].offset
    }

    /// A fresh coordinator that replays the log so far.
    fn replayed(&self) -> Coordinator {
        let mut c = Coordinator::new(GroupConfig::default());
        c.set_partition_count(PARTITIONS);
        c.load_begin(p());
        for e in &self.log {
            match e {
                Entry::Batch {
                    records,
                    transaction,
                } => {
                    for (k, v) in records {
                        match transaction {
                            Some(t) => c.load_txn_record(p(), t.producer_id, k, v.as_deref()),
                            None => c.load_record(p(), k, v.as_deref()),
                        }
                        .unwrap();
                    }
                }
                Entry::Marker {
                    producer_id,
                    commit,
                } => c.load_marker(p(), *producer_id, *commit),
            }
        }
        c.load_finish(p(), self.now);
        c
    }

    /// The replay ends where the live coordinator is: same committed and pending offsets.
    fn assert_replay_matches(&self) {
        let r = self.replayed();
        assert_eq!(r.fetch_offsets(G, None), self.c.fetch_offsets(G, None));
        assert_eq!(r.pending_txn_offsets(G), self.c.pending_txn_offsets(G));
    }
}

#[test]
fn offsets_are_pending_until_the_commit_marker_then_visible() {
    let mut h = Harness::new();
    h.txn_commit(vec![offset("t", 0, 10), offset("t", 1, 20)]);
    // Written as the producer's transactional batch.
    let Some(Entry::Batch { transaction, .. }) = h.log.last() else {
        panic!("no batch")
    };
    assert_eq!(
        *transaction,
        Some(TxnProducer {
            producer_id: PID,
            producer_epoch: 0
        })
    );
    assert_eq!(h.committed("t", 0), -1, "invisible before the marker");
    assert!(h.c.has_pending_txn_offset(G, "t", 0));
    assert!(!h.c.has_pending_txn_offset(G, "t", 2));
    assert!(!h.c.has_pending_txn_offset("other", "t", 0));
    h.assert_replay_matches();
    h.marker(true);
    assert_eq!((h.committed("t", 0), h.committed("t", 1)), (10, 20));
    assert!(!h.c.has_pending_txn_offset(G, "t", 0));
    h.assert_replay_matches();
}

/// OffsetFetch answers each offset with whether a transactional commit for its partition
/// still waits for the marker, from the same look at the group: a real broker's handler that
/// asked twice (the offset, then the pending status) could answer the old offset as stable if
/// the marker settled in between (seen with confluent-kafka's `committed()` right after
/// `commit_transaction`, three brokers, kill -9: one transaction's offsets short).
#[test]
fn a_fetch_tells_each_offset_with_its_pending_status() {
    let mut h = Harness::new();
    h.plain_commit(vec![offset("t", 0, 5)]);
    h.txn_commit(vec![offset("t", 0, 9), offset("t", 1, 3)]);
    let wanted = [
        ("t".to_string(), 0),
        ("t".to_string(), 1),
        ("t".to_string(), 2),
    ];
    let seen = |h: &Harness| -> Vec<(i64, bool)> {
        let fetched = h.c.fetch_offsets(G, Some(&wanted)).unwrap();
        fetched.iter().map(|o| (o.offset, o.unstable)).collect()
    };
    assert_eq!(seen(&h), vec![(5, true), (-1, true), (-1, false)]);
    // Every committed offset of the group: only those with a commit, each with its status.
    let all = h.c.fetch_offsets(G, None).unwrap();
    assert_eq!(
        all.iter()
            .map(|o| (o.partition, o.offset, o.unstable))
            .collect::<Vec<_>>(),
        vec![(0, 5, true)]
    );
    h.assert_replay_matches();
    h.marker(true);
    assert_eq!(seen(&h), vec![(9, false), (3, false), (-1, false)]);
    h.txn_commit(vec![offset("t", 2, 7)]);
    assert_eq!(seen(&h), vec![(9, false), (3, false), (-1, true)]);
    h.marker(false);
    assert_eq!(seen(&h), vec![(9, false), (3, false), (-1, false)]);
    h.assert_replay_matches();
}

#[test]
fn an_abort_marker_drops_them_and_keeps_the_committed_offset() {
    let mut h = Harness::new();
    h.plain_commit(vec![offset("t", 0, 5)]);
    h.txn_commit(vec![offset("t", 0, 9)]);
    assert_eq!(h.committed("t", 0), 5);
    h.marker(false);
    assert_eq!(h.committed("t", 0), 5);
    assert!(h.c.pending_txn_offsets(G).is_empty());
    h.assert_replay_matches();
    // A second marker (a resend) changes nothing.
    h.marker(true);
    assert_eq!(h.committed("t", 0), 5);
    h.assert_replay_matches();
}

#[test]
fn a_commit_marker_applies_an_offset_only_over_older_commits() {
    let mut h = Harness::new();
    // Transactional first, a plain commit later in the log: the later one stays.
    h.txn_commit(vec![offset("t", 0, 9)]);
    h.plain_commit(vec![offset("t", 0, 12)]);
    h.marker(true);
    assert_eq!(h.committed("t", 0), 12);
    h.assert_replay_matches();
    // Plain first, transactional later: the transaction's wins.
    h.plain_commit(vec![offset("t", 1, 30)]);
    h.txn_commit(vec![offset("t", 1, 25)]);
    h.marker(true);
    assert_eq!(h.committed("t", 1), 25);
    h.assert_replay_matches();
}

#[test]
fn a_replay_keeps_undecided_offsets_pending_for_the_coordinators_marker() {
    let mut h = Harness::new();
    h.plain_commit(vec![offset("t", 0, 3)]);
    h.txn_commit(vec![offset("t", 0, 8)]);
    // The group coordinator fails over before the marker: the new one replays the log.
    let mut c = h.replayed();
    assert!(c.has_pending_txn_offset(G, "t", 0));
    let wanted = [("t".to_string(), 0)];
    assert_eq!(c.fetch_offsets(G, Some(&wanted)).unwrap()[0].offset, 3);
    // The transaction coordinator's marker reaches the new leader.
    assert!(c.txn_marker(p(), PID, true, 2_000).is_empty());
    assert_eq!(c.fetch_offsets(G, Some(&wanted)).unwrap()[0].offset, 8);
    assert!(!c.has_pending_txn_offset(G, "t", 0));
    // A group holding nothing but pending offsets comes back too.
    let mut h = Harness::new();
    h.txn_commit(vec![offset("u", 0, 4)]);
    let mut c = h.replayed();
    assert_eq!(c.pending_txn_offsets(G), vec![(PID, "u".into(), 0, 4)]);
    c.txn_marker(p(), PID, false, 2_000);
    assert!(c.pending_txn_offsets(G).is_empty());
}

#[test]
fn a_marker_while_the_partition_loads_is_left_to_the_replay() {
    let h = {
        let mut h = Harness::new();
        h.txn_commit(vec![offset("t", 0, 8)]);
        h
    };
    let mut c = Coordinator::new(GroupConfig::default());
    c.set_partition_count(PARTITIONS);
    c.load_begin(p());
    assert!(c.txn_marker(p(), PID, true, 0).is_empty());
    let Entry::Batch { records, .. } = &h.log[0] else {
        panic!()
    };
    for (k, v) in records {
        c.load_txn_record(p(), PID, k, v.as_deref()).unwrap();
    }
    // The replay reads on to the marker (the driver reads to the log end).
    c.load_marker(p(), PID, true);
    c.load_finish(p(), 0);
    let wanted = [("t".to_string(), 0)];
    assert_eq!(c.fetch_offsets(G, Some(&wanted)).unwrap()[0].offset, 8);
}

#[test]
fn kip_447_fences_a_zombie_member_and_unnamed_commits_pass() {
    let mut h = Harness::new();
    // A stable classic group with one member at generation 1.
    let id = h.request();
    let join = JoinRequest {
        group_id: G.into(),
        member_id: String::new(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "h".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"m"))],
        require_known_member: false,
        supports_skip_assignment: false,
        fresh_id: 1,
    };
    let a = h.c.join(id, join, h.now);
    h.apply(a);
    h.now += 5_000;
    let a = h.c.tick(h.now);
    h.apply(a);
    let Some(Response::Join(j)) = h.responses.remove(&id) else {
        panic!("not joined")
    };
    assert_eq!(j.generation, 1);
    let member = j.member_id;
    let id = h.txn_commit_as(&member, 0, 0, vec![offset("t", 0, 1)]);
    assert_eq!(h.errors(id), vec![Some(GroupError::IllegalGeneration)]);
    let id = h.txn_commit_as("ghost", 1, 0, vec![offset("t", 0, 1)]);
    assert_eq!(h.errors(id), vec![Some(GroupError::UnknownMemberId)]);
    assert!(h.c.pending_txn_offsets(G).is_empty(), "nothing written");
    let id = h.txn_commit_as(&member, 1, 0, vec![offset("t", 0, 1)]);
    assert_eq!(h.errors(id), vec![None]);
    // Without a member (v0-2) the commit is not fenced, even in a non-empty group.
    h.txn_commit(vec![offset("t", 1, 2)]);
    assert_eq!(h.c.pending_txn_offsets(G).len(), 2);
    // A member commit to a group that does not exist is refused, and creates nothing.
    let mut h = Harness::new();
    let id = h.txn_commit_as("m", 3, 0, vec![offset("t", 0, 1)]);
    assert_eq!(h.errors(id), vec![Some(GroupError::UnknownMemberId)]);
    assert_eq!(h.c.group_state(G), None);
}

#[test]
fn a_failed_append_takes_its_offsets_back_and_keeps_the_earlier_ones() {
    let mut h = Harness::new();
    h.txn_commit(vec![offset("t", 0, 4)]);
    h.hold = true;
    let id = h.txn_commit_as("", -1, 0, vec![offset("t", 0, 6), offset("t", 1, 7)]);
    // Pending from the moment the batch is appended (UNSTABLE_OFFSET_COMMIT already).
    assert!(h.c.has_pending_txn_offset(G, "t", 1));
    assert!(!h.responses.contains_key(&id), "answered once written");
    let token = h.held.pop().unwrap();
    let a =
        h.c.append_done(token, Err(AppendError::ProducerFenced), h.now);
    h.hold = false;
    h.apply(a);
    assert_eq!(
        h.errors(id),
        vec![Some(GroupError::InvalidProducerEpoch); 2]
    );
    assert_eq!(h.c.pending_txn_offsets(G), vec![(PID, "t".into(), 0, 4)]);
    h.marker(true);
    assert_eq!(h.committed("t", 0), 4);
    assert_eq!(h.committed("t", 1), -1);
}

#[test]
fn a_marker_before_the_append_completes_settles_the_offsets() {
    let mut h = Harness::new();
    h.hold = true;
    let id = h.txn_commit_as("", -1, 0, vec![offset("t", 0, 6)]);
    // An abort (the transaction timed out) is committed before the append's completion.
    h.marker(false);
    let token = h.held.pop().unwrap();
    let a = h.c.append_done(token, Ok(()), h.now);
    h.apply(a);
    assert_eq!(h.errors(id), vec![None]);
    assert!(h.c.pending_txn_offsets(G).is_empty(), "not left hanging");
    assert_eq!(h.committed("t", 0), -1);
    assert_eq!(h.c.group_state(G), None, "nothing left of the group");
}

#[test]
fn deletes_drop_pending_offsets_as_their_tombstones_do_on_replay() {
    let mut h = Harness::new();
    h.plain_commit(vec![offset("t", 0, 1)]);
    h.txn_commit(vec![offset("t", 0, 2), offset("u", 0, 3)]);
    let id = h.request();
    let a = h.c.delete_offsets(id, G, vec![("t".into(), 0)], h.now);
    h.apply(a);
    assert!(matches!(
        h.responses.remove(&id),
        Some(Response::Delete(Ok(_)))
    ));
    assert_eq!(h.c.pending_txn_offsets(G), vec![(PID, "u".into(), 0, 3)]);
    h.assert_replay_matches();
    // DeleteGroups tombstones the pending keys too.
    let id = h.request();
    let a = h.c.delete_group(id, G, h.now);
    h.apply(a);
    assert!(matches!(
        h.responses.remove(&id),
        Some(Response::Delete(Ok(_)))
    ));
    assert!(h.c.pending_txn_offsets(G).is_empty());
    h.assert_replay_matches();
    h.marker(true);
    assert_eq!(h.c.fetch_offsets(G, None), Ok(Vec::new()));
}

#[test]
fn expiry_leaves_offsets_a_transaction_may_still_commit() {
    let mut h = Harness::new();
    h.plain_commit(vec![offset("t", 0, 1), offset("t", 1, 1)]);
    h.txn_commit(vec![offset("t", 0, 2)]);
    h.now += GroupConfig::default().offsets_retention_ms + 1;
    let a = h.c.expire_offsets(h.now);
    h.apply(a);
    assert_eq!(h.committed("t", 1), -1, "expired");
    assert_eq!(h.committed("t", 0), 1, "kept: a transaction is open on it");
    assert!(h.c.group_state(G).is_some());
    h.marker(true);
    assert_eq!(h.committed("t", 0), 2);
    h.assert_replay_matches();
}
