//! The broker keys, declared once: name, type and range, default, whether and where AlterConfigs
//! may change it (Kafka's `DynamicBrokerConfig`), whether Weir acts on it, and one line of doc.
//!
//! This table drives the parser's bounds and defaults ([`super::parse`]), the type check of keys
//! Weir only accepts, DescribeConfigs' broker entries ([`BrokerKey::show`]), the dynamic-update
//! rules ([`crate::config::dynamic_broker`]) and README.md's broker key table (a test compares
//! them). The `log.*` keys that set topic defaults are not here: they live with the topic keys
//! (`topic::FIELDS`), which are their own table.

use super::{ReplicaSelector, ServerConfig, Voter, RACK_AWARE_SELECTOR, STANDARD_AUTHORIZER};

const I16: i64 = i16::MAX as i64;
const I32: i64 = i32::MAX as i64;
const I64: i64 = i64::MAX;

/// A key's type as Kafka's `ConfigDef` declares it, with the range Weir checks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Type {
    /// An integer in `min..=max`; `max` says Kafka's SHORT, INT or LONG.
    Int(i64, i64),
    Bool,
    /// A DOUBLE; `Some(floor)`: it must be above `floor`.
    Double(Option<f64>),
    /// STRING or CLASS: any text (a key Weir reads has its own check in the parser).
    Text,
    /// LIST: comma-separated. Its default is what APPEND and SUBTRACT start from.
    List,
    /// PASSWORD: never reported by DescribeConfigs (sensitive).
    Password,
}

/// Whether AlterConfigs may change a key on a BROKER resource, and where (KIP-226).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// Only in `server.properties` (INVALID_REQUEST, "Cannot update these configs dynamically").
    ReadOnly,
    /// Only with a broker id as the resource name.
    PerBroker,
    /// Per broker or as the cluster default (empty name).
    ClusterWide,
    /// Per broker, and only under a `listener.name.X.` prefix (Kafka's reconfigurable SSL keys).
    PerListener,
}

/// What Weir does with a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weir {
    /// Read and acted on; reported by DescribeConfigs.
    Uses,
    /// Accepted in `server.properties` and type-checked so stock Kafka files load quietly;
    /// stored when set dynamically; otherwise without effect.
    Accepts,
    /// Dynamic only: validated and stored when AlterConfigs sets it, and in `server.properties`
    /// an unknown key (warned), as Kafka's dynamic-only keys are. Mostly without effect (Weir
    /// has nothing behind them: tiered storage...); the doc says when Weir applies one (the
    /// replication throttle rates).
    Stores,
}

/// How DescribeConfigs shows a key's effective value; `None`: the key is not reported.
pub type Show = fn(&ServerConfig) -> Option<String>;

#[derive(Clone, Copy, Debug)]
pub struct BrokerKey {
    pub name: &'static str,
    pub ty: Type,
    /// The value when the key is absent, as DescribeConfigs renders it; `None` when there is
    /// no single value (the doc says what applies).
    pub default: Option<&'static str>,
    pub update: Update,
    pub weir: Weir,
    pub doc: &'static str,
    pub show: Option<Show>,
}

use Type::{Bool, Double, Int, List, Password, Text};
use Update::{ClusterWide, PerBroker, PerListener, ReadOnly};
use Weir::{Accepts, Stores, Uses};

const fn key(
    name: &'static str,
    ty: Type,
    default: Option<&'static str>,
    update: Update,
    weir: Weir,
    doc: &'static str,
) -> BrokerKey {
    BrokerKey {
        name,
        ty,
        default,
        update,
        weir,
        doc,
        show: None,
    }
}

/// A key Weir reads and acts on, read-only, reported by DescribeConfigs through `show`.
const fn used(name: &'static str, ty: Type, default: &'static str, doc: &'static str) -> BrokerKey {
    key(name, ty, Some(default), ReadOnly, Uses, doc)
}

/// A Kafka key Weir accepts (type-checked) and otherwise ignores.
const fn accepted(name: &'static str, ty: Type, update: Update, doc: &'static str) -> BrokerKey {
    key(name, ty, None, update, Accepts, doc)
}

/// A dynamic Kafka key Weir validates and stores but does not read from `server.properties`.
const fn stored(name: &'static str, ty: Type, update: Update, doc: &'static str) -> BrokerKey {
    key(name, ty, None, update, Stores, doc)
}

impl BrokerKey {
    const fn shows(mut self, show: Show) -> BrokerKey {
        self.show = Some(show);
        self
    }

    const fn dynamic(mut self, update: Update) -> BrokerKey {
        self.update = update;
        self
    }

    const fn default_is(mut self, default: &'static str) -> BrokerKey {
        self.default = Some(default);
        self
    }

    const fn no_default(mut self) -> BrokerKey {
        self.default = None;
        self
    }
}

fn join<T: ToString>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

fn voters(c: &ServerConfig, static_ids: bool) -> String {
    let v: Vec<&Voter> = c
        .controller_quorum_voters
        .iter()
        .filter(|v| (v.id >= 0) == static_ids)
        .collect();
    join(&v)
}

