//! Partition replica state: the log plus what the protocol keeps beside it (high watermark,
//! idempotent-producer state). Plain state machines: no sockets, no waiting.

pub mod dir_move;
pub mod fetcher;
pub mod isr;
pub mod key;
pub mod partition;
pub mod producer;
pub mod read_replica;
pub mod transactions;
pub mod validation;

pub use partition::{
    Appended, DeleteRecordsError, EpochRefusal, FollowerAppendError, FollowerAppended,
    LeaderRefused, LeaderView, Partition, ProduceError, Role, StaleLeaderEpoch, TruncateError,
    TruncationPlan, DEFAULT_REPLICA_LAG_TIME_MAX_MS,
};
