//! Transactions (KIP-98, served as transactions v1 with KIP-890 part 1's verification, and
//! transactions v2 of KIP-890 part 2 for clients that speak it): the
//! transaction coordinator as a pure core (`coordinator`), its `__transaction_state` records
//! (`records`). The partition side (markers, LSO, aborted index) lives with the producer state
//! in `crate::replica`; the driver that does the I/O is `broker::drivers::txn_coordinator`.

pub mod add_batches;
pub mod coordinator;
pub mod records;
#[cfg(test)]
mod tests;

pub use coordinator::describe::{ListFilter, TxnDescription, TxnListing};
pub use coordinator::{Action, Event, Reply, TxnConfig, TxnCoordinator};

/// The internal topic holding every transactional id's state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Which `__transaction_state` partition owns `transactional_id`: the same hash as groups.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::group::placement::partition_for(transactional_id, partitions)
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.to_string(),
            partition,
        }
    }
}

/// Kafka's transaction states, with their persisted ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            _ => return None,
        })
    }

    /// Kafka's name (DescribeTransactions, ListTransactions).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    /// The state of Kafka's `name`; `None` for names Weir has no such state for (including
    /// Kafka's `Dead` and `PrepareEpochFence`, which a listing never shows here).
    pub fn from_name(name: &str) -> Option<TxnState> {
        use TxnState::*;
        [
            Empty,
            Ongoing,
            PrepareCommit,
            PrepareAbort,
            CompleteCommit,
            CompleteAbort,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }

    /// The states a transition to `self` may come from (Kafka's `validPreviousStates`, TV1).
    pub fn may_follow(self, previous: TxnState) -> bool {
        use TxnState::*;
        match self {
            Empty => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(previous, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => previous == Ongoing,
            PrepareAbort => previous == Ongoing,
            CompleteCommit => previous == PrepareCommit,
            CompleteAbort => previous == PrepareAbort,
        }
    }

    /// Transactions v2 also lets an abort begin from a transaction that is not open (Empty or
    /// Complete*): an abort with no partitions, which still bumps the epoch (KIP-890).
    pub fn may_follow_in_v2(self, previous: TxnState) -> bool {
        use TxnState::*;
        self.may_follow(previous)
            || (self == PrepareAbort && matches!(previous, Empty | CompleteCommit | CompleteAbort))
    }
}

/// Errors the coordinator answers with (Kafka's codes; the handlers map them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnError {
    NotCoordinator,
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    ProducerFenced,
    InvalidTxnState,
    InvalidTransactionTimeout,
    /// KIP-890 verification: the partition is not in the transaction.
    NotInTransaction,
    /// DescribeTransactions: the coordinator does not know the id.
    TransactionalIdNotFound,
}
