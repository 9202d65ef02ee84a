//! Snapshots (KIP-630), message by message: a leader's snapshot moves its log start; a fetch
//! below it is answered with the snapshot id; FetchSnapshot is served and validated; a
//! follower loads a snapshot chunk by chunk, verifies and installs it; a node restarts from
//! its snapshots; DescribeQuorum sees observers.

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::raft::{
    Action, DropReason, Event, FetchRequest, FetchResponse, FetchSnapshotRequest,
    FetchSnapshotResponse, LogState, Message, NodeId, OffsetAndEpoch, QuorumStateRecord, Raft,
    RaftConfig, RaftError, RoleKind, SnapshotMeta, VoteResponse,
};

fn oe(epoch: u32, offset: u64) -> OffsetAndEpoch {
    OffsetAndEpoch { epoch, offset }
}

fn meta(epoch: u32, offset: u64, size: u64) -> SnapshotMeta {
    SnapshotMeta {
        id: oe(epoch, offset),
        size,
    }
}

struct Node {
    raft: Raft,
    now: u64,
}

impl Node {
    fn start(id: NodeId, stored: Option<QuorumStateRecord>, log: LogState) -> Node {
        let voters: BTreeSet<NodeId> = [1, 2, 3].into_iter().collect();
        let mut raft = Raft::new(RaftConfig::new(id, voters), stored, log, 0, 7).expect("valid");
        raft.take_actions();
        Node { raft, now: 0 }
    }

    fn step(&mut self, event: Event) -> Vec<Action> {
        self.raft.step(self.now, 42, event);
        self.raft.take_actions()
    }

    fn recv(&mut self, from: NodeId, message: Message) -> Vec<Action> {
        self.step(Event::Message { from, message })
    }

    fn persist(&mut self, actions: &[Action]) -> Vec<Action> {
        let mut out = Vec::new();
        for a in actions {
            if let Action::PersistQuorumState(r) = a {
                out.extend(self.step(Event::QuorumStatePersisted(*r)));
            }
        }
        out
    }

    /// Node 1, leader of epoch 1 with `records` single-record batches after its LeaderChange,
    /// all durable and fetched by voter 2 (so committed).
    fn leader(records: u64) -> Node {
        let mut n = Node::start(1, None, LogState::default());
        n.now = n.raft.next_deadline().expect("a deadline");
        n.step(Event::Tick);
        let vote = |pre_vote, epoch| {
            Message::VoteResponse(VoteResponse {
                error: None,
                leader_epoch: epoch,
                leader_id: None,
                vote_granted: true,
                pre_vote,
            })
        };
        let candidate = n.recv(2, vote(true, 0));
        n.recv(2, vote(false, 1));
        let actions = n.persist(&candidate);
        n.persist(&actions);
        assert_eq!(n.raft.role(), RoleKind::Leader);
        for i in 0..records {
            n.raft
                .propose(n.now, 1, Bytes::from(format!("r{i}")))
                .expect("leader");
        }
        n.raft.take_actions();
        let end = n.raft.end_offset();
        n.step(Event::Flushed { end_offset: end });
        n.recv(2, fetch(1, end, 1));
        assert_eq!(n.raft.high_watermark(), end);
        n
    }
}

fn fetch(epoch: u32, offset: u64, last_fetched_epoch: u32) -> Message {
    Message::FetchRequest(FetchRequest {
        current_leader_epoch: epoch,
        fetch_offset: offset,
        last_fetched_epoch,
    })
}

