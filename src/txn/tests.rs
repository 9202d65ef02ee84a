//! Data-driven tests of the transaction coordinator core: each case is a list of events and
//! what each must produce (answers, appends and markers), run through `step`, which checks
//! the invariants after every event.

use super::coordinator::{Action, Event, Reply, TxnConfig, TxnCoordinator};
use super::{partition_for, TopicPartition, TxnError, TxnState};

const PARTITIONS: i32 = 4;
const ID: &str = "tx";
/// `transactional.id.expiration.ms` of the tests.
const EXPIRATION_MS: i64 = 1_000_000;

/// What one event must produce, in a form tables can state.
#[derive(Debug, PartialEq, Eq)]
enum Out {
    /// An answer to request n.
    Reply(u64, Reply),
    /// A `__transaction_state` append of this state (by the token it gets).
    Append(TxnState),
    /// Markers: commit?, epoch, partition count.
    Markers(bool, i16, usize),
    /// A tombstone for the id (expired).
    Tombstone,
}

fn summarize(actions: &[Action]) -> Vec<Out> {
    actions
        .iter()
        .map(|a| match a {
            Action::Respond(r, reply) => Out::Reply(*r, reply.clone()),
            Action::Append {
                value: Some(value), ..
            } => Out::Append(super::records::decode_value(value).unwrap().state),
            Action::Append { value: None, .. } => Out::Tombstone,
            Action::WriteMarkers {
                commit,
                producer_epoch,
                partitions,
                ..
            } => Out::Markers(*commit, *producer_epoch, partitions.len()),
        })
        .collect()
}

struct Harness {
    core: TxnCoordinator,
    now: i64,
    /// The last append's token.
    last_token: u64,
}

impl Harness {
    fn loaded() -> Harness {
        Harness::loaded_with(Default::default())
    }

    fn loaded_with(planted: crate::config::planted::Planted) -> Harness {
        let mut core = TxnCoordinator::new(TxnConfig {
            max_timeout_ms: 900_000,
            partitions: PARTITIONS,
            id_expiration_ms: EXPIRATION_MS,
            planted,
        });
        let partition = partition_for(ID, PARTITIONS);
        core.step(
            0,
            Event::LoadBegin {
                partition,
                coordinator_epoch: 3,
            },
        );
        core.step(0, Event::LoadFinished { partition });
        Harness {
            core,
            now: 0,
            last_token: 0,
        }
    }

    fn step(&mut self, event: Event) -> Vec<Out> {
        let actions = self.core.step(self.now, event);
        for a in &actions {
            if let Action::Append { token, .. } = a {
                self.last_token = *token;
            }
        }
        summarize(&actions)
    }

    /// Commits the last append.
    fn ok(&mut self) -> Vec<Out> {
        self.step(Event::AppendDone {
            token: self.last_token,
            result: Ok(()),
        })
    }
}

fn init(request: u64, expected: Option<(i64, i16)>) -> Event {
    Event::InitProducerId {
        request,
        transactional_id: ID.into(),
        timeout_ms: 60_000,
        fresh_producer_id: 100 + request as i64,
        expected,
    }
}

fn add(request: u64, epoch: i16, partitions: &[(&str, i32)]) -> Event {
    Event::AddPartitions {
        request,
        transactional_id: ID.into(),
        producer_id: 101,
        producer_epoch: epoch,
        partitions: partitions
            .iter()
            .map(|(t, p)| TopicPartition::new(t, *p))
            .collect(),
        v2: false,
    }
}

fn end(request: u64, epoch: i16, commit: bool) -> Event {
    Event::EndTxn {
        request,
        transactional_id: ID.into(),
        producer_id: 101,
        producer_epoch: epoch,
        commit,
        v2: false,
        fresh_producer_id: -1,
    }
}

fn verify(request: u64, epoch: i16, partition: (&str, i32)) -> Event {
    Event::Verify {
        request,
        transactional_id: ID.into(),
        producer_id: 101,
        producer_epoch: epoch,
        partition: TopicPartition::new(partition.0, partition.1),
    }
}

