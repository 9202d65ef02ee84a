//! The broker's own configuration, read from Kafka's `server.properties` keys.
//!
//! - [`keys`]: every broker key, declared once (type, range, default, dynamic or not, whether
//!   Weir uses it, its doc); the other pieces read it.
//! - [`parse`]: the file's entries to a [`ServerConfig`]; [`groups`] and [`topic_defaults`]
//!   hold the parts with rules of their own, [`roles`] KRaft's checks between roles, listeners
//!   and the quorum.
//! - [`readme`]: README.md's broker key table, generated from [`keys`].

mod groups;
pub mod keys;
mod parse;
#[cfg(test)]
mod readme;
mod roles;
mod security;
#[cfg(test)]
mod tests;
pub(super) mod topic_defaults;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::group_configs::GroupConfigBounds;
use super::topic::{TopicConfig, FIELDS};
use super::ConfigError;
use super::{Endpoint, Voter};
pub use parse::{check, per_ip_overrides};
pub use security::{ListenerSecurity, Outbound, SecurityProtocol};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Broker,
    Controller,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Broker => "broker",
            Role::Controller => "controller",
        })
    }
}

/// The validated broker configuration. Every field is named after its Kafka key (or says
/// which it is); the keys' meaning, range and default are in [`keys::BROKER_KEYS`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub node_id: i32,
    pub process_roles: Vec<Role>,
    pub listeners: Vec<Endpoint>,
    /// Since Kafka 3.9 it may also list controller listeners, so look endpoints up by listener
    /// name. A wildcard host (`0.0.0.0`) is kept as given; the caller decides what to advertise.
    pub advertised_listeners: Vec<Endpoint>,
    pub controller_listener_names: Vec<String>,
    pub inter_broker_listener_name: String,
    /// `None` when unset or blank.
    pub broker_rack: Option<String>,
    /// None (Kafka's default): consumers read from the leader only.
    pub replica_selector: Option<ReplicaSelector>,
    /// The static voters, or the bootstrap servers (ids -1) when no voters are given. Empty means
    /// no quorum is configured: a node with the controller role is then a quorum of one by
    /// itself and needs no controller listener, which is what plain `weir serve` runs.
    pub controller_quorum_voters: Vec<Voter>,
    /// Each listener's protocol and its TLS and SASL settings, by listener name.
    pub listener_security: BTreeMap<String, ListenerSecurity>,
    /// `sasl.mechanism.inter.broker.protocol` (Kafka's default GSSAPI: unset).
    pub sasl_mechanism_inter_broker_protocol: Option<String>,
    /// `sasl.mechanism.controller.protocol`.
    pub sasl_mechanism_controller_protocol: Option<String>,
    pub log_dirs: Vec<String>,
    /// `cordoned.log.dirs` (KIP-1066): paths of `log_dirs`, or `*` alone for all of them.
    pub cordoned_log_dirs: Vec<String>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub delete_topic_enable: bool,
    pub socket_request_max_bytes: usize,
    /// Kafka's -1 ("never") is `u64::MAX`.
    pub connections_max_idle_ms: u64,
    /// Client quota windows (`quota.window.num` of `quota.window.size.seconds`).
    pub quota_window_num: u32,
    pub quota_window_size_seconds: u32,
    /// Connection limits on the client listeners (`max.connections*`).
    pub max_connections: u32,
    pub max_connections_per_ip: u32,
    pub max_connections_per_ip_overrides: BTreeMap<std::net::IpAddr, u32>,
    /// `max.connection.creation.rate` (connections/s, client listeners) and each listener's
    /// own (`listener.name.<l>.max.connection.creation.rate`, by listener name).
    pub max_connection_creation_rate: u32,
    pub listener_connection_creation_rates: BTreeMap<String, u32>,
    pub log_retention_check_interval_ms: u64,
    pub log_flush_offset_checkpoint_interval_ms: u64,
    pub log_flush_scheduler_interval_ms: u64,
    pub offsets_topic_num_partitions: i32,
    pub group_initial_rebalance_delay_ms: u64,
    pub fetch_max_bytes: usize,
    pub replica_fetch_max_bytes: usize,
    pub replica_fetch_response_max_bytes: usize,
    pub replica_fetch_wait_max_ms: u64,
    pub replica_fetch_min_bytes: i32,
    pub replica_fetch_backoff_ms: u64,
    pub producer_id_expiration_ms: i64,
    pub producer_id_expiration_check_interval_ms: u64,
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    pub group_max_size: i32,
    pub group_consumer_session_timeout_ms: i32,
    pub group_consumer_heartbeat_interval_ms: i32,
    pub group_consumer_assignors: Vec<String>,
    pub group_consumer_max_size: i32,
    /// The bounds and defaults of per-group configs (KIP-848's GROUP config resource).
    pub group_config_bounds: GroupConfigBounds,
    pub offsets_retention_minutes: i64,
    pub offsets_retention_check_interval_ms: u64,
    pub offset_metadata_max_bytes: i32,
    pub offsets_topic_replication_factor: i16,
    pub offsets_topic_segment_bytes: i32,
    pub transaction_state_log_num_partitions: i32,
    pub transaction_state_log_replication_factor: i16,
    pub transaction_state_log_min_isr: i32,
    pub transaction_max_timeout_ms: i32,
    pub transaction_abort_interval_ms: i32,
    pub transaction_remove_expired_interval_ms: i32,
    pub transactional_id_expiration_ms: i32,
    /// `transaction.partition.verification.enable` as `server.properties` sets it (a dynamic
    /// value overrides it: `Broker::txn_verification_enabled`).
    pub transaction_partition_verification_enable: bool,
    /// `controller.quorum.election.timeout.ms`.
    pub quorum_election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms`.
    pub quorum_fetch_timeout_ms: u64,
    /// `metadata.log.max.record.bytes.between.snapshots`.
    pub metadata_snapshot_max_bytes: u64,
    /// `metadata.log.max.snapshot.interval.ms`.
    pub metadata_snapshot_interval_ms: u64,
    pub broker_heartbeat_interval_ms: u64,
    pub broker_session_timeout_ms: u64,
    pub replica_lag_time_max_ms: i64,
    pub auto_leader_rebalance_enable: bool,
    pub leader_imbalance_check_interval_seconds: u64,
    /// The broker-wide default of the topic key, which the controller starts with.
    pub unclean_leader_election_enable: bool,
    /// `unclean.recovery.manager.enabled` (KIP-966 part 2).
    pub unclean_recovery_manager_enabled: bool,
    /// `unclean.recovery.timeout.ms`.
    pub unclean_recovery_timeout_ms: i64,
    /// `weir.fsync.before.ack`.
    pub fsync_before_ack: bool,
    /// `weir.metrics.address`: where the Prometheus endpoint listens; `None`: it is off.
    pub metrics_address: Option<(String, u16)>,
    /// The `log.cleaner.*` keys (log compaction).
    pub log_cleaner: CleanerSettings,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
    pub authorizer: AuthorizerConfig,
    /// Simulator and unit tests only: a known bug to plant (set by code, never read from a
    /// file). Absent from production builds; check it with `planted!`.
    #[cfg(any(madsim, test, feature = "planted"))]
    pub planted_bug: Option<super::PlantedBug>,
    /// Simulator and unit tests only: the fault points armed in this broker and their chances
    /// (`fault_points.rs`; set by code, all off by default).
    #[cfg(any(madsim, test))]
    pub fault_points: super::FaultPoints,
    /// Broker-wide topic defaults, from the `log.*` keys (`log.retention.ms`,
    /// `log.segment.bytes`…).
    pub topic_defaults: TopicConfig,
}

/// The log cleaner's broker keys (Kafka's `CleanerConfig`). The per-topic keys
/// (`min.cleanable.dirty.ratio`, `min.compaction.lag.ms`, `max.compaction.lag.ms`,
/// `delete.retention.ms`) are topic configs, with `log.cleaner.*` broker defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerSettings {
    pub enable: bool,
    /// Accepted, but Weir runs one cleaner task whatever the value: the broker's disk work is
    /// single-threaded page-cache I/O, so more tasks would only interleave.
    pub threads: i32,
    /// The offset map's memory bound per pass, all threads together (Kafka splits it across
    /// threads; one task gets it all).
    pub dedupe_buffer_size: u64,
    pub backoff_ms: u64,
    /// Reads plus writes; `f64::MAX` is unlimited.
    pub io_max_bytes_per_second: f64,
}

/// The ACL authorizer's keys. Empty `authorizer.class.name` (Kafka's default) means no
/// authorizer: everything is allowed and the ACL APIs answer SECURITY_DISABLED.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthorizerConfig {
    /// Whether `authorizer.class.name` names Kafka's StandardAuthorizer (the only one Weir has).
    pub enabled: bool,
    /// `super.users`: principals (`User:admin`) always allowed, `;`-separated in the file.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found` (default false): allow an action on a resource no ACL
    /// names at all.
    pub allow_everyone_if_no_acl_found: bool,
}

