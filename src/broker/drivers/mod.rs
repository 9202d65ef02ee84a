//! The drivers of the cores: each runs one protocol core (or a loop of the broker's own) and
//! does its I/O. The quorum (`quorum`, with `quorum_status`), the follower's replica fetchers
//! (`replica_fetcher`), the leader's ISR driver (`isr`), the group coordinator's driver
//! (`group_coordinator`), the transaction coordinator's (`txn_coordinator`) and what those two
//! share about their internal topics (`internal_topics`), the active controller's core (its
//! broker sessions, producer-id cursor and timers: `active_controller`), this broker's own
//! session with the controller (`broker_session`), the metrics endpoint and its scrapes
//! (`metrics_endpoint`, `metrics_scrape`), the log cleaner (`cleaning`), replicas moving
//! between log directories (`dir_mover`) and the local partitions' reconciliation
//! with the image (`reconcile`). Handlers call into them; they never import a handler's
//! module at the top level.

pub(crate) mod active_controller;
pub(crate) mod broker_session;
pub(crate) mod cleaning;
pub(crate) mod dir_mover;
pub(crate) mod group_coordinator;
pub(crate) mod internal_topics;
pub(crate) mod isr;
pub(crate) mod metrics_endpoint;
pub(crate) mod metrics_scrape;
pub mod quorum;
pub mod quorum_status;
pub(crate) mod reconcile;
pub mod replica_fetcher;
pub(crate) mod txn_coordinator;
