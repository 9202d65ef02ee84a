//! Bad input never panics: random, mostly nonsensical messages and reports, fed to nodes in
//! every role, must be answered or dropped while every invariant the core asserts holds.

use std::collections::BTreeSet;

use bytes::Bytes;
use proptest::prelude::*;

use crate::raft::{
    Action, Batch, BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest,
    EndQuorumEpochResponse, Event, FetchRequest, FetchResponse, LogState, Message, NodeId,
    OffsetAndEpoch, Payload, QuorumStateRecord, Raft, RaftConfig, RaftError, VoteRequest,
    VoteResponse,
};

fn node_id() -> impl Strategy<Value = NodeId> {
    prop_oneof![Just(1), Just(2), Just(3), Just(9), Just(-1)]
}

fn error() -> impl Strategy<Value = Option<RaftError>> {
    prop_oneof![
        Just(None),
        Just(Some(RaftError::FencedLeaderEpoch)),
        Just(Some(RaftError::NotLeaderOrFollower)),
        Just(Some(RaftError::UnknownLeaderEpoch)),
    ]
}

fn batches() -> impl Strategy<Value = Vec<Batch>> {
    prop::collection::vec((0u64..8, 0u32..6, 0u32..3), 0..4).prop_map(|v| {
        v.into_iter()
            .map(|(base_offset, epoch, count)| Batch {
                base_offset,
                epoch,
                count,
                payload: Payload::Data(Bytes::from_static(b"g")),
            })
            .collect()
    })
}

fn message() -> impl Strategy<Value = Message> {
    let e = 0u32..6;
    let o = 0u64..10;
    prop_oneof![
        (e.clone(), node_id(), e.clone(), o.clone(), any::<bool>()).prop_map(
            |(candidate_epoch, candidate_id, last_offset_epoch, last_offset, pre_vote)| {
                Message::VoteRequest(VoteRequest {
                    candidate_epoch,
                    candidate_id,
                    last_offset_epoch,
                    last_offset,
                    pre_vote,
                })
            }
        ),
        (
            error(),
            e.clone(),
            prop::option::of(node_id()),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(error, leader_epoch, leader_id, vote_granted, pre_vote)| {
                Message::VoteResponse(VoteResponse {
                    error,
                    leader_epoch,
                    leader_id,
                    vote_granted,
                    pre_vote,
                })
            }),
        (e.clone(), node_id()).prop_map(|(leader_epoch, leader_id)| {
            Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                leader_epoch,
                leader_id,
            })
        }),
        (error(), e.clone(), prop::option::of(node_id())).prop_map(
            |(error, leader_epoch, leader_id)| {
                Message::BeginQuorumEpochResponse(BeginQuorumEpochResponse {
                    error,
                    leader_epoch,
                    leader_id,
                })
            }
        ),
        (e.clone(), node_id(), prop::collection::vec(node_id(), 0..4)).prop_map(
            |(leader_epoch, leader_id, preferred_successors)| {
                Message::EndQuorumEpochRequest(EndQuorumEpochRequest {
                    leader_epoch,
                    leader_id,
                    preferred_successors,
                })
            }
        ),
        (error(), e.clone(), prop::option::of(node_id())).prop_map(
            |(error, leader_epoch, leader_id)| {
                Message::EndQuorumEpochResponse(EndQuorumEpochResponse {
                    error,
                    leader_epoch,
                    leader_id,
                })
            }
        ),
        (e.clone(), o.clone(), e.clone()).prop_map(
            |(current_leader_epoch, fetch_offset, last_fetched_epoch)| {
                Message::FetchRequest(FetchRequest {
                    current_leader_epoch,
                    fetch_offset,
                    last_fetched_epoch,
                })
            }
        ),
        (
            error(),
            e.clone(),
            prop::option::of(node_id()),
            prop::option::of(o.clone()),
            prop::option::of((e.clone(), o.clone())),
            batches(),
            (e, o),
        )
            .prop_map(|(error, leader_epoch, leader_id, hw, div, records, req)| {
                Message::FetchResponse(FetchResponse {
                    error,
                    leader_epoch,
                    leader_id,
                    high_watermark: hw,
                    diverging_epoch: div.map(|(epoch, offset)| OffsetAndEpoch { epoch, offset }),
                    snapshot_id: None,
                    records,
                    request: OffsetAndEpoch {
                        epoch: req.0,
                        offset: req.1,
                    },
                })
            }),
    ]
}

#[derive(Clone, Debug)]
enum Input {
    Message(NodeId, Message),
    Tick(u64),
    Flushed(u64),
    /// Report the pending `quorum-state` write (true) or a made-up record (false).
    Persisted(bool, u32),
    Propose,
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        4 => (node_id(), message()).prop_map(|(f, m)| Input::Message(f, m)),
        2 => (0u64..3000).prop_map(Input::Tick),
        1 => (0u64..12).prop_map(Input::Flushed),
        2 => (any::<bool>(), 0u32..6).prop_map(|(real, e)| Input::Persisted(real, e)),
        1 => Just(Input::Propose),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn garbage_never_panics(
        id in prop_oneof![Just(1), Just(100)],
        stored_epoch in 0u32..4,
        stored_leader in prop::option::of(node_id()),
        inputs in prop::collection::vec(input(), 1..60),
    ) {
        let voters: BTreeSet<NodeId> = [1, 2, 3].into_iter().collect();
        let stored = QuorumStateRecord { epoch: stored_epoch, voted_for: None, leader: stored_leader };
        let log = LogState { epochs: vec![OffsetAndEpoch { epoch: 1, offset: 0 }], end_offset: 3, ..LogState::default() };
        let mut raft = Raft::new(RaftConfig::new(id, voters), Some(stored), log, 0, 5).unwrap();
        let mut pending: Vec<QuorumStateRecord> = Vec::new();
        let mut now = 0;
        for (i, input) in inputs.into_iter().enumerate() {
            for a in raft.take_actions() {
                if let Action::PersistQuorumState(r) = a {
                    pending.push(r);
                }
                if let Action::Send { to, .. } = a {
                    prop_assert_ne!(to, id);
                }
            }
            let entropy = i as u64;
            match input {
                Input::Message(from, message) => {
                    raft.step(now, entropy, Event::Message { from, message })
                }
                Input::Tick(dt) => {
                    now += dt;
                    raft.step(now, entropy, Event::Tick)
                }
                Input::Flushed(end) => raft.step(now, entropy, Event::Flushed { end_offset: end }),
                Input::Persisted(true, _) if !pending.is_empty() => {
                    let r = pending.remove(0);
                    raft.step(now, entropy, Event::QuorumStatePersisted(r))
                }
                Input::Persisted(_, epoch) => {
                    let r = QuorumStateRecord { epoch, voted_for: Some(2), leader: None };
                    raft.step(now, entropy, Event::QuorumStatePersisted(r))
                }
                Input::Propose => {
                    let _ = raft.propose(now, 1, Bytes::from_static(b"p"));
                }
            }
        }
    }
}
