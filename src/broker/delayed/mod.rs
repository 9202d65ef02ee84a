//! Delayed operations, per partition (Kafka's purgatory idea): a request that must wait for
//! something to happen to a partition parks a waiter in that partition's own lists, and only
//! that partition's events wake it. Nothing here is broker-wide except the bound on waiters.
//!
//! - An acks=all produce waits until the partition's high watermark reaches the offset after
//!   its batch ([`PartitionWaiters::reserve_produce`], [`ProduceWait`]).
//! - A long-polling fetch registers one waiter per partition it reads, all sharing the
//!   request's own [`FetchWake`]; any of them wakes the request, which re-reads and answers
//!   once `min_bytes` is reached across them or its `max_wait_ms` passes.
//!
//! Events come from [`PartitionWaiters::observe`] (the broker calls it, under the partition
//! lock, whenever the partition was changed: appends, high-watermark moves, truncation, log
//! start moves) and from [`PartitionWaiters::close`] / [`PartitionWaiters::leadership_lost`].
//! Because events are delivered under the partition lock, a waiter registered under that lock
//! (produce) sees every later event; a fetch registers before it reads, so an event either
//! comes after the registration (and wakes it) or before the read (which sees its effect).
//!
//! Every wait has a deadline on the `io` clock, and ends early when the request's connection
//! goes away ([`ConnectionGone`]). Waiters are bounded per partition and in total
//! ([`WaitBudget`]); past a bound the registration fails with [`WaitError::Full`].

mod connection;
mod lists;
mod wait;

#[cfg(test)]
mod tests;

pub use connection::{ConnectionGone, ConnectionWatch};
pub use lists::{
    FetchRegistration, FetchWake, Isolation, Observed, PartitionWaiters, ProduceReservation,
    ProduceWait, WaitBudget, WaiterCounts,
};
pub use wait::{wait_fetch, wait_produce};

/// Waiters one partition may hold, of each kind. A connection handles one request at a time,
/// so this is only reached with thousands of connections on one partition.
pub const MAX_WAITERS_PER_PARTITION: usize = 10_000;
/// Waiters all partitions together may hold.
pub const MAX_WAITERS: usize = 100_000;

/// How a satisfied produce wait ended: the high watermark passed the required offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Committed {
    /// With at least `min.insync.replicas` in the (maximal) in-sync set.
    InSync,
    /// The in-sync set had shrunk below `min.insync.replicas` by then: the records are logged
    /// (and likely committed), answered NOT_ENOUGH_REPLICAS_AFTER_APPEND as Kafka does.
    BelowMinIsr,
}

/// Why a partition takes no more waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// Its topic was deleted.
    Deleted,
    /// The log directory went offline.
    Offline,
    /// The broker is shutting down.
    ShuttingDown,
}

/// Why a wait ended without its condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitError {
    /// The deadline (the produce's `timeout_ms`) passed.
    TimedOut,
    /// This broker stopped leading the partition while the produce waited.
    NotLeader,
    /// The partition closed.
    Closed(Closed),
    /// The request's connection went away: nobody is left to answer.
    Cancelled,
    /// A bound on waiters was reached; the message names it.
    Full(String),
}
