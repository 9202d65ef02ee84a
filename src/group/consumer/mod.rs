//! The consumer group protocol (KIP-848, `ConsumerGroupHeartbeat`): the coordinator assigns
//! partitions itself (server-side assignors) and each member converges on its target by
//! heartbeats, revoking before anyone else is given what it held.
//!
//! Pure, like the classic core: a [`ConsumerGroup`] takes a heartbeat (with `now` and the topics
//! of the metadata image) and answers it at once; timers (session, rebalance) are polled with
//! [`ConsumerGroup::expire`]. The classic coordinator holds a `ConsumerGroup` inside its group
//! entry, so both protocols share one group namespace and one committed-offsets store.
//!
//! Invariant (checked after every change): a partition is in at most one member's assigned or
//! pending-revocation set, and every member's epoch is at most the assignment epoch, which is at
//! most the group epoch.
//!
//! Durable (`durable`): every change is appended to `__consumer_offsets` as Kafka's records
//! (group epoch, subscribed-topic metadata, member metadata, target assignment, current
//! assignment) before the heartbeat is answered, and a replay rebuilds the group as it was.

mod assignor;
mod durable;
mod group;
mod heartbeat;
mod reconcile;
mod regex;
#[cfg(test)]
mod tests;
mod types;

pub use assignor::Assignor;
pub use durable::Replay;
pub use group::ConsumerGroup;
pub use types::*;
