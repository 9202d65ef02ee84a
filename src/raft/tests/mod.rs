//! Tests of the quorum core without a runtime: rule-by-rule scripts (`rules.rs`) and a
//! deterministic in-process cluster (`cluster.rs`) with planted bugs it must catch
//! (`planted.rs`).

mod cluster;
mod garbage;
mod planted;
mod rules;
mod snapshots;
