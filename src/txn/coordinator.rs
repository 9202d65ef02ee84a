//! The transaction coordinator core (transactions v1, KIP-98 with KIP-360's epoch checks and
//! KIP-890 part 1's verification), in the house shape: `step(now, Event)` returns actions,
//! `next_deadline()` says when to tick, and the invariants are checked after every step. No
//! I/O, clock or randomness: the driver appends to `__transaction_state`, writes markers,
//! allocates producer ids and answers requests.
//!
//! Every state change is persisted before it takes effect (prepare → append → complete, one
//! transition in flight per transactional id): the new state waits in `appends` until the
//! driver reports the record committed (`AppendDone`), and only then replaces the old one.
//! A Prepare* state asks the driver to write the markers to every partition of the
//! transaction (`WriteMarkers`); once all are written (`MarkersWritten`) the Complete* state
//! is persisted. A coordinator that loads a partition resends the markers of every Prepare*
//! transaction in it; a tick resends those whose markers are no longer in flight.

use std::collections::{BTreeMap, BTreeSet};

pub mod describe;
mod end_v2;

use super::records::{self, TxnRecord};
use super::{partition_for, TopicPartition, TxnError, TxnState};

pub type RequestId = u64;
pub type Token = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transaction.state.log.num.partitions` (as the topic was created).
    pub partitions: i32,
    /// `transactional.id.expiration.ms`: an id with no transaction open (Empty, Complete*)
    /// and no update for this long is forgotten (a tombstone in `__transaction_state`).
    pub id_expiration_ms: i64,
    /// Simulator and tests: the bug planted here (`TxnV2NoEpochBump`).
    #[cfg(any(madsim, test))]
    pub planted: crate::config::planted::Planted,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// This node leads `partition` of `__transaction_state` at `coordinator_epoch`; its
    /// records follow (`Load`), then `LoadFinished`.
    LoadBegin {
        partition: i32,
        coordinator_epoch: i32,
    },
    Load {
        partition: i32,
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    },
    LoadFinished {
        partition: i32,
    },
    /// This node no longer leads `partition`.
    Unload {
        partition: i32,
    },
    InitProducerId {
        request: RequestId,
        transactional_id: String,
        timeout_ms: i32,
        /// A producer id the driver reserved, used if the id is new or its epoch is exhausted.
        fresh_producer_id: i64,
        /// KIP-360 (InitProducerId v3+): the producer's current id and epoch, or None.
        expected: Option<(i64, i16)>,
    },
    AddPartitions {
        request: RequestId,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<TopicPartition>,
        /// Transactions v2 (KIP-890 part 2): a partition leader's implicit add for Produce v12
        /// or TxnOffsetCommit v5 (AddPartitionsToTxn v5); the transaction it opens is a v2 one.
        v2: bool,
    },
    /// KIP-890 part 1: is `partition` in the producer's ongoing transaction?
    Verify {
        request: RequestId,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        partition: TopicPartition,
    },
    EndTxn {
        request: RequestId,
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        /// EndTxn v5 (transactions v2): the epoch is bumped at the end of every transaction and
        /// the answer carries the producer id and epoch to use next.
        v2: bool,
        /// A producer id the driver reserved for a v2 end whose bump exhausts the epoch
        /// ([`TxnCoordinator::needs_fresh_producer_id`]); -1 if none.
        fresh_producer_id: i64,
    },
    /// A `__transaction_state` append is committed (or failed).
    AppendDone {
        token: Token,
        result: Result<(), TxnError>,
    },
    /// Every marker of the transaction is written.
    MarkersWritten {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
    },
    /// Time passed: abort expired transactions, resend markers not in flight.
    Tick,
    /// Forget transactional ids idle past `transactional.id.expiration.ms` (the driver sends it
    /// every `transaction.remove.expired.transaction.cleanup.interval.ms`).
    ExpireIds,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    ProducerId {
        producer_id: i64,
        producer_epoch: i16,
    },
    Done,
    Error(TxnError),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Respond(RequestId, Reply),
    Append {
        token: Token,
        partition: i32,
        key: Vec<u8>,
        /// `None`: a tombstone (an expired transactional id).
        value: Option<Vec<u8>>,
    },
    WriteMarkers {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        partitions: Vec<TopicPartition>,
        /// A transactions v2 transaction (KIP-1228): its markers carry the bumped epoch, and
        /// the partitions check that it is above the data's.
        v2: bool,
    },
}

/// One transactional id's state.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Txn {
    producer_id: i64,
    producer_epoch: i16,
    /// The epoch before the last bump (KIP-360: a retried InitProducerId names it).
    last_epoch: i16,
    timeout_ms: i32,
    state: TxnState,
    partitions: BTreeSet<TopicPartition>,
    start_ms: i64,
    last_update_ms: i64,
    /// The transition being persisted.
    pending: Option<Token>,
    /// Markers asked of the driver and not yet reported written.
    markers_in_flight: bool,
    /// The transaction in this state follows transactions v2 (opened by an implicit add or
    /// ended by EndTxn v5): its end bumps the epoch.
    v2: bool,
    /// Transactions v2 across an exhausted epoch: the producer id the transaction's end moves
    /// to (at epoch 0) once Complete*, -1 otherwise.
    next_producer_id: i64,
    /// The producer id before the last rotation (a retried EndTxn v5 may name it), -1 if none.
    previous_producer_id: i64,
}

struct PendingAppend {
    transactional_id: String,
    /// `None`: the id's tombstone; once committed the id is forgotten.
    next: Option<Txn>,
    /// The request answered once the record is committed, and with what.
    then: Option<(RequestId, Reply)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    Loading { coordinator_epoch: i32 },
    Loaded { coordinator_epoch: i32 },
}

pub struct TxnCoordinator {
    config: TxnConfig,
    held: BTreeMap<i32, Held>,
    txns: BTreeMap<String, Txn>,
    appends: BTreeMap<Token, PendingAppend>,
    next_token: Token,
}

/// Epochs at or past this are exhausted: the next InitProducerId rotates to a new producer id
/// (and a v2 end bumps to `i16::MAX` internally, then rotates).
pub(crate) const EPOCH_EXHAUSTED: i16 = i16::MAX - 1;

impl TxnCoordinator {
    pub fn new(config: TxnConfig) -> TxnCoordinator {
        assert!(config.partitions > 0 && config.max_timeout_ms > 0);
        TxnCoordinator {
            config,
            held: BTreeMap::new(),
            txns: BTreeMap::new(),
            appends: BTreeMap::new(),
            next_token: 1,
        }
    }

    pub fn config(&self) -> TxnConfig {
        self.config
    }

    /// Whether this coordinator holds (loaded or loading) `partition`.
    pub fn holds(&self, partition: i32) -> bool {
        self.held.contains_key(&partition)
    }

    pub fn step(&mut self, now: i64, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        match event {
            Event::LoadBegin {
                partition,
                coordinator_epoch,
            } => {
                assert!(!self.held.contains_key(&partition), "loaded twice");
                self.held
                    .insert(partition, Held::Loading { coordinator_epoch });
            }
            Event::Load {
                partition,
                key,
                value,
            } => self.load(partition, &key, value.as_deref()),
            Event::LoadFinished { partition } => self.load_finished(partition, &mut out),
            Event::Unload { partition } => self.unload(partition, &mut out),
            Event::InitProducerId {
                request,
                transactional_id,
                timeout_ms,
                fresh_producer_id,
                expected,
            } => self.init_producer_id(
                now,
                request,
                transactional_id,
                timeout_ms,
                fresh_producer_id,
                expected,
                &mut out,
            ),
            Event::AddPartitions {
                request,
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
                v2,
            } => self.add_partitions(
                now,
                request,
                &transactional_id,
                (producer_id, producer_epoch),
                partitions,
                v2,
                &mut out,
            ),
            Event::Verify {
                request,
                transactional_id,
                producer_id,
                producer_epoch,
                partition,
            } => {
                let reply =
                    match self.verify(&transactional_id, (producer_id, producer_epoch), &partition)
                    {
                        Ok(()) => Reply::Done,
                        Err(e) => Reply::Error(e),
                    };
                out.push(Action::Respond(request, reply));
            }
            Event::EndTxn {
                request,
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                v2: false,
                ..
            } => self.end_txn(
                now,
                request,
                &transactional_id,
                (producer_id, producer_epoch),
                commit,
                &mut out,
            ),
            Event::EndTxn {
                request,
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                v2: true,
                fresh_producer_id,
            } => self.end_txn_v2(
                now,
                request,
                &transactional_id,
                (producer_id, producer_epoch),
                commit,
                fresh_producer_id,
                &mut out,
            ),
            Event::AppendDone { token, result } => self.append_done(token, result, &mut out),
            Event::MarkersWritten {
                transactional_id,
                producer_id,
                producer_epoch,
            } => self.markers_written(
                now,
                &transactional_id,
                (producer_id, producer_epoch),
                &mut out,
            ),
            Event::Tick => self.tick(now, &mut out),
            Event::ExpireIds => self.expire_ids(now, &mut out),
        }
        self.check_invariants();
        out
    }

    /// When the next transaction times out (the driver ticks then, or sooner).
    pub fn next_deadline(&self) -> Option<i64> {
        self.txns
            .values()
            .filter(|t| t.state == TxnState::Ongoing && t.pending.is_none())
            .map(|t| {
                t.start_ms
                    .saturating_add(t.timeout_ms as i64)
                    .saturating_add(1)
            })
            .min()
    }

    /// The coordinator gate (Kafka's order): not held → NOT_COORDINATOR, loading →
    /// COORDINATOR_LOAD_IN_PROGRESS.
    fn gate(&self, transactional_id: &str) -> Result<i32, TxnError> {
        let partition = partition_for(transactional_id, self.config.partitions);
        match self.held.get(&partition) {
            None => Err(TxnError::NotCoordinator),
            Some(Held::Loading { .. }) => Err(TxnError::CoordinatorLoadInProgress),
            Some(Held::Loaded { .. }) => Ok(partition),
        }
    }

    fn coordinator_epoch(&self, transactional_id: &str) -> i32 {
        let partition = partition_for(transactional_id, self.config.partitions);
        match self.held.get(&partition) {
            Some(Held::Loaded { coordinator_epoch } | Held::Loading { coordinator_epoch }) => {
                *coordinator_epoch
            }
            None => -1,
        }
    }

    /// The transaction of a request naming (producer id, epoch): Kafka's checks for
    /// AddPartitionsToTxn and EndTxn.
    fn current(&self, transactional_id: &str, producer: (i64, i16)) -> Result<&Txn, TxnError> {
        self.gate(transactional_id)?;
        let txn = self
            .txns
            .get(transactional_id)
            .filter(|t| t.producer_id == producer.0 && t.producer_epoch >= 0)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        if txn.producer_epoch != producer.1 {
            return Err(TxnError::ProducerFenced);
        }
        Ok(txn)
    }

    #[allow(clippy::too_many_arguments)]
    fn init_producer_id(
        &mut self,
        now: i64,
        request: RequestId,
        transactional_id: String,
        timeout_ms: i32,
        fresh_producer_id: i64,
        expected: Option<(i64, i16)>,
        out: &mut Vec<Action>,
    ) {
        let reply = |e| Action::Respond(request, Reply::Error(e));
        if let Err(e) = self.gate(&transactional_id) {
            return out.push(reply(e));
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return out.push(reply(TxnError::InvalidTransactionTimeout));
        }
        let txn = self
            .txns
            .entry(transactional_id.clone())
            .or_insert_with(|| Txn {
                producer_id: fresh_producer_id,
                producer_epoch: -1,
                last_epoch: -1,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                start_ms: -1,
                last_update_ms: now,
                pending: None,
                markers_in_flight: false,
                v2: false,
                next_producer_id: -1,
                previous_producer_id: -1,
            })
            .clone();
        if txn.pending.is_some() {
            return out.push(reply(TxnError::ConcurrentTransactions));
        }
        let expected = expected.filter(|&(pid, epoch)| pid >= 0 || epoch >= 0);
        if let Some((pid, epoch)) = expected {
            let known = txn.producer_epoch == -1
                || (pid == txn.producer_id
                    && (epoch == txn.producer_epoch || epoch == txn.last_epoch));
            if !known {
                return out.push(reply(TxnError::ProducerFenced));
            }
        }
        match txn.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                out.push(reply(TxnError::ConcurrentTransactions))
            }
            TxnState::Ongoing => {
                // A zombie's transaction is still open: fence it with a bumped epoch and abort
                // it; the client retries (CONCURRENT_TRANSACTIONS) and bumps again once done.
                let mut next = txn.clone();
                next.producer_epoch = txn.producer_epoch.saturating_add(1);
                next.last_epoch = txn.producer_epoch;
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now;
                self.persist(
                    &transactional_id,
                    next,
                    Some((request, Reply::Error(TxnError::ConcurrentTransactions))),
                    out,
                );
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                if let Some((_, epoch)) = expected {
                    if epoch == txn.last_epoch
                        && txn.producer_epoch >= 0
                        && epoch != txn.producer_epoch
                    {
                        // A retry of a bump that already happened: the current id and epoch.
                        return out.push(Action::Respond(
                            request,
                            Reply::ProducerId {
                                producer_id: txn.producer_id,
                                producer_epoch: txn.producer_epoch,
                            },
                        ));
                    }
                }
                let mut next = txn.clone();
                if txn.producer_epoch >= EPOCH_EXHAUSTED {
                    next.producer_id = fresh_producer_id;
                    next.producer_epoch = 0;
                    next.last_epoch = -1;
                } else {
                    next.producer_epoch = txn.producer_epoch + 1;
                    next.last_epoch = if expected.is_some() {
                        txn.producer_epoch
                    } else {
                        -1
                    };
                }
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.timeout_ms = timeout_ms;
                next.start_ms = -1;
                next.last_update_ms = now;
                let answer = Reply::ProducerId {
                    producer_id: next.producer_id,
                    producer_epoch: next.producer_epoch,
                };
                self.persist(&transactional_id, next, Some((request, answer)), out);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn add_partitions(
        &mut self,
        now: i64,
        request: RequestId,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: Vec<TopicPartition>,
        v2: bool,
        out: &mut Vec<Action>,
    ) {
        let txn = match self.current(transactional_id, producer) {
            Ok(t) => t.clone(),
            Err(e) => return out.push(Action::Respond(request, Reply::Error(e))),
        };
        if txn.pending.is_some()
            || matches!(txn.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
        {
            return out.push(Action::Respond(
                request,
                Reply::Error(TxnError::ConcurrentTransactions),
            ));
        }
        if txn.state == TxnState::Ongoing && partitions.iter().all(|p| txn.partitions.contains(p)) {
            return out.push(Action::Respond(request, Reply::Done));
        }
        let mut next = txn.clone();
        if txn.state != TxnState::Ongoing {
            next.start_ms = now;
            next.partitions.clear();
            next.v2 = v2;
        }
        next.partitions.extend(partitions);
        next.state = TxnState::Ongoing;
        next.last_update_ms = now;
        self.persist(transactional_id, next, Some((request, Reply::Done)), out);
    }

    fn verify(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partition: &TopicPartition,
    ) -> Result<(), TxnError> {
        let txn = self.current(transactional_id, producer)?;
        match txn.state {
            TxnState::Ongoing if txn.partitions.contains(partition) => Ok(()),
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::NotInTransaction),
        }
    }

    fn end_txn(
        &mut self,
        now: i64,
        request: RequestId,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
        out: &mut Vec<Action>,
    ) {
        let txn = match self.current(transactional_id, producer) {
            Ok(t) => t.clone(),
            Err(e) => return out.push(Action::Respond(request, Reply::Error(e))),
        };
        if txn.pending.is_some() {
            return out.push(Action::Respond(
                request,
                Reply::Error(TxnError::ConcurrentTransactions),
            ));
        }
        use TxnState::*;
        let reply = match (txn.state, commit) {
            (Ongoing, _) => {
                let mut next = txn.clone();
                next.state = if commit { PrepareCommit } else { PrepareAbort };
                next.last_update_ms = now;
                return self.persist(transactional_id, next, Some((request, Reply::Done)), out);
            }
            (CompleteCommit, true) | (CompleteAbort, false) => Reply::Done,
            (PrepareCommit, true) | (PrepareAbort, false) => {
                Reply::Error(TxnError::ConcurrentTransactions)
            }
            _ => Reply::Error(TxnError::InvalidTxnState),
        };
        out.push(Action::Respond(request, reply));
    }

    fn markers_written(
        &mut self,
        now: i64,
        transactional_id: &str,
        producer: (i64, i16),
        out: &mut Vec<Action>,
    ) {
        let Some(txn) = self.txns.get_mut(transactional_id) else {
            return;
        };
        if (txn.producer_id, txn.producer_epoch) != producer || !txn.markers_in_flight {
            return;
        }
        txn.markers_in_flight = false;
        if txn.pending.is_some() {
            return;
        }
        let mut next = txn.clone();
        next.state = match txn.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => panic!("markers written for a transaction in {other:?}"),
        };
        next.partitions.clear();
        next.last_update_ms = now;
        if next.next_producer_id >= 0 {
            // Transactions v2 across an exhausted epoch: the producer goes on under the id
            // reserved at the end, at epoch 0 (its client saw the old id's last epoch before).
            next.previous_producer_id = txn.producer_id;
            next.producer_id = next.next_producer_id;
            next.next_producer_id = -1;
            next.producer_epoch = 0;
            next.last_epoch = EPOCH_EXHAUSTED;
        }
        self.persist(transactional_id, next, None, out);
    }

    fn tick(&mut self, now: i64, out: &mut Vec<Action>) {
        let ids: Vec<String> = self.txns.keys().cloned().collect();
        for id in ids {
            if self.gate(&id).is_err() {
                continue;
            }
            let txn = self.txns[&id].clone();
            if txn.pending.is_some() {
                continue;
            }
            match txn.state {
                TxnState::Ongoing if txn.start_ms.saturating_add(txn.timeout_ms as i64) < now => {
                    // Expired: abort through the fence path, so the markers carry an epoch
                    // above anything the producer used and its next request is fenced.
                    let mut next = txn.clone();
                    next.producer_epoch = txn.producer_epoch.saturating_add(1);
                    next.last_epoch = txn.producer_epoch;
                    next.state = TxnState::PrepareAbort;
                    next.last_update_ms = now;
                    self.persist(&id, next, None, out);
                }
                TxnState::PrepareCommit | TxnState::PrepareAbort if !txn.markers_in_flight => {
                    self.send_markers(&id, out);
                }
                _ => {}
            }
        }
    }

    /// Starts persisting `next` as `transactional_id`'s state.
    fn persist(
        &mut self,
        transactional_id: &str,
        next: Txn,
        then: Option<(RequestId, Reply)>,
        out: &mut Vec<Action>,
    ) {
        let partition = self
            .gate(transactional_id)
            .expect("persisted only when held");
        let txn = self
            .txns
            .get_mut(transactional_id)
            .expect("persisted only when known");
        assert!(txn.pending.is_none(), "one transition at a time");
        assert!(
            next.state.may_follow(txn.state)
                || (next.v2 && next.state.may_follow_in_v2(txn.state))
                || (txn.producer_epoch == -1 && next.state == TxnState::Empty),
            "{:?} may not follow {:?}",
            next.state,
            txn.state
        );
        let token = self.next_token;
        self.next_token += 1;
        txn.pending = Some(token);
        let record = TxnRecord {
            producer_id: next.producer_id,
            producer_epoch: next.producer_epoch,
            timeout_ms: next.timeout_ms,
            state: next.state,
            partitions: next.partitions.iter().cloned().collect(),
            last_update_ms: next.last_update_ms,
            start_ms: next.start_ms,
            v2: next.v2,
            previous_producer_id: next.previous_producer_id,
            next_producer_id: next.next_producer_id,
        };
        out.push(Action::Append {
            token,
            partition,
            key: records::encode_key(transactional_id),
            value: Some(records::encode_value(&record)),
        });
        self.appends.insert(
            token,
            PendingAppend {
                transactional_id: transactional_id.to_string(),
                next: Some(next),
                then,
            },
        );
    }

    /// Kafka's `removeExpiredTransactionalIds`: every held id with no transaction open, no
    /// transition in flight and no update for `id_expiration_ms` gets a tombstone; it is
    /// forgotten once the tombstone is committed (requests meanwhile: CONCURRENT_TRANSACTIONS).
    /// Its next InitProducerId starts afresh with a new producer id.
    fn expire_ids(&mut self, now: i64, out: &mut Vec<Action>) {
        let expiration = self.config.id_expiration_ms;
        let expired: Vec<String> = self
            .txns
            .iter()
            .filter(|(id, t)| {
                self.gate(id).is_ok()
                    && t.pending.is_none()
                    && matches!(
                        t.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    )
                    && t.last_update_ms.saturating_add(expiration) <= now
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let partition = self.gate(&id).expect("filtered on it");
            let token = self.next_token;
            self.next_token += 1;
            self.txns.get_mut(&id).expect("listed").pending = Some(token);
            out.push(Action::Append {
                token,
                partition,
                key: records::encode_key(&id),
                value: None,
            });
            self.appends.insert(
                token,
                PendingAppend {
                    transactional_id: id,
                    next: None,
                    then: None,
                },
            );
        }
    }

    fn append_done(&mut self, token: Token, result: Result<(), TxnError>, out: &mut Vec<Action>) {
        let Some(append) = self.appends.remove(&token) else {
            return; // Its partition was unloaded meanwhile.
        };
        let id = append.transactional_id;
        let txn = self
            .txns
            .get_mut(&id)
            .expect("a pending transition's transaction is known");
        assert_eq!(txn.pending, Some(token));
        txn.pending = None;
        if let Err(e) = result {
            if let Some((request, _)) = append.then {
                out.push(Action::Respond(request, Reply::Error(e)));
            }
            return;
        }
        let Some(mut next) = append.next else {
            // The tombstone is committed: the id is gone.
            self.txns.remove(&id);
            return;
        };
        next.pending = None;
        next.markers_in_flight = txn.markers_in_flight;
        if next.producer_id == txn.producer_id {
            assert!(
                next.producer_epoch >= txn.producer_epoch,
                "epochs never go back"
            );
        }
        *txn = next;
        if let Some((request, reply)) = append.then {
            out.push(Action::Respond(request, reply));
        }
        if matches!(txn.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            self.send_markers(&id, out);
        }
    }

    fn send_markers(&mut self, transactional_id: &str, out: &mut Vec<Action>) {
        let coordinator_epoch = self.coordinator_epoch(transactional_id);
        let txn = self.txns.get_mut(transactional_id).expect("known");
        txn.markers_in_flight = true;
        out.push(Action::WriteMarkers {
            transactional_id: transactional_id.to_string(),
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            commit: txn.state == TxnState::PrepareCommit,
            coordinator_epoch,
            partitions: txn.partitions.iter().cloned().collect(),
            v2: txn.v2,
        });
    }

    fn load(&mut self, partition: i32, key: &[u8], value: Option<&[u8]>) {
        assert!(
            matches!(self.held.get(&partition), Some(Held::Loading { .. })),
            "records load into a loading partition"
        );
        let Ok(id) = records::decode_key(key) else {
            return;
        };
        if partition_for(&id, self.config.partitions) != partition {
            return;
        }
        match value.map(records::decode_value) {
            None => {
                self.txns.remove(&id);
            }
            Some(Ok(r)) => {
                let last_epoch = self.txns.get(&id).map_or(-1, |t| t.producer_epoch);
                self.txns.insert(
                    id,
                    Txn {
                        producer_id: r.producer_id,
                        producer_epoch: r.producer_epoch,
                        last_epoch: if last_epoch < r.producer_epoch {
                            last_epoch
                        } else {
                            -1
                        },
                        timeout_ms: r.timeout_ms,
                        state: r.state,
                        partitions: r.partitions.into_iter().collect(),
                        start_ms: r.start_ms,
                        last_update_ms: r.last_update_ms,
                        pending: None,
                        markers_in_flight: false,
                        v2: r.v2,
                        next_producer_id: r.next_producer_id,
                        previous_producer_id: r.previous_producer_id,
                    },
                );
            }
            Some(Err(_)) => {}
        }
    }

    fn load_finished(&mut self, partition: i32, out: &mut Vec<Action>) {
        let Some(Held::Loading { coordinator_epoch }) = self.held.get(&partition).copied() else {
            return;
        };
        self.held
            .insert(partition, Held::Loaded { coordinator_epoch });
        let preparing: Vec<String> = self
            .txns
            .iter()
            .filter(|(id, t)| {
                partition_for(id, self.config.partitions) == partition
                    && matches!(t.state, TxnState::PrepareCommit | TxnState::PrepareAbort)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in preparing {
            self.send_markers(&id, out);
        }
    }

    fn unload(&mut self, partition: i32, out: &mut Vec<Action>) {
        self.held.remove(&partition);
        let n = self.config.partitions;
        self.txns.retain(|id, _| partition_for(id, n) != partition);
        let gone: Vec<Token> = self
            .appends
            .iter()
            .filter(|(_, a)| partition_for(&a.transactional_id, n) == partition)
            .map(|(t, _)| *t)
            .collect();
        for token in gone {
            let append = self.appends.remove(&token).expect("listed");
            if let Some((request, _)) = append.then {
                out.push(Action::Respond(
                    request,
                    Reply::Error(TxnError::NotCoordinator),
                ));
            }
        }
    }

    /// The core's invariants: every pending transition is known both ways; every transaction
    /// belongs to a held partition; Empty holds no partitions; markers are only in flight in
    /// Prepare*.
    pub fn check_invariants(&self) {
        for (token, append) in &self.appends {
            let txn = self
                .txns
                .get(&append.transactional_id)
                .expect("a pending transition's transaction is known");
            assert_eq!(txn.pending, Some(*token));
        }
        for (id, txn) in &self.txns {
            assert!(self
                .held
                .contains_key(&partition_for(id, self.config.partitions)));
            if let Some(token) = txn.pending {
                assert!(self.appends.contains_key(&token));
            }
            if txn.state == TxnState::Empty {
                assert!(txn.partitions.is_empty(), "{id}: Empty with partitions");
            }
            if txn.markers_in_flight {
                assert!(
                    matches!(txn.state, TxnState::PrepareCommit | TxnState::PrepareAbort),
                    "{id}: markers in flight in {:?}",
                    txn.state
                );
            }
            assert!(txn.producer_epoch >= -1);
            if txn.next_producer_id >= 0 {
                // A rotation waits only on the end of a v2 transaction at an exhausted epoch.
                assert!(
                    txn.v2
                        && txn.producer_epoch > EPOCH_EXHAUSTED
                        && matches!(txn.state, TxnState::PrepareCommit | TxnState::PrepareAbort),
                    "{id}: next producer id outside a v2 end at an exhausted epoch"
                );
            }
        }
    }

    /// The state of `transactional_id` (for tests and DescribeTransactions): state name,
    /// producer id and epoch, partitions.
    pub fn describe(
        &self,
        transactional_id: &str,
    ) -> Option<(TxnState, i64, i16, Vec<TopicPartition>)> {
        self.txns.get(transactional_id).map(|t| {
            (
                t.state,
                t.producer_id,
                t.producer_epoch,
                t.partitions.iter().cloned().collect(),
            )
        })
    }
}