/// Every broker key Weir knows, sorted by name.
pub const BROKER_KEYS: &[BrokerKey] = &[
    used("advertised.listeners", List, "", "The addresses given to clients, as written (a port of 0 advertises the bound port, with 127.0.0.1 for a wildcard host; set it when `listeners` has a wildcard host and a fixed port); default: the non-controller listeners.")
        .no_default().dynamic(PerBroker).shows(|c| Some(join(&c.advertised_listeners))),
    used("allow.everyone.if.no.acl.found", Bool, "false", "With the authorizer on: allow an action on a resource no ACL names at all.")
        .shows(|c| Some(c.authorizer.allow_everyone_if_no_acl_found.to_string())),
    used("authorizer.class.name", Text, "", "Empty: no authorizer (everything allowed, ACL APIs answer SECURITY_DISABLED). `org.apache.kafka.metadata.authorizer.StandardAuthorizer`: ACLs in the metadata log, checked on every request (see [ACLs](#acls-and-scram-credentials)).")
        .shows(|c| Some(if c.authorizer.enabled { STANDARD_AUTHORIZER.to_string() } else { String::new() })),
    used("auto.create.topics.enable", Bool, "true", "Metadata for an unknown topic creates it.")
        .shows(|c| Some(c.auto_create_topics_enable.to_string())),
    used("auto.leader.rebalance.enable", Bool, "true", "The active controller moves leadership back to each partition's preferred replica every `leader.imbalance.check.interval.seconds`."),
    accepted("background.threads", Int(1, I32), ClusterWide, "Kafka's background thread pool; Weir has none to size."),
    used("broker.heartbeat.interval.ms", Int(1, I32), "2000", "How often a broker heartbeats the active controller."),
    used("broker.id", Int(0, I32), "", "The older spelling of `node.id`; must equal it when both are set.")
        .no_default().shows(|c| Some(c.node_id.to_string())),
    used("broker.rack", Text, "", "The broker's rack: registered, reported in Metadata, matched against a consumer's `client.rack` by the replica selector.")
        .no_default().shows(|c| c.broker_rack.clone()),
    used("broker.session.timeout.ms", Int(1, I32), "9000", "A broker silent this long is fenced by the controller."),
    used("connection.failed.authentication.delay.ms", Int(0, I32), "100", "A failed SASL authentication closes the connection after this delay (KIP-306). Listener-prefixable."),
    used("connections.max.idle.ms", Int(i64::MIN, I64), "600000", "Idle connections are closed after this long; -1: never.")
        .shows(|c| Some(match c.connections_max_idle_ms { u64::MAX => "-1".to_string(), ms => ms.to_string() })),
    used("connections.max.reauth.ms", Int(0, I64), "0", "SASL session lifetime: clients re-authenticate before it ends (KIP-368); a request after it closes the connection; 0: no expiry. Listener-prefixable.")
        .shows(|c| Some(c.broker_endpoints().first().and_then(|e| c.security_of(&e.listener_name).sasl?.reauth).map_or(0, |d| d.as_millis()).to_string())),
    accepted("controlled.shutdown.enable", Bool, ReadOnly, "Weir always shuts down in a controlled way on SIGTERM."),
    used("controller.listener.names", List, "CONTROLLER", "Listener names that carry the controller (quorum) protocol.")
        .shows(|c| Some(c.controller_listener_names.join(","))),
    used("controller.quorum.bootstrap.servers", List, "", "Quorum endpoints without ids (dynamic quorums); used when no voters are given, run as a quorum of one.")
        .no_default().shows(|c| Some(voters(c, false))),
    used("controller.quorum.election.timeout.ms", Int(1, I32), "1000", "Election timeouts are drawn from [T, 2T)."),
    used("controller.quorum.fetch.timeout.ms", Int(2, I32), "2000", "A quorum follower that has not heard from its leader this long stands for election."),
    used("controller.quorum.voters", List, "", "The static voters (`id@host:port`); none: the node is its own quorum of one.")
        .no_default().shows(|c| Some(voters(c, true))),
    used("cordoned.log.dirs", List, "", "KIP-1066: log directories (paths from `log.dirs`, or `*` for all) that take no new partitions; a broker with all of them cordoned gets none. Its replicas keep serving. Reported to the controller in heartbeats.")
        .dynamic(ClusterWide).shows(|c| Some(c.cordoned_log_dirs.join(","))),
    used("default.replication.factor", Int(1, I16), "1", "Replication factor for auto-created topics and CreateTopics without one.")
        .shows(|c| Some(c.default_replication_factor.to_string())),
    used("delete.topic.enable", Bool, "true", "Whether DeleteTopics is allowed.")
        .shows(|c| Some(c.delete_topic_enable.to_string())),
    accepted("early.start.listeners", Text, ReadOnly, "Kafka's early-start listeners; ignored by Weir."),
    used("fetch.max.bytes", Int(1024, I32), "57671680", "The most one fetch response carries (the first batch is returned whole, KIP-74).")
        .shows(|c| Some(c.fetch_max_bytes.to_string())),
    stored("follower.replication.throttled.rate", Int(0, I64), ClusterWide, "Bytes/s this broker's followers fetch for the replicas that topics' `follower.replication.throttled.replicas` list (a reassignment's throttle, KIP-73): applied, dynamic only; unlimited when unset.").default_is("9223372036854775807"),
    used("group.consumer.assignors", List, "uniform,range", "Server-side assignors of consumer-protocol groups, the first the default (Kafka's class names are accepted too).")
        .shows(|c| Some(c.group_consumer_assignors.join(","))),
    used("group.consumer.heartbeat.interval.ms", Int(1, I32), "5000", "How often consumer-protocol (KIP-848) members heartbeat; below the session timeout.")
        .shows(|c| Some(c.group_consumer_heartbeat_interval_ms.to_string())),
    used("group.consumer.max.heartbeat.interval.ms", Int(1, I32), "15000", "Upper bound of the consumer heartbeat interval, broker-wide and per group.")
        .shows(|c| Some(c.group_config_bounds.consumer_max_heartbeat_interval_ms.to_string())),
    used("group.consumer.max.session.timeout.ms", Int(1, I32), "60000", "Upper bound of the consumer session timeout, broker-wide and per group.")
        .shows(|c| Some(c.group_config_bounds.consumer_max_session_timeout_ms.to_string())),
    used("group.consumer.max.size", Int(1, I32), "2147483647", "Most members in one consumer-protocol group.")
        .shows(|c| Some(c.group_consumer_max_size.to_string())),
    used("group.consumer.min.heartbeat.interval.ms", Int(1, I32), "5000", "Lower bound of the consumer heartbeat interval, broker-wide and per group.")
        .shows(|c| Some(c.group_config_bounds.consumer_min_heartbeat_interval_ms.to_string())),
    used("group.consumer.min.session.timeout.ms", Int(1, I32), "45000", "Lower bound of the consumer session timeout, broker-wide and per group.")
        .shows(|c| Some(c.group_config_bounds.consumer_min_session_timeout_ms.to_string())),
    used("group.consumer.session.timeout.ms", Int(1, I32), "45000", "A consumer-protocol member silent this long is removed (the broker sets it, not the client).")
        .shows(|c| Some(c.group_consumer_session_timeout_ms.to_string())),
    accepted("group.coordinator.rebalance.protocols", List, ReadOnly, "Weir always serves both the classic and the consumer protocol."),
    used("group.initial.rebalance.delay.ms", Int(0, I32), "3000", "How long a group forming from empty waits for more members before its first rebalance.")
        .shows(|c| Some(c.group_initial_rebalance_delay_ms.to_string())),
    used("group.max.session.timeout.ms", Int(0, I32), "1800000", "Upper bound of a classic member's `session.timeout.ms` (INVALID_SESSION_TIMEOUT above).")
        .shows(|c| Some(c.group_max_session_timeout_ms.to_string())),
    used("group.max.size", Int(1, I32), "2147483647", "Most members in one classic group (GROUP_MAX_SIZE_REACHED); Weir also caps groups at 10 000.")
        .shows(|c| Some(c.group_max_size.to_string())),
    used("group.min.session.timeout.ms", Int(0, I32), "6000", "Lower bound of a classic member's `session.timeout.ms`.")
        .shows(|c| Some(c.group_min_session_timeout_ms.to_string())),
    used("group.share.heartbeat.interval.ms", Int(1, I32), "5000", "Default share heartbeat interval (Weir has no share groups: bounds the share keys of group configs).")
        .shows(|c| Some(c.group_config_bounds.share_heartbeat_interval_ms.to_string())),
    used("group.share.max.heartbeat.interval.ms", Int(1, I32), "15000", "Upper bound of the share heartbeat interval of group configs.")
        .shows(|c| Some(c.group_config_bounds.share_max_heartbeat_interval_ms.to_string())),
    used("group.share.max.record.lock.duration.ms", Int(1000, I32), "60000", "Upper bound of the share record lock duration of group configs.")
        .shows(|c| Some(c.group_config_bounds.share_max_record_lock_duration_ms.to_string())),
    used("group.share.max.session.timeout.ms", Int(1, I32), "60000", "Upper bound of the share session timeout of group configs.")
        .shows(|c| Some(c.group_config_bounds.share_max_session_timeout_ms.to_string())),
    used("group.share.min.heartbeat.interval.ms", Int(1, I32), "5000", "Lower bound of the share heartbeat interval of group configs.")
        .shows(|c| Some(c.group_config_bounds.share_min_heartbeat_interval_ms.to_string())),
    used("group.share.min.record.lock.duration.ms", Int(1000, I32), "15000", "Lower bound of the share record lock duration of group configs.")
        .shows(|c| Some(c.group_config_bounds.share_min_record_lock_duration_ms.to_string())),
    used("group.share.min.session.timeout.ms", Int(1, I32), "45000", "Lower bound of the share session timeout of group configs.")
        .shows(|c| Some(c.group_config_bounds.share_min_session_timeout_ms.to_string())),
    used("group.share.record.lock.duration.ms", Int(1000, I32), "30000", "Default share record lock duration of group configs.")
        .shows(|c| Some(c.group_config_bounds.share_record_lock_duration_ms.to_string())),
    used("group.share.session.timeout.ms", Int(1, I32), "45000", "Default share session timeout of group configs.")
        .shows(|c| Some(c.group_config_bounds.share_session_timeout_ms.to_string())),
    used("inter.broker.listener.name", Text, "PLAINTEXT", "The listener brokers reach each other on: a non-controller listener in `advertised.listeners`.")
        .shows(|c| Some(c.inter_broker_listener_name.clone())),
    used("leader.imbalance.check.interval.seconds", Int(1, I32), "300", "How often the controller looks for partitions led by other than their preferred replica."),
    stored("leader.replication.throttled.rate", Int(0, I64), ClusterWide, "Bytes/s this broker's leaders serve to the replicas that topics' `leader.replication.throttled.replicas` list (a reassignment's throttle, KIP-73): applied, dynamic only; unlimited when unset.").default_is("9223372036854775807"),
    used("listener.security.protocol.map", List, "", "`NAME:PROTOCOL` pairs: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's implicit mapping when unset). Every non-controller listener serves clients with its protocol; the inter-broker and controller listeners may be secured too (with PLAIN, not SCRAM, on the controller listener).")
        .no_default().dynamic(PerBroker).shows(|c| Some(protocol_map(c))),
    used("listeners", List, "PLAINTEXT://127.0.0.1:9092", "Addresses to bind: every non-controller listener serves clients, the controller listener the quorum. An empty host binds 0.0.0.0; port 0 lets the OS pick.")
        .dynamic(PerBroker).shows(|c| Some(join(&c.listeners))),
    used("log.cleaner.backoff.ms", Int(0, I64), "15000", "The cleaner's sleep when no log needs cleaning (read at start).")
        .dynamic(ClusterWide).shows(|c| Some(c.log_cleaner.backoff_ms.to_string())),
    stored("log.cleaner.dedupe.buffer.load.factor", Double(None), ClusterWide, "Kafka's offset-map load factor; Weir's map is sized by `log.cleaner.dedupe.buffer.size` alone."),
    used("log.cleaner.dedupe.buffer.size", Int(1024, I64), "134217728", "The cleaner's offset-map memory bound per pass (read at start).")
        .dynamic(ClusterWide).shows(|c| Some(c.log_cleaner.dedupe_buffer_size.to_string())),
    used("log.cleaner.enable", Bool, "true", "Whether the log cleaner compacts `compact` topics.")
        .shows(|c| Some(c.log_cleaner.enable.to_string())),
    stored("log.cleaner.io.buffer.size", Int(0, I32), ClusterWide, "Kafka's cleaner I/O buffers; Weir's are not sized by it."),
    used("log.cleaner.io.max.bytes.per.second", Double(Some(0.0)), "1.7976931348623157E308", "The cleaner's I/O rate limit, reads plus writes (read at start).")
        .dynamic(ClusterWide).shows(|c| Some(if c.log_cleaner.io_max_bytes_per_second == f64::MAX { "1.7976931348623157E308".to_string() } else { c.log_cleaner.io_max_bytes_per_second.to_string() })),
    used("log.cleaner.threads", Int(0, I32), "1", "Accepted, but Weir runs one cleaner task whatever the value.")
        .dynamic(ClusterWide).shows(|c| Some(c.log_cleaner.threads.to_string())),
    used("log.dir", Text, "./weir-data", "The data directory when `log.dirs` is not set."),
    used("log.dirs", List, "", "The data directories (JBOD, KIP-858): new partitions go to the one with the fewest; a failed one takes only its partitions offline; the first also holds the metadata log; default: `log.dir`.")
        .no_default().shows(|c| Some(c.log_dirs.join(","))),
    used("log.flush.offset.checkpoint.interval.ms", Int(1, I64), "60000", "How often recovery points and producer state are checkpointed.")
        .shows(|c| Some(c.log_flush_offset_checkpoint_interval_ms.to_string())),
    used("log.flush.scheduler.interval.ms", Int(1, I64), "1000", "How often `flush.ms` is checked (Kafka's default, Long.MAX_VALUE, would disable `flush.ms`); when set, also the default of `log.flush.interval.ms`.")
        .shows(|c| Some(c.log_flush_scheduler_interval_ms.to_string())),
    used("log.retention.check.interval.ms", Int(1, I64), "300000", "How often retention runs.")
        .shows(|c| Some(c.log_retention_check_interval_ms.to_string())),
    used("log.retention.hours", Int(-1, I32), "168", "`retention.ms` default in hours, when neither `log.retention.ms` nor `log.retention.minutes` is set."),
    used("log.retention.minutes", Int(-1, I32), "", "`retention.ms` default in minutes, when `log.retention.ms` is not set.").no_default(),
    used("log.roll.hours", Int(1, I32), "168", "`segment.ms` default in hours, when `log.roll.ms` is not set."),
    accepted("log.roll.jitter.hours", Int(0, I32), ReadOnly, "Kafka's segment roll jitter in hours; Weir does not jitter rolls."),
    used("max.connection.creation.rate", Int(0, I32), "2147483647", "Over this many new client connections per second (over the quota windows) the acceptor waits before taking the next, at most one window; a listener's own rate (`listener.name.<l>.`) applies on top, and alone on the controller listener. Dynamic.")
        .dynamic(ClusterWide).shows(|c| Some(c.max_connection_creation_rate.to_string())),
    used("max.connections", Int(0, I32), "2147483647", "Client connections over this many (across client listeners) are closed at accept; each listener also takes at most 10 000. Dynamic: a lowered limit leaves open connections.")
        .dynamic(ClusterWide).shows(|c| Some(c.max_connections.to_string())),
    used("max.connections.per.ip", Int(0, I32), "2147483647", "Client connections from one address over this many are closed at accept. Dynamic.")
        .dynamic(ClusterWide).shows(|c| Some(c.max_connections_per_ip.to_string())),
    used("max.connections.per.ip.overrides", Text, "", "`ip:N,ip:N`: per-address limits over `max.connections.per.ip` (addresses only, no host names). Dynamic.")
        .dynamic(ClusterWide).shows(|c| Some(c.max_connections_per_ip_overrides.iter().map(|(ip, n)| format!("{ip}:{n}")).collect::<Vec<_>>().join(","))),
    accepted("metadata.log.dir", Text, ReadOnly, "Weir keeps the metadata log (`__cluster_metadata-0`) in the data directory."),
    used("metadata.log.max.record.bytes.between.snapshots", Int(1, I64), "20971520", "A node snapshots its metadata image once this many bytes of records were applied since the last snapshot."),
    used("metadata.log.max.snapshot.interval.ms", Int(0, I64), "3600000", "Or once this long passed with anything new (0: never by time)."),
    stored("metric.reporters", List, ClusterWide, "Kafka's metrics plug-ins; Weir has none.").default_is(""),
    used("node.id", Int(0, I32), "1", "The node id, recorded in `meta.properties` on first start (a later start with another id is refused).")
        .shows(|c| Some(c.node_id.to_string())),
    accepted("num.io.threads", Int(1, I32), ClusterWide, "Kafka's request handler threads; Weir's are not sized by it."),
    accepted("num.network.threads", Int(1, I32), ClusterWide, "Kafka's network threads; Weir's are not sized by it."),
    used("num.partitions", Int(1, I32), "1", "Partitions of auto-created topics and CreateTopics without a count.")
        .shows(|c| Some(c.num_partitions.to_string())),
    accepted("num.recovery.threads.per.data.dir", Int(1, I32), ClusterWide, "Kafka's log recovery threads; Weir's recovery is not sized by it."),
    accepted("num.replica.fetchers", Int(1, I32), ClusterWide, "Kafka's replica fetcher threads; Weir's fetchers are not sized by it."),
    used("offset.metadata.max.bytes", Int(0, I32), "4096", "Longest commit metadata string (OFFSET_METADATA_TOO_LARGE above it).")
        .shows(|c| Some(c.offset_metadata_max_bytes.to_string())),
    accepted("offsets.commit.timeout.ms", Int(1, I32), ReadOnly, "Kafka's commit wait for the offsets topic's replicas; Weir waits for the high watermark."),
    used("offsets.retention.check.interval.ms", Int(1, I64), "600000", "How often offset expiry runs.")
        .shows(|c| Some(c.offsets_retention_check_interval_ms.to_string())),
    used("offsets.retention.minutes", Int(1, I32), "10080", "Committed offsets of a group empty this long expire.")
        .shows(|c| Some(c.offsets_retention_minutes.to_string())),
    used("offsets.topic.num.partitions", Int(1, I32), "50", "Partitions of `__consumer_offsets` when it is created (never changed after).")
        .shows(|c| Some(c.offsets_topic_num_partitions.to_string())),
    used("offsets.topic.replication.factor", Int(1, I16), "3", "Replication factor of `__consumer_offsets`, clamped to the live brokers when it is created; an offset commit counts once the high watermark passes it.")
        .shows(|c| Some(c.offsets_topic_replication_factor.to_string())),
    used("offsets.topic.segment.bytes", Int(1, I32), "104857600", "Segment size of `__consumer_offsets`.")
        .shows(|c| Some(c.offsets_topic_segment_bytes.to_string())),
    stored("principal.builder.class", Text, PerBroker, "Kafka's principal builder plug-in; Weir has no authentication."),
    used("process.roles", List, "broker,controller", "KRaft roles: `broker`, `controller` or both.")
        .shows(|c| Some(join(&c.process_roles))),
    used("producer.id.expiration.check.interval.ms", Int(1, I32), "600000", "How often idle producers are looked for.")
        .shows(|c| Some(c.producer_id_expiration_check_interval_ms.to_string())),
    used("producer.id.expiration.ms", Int(1, I32), "86400000", "An idempotent producer that has not written to a partition this long is forgotten there (read at start); each partition also keeps at most 100 000 producers, least recently active out first.")
        .dynamic(ClusterWide).shows(|c| Some(c.producer_id_expiration_ms.to_string())),
    accepted("queued.max.requests", Int(1, I32), ReadOnly, "Kafka's request queue bound; ignored by Weir."),
    used("quota.window.num", Int(1, I32), "11", "Client quota rates are measured over this many windows.")
        .shows(|c| Some(c.quota_window_num.to_string())),
    used("quota.window.size.seconds", Int(1, I32), "1", "The length of one client quota window.")
        .shows(|c| Some(c.quota_window_size_seconds.to_string())),
    stored("remote.fetch.max.wait.ms", Int(1, I32), ClusterWide, "Tiered storage; Weir has none."),
    stored("remote.list.offsets.request.timeout.ms", Int(1, I64), ClusterWide, "Tiered storage; Weir has none."),
    stored("remote.log.index.file.cache.total.size.bytes", Int(1, I64), ClusterWide, "Tiered storage; Weir has none."),
    stored("remote.log.manager.copy.max.bytes.per.second", Int(1, I64), ClusterWide, "Tiered storage; Weir has none."),
    stored("remote.log.manager.fetch.max.bytes.per.second", Int(1, I64), ClusterWide, "Tiered storage; Weir has none."),
    stored("replica.alter.log.dirs.io.max.bytes.per.second", Int(0, I64), ClusterWide, "Bytes/s this broker copies for replicas moving between its log directories (AlterReplicaLogDirs, KIP-113): applied, dynamic; unlimited when unset.").default_is("9223372036854775807"),
    used("replica.fetch.backoff.ms", Int(0, I32), "1000", "A follower's pause after a failed fetch of a partition.")
        .shows(|c| Some(c.replica_fetch_backoff_ms.to_string())),
    used("replica.fetch.max.bytes", Int(0, I32), "1048576", "Per partition, what a follower asks for; the leader also caps a replica's fetch at it.")
        .shows(|c| Some(c.replica_fetch_max_bytes.to_string())),
    used("replica.fetch.min.bytes", Int(1, I32), "1", "What a follower's fetch waits for at the leader.")
        .shows(|c| Some(c.replica_fetch_min_bytes.to_string())),
    used("replica.fetch.response.max.bytes", Int(0, I32), "10485760", "The same for a follower's whole fetch response.")
        .shows(|c| Some(c.replica_fetch_response_max_bytes.to_string())),
    used("replica.fetch.wait.max.ms", Int(0, I32), "500", "How long a follower's fetch may wait at the leader.")
        .shows(|c| Some(c.replica_fetch_wait_max_ms.to_string())),
    used("replica.lag.time.max.ms", Int(1, I32), "30000", "An in-sync follower not caught up with its leader for this long leaves the ISR.")
        .shows(|c| Some(c.replica_lag_time_max_ms.to_string())),
    used("replica.selector.class", Text, "", "Fetch from follower (KIP-392): only `org.apache.kafka.common.replica.RackAwareReplicaSelector`, which sends a Fetch v11+ consumer to an in-sync replica in its `client.rack`; unset, consumers are not redirected.")
        .no_default().shows(|c| c.replica_selector.map(|ReplicaSelector::RackAware| RACK_AWARE_SELECTOR.to_string())),
    used("sasl.enabled.mechanisms", List, "GSSAPI", "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (unsecured tokens only, Kafka's default validator: for tests) (no GSSAPI: a SASL listener must set it). Listener-prefixable (`listener.name.<name>.`).").dynamic(PerBroker),
    used("sasl.jaas.config", Password, "", "PLAIN's users as `PlainLoginModule required user_<name>=\"<password>\" ...;`, best as `listener.name.<name>.plain.sasl.jaas.config`; OAUTHBEARER's `unsecuredValidator*` options in `listener.name.<name>.oauthbearer.sasl.jaas.config`. SCRAM users are stored through the quorum (AlterUserScramCredentials).").no_default().dynamic(PerBroker),
    stored("sasl.kerberos.kinit.cmd", Text, PerBroker, "SASL; Weir has none."),
    stored("sasl.kerberos.min.time.before.relogin", Int(i64::MIN, I64), PerBroker, "SASL; Weir has none."),
    stored("sasl.kerberos.principal.to.local.rules", List, PerBroker, "SASL; Weir has none.").default_is("DEFAULT"),
    stored("sasl.kerberos.service.name", Text, PerBroker, "SASL; Weir has none."),
    stored("sasl.kerberos.ticket.renew.jitter", Double(None), PerBroker, "SASL; Weir has none."),
    stored("sasl.kerberos.ticket.renew.window.factor", Double(None), PerBroker, "SASL; Weir has none."),
    stored("sasl.login.refresh.buffer.seconds", Int(0, 3600), PerBroker, "SASL; Weir has none."),
    stored("sasl.login.refresh.min.period.seconds", Int(0, 900), PerBroker, "SASL; Weir has none."),
    stored("sasl.login.refresh.window.factor", Double(None), PerBroker, "SASL; Weir has none."),
    stored("sasl.login.refresh.window.jitter", Double(None), PerBroker, "SASL; Weir has none."),
    used("sasl.mechanism.controller.protocol", Text, "GSSAPI", "The mechanism this node logs in to a SASL controller listener with (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), with the `username`/`password` (OAUTHBEARER: `unsecuredLoginStringClaim_sub`) of that listener's JAAS entry for it.").no_default(),
    used("sasl.mechanism.inter.broker.protocol", Text, "GSSAPI", "The mechanism this broker logs in to a SASL inter-broker listener with (replica fetches, transaction markers), with the `username`/`password` (OAUTHBEARER: `unsecuredLoginStringClaim_sub`) of that listener's JAAS entry for it.").no_default(),
    used("sasl.server.max.receive.size", Int(1, I32), "524288", "Largest frame before SASL authentication completes; a larger one closes the connection."),
    used("security.inter.broker.protocol", Text, "PLAINTEXT", "The older way to name the inter-broker listener (the listener named after the protocol); not together with `inter.broker.listener.name`.").no_default(),
    accepted("share.coordinator.state.topic.min.isr", Int(1, I16), ReadOnly, "Share groups; Weir has none."),
    accepted("share.coordinator.state.topic.replication.factor", Int(1, I16), ReadOnly, "Share groups; Weir has none."),
    accepted("socket.listen.backlog.size", Int(1, I32), ReadOnly, "Kafka's accept backlog; ignored by Weir."),
    accepted("socket.receive.buffer.bytes", Int(-1, I32), ReadOnly, "Kafka's socket buffer size; ignored by Weir."),
    used("socket.request.max.bytes", Int(1, I32), "104857600", "Largest request frame; a larger one closes the connection.")
        .shows(|c| Some(c.socket_request_max_bytes.to_string())),
    accepted("socket.send.buffer.bytes", Int(-1, I32), ReadOnly, "Kafka's socket buffer size; ignored by Weir."),
    stored("ssl.cipher.suites", List, PerBroker, "TLS; Weir has none.").default_is(""),
    used("ssl.client.auth", Text, "none", "`none`, `requested` or `required`: client certificates on SSL listeners (on SASL_SSL only with the listener prefix, KIP-684).").dynamic(PerBroker),
    stored("ssl.enabled.protocols", List, PerBroker, "TLS; Weir has none.").default_is("TLSv1.2,TLSv1.3"),
    used("ssl.endpoint.identification.algorithm", Text, "https", "`https`: this node's TLS connections to other nodes check that the certificate names the host dialled; empty: trust store only. Listener-prefixable.").dynamic(PerBroker),
    stored("ssl.engine.factory.class", Text, PerBroker, "TLS; Weir has none."),
    used("ssl.key.password", Password, "", "Refused: decrypt the key (PEM, PKCS#8).").no_default().dynamic(PerListener),
    stored("ssl.keymanager.algorithm", Text, PerBroker, "TLS; Weir has none."),
    used("ssl.keystore.certificate.chain", Text, "", "Inline PEM certificate chain (KIP-651), with `ssl.keystore.key`. Listener-prefixable (`listener.name.<name>.`).").no_default().dynamic(PerListener),
    used("ssl.keystore.key", Password, "", "Inline PEM private key (PKCS#8, SEC1 or PKCS#1). Listener-prefixable (`listener.name.<name>.`).").no_default().dynamic(PerListener),
    used("ssl.keystore.location", Text, "", "One PEM file with the private key and the certificate chain of a TLS listener. Listener-prefixable (`listener.name.<name>.`).").no_default().dynamic(PerListener),
    used("ssl.keystore.password", Password, "", "Refused: PEM stores take no password.").no_default().dynamic(PerListener),
    used("ssl.keystore.type", Text, "PEM", "Only `PEM` (JKS and PKCS12 are refused with the command that converts them).").dynamic(PerListener),
    used("ssl.principal.mapping.rules", Text, "DEFAULT", "Kafka's rules from a client certificate's subject (RFC 2253) to a principal name: `RULE:pattern/replacement/[LU]`, `DEFAULT`. No back-references or lookaround.").dynamic(PerBroker),
    stored("ssl.protocol", Text, PerBroker, "TLS; Weir has none."),
    stored("ssl.provider", Text, PerBroker, "TLS; Weir has none."),
    stored("ssl.secure.random.implementation", Text, PerBroker, "TLS; Weir has none."),
    stored("ssl.trustmanager.algorithm", Text, PerBroker, "TLS; Weir has none."),
    used("ssl.truststore.certificates", Text, "", "Inline PEM CA certificates that client certificates must chain to. Listener-prefixable (`listener.name.<name>.`).").no_default().dynamic(PerListener),
    used("ssl.truststore.location", Text, "", "A PEM file of CA certificates that client certificates must chain to. Listener-prefixable (`listener.name.<name>.`).").no_default().dynamic(PerListener),
    used("ssl.truststore.password", Password, "", "Refused: PEM stores take no password.").no_default().dynamic(PerListener),
    used("ssl.truststore.type", Text, "PEM", "Only `PEM`.").dynamic(PerListener),
    used("super.users", Text, "", "`;`-separated principals (`User:admin`) the authorizer always allows.")
        .shows(|c| Some(c.authorizer.super_users.join(";"))),
    used("transaction.abort.timed.out.transaction.cleanup.interval.ms", Int(1, I32), "10000", "How often the transaction coordinator aborts transactions open past their timeout.")
        .shows(|c| Some(c.transaction_abort_interval_ms.to_string())),
    used("transaction.max.timeout.ms", Int(1, I32), "900000", "Longest `transaction.timeout.ms` a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it).")
        .shows(|c| Some(c.transaction_max_timeout_ms.to_string())),
    used("transaction.partition.verification.enable", Bool, "true", "KIP-890 part 1: a partition leader asks the transaction's coordinator (AddPartitionsToTxn v4, whatever node it is on) before a producer's first transactional write there is appended (transactions v2's implicit add is made either way).")
        .dynamic(ClusterWide).shows(|c| Some(c.transaction_partition_verification_enable.to_string())),
    used("transaction.remove.expired.transaction.cleanup.interval.ms", Int(1, I32), "3600000", "How often the transaction coordinator forgets transactional ids idle past `transactional.id.expiration.ms`.")
        .shows(|c| Some(c.transaction_remove_expired_interval_ms.to_string())),
    used("transaction.state.log.min.isr", Int(1, I32), "2", "`min.insync.replicas` of `__transaction_state`, clamped to its replication factor.")
        .shows(|c| Some(c.transaction_state_log_min_isr.to_string())),
    used("transaction.state.log.num.partitions", Int(1, I32), "50", "Partitions of `__transaction_state` when it is created (never changed after).")
        .shows(|c| Some(c.transaction_state_log_num_partitions.to_string())),
    used("transaction.state.log.replication.factor", Int(1, I16), "3", "Replication factor of `__transaction_state`, clamped to the live brokers when it is created.")
        .shows(|c| Some(c.transaction_state_log_replication_factor.to_string())),
    accepted("transaction.state.log.segment.bytes", Int(1, I32), ReadOnly, "Transactions; Weir has none."),
    used("transactional.id.expiration.ms", Int(1, I32), "604800000", "A transactional id with no transaction open and no update for this long is forgotten (its next producer gets a new producer id).")
        .shows(|c| Some(c.transactional_id_expiration_ms.to_string())),
    used("unclean.recovery.manager.enabled", Bool, "false", "KIP-966 part 2 (planned in Kafka): a partition whose ISR and ELR are empty is elected by comparing its replicas' last epochs and log ends (`unclean.recovery.strategy`), not by Kafka 4.x's last-known-leader rule.")
        .shows(|c| Some(c.unclean_recovery_manager_enabled.to_string())),
    used("unclean.recovery.timeout.ms", Int(0, I64), "300000", "With the recovery manager, how long a Balanced recovery waits for every last-known ELR member before electing the best of those back.")
        .shows(|c| Some(c.unclean_recovery_timeout_ms.to_string())),
    used("weir.fsync.before.ack", Bool, "false", "Weir's own: acknowledge a produce only after its data is fsynced (group commit).")
        .shows(|c| Some(c.fsync_before_ack.to_string())),
    used("weir.metrics.address", Text, "", "Weir's own: `host:port` of the HTTP endpoint serving Prometheus metrics at `/metrics`; empty: no endpoint.")
        .shows(|c| Some(c.metrics_address.as_ref().map(|(h, p)| format!("{h}:{p}")).unwrap_or_default())),
];

