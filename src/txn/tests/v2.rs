//! Transactions v2 (KIP-890 part 2), message by message: the implicit add, EndTxn v5's epoch
//! bump and its answer, retries told apart from the next transaction by the bump, the abort
//! of a transaction that is not open, the producer id's rotation at an exhausted epoch — and
//! KAFKA-17754's delayed EndTxn, which v2 fences and v1 applies to the later transaction.

use super::*;

fn add2(request: u64, producer_id: i64, epoch: i16, partitions: &[(&str, i32)]) -> Event {
    Event::AddPartitions {
        request,
        transactional_id: ID.into(),
        producer_id,
        producer_epoch: epoch,
        partitions: partitions
            .iter()
            .map(|(t, p)| TopicPartition::new(t, *p))
            .collect(),
        v2: true,
    }
}

fn end2(request: u64, producer_id: i64, epoch: i16, commit: bool, fresh: i64) -> Event {
    Event::EndTxn {
        request,
        transactional_id: ID.into(),
        producer_id,
        producer_epoch: epoch,
        commit,
        v2: true,
        fresh_producer_id: fresh,
    }
}

fn written(producer_id: i64, epoch: i16) -> Event {
    Event::MarkersWritten {
        transactional_id: ID.into(),
        producer_id,
        producer_epoch: epoch,
    }
}

fn id_epoch(producer_id: i64, producer_epoch: i16) -> Reply {
    Reply::ProducerId {
        producer_id,
        producer_epoch,
    }
}

#[test]
fn every_end_bumps_the_epoch_and_answers_it() {
    let h = run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        // The partition leader's implicit add opens the transaction.
        E(
            add2(2, 101, 0, &[("t", 0), ("t", 1)]),
            vec![Append(TxnState::Ongoing)],
        ),
        Commit(vec![Reply(2, Reply::Done)]),
        // The end is persisted at epoch 1; the markers carry it; the answer names it.
        E(
            end2(3, 101, 0, true, -1),
            vec![Append(TxnState::PrepareCommit)],
        ),
        Commit(vec![Reply(3, pid(1)), Markers(true, 1, 2)]),
        // A retry (the epoch below the stored one) while the markers are written: wait.
        E(
            end2(4, 101, 0, true, -1),
            vec![Reply(4, err(TxnError::ConcurrentTransactions))],
        ),
        // The new epoch cannot end a transaction still being prepared.
        E(
            end2(5, 101, 1, true, -1),
            vec![Reply(5, err(TxnError::ProducerFenced))],
        ),
        E(written(101, 1), vec![Append(TxnState::CompleteCommit)]),
        Commit(vec![]),
        // A retry once complete is answered with the epoch to go on with.
        E(end2(6, 101, 0, true, -1), vec![Reply(6, pid(1))]),
        // An abort retried after a commit is not a retry of it.
        E(
            end2(7, 101, 0, false, -1),
            vec![Reply(7, err(TxnError::InvalidTxnState))],
        ),
        // A commit at the current epoch with nothing open is invalid.
        E(
            end2(8, 101, 1, true, -1),
            vec![Reply(8, err(TxnError::InvalidTxnState))],
        ),
        // The next transaction at epoch 1, aborted: epoch 2.
        E(
            add2(9, 101, 1, &[("u", 0)]),
            vec![Append(TxnState::Ongoing)],
        ),
        Commit(vec![Reply(9, Reply::Done)]),
        E(
            end2(10, 101, 1, false, -1),
            vec![Append(TxnState::PrepareAbort)],
        ),
        Commit(vec![Reply(10, pid(2)), Markers(false, 2, 1)]),
        E(written(101, 2), vec![Append(TxnState::CompleteAbort)]),
        Commit(vec![]),
        E(end2(11, 101, 1, false, -1), vec![Reply(11, pid(2))]),
    ]);
    let (state, producer_id, epoch, partitions) = h.core.describe(ID).unwrap();
    assert_eq!(
        (state, producer_id, epoch),
        (TxnState::CompleteAbort, 101, 2)
    );
    assert!(partitions.is_empty());
}

#[test]
fn an_abort_with_nothing_open_still_bumps_and_a_commit_is_refused() {
    run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        E(
            end2(2, 101, 0, true, -1),
            vec![Reply(2, err(TxnError::InvalidTxnState))],
        ),
        E(
            end2(3, 101, 0, false, -1),
            vec![Append(TxnState::PrepareAbort)],
        ),
        // No partitions: markers for none, then complete.
        Commit(vec![Reply(3, pid(1)), Markers(false, 1, 0)]),
        E(written(101, 1), vec![Append(TxnState::CompleteAbort)]),
        Commit(vec![]),
        // Again from CompleteAbort at the current epoch: another bump.
        E(
            end2(4, 101, 1, false, -1),
            vec![Append(TxnState::PrepareAbort)],
        ),
        Commit(vec![Reply(4, pid(2)), Markers(false, 2, 0)]),
        // An older epoch is neither current nor a retry.
        E(
            end2(5, 101, 0, false, -1),
            vec![Reply(5, err(TxnError::ProducerFenced))],
        ),
        // Another producer id.
        E(
            end2(6, 7, 2, false, -1),
            vec![Reply(6, err(TxnError::InvalidProducerIdMapping))],
        ),
    ]);
}