fn fetch_snapshot(epoch: u32, id: OffsetAndEpoch, position: u64) -> Message {
    Message::FetchSnapshotRequest(FetchSnapshotRequest {
        current_leader_epoch: epoch,
        snapshot_id: id,
        position,
    })
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

fn drops(actions: &[Action]) -> Vec<DropReason> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Dropped { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

/// The one fetch response among `actions`.
fn fetch_response(actions: &[Action]) -> FetchResponse {
    match sends(actions).as_slice() {
        [(_, Message::FetchResponse(r))] => r.clone(),
        other => panic!("expected one fetch response, got {other:?} in {actions:?}"),
    }
}

fn snapshot_error(actions: &[Action]) -> Option<RaftError> {
    match sends(actions).as_slice() {
        [(_, Message::FetchSnapshotResponse(r))] => r.error,
        other => panic!("expected one FetchSnapshot response, got {other:?}"),
    }
}

#[test]
fn a_leader_snapshot_moves_the_log_start_and_lagging_fetchers_get_the_snapshot_id() {
    // LeaderChange at 0, records 1..=9: HW 10.
    let mut n = Node::leader(9);
    // The first snapshot keeps the whole log (the log start trails the newest by one).
    let first = n.step(Event::SnapshotTaken(meta(1, 4, 100)));
    assert!(first.is_empty(), "{first:?}");
    assert_eq!(n.raft.log_start(), 0);
    // A fetch from 0 is still served from the log.
    let served = n.recv(3, fetch(1, 0, 0));
    assert!(matches!(
        served.as_slice(),
        [Action::SendFetchRecords { start: 0, .. }]
    ));
    // The second moves the log start to the first.
    let second = n.step(Event::SnapshotTaken(meta(1, 8, 120)));
    assert_eq!(second, vec![Action::AdvanceLogStart { offset: 4 }]);
    assert_eq!(n.raft.log_start(), 4);
    // Below the log start, or at it with an epoch that is not the snapshot's: load the newest
    // snapshot. At or after it with the right epoch: records.
    for (offset, epoch) in [(0, 0), (3, 1), (4, 0)] {
        let r = fetch_response(&n.recv(3, fetch(1, offset, epoch)));
        assert_eq!(r.snapshot_id, Some(oe(1, 8)), "fetch at {offset}/{epoch}");
        assert!(r.records.is_empty() && r.error.is_none() && r.diverging_epoch.is_none());
        assert_eq!(r.high_watermark, Some(10));
    }
    assert!(matches!(
        n.recv(3, fetch(1, 4, 1)).as_slice(),
        [Action::SendFetchRecords { start: 4, .. }]
    ));
    // A third snapshot deletes the one below the new log start.
    let third = n.step(Event::SnapshotTaken(meta(1, 10, 130)));
    assert_eq!(
        third,
        vec![
            Action::DeleteSnapshot { id: oe(1, 4) },
            Action::AdvanceLogStart { offset: 8 }
        ]
    );
    // A snapshot past the HW, not newer than the newest, or with the wrong epoch is refused
    // (and deleted unless it is one we keep).
    let cases = [
        (meta(1, 11, 1), false),
        (meta(1, 9, 1), false),
        (meta(2, 10, 1), false),
        (meta(1, 10, 130), true),
    ];
    for (bad, keep) in cases {
        let actions = n.step(Event::SnapshotTaken(bad));
        assert_eq!(drops(&actions), vec![DropReason::InvalidReport]);
        assert_eq!(
            actions.contains(&Action::DeleteSnapshot { id: bad.id }),
            !keep
        );
    }
    assert_eq!(n.raft.log_start(), 8);
    assert_eq!(n.raft.latest_snapshot(), Some(meta(1, 10, 130)));
}

#[test]
fn fetch_snapshot_is_served_and_validated_by_the_leader() {
    let mut n = Node::leader(9);
    n.step(Event::SnapshotTaken(meta(1, 6, 100)));
    // A chunk of a snapshot we have, from a position inside it.
    let actions = n.recv(3, fetch_snapshot(1, oe(1, 6), 40));
    match actions.as_slice() {
        [Action::SendSnapshotChunk {
            to: 3,
            response,
            start: 40,
        }] => {
            assert_eq!((response.size, response.position), (100, 40));
            assert_eq!(response.error, None);
        }
        other => panic!("expected a chunk, got {other:?}"),
    }
    // Wrong id, position at or past the end, stale or future epoch: the protocol's errors.
    let cases = [
        (fetch_snapshot(1, oe(1, 7), 0), RaftError::SnapshotNotFound),
        (
            fetch_snapshot(1, oe(1, 6), 100),
            RaftError::PositionOutOfRange,
        ),
        (fetch_snapshot(0, oe(1, 6), 0), RaftError::FencedLeaderEpoch),
        (
            fetch_snapshot(2, oe(1, 6), 0),
            RaftError::UnknownLeaderEpoch,
        ),
    ];
    for (message, error) in cases {
        assert_eq!(snapshot_error(&n.recv(3, message)), Some(error));
    }
    // A follower answers NOT_LEADER_OR_FOLLOWER.
    let mut f = Node::start(
        2,
        Some(QuorumStateRecord {
            epoch: 1,
            voted_for: None,
            leader: Some(1),
        }),
        LogState::default(),
    );
    assert_eq!(
        snapshot_error(&f.recv(3, fetch_snapshot(1, oe(1, 6), 0))),
        Some(RaftError::NotLeaderOrFollower)
    );
}

/// Node 2 following leader 1 in epoch 1 with an empty log; its first fetch is out.
fn follower() -> Node {
    let stored = QuorumStateRecord {
        epoch: 1,
        voted_for: None,
        leader: Some(1),
    };
    let n = Node::start(2, Some(stored), LogState::default());
    assert_eq!(n.raft.role(), RoleKind::Follower);
    n
}

fn snapshot_id_response(id: OffsetAndEpoch, hw: u64, request: OffsetAndEpoch) -> Message {
    Message::FetchResponse(FetchResponse {
        error: None,
        leader_epoch: 1,
        leader_id: Some(1),
        high_watermark: Some(hw),
        diverging_epoch: None,
        snapshot_id: Some(id),
        records: vec![],
        request,
    })
}

fn chunk(id: OffsetAndEpoch, size: u64, position: u64, bytes: &'static [u8]) -> Message {
    Message::FetchSnapshotResponse(FetchSnapshotResponse {
        error: None,
        leader_epoch: 1,
        leader_id: Some(1),
        snapshot_id: id,
        size,
        position,
        bytes: Bytes::from_static(bytes),
    })
}

fn snapshot_request(actions: &[Action]) -> FetchSnapshotRequest {
    match sends(actions).as_slice() {
        [(1, Message::FetchSnapshotRequest(r))] => r.clone(),
        other => panic!("expected one FetchSnapshot, got {other:?}"),
    }
}

#[test]
fn a_follower_loads_a_snapshot_chunk_by_chunk_and_installs_it_in_place_of_its_log() {
    let mut n = follower();
    let id = oe(1, 50);
    // Told to load a snapshot: it asks for its first chunk.
    let r = snapshot_request(&n.recv(1, snapshot_id_response(id, 60, oe(0, 0))));
    assert_eq!(
        (r.snapshot_id, r.position, r.current_leader_epoch),
        (id, 0, 1)
    );
    // A chunk is written and the next asked for.
    let actions = n.recv(1, chunk(id, 10, 0, b"abcd"));
    assert!(actions.contains(&Action::WriteSnapshotChunk {
        id,
        position: 0,
        bytes: Bytes::from_static(b"abcd"),
    }));
    assert_eq!(snapshot_request(&actions).position, 4);
    // A late duplicate, another snapshot, a size that changed, bytes past the size: dropped.
    let bad = [
        (chunk(id, 10, 0, b"abcd"), DropReason::StaleFetchResponse),
        (
            chunk(oe(1, 49), 10, 4, b"efgh"),
            DropReason::StaleFetchResponse,
        ),
        (chunk(id, 11, 4, b"efgh"), DropReason::InvalidBatches),
        (chunk(id, 10, 4, b"efghijk"), DropReason::InvalidBatches),
        (chunk(id, 10, 4, b""), DropReason::InvalidBatches),
    ];
    for (message, reason) in bad {
        let actions = n.recv(1, message);
        assert_eq!(drops(&actions), vec![reason]);
        assert!(!actions
            .iter()
            .any(|a| matches!(a, Action::WriteSnapshotChunk { .. })));
    }
    // The last chunk completes it: nothing more is asked until the driver verified it.
    let actions = n.recv(1, chunk(id, 10, 4, b"efghij"));
    assert!(actions.contains(&Action::CompleteSnapshot { id, size: 10 }));
    assert!(sends(&actions).is_empty());
    // Damaged: deleted, and the log fetched again (which names the snapshot again).
    let actions = n.step(Event::SnapshotFetched { id, valid: false });
    assert!(actions.contains(&Action::DeleteSnapshot { id }));
    assert_eq!(fetch_request(&actions), (0, 0));
    n.recv(1, snapshot_id_response(id, 60, oe(0, 0)));
    n.recv(1, chunk(id, 10, 0, b"abcdefghij"));
    // Verified: installed; the log restarts at its end and is fetched from there.
    let actions = n.step(Event::SnapshotFetched { id, valid: true });
    assert!(actions.contains(&Action::InstallSnapshot(meta(1, 50, 10))));
    assert_eq!(fetch_request(&actions), (50, 1));
    assert_eq!(n.raft.end_offset(), 50);
    assert_eq!(n.raft.log_start(), 50);
    assert_eq!(n.raft.high_watermark(), 50);
    assert_eq!(n.raft.log_end(), oe(1, 50));
    // A late report for a snapshot no longer fetched is dropped, and its file deleted.
    let actions = n.step(Event::SnapshotFetched {
        id: oe(1, 70),
        valid: true,
    });
    assert!(actions.contains(&Action::DeleteSnapshot { id: oe(1, 70) }));
    assert_eq!(drops(&actions), vec![DropReason::InvalidReport]);
}

fn fetch_request(actions: &[Action]) -> (u64, u32) {
    match sends(actions).as_slice() {
        [(1, Message::FetchRequest(r))] => (r.fetch_offset, r.last_fetched_epoch),
        other => panic!("expected one fetch, got {other:?}"),
    }
}

#[test]
fn a_snapshot_the_leader_no_longer_has_restarts_the_fetch() {
    let mut n = follower();
    let id = oe(1, 50);
    n.recv(1, snapshot_id_response(id, 60, oe(0, 0)));
    let gone = Message::FetchSnapshotResponse(FetchSnapshotResponse {
        error: Some(RaftError::SnapshotNotFound),
        leader_epoch: 1,
        leader_id: Some(1),
        snapshot_id: id,
        size: 0,
        position: 0,
        bytes: Bytes::new(),
    });
    let actions = n.recv(1, gone);
    assert!(actions.contains(&Action::DeleteSnapshot { id }));
    assert_eq!(fetch_request(&actions), (0, 0));
    // A snapshot below our high watermark would lose committed entries: refused.
    let mut n = follower();
    let batch = crate::raft::Batch {
        base_offset: 0,
        epoch: 1,
        count: 5,
        payload: crate::raft::Payload::Data(Bytes::from_static(b"x")),
    };
    n.recv(
        1,
        Message::FetchResponse(FetchResponse {
            error: None,
            leader_epoch: 1,
            leader_id: Some(1),
            high_watermark: Some(5),
            diverging_epoch: None,
            snapshot_id: None,
            records: vec![batch],
            request: oe(0, 0),
        }),
    );
    n.step(Event::Flushed { end_offset: 5 });
    assert_eq!(n.raft.high_watermark(), 5);
    let actions = n.recv(1, snapshot_id_response(oe(1, 3), 5, oe(1, 5)));
    assert_eq!(
        drops(&actions),
        vec![DropReason::TruncationBelowHighWatermark]
    );
}

#[test]
fn a_node_restarts_from_its_snapshots() {
    let log = LogState {
        epochs: vec![oe(2, 20), oe(3, 30)],
        end_offset: 45,
        earliest_snapshot: Some(meta(1, 20, 5)),
        latest_snapshot: Some(meta(3, 40, 9)),
    };
    let n = Node::start(2, None, log.clone());
    assert_eq!(n.raft.log_start(), 20);
    assert_eq!(n.raft.high_watermark(), 40, "a snapshot is committed state");
    assert_eq!(n.raft.log_end(), oe(3, 45));
    // Snapshots that do not fit the log are refused at start, never trusted.
    let voters: BTreeSet<NodeId> = [1, 2, 3].into_iter().collect();
    let bad = [
        LogState {
            latest_snapshot: Some(meta(3, 46, 9)),
            ..log.clone()
        },
        LogState {
            latest_snapshot: Some(meta(1, 10, 9)),
            ..log.clone()
        },
        LogState {
            epochs: vec![oe(1, 10)],
            ..log.clone()
        },
    ];
    for state in bad {
        assert!(Raft::new(RaftConfig::new(2, voters.clone()), None, state, 0, 1).is_err());
    }
    // Only the earliest given: it is the latest too.
    let only = LogState {
        epochs: vec![],
        end_offset: 20,
        earliest_snapshot: Some(meta(1, 20, 5)),
        latest_snapshot: None,
    };
    let n = Node::start(2, None, only);
    assert_eq!(n.raft.latest_snapshot(), Some(meta(1, 20, 5)));
    assert_eq!(n.raft.log_end(), oe(1, 20));
}

#[test]
fn describe_lists_observers_with_their_fetch_offsets() {
    let mut n = Node::leader(3);
    n.now += 5;
    n.recv(7, fetch(1, 2, 1));
    n.recv(8, fetch(1, 0, 0));
    let info = n.raft.describe();
    assert_eq!(
        info.observers,
        vec![(7, Some(2), Some(n.now)), (8, Some(0), Some(n.now))]
    );
    // Observers never count toward the high watermark.
    assert_eq!(info.high_watermark, 4);
    assert!(info.voters.iter().all(|(id, _, _)| [1, 2, 3].contains(id)));
}
