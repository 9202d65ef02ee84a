//! EndTxn v5: the end of a transaction under transactions v2 (KIP-890 part 2). Every end bumps
//! the producer epoch (the Prepare* record carries epoch+1 and so do the markers), so a request
//! of the ended transaction — a delayed Produce or EndTxn, KAFKA-17754 — names an epoch the
//! coordinator and the partitions no longer accept. The answer carries the producer id and
//! epoch the client goes on with. At an exhausted epoch the bump reaches `i16::MAX` internally
//! and the producer id rotates to a reserved one at epoch 0 once the transaction is complete.
//!
//! Which requests are retries follows from the bump: a retry names the epoch one below the
//! stored one (or, after a rotation, the previous id at the last client-visible epoch); the
//! current epoch names the next transaction. An abort may begin from a transaction that is not
//! open (Empty, Complete*): it has no partitions but still bumps, so an unsure client can
//! always abort.

use super::{Action, Reply, RequestId, Txn, TxnCoordinator, EPOCH_EXHAUSTED};
use crate::txn::{TxnError, TxnState};

impl TxnCoordinator {
    /// Whether a v2 end of `transactional_id` now would exhaust its epoch, so the driver must
    /// reserve a producer id for the rotation before sending EndTxn.
    pub fn needs_fresh_producer_id(&self, transactional_id: &str) -> bool {
        self.txns
            .get(transactional_id)
            .is_some_and(|t| t.producer_epoch >= EPOCH_EXHAUSTED)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn end_txn_v2(
        &mut self,
        now: i64,
        request: RequestId,
        transactional_id: &str,
        (producer_id, epoch): (i64, i16),
        commit: bool,
        fresh_producer_id: i64,
        out: &mut Vec<Action>,
    ) {
        let answer = |reply| Action::Respond(request, reply);
        if let Err(e) = self.gate(transactional_id) {
            return out.push(answer(Reply::Error(e)));
        }
        let Some(txn) = self
            .txns
            .get(transactional_id)
            .filter(|t| t.producer_epoch >= 0)
            .cloned()
        else {
            return out.push(answer(Reply::Error(TxnError::InvalidProducerIdMapping)));
        };
        let retry_on_overflow = txn.previous_producer_id == producer_id
            && txn.previous_producer_id >= 0
            && epoch == EPOCH_EXHAUSTED
            && txn.producer_epoch == 0;
        let retry_on_bump =
            txn.producer_id == producer_id && i32::from(txn.producer_epoch) == i32::from(epoch) + 1;
        if txn.producer_id != producer_id && !retry_on_overflow {
            // The id a rotation under way moves to at Complete*: the client, answered it at
            // Prepare*, is already on it and waits for the markers.
            let error = if txn.next_producer_id >= 0 && txn.next_producer_id == producer_id {
                TxnError::ConcurrentTransactions
            } else {
                TxnError::InvalidProducerIdMapping
            };
            return out.push(answer(Reply::Error(error)));
        }
        use TxnState::*;
        let current = epoch == txn.producer_epoch && txn.producer_id == producer_id;
        let valid = match txn.state {
            Ongoing | Empty => current,
            PrepareCommit | PrepareAbort => retry_on_bump,
            CompleteCommit | CompleteAbort => retry_on_bump || retry_on_overflow || current,
        };
        if !valid {
            return out.push(answer(Reply::Error(TxnError::ProducerFenced)));
        }
        // Kafka's order (`handleEndTransaction`): the producer id, the epoch, and only then a
        // transition in flight — a fenced producer learns it is fenced, not to retry.
        if txn.pending.is_some() {
            return out.push(answer(Reply::Error(TxnError::ConcurrentTransactions)));
        }
        let retry = retry_on_bump || retry_on_overflow;
        let now_answer = |txn: &Txn| Reply::ProducerId {
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
        };
        let reply = match (txn.state, commit) {
            (Ongoing, _) => {
                return self.prepare_end_v2(
                    now,
                    request,
                    transactional_id,
                    txn,
                    commit,
                    false,
                    fresh_producer_id,
                    out,
                )
            }
            (CompleteCommit, true) | (CompleteAbort, false) if retry => now_answer(&txn),
            (CompleteCommit | CompleteAbort | Empty, false) if !retry => {
                return self.prepare_end_v2(
                    now,
                    request,
                    transactional_id,
                    txn,
                    false,
                    true,
                    fresh_producer_id,
                    out,
                )
            }
            (PrepareCommit, true) | (PrepareAbort, false) => {
                Reply::Error(TxnError::ConcurrentTransactions)
            }
            _ => Reply::Error(TxnError::InvalidTxnState),
        };
        out.push(answer(reply));
    }

    /// Persists PrepareCommit/PrepareAbort at epoch+1; the answer, once it is committed, is the
    /// producer id and epoch the client goes on with.
    #[allow(clippy::too_many_arguments)]
    fn prepare_end_v2(
        &mut self,
        now: i64,
        request: RequestId,
        transactional_id: &str,
        txn: Txn,
        commit: bool,
        no_partitions: bool,
        fresh_producer_id: i64,
        out: &mut Vec<Action>,
    ) {
        let exhausted = txn.producer_epoch >= EPOCH_EXHAUSTED;
        if exhausted && fresh_producer_id < 0 {
            // The driver did not know it needed one: the client retries.
            return out.push(Action::Respond(
                request,
                Reply::Error(TxnError::ConcurrentTransactions),
            ));
        }
        let mut next = txn.clone();
        next.v2 = true;
        next.producer_epoch = txn.producer_epoch.saturating_add(1);
        next.last_epoch = txn.producer_epoch;
        #[cfg(any(madsim, test))]
        if self
            .config
            .planted
            .is(crate::config::PlantedBug::TxnV2NoEpochBump)
        {
            // The tooth: v1's epoch across the end, so nothing tells the next transaction
            // from a late request of this one.
            next.producer_epoch = txn.producer_epoch;
            next.last_epoch = txn.last_epoch;
        }
        next.next_producer_id = if exhausted { fresh_producer_id } else { -1 };
        next.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if no_partitions {
            // No transaction is open: the start is now (Kafka needs one for the record).
            next.partitions.clear();
            next.start_ms = now;
        }
        next.last_update_ms = now;
        let reply = if exhausted {
            Reply::ProducerId {
                producer_id: fresh_producer_id,
                producer_epoch: 0,
            }
        } else {
            Reply::ProducerId {
                producer_id: next.producer_id,
                producer_epoch: next.producer_epoch,
            }
        };
        self.persist(transactional_id, next, Some((request, reply)), out);
    }
}
