//! Weir: a Kafka-compatible message broker built to be tested by deterministic simulation.
//!
//! Layering, top to bottom (a layer may only use the ones below it):
//! `main.rs` (CLI) → [`broker`] (wire protocol, request handling) → [`replica`], [`controller`],
//! [`group`], [`raft`] (protocol state machines) → [`log`] (segmented log) → [`io`] (effects
//! behind traits). [`acl`] (the authorizer) and [`config`] are leaves the layers above use.
//! [`metrics`] (counters and the Prometheus endpoint) is a leaf the broker uses.
//! [`client`] is a Kafka client used by the CLI, the bench and the simulator's workloads.
//! See `docs/ARCHITECTURE.md`.

pub mod acl;
pub mod bench;
pub mod broker;
pub mod client;
pub mod config;
pub mod controller;
#[cfg(test)]
mod data_driven;
pub mod group;
pub mod io;
pub mod local_cluster;
pub mod log;
pub mod metrics;
pub mod protocol;
pub mod quota;
pub mod raft;
pub mod replica;
pub mod security;
pub mod sync;
pub mod txn;
