//! Consumer groups: the classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
//! and committed offsets, as a pure state machine in the shape of raft-rs / quinn-proto.
//!
//! [`Coordinator`] takes events (a request with an id, a tick with `now`, an offsets-log append
//! that completed or failed, records replayed from the log) and returns [`Action`]s: answer a
//! request, or append records to a `__consumer_offsets` partition. Parked requests (a JoinGroup
//! waiting for the rebalance, a SyncGroup waiting for the leader) are answered by later
//! actions. There is no I/O, clock, randomness or async here: `now` and the randomness for new
//! member ids come in with the events, and the broker's driver (`broker::coordinator`) does the
//! appends, fsyncs, timers and the waiting.
//!
//! State changes that must survive a restart (commits, assignments, deletes) take effect, and
//! are answered, only when the driver reports the append committed.

pub mod consumer;
mod coordinator;
mod member;
pub mod placement;
pub mod records;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;
mod types;

pub use coordinator::{Coordinator, Event, GroupConfig, MAX_MEMBERS};
pub use placement::partition_for;
pub use types::*;

/// The internal topic holding commits and group metadata (Kafka's name and layout).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
