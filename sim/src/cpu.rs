//! CPU time of the calling thread, for the speed figures: on a shared machine a run's wall time
//! measures its neighbours as much as the simulator, its CPU time only the simulator.

/// Seconds this thread has spent on a CPU (Linux's `/proc/thread-self/schedstat`, read by the
/// harness outside any simulation), `None` where that is not available.
pub fn thread_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}
