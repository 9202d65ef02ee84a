//! Tests of the quorum core without a runtime: rule-by-rule scripts (`rules.rs`) and a
//! deterministic in-process cluster (`cluster.rs`) with planted bugs it must catch
//! (`planted.rs`), and directed schedules (`directed.rs`: Raft's figure 8 and two candidates of
//! one epoch, step by step) for the bugs random schedules rarely meet.

mod cluster;
mod directed;
mod garbage;
mod planted;
mod rules;
mod snapshots;
