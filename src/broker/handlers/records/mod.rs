//! Records in and out: Produce and InitProducerId, Fetch and ListOffsets,
//! OffsetForLeaderEpoch, DeleteRecords.

pub(crate) mod delete_records;
pub(crate) mod fetch;
pub(crate) mod offset_for_leader_epoch;
pub(crate) mod produce;
pub(crate) mod replication_throttle;
