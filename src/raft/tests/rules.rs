//! Rule-by-rule tests: one node, fed messages one at a time, with the actions it answers with
//! checked exactly. No runtime, no cluster.

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::raft::{
    Action, BeginQuorumEpochRequest, DropReason, EndQuorumEpochRequest, Event, FetchRequest,
    FetchResponse, LogState, Message, NodeId, OffsetAndEpoch, Payload, QuorumStateRecord, Raft,
    RaftConfig, RaftError, RoleKind, VoteRequest, VoteResponse,
};

/// One node under test and the clock it is fed.
struct Node {
    raft: Raft,
    now: u64,
    /// What the node did while starting.
    started: Vec<Action>,
}

fn oe(epoch: u32, offset: u64) -> OffsetAndEpoch {
    OffsetAndEpoch { epoch, offset }
}

fn record(epoch: u32, voted_for: Option<NodeId>, leader: Option<NodeId>) -> QuorumStateRecord {
    QuorumStateRecord {
        epoch,
        voted_for,
        leader,
    }
}

impl Node {
    /// Node `id` of voters 1..=3, from `stored` and a log of `epochs` ending at `end`.
    fn start(
        id: NodeId,
        stored: Option<QuorumStateRecord>,
        epochs: &[(u32, u64)],
        end: u64,
    ) -> Node {
        Node::start_among(&[1, 2, 3], id, stored, epochs, end)
    }

    /// As [`Node::start`], among `voters`.
    fn start_among(
        voters: &[NodeId],
        id: NodeId,
        stored: Option<QuorumStateRecord>,
        epochs: &[(u32, u64)],
        end: u64,
    ) -> Node {
        let voters: BTreeSet<NodeId> = voters.iter().copied().collect();
        let log = LogState {
            epochs: epochs.iter().map(|(e, o)| oe(*e, *o)).collect(),
            end_offset: end,
            ..LogState::default()
        };
        let mut raft = Raft::new(RaftConfig::new(id, voters), stored, log, 0, 7).expect("valid");
        let started = raft.take_actions();
        Node {
            raft,
            now: 0,
            started,
        }
    }

    fn step(&mut self, event: Event) -> Vec<Action> {
        self.raft.step(self.now, 42, event);
        self.raft.take_actions()
    }

    fn recv(&mut self, from: NodeId, message: Message) -> Vec<Action> {
        self.step(Event::Message { from, message })
    }

    fn tick_at(&mut self, now: u64) -> Vec<Action> {
        self.now = now;
        self.step(Event::Tick)
    }

    /// Reports every write in `actions` durable; returns the actions that releases.
    fn persist(&mut self, actions: &[Action]) -> Vec<Action> {
        let mut out = Vec::new();
        for a in actions {
            if let Action::PersistQuorumState(r) = a {
                out.extend(self.step(Event::QuorumStatePersisted(*r)));
            }
        }
        out
    }

    /// Ticks until the election timeout fires (a voter becomes prospective).
    fn time_out(&mut self) -> Vec<Action> {
        let at = self.raft.next_deadline().expect("a deadline");
        self.tick_at(at)
    }

    /// Makes node 1 leader of epoch 1 with votes from 2; returns the leader's actions.
    fn leader() -> (Node, Vec<Action>) {
        let mut n = Node::start(1, None, &[], 0);
        n.time_out();
        let candidate = n.recv(2, pre_vote_granted(0));
        let actions = n.recv(2, Message::VoteResponse(granted(1)));
        assert!(
            actions.is_empty(),
            "the vote cannot count before our own is persisted"
        );
        let mut actions = n.persist(&candidate);
        assert_eq!(n.raft.role(), RoleKind::Leader);
        // The released vote requests are history; keep what the new leader did.
        actions.retain(|a| {
            !matches!(
                a,
                Action::Send {
                    message: Message::VoteRequest(_),
                    ..
                }
            )
        });
        let released = n.persist(&actions);
        actions.extend(released);
        (n, actions)
    }
}

fn sends(actions: &[Action]) -> Vec<(NodeId, Message)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { to, message } => Some((*to, message.clone())),
            _ => None,
        })
        .collect()
}

fn persists(actions: &[Action]) -> Vec<QuorumStateRecord> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::PersistQuorumState(r) => Some(*r),
            _ => None,
        })
        .collect()
}

