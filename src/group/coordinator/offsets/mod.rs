//! Committed offsets (Kafka's `OffsetMetadataManager`): OffsetCommit, OffsetFetch,
//! OffsetDelete and retention, sharing one map per group whichever protocol the group speaks.

mod commit;
mod delete;
mod expire;
mod fetch;
pub(super) mod txn;
