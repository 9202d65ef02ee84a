//! The broker's own configuration, read from Kafka's `server.properties` keys.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::group_configs::GroupConfigBounds;
use super::listener::{
    check_security_protocols, parse_bootstrap_servers, parse_endpoints, parse_listeners,
    parse_names, parse_voters,
};
use super::topic::{Field, TopicConfig, FIELDS};
use super::{invalid, parse_bool, parse_int, parse_list, ConfigError};
use super::{Endpoint, Voter};

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

/// The validated broker configuration. Every field is named after its Kafka key.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// `node.id` (or the older `broker.id`).
    pub node_id: i32,
    /// `process.roles`.
    pub process_roles: Vec<Role>,
    /// `listeners`: what to bind, broker and controller listeners alike.
    pub listeners: Vec<Endpoint>,
    /// `advertised.listeners`: what to tell clients. Defaults to the broker listeners. Since
    /// Kafka 3.9 it may also list controller listeners, so look endpoints up by listener name.
    /// A wildcard host (`0.0.0.0`) is kept as given; the caller decides what to advertise.
    pub advertised_listeners: Vec<Endpoint>,
    /// `controller.listener.names`.
    pub controller_listener_names: Vec<String>,
    /// `inter.broker.listener.name`.
    pub inter_broker_listener_name: String,
    /// `broker.rack`: registered with the controller, reported in Metadata, and matched
    /// against a consumer's `client.rack` by the replica selector. Empty means none.
    pub broker_rack: Option<String>,
    /// `replica.selector.class` (KIP-392): how a leader picks a replica for a consumer to read
    /// from. None (Kafka's default): consumers read from the leader only.
    pub replica_selector: Option<ReplicaSelector>,
    /// `controller.quorum.voters`, or `controller.quorum.bootstrap.servers` (ids -1) when no
    /// voters are given. Empty means no quorum is configured: a node with the controller role is
    /// then a quorum of one by itself and needs no controller listener, which is what plain
    /// `weir serve` runs.
    pub controller_quorum_voters: Vec<Voter>,
    /// `log.dirs`, else `log.dir`.
    pub log_dirs: Vec<String>,
    /// `num.partitions`: for auto-created topics and CreateTopics without a count.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `socket.request.max.bytes`: requests larger than this close the connection, so a bad
    /// length prefix cannot make the broker allocate gigabytes.
    pub socket_request_max_bytes: usize,
    /// `connections.max.idle.ms`; Kafka's -1 ("never") is `u64::MAX`.
    pub connections_max_idle_ms: u64,
    /// `log.retention.check.interval.ms`.
    pub log_retention_check_interval_ms: u64,
    /// `log.flush.offset.checkpoint.interval.ms`: how often recovery points (and producer
    /// state) are checkpointed.
    pub log_flush_offset_checkpoint_interval_ms: u64,
    /// `log.flush.scheduler.interval.ms`: how often `flush.ms` is checked. Kafka defaults to
    /// `Long.MAX_VALUE`, which quietly disables `flush.ms`; Weir checks every 1000 ms instead,
    /// which costs nothing while `flush.ms` is unlimited.
    pub log_flush_scheduler_interval_ms: u64,
    /// `offsets.topic.num.partitions`.
    pub offsets_topic_num_partitions: i32,
    /// `group.initial.rebalance.delay.ms`.
    pub group_initial_rebalance_delay_ms: u64,
    /// `fetch.max.bytes`: the most a fetch response carries, whatever the request asks (it may
    /// still exceed this by its first batch, KIP-74).
    pub fetch_max_bytes: usize,
    /// `replica.fetch.max.bytes`: per partition, what a follower asks for; the leader also caps a
    /// replica's fetch at it.
    pub replica_fetch_max_bytes: usize,
    /// `replica.fetch.response.max.bytes`: the same for a follower's whole response.
    pub replica_fetch_response_max_bytes: usize,
    /// `replica.fetch.wait.max.ms`: how long a follower's fetch may wait at the leader.
    pub replica_fetch_wait_max_ms: u64,
    /// `replica.fetch.min.bytes`: what a follower's fetch waits for at the leader.
    pub replica_fetch_min_bytes: i32,
    /// `replica.fetch.backoff.ms`: a follower's pause after a failed fetch of a partition.
    pub replica_fetch_backoff_ms: u64,
    /// `producer.id.expiration.ms`: an idempotent producer idle this long is forgotten.
    pub producer_id_expiration_ms: i64,
    /// `producer.id.expiration.check.interval.ms`: how often idle producers are looked for.
    pub producer_id_expiration_check_interval_ms: u64,
    /// `group.min.session.timeout.ms`.
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub group_max_session_timeout_ms: i32,
    /// `group.max.size`.
    pub group_max_size: i32,
    /// `group.consumer.session.timeout.ms`: a consumer-protocol (KIP-848) member silent this
    /// long is removed.
    pub group_consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`: how often consumer-protocol members heartbeat.
    pub group_consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`: server-side assignors, the first the default (`uniform`,
    /// `range`, or Kafka's class names for them).
    pub group_consumer_assignors: Vec<String>,
    /// `group.consumer.max.size`.
    pub group_consumer_max_size: i32,
    /// The bounds and defaults of per-group configs (`group.consumer.min.session.timeout.ms`
    /// and the like; KIP-848's GROUP config resource).
    pub group_config_bounds: GroupConfigBounds,
    /// `offsets.retention.minutes`.
    pub offsets_retention_minutes: i64,
    /// `offsets.retention.check.interval.ms`.
    pub offsets_retention_check_interval_ms: u64,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: i32,
    /// `offsets.topic.replication.factor` (clamped to the live brokers when the topic is made).
    pub offsets_topic_replication_factor: i16,
    /// `offsets.topic.segment.bytes`.
    pub offsets_topic_segment_bytes: i32,
    /// `controller.quorum.election.timeout.ms`: election timeouts are drawn from `[T, 2T)`.
    pub quorum_election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms`: a follower that has not heard from its leader for
    /// this long stands for election.
    pub quorum_fetch_timeout_ms: u64,
    /// `metadata.log.max.record.bytes.between.snapshots`: a node snapshots its metadata image
    /// once this many bytes of records were applied since its last snapshot.
    pub metadata_snapshot_max_bytes: u64,
    /// `metadata.log.max.snapshot.interval.ms`: or once this long passed with anything new.
    pub metadata_snapshot_interval_ms: u64,
    /// `broker.heartbeat.interval.ms`: how often a broker heartbeats the active controller.
    pub broker_heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms`: a broker silent this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// `replica.lag.time.max.ms`: an ISR follower not caught up with its leader for this long
    /// is dropped from the ISR.
    pub replica_lag_time_max_ms: i64,
    /// `auto.leader.rebalance.enable`: the active controller moves leadership back to each
    /// partition's preferred replica every `leader.imbalance.check.interval.seconds`.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`.
    pub leader_imbalance_check_interval_seconds: u64,
    /// `unclean.leader.election.enable`: the broker-wide default of the topic key.
    pub unclean_leader_election_enable: bool,
    /// `weir.fsync.before.ack` (Weir's own): fsync, group-committed, before acknowledging a
    /// produce. Off by default because Kafka relies on replication rather than fsync.
    pub fsync_before_ack: bool,
    /// The `log.cleaner.*` keys (log compaction).
    pub log_cleaner: CleanerSettings,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
    pub authorizer: AuthorizerConfig,
    /// Simulator and unit tests only: a known bug to plant (set by code, never read from a
    /// file). Absent from production builds; check it with `planted!`.
    #[cfg(any(madsim, test))]
    pub planted_bug: Option<super::PlantedBug>,
    /// Broker-wide topic defaults, from the `log.*` keys (`log.retention.ms`,
    /// `log.segment.bytes`…).
    pub topic_defaults: TopicConfig,
}