fn commits(actions: &[Action]) -> Vec<u64> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Commit { high_watermark } => Some(*high_watermark),
            _ => None,
        })
        .collect()
}

fn drops(actions: &[Action]) -> Vec<DropReason> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Dropped { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

fn vote(epoch: u32, candidate: NodeId, last: OffsetAndEpoch, pre_vote: bool) -> Message {
    Message::VoteRequest(VoteRequest {
        candidate_epoch: epoch,
        candidate_id: candidate,
        last_offset_epoch: last.epoch,
        last_offset: last.offset,
        pre_vote,
    })
}

fn granted(epoch: u32) -> VoteResponse {
    VoteResponse {
        error: None,
        leader_epoch: epoch,
        leader_id: None,
        vote_granted: true,
        pre_vote: false,
    }
}

fn pre_vote_granted(epoch: u32) -> Message {
    Message::VoteResponse(VoteResponse {
        pre_vote: true,
        ..granted(epoch)
    })
}

fn fetch(epoch: u32, offset: u64, last_fetched_epoch: u32) -> Message {
    Message::FetchRequest(FetchRequest {
        current_leader_epoch: epoch,
        fetch_offset: offset,
        last_fetched_epoch,
    })
}

/// The one vote response among `actions`.
fn vote_response(actions: &[Action]) -> VoteResponse {
    match sends(actions).as_slice() {
        [(_, Message::VoteResponse(r))] => r.clone(),
        other => panic!("expected one vote response, got {other:?}"),
    }
}

#[test]
fn a_timed_out_voter_pre_votes_without_bumping_its_epoch() {
    let mut n = Node::start(1, Some(record(3, None, None)), &[(2, 0)], 5);
    let deadline = n.raft.next_deadline().unwrap();
    assert!(
        (1000..2000).contains(&deadline),
        "election timeout in [T, 2T): {deadline}"
    );
    assert!(n.tick_at(deadline - 1).is_empty());
    let actions = n.time_out();
    assert_eq!(n.raft.role(), RoleKind::Prospective);
    assert_eq!(n.raft.epoch(), 3);
    assert!(
        persists(&actions).is_empty(),
        "a pre-vote changes no persisted state"
    );
    let expected = vote(3, 1, oe(2, 5), true);
    assert_eq!(sends(&actions), vec![(2, expected.clone()), (3, expected)]);
}

#[test]
fn a_won_pre_vote_makes_a_candidate_whose_requests_wait_for_the_persist() {
    let mut n = Node::start(1, Some(record(3, None, None)), &[(2, 0)], 5);
    n.time_out();
    let actions = n.recv(3, pre_vote_granted(3));
    assert_eq!(n.raft.role(), RoleKind::Candidate);
    assert_eq!(n.raft.epoch(), 4);
    assert_eq!(persists(&actions), vec![record(4, Some(1), None)]);
    assert!(
        sends(&actions).is_empty(),
        "nothing leaves before quorum-state is durable"
    );
    let released = n.persist(&actions);
    let expected = vote(4, 1, oe(2, 5), false);
    assert_eq!(sends(&released), vec![(2, expected.clone()), (3, expected)]);
}

#[test]
fn a_lost_pre_vote_does_not_stand() {
    let mut n = Node::start(1, Some(record(3, None, None)), &[], 0);
    n.time_out();
    let reject = VoteResponse {
        vote_granted: false,
        pre_vote: true,
        ..granted(3)
    };
    n.recv(2, Message::VoteResponse(reject.clone()));
    n.recv(3, Message::VoteResponse(reject));
    assert_eq!((n.raft.role(), n.raft.epoch()), (RoleKind::Prospective, 3));
}

#[test]
fn a_new_leader_appends_leader_change_and_announces_its_epoch() {
    let (n, actions) = Node::leader();
    assert_eq!(n.raft.epoch(), 1);
    let appends: Vec<_> = actions
        .iter()
        .filter(|a| matches!(a, Action::Append { .. }))
        .collect();
    match appends.as_slice() {
        [Action::Append { batches }] => {
            assert_eq!(batches.len(), 1);
            assert_eq!((batches[0].base_offset, batches[0].epoch), (0, 1));
            assert_eq!(
                batches[0].payload,
                Payload::LeaderChange {
                    leader: 1,
                    voters: vec![1, 2, 3]
                }
            );
        }
        other => panic!("expected one append, got {other:?}"),
    }
    let begin = Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
        leader_epoch: 1,
        leader_id: 1,
    });
    assert_eq!(sends(&actions), vec![(2, begin.clone()), (3, begin)]);
    assert!(actions.contains(&Action::RoleChanged {
        role: RoleKind::Leader,
        epoch: 1,
        leader: Some(1)
    }));
}