/// Kafka's KRaft authorizer, the one value of `authorizer.class.name` Weir implements.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// Kafka's rack-aware `replica.selector.class`, the one selector Weir implements.
pub const RACK_AWARE_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// A `replica.selector.class` Weir implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaSelector {
    /// Kafka's `RackAwareReplicaSelector`: the leader if it is in the consumer's rack (or no
    /// replica is), else the most caught-up in-sync replica in that rack.
    RackAware,
}

impl ServerConfig {
    /// Builds and validates the configuration from `server.properties` entries. Returns the
    /// warnings (unknown keys) for the caller to log.
    pub fn from_properties(
        props: &BTreeMap<String, String>,
    ) -> Result<(ServerConfig, Vec<String>), ConfigError> {
        parse::parse(props).map(|(config, warnings, _)| (config, warnings))
    }

    /// What plain `weir serve` runs: a combined broker and controller on 127.0.0.1:9092.
    pub fn default_single_node() -> ServerConfig {
        // Cannot fail: the defaults are checked by the `defaults` test.
        match ServerConfig::from_properties(&BTreeMap::new()) {
            Ok((config, _)) => config,
            Err(e) => unreachable!("default configuration is invalid: {e}"),
        }
    }

    pub fn is_controller(&self) -> bool {
        self.process_roles.contains(&Role::Controller)
    }