fn markers_written(epoch: i16) -> Event {
    Event::MarkersWritten {
        transactional_id: ID.into(),
        producer_id: 101,
        producer_epoch: epoch,
    }
}

fn pid(epoch: i16) -> Reply {
    Reply::ProducerId {
        producer_id: 101,
        producer_epoch: epoch,
    }
}

fn err(e: TxnError) -> Reply {
    Reply::Error(e)
}

/// A step of a table: an event, whether to commit its append, and what must come out (of the
/// event, then of the append's completion).
enum Row {
    Event(Event, Vec<Out>),
    Commit(Vec<Out>),
    At(i64),
}

fn run(rows: Vec<Row>) -> Harness {
    run_with(Harness::loaded(), rows)
}

fn run_with(mut h: Harness, rows: Vec<Row>) -> Harness {
    for (i, row) in rows.into_iter().enumerate() {
        match row {
            Row::Event(e, want) => {
                let got = h.step(e);
                assert_eq!(got, want, "row {i}");
            }
            Row::Commit(want) => assert_eq!(h.ok(), want, "row {i} (append committed)"),
            Row::At(now) => h.now = now,
        }
    }
    h
}

use Out::*;
use Row::{At, Commit, Event as E};

mod v2;

#[test]
fn commit_and_abort_round_trips() {
    let h = run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        // Verification before the partition is added fails; after, it passes.
        E(
            verify(2, 0, ("t", 0)),
            vec![Reply(2, err(TxnError::NotInTransaction))],
        ),
        E(
            add(3, 0, &[("t", 0), ("t", 1)]),
            vec![Append(TxnState::Ongoing)],
        ),
        Commit(vec![Reply(3, super::coordinator::Reply::Done)]),
        E(verify(4, 0, ("t", 1)), vec![Reply(4, Reply::Done)]),
        // Adding a partition already in the transaction persists nothing.
        E(add(5, 0, &[("t", 0)]), vec![Reply(5, Reply::Done)]),
        E(end(6, 0, true), vec![Append(TxnState::PrepareCommit)]),
        Commit(vec![Reply(6, Reply::Done), Markers(true, 0, 2)]),
        // Until the markers are written, the next transaction waits.
        E(
            add(7, 0, &[("t", 0)]),
            vec![Reply(7, err(TxnError::ConcurrentTransactions))],
        ),
        E(
            end(8, 0, true),
            vec![Reply(8, err(TxnError::ConcurrentTransactions))],
        ),
        E(
            end(9, 0, false),
            vec![Reply(9, err(TxnError::InvalidTxnState))],
        ),
        E(markers_written(0), vec![Append(TxnState::CompleteCommit)]),
        Commit(vec![]),
        // A retried EndTxn(commit) is answered; abort now is invalid.
        E(end(10, 0, true), vec![Reply(10, Reply::Done)]),
        E(
            end(11, 0, false),
            vec![Reply(11, err(TxnError::InvalidTxnState))],
        ),
        // The next transaction, aborted.
        E(add(12, 0, &[("u", 0)]), vec![Append(TxnState::Ongoing)]),
        Commit(vec![Reply(12, Reply::Done)]),
        E(end(13, 0, false), vec![Append(TxnState::PrepareAbort)]),
        Commit(vec![Reply(13, Reply::Done), Markers(false, 0, 1)]),
        E(markers_written(0), vec![Append(TxnState::CompleteAbort)]),
        Commit(vec![]),
    ]);
    let (state, producer_id, epoch, partitions) = h.core.describe(ID).unwrap();
    assert_eq!(
        (state, producer_id, epoch),
        (TxnState::CompleteAbort, 101, 0)
    );
    assert!(partitions.is_empty());
}