fn protocol_map(c: &ServerConfig) -> String {
    let names: std::collections::BTreeSet<&str> = c
        .listeners
        .iter()
        .map(|l| l.listener_name.as_str())
        .collect();
    names
        .into_iter()
        .map(|n| format!("{n}:PLAINTEXT"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The row of `name`, if it is a broker key of this table.
pub fn lookup(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS
        .binary_search_by(|k| k.name.cmp(name))
        .ok()
        .map(|i| &BROKER_KEYS[i])
}

/// The row of a key the parser reads: a key missing from the table is a bug in Weir.
pub(super) fn row(name: &str) -> &'static BrokerKey {
    lookup(name).unwrap_or_else(|| panic!("broker key '{name}' is not in BROKER_KEYS"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::parse::{check, parse};
    use super::*;

    #[test]
    fn sorted_for_binary_search() {
        let names: Vec<&str> = BROKER_KEYS.iter().map(|k| k.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    #[test]
    fn defaults_pass_their_own_checks() {
        for k in BROKER_KEYS {
            if let Some(d) = k.default {
                check(k.name, k.ty, d).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }

    /// The parser reads exactly the keys the table says Weir uses; the rest are type-checked
    /// only. A key added to one and not the other fails here.
    #[test]
    fn the_parser_reads_what_the_table_says_weir_uses() {
        let (_, _, read) = parse(&BTreeMap::new()).unwrap();
        for k in BROKER_KEYS {
            let uses = k.weir == Weir::Uses;
            assert_eq!(read.contains(k.name), uses, "{} (uses: {uses})", k.name);
        }
    }

    #[test]
    fn only_keys_weir_uses_are_reported() {
        for k in BROKER_KEYS.iter().filter(|k| k.show.is_some()) {
            assert_eq!(k.weir, Weir::Uses, "{}", k.name);
        }
    }
}
