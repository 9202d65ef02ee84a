//! Synchronisation primitives whose wake-up order the simulator decides.
//!
//! `tokio::sync::watch` parks each waiting receiver on one of eight `Notify` shards chosen by
//! tokio's thread-local random generator, and wakes the shards in order: which task runs first
//! after a change then depends on that generator, which tokio seeds from a process-wide counter
//! (one step per thread that first uses it). A simulator sweep runs each seed on a fresh thread,
//! so the 32nd run of a sweep and the same seed replayed alone drew different shards, scheduled
//! differently and could reach different verdicts: a failure that its replay command did not
//! reproduce. [`watch`] has tokio's interface and semantics (the subset Weir uses) over one
//! `Notify`, which wakes its waiters first come, first served.
pub mod watch;