    /// Whether the quorum names nodes other than this one: then the nodes must agree on a
    /// cluster id, so the data directory must be formatted (`weir format`) before the first
    /// start. A node that is its own quorum of one (no voters, or only itself) formats itself.
    /// `controller.quorum.bootstrap.servers` alone (dynamic quorums, ids unknown) is run as a
    /// quorum of one: Weir's quorum has static voters only.
    pub fn needs_formatting(&self) -> bool {
        self.controller_quorum_voters
            .iter()
            .any(|v| v.id >= 0 && v.id != self.node_id)
    }

    /// Whether the metadata quorum has more than this node: the quorum driver runs.
    pub fn is_clustered(&self) -> bool {
        self.needs_formatting()
    }

    pub fn is_broker(&self) -> bool {
        self.process_roles.contains(&Role::Broker)
    }

    /// The listener other nodes reach this node's controller on (the first controller
    /// listener in `listeners`).
    pub fn controller_endpoint(&self) -> Option<Endpoint> {
        self.listeners
            .iter()
            .find(|e| self.controller_listener_names.contains(&e.listener_name))
            .cloned()
    }

    /// The security of listener `name` (PLAINTEXT for a name not configured).
    pub fn security_of(&self, name: &str) -> ListenerSecurity {
        self.listener_security
            .get(name)
            .cloned()
            .unwrap_or_else(ListenerSecurity::plaintext)
    }

    /// How this node dials the other brokers' inter-broker listener (replica fetches,
    /// transaction markers).
    pub fn inter_broker_outbound(&self) -> Result<Outbound, ConfigError> {
        let name = &self.inter_broker_listener_name;
        security::outbound(
            name,
            &self.security_of(name),
            "sasl.mechanism.inter.broker.protocol",
            self.sasl_mechanism_inter_broker_protocol.as_deref(),
        )
    }

    /// How this node dials the controllers' listener (the quorum, broker sessions, forwarded
    /// requests): the first of `controller.listener.names`, as Kafka's clients of it use.
    pub fn controller_outbound(&self) -> Result<Outbound, ConfigError> {
        let name = self
            .controller_listener_names
            .first()
            .cloned()
            .unwrap_or_default();
        security::outbound(
            &name,
            &self.security_of(&name),
            "sasl.mechanism.controller.protocol",
            self.sasl_mechanism_controller_protocol.as_deref(),
        )
    }

    /// A node in a cluster must be able to log in to the listeners it dials: the mechanism
    /// and credentials are checked at start, not at the first failed connection.
    fn check_listener_security(&self) -> Result<(), ConfigError> {
        if !self.is_clustered() {
            return Ok(());
        }
        self.controller_outbound()?;
        if self.is_broker() {
            self.inter_broker_outbound()?;
        }
        Ok(())
    }

    /// The listeners that serve clients, i.e. all but the controller listeners.
    pub fn broker_endpoints(&self) -> Vec<Endpoint> {
        self.listeners
            .iter()
            .filter(|e| !self.controller_listener_names.contains(&e.listener_name))
            .cloned()
            .collect()
    }

    /// The supported broker keys with their effective values, as DescribeConfigs reports them    /// The broker keys DescribeConfigs reports with their effective values (the table's rows
    /// that say how to show them, and the topic defaults). Sorted by key.
    pub fn broker_config_entries(&self) -> Vec<(String, String)> {
        let mut entries: Vec<(String, String)> = keys::BROKER_KEYS
            .iter()
            .filter_map(|k| Some((k.name.to_string(), (k.show?)(self)?)))
            .chain(
                FIELDS
                    .iter()
                    .map(|&(_, key, field)| (key.to_string(), self.topic_defaults.render(field))),
            )
            .collect();
        entries.sort();
        entries
    }
}

/// Every broker key Weir knows from `server.properties`: the table's and the topic defaults'.
pub(super) fn known_keys() -> BTreeSet<&'static str> {
    keys::BROKER_KEYS
        .iter()
        .filter(|k| k.weir != keys::Weir::Stores)
        .map(|k| k.name)
        .chain(FIELDS.iter().map(|f| f.1))
        .collect()
}
