//! The coordinator's read-only answers for KIP-664's tooling: DescribeTransactions (one id's
//! state) and ListTransactions (the ids this coordinator holds, filtered as Kafka's
//! `TransactionStateManager.listTransactionStates` filters). They change nothing, so they are
//! plain queries on the core rather than events.

use super::{Held, TxnCoordinator};
use crate::txn::{TopicPartition, TxnError, TxnState};

/// One transactional id as DescribeTransactions shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnDescription {
    pub state: TxnState,
    pub timeout_ms: i32,
    /// When the current (or last) transaction began; -1 when none has since InitProducerId.
    pub start_ms: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The partitions of the open transaction (those still awaiting markers in Prepare*).
    pub partitions: Vec<TopicPartition>,
}

/// One row of ListTransactions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnListing {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

/// ListTransactions' filters (v0 states and producer ids, v1 duration). An empty list does not
/// filter; `states: Some(empty)` (only names this coordinator has no such state for) matches
/// nothing, as in Kafka.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListFilter {
    pub states: Option<Vec<TxnState>>,
    pub producer_ids: Vec<i64>,
    /// Only transactions running longer than this (ms); negative: all.
    pub min_duration_ms: i64,
}

impl TxnCoordinator {
    /// DescribeTransactions for one id: the gate's error, TRANSACTIONAL_ID_NOT_FOUND for an id
    /// this coordinator does not know, else its current state.
    pub fn describe_transaction(&self, transactional_id: &str) -> Result<TxnDescription, TxnError> {
        self.gate(transactional_id)?;
        let txn = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::TransactionalIdNotFound)?;
        Ok(TxnDescription {
            state: txn.state,
            timeout_ms: txn.timeout_ms,
            start_ms: txn.start_ms,
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            partitions: txn.partitions.iter().cloned().collect(),
        })
    }

    /// ListTransactions: every id of every loaded partition that passes `filter`, by id.
    /// COORDINATOR_LOAD_IN_PROGRESS while any partition is still loading (as Kafka: a partial
    /// list would hide transactions).
    pub fn list_transactions(
        &self,
        now: i64,
        filter: &ListFilter,
    ) -> Result<Vec<TxnListing>, TxnError> {
        if self
            .held
            .values()
            .any(|h| matches!(h, Held::Loading { .. }))
        {
            return Err(TxnError::CoordinatorLoadInProgress);
        }
        let listed = self
            .txns
            .iter()
            .filter(|(_, t)| {
                filter.producer_ids.is_empty() || filter.producer_ids.contains(&t.producer_id)
            })
            .filter(|(_, t)| filter.states.as_ref().is_none_or(|s| s.contains(&t.state)))
            .filter(|(_, t)| {
                filter.min_duration_ms < 0
                    || now.saturating_sub(t.start_ms) > filter.min_duration_ms
            })
            .map(|(id, t)| TxnListing {
                transactional_id: id.clone(),
                producer_id: t.producer_id,
                state: t.state,
            })
            .collect();
        Ok(listed)
    }
}
