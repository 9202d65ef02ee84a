//! The bounds on waiters and how a wait ends: what every part of `delayed` and its callers
//! share.

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
