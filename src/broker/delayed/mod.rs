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
mod outcome;
mod wait;

#[cfg(test)]
mod tests;

pub use connection::{ConnectionGone, ConnectionWatch};
pub use lists::{
    FetchRegistration, FetchWake, Isolation, Observed, PartitionWaiters, ProduceReservation,
    ProduceWait, WaitBudget, WaiterCounts,
};
pub use outcome::{Closed, Committed, WaitError, MAX_WAITERS, MAX_WAITERS_PER_PARTITION};
pub use wait::{wait_fetch, wait_produce};
