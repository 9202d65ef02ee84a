//! The planted bug of the current simulated run, for plant sites below the broker (the log,
//! the replica, the metadata store) that no [`ServerConfig`](super::ServerConfig) reaches:
//! threading a test-only switch through every constructor would widen production signatures
//! for nothing. Simulation only (`cfg(madsim)`): the production binary has no such switch.
//!
//! It is per thread, and that is per run: madsim runs a whole simulated world (every broker
//! node and every client) on one thread, and the simulator gives each seed a fresh thread.

use std::cell::Cell;

use super::PlantedBug;

thread_local! {
    static ACTIVE: Cell<Option<PlantedBug>> = const { Cell::new(None) };
}

/// Sets the bug planted for the run on this thread (`None`: a correct broker).
pub fn set(bug: Option<PlantedBug>) {
    ACTIVE.with(|a| a.set(bug));
}

/// Whether `bug` is planted in the run on this thread.
pub fn active(bug: PlantedBug) -> bool {
    ACTIVE.with(|a| a.get()) == Some(bug)
}