#[test]
fn fencing_and_epochs() {
    run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        E(add(2, 0, &[("t", 0)]), vec![Append(TxnState::Ongoing)]),
        Commit(vec![Reply(2, Reply::Done)]),
        // A second producer with the same id: the open transaction is aborted at a bumped
        // epoch, and it is told to retry.
        E(init(3, None), vec![Append(TxnState::PrepareAbort)]),
        Commit(vec![
            Reply(3, err(TxnError::ConcurrentTransactions)),
            Markers(false, 1, 1),
        ]),
        E(
            init(4, None),
            vec![Reply(4, err(TxnError::ConcurrentTransactions))],
        ),
        E(markers_written(1), vec![Append(TxnState::CompleteAbort)]),
        Commit(vec![]),
        E(init(5, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(5, pid(2))]),
        // The zombie (epoch 0) is fenced everywhere.
        E(
            add(6, 0, &[("t", 0)]),
            vec![Reply(6, err(TxnError::ProducerFenced))],
        ),
        E(
            end(7, 0, true),
            vec![Reply(7, err(TxnError::ProducerFenced))],
        ),
        E(
            verify(8, 0, ("t", 0)),
            vec![Reply(8, err(TxnError::ProducerFenced))],
        ),
        // KIP-360: a bump naming the current epoch works; a retry of it (naming the previous
        // epoch) gets the same answer; an unknown epoch is fenced.
        E(init(9, Some((101, 2))), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(9, pid(3))]),
        E(init(10, Some((101, 2))), vec![Reply(10, pid(3))]),
        E(
            init(11, Some((101, 0))),
            vec![Reply(11, err(TxnError::ProducerFenced))],
        ),
        // Other ids and misuse.
        E(
            Event::EndTxn {
                request: 12,
                transactional_id: ID.into(),
                producer_id: 7,
                producer_epoch: 3,
                commit: true,
                v2: false,
                fresh_producer_id: -1,
            },
            vec![Reply(12, err(TxnError::InvalidProducerIdMapping))],
        ),
        E(
            end(13, 3, true),
            vec![Reply(13, err(TxnError::InvalidTxnState))],
        ),
        E(
            Event::InitProducerId {
                request: 14,
                transactional_id: ID.into(),
                timeout_ms: 900_001,
                fresh_producer_id: 1,
                expected: None,
            },
            vec![Reply(14, err(TxnError::InvalidTransactionTimeout))],
        ),
    ]);
}

#[test]
fn timeouts_abort_and_failed_appends_change_nothing() {
    let mut h = run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        At(1_000),
        E(add(2, 0, &[("t", 0)]), vec![Append(TxnState::Ongoing)]),
    ]);
    // The append fails: the request gets the error, the state is unchanged.
    let failed = h.step(Event::AppendDone {
        token: h.last_token,
        result: Err(TxnError::NotCoordinator),
    });
    assert_eq!(failed, vec![Reply(2, err(TxnError::NotCoordinator))]);
    assert_eq!(h.core.describe(ID).unwrap().0, TxnState::Empty);
    assert_eq!(h.core.next_deadline(), None);
    assert_eq!(
        h.step(add(3, 0, &[("t", 0)])),
        vec![Append(TxnState::Ongoing)]
    );
    assert_eq!(h.ok(), vec![Reply(3, Reply::Done)]);
    assert_eq!(h.core.next_deadline(), Some(61_001));
    h.now = 61_000;
    assert_eq!(h.step(Event::Tick), vec![]);
    h.now = 61_001;
    assert_eq!(h.step(Event::Tick), vec![Append(TxnState::PrepareAbort)]);
    assert_eq!(h.ok(), vec![Markers(false, 1, 1)]);
    // The producer's next request is fenced; a tick does not resend markers in flight.
    assert_eq!(
        h.step(end(4, 0, true)),
        vec![Reply(4, err(TxnError::ProducerFenced))]
    );
    assert_eq!(h.step(Event::Tick), vec![]);
}