#[test]
fn a_vote_is_granted_only_to_an_up_to_date_log_and_sent_after_the_persist() {
    // Our log: epoch 2 up to offset 5.
    let mut n = Node::start(2, Some(record(3, None, None)), &[(2, 0)], 5);
    let cases = [(oe(1, 9), false), (oe(2, 4), false), (oe(2, 5), true)];
    for (log, want) in cases {
        let mut n = Node::start(2, Some(record(3, None, None)), &[(2, 0)], 5);
        // Even a refusal waits: it is sent from the new epoch, which must be durable first.
        let actions = n.recv(1, vote(4, 1, log, false));
        assert!(sends(&actions).is_empty());
        let actions = n.persist(&actions);
        assert_eq!(
            vote_response(&actions).vote_granted,
            want,
            "candidate log {log:?}"
        );
    }
    // A grant persists the vote first, and is withheld until then.
    let actions = n.recv(1, vote(4, 1, oe(3, 0), false));
    assert_eq!(
        persists(&actions),
        vec![record(4, None, None), record(4, Some(1), None)]
    );
    assert!(sends(&actions).is_empty());
    let released = n.persist(&actions);
    assert!(vote_response(&released).vote_granted);
    // One vote per epoch: another candidate is refused, the same one granted again.
    assert!(!vote_response(&n.recv(3, vote(4, 3, oe(3, 9), false))).vote_granted);
    assert!(vote_response(&n.recv(1, vote(4, 1, oe(3, 0), false))).vote_granted);
}

#[test]
fn pre_votes_change_nothing_and_are_refused_by_a_follower_that_hears_its_leader() {
    let mut n = Node::start(2, Some(record(3, None, Some(1))), &[(2, 0)], 5);
    assert_eq!(n.raft.role(), RoleKind::Follower);
    // Not yet fetched from the leader: a pre-vote is granted, and nothing is persisted.
    let actions = n.recv(3, vote(3, 3, oe(2, 5), true));
    assert!(persists(&actions).is_empty());
    assert!(vote_response(&actions).vote_granted);
    assert_eq!(n.raft.voted_for(), None);
    // A successful fetch: KIP-996 refuses to unseat a live leader.
    let ok = FetchResponse {
        error: None,
        leader_epoch: 3,
        leader_id: Some(1),
        high_watermark: Some(0),
        diverging_epoch: None,
        snapshot_id: None,
        records: Vec::new(),
        request: oe(2, 5),
    };
    n.recv(1, Message::FetchResponse(ok));
    assert!(!vote_response(&n.recv(3, vote(3, 3, oe(2, 5), true))).vote_granted);
    // Real votes are refused by any follower.
    let actions = n.recv(3, vote(3, 3, oe(2, 5), false));
    assert!(!vote_response(&actions).vote_granted);
}

#[test]
fn bad_vote_requests_get_the_protocols_error() {
    let mut n = Node::start(2, Some(record(3, None, None)), &[], 0);
    let cases = [
        (
            9,
            vote(4, 9, oe(0, 0), false),
            RaftError::InconsistentVoterSet,
        ),
        (1, vote(4, 1, oe(5, 0), false), RaftError::InvalidRequest),
        (1, vote(4, 3, oe(0, 0), false), RaftError::InvalidRequest),
        (1, vote(2, 1, oe(0, 0), false), RaftError::FencedLeaderEpoch),
    ];
    for (from, message, error) in cases {
        let response = vote_response(&n.recv(from, message));
        assert_eq!(
            (response.error, response.vote_granted),
            (Some(error), false)
        );
        assert_eq!(n.raft.epoch(), 3, "bad input never moves the epoch");
    }
}

