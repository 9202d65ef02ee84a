//! The deterministic simulator: the unchanged Weir broker on madsim, with our own simulated disk,
//! a nemesis, a workload of real-protocol clients, and a checker. See `docs/SIMULATION.md`.
//!
//! The scenario format, the history and the checker are plain code (tested in any build); the
//! parts that drive madsim exist only under `--cfg madsim` (use `cargo sim`).

#[cfg(madsim)]
pub mod admin;
pub mod admin_errors;
pub mod aimed;
pub mod beyond_promise;
pub mod buggify;
pub mod checker;
#[cfg(madsim)]
pub mod clock;
#[cfg(madsim)]
pub mod consumer_workload;
pub mod coverage;
pub mod cpu;
pub mod delete_check;
pub mod delivery_check;
pub mod group_check;
#[cfg(madsim)]
pub mod group_route;
#[cfg(madsim)]
pub mod group_workload;
pub mod history;
pub mod history_file;
pub mod html;
#[cfg(not(madsim))]
pub mod jepsen;
pub mod metadata_check;
pub mod partition_trace;
#[cfg(madsim)]
pub mod probes;
pub mod produce_errors;
pub mod producer;
pub mod progress;
pub mod quorum_check;
pub mod read_back;
#[cfg(madsim)]
pub mod reassigner;
#[cfg(madsim)]
pub mod record_deleter;
pub mod replica_check;
pub mod report;
pub mod routing;
pub mod scenario;
pub mod shrink;
pub mod swarm;
pub mod txn_check;
pub mod txn_pipeline;
pub mod txn_workload;
pub mod validating_consumer;
pub mod verdict;
pub mod workload;

#[cfg(madsim)]
pub mod disk;
#[cfg(madsim)]
pub mod embed;
#[cfg(madsim)]
pub mod nemesis;
#[cfg(madsim)]
pub mod replica_read;
#[cfg(madsim)]
pub mod sweep;
#[cfg(madsim)]
pub mod world;