#[test]
fn load_resends_markers_and_unload_answers_waiters() {
    let mut h = run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        E(
            add(2, 0, &[("t", 0), ("t", 1)]),
            vec![Append(TxnState::Ongoing)],
        ),
        Commit(vec![Reply(2, Reply::Done)]),
    ]);
    // Take the records a log would hold: the last one is PrepareCommit.
    let prepare = h.core.step(0, end(3, 0, true));
    let (key, value) = match &prepare[0] {
        Action::Append { key, value, .. } => (key.clone(), value.clone()),
        other => panic!("{other:?}"),
    };
    // Unloaded before the append commits: the request is told NOT_COORDINATOR.
    let partition = partition_for(ID, PARTITIONS);
    let out = summarize(&h.core.step(0, Event::Unload { partition }));
    assert_eq!(out, vec![Reply(3, err(TxnError::NotCoordinator))]);
    assert_eq!(
        summarize(&h.core.step(0, end(4, 0, true))),
        vec![Reply(4, err(TxnError::NotCoordinator))]
    );
    // Loaded again (by a new leader, say): the Prepare* transaction's markers are resent.
    h.core.step(
        0,
        Event::LoadBegin {
            partition,
            coordinator_epoch: 4,
        },
    );
    assert_eq!(
        summarize(&h.core.step(0, end(5, 0, true))),
        vec![Reply(5, err(TxnError::CoordinatorLoadInProgress))]
    );
    h.core.step(
        0,
        Event::Load {
            partition,
            key,
            value,
        },
    );
    let out = h.core.step(0, Event::LoadFinished { partition });
    match &out[..] {
        [Action::WriteMarkers {
            commit: true,
            coordinator_epoch: 4,
            partitions,
            ..
        }] => assert_eq!(partitions.len(), 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        summarize(&h.core.step(0, markers_written(0))),
        vec![Append(TxnState::CompleteCommit)]
    );
}

#[test]
fn an_idle_transactional_id_expires_and_comes_back_with_a_new_producer_id() {
    let mut h = run(vec![
        At(10),
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        E(add(2, 0, &[("t", 0)]), vec![Append(TxnState::Ongoing)]),
        Commit(vec![Reply(2, Reply::Done)]),
        // Not idle long enough, or a transaction open: nothing expires.
        At(10 + EXPIRATION_MS - 1),
        E(super::coordinator::Event::ExpireIds, vec![]),
        At(10 + EXPIRATION_MS),
        E(super::coordinator::Event::ExpireIds, vec![]),
        E(end(3, 0, true), vec![Append(TxnState::PrepareCommit)]),
        Commit(vec![Reply(3, Reply::Done), Markers(true, 0, 1)]),
        E(markers_written(0), vec![Append(TxnState::CompleteCommit)]),
        Commit(vec![]),
        At(20 + 2 * EXPIRATION_MS),
        E(super::coordinator::Event::ExpireIds, vec![Tombstone]),
        // While the tombstone is written, the id is busy.
        E(
            add(4, 0, &[("t", 0)]),
            vec![Reply(4, err(TxnError::ConcurrentTransactions))],
        ),
        Commit(vec![]),
    ]);
    // Forgotten: its producer id is unknown now, and InitProducerId starts afresh.
    let out = h.step(add(5, 0, &[("t", 0)]));
    assert_eq!(out, vec![Reply(5, err(TxnError::InvalidProducerIdMapping))]);
    let out = h.step(Event::InitProducerId {
        request: 6,
        transactional_id: ID.into(),
        timeout_ms: 60_000,
        fresh_producer_id: 555,
        expected: None,
    });
    assert_eq!(out, vec![Append(TxnState::Empty)]);
    assert_eq!(
        h.ok(),
        vec![Reply(
            6,
            Reply::ProducerId {
                producer_id: 555,
                producer_epoch: 0
            }
        )]
    );
    // A replay of the tombstone forgets the id too.
    let mut c = TxnCoordinator::new(TxnConfig {
        max_timeout_ms: 900_000,
        partitions: PARTITIONS,
        id_expiration_ms: EXPIRATION_MS,
        planted: Default::default(),
    });
    let partition = partition_for(ID, PARTITIONS);
    c.step(
        0,
        Event::LoadBegin {
            partition,
            coordinator_epoch: 1,
        },
    );
    c.step(
        0,
        Event::Load {
            partition,
            key: super::records::encode_key(ID),
            value: None,
        },
    );
    c.step(0, Event::LoadFinished { partition });
    assert_eq!(
        summarize(&c.step(0, end(7, 0, true))),
        vec![Reply(7, err(TxnError::InvalidProducerIdMapping))]
    );
}