/// KAFKA-17754: transaction 1's EndTxn(abort) is delayed (a retry stuck on a slow connection);
/// the client goes on, and transaction 2 is open when the late request lands. Under v2 the end
/// of transaction 1 bumped the epoch, so the late request is fenced and transaction 2 and its
/// partitions are untouched; so is a late produce of transaction 1 (the leader's implicit add).
#[test]
fn v2_fences_a_delayed_end_txn_from_the_previous_transaction() {
    let h = run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        E(
            add2(2, 101, 0, &[("t", 0)]),
            vec![Append(TxnState::Ongoing)],
        ),
        Commit(vec![Reply(2, Reply::Done)]),
        E(
            end2(3, 101, 0, true, -1),
            vec![Append(TxnState::PrepareCommit)],
        ),
        Commit(vec![Reply(3, pid(1)), Markers(true, 1, 1)]),
        E(written(101, 1), vec![Append(TxnState::CompleteCommit)]),
        Commit(vec![]),
        // Transaction 2 at epoch 1.
        E(
            add2(4, 101, 1, &[("t", 1)]),
            vec![Append(TxnState::Ongoing)],
        ),
        Commit(vec![Reply(4, Reply::Done)]),
        // The delayed abort of transaction 1 (epoch 0): fenced.
        E(
            end2(5, 101, 0, false, -1),
            vec![Reply(5, err(TxnError::ProducerFenced))],
        ),
        // A delayed produce of transaction 1 asking to join: fenced too.
        E(
            add2(6, 101, 0, &[("t", 2)]),
            vec![Reply(6, err(TxnError::ProducerFenced))],
        ),
    ]);
    let (state, _, epoch, partitions) = h.core.describe(ID).unwrap();
    assert_eq!((state, epoch), (TxnState::Ongoing, 1));
    assert_eq!(partitions, vec![TopicPartition::new("t", 1)]);
}

/// The same schedule under v1: the epoch does not change between transactions, so the late
/// abort of transaction 1 aborts transaction 2 (the torn transaction Jepsen found). This test
/// states the flaw v2 closes; it fails if v1 ever starts fencing here.
#[test]
fn v1_applies_a_delayed_end_txn_to_the_later_transaction() {
    let h = run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        E(add(2, 0, &[("t", 0)]), vec![Append(TxnState::Ongoing)]),
        Commit(vec![Reply(2, Reply::Done)]),
        E(end(3, 0, true), vec![Append(TxnState::PrepareCommit)]),
        Commit(vec![Reply(3, Reply::Done), Markers(true, 0, 1)]),
        E(markers_written(0), vec![Append(TxnState::CompleteCommit)]),
        Commit(vec![]),
        E(add(4, 0, &[("t", 1)]), vec![Append(TxnState::Ongoing)]),
        Commit(vec![Reply(4, Reply::Done)]),
        E(end(5, 0, false), vec![Append(TxnState::PrepareAbort)]),
        Commit(vec![Reply(5, Reply::Done), Markers(false, 0, 1)]),
    ]);
    assert_eq!(h.core.describe(ID).unwrap().0, TxnState::PrepareAbort);
}

/// At an exhausted epoch the end moves to `i16::MAX` (markers included) and the producer id
/// rotates to the one the driver reserved, at epoch 0, once complete; the answer already names
/// the new id, and a retry naming the old id at the last epoch is still recognised.
#[test]
fn an_exhausted_epoch_rotates_the_producer_id_at_the_end() {
    let mut h = Harness::loaded();
    let partition = partition_for(ID, PARTITIONS);
    let exhausted = super::super::coordinator::EPOCH_EXHAUSTED;
    h.core.step(0, Event::Unload { partition });
    h.core.step(
        0,
        Event::LoadBegin {
            partition,
            coordinator_epoch: 4,
        },
    );
    let record = super::super::records::TxnRecord::v1(
        101,
        exhausted,
        60_000,
        TxnState::CompleteCommit,
        vec![],
        0,
        0,
    );
    h.core.step(
        0,
        Event::Load {
            partition,
            key: super::super::records::encode_key(ID),
            value: Some(super::super::records::encode_value(&record)),
        },
    );
    h.core.step(0, Event::LoadFinished { partition });
    assert!(h.core.needs_fresh_producer_id(ID));
    assert_eq!(
        h.step(add2(1, 101, exhausted, &[("t", 0)])),
        vec![Append(TxnState::Ongoing)]
    );
    assert_eq!(h.ok(), vec![Reply(1, Reply::Done)]);
    // Without a reserved id the end cannot happen yet: the client retries.
    assert_eq!(
        h.step(end2(2, 101, exhausted, true, -1)),
        vec![Reply(2, err(TxnError::ConcurrentTransactions))]
    );
    assert_eq!(
        h.step(end2(3, 101, exhausted, true, 500)),
        vec![Append(TxnState::PrepareCommit)]
    );
    assert_eq!(
        h.ok(),
        vec![Reply(3, id_epoch(500, 0)), Markers(true, i16::MAX, 1)]
    );
    // The client is on the new id before Complete* moves the coordinator to it: it waits,
    // with the markers still to write and while Complete* is persisted.
    assert_eq!(
        h.step(end2(9, 500, 0, false, -1)),
        vec![Reply(9, err(TxnError::ConcurrentTransactions))]
    );
    assert_eq!(
        h.step(written(101, i16::MAX)),
        vec![Append(TxnState::CompleteCommit)]
    );
    assert_eq!(
        h.step(end2(10, 500, 0, false, -1)),
        vec![Reply(10, err(TxnError::ConcurrentTransactions))]
    );
    assert_eq!(h.ok(), vec![]);
    let (state, producer_id, epoch, _) = h.core.describe(ID).unwrap();
    assert_eq!(
        (state, producer_id, epoch),
        (TxnState::CompleteCommit, 500, 0)
    );
    // The retry of that end, by the old id at its last client-visible epoch.
    assert_eq!(
        h.step(end2(4, 101, exhausted, true, -1)),
        vec![Reply(4, id_epoch(500, 0))]
    );
    // The new id goes on.
    assert_eq!(
        h.step(add2(5, 500, 0, &[("t", 0)])),
        vec![Append(TxnState::Ongoing)]
    );
    assert_eq!(h.ok(), vec![Reply(5, Reply::Done)]);
    assert!(!h.core.needs_fresh_producer_id(ID));
}