/// The log cleaner's broker keys (Kafka's `CleanerConfig`). The per-topic keys
/// (`min.cleanable.dirty.ratio`, `min.compaction.lag.ms`, `max.compaction.lag.ms`,
/// `delete.retention.ms`) are topic configs, with `log.cleaner.*` broker defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerSettings {
    /// `log.cleaner.enable` (default true).
    pub enable: bool,
    /// `log.cleaner.threads` (default 1). Accepted, but Weir runs one cleaner task whatever the
    /// value: the broker's disk work is single-threaded page-cache I/O, so more tasks would
    /// only interleave.
    pub threads: i32,
    /// `log.cleaner.dedupe.buffer.size` (default 128 MiB): the offset map's memory bound per
    /// pass, all threads together (Kafka splits it across threads; one task gets it all).
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.backoff.ms` (default 15 s): the sleep when no log needs cleaning.
    pub backoff_ms: u64,
    /// `log.cleaner.io.max.bytes.per.second` (default unlimited): reads plus writes.
    pub io_max_bytes_per_second: f64,
}

impl Default for CleanerSettings {
    fn default() -> Self {
        CleanerSettings {
            enable: true,
            threads: 1,
            dedupe_buffer_size: 128 << 20,
            backoff_ms: 15_000,
            io_max_bytes_per_second: f64::MAX,
        }
    }
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

fn authorizer_config(p: &mut Props<'_>) -> Result<AuthorizerConfig, ConfigError> {
    let key = "authorizer.class.name";
    let enabled = match p.get(key).map(str::trim) {
        None | Some("") => false,
        Some(STANDARD_AUTHORIZER) => true,
        Some(other) => {
            return Err(invalid(
                key,
                other,
                format!("Weir implements only {STANDARD_AUTHORIZER} (or empty: no authorizer)"),
            ))
        }
    };
    let mut super_users = Vec::new();
    if let Some(v) = p.get("super.users") {
        for user in v.split(';').map(str::trim).filter(|u| !u.is_empty()) {
            if !user.contains(':') {
                return Err(invalid(
                    "super.users",
                    v,
                    format!("'{user}' is not a principal (Type:name, e.g. User:admin)"),
                ));
            }
            super_users.push(user.to_string());
        }
    }
    Ok(AuthorizerConfig {
        enabled,
        super_users,
        allow_everyone_if_no_acl_found: p.bool("allow.everyone.if.no.acl.found")?.unwrap_or(false),
    })
}

fn cleaner_settings(p: &mut Props<'_>) -> Result<CleanerSettings, ConfigError> {
    let d = CleanerSettings::default();
    let key = "log.cleaner.io.max.bytes.per.second";
    let io_max_bytes_per_second = match p.get(key) {
        None => d.io_max_bytes_per_second,
        Some(v) => match v.trim().parse::<f64>() {
            Ok(r) if r > 0.0 => r,
            _ => return Err(invalid(key, v, "must be a number above 0")),
        },
    };
    Ok(CleanerSettings {
        enable: p.bool("log.cleaner.enable")?.unwrap_or(d.enable),
        threads: p
            .int("log.cleaner.threads", 0, I32_MAX)?
            .map_or(d.threads, |t| t as i32),
        // Kafka's floor: the map must hold at least one entry per thread (1 MiB in practice).
        dedupe_buffer_size: p
            .int("log.cleaner.dedupe.buffer.size", 1024, i64::MAX)?
            .map_or(d.dedupe_buffer_size, |b| b as u64),
        backoff_ms: p
            .int("log.cleaner.backoff.ms", 0, i64::MAX)?
            .map_or(d.backoff_ms, |b| b as u64),
        io_max_bytes_per_second,
    })
}

/// The `group.consumer.min/max.*` and `group.share.*` keys, checked against each other and the
/// broker's own consumer session timeout and heartbeat interval as Kafka's
/// `GroupCoordinatorConfig` checks them at start.
fn group_config_bounds(
    p: &mut Props<'_>,
    consumer_session_timeout_ms: i32,
    consumer_heartbeat_interval_ms: i32,
) -> Result<GroupConfigBounds, ConfigError> {
    let d = GroupConfigBounds::default();
    let mut int = |key: &'static str, min: i64, default: i32| -> Result<i32, ConfigError> {
        Ok(p.int(key, min, I32_MAX)?.map_or(default, |v| v as i32))
    };
    let b = GroupConfigBounds {
        consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms,
        consumer_min_session_timeout_ms: int(
            "group.consumer.min.session.timeout.ms",
            1,
            d.consumer_min_session_timeout_ms,
        )?,
        consumer_max_session_timeout_ms: int(
            "group.consumer.max.session.timeout.ms",
            1,
            d.consumer_max_session_timeout_ms,
        )?,
        consumer_min_heartbeat_interval_ms: int(
            "group.consumer.min.heartbeat.interval.ms",
            1,
            d.consumer_min_heartbeat_interval_ms,
        )?,
        consumer_max_heartbeat_interval_ms: int(
            "group.consumer.max.heartbeat.interval.ms",
            1,
            d.consumer_max_heartbeat_interval_ms,
        )?,
        share_session_timeout_ms: int(
            "group.share.session.timeout.ms",
            1,
            d.share_session_timeout_ms,
        )?,
        share_min_session_timeout_ms: int(
            "group.share.min.session.timeout.ms",
            1,
            d.share_min_session_timeout_ms,
        )?,
        share_max_session_timeout_ms: int(
            "group.share.max.session.timeout.ms",
            1,
            d.share_max_session_timeout_ms,
        )?,
        share_heartbeat_interval_ms: int(
            "group.share.heartbeat.interval.ms",
            1,
            d.share_heartbeat_interval_ms,
        )?,
        share_min_heartbeat_interval_ms: int(
            "group.share.min.heartbeat.interval.ms",
            1,
            d.share_min_heartbeat_interval_ms,
        )?,
        share_max_heartbeat_interval_ms: int(
            "group.share.max.heartbeat.interval.ms",
            1,
            d.share_max_heartbeat_interval_ms,
        )?,
        share_record_lock_duration_ms: int(
            "group.share.record.lock.duration.ms",
            1000,
            d.share_record_lock_duration_ms,
        )?,
        share_min_record_lock_duration_ms: int(
            "group.share.min.record.lock.duration.ms",
            1000,
            d.share_min_record_lock_duration_ms,
        )?,
        share_max_record_lock_duration_ms: int(
            "group.share.max.record.lock.duration.ms",
            1000,
            d.share_max_record_lock_duration_ms,
        )?,
    };
    // (key, value, lower bound key and value, upper bound key and value)
    let checks = [
        (
            "group.consumer.session.timeout.ms",
            b.consumer_session_timeout_ms,
            (
                "group.consumer.min.session.timeout.ms",
                b.consumer_min_session_timeout_ms,
            ),
            (
                "group.consumer.max.session.timeout.ms",
                b.consumer_max_session_timeout_ms,
            ),
        ),
        (
            "group.consumer.heartbeat.interval.ms",
            b.consumer_heartbeat_interval_ms,
            (
                "group.consumer.min.heartbeat.interval.ms",
                b.consumer_min_heartbeat_interval_ms,
            ),
            (
                "group.consumer.max.heartbeat.interval.ms",
                b.consumer_max_heartbeat_interval_ms,
            ),
        ),
        (
            "group.share.session.timeout.ms",
            b.share_session_timeout_ms,
            (
                "group.share.min.session.timeout.ms",
                b.share_min_session_timeout_ms,
            ),
            (
                "group.share.max.session.timeout.ms",
                b.share_max_session_timeout_ms,
            ),
        ),
        (
            "group.share.heartbeat.interval.ms",
            b.share_heartbeat_interval_ms,
            (
                "group.share.min.heartbeat.interval.ms",
                b.share_min_heartbeat_interval_ms,
            ),
            (
                "group.share.max.heartbeat.interval.ms",
                b.share_max_heartbeat_interval_ms,
            ),
        ),
        (
            "group.share.record.lock.duration.ms",
            b.share_record_lock_duration_ms,
            (
                "group.share.min.record.lock.duration.ms",
                b.share_min_record_lock_duration_ms,
            ),
            (
                "group.share.max.record.lock.duration.ms",
                b.share_max_record_lock_duration_ms,
            ),
        ),
    ];
    for (key, value, (min_key, min), (max_key, max)) in checks {
        if max < min {
            return Err(invalid(
                max_key,
                &max.to_string(),
                format!("must be greater than or equal to {min_key}"),
            ));
        }
        if value < min {
            return Err(invalid(
                key,
                &value.to_string(),
                format!("must be greater than or equal to {min_key}"),
            ));
        }
        if value > max {
            return Err(invalid(
                key,
                &value.to_string(),
                format!("must be less than or equal to {max_key}"),
            ));
        }
    }
    if b.share_heartbeat_interval_ms >= b.share_session_timeout_ms {
        return Err(invalid(
            "group.share.heartbeat.interval.ms",
            &b.share_heartbeat_interval_ms.to_string(),
            "must be below group.share.session.timeout.ms",
        ));
    }
    Ok(b)
}

/// `group.consumer.assignors`: short names or Kafka's class names, normalised to short names.
fn parse_assignors(value: &str) -> Result<Vec<String>, ConfigError> {
    let mut out = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let short = match name {
            "uniform" | "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => "uniform",
            "range" | "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => "range",
            other => {
                return Err(invalid(
                    "group.consumer.assignors",
                    other,
                    "Weir has the uniform and range assignors",
                ))
            }
        };
        if !out.iter().any(|n| n == short) {
            out.push(short.to_string());
        }
    }
    if out.is_empty() {
        return Err(invalid(
            "group.consumer.assignors",
            value,
            "at least one assignor is required",
        ));
    }
    Ok(out)
}

/// Kafka's rack-aware `replica.selector.class`, the one selector Weir implements.
pub const RACK_AWARE_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// A `replica.selector.class` Weir implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaSelector {
    /// Kafka's `RackAwareReplicaSelector`: the leader if it is in the consumer's rack (or no
    /// replica is), else the most caught-up in-sync replica in that rack.
    RackAware,
}

const I16_MAX: i64 = i16::MAX as i64;
const I32_MAX: i64 = i32::MAX as i64;
const DEFAULT_LOG_DIR: &str = "./weir-data";
const DEFAULT_FLUSH_SCHEDULER_INTERVAL_MS: i64 = 1000;

use Kind::{Bool, Int, Text};

enum Kind {
    Int(i64, i64),
    Bool,
    Text,
}

/// Kafka keys Weir accepts without acting on them: they appear in stock Kafka files (threads,
/// socket buffers, internal-topic replication) and warning about them would be noise. Their
/// values are still type-checked so a typo does not hide until Weir implements the key.
const IGNORED_KEYS: &[(&str, Kind)] = &[
    ("background.threads", Int(1, I32_MAX)),
    ("controlled.shutdown.enable", Bool),
    ("early.start.listeners", Text),
    ("group.coordinator.rebalance.protocols", Text),
    ("log.preallocate", Bool),
    ("log.roll.jitter.hours", Int(0, I32_MAX)),
    ("log.roll.jitter.ms", Int(0, i64::MAX)),
    ("log.segment.delete.delay.ms", Int(0, i64::MAX)),
    ("max.connections", Int(0, I32_MAX)),
    ("max.connections.per.ip", Int(0, I32_MAX)),
    ("metadata.log.dir", Text),
    ("num.io.threads", Int(1, I32_MAX)),
    ("num.network.threads", Int(1, I32_MAX)),
    ("num.recovery.threads.per.data.dir", Int(1, I32_MAX)),
    ("num.replica.fetchers", Int(1, I32_MAX)),
    ("offsets.commit.timeout.ms", Int(1, I32_MAX)),
    ("queued.max.requests", Int(1, I32_MAX)),
    ("replica.lag.time.max.ms", Int(0, i64::MAX)),
    ("share.coordinator.state.topic.min.isr", Int(1, I16_MAX)),
    (
        "share.coordinator.state.topic.replication.factor",
        Int(1, I16_MAX),
    ),
    ("socket.listen.backlog.size", Int(1, I32_MAX)),
    ("socket.receive.buffer.bytes", Int(-1, I32_MAX)),
    ("socket.send.buffer.bytes", Int(-1, I32_MAX)),
    ("transaction.state.log.min.isr", Int(1, I32_MAX)),
    ("transaction.state.log.num.partitions", Int(1, I32_MAX)),
    ("transaction.state.log.replication.factor", Int(1, I16_MAX)),
    ("transaction.state.log.segment.bytes", Int(1, I32_MAX)),
];

/// Reads keys from the map and remembers which were read, so whatever is left is unknown.
struct Props<'a> {
    map: &'a BTreeMap<String, String>,
    read: BTreeSet<&'static str>,
}

impl<'a> Props<'a> {
    fn get(&mut self, key: &'static str) -> Option<&'a str> {
        self.read.insert(key);
        self.map.get(key).map(String::as_str)
    }

    fn int(&mut self, key: &'static str, min: i64, max: i64) -> Result<Option<i64>, ConfigError> {
        self.get(key)
            .map(|v| parse_int(key, v, min, max))
            .transpose()
    }

    fn bool(&mut self, key: &'static str) -> Result<Option<bool>, ConfigError> {
        self.get(key).map(|v| parse_bool(key, v)).transpose()
    }
}

impl ServerConfig {
    /// Builds and validates the configuration from `server.properties` entries. Returns the
    /// warnings (unknown keys) for the caller to log.
    pub fn from_properties(
        props: &BTreeMap<String, String>,
    ) -> Result<(ServerConfig, Vec<String>), ConfigError> {
        ServerConfig::parse(props).map(|(config, warnings, _)| (config, warnings))
    }

    /// [`Self::from_properties`], also giving every key it looked for.
    #[allow(clippy::type_complexity)]
    fn parse(
        props: &BTreeMap<String, String>,
    ) -> Result<(ServerConfig, Vec<String>, BTreeSet<&'static str>), ConfigError> {
        // Checked first: a ZooKeeper-mode file fails on other keys too, and this is the real cause.
        if let Some((key, value)) = props.iter().find(|(k, _)| k.starts_with("zookeeper.")) {
            return Err(invalid(
                key,
                value,
                "ZooKeeper is not supported: Weir runs KRaft mode only",
            ));
        }
        let mut p = Props {
            map: props,
            read: BTreeSet::new(),
        };

        let node_id = p.int("node.id", 0, I32_MAX)?;
        let broker_id = p.int("broker.id", 0, I32_MAX)?;
        let node_id = match (node_id, broker_id) {
            (Some(n), Some(b)) if n != b => {
                return Err(invalid(
                    "node.id",
                    &n.to_string(),
                    format!("must equal broker.id ({b}) when both are set"),
                ))
            }
            (n, b) => n.or(b).unwrap_or(1) as i32,
        };

        let process_roles = match p.get("process.roles") {
            Some(v) => parse_roles(v)?,
            None => vec![Role::Broker, Role::Controller],
        };

        let listeners_raw = p.get("listeners");
        let listeners = match listeners_raw {
            Some(v) => parse_listeners(v)?,
            None => vec![Endpoint {
                listener_name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            }],
        };

        let controller_listener_names = match p.get("controller.listener.names") {
            Some(v) => {
                let names = parse_names(v);
                if names.is_empty() {
                    return Err(invalid(
                        "controller.listener.names",
                        v,
                        "must name at least one listener",
                    ));
                }
                names
            }
            None => vec!["CONTROLLER".to_string()],
        };

        check_security_protocols(
            &listeners,
            listeners_raw.unwrap_or_default(),
            p.get("listener.security.protocol.map"),
        )?;

        let inter_broker_name = p.get("inter.broker.listener.name");
        if let Some(v) = p.get("security.inter.broker.protocol") {
            if inter_broker_name.is_some() {
                return Err(invalid(
                    "security.inter.broker.protocol",
                    v,
                    "only one of inter.broker.listener.name and security.inter.broker.protocol \
                     may be set",
                ));
            }
            if !v.trim().eq_ignore_ascii_case("PLAINTEXT") {
                return Err(invalid(
                    "security.inter.broker.protocol",
                    v,
                    "Weir supports only PLAINTEXT",
                ));
            }
        }
        let inter_broker_listener_name = match inter_broker_name {
            Some(v) => {
                let name = v.trim().to_ascii_uppercase();
                if name.is_empty() {
                    return Err(invalid(
                        "inter.broker.listener.name",
                        v,
                        "must not be empty",
                    ));
                }
                name
            }
            None => "PLAINTEXT".to_string(),
        };

        let is_controller_listener =
            |e: &Endpoint| controller_listener_names.contains(&e.listener_name);
        let advertised_listeners = match p.get("advertised.listeners") {
            Some(v) => {
                let advertised = parse_endpoints("advertised.listeners", v)?;
                if let Some(e) = advertised
                    .iter()
                    .find(|a| !listeners.iter().any(|l| l.listener_name == a.listener_name))
                {
                    return Err(invalid(
                        "advertised.listeners",
                        v,
                        format!(
                            "listener '{}' is not defined in 'listeners'",
                            e.listener_name
                        ),
                    ));
                }
                advertised
            }
            None => listeners
                .iter()
                .filter(|e| !is_controller_listener(e))
                .cloned()
                .collect(),
        };

        let broker_rack = p
            .get("broker.rack")
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_string);
        let replica_selector = match p.get("replica.selector.class").map(str::trim) {
            None | Some("") => None,
            Some(RACK_AWARE_SELECTOR) => Some(ReplicaSelector::RackAware),
            Some(other) => {
                return Err(invalid(
                    "replica.selector.class",
                    other,
                    format!("the only replica selector Weir has is {RACK_AWARE_SELECTOR}"),
                ))
            }
        };

        let voters = match p.get("controller.quorum.voters") {
            Some(v) => parse_voters(v)?,
            None => Vec::new(),
        };
        let bootstrap = match p.get("controller.quorum.bootstrap.servers") {
            Some(v) => parse_bootstrap_servers(v)?,
            None => Vec::new(),
        };
        // Kafka uses the static voter set when one is given; bootstrap servers are then only
        // for discovery, so a file may carry both.
        let controller_quorum_voters = if voters.is_empty() { bootstrap } else { voters };

        let log_dirs = {
            let dirs = p.get("log.dirs");
            let dir = p.get("log.dir");
            match (dirs.map(|v| ("log.dirs", v))).or(dir.map(|v| ("log.dir", v))) {
                Some((key, v)) => parse_log_dirs(key, v)?,
                None => vec![DEFAULT_LOG_DIR.to_string()],
            }
        };

        let num_partitions = p.int("num.partitions", 1, I32_MAX)?.unwrap_or(1) as i32;
        let default_replication_factor = p
            .int("default.replication.factor", 1, I16_MAX)?
            .unwrap_or(1) as i16;
        let auto_create_topics_enable = p.bool("auto.create.topics.enable")?.unwrap_or(true);
        let delete_topic_enable = p.bool("delete.topic.enable")?.unwrap_or(true);
        let socket_request_max_bytes = p
            .int("socket.request.max.bytes", 1, I32_MAX)?
            .unwrap_or(104_857_600) as usize;
        let connections_max_idle_ms = match p.int("connections.max.idle.ms", i64::MIN, i64::MAX)? {
            Some(ms) if ms < 0 => u64::MAX,
            Some(ms) => ms as u64,
            None => 600_000,
        };
        let log_retention_check_interval_ms = p
            .int("log.retention.check.interval.ms", 1, i64::MAX)?
            .unwrap_or(300_000) as u64;
        let log_flush_offset_checkpoint_interval_ms = p
            .int("log.flush.offset.checkpoint.interval.ms", 1, i64::MAX)?
            .unwrap_or(60_000) as u64;
        let flush_scheduler_ms = p.int("log.flush.scheduler.interval.ms", 1, i64::MAX)?;
        let log_flush_scheduler_interval_ms =
            flush_scheduler_ms.unwrap_or(DEFAULT_FLUSH_SCHEDULER_INTERVAL_MS) as u64;
        let offsets_topic_num_partitions = p
            .int("offsets.topic.num.partitions", 1, I32_MAX)?
            .unwrap_or(50) as i32;
        let group_initial_rebalance_delay_ms = p
            .int("group.initial.rebalance.delay.ms", 0, I32_MAX)?
            .unwrap_or(3000) as u64;
        let fetch_max_bytes = p
            .int("fetch.max.bytes", 1024, I32_MAX)?
            .unwrap_or(57_671_680) as usize;
        let replica_fetch_max_bytes = p
            .int("replica.fetch.max.bytes", 0, I32_MAX)?
            .unwrap_or(1_048_576) as usize;
        let replica_fetch_response_max_bytes = p
            .int("replica.fetch.response.max.bytes", 0, I32_MAX)?
            .unwrap_or(10_485_760) as usize;
        let replica_fetch_wait_max_ms = p
            .int("replica.fetch.wait.max.ms", 0, I32_MAX)?
            .unwrap_or(500) as u64;
        let replica_fetch_min_bytes =
            p.int("replica.fetch.min.bytes", 1, I32_MAX)?.unwrap_or(1) as i32;
        let replica_fetch_backoff_ms = p
            .int("replica.fetch.backoff.ms", 0, I32_MAX)?
            .unwrap_or(1000) as u64;
        let producer_id_expiration_ms = p
            .int("producer.id.expiration.ms", 1, I32_MAX)?
            .unwrap_or(86_400_000);
        let producer_id_expiration_check_interval_ms = p
            .int("producer.id.expiration.check.interval.ms", 1, I32_MAX)?
            .unwrap_or(600_000) as u64;
        let group_min_session_timeout_ms = p
            .int("group.min.session.timeout.ms", 0, I32_MAX)?
            .unwrap_or(6000) as i32;
        let group_max_session_timeout_ms = p
            .int("group.max.session.timeout.ms", 0, I32_MAX)?
            .unwrap_or(1_800_000) as i32;
        if group_min_session_timeout_ms > group_max_session_timeout_ms {
            return Err(invalid(
                "group.min.session.timeout.ms",
                &group_min_session_timeout_ms.to_string(),
                "must not exceed group.max.session.timeout.ms",
            ));
        }
        let group_max_size = p.int("group.max.size", 1, I32_MAX)?.unwrap_or(I32_MAX) as i32;
        let group_consumer_session_timeout_ms = p
            .int("group.consumer.session.timeout.ms", 1, I32_MAX)?
            .unwrap_or(45_000) as i32;
        let group_consumer_heartbeat_interval_ms = p
            .int("group.consumer.heartbeat.interval.ms", 1, I32_MAX)?
            .unwrap_or(5_000) as i32;
        if group_consumer_heartbeat_interval_ms >= group_consumer_session_timeout_ms {
            return Err(invalid(
                "group.consumer.heartbeat.interval.ms",
                &group_consumer_heartbeat_interval_ms.to_string(),
                "must be below group.consumer.session.timeout.ms",
            ));
        }
        let group_config_bounds = group_config_bounds(
            &mut p,
            group_consumer_session_timeout_ms,
            group_consumer_heartbeat_interval_ms,
        )?;
        let group_consumer_assignors =
            parse_assignors(p.get("group.consumer.assignors").unwrap_or("uniform,range"))?;
        let group_consumer_max_size = p
            .int("group.consumer.max.size", 1, I32_MAX)?
            .unwrap_or(I32_MAX) as i32;
        let offsets_retention_minutes = p
            .int("offsets.retention.minutes", 1, I32_MAX)?
            .unwrap_or(10080);
        let offsets_retention_check_interval_ms = p
            .int("offsets.retention.check.interval.ms", 1, i64::MAX)?
            .unwrap_or(600_000) as u64;
        let offset_metadata_max_bytes = p
            .int("offset.metadata.max.bytes", 0, I32_MAX)?
            .unwrap_or(4096) as i32;
        let offsets_topic_replication_factor = p
            .int("offsets.topic.replication.factor", 1, I16_MAX)?
            .unwrap_or(3) as i16;
        let offsets_topic_segment_bytes = p
            .int("offsets.topic.segment.bytes", 1, I32_MAX)?
            .unwrap_or(104_857_600) as i32;
        let fsync_before_ack = p.bool("weir.fsync.before.ack")?.unwrap_or(false);
        let replica_lag_time_max_ms = p
            .int("replica.lag.time.max.ms", 1, I32_MAX)?
            .unwrap_or(30_000);
        let broker_heartbeat_interval_ms = p
            .int("broker.heartbeat.interval.ms", 1, I32_MAX)?
            .unwrap_or(2000) as u64;
        let broker_session_timeout_ms = p
            .int("broker.session.timeout.ms", 1, I32_MAX)?
            .unwrap_or(9000) as u64;
        let auto_leader_rebalance_enable = p.bool("auto.leader.rebalance.enable")?.unwrap_or(true);
        let leader_imbalance_check_interval_seconds = p
            .int("leader.imbalance.check.interval.seconds", 1, I32_MAX)?
            .unwrap_or(300) as u64;
        let unclean_leader_election_enable =
            p.bool("unclean.leader.election.enable")?.unwrap_or(false);
        let quorum_election_timeout_ms = p
            .int("controller.quorum.election.timeout.ms", 1, I32_MAX)?
            .unwrap_or(1000) as u64;
        let quorum_fetch_timeout_ms = p
            .int("controller.quorum.fetch.timeout.ms", 2, I32_MAX)?
            .unwrap_or(2000) as u64;
        let metadata_snapshot_max_bytes = p
            .int(
                "metadata.log.max.record.bytes.between.snapshots",
                1,
                i64::MAX,
            )?
            .unwrap_or(20 * 1024 * 1024) as u64;
        let metadata_snapshot_interval_ms = p
            .int("metadata.log.max.snapshot.interval.ms", 0, i64::MAX)?
            .unwrap_or(3_600_000) as u64;
        let log_cleaner = cleaner_settings(&mut p)?;
        let authorizer = authorizer_config(&mut p)?;

        let topic_defaults = topic_defaults(&mut p, flush_scheduler_ms)?;

        for (key, kind) in IGNORED_KEYS {
            if let Some(v) = p.get(key) {
                match *kind {
                    Int(min, max) => drop(parse_int(key, v, min, max)?),
                    Bool => drop(parse_bool(key, v)?),
                    Text => {}
                }
            }
        }

        let config = ServerConfig {
            node_id,
            process_roles,
            listeners,
            advertised_listeners,
            controller_listener_names,
            inter_broker_listener_name,
            broker_rack,
            replica_selector,
            controller_quorum_voters,
            log_dirs,
            num_partitions,
            default_replication_factor,
            auto_create_topics_enable,
            delete_topic_enable,
            socket_request_max_bytes,
            connections_max_idle_ms,
            log_retention_check_interval_ms,
            log_flush_offset_checkpoint_interval_ms,
            log_flush_scheduler_interval_ms,
            quorum_election_timeout_ms,
            quorum_fetch_timeout_ms,
            metadata_snapshot_max_bytes,
            metadata_snapshot_interval_ms,
            broker_heartbeat_interval_ms,
            broker_session_timeout_ms,
            auto_leader_rebalance_enable,
            leader_imbalance_check_interval_seconds,
            unclean_leader_election_enable,
            offsets_topic_num_partitions,
            group_initial_rebalance_delay_ms,
            fetch_max_bytes,
            replica_fetch_max_bytes,
            replica_fetch_response_max_bytes,
            replica_fetch_wait_max_ms,
            replica_fetch_min_bytes,
            replica_fetch_backoff_ms,
            producer_id_expiration_ms,
            producer_id_expiration_check_interval_ms,
            group_min_session_timeout_ms,
            group_max_session_timeout_ms,
            group_max_size,
            group_consumer_session_timeout_ms,
            group_consumer_heartbeat_interval_ms,
            group_consumer_assignors,
            group_consumer_max_size,
            group_config_bounds,
            offsets_retention_minutes,
            offsets_retention_check_interval_ms,
            offset_metadata_max_bytes,
            offsets_topic_replication_factor,
            offsets_topic_segment_bytes,
            replica_lag_time_max_ms,
            fsync_before_ack,
            log_cleaner,
            authorizer,
            #[cfg(any(madsim, test))]
            planted_bug: None,
            topic_defaults,
        };
        config.check_roles(props)?;

        let warnings = props
            .keys()
            .filter(|k| !p.read.contains(k.as_str()))
            .map(|k| match FIELDS.iter().find(|f| f.0 == k) {
                // A topic-level key in server.properties is a common slip; point at the broker key.
                Some((_, broker_key, _)) => format!(
                    "unknown config key '{k}' ignored (the broker-wide default is '{broker_key}')"
                ),
                None => format!("unknown config key '{k}' ignored"),
            })
            .collect();
        Ok((config, warnings, p.read))
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

    /// The listeners that serve clients, i.e. all but the controller listeners.
    pub fn broker_endpoints(&self) -> Vec<Endpoint> {
        self.listeners
            .iter()
            .filter(|e| !self.controller_listener_names.contains(&e.listener_name))
            .cloned()
            .collect()
    }

    /// The supported broker keys with their effective values, as DescribeConfigs reports them
    /// for a broker resource. Sorted by key.
    pub fn broker_config_entries(&self) -> Vec<(String, String)> {
        let (voters, bootstrap): (Vec<Voter>, Vec<Voter>) = self
            .controller_quorum_voters
            .iter()
            .cloned()
            .partition(|v| v.id >= 0);
        let protocol_map: Vec<String> = self
            .listeners
            .iter()
            .map(|l| format!("{}:PLAINTEXT", l.listener_name))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let b = &self.group_config_bounds;
        let idle = match self.connections_max_idle_ms {
            u64::MAX => "-1".to_string(),
            ms => ms.to_string(),
        };
        let mut entries: Vec<(String, String)> = [
            ("node.id", self.node_id.to_string()),
            ("broker.id", self.node_id.to_string()),
            ("process.roles", join(&self.process_roles)),
            ("listeners", join(&self.listeners)),
            ("advertised.listeners", join(&self.advertised_listeners)),
            (
                "controller.listener.names",
                self.controller_listener_names.join(","),
            ),
            (
                "inter.broker.listener.name",
                self.inter_broker_listener_name.clone(),
            ),
            ("listener.security.protocol.map", protocol_map.join(",")),
            ("controller.quorum.voters", join(&voters)),
            ("controller.quorum.bootstrap.servers", join(&bootstrap)),
            ("log.dirs", self.log_dirs.join(",")),
            ("num.partitions", self.num_partitions.to_string()),
            (
                "default.replication.factor",
                self.default_replication_factor.to_string(),
            ),
            (
                "auto.create.topics.enable",
                self.auto_create_topics_enable.to_string(),
            ),
            ("delete.topic.enable", self.delete_topic_enable.to_string()),
            (
                "socket.request.max.bytes",
                self.socket_request_max_bytes.to_string(),
            ),
            ("connections.max.idle.ms", idle),
            (
                "log.retention.check.interval.ms",
                self.log_retention_check_interval_ms.to_string(),
            ),
            (
                "log.flush.offset.checkpoint.interval.ms",
                self.log_flush_offset_checkpoint_interval_ms.to_string(),
            ),
            (
                "log.flush.scheduler.interval.ms",
                self.log_flush_scheduler_interval_ms.to_string(),
            ),
            (
                "offsets.topic.num.partitions",
                self.offsets_topic_num_partitions.to_string(),
            ),
            (
                "group.initial.rebalance.delay.ms",
                self.group_initial_rebalance_delay_ms.to_string(),
            ),
            ("fetch.max.bytes", self.fetch_max_bytes.to_string()),
            (
                "replica.fetch.max.bytes",
                self.replica_fetch_max_bytes.to_string(),
            ),
            (
                "replica.fetch.response.max.bytes",
                self.replica_fetch_response_max_bytes.to_string(),
            ),
            (
                "replica.fetch.wait.max.ms",
                self.replica_fetch_wait_max_ms.to_string(),
            ),
            (
                "replica.fetch.min.bytes",
                self.replica_fetch_min_bytes.to_string(),
            ),
            (
                "replica.fetch.backoff.ms",
                self.replica_fetch_backoff_ms.to_string(),
            ),
            (
                "producer.id.expiration.ms",
                self.producer_id_expiration_ms.to_string(),
            ),
            (
                "producer.id.expiration.check.interval.ms",
                self.producer_id_expiration_check_interval_ms.to_string(),
            ),
            (
                "group.min.session.timeout.ms",
                self.group_min_session_timeout_ms.to_string(),
            ),
            (
                "group.max.session.timeout.ms",
                self.group_max_session_timeout_ms.to_string(),
            ),
            ("group.max.size", self.group_max_size.to_string()),
            (
                "group.consumer.session.timeout.ms",
                self.group_consumer_session_timeout_ms.to_string(),
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                self.group_consumer_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.consumer.assignors",
                self.group_consumer_assignors.join(","),
            ),
            (
                "group.consumer.max.size",
                self.group_consumer_max_size.to_string(),
            ),
            (
                "group.consumer.min.session.timeout.ms",
                b.consumer_min_session_timeout_ms.to_string(),
            ),
            (
                "group.consumer.max.session.timeout.ms",
                b.consumer_max_session_timeout_ms.to_string(),
            ),
            (
                "group.consumer.min.heartbeat.interval.ms",
                b.consumer_min_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.consumer.max.heartbeat.interval.ms",
                b.consumer_max_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.share.session.timeout.ms",
                b.share_session_timeout_ms.to_string(),
            ),
            (
                "group.share.min.session.timeout.ms",
                b.share_min_session_timeout_ms.to_string(),
            ),
            (
                "group.share.max.session.timeout.ms",
                b.share_max_session_timeout_ms.to_string(),
            ),
            (
                "group.share.heartbeat.interval.ms",
                b.share_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.share.min.heartbeat.interval.ms",
                b.share_min_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.share.max.heartbeat.interval.ms",
                b.share_max_heartbeat_interval_ms.to_string(),
            ),
            (
                "group.share.record.lock.duration.ms",
                b.share_record_lock_duration_ms.to_string(),
            ),
            (
                "group.share.min.record.lock.duration.ms",
                b.share_min_record_lock_duration_ms.to_string(),
            ),
            (
                "group.share.max.record.lock.duration.ms",
                b.share_max_record_lock_duration_ms.to_string(),
            ),
            (
                "offsets.retention.minutes",
                self.offsets_retention_minutes.to_string(),
            ),
            (
                "offsets.retention.check.interval.ms",
                self.offsets_retention_check_interval_ms.to_string(),
            ),
            (
                "offset.metadata.max.bytes",
                self.offset_metadata_max_bytes.to_string(),
            ),
            (
                "offsets.topic.replication.factor",
                self.offsets_topic_replication_factor.to_string(),
            ),
            (
                "offsets.topic.segment.bytes",
                self.offsets_topic_segment_bytes.to_string(),
            ),
            (
                "replica.lag.time.max.ms",
                self.replica_lag_time_max_ms.to_string(),
            ),
            ("weir.fsync.before.ack", self.fsync_before_ack.to_string()),
            (
                "authorizer.class.name",
                if self.authorizer.enabled {
                    STANDARD_AUTHORIZER.to_string()
                } else {
                    String::new()
                },
            ),
            ("super.users", self.authorizer.super_users.join(";")),
            (
                "allow.everyone.if.no.acl.found",
                self.authorizer.allow_everyone_if_no_acl_found.to_string(),
            ),
            ("log.cleaner.enable", self.log_cleaner.enable.to_string()),
            ("log.cleaner.threads", self.log_cleaner.threads.to_string()),
            (
                "log.cleaner.dedupe.buffer.size",
                self.log_cleaner.dedupe_buffer_size.to_string(),
            ),
            (
                "log.cleaner.backoff.ms",
                self.log_cleaner.backoff_ms.to_string(),
            ),
            (
                "log.cleaner.io.max.bytes.per.second",
                if self.log_cleaner.io_max_bytes_per_second == f64::MAX {
                    "1.7976931348623157E308".to_string()
                } else {
                    self.log_cleaner.io_max_bytes_per_second.to_string()
                },
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(rack) = &self.broker_rack {
            entries.push(("broker.rack".to_string(), rack.clone()));
        }
        if let Some(ReplicaSelector::RackAware) = self.replica_selector {
            entries.push((
                "replica.selector.class".to_string(),
                RACK_AWARE_SELECTOR.to_string(),
            ));
        }
        entries.extend(
            FIELDS
                .iter()
                .map(|&(_, key, field)| (key.to_string(), self.topic_defaults.render(field))),
        );
        entries.sort();
        entries
    }

    /// Kafka's KRaft consistency rules between roles, listeners and the quorum.
    fn check_roles(&self, props: &BTreeMap<String, String>) -> Result<(), ConfigError> {
        // Errors quote what the user wrote, or the effective value when the key was left out.
        let fail = |key: &str, effective: String, reason: String| {
            let value = props.get(key).cloned().unwrap_or(effective);
            Err(invalid(key, &value, reason))
        };
        let listeners = || join(&self.listeners);
        let is_controller_listener =
            |e: &&Endpoint| self.controller_listener_names.contains(&e.listener_name);
        let voter_ids: Vec<i32> = self.controller_quorum_voters.iter().map(|v| v.id).collect();
        let has_quorum = !voter_ids.is_empty();
        let has_static_voters = voter_ids.iter().any(|&id| id >= 0);
        let node = self.node_id;

        if self.is_controller() {
            if has_quorum && !self.listeners.iter().any(|e| is_controller_listener(&e)) {
                let reason = "must name a listener from 'listeners' when process.roles \
                              contains controller and a quorum is configured";
                let names = self.controller_listener_names.join(",");
                return fail("controller.listener.names", names, reason.into());
            }
            if has_static_voters && !voter_ids.contains(&node) {
                let reason = format!(
                    "must include this node (node.id {node}) when process.roles contains controller"
                );
                return fail("controller.quorum.voters", String::new(), reason);
            }
        }
        if self.is_controller() && !self.is_broker() {
            if let Some(e) = self.listeners.iter().find(|e| !is_controller_listener(e)) {
                let reason = format!(
                    "listener '{}' is not in controller.listener.names, and a node with \
                     process.roles=controller runs only controller listeners",
                    e.listener_name
                );
                return fail("listeners", listeners(), reason);
            }
        }
        if self.is_broker() && !self.is_controller() {
            if !has_quorum {
                let reason = "process.roles=broker needs controller.quorum.voters or \
                              controller.quorum.bootstrap.servers";
                return fail("controller.quorum.voters", String::new(), reason.into());
            }
            if voter_ids.contains(&node) {
                let reason = format!(
                    "must not include this node (node.id {node}) when process.roles=broker"
                );
                return fail("controller.quorum.voters", String::new(), reason);
            }
            if let Some(e) = self.listeners.iter().find(is_controller_listener) {
                let reason = format!(
                    "controller listener '{}' is not allowed when process.roles=broker",
                    e.listener_name
                );
                return fail("listeners", listeners(), reason);
            }
        }
        if self.is_broker() {
            if self.listeners.iter().all(|e| is_controller_listener(&e)) {
                let reason = "must contain a listener that is not a controller listener when \
                              process.roles contains broker";
                return fail("listeners", listeners(), reason.into());
            }
            if self
                .advertised_listeners
                .iter()
                .all(|e| is_controller_listener(&e))
            {
                let reason = "must contain a listener that is not a controller listener when \
                              process.roles contains broker";
                return fail("advertised.listeners", String::new(), reason.into());
            }
            let name = &self.inter_broker_listener_name;
            let advertised = self
                .advertised_listeners
                .iter()
                .any(|e| &e.listener_name == name);
            if !advertised || self.controller_listener_names.contains(name) {
                let reason =
                    format!("'{name}' must be a non-controller listener in advertised.listeners");
                return fail("inter.broker.listener.name", name.clone(), reason);
            }
        }
        Ok(())
    }
}

fn join<T: ToString>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

fn topic_defaults(
    p: &mut Props<'_>,
    flush_scheduler_ms: Option<i64>,
) -> Result<TopicConfig, ConfigError> {
    topic_defaults_on(TopicConfig::default(), p, flush_scheduler_ms)
}

/// `base` with the broker `log.*` keys of `map` on top (dynamic broker configs).
pub(super) fn topic_defaults_over(
    base: TopicConfig,
    map: &BTreeMap<String, String>,
) -> Result<TopicConfig, ConfigError> {
    let mut p = Props {
        map,
        read: BTreeSet::new(),
    };
    topic_defaults_on(base, &mut p, None)
}

/// Every key [`ServerConfig::from_properties`] reads.
pub(super) fn known_keys() -> BTreeSet<&'static str> {
    match ServerConfig::parse(&BTreeMap::new()) {
        Ok((_, _, keys)) => keys,
        Err(e) => unreachable!("default configuration is invalid: {e}"),
    }
}

fn topic_defaults_on(
    mut topic: TopicConfig,
    p: &mut Props<'_>,
    flush_scheduler_ms: Option<i64>,
) -> Result<TopicConfig, ConfigError> {
    for &(_, key, field) in FIELDS {
        // These have more than one broker key and are resolved below.
        if matches!(
            field,
            Field::RetentionMs | Field::SegmentMs | Field::FlushMs
        ) {
            continue;
        }
        if let Some(v) = p.get(key) {
            topic.set(field, key, v)?;
        }
    }

    // Every key is parsed, so a bad one fails even when a more precise one wins.
    let scale = |n: i64, unit: i64| if n < 0 { -1 } else { n * unit };
    let retention_ms = p.int("log.retention.ms", -1, i64::MAX)?;
    let retention_minutes = p
        .int("log.retention.minutes", -1, I32_MAX)?
        .map(|m| scale(m, 60_000));
    let retention_hours = p
        .int("log.retention.hours", -1, I32_MAX)?
        .map(|h| scale(h, 3_600_000));
    if let Some(ms) = retention_ms.or(retention_minutes).or(retention_hours) {
        topic.retention_ms = ms;
    }

    let roll_ms = p.int("log.roll.ms", 1, i64::MAX)?;
    let roll_hours = p.int("log.roll.hours", 1, I32_MAX)?.map(|h| h * 3_600_000);
    if let Some(ms) = roll_ms.or(roll_hours) {
        topic.segment_ms = ms;
    }

    // Kafka falls back to the scheduler interval when log.flush.interval.ms is unset. Only an
    // explicit interval counts: Weir's own default scheduler interval must not turn on
    // time-based flushing.
    if let Some(ms) = p
        .int("log.flush.interval.ms", 0, i64::MAX)?
        .or(flush_scheduler_ms)
    {
        topic.flush_ms = ms;
    }
    Ok(topic)
}

fn parse_roles(value: &str) -> Result<Vec<Role>, ConfigError> {
    let key = "process.roles";
    let mut roles = Vec::new();
    for item in parse_list(value) {
        let role = if item.eq_ignore_ascii_case("broker") {
            Role::Broker
        } else if item.eq_ignore_ascii_case("controller") {
            Role::Controller
        } else {
            return Err(invalid(
                key,
                value,
                format!("unknown role '{item}': must be broker, controller or both"),
            ));
        };
        if roles.contains(&role) {
            return Err(invalid(
                key,
                value,
                format!("role '{role}' is listed twice"),
            ));
        }
        roles.push(role);
    }
    if roles.is_empty() {
        return Err(invalid(
            key,
            value,
            "must be broker, controller or both (ZooKeeper mode is not supported)",
        ));
    }
    Ok(roles)
}

fn parse_log_dirs(key: &str, value: &str) -> Result<Vec<String>, ConfigError> {
    let mut dirs: Vec<String> = Vec::new();
    for dir in parse_list(value) {
        if dirs.iter().any(|d| d == dir) {
            return Err(invalid(
                key,
                value,
                format!("directory '{dir}' is listed twice"),
            ));
        }
        dirs.push(dir.to_string());
    }
    if dirs.is_empty() {
        return Err(invalid(key, value, "must name at least one directory"));
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::super::{parse_properties, CleanupPolicy, TimestampType};
    use super::*;

    const SINGLE_NODE: &str = "\
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=PLAINTEXT://127.0.0.1:9092
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=/tmp/kraft-combined-logs
num.partitions=3
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
";

    /// `config/kraft/server.properties` from Kafka 3.x, comments removed.
    const KAFKA_3_KRAFT: &str = "\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
";

    /// `config/server.properties` from Kafka 4.0 (dynamic quorum), comments removed.
    const KAFKA_4_KRAFT: &str = "\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
";

    fn load(text: &str) -> Result<(ServerConfig, Vec<String>), ConfigError> {
        ServerConfig::from_properties(&parse_properties(text)?)
    }

    fn config(text: &str) -> ServerConfig {
        let (config, warnings) = load(text).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        config
    }

    /// The key the error names, and its message.
    fn error(text: &str) -> (String, String) {
        match load(text) {
            Err(e @ ConfigError::Invalid { .. }) => {
                let ConfigError::Invalid { key, .. } = &e else {
                    unreachable!()
                };
                (key.clone(), e.to_string())
            }
            other => panic!("expected an invalid value for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn authorizer_keys() {
        let off = config("");
        assert_eq!(off.authorizer, AuthorizerConfig::default());
        let on = config(
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
             super.users=User:admin; User:ops\n\
             allow.everyone.if.no.acl.found=true\n",
        );
        assert!(on.authorizer.enabled);
        assert_eq!(on.authorizer.super_users, vec!["User:admin", "User:ops"]);
        assert!(on.authorizer.allow_everyone_if_no_acl_found);
        assert!(!config("authorizer.class.name=\n").authorizer.enabled);
        assert_eq!(
            error("authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n").0,
            "authorizer.class.name"
        );
        assert_eq!(error("super.users=admin\n").0, "super.users");
    }

    fn ep(name: &str, host: &str, port: u16) -> Endpoint {
        Endpoint {
            listener_name: name.into(),
            host: host.into(),
            port,
        }
    }

    #[test]
    fn single_node_kraft_file() {
        let c = config(SINGLE_NODE);
        assert_eq!(c.node_id, 1);
        assert_eq!(c.process_roles, vec![Role::Broker, Role::Controller]);
        assert!(c.is_broker() && c.is_controller());
        assert_eq!(
            c.listeners,
            vec![
                ep("PLAINTEXT", "127.0.0.1", 9092),
                ep("CONTROLLER", "127.0.0.1", 9093)
            ]
        );
        assert_eq!(
            c.advertised_listeners,
            vec![ep("PLAINTEXT", "127.0.0.1", 9092)]
        );
        assert_eq!(
            c.broker_endpoints(),
            vec![ep("PLAINTEXT", "127.0.0.1", 9092)]
        );
        assert_eq!(c.controller_listener_names, vec!["CONTROLLER"]);
        assert_eq!(
            c.controller_quorum_voters,
            vec![Voter {
                id: 1,
                host: "127.0.0.1".into(),
                port: 9093
            }]
        );
        assert_eq!(c.log_dirs, vec!["/tmp/kraft-combined-logs"]);
        assert_eq!(c.num_partitions, 3);
        assert_eq!(c.default_replication_factor, 1);
        assert!(c.auto_create_topics_enable);
        assert_eq!(c.log_retention_check_interval_ms, 300_000);
        assert_eq!(c.topic_defaults.retention_ms, 168 * 3_600_000);
        assert_eq!(c.topic_defaults.segment_bytes, 1_073_741_824);
        assert_eq!(c.topic_defaults.min_insync_replicas, 1);
    }

    #[test]
    fn stock_kafka_files() {
        let c = config(KAFKA_3_KRAFT);
        assert_eq!(
            c.listeners,
            vec![
                ep("PLAINTEXT", "0.0.0.0", 9092),
                ep("CONTROLLER", "0.0.0.0", 9093)
            ]
        );
        assert_eq!(
            c.advertised_listeners,
            vec![ep("PLAINTEXT", "localhost", 9092)]
        );

        let c = config(KAFKA_4_KRAFT);
        assert_eq!(
            c.controller_quorum_voters,
            vec![Voter {
                id: -1,
                host: "localhost".into(),
                port: 9093
            }]
        );
        assert_eq!(c.advertised_listeners.len(), 2);
        assert_eq!(c.broker_endpoints(), vec![ep("PLAINTEXT", "0.0.0.0", 9092)]);
    }

    #[test]
    fn defaults() {
        let (c, warnings) = ServerConfig::from_properties(&BTreeMap::new()).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(c, ServerConfig::default_single_node());
        assert_eq!(c.node_id, 1);
        assert_eq!(c.process_roles, vec![Role::Broker, Role::Controller]);
        assert_eq!(c.listeners, vec![ep("PLAINTEXT", "127.0.0.1", 9092)]);
        assert_eq!(c.advertised_listeners, c.listeners);
        assert_eq!(c.controller_listener_names, vec!["CONTROLLER"]);
        assert_eq!(c.inter_broker_listener_name, "PLAINTEXT");
        assert!(c.controller_quorum_voters.is_empty());
        assert_eq!(c.log_dirs, vec![DEFAULT_LOG_DIR]);
        assert_eq!(c.num_partitions, 1);
        assert_eq!(c.default_replication_factor, 1);
        assert!(c.auto_create_topics_enable);
        assert!(c.delete_topic_enable);
        assert_eq!(c.socket_request_max_bytes, 104_857_600);
        assert_eq!(c.connections_max_idle_ms, 600_000);
        assert_eq!(c.log_retention_check_interval_ms, 300_000);
        assert_eq!(c.log_flush_scheduler_interval_ms, 1000);
        assert_eq!(c.offsets_topic_num_partitions, 50);
        assert_eq!(c.group_initial_rebalance_delay_ms, 3000);
        assert_eq!(c.group_min_session_timeout_ms, 6000);
        assert_eq!(c.group_max_session_timeout_ms, 1_800_000);
        assert_eq!(c.offsets_retention_minutes, 10080);
        assert_eq!(c.offsets_topic_replication_factor, 3);
        assert!(!c.fsync_before_ack);
        assert_eq!(c.fetch_max_bytes, 57_671_680);
        assert_eq!(c.replica_fetch_max_bytes, 1_048_576);
        assert_eq!(c.replica_fetch_response_max_bytes, 10_485_760);
        assert_eq!(c.producer_id_expiration_ms, 86_400_000);
        assert_eq!(c.producer_id_expiration_check_interval_ms, 600_000);
        assert_eq!(c.topic_defaults, TopicConfig::default());
    }

    #[test]
    fn retention_precedence() {
        let retention = |text: &str| config(text).topic_defaults.retention_ms;
        assert_eq!(retention("log.retention.hours=1"), 3_600_000);
        assert_eq!(
            retention("log.retention.hours=1\nlog.retention.minutes=2"),
            120_000
        );
        assert_eq!(
            retention("log.retention.hours=1\nlog.retention.minutes=2\nlog.retention.ms=5"),
            5
        );
        assert_eq!(retention("log.retention.ms=5\nlog.retention.hours=1"), 5);
        assert_eq!(retention("log.retention.hours=-1"), -1);
        assert_eq!(retention("log.retention.ms=-1\nlog.retention.hours=1"), -1);
        assert_eq!(
            retention("log.retention.hours=2147483647"),
            2_147_483_647 * 3_600_000
        );
        // The losing key is still validated.
        assert_eq!(
            error("log.retention.ms=5\nlog.retention.hours=x").0,
            "log.retention.hours"
        );
        assert_eq!(error("log.retention.ms=-2").0, "log.retention.ms");

        let roll = |text: &str| config(text).topic_defaults.segment_ms;
        assert_eq!(roll("log.roll.hours=2"), 7_200_000);
        assert_eq!(roll("log.roll.hours=2\nlog.roll.ms=10"), 10);
        assert_eq!(error("log.roll.hours=0").0, "log.roll.hours");
    }

    #[test]
    fn broker_topic_defaults() {
        let c = config(
            "log.retention.bytes=1000\nlog.segment.bytes=14\nmessage.max.bytes=2000\n\
             min.insync.replicas=2\n\
             log.cleanup.policy=compact\nlog.flush.interval.messages=10\nlog.flush.interval.ms=50\n\
             log.index.interval.bytes=100\nlog.message.timestamp.type=LogAppendTime",
        );
        let t = &c.topic_defaults;
        assert_eq!(t.retention_bytes, 1000);
        assert_eq!(t.segment_bytes, 14);
        assert_eq!(t.max_message_bytes, 2000);
        assert_eq!(t.min_insync_replicas, 2);
        assert_eq!(t.cleanup_policy, CleanupPolicy::Compact);
        assert_eq!(t.flush_messages, 10);
        assert_eq!(t.flush_ms, 50);
        assert_eq!(t.index_interval_bytes, 100);
        assert_eq!(t.message_timestamp_type, TimestampType::LogAppendTime);

        // Topic overrides then win over the broker defaults.
        let overrides = BTreeMap::from([("segment.bytes".to_string(), "4096".to_string())]);
        let t = c.topic_defaults.with_overrides(&overrides).unwrap();
        assert_eq!((t.segment_bytes, t.retention_bytes), (4096, 1000));
    }

    #[test]
    fn flush_interval_falls_back_to_explicit_scheduler_interval() {
        assert_eq!(config("").topic_defaults.flush_ms, i64::MAX);
        let c = config("log.flush.scheduler.interval.ms=200");
        assert_eq!(
            (c.log_flush_scheduler_interval_ms, c.topic_defaults.flush_ms),
            (200, 200)
        );
        let c = config("log.flush.scheduler.interval.ms=200\nlog.flush.interval.ms=900");
        assert_eq!(c.topic_defaults.flush_ms, 900);
        let c = config("log.flush.scheduler.interval.ms=9223372036854775807");
        assert_eq!(c.log_flush_scheduler_interval_ms, i64::MAX as u64);
    }

    #[test]
    fn group_config_bounds_are_checked_at_start_as_kafka_checks_them() {
        let c = config("");
        assert_eq!(c.group_config_bounds, GroupConfigBounds::default());
        // Below Kafka's floor of 5 s unless the floor is lowered too.
        let (key, msg) = error("group.consumer.heartbeat.interval.ms=500");
        assert_eq!(key, "group.consumer.heartbeat.interval.ms");
        assert!(
            msg.contains("group.consumer.min.heartbeat.interval.ms"),
            "{msg}"
        );
        let c = config(
            "group.consumer.heartbeat.interval.ms=500\n\
             group.consumer.session.timeout.ms=6000\n\
             group.consumer.min.heartbeat.interval.ms=500\n\
             group.consumer.min.session.timeout.ms=6000\n",
        );
        let b = &c.group_config_bounds;
        assert_eq!(
            (
                b.consumer_heartbeat_interval_ms,
                b.consumer_session_timeout_ms
            ),
            (500, 6000)
        );
        let (key, _) = error("group.consumer.max.session.timeout.ms=1000");
        assert_eq!(key, "group.consumer.max.session.timeout.ms");
        let (key, _) = error("group.share.record.lock.duration.ms=999");
        assert_eq!(key, "group.share.record.lock.duration.ms");
    }

    #[test]
    fn bad_values_name_the_key() {
        let (key, msg) = error("log.segment.bytes=x");
        assert_eq!(key, "log.segment.bytes");
        assert_eq!(
            msg,
            "invalid value 'x' for 'log.segment.bytes': must be an integer >= 14"
        );
        for (text, key) in [
            ("node.id=-1", "node.id"),
            ("node.id=2147483648", "node.id"),
            ("node.id=", "node.id"),
            ("broker.id=abc", "broker.id"),
            ("node.id=1\nbroker.id=2", "node.id"),
            ("num.partitions=0", "num.partitions"),
            ("num.partitions=99999999999", "num.partitions"),
            ("default.replication.factor=0", "default.replication.factor"),
            (
                "default.replication.factor=32768",
                "default.replication.factor",
            ),
            ("auto.create.topics.enable=yes", "auto.create.topics.enable"),
            ("delete.topic.enable=", "delete.topic.enable"),
            ("socket.request.max.bytes=0", "socket.request.max.bytes"),
            ("connections.max.idle.ms=1h", "connections.max.idle.ms"),
            (
                "log.retention.check.interval.ms=0",
                "log.retention.check.interval.ms",
            ),
            (
                "log.flush.scheduler.interval.ms=0",
                "log.flush.scheduler.interval.ms",
            ),
            (
                "offsets.topic.num.partitions=0",
                "offsets.topic.num.partitions",
            ),
            (
                "group.initial.rebalance.delay.ms=-1",
                "group.initial.rebalance.delay.ms",
            ),
            ("weir.fsync.before.ack=1", "weir.fsync.before.ack"),
            ("fetch.max.bytes=1023", "fetch.max.bytes"),
            ("fetch.max.bytes=2147483648", "fetch.max.bytes"),
            ("replica.fetch.max.bytes=-1", "replica.fetch.max.bytes"),
            (
                "replica.fetch.response.max.bytes=-1",
                "replica.fetch.response.max.bytes",
            ),
            ("producer.id.expiration.ms=0", "producer.id.expiration.ms"),
            (
                "producer.id.expiration.check.interval.ms=0",
                "producer.id.expiration.check.interval.ms",
            ),
            ("log.cleanup.policy=forever", "log.cleanup.policy"),
            (
                "log.message.timestamp.type=Now",
                "log.message.timestamp.type",
            ),
            ("min.insync.replicas=0", "min.insync.replicas"),
            ("message.max.bytes=-1", "message.max.bytes"),
            ("log.dirs=", "log.dirs"),
            ("log.dirs= , ", "log.dirs"),
            ("log.dir=", "log.dir"),
            ("log.dirs=/a,/b,/a", "log.dirs"),
            ("num.io.threads=0", "num.io.threads"),
            ("num.network.threads=three", "num.network.threads"),
            (
                "offsets.topic.replication.factor=0",
                "offsets.topic.replication.factor",
            ),
            (
                "transaction.state.log.min.isr=x",
                "transaction.state.log.min.isr",
            ),
            ("socket.send.buffer.bytes=-2", "socket.send.buffer.bytes"),
            ("log.cleaner.enable=maybe", "log.cleaner.enable"),
        ] {
            assert_eq!(error(text).0, key, "{text}");
        }
    }

    #[test]
    fn zookeeper_is_refused() {
        let (key, msg) = error("zookeeper.connect=localhost:2181\nbroker.id=0");
        assert_eq!(key, "zookeeper.connect");
        assert!(
            msg.contains("ZooKeeper is not supported: Weir runs KRaft mode only"),
            "{msg}"
        );
        assert_eq!(
            error("zookeeper.connection.timeout.ms=6000").0,
            "zookeeper.connection.timeout.ms"
        );
    }

    #[test]
    fn unknown_keys_warn() {
        let (c, warnings) =
            load("num.partitions=2\nnum.partitons=3\nretention.ms=5\nssl.keystore.location=/x")
                .unwrap();
        assert_eq!(c.num_partitions, 2);
        assert_eq!(
            warnings,
            vec![
                "unknown config key 'num.partitons' ignored",
                "unknown config key 'retention.ms' ignored \
                 (the broker-wide default is 'log.retention.ms')",
                "unknown config key 'ssl.keystore.location' ignored",
            ]
        );
        // Both spellings of the log directory and of the node id are known keys.
        let (_, warnings) = load("log.dirs=/a\nlog.dir=/b\nnode.id=3\nbroker.id=3").unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn node_id_spellings() {
        assert_eq!(config("broker.id=7").node_id, 7);
        assert_eq!(config("node.id=0").node_id, 0);
        assert_eq!(config("node.id=4\nbroker.id=4").node_id, 4);
    }

    #[test]
    fn log_dir_spellings() {
        assert_eq!(config("log.dir=/one").log_dirs, vec!["/one"]);
        assert_eq!(
            config("log.dirs=/a, /b,\nlog.dir=/c").log_dirs,
            vec!["/a", "/b"]
        );
    }

    #[test]
    fn endpoints() {
        let c = config(
            "listeners=plaintext://:9092,Internal://[::1]:9093,EXTERNAL://my-host.example.com:0\n\
             listener.security.protocol.map=\
             PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        );
        assert_eq!(
            c.listeners,
            vec![
                ep("PLAINTEXT", "0.0.0.0", 9092),
                ep("INTERNAL", "::1", 9093),
                ep("EXTERNAL", "my-host.example.com", 0)
            ]
        );
        assert_eq!(c.listeners[1].to_string(), "INTERNAL://[::1]:9093");
        assert_eq!(
            config("listeners=PLAINTEXT://::1:9092").listeners,
            vec![ep("PLAINTEXT", "::1", 9092)]
        );
        assert_eq!(
            config("listeners=PLAINTEXT://[fe80::1%eth0]:9092").listeners,
            vec![ep("PLAINTEXT", "fe80::1%eth0", 9092)]
        );
        // Same port on IPv4 and IPv6 is allowed, as in Kafka.
        let c = config(
            "listeners=PLAINTEXT://0.0.0.0:9092,V6://[::]:9092\n\
             advertised.listeners=PLAINTEXT://h:9092",
        );
        assert_eq!(c.listeners.len(), 2);

        for bad in [
            "listeners=",
            "listeners=127.0.0.1:9092",
            "listeners=PLAINTEXT://127.0.0.1",
            "listeners=PLAINTEXT://127.0.0.1:",
            "listeners=PLAINTEXT://127.0.0.1:65536",
            "listeners=PLAINTEXT://127.0.0.1:-1",
            "listeners=PLAINTEXT://127.0.0.1:+80",
            "listeners=PLAINTEXT://127.0.0.1:port",
            "listeners=://127.0.0.1:9092",
            "listeners=PLAIN TEXT://127.0.0.1:9092",
            "listeners=PLAINTEXT://[::1:9092",
            "listeners=PLAINTEXT://[::1]9092",
            "listeners=PLAINTEXT://[host]:9092",
            "listeners=PLAINTEXT://a:b:9092",
            "listeners=PLAINTEXT://bad/host:9092",
            "listeners=PLAINTEXT://:9092,PLAINTEXT://:9093",
            "listeners=PLAINTEXT://:9092,plaintext://:9093",
            "listeners=PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.2:9092",
        ] {
            assert_eq!(error(bad).0, "listeners", "{bad}");
        }
    }

    #[test]
    fn advertised_listeners() {
        let c = config(
            "listeners=PLAINTEXT://0.0.0.0:9092\nadvertised.listeners=PLAINTEXT://broker1:19092",
        );
        assert_eq!(
            c.advertised_listeners,
            vec![ep("PLAINTEXT", "broker1", 19092)]
        );
        // Without advertised.listeners a wildcard is kept for the caller to resolve.
        assert_eq!(
            config("listeners=PLAINTEXT://:9092").advertised_listeners,
            vec![ep("PLAINTEXT", "0.0.0.0", 9092)]
        );
        let (key, msg) = error("advertised.listeners=OTHER://h:9092");
        assert_eq!(key, "advertised.listeners");
        assert!(
            msg.contains("'OTHER' is not defined in 'listeners'"),
            "{msg}"
        );
        assert_eq!(
            error("advertised.listeners=PLAINTEXT://h:1,PLAINTEXT://h:2").0,
            "advertised.listeners"
        );
        assert_eq!(error("advertised.listeners=").0, "advertised.listeners");
        assert_eq!(
            error(
                "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n\
                 advertised.listeners=CONTROLLER://h:9093"
            )
            .0,
            "advertised.listeners"
        );
    }

    #[test]
    fn security_protocols() {
        let (key, msg) = error(
            "listeners=PLAINTEXT://:9092,SECURE://:9093\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SSL",
        );
        assert_eq!(key, "listener.security.protocol.map");
        assert!(msg.contains("listener 'SECURE' uses SSL"), "{msg}");
        // A listener named after a protocol implies it when there is no map.
        assert_eq!(
            error("listeners=SSL://:9093,PLAINTEXT://:9092").0,
            "listeners"
        );
        // ... and a listener missing from an explicit map is an error.
        assert_eq!(
            error(
                "listeners=PLAINTEXT://:9092,EXTRA://:9094\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT"
            )
            .0,
            "listener.security.protocol.map"
        );
        for bad in [
            "PLAINTEXT",
            "PLAINTEXT:TLS",
            ":PLAINTEXT",
            "PLAINTEXT:PLAINTEXT,plaintext:PLAINTEXT",
        ] {
            assert_eq!(
                error(&format!("listener.security.protocol.map={bad}")).0,
                "listener.security.protocol.map"
            );
        }
        // Names without a map default to PLAINTEXT; case does not matter.
        let c = config(
            "listeners=CLIENT://:9092\ninter.broker.listener.name=client\n\
             listener.security.protocol.map=client:plaintext",
        );
        assert_eq!(c.inter_broker_listener_name, "CLIENT");
        config("security.inter.broker.protocol=PLAINTEXT");
        assert_eq!(
            error("security.inter.broker.protocol=SSL").0,
            "security.inter.broker.protocol"
        );
        assert_eq!(
            error("security.inter.broker.protocol=PLAINTEXT\ninter.broker.listener.name=PLAINTEXT")
                .0,
            "security.inter.broker.protocol"
        );
    }

    #[test]
    fn inter_broker_listener() {
        let (key, _) = error("listeners=CLIENT://:9092");
        assert_eq!(key, "inter.broker.listener.name");
        assert_eq!(
            error("inter.broker.listener.name=OTHER").0,
            "inter.broker.listener.name"
        );
        assert_eq!(
            error("inter.broker.listener.name=").0,
            "inter.broker.listener.name"
        );
        // Must be advertised, not just bound.
        assert_eq!(
            error(
                "listeners=PLAINTEXT://:9092,CLIENT://:9094\nadvertised.listeners=CLIENT://h:9094"
            )
            .0,
            "inter.broker.listener.name"
        );
    }

    #[test]
    fn roles() {
        assert_eq!(
            config("process.roles=Controller , broker").process_roles,
            vec![Role::Controller, Role::Broker]
        );
        for bad in [
            "process.roles=",
            "process.roles=broker,broker",
            "process.roles=zookeeper",
            "process.roles=broker;controller",
        ] {
            assert_eq!(error(bad).0, "process.roles", "{bad}");
        }
    }

    #[test]
    fn controller_listener_required_with_a_quorum() {
        let (key, msg) = error("controller.quorum.voters=1@localhost:9093");
        assert_eq!(key, "controller.listener.names");
        assert!(msg.contains("must name a listener"), "{msg}");
        assert_eq!(
            error(
                "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.listener.names=CTRL\n\
                 controller.quorum.voters=1@h:9093"
            )
            .0,
            "controller.listener.names"
        );
        assert_eq!(
            error("controller.listener.names=").0,
            "controller.listener.names"
        );
        assert_eq!(
            error("controller.listener.names= , ").0,
            "controller.listener.names"
        );
    }

    #[test]
    fn voters() {
        let c = config(
            "node.id=2\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n\
             controller.quorum.voters=1@h1:9093, 2@[::1]:9093 ,3@h3:9093",
        );
        assert_eq!(
            c.controller_quorum_voters[1],
            Voter {
                id: 2,
                host: "::1".into(),
                port: 9093
            }
        );
        assert_eq!(c.controller_quorum_voters[1].to_string(), "2@[::1]:9093");
        let (key, msg) = error(
            "node.id=5\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n\
             controller.quorum.voters=1@h1:9093,2@h2:9093",
        );
        assert_eq!(key, "controller.quorum.voters");
        assert!(msg.contains("node.id 5"), "{msg}");
        for bad in [
            "1@h1",
            "1@:9093",
            "1@h1:0",
            "x@h1:9093",
            "-1@h1:9093",
            "h1:9093",
            "1@h1:9093,1@h2:9093",
            "1@h1:99999",
            "99999999999@h1:9093",
        ] {
            let text = format!(
                "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.quorum.voters={bad}"
            );
            assert_eq!(error(&text).0, "controller.quorum.voters", "{bad}");
        }
        // Voters win over bootstrap servers; both are validated.
        let c = config(
            "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\ncontroller.quorum.voters=1@h:9093\n\
             controller.quorum.bootstrap.servers=h:9093,[::1]:9093",
        );
        assert_eq!(
            c.controller_quorum_voters,
            vec![Voter {
                id: 1,
                host: "h".into(),
                port: 9093
            }]
        );
        assert_eq!(
            error("controller.quorum.voters=1@h:9093\ncontroller.quorum.bootstrap.servers=h").0,
            "controller.quorum.bootstrap.servers"
        );
    }

    #[test]
    fn broker_only_node() {
        let base = "process.roles=broker\nnode.id=4\nlisteners=PLAINTEXT://:9092";
        let c = config(&format!("{base}\ncontroller.quorum.voters=1@c1:9093"));
        assert!(c.is_broker() && !c.is_controller());
        config(&format!(
            "{base}\ncontroller.quorum.bootstrap.servers=c1:9093"
        ));
        assert_eq!(error(base).0, "controller.quorum.voters");
        assert_eq!(
            error(&format!("{base}\ncontroller.quorum.voters=4@c1:9093")).0,
            "controller.quorum.voters"
        );
        assert_eq!(
            error(
                "process.roles=broker\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9093\n\
                 controller.quorum.voters=2@c:9093"
            )
            .0,
            "listeners"
        );
    }

    #[test]
    fn controller_only_node() {
        let c = config(
            "process.roles=controller\nlisteners=CONTROLLER://:9093\n\
             controller.quorum.voters=1@localhost:9093",
        );
        assert!(c.is_controller() && !c.is_broker());
        assert!(c.broker_endpoints().is_empty());
        assert!(c.advertised_listeners.is_empty());
        config(
            "process.roles=controller\nlisteners=CONTROLLER://:9093\nadvertised.listeners=\n\
             controller.quorum.voters=1@localhost:9093",
        );
        assert_eq!(error("process.roles=controller").0, "listeners");
        assert_eq!(
            error(
                "process.roles=controller\nlisteners=CONTROLLER://:9093,PLAINTEXT://:9092\n\
                 controller.quorum.voters=1@h:9093"
            )
            .0,
            "listeners"
        );
    }

    #[test]
    fn connections_idle_never() {
        let c = config("connections.max.idle.ms=-1");
        assert_eq!(c.connections_max_idle_ms, u64::MAX);
        let entries: BTreeMap<_, _> = c.broker_config_entries().into_iter().collect();
        assert_eq!(entries["connections.max.idle.ms"], "-1");
    }

    #[test]
    fn broker_entries() {
        let c = config(SINGLE_NODE);
        let entries = c.broker_config_entries();
        let mut sorted = entries.clone();
        sorted.sort();
        assert_eq!(entries, sorted);
        let entries: BTreeMap<String, String> = entries.into_iter().collect();
        let get = |k: &str| {
            entries
                .get(k)
                .map(String::as_str)
                .unwrap_or_else(|| panic!("missing {k}"))
        };
        assert_eq!(get("node.id"), "1");
        assert_eq!(get("process.roles"), "broker,controller");
        assert_eq!(
            get("listeners"),
            "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
        );
        assert_eq!(get("advertised.listeners"), "PLAINTEXT://127.0.0.1:9092");
        assert_eq!(
            get("listener.security.protocol.map"),
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
        );
        assert_eq!(get("controller.quorum.voters"), "1@127.0.0.1:9093");
        assert_eq!(get("controller.quorum.bootstrap.servers"), "");
        assert_eq!(get("log.dirs"), "/tmp/kraft-combined-logs");
        assert_eq!(get("num.partitions"), "3");
        assert_eq!(get("auto.create.topics.enable"), "true");
        assert_eq!(get("log.retention.ms"), "604800000");
        assert_eq!(get("log.segment.bytes"), "1073741824");
        assert_eq!(get("log.roll.ms"), "604800000");
        assert_eq!(get("message.max.bytes"), "1048588");
        assert_eq!(get("log.cleanup.policy"), "delete");
        assert_eq!(get("log.message.timestamp.type"), "CreateTime");
        assert_eq!(get("weir.fsync.before.ack"), "false");

        // Rendered values parse back to the same configuration.
        let reparsed: BTreeMap<String, String> = entries
            .into_iter()
            .filter(|(k, v)| !(k == "controller.quorum.bootstrap.servers" && v.is_empty()))
            .collect();
        let (again, warnings) = ServerConfig::from_properties(&reparsed).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(again, c);
    }

    #[test]
    fn rack_and_replica_selector() {
        let (c, warnings) = load("broker.rack=RACK1\nreplica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector\n").unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(c.broker_rack.as_deref(), Some("RACK1"));
        assert_eq!(c.replica_selector, Some(ReplicaSelector::RackAware));
        let entries: BTreeMap<String, String> = c.broker_config_entries().into_iter().collect();
        assert_eq!(entries["broker.rack"], "RACK1");
        assert_eq!(entries["replica.selector.class"], RACK_AWARE_SELECTOR);
        let (again, _) = ServerConfig::from_properties(&entries).unwrap();
        assert_eq!(again, c);

        // Kafka's defaults: no rack, no selector (consumers read from the leader).
        let d = ServerConfig::default_single_node();
        assert_eq!((d.broker_rack, d.replica_selector), (None, None));
        let (blank, _) = load("broker.rack= \nreplica.selector.class=\n").unwrap();
        assert_eq!((blank.broker_rack, blank.replica_selector), (None, None));
        let err = load("replica.selector.class=com.example.MySelector\n").unwrap_err();
        assert!(err.to_string().contains("replica.selector.class"), "{err}");
    }

    #[test]
    fn garbage_does_not_panic() {
        let keys = [
            "node.id",
            "process.roles",
            "listeners",
            "advertised.listeners",
            "controller.listener.names",
            "controller.quorum.voters",
            "controller.quorum.bootstrap.servers",
            "listener.security.protocol.map",
            "log.dirs",
            "log.retention.hours",
            "log.retention.minutes",
            "connections.max.idle.ms",
            "inter.broker.listener.name",
            "log.roll.hours",
        ];
        let values = [
            "",
            " ",
            ",",
            ",,,",
            "://",
            "@",
            "[",
            "]",
            "[]:1",
            "[:]:1",
            "a@b@c:1",
            "::::",
            "-",
            "-9223372036854775808",
            "9223372036854775807",
            "18446744073709551616",
            "é",
            "\u{0}",
            "PLAINTEXT://é:1",
            "1@é:1",
            "x:y:z",
        ];
        for key in keys {
            for value in values {
                let props = BTreeMap::from([(key.to_string(), value.to_string())]);
                let _ = ServerConfig::from_properties(&props);
            }
        }
    }
}