/// KIP-664: DescribeTransactions shows the state as persisted (not a transition in flight),
/// with the start time and partitions; unknown ids and partitions not held answer as Kafka.
#[test]
fn describe_shows_the_persisted_state() {
    use super::TxnDescription;
    let mut h = run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        At(5_000),
        E(
            add(2, 0, &[("t", 1), ("t", 0)]),
            vec![Append(TxnState::Ongoing)],
        ),
    ]);
    // The Ongoing record is not committed yet: still Empty, no start.
    let empty = h.core.describe_transaction(ID).unwrap();
    assert_eq!((empty.state, empty.start_ms), (TxnState::Empty, -1));
    h.ok();
    assert_eq!(
        h.core.describe_transaction(ID),
        Ok(TxnDescription {
            state: TxnState::Ongoing,
            timeout_ms: 60_000,
            start_ms: 5_000,
            producer_id: 101,
            producer_epoch: 0,
            partitions: vec![TopicPartition::new("t", 0), TopicPartition::new("t", 1)],
        })
    );
    // Another id of a held partition is unknown; one of a partition not held is not ours.
    let held = partition_for(ID, PARTITIONS);
    let other_held = (0..1000)
        .map(|i| format!("x{i}"))
        .find(|id| partition_for(id, PARTITIONS) == held)
        .unwrap();
    let not_held = (0..1000)
        .map(|i| format!("x{i}"))
        .find(|id| partition_for(id, PARTITIONS) != held)
        .unwrap();
    assert_eq!(
        h.core.describe_transaction(&other_held),
        Err(TxnError::TransactionalIdNotFound)
    );
    assert_eq!(
        h.core.describe_transaction(&not_held),
        Err(TxnError::NotCoordinator)
    );
}

/// KIP-664: ListTransactions filters by state (unknown-to-Weir states match nothing), producer
/// id and duration (v1: running longer than the filter), and refuses while a partition loads.
#[test]
fn list_filters_by_state_producer_and_duration() {
    use super::ListFilter;
    let mut h = run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        At(1_000),
        E(add(2, 0, &[("t", 0)]), vec![Append(TxnState::Ongoing)]),
        Commit(vec![Reply(2, Reply::Done)]),
    ]);
    let ids = |h: &Harness, now, f: ListFilter| -> Vec<(String, TxnState)> {
        h.core
            .list_transactions(now, &f)
            .unwrap()
            .into_iter()
            .map(|t| (t.transactional_id, t.state))
            .collect()
    };
    let all = ListFilter {
        min_duration_ms: -1,
        ..ListFilter::default()
    };
    let ongoing = vec![(ID.to_string(), TxnState::Ongoing)];
    assert_eq!(ids(&h, 2_000, all.clone()), ongoing);
    let states = |s: Vec<TxnState>| ListFilter {
        states: Some(s),
        ..all.clone()
    };
    assert_eq!(ids(&h, 2_000, states(vec![TxnState::Ongoing])), ongoing);
    assert!(ids(&h, 2_000, states(vec![TxnState::Empty])).is_empty());
    assert!(ids(&h, 2_000, states(vec![])).is_empty());
    let pids = |p: Vec<i64>| ListFilter {
        producer_ids: p,
        ..all.clone()
    };
    assert_eq!(ids(&h, 2_000, pids(vec![7, 101])), ongoing);
    assert!(ids(&h, 2_000, pids(vec![7])).is_empty());
    let longer = |ms| ListFilter {
        min_duration_ms: ms,
        ..all.clone()
    };
    // Started at 1000: at 2000 it has run 1000 ms.
    assert!(ids(&h, 2_000, longer(1_000)).is_empty());
    assert_eq!(ids(&h, 2_000, longer(999)), ongoing);
    assert_eq!(ids(&h, 2_000, longer(0)), ongoing);
    // A second partition loading: no partial lists.
    let loading = (0..PARTITIONS)
        .find(|p| *p != partition_for(ID, PARTITIONS))
        .unwrap();
    h.step(Event::LoadBegin {
        partition: loading,
        coordinator_epoch: 1,
    });
    assert_eq!(
        h.core.list_transactions(2_000, &all),
        Err(TxnError::CoordinatorLoadInProgress)
    );
    h.step(Event::LoadFinished { partition: loading });
    assert_eq!(ids(&h, 2_000, all), ongoing);
}