#[test]
fn the_leader_validates_fetches_against_its_epoch_cache() {
    let (mut n, _) = Node::leader();
    n.step(Event::Flushed { end_offset: 1 });
    let error = |actions: &[Action]| match sends(actions).as_slice() {
        [(_, Message::FetchResponse(r))] => r.error,
        other => panic!("expected a fetch response, got {other:?}"),
    };
    assert_eq!(
        error(&n.recv(2, fetch(0, 0, 0))),
        Some(RaftError::FencedLeaderEpoch)
    );
    assert_eq!(
        error(&n.recv(2, fetch(2, 0, 0))),
        Some(RaftError::UnknownLeaderEpoch)
    );
    // A fetch past our end, or from an epoch we never had, diverges.
    for (offset, epoch, want) in [(5, 1, oe(1, 1)), (3, 0, oe(0, 0))] {
        match sends(&n.recv(2, fetch(1, offset, epoch))).as_slice() {
            [(2, Message::FetchResponse(r))] => assert_eq!(r.diverging_epoch, Some(want)),
            other => panic!("expected a diverging epoch, got {other:?}"),
        }
    }
    // A valid fetch asks the driver to read the log.
    let actions = n.recv(2, fetch(1, 0, 0));
    assert!(matches!(
        actions.as_slice(),
        [
            ..,
            Action::SendFetchRecords {
                to: 2,
                start: 0,
                end: 1,
                ..
            }
        ]
    ));
}

#[test]
fn the_high_watermark_needs_a_durable_majority_and_an_entry_of_the_leaders_epoch() {
    // Node 1 has entries 0..3 from epoch 1 and will lead epoch 3; its LeaderChange is at 3.
    let mut n = Node::start(1, Some(record(2, None, None)), &[(1, 0)], 3);
    n.time_out();
    n.recv(2, pre_vote_granted(2));
    n.persist(&[Action::PersistQuorumState(record(3, Some(1), None))]);
    let actions = n.recv(2, Message::VoteResponse(granted(3)));
    n.persist(&actions);
    assert_eq!(n.raft.role(), RoleKind::Leader);
    // A follower holding the old entries does not commit them: they are not of our epoch.
    assert!(commits(&n.recv(2, fetch(3, 3, 1))).is_empty());
    // Observers never count, and our own unflushed tail does not either.
    assert!(commits(&n.recv(100, fetch(3, 4, 3))).is_empty());
    assert!(commits(&n.recv(2, fetch(3, 4, 3))).is_empty());
    assert_eq!(commits(&n.step(Event::Flushed { end_offset: 4 })), vec![4]);
    let proposed = n.raft.propose(n.now, 2, Bytes::from_static(b"x")).unwrap();
    assert_eq!(proposed, 4);
    n.step(Event::Flushed { end_offset: 6 });
    // A lagging voter cannot pull the HW back.
    assert!(commits(&n.recv(3, fetch(3, 4, 3))).is_empty());
    assert_eq!(commits(&n.recv(2, fetch(3, 6, 3))), vec![6]);
    assert_eq!(n.raft.high_watermark(), 6);
}

#[test]
fn a_follower_appends_truncates_on_divergence_and_never_below_its_high_watermark() {
    let mut n = Node::start(2, Some(record(3, None, Some(1))), &[(1, 0), (2, 4)], 8);
    // The first fetch goes out at once: the recovered log is durable.
    assert_eq!(sends(&n.started), vec![(1, fetch(3, 8, 2))]);
    let response = |diverging, records, hw, request| FetchResponse {
        error: None,
        leader_epoch: 3,
        leader_id: Some(1),
        high_watermark: Some(hw),
        diverging_epoch: diverging,
        snapshot_id: None,
        records,
        request,
    };
    let actions = n.recv(
        1,
        Message::FetchResponse(response(Some(oe(2, 6)), vec![], 5, oe(2, 8))),
    );
    assert!(actions.contains(&Action::Truncate { offset: 6 }));
    assert_eq!(n.raft.end_offset(), 6);
    // A late duplicate answering the old position is ignored.
    let late = n.recv(
        1,
        Message::FetchResponse(response(Some(oe(1, 2)), vec![], 5, oe(2, 8))),
    );
    assert_eq!(drops(&late), vec![DropReason::StaleFetchResponse]);
    let batch = crate::raft::Batch {
        base_offset: 6,
        epoch: 3,
        count: 2,
        payload: Payload::Data(Bytes::from_static(b"y")),
    };
    let actions = n.recv(
        1,
        Message::FetchResponse(response(None, vec![batch], 7, oe(2, 6))),
    );
    assert!(matches!(actions.first(), Some(Action::Append { .. })));
    assert_eq!(commits(&actions), vec![7]);
    // The next fetch waits for the flush (fetching acknowledges durability).
    assert!(sends(&actions).is_empty());
    assert_eq!(
        sends(&n.step(Event::Flushed { end_offset: 8 })),
        vec![(1, fetch(3, 8, 3))]
    );
    // A diverging epoch below the HW is refused, not applied.
    let bad = n.recv(
        1,
        Message::FetchResponse(response(Some(oe(1, 2)), vec![], 7, oe(3, 8))),
    );
    assert_eq!(drops(&bad), vec![DropReason::TruncationBelowHighWatermark]);
    assert_eq!(n.raft.end_offset(), 8);
}