/// Kafka's order in `handleEndTransaction`: the producer id, then the epoch (PRODUCER_FENCED),
/// and only then a transition in flight (CONCURRENT_TRANSACTIONS): a retry waits for it, an
/// epoch the end does not accept is fenced at once instead of told to retry.
#[test]
fn a_fenced_end_is_told_so_before_a_transition_in_flight() {
    run(vec![
        E(init(1, None), vec![Append(TxnState::Empty)]),
        Commit(vec![Reply(1, pid(0))]),
        E(
            add2(2, 101, 0, &[("t", 0)]),
            vec![Append(TxnState::Ongoing)],
        ),
        Commit(vec![Reply(2, Reply::Done)]),
        E(
            end2(3, 101, 0, true, -1),
            vec![Append(TxnState::PrepareCommit)],
        ),
        // PrepareCommit in flight: the same end again waits; an epoch never given is fenced.
        E(
            end2(4, 101, 0, true, -1),
            vec![Reply(4, err(TxnError::ConcurrentTransactions))],
        ),
        E(
            end2(5, 101, 7, true, -1),
            vec![Reply(5, err(TxnError::ProducerFenced))],
        ),
        Commit(vec![Reply(3, pid(1)), Markers(true, 1, 1)]),
        E(written(101, 1), vec![Append(TxnState::CompleteCommit)]),
        // CompleteCommit in flight: a retry of the end waits; the bumped epoch cannot end the
        // transaction still prepared (as with nothing in flight).
        E(
            end2(6, 101, 0, true, -1),
            vec![Reply(6, err(TxnError::ConcurrentTransactions))],
        ),
        E(
            end2(7, 101, 1, true, -1),
            vec![Reply(7, err(TxnError::ProducerFenced))],
        ),
        Commit(vec![]),
        E(end2(8, 101, 0, true, -1), vec![Reply(8, pid(1))]),
    ]);
}

/// The tooth (`TxnV2NoEpochBump`): without the bump, v2 takes the late abort of transaction 1
/// as the end of transaction 2, as v1 does. The simulator's scenario for KAFKA-17754 must catch
/// this plant; here it shows the plant bites where the fence stood.
#[test]
fn the_planted_missing_bump_lets_a_late_end_txn_through() {
    let planted =
        crate::config::planted::Planted::new(Some(crate::config::PlantedBug::TxnV2NoEpochBump));
    let h = run_with(
        Harness::loaded_with(planted),
        vec![
            E(init(1, None), vec![Append(TxnState::Empty)]),
            Commit(vec![Reply(1, pid(0))]),
            E(
                add2(2, 101, 0, &[("t", 0)]),
                vec![Append(TxnState::Ongoing)],
            ),
            Commit(vec![Reply(2, Reply::Done)]),
            E(
                end2(3, 101, 0, true, -1),
                vec![Append(TxnState::PrepareCommit)],
            ),
            Commit(vec![Reply(3, pid(0)), Markers(true, 0, 1)]),
            E(written(101, 0), vec![Append(TxnState::CompleteCommit)]),
            Commit(vec![]),
            E(
                add2(4, 101, 0, &[("t", 1)]),
                vec![Append(TxnState::Ongoing)],
            ),
            Commit(vec![Reply(4, Reply::Done)]),
            // The late abort of transaction 1 now ends transaction 2.
            E(
                end2(5, 101, 0, false, -1),
                vec![Append(TxnState::PrepareAbort)],
            ),
        ],
    );
    assert_eq!(
        h.core.describe(ID).unwrap().0,
        TxnState::Ongoing,
        "until committed"
    );
}
