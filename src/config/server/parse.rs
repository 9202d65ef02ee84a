//! `server.properties` → [`ServerConfig`]. Bounds and defaults come from the key table
//! ([`super::keys`]); what is left here is how each value becomes a typed field and the rules
//! that tie keys together.

use std::collections::{BTreeMap, BTreeSet};

use super::super::listener::{
    parse_bootstrap_servers, parse_endpoints, parse_listeners, parse_names, parse_voters,
    security_protocols,
};
use super::super::topic::FIELDS;
use super::super::{invalid, parse_bool, parse_int, parse_list, ConfigError, Endpoint};
use super::keys::{self, Type, Weir, BROKER_KEYS};
use super::{
    groups, topic_defaults, AuthorizerConfig, CleanerSettings, ReplicaSelector, Role, ServerConfig,
    RACK_AWARE_SELECTOR, STANDARD_AUTHORIZER,
};

/// Reads keys from the map and remembers which were read, so whatever is left is unknown.
pub(super) struct Props<'a> {
    pub(super) map: &'a BTreeMap<String, String>,
    pub(super) read: BTreeSet<&'static str>,
    /// Keys read under a listener prefix (`listener.name.x.ssl.keystore.location`).
    prefixed: BTreeSet<String>,
}

impl<'a> Props<'a> {
    pub(super) fn new(map: &'a BTreeMap<String, String>) -> Props<'a> {
        Props {
            map,
            read: BTreeSet::new(),
            prefixed: BTreeSet::new(),
        }
    }

    /// A listener's value of `key`: `listener.name.<listener>.<key>`, else `key`.
    pub(super) fn listener_value(&mut self, listener: &str, key: &'static str) -> Option<&'a str> {
        self.listener_only(listener, key).or_else(|| self.get(key))
    }

    /// Only `listener.name.<listener>.<key>` (the table's `key` counts as read).
    pub(super) fn listener_only(&mut self, listener: &str, key: &'static str) -> Option<&'a str> {
        self.read.insert(key);
        let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
        self.dynamic(prefixed)
    }

    /// A key whose name is built (listener and mechanism prefixes).
    pub(super) fn dynamic(&mut self, key: String) -> Option<&'a str> {
        let value = self.map.get(&key).map(String::as_str);
        self.prefixed.insert(key);
        value
    }

    /// The value as written, if any (any key: the `log.*` topic defaults are read here too).
    pub(super) fn get(&mut self, key: &'static str) -> Option<&'a str> {
        self.read.insert(key);
        self.map.get(key).map(String::as_str)
    }

    /// An integer key's value if it is set, checked against the table's range.
    pub(super) fn given_int(&mut self, key: &'static str) -> Result<Option<i64>, ConfigError> {
        let Type::Int(min, max) = keys::row(key).ty else {
            unreachable!("'{key}' is not an integer key")
        };
        self.get(key)
            .map(|v| parse_int(key, v, min, max))
            .transpose()
    }

    /// An integer key's value, or the table's default.
    pub(super) fn int(&mut self, key: &'static str) -> Result<i64, ConfigError> {
        Ok(match self.given_int(key)? {
            Some(n) => n,
            None => default(key)
                .parse()
                .unwrap_or_else(|_| unreachable!("default of '{key}' is not an integer")),
        })
    }

    pub(super) fn bool(&mut self, key: &'static str) -> Result<bool, ConfigError> {
        debug_assert_eq!(keys::row(key).ty, Type::Bool, "{key}");
        match self.get(key) {
            Some(v) => parse_bool(key, v),
            None => Ok(default(key) == "true"),
        }
    }

    /// A text key's value, or the table's default.
    pub(super) fn text(&mut self, key: &'static str) -> &'a str {
        self.get(key).unwrap_or(default(key))
    }

    /// Type-checks the keys Weir accepts but does not read (so a typo does not hide until Weir
    /// implements the key) and marks them read.
    fn check_accepted(&mut self) -> Result<(), ConfigError> {
        for row in BROKER_KEYS.iter().filter(|k| k.weir == Weir::Accepts) {
            if let Some(v) = self.get(row.name) {
                check(row.name, row.ty, v)?;
            }
        }
        Ok(())
    }
}

/// The table's default of `key` (every key the parser reads with a fallback has one).
fn default(key: &'static str) -> &'static str {
    keys::row(key)
        .default
        .unwrap_or_else(|| unreachable!("'{key}' has no default"))
}

/// Checks a value against its key's type and range.
pub fn check(key: &str, ty: Type, value: &str) -> Result<(), ConfigError> {
    match ty {
        Type::Int(min, max) => parse_int(key, value, min, max).map(drop),
        Type::Bool => parse_bool(key, value).map(drop),
        Type::Double(floor) => match (value.trim().parse::<f64>(), floor) {
            (Ok(x), Some(f)) if x > f => Ok(()),
            (Ok(_), Some(f)) | (Err(_), Some(f)) => {
                Err(invalid(key, value, format!("must be a number above {f}")))
            }
            (Ok(_), None) => Ok(()),
            (Err(_), None) => Err(invalid(key, value, "must be a number")),
        },
        Type::Text | Type::List | Type::Password => Ok(()),
    }
}

/// The keys the parser read itself (a test checks they are the ones the table says Weir uses).
pub(super) type Read = BTreeSet<&'static str>;

/// Builds and validates the configuration; also gives the warnings (unknown keys).
pub(super) fn parse(
    props: &BTreeMap<String, String>,
) -> Result<(ServerConfig, Vec<String>, Read), ConfigError> {
    // Checked first: a ZooKeeper-mode file fails on other keys too, and this is the real cause.
    if let Some((key, value)) = props.iter().find(|(k, _)| k.starts_with("zookeeper.")) {
        return Err(invalid(
            key,
            value,
            "ZooKeeper is not supported: Weir runs KRaft mode only",
        ));
    }
    let mut p = Props::new(props);
    let net = Network::parse(&mut p)?;

    let log_dirs = {
        let dirs = p.get("log.dirs").map(|v| ("log.dirs", v));
        let dir = p.text("log.dir");
        let (key, v) = dirs.unwrap_or(("log.dir", dir));
        parse_log_dirs(key, v)?
    };
    let cordoned_log_dirs = parse_cordoned(p.text("cordoned.log.dirs"), &log_dirs)?;
    let connections_max_idle_ms = match p.int("connections.max.idle.ms")? {
        ms if ms < 0 => u64::MAX,
        ms => ms as u64,
    };
    let flush_scheduler_ms = p.given_int("log.flush.scheduler.interval.ms")?;
    let log_flush_scheduler_interval_ms = p.int("log.flush.scheduler.interval.ms")? as u64;

    let group_min_session_timeout_ms = p.int("group.min.session.timeout.ms")? as i32;
    let group_max_session_timeout_ms = p.int("group.max.session.timeout.ms")? as i32;
    if group_min_session_timeout_ms > group_max_session_timeout_ms {
        return Err(invalid(
            "group.min.session.timeout.ms",
            &group_min_session_timeout_ms.to_string(),
            "must not exceed group.max.session.timeout.ms",
        ));
    }
    let consumer_session_timeout_ms = p.int("group.consumer.session.timeout.ms")? as i32;
    let consumer_heartbeat_interval_ms = p.int("group.consumer.heartbeat.interval.ms")? as i32;
    if consumer_heartbeat_interval_ms >= consumer_session_timeout_ms {
        return Err(invalid(
            "group.consumer.heartbeat.interval.ms",
            &consumer_heartbeat_interval_ms.to_string(),
            "must be below group.consumer.session.timeout.ms",
        ));
    }
    let group_config_bounds = groups::config_bounds(
        &mut p,
        consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms,
    )?;
    let group_consumer_assignors = groups::parse_assignors(p.text("group.consumer.assignors"))?;
    let topic_defaults = topic_defaults::read(&mut p, flush_scheduler_ms)?;
    // `listener.name.<l>.max.connection.creation.rate`: a listener's own rate.
    let mut listener_connection_creation_rates = BTreeMap::new();
    for l in net.listeners.iter().map(|e| e.listener_name.clone()) {
        let key = "max.connection.creation.rate";
        if let Some(v) = p.listener_only(&l, key) {
            let rate = parse_int(key, v, 0, i32::MAX as i64)? as u32;
            listener_connection_creation_rates.insert(l, rate);
        }
    }

    let config = ServerConfig {
        node_id: net.node_id,
        process_roles: net.process_roles,
        listeners: net.listeners,
        advertised_listeners: net.advertised_listeners,
        controller_listener_names: net.controller_listener_names,
        inter_broker_listener_name: net.inter_broker_listener_name,
        broker_rack: net.broker_rack,
        replica_selector: net.replica_selector,
        controller_quorum_voters: net.controller_quorum_voters,
        listener_security: net.listener_security,
        sasl_mechanism_inter_broker_protocol: p
            .get("sasl.mechanism.inter.broker.protocol")
            .map(str::to_string),
        sasl_mechanism_controller_protocol: p
            .get("sasl.mechanism.controller.protocol")
            .map(str::to_string),
        log_dirs,
        cordoned_log_dirs,
        num_partitions: p.int("num.partitions")? as i32,
        default_replication_factor: p.int("default.replication.factor")? as i16,
        auto_create_topics_enable: p.bool("auto.create.topics.enable")?,
        delete_topic_enable: p.bool("delete.topic.enable")?,
        socket_request_max_bytes: p.int("socket.request.max.bytes")? as usize,
        connections_max_idle_ms,
        quota_window_num: p.int("quota.window.num")? as u32,
        quota_window_size_seconds: p.int("quota.window.size.seconds")? as u32,
        max_connections: p.int("max.connections")? as u32,
        max_connections_per_ip: p.int("max.connections.per.ip")? as u32,
        max_connections_per_ip_overrides: per_ip_overrides(
            p.text("max.connections.per.ip.overrides"),
        )?,
        max_connection_creation_rate: p.int("max.connection.creation.rate")? as u32,
        listener_connection_creation_rates,
        log_retention_check_interval_ms: p.int("log.retention.check.interval.ms")? as u64,
        log_flush_offset_checkpoint_interval_ms: p.int("log.flush.offset.checkpoint.interval.ms")?
            as u64,
        log_flush_scheduler_interval_ms,
        offsets_topic_num_partitions: p.int("offsets.topic.num.partitions")? as i32,
        group_initial_rebalance_delay_ms: p.int("group.initial.rebalance.delay.ms")? as u64,
        fetch_max_bytes: p.int("fetch.max.bytes")? as usize,
        replica_fetch_max_bytes: p.int("replica.fetch.max.bytes")? as usize,
        replica_fetch_response_max_bytes: p.int("replica.fetch.response.max.bytes")? as usize,
        replica_fetch_wait_max_ms: p.int("replica.fetch.wait.max.ms")? as u64,
        replica_fetch_min_bytes: p.int("replica.fetch.min.bytes")? as i32,
        replica_fetch_backoff_ms: p.int("replica.fetch.backoff.ms")? as u64,
        producer_id_expiration_ms: p.int("producer.id.expiration.ms")?,
        producer_id_expiration_check_interval_ms: p
            .int("producer.id.expiration.check.interval.ms")?
            as u64,
        group_min_session_timeout_ms,
        group_max_session_timeout_ms,
        group_max_size: p.int("group.max.size")? as i32,
        group_consumer_session_timeout_ms: consumer_session_timeout_ms,
        group_consumer_heartbeat_interval_ms: consumer_heartbeat_interval_ms,
        group_consumer_assignors,
        group_consumer_max_size: p.int("group.consumer.max.size")? as i32,
        group_config_bounds,
        offsets_retention_minutes: p.int("offsets.retention.minutes")?,
        offsets_retention_check_interval_ms: p.int("offsets.retention.check.interval.ms")? as u64,
        offset_metadata_max_bytes: p.int("offset.metadata.max.bytes")? as i32,
        offsets_topic_replication_factor: p.int("offsets.topic.replication.factor")? as i16,
        offsets_topic_segment_bytes: p.int("offsets.topic.segment.bytes")? as i32,
        transaction_state_log_num_partitions: p.int("transaction.state.log.num.partitions")? as i32,
        transaction_state_log_replication_factor: p
            .int("transaction.state.log.replication.factor")?
            as i16,
        transaction_state_log_min_isr: p.int("transaction.state.log.min.isr")? as i32,
        transaction_max_timeout_ms: p.int("transaction.max.timeout.ms")? as i32,
        transaction_abort_interval_ms: p
            .int("transaction.abort.timed.out.transaction.cleanup.interval.ms")?
            as i32,
        transaction_remove_expired_interval_ms: p
            .int("transaction.remove.expired.transaction.cleanup.interval.ms")?
            as i32,
        transactional_id_expiration_ms: p.int("transactional.id.expiration.ms")? as i32,
        transaction_partition_verification_enable: p
            .bool("transaction.partition.verification.enable")?,
        fsync_before_ack: p.bool("weir.fsync.before.ack")?,
        metrics_address: metrics_address(&mut p)?,
        replica_lag_time_max_ms: p.int("replica.lag.time.max.ms")?,
        broker_heartbeat_interval_ms: p.int("broker.heartbeat.interval.ms")? as u64,
        broker_session_timeout_ms: p.int("broker.session.timeout.ms")? as u64,
        auto_leader_rebalance_enable: p.bool("auto.leader.rebalance.enable")?,
        leader_imbalance_check_interval_seconds: p.int("leader.imbalance.check.interval.seconds")?
            as u64,
        quorum_election_timeout_ms: p.int("controller.quorum.election.timeout.ms")? as u64,
        quorum_fetch_timeout_ms: p.int("controller.quorum.fetch.timeout.ms")? as u64,
        metadata_snapshot_max_bytes: p.int("metadata.log.max.record.bytes.between.snapshots")?
            as u64,
        metadata_snapshot_interval_ms: p.int("metadata.log.max.snapshot.interval.ms")? as u64,
        log_cleaner: cleaner_settings(&mut p)?,
        authorizer: authorizer_config(&mut p)?,
        #[cfg(any(madsim, test, feature = "planted"))]
        planted_bug: None,
        #[cfg(any(madsim, test))]
        fault_points: Default::default(),
        unclean_leader_election_enable: topic_defaults.unclean_leader_election_enable(),
        unclean_recovery_manager_enabled: p.bool("unclean.recovery.manager.enabled")?,
        unclean_recovery_timeout_ms: p.int("unclean.recovery.timeout.ms")?,
        topic_defaults,
    };
    let parsed = p.read.clone();
    p.check_accepted()?;
    config.check_roles(props)?;
    config.check_listener_security()?;

    let warnings = props
        .keys()
        .filter(|k| !p.read.contains(k.as_str()) && !p.prefixed.contains(k.as_str()))
        .map(|k| match FIELDS.iter().find(|f| f.0 == k) {
            // A topic-level key in server.properties is a common slip; point at the broker key.
            Some((_, broker_key, _)) => format!(
                "unknown config key '{k}' ignored (the broker-wide default is '{broker_key}')"
            ),
            None => format!("unknown config key '{k}' ignored"),
        })
        .collect();
    Ok((config, warnings, parsed))
}

/// `weir.metrics.address`: empty (the default) means no endpoint.
fn metrics_address(p: &mut Props) -> Result<Option<(String, u16)>, ConfigError> {
    const KEY: &str = "weir.metrics.address";
    let value = p.text(KEY).trim();
    if value.is_empty() {
        return Ok(None);
    }
    super::super::listener::parse_host_port(value)
        .map(Some)
        .map_err(|reason| invalid(KEY, value, reason))
}

/// The node's identity, roles, listeners and quorum: the keys KRaft checks together.
struct Network {
    node_id: i32,
    process_roles: Vec<Role>,
    listeners: Vec<Endpoint>,
    advertised_listeners: Vec<Endpoint>,
    controller_listener_names: Vec<String>,
    inter_broker_listener_name: String,
    broker_rack: Option<String>,
    replica_selector: Option<ReplicaSelector>,
    controller_quorum_voters: Vec<super::Voter>,
    listener_security: BTreeMap<String, super::security::ListenerSecurity>,
}

impl Network {
    fn parse(p: &mut Props<'_>) -> Result<Network, ConfigError> {
        let node_id = p.given_int("node.id")?;
        let broker_id = p.given_int("broker.id")?;
        let node_id = match (node_id, broker_id) {
            (Some(n), Some(b)) if n != b => {
                return Err(invalid(
                    "node.id",
                    &n.to_string(),
                    format!("must equal broker.id ({b}) when both are set"),
                ))
            }
            (None, Some(b)) => b as i32,
            _ => p.int("node.id")? as i32,
        };
        let process_roles = parse_roles(p.text("process.roles"))?;

        let listeners_raw = p.get("listeners");
        let listeners = parse_listeners(listeners_raw.unwrap_or(default("listeners")))?;
        let names_raw = p.text("controller.listener.names");
        let controller_listener_names = parse_names(names_raw);
        if controller_listener_names.is_empty() {
            return Err(invalid(
                "controller.listener.names",
                names_raw,
                "must name at least one listener",
            ));
        }
        let protocols = security_protocols(
            &listeners,
            listeners_raw.unwrap_or_default(),
            p.get("listener.security.protocol.map"),
        )?;
        // A broker declares the controller listener (and its security) without binding it.
        let declared: Vec<Endpoint> = controller_listener_names
            .iter()
            .filter(|n| !listeners.iter().any(|l| &l.listener_name == *n))
            .map(|n| Endpoint {
                listener_name: n.clone(),
                host: String::new(),
                port: 0,
            })
            .collect();
        let mut protocols = protocols;
        if let Some(map) = p.get("listener.security.protocol.map") {
            for e in &declared {
                if let Ok(found) = security_protocols(std::slice::from_ref(e), "", Some(map)) {
                    protocols.extend(found);
                }
            }
        }
        let secured: Vec<Endpoint> = listeners
            .iter()
            .cloned()
            .chain(
                declared
                    .into_iter()
                    .filter(|e| protocols.contains_key(&e.listener_name)),
            )
            .collect();
        let listener_security = super::security::read(p, &secured, &protocols)?;
        let inter_broker_listener_name = inter_broker_listener(p)?;

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
        Ok(Network {
            node_id,
            process_roles,
            listeners,
            advertised_listeners,
            controller_listener_names,
            inter_broker_listener_name,
            broker_rack,
            replica_selector,
            controller_quorum_voters,
            listener_security,
        })
    }
}

/// `inter.broker.listener.name`, or the older `security.inter.broker.protocol` (not both).
fn inter_broker_listener(p: &mut Props<'_>) -> Result<String, ConfigError> {
    let name_key = "inter.broker.listener.name";
    let inter_broker_name = p.get(name_key);
    if let Some(v) = p.get("security.inter.broker.protocol") {
        if inter_broker_name.is_some() {
            return Err(invalid(
                "security.inter.broker.protocol",
                v,
                "only one of inter.broker.listener.name and security.inter.broker.protocol \
                 may be set",
            ));
        }
        let protocol = v.trim().to_ascii_uppercase();
        if !["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"].contains(&protocol.as_str()) {
            return Err(invalid(
                "security.inter.broker.protocol",
                v,
                "must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
            ));
        }
        // Kafka: the listener named after the protocol.
        return Ok(protocol);
    }
    let name = inter_broker_name
        .unwrap_or(default(name_key))
        .trim()
        .to_ascii_uppercase();
    if name.is_empty() {
        return Err(invalid(
            name_key,
            inter_broker_name.unwrap_or_default(),
            "must not be empty",
        ));
    }
    Ok(name)
}

fn authorizer_config(p: &mut Props<'_>) -> Result<AuthorizerConfig, ConfigError> {
    let key = "authorizer.class.name";
    let enabled = match p.text(key).trim() {
        "" => false,
        STANDARD_AUTHORIZER => true,
        other => {
            return Err(invalid(
                key,
                other,
                format!("Weir implements only {STANDARD_AUTHORIZER} (or empty: no authorizer)"),
            ))
        }
    };
    let mut super_users = Vec::new();
    let v = p.text("super.users");
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
    Ok(AuthorizerConfig {
        enabled,
        super_users,
        allow_everyone_if_no_acl_found: p.bool("allow.everyone.if.no.acl.found")?,
    })
}

fn cleaner_settings(p: &mut Props<'_>) -> Result<CleanerSettings, ConfigError> {
    let key = "log.cleaner.io.max.bytes.per.second";
    let io_max_bytes_per_second = match p.get(key) {
        None => f64::MAX,
        Some(v) => {
            check(key, keys::row(key).ty, v)?;
            v.trim().parse::<f64>().unwrap_or(f64::MAX)
        }
    };
    Ok(CleanerSettings {
        enable: p.bool("log.cleaner.enable")?,
        // Accepted, but Weir runs one cleaner task whatever the value.
        threads: p.int("log.cleaner.threads")? as i32,
        // Kafka's floor: the map must hold at least one entry per thread (1 MiB in practice).
        dedupe_buffer_size: p.int("log.cleaner.dedupe.buffer.size")? as u64,
        backoff_ms: p.int("log.cleaner.backoff.ms")? as u64,
        io_max_bytes_per_second,
    })
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

/// `cordoned.log.dirs`: `*` alone, or directories of `log.dirs` (Kafka's rule).
fn parse_cordoned(value: &str, log_dirs: &[String]) -> Result<Vec<String>, ConfigError> {
    let key = "cordoned.log.dirs";
    let dirs: Vec<String> = parse_list(value).into_iter().map(str::to_string).collect();
    if dirs.iter().any(|d| d == "*") {
        if dirs.len() > 1 {
            return Err(invalid(
                key,
                value,
                "`*` cordons every directory and stands alone",
            ));
        }
        return Ok(dirs);
    }
    if let Some(d) = dirs.iter().find(|d| !log_dirs.contains(d)) {
        return Err(invalid(key, value, format!("'{d}' is not one of log.dirs")));
    }
    Ok(dirs)
}

/// `max.connections.per.ip.overrides`: `ip:N` pairs, comma-separated (an IPv6 address keeps
/// its colons: the count follows the last one). Kafka also resolves host names; Weir takes
/// addresses only and says so.
pub fn per_ip_overrides(text: &str) -> Result<BTreeMap<std::net::IpAddr, u32>, ConfigError> {
    let key = "max.connections.per.ip.overrides";
    let invalid = |reason: String| ConfigError::Invalid {
        key: key.to_string(),
        value: text.to_string(),
        reason,
    };
    let mut out = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (host, count) = item
            .rsplit_once(':')
            .ok_or_else(|| invalid(format!("'{item}' is not address:count")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let ip = host.parse().map_err(|_| {
            invalid(format!(
                "'{host}' is not an IP address (host names are not resolved)"
            ))
        })?;
        let count = count
            .parse::<u32>()
            .ok()
            .filter(|&n| n <= i32::MAX as u32)
            .ok_or_else(|| invalid(format!("'{count}' is not a connection count")))?;
        out.insert(ip, count);
    }
    Ok(out)
}
