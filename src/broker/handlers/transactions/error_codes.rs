//! Coordinator errors in the codes each client version expects: one table for the handlers of
//! `transactions` and the broker-to-broker implicit add.

use kafka_protocol::error::ResponseError;

use crate::txn::TxnError;

/// A coordinator error as the client's version expects it (PRODUCER_FENCED is
/// INVALID_PRODUCER_EPOCH before InitProducerId v4 and EndTxn / AddPartitionsToTxn /
/// AddOffsetsToTxn v2).
pub(super) fn code(e: TxnError, fenced_since: i16, version: i16) -> ResponseError {
    match e {
        TxnError::NotCoordinator => ResponseError::NotCoordinator,
        TxnError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::ProducerFenced if version < fenced_since => ResponseError::InvalidProducerEpoch,
        TxnError::ProducerFenced => ResponseError::ProducerFenced,
        TxnError::InvalidTxnState | TxnError::NotInTransaction => ResponseError::InvalidTxnState,
        TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
        TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
    }
}