/// `n` follows `leader` at `epoch` again and its `actions` fetch from it at once.
fn assert_follows_and_fetches(n: &Node, actions: &[Action], epoch: u32, leader: NodeId) {
    assert_eq!(
        (n.raft.role(), n.raft.epoch(), n.raft.leader()),
        (RoleKind::Follower, epoch, Some(leader))
    );
    assert!(
        sends(actions)
            .iter()
            .any(|(to, m)| *to == leader && matches!(m, Message::FetchRequest(_))),
        "{actions:?}"
    );
}

#[test]
fn a_prospective_that_knew_the_leader_follows_it_again_when_the_pre_vote_fails() {
    // KIP-996: lost (a majority still hears the leader), or timed out with no answer.
    let lost_to = |answers: &[NodeId]| {
        let mut n = Node::start(2, Some(record(3, None, Some(1))), &[], 0);
        n.tick_at(1);
        n.tick_at(2000);
        assert_eq!(n.raft.role(), RoleKind::Prospective);
        let reject = VoteResponse {
            vote_granted: false,
            pre_vote: true,
            leader_id: Some(1),
            ..granted(3)
        };
        let mut actions = Vec::new();
        for &from in answers {
            actions = n.recv(from, Message::VoteResponse(reject.clone()));
        }
        (n, actions)
    };
    // One refusal of three voters decides nothing yet (hearsay from 3 is not the leader's word).
    let (n, _) = lost_to(&[3]);
    assert_eq!(n.raft.role(), RoleKind::Prospective);
    // The leader's own refusal, or a majority's: following it again, fetching at once.
    for answers in [&[1][..], &[3, 1]] {
        let (n, actions) = lost_to(answers);
        assert_follows_and_fetches(&n, &actions, 3, 1);
    }
    // Five voters: refusals from three followers lose it (two cannot make a majority), and it
    // follows the leader they still hear.
    let mut n = Node::start_among(&[1, 2, 3, 4, 5], 2, Some(record(3, None, Some(1))), &[], 0);
    n.tick_at(1);
    n.tick_at(2000);
    assert_eq!(n.raft.role(), RoleKind::Prospective);
    let reject = VoteResponse {
        vote_granted: false,
        pre_vote: true,
        ..granted(3)
    };
    n.recv(3, Message::VoteResponse(reject.clone()));
    n.recv(4, Message::VoteResponse(reject.clone()));
    assert_eq!(n.raft.role(), RoleKind::Prospective);
    let actions = n.recv(5, Message::VoteResponse(reject));
    assert_follows_and_fetches(&n, &actions, 3, 1);
    // No answer at all: at the pre-vote's deadline it follows the leader again, and pre-votes
    // only after a fetch timeout of its own.
    let mut n = Node::start(2, Some(record(3, None, Some(1))), &[], 0);
    n.tick_at(1);
    n.tick_at(2000);
    assert_eq!(n.raft.role(), RoleKind::Prospective);
    let mut t = 2000;
    while n.raft.role() == RoleKind::Prospective {
        t += 100;
        assert!(t < 10_000, "the pre-vote never ended");
        n.tick_at(t);
    }
    assert_eq!(
        (n.raft.role(), n.raft.leader()),
        (RoleKind::Follower, Some(1))
    );
    let followed_at = t;
    while n.raft.role() == RoleKind::Follower {
        t += 100;
        n.tick_at(t);
    }
    assert_eq!(n.raft.role(), RoleKind::Prospective);
    assert!(
        t - followed_at >= 2000,
        "pre-voted {} ms after following",
        t - followed_at
    );
}

#[test]
fn a_follower_that_stops_hearing_from_its_leader_pre_votes() {
    let mut n = Node::start(2, Some(record(3, None, Some(1))), &[], 0);
    n.tick_at(1);
    assert_eq!(n.raft.role(), RoleKind::Follower);
    n.tick_at(1999);
    assert_eq!(n.raft.role(), RoleKind::Follower);
    let actions = n.tick_at(2000);
    assert_eq!(n.raft.role(), RoleKind::Prospective);
    assert_eq!(
        sends(&actions),
        vec![
            (1, vote(3, 2, oe(0, 0), true)),
            (3, vote(3, 2, oe(0, 0), true))
        ]
    );
}

#[test]
fn check_quorum_resigns_a_leader_without_fetches_from_a_majority() {
    let (mut n, _) = Node::leader();
    n.step(Event::Flushed { end_offset: 1 });
    n.now = 2000;
    n.recv(3, fetch(1, 1, 1));
    // Voter 3 fetched within 1.5 × fetch timeout: still a majority.
    n.tick_at(3000);
    assert_eq!(n.raft.role(), RoleKind::Leader);
    let actions = n.tick_at(5600);
    assert_eq!(n.raft.role(), RoleKind::Resigned);
    let end = EndQuorumEpochRequest {
        leader_epoch: 1,
        leader_id: 1,
        preferred_successors: vec![3, 2],
    };
    let end = Message::EndQuorumEpochRequest(end);
    assert_eq!(sends(&actions), vec![(2, end.clone()), (3, end)]);
    assert!(n.raft.propose(n.now, 1, Bytes::new()).is_err());
}

#[test]
fn end_quorum_epoch_makes_the_first_successor_stand_at_once() {
    let mut n = Node::start(3, Some(record(1, None, Some(1))), &[], 0);
    n.now = 100;
    let end = EndQuorumEpochRequest {
        leader_epoch: 1,
        leader_id: 1,
        preferred_successors: vec![3, 2],
    };
    n.recv(1, Message::EndQuorumEpochRequest(end));
    assert_eq!(n.raft.next_deadline(), Some(100));
    n.tick_at(100);
    assert_eq!(n.raft.role(), RoleKind::Prospective);
}

#[test]
fn epochs_and_leaders_from_messages() {
    let mut n = Node::start(2, Some(record(3, None, None)), &[], 0);
    // A newer BeginQuorumEpoch makes us its leader's follower.
    let begin = |epoch, leader| {
        Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
            leader_epoch: epoch,
            leader_id: leader,
        })
    };
    let actions = n.recv(1, begin(4, 1));
    assert_eq!(
        (n.raft.role(), n.raft.epoch(), n.raft.leader()),
        (RoleKind::Follower, 4, Some(1))
    );
    assert_eq!(persists(&actions), vec![record(4, None, Some(1))]);
    assert!(
        sends(&actions).is_empty(),
        "the answer and first fetch wait for the persist"
    );
    let released = n.persist(&actions);
    assert_eq!(released.len(), 2, "{released:?}");
    // A second leader for the same epoch is dropped; an older epoch is fenced.
    assert_eq!(
        drops(&n.recv(3, begin(4, 3))),
        vec![DropReason::ConflictingLeader]
    );
    assert_eq!(n.raft.leader(), Some(1));
    match sends(&n.recv(3, begin(2, 3))).as_slice() {
        [(3, Message::BeginQuorumEpochResponse(r))] => {
            assert_eq!(r.error, Some(RaftError::FencedLeaderEpoch))
        }
        other => panic!("{other:?}"),
    }
    // A stale response is dropped.
    let stale = VoteResponse {
        vote_granted: true,
        ..granted(3)
    };
    assert_eq!(
        drops(&n.recv(3, Message::VoteResponse(stale))),
        vec![DropReason::StaleEpoch]
    );
}

#[test]
fn restarts_resume_from_quorum_state_and_the_log() {
    // A leader restarts resigned: it never leads the same epoch twice.
    let n = Node::start(1, Some(record(5, Some(1), Some(1))), &[(5, 0)], 1);
    assert_eq!((n.raft.role(), n.raft.epoch()), (RoleKind::Resigned, 5));
    // A kept vote survives the restart.
    let mut n = Node::start(2, Some(record(5, Some(3), None)), &[], 0);
    assert!(!vote_response(&n.recv(1, vote(5, 1, oe(4, 9), false))).vote_granted);
    // A log from a newer epoch than quorum-state moves the node to that epoch, vote-less.
    let n = Node::start(2, Some(record(2, Some(3), None)), &[(4, 0)], 2);
    assert_eq!(
        (n.raft.role(), n.raft.epoch(), n.raft.voted_for()),
        (RoleKind::Unattached, 4, None)
    );
}

#[test]
fn a_single_voter_elects_itself_once_its_vote_is_durable() {
    let voters: BTreeSet<NodeId> = [1].into_iter().collect();
    let mut raft = Raft::new(RaftConfig::new(1, voters), None, LogState::default(), 0, 1).unwrap();
    raft.take_actions();
    let deadline = raft.next_deadline().unwrap();
    assert_eq!(
        deadline, 0,
        "a sole voter stands at once, no election timeout"
    );
    raft.step(deadline, 2, Event::Tick);
    let actions = raft.take_actions();
    assert_eq!(raft.role(), RoleKind::Candidate);
    let record = persists(&actions)[0];
    raft.step(deadline, 3, Event::QuorumStatePersisted(record));
    assert_eq!(raft.role(), RoleKind::Leader);
    let actions = raft.take_actions();
    raft.step(
        deadline,
        4,
        Event::QuorumStatePersisted(persists(&actions)[0]),
    );
    raft.step(deadline, 5, Event::Flushed { end_offset: 1 });
    assert_eq!(commits(&raft.take_actions()), vec![1]);
}

#[test]
fn a_sole_voter_that_led_before_a_restart_stands_again_at_once() {
    let voters: BTreeSet<NodeId> = [1].into_iter().collect();
    let log = LogState {
        epochs: vec![oe(3, 0)],
        end_offset: 5,
        ..LogState::default()
    };
    let stored = Some(record(3, Some(1), Some(1)));
    let mut raft = Raft::new(RaftConfig::new(1, voters.clone()), stored, log, 500, 1).unwrap();
    assert_eq!(raft.role(), RoleKind::Resigned);
    raft.take_actions();
    assert_eq!(raft.next_deadline(), Some(500));
    raft.step(500, 2, Event::Tick);
    assert_eq!((raft.role(), raft.epoch()), (RoleKind::Candidate, 4));
    let record = persists(&raft.take_actions())[0];
    raft.step(500, 3, Event::QuorumStatePersisted(record));
    assert_eq!(raft.role(), RoleKind::Leader);
    // One of three voters, by contrast, waits out an election timeout.
    let many: BTreeSet<NodeId> = [1, 2, 3].into_iter().collect();
    let raft = Raft::new(RaftConfig::new(1, many), None, LogState::default(), 500, 1).unwrap();
    let t = RaftConfig::new(1, [1].into_iter().collect()).election_timeout_ms;
    assert!(raft.next_deadline().unwrap() >= 500 + t);
}

#[test]
fn an_observer_finds_the_leader_by_probing_voters() {
    let voters: BTreeSet<NodeId> = [1, 2, 3].into_iter().collect();
    let mut raft = Raft::new(
        RaftConfig::new(100, voters),
        None,
        LogState::default(),
        0,
        1,
    )
    .unwrap();
    raft.take_actions();
    raft.step(0, 0, Event::Tick);
    let actions = raft.take_actions();
    assert_eq!(sends(&actions), vec![(1, fetch(0, 0, 0))]);
    let hint = FetchResponse {
        error: Some(RaftError::FencedLeaderEpoch),
        leader_epoch: 2,
        leader_id: Some(3),
        high_watermark: None,
        diverging_epoch: None,
        snapshot_id: None,
        records: Vec::new(),
        request: oe(0, 0),
    };
    raft.step(
        1,
        0,
        Event::Message {
            from: 1,
            message: Message::FetchResponse(hint),
        },
    );
    assert_eq!(
        (raft.role(), raft.epoch(), raft.leader()),
        (RoleKind::Follower, 2, Some(3))
    );
    let actions = raft.take_actions();
    raft.step(1, 0, Event::QuorumStatePersisted(persists(&actions)[0]));
    assert_eq!(sends(&raft.take_actions()), vec![(3, fetch(2, 0, 0))]);
    // Observers never vote.
    raft.step(
        2,
        0,
        Event::Message {
            from: 1,
            message: vote(3, 1, oe(2, 9), false),
        },
    );
    let actions = raft.take_actions();
    raft.step(2, 0, Event::QuorumStatePersisted(persists(&actions)[0]));
    assert!(!vote_response(&raft.take_actions()).vote_granted);
}
