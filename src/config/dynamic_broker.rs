//! Dynamic broker configs (KIP-226): the broker keys AlterConfigs may change at run time, per
//! broker (resource name = the broker id) or as the cluster-wide default (empty name), and how
//! they are validated. The changes are stored as metadata records; every node applies them to
//! its image. Precedence, highest first: per-broker, cluster default, `server.properties`,
//! Kafka's default (DescribeConfigs' sources 2, 3, 4, 5).
//!
//! Which keys are dynamic, and at which level, is the broker key table's `update` column
//! (`server/keys.rs`), following Kafka's `DynamicBrokerConfig`: listener and security keys per
//! broker only; thread pools, the log cleaner, connection limits and every `log.*` default a
//! topic inherits (the topic table's broker keys) cluster-wide or per broker. A key Weir reads from
//! `server.properties` that is not dynamic is read-only (INVALID_REQUEST, "Cannot update these
//! configs dynamically"); a key nobody knows is stored, as Kafka stores custom keys.
//!
//! Weir acts on the `log.*` topic defaults (a topic without its own override follows them at
//! once, see [`topic_defaults_with`]) and on the connection limits (`max.connections*`,
//! `max.connection.creation.rate` and its listener form: read from the image at each accept,
//! `broker::connection_slot`); the others are validated and stored only (Weir has no
//! SASL/SSL, its thread pools are not sized by these keys, and its cleaner settings are read at
//! start), as Kafka stores a listener config it can only apply on a reconfigure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use super::server::keys::{self, Type, Update};
use super::topic::{TopicConfig, FIELDS};

/// Listener-level keys that are cluster-wide even under a listener prefix.
const CLUSTER_LEVEL_LISTENER: &[&str] = &[
    "max.connection.creation.rate",
    "max.connections",
    "num.network.threads",
];

const LISTENER_PREFIX: &str = "listener.name.";

/// `listener.name.X.key` → `key`.
fn listener_base(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(LISTENER_PREFIX)?;
    rest.split_once('.').map(|(_, base)| base)
}

/// How a dynamic key may be set, its type and its default (what APPEND and SUBTRACT start
/// from): the broker key table's row, or a `log.*` topic default.
fn dynamic_entry(key: &str) -> Option<(Update, Type, &'static str)> {
    if let Some(k) = keys::lookup(key).filter(|k| k.update != Update::ReadOnly) {
        return Some((k.update, k.ty, k.default.unwrap_or("")));
    }
    if FIELDS.iter().any(|f| f.1 == key) {
        // Validated by the topic-config parser; `log.cleanup.policy` is Kafka's one LIST here.
        return Some(if key == "log.cleanup.policy" {
            (Update::ClusterWide, Type::List, "delete")
        } else {
            (Update::ClusterWide, Type::Text, "")
        });
    }
    None
}

/// Whether AlterConfigs may change `key` on a broker resource.
pub fn is_dynamic(key: &str) -> bool {
    dynamic_entry(key).is_some() || listener_base(key).is_some()
}

/// Kafka's PASSWORD-typed keys: DescribeConfigs reports them as sensitive, without a value
/// (also under a listener prefix, as Kafka matches them by suffix).
pub fn is_sensitive(key: &str) -> bool {
    keys::BROKER_KEYS
        .iter()
        .any(|k| k.ty == Type::Password && key.ends_with(k.name))
}

/// A broker key's row, also under a listener prefix.
fn row(key: &str) -> Option<&'static keys::BrokerKey> {
    keys::lookup(key).or_else(|| keys::lookup(listener_base(key)?))
}

/// A broker key's one line of documentation (DescribeConfigs with `include_documentation`).
pub fn documentation(key: &str) -> Option<&'static str> {
    row(key).map(|k| k.doc)
}

/// DescribeConfigs' `config_type` of a broker key: Kafka's `ConfigType` (BOOLEAN 1, STRING 2,
/// INT 3, SHORT 4, LONG 5, DOUBLE 6, LIST 7, PASSWORD 9); UNKNOWN (0) outside the table.
pub fn config_type(key: &str) -> i8 {
    match row(key).map(|k| k.ty) {
        None => 0,
        Some(Type::Bool) => 1,
        Some(Type::Text) => 2,
        Some(Type::Int(_, max)) if max <= i16::MAX as i64 => 4,
        Some(Type::Int(_, max)) if max == i32::MAX as i64 => 3,
        Some(Type::Int(..)) => 5,
        Some(Type::Double(_)) => 6,
        Some(Type::List) => 7,
        Some(Type::Password) => 9,
    }
}

/// Whether Weir acts on a dynamic value of `key` at once (the `log.*` defaults topics inherit);
/// the other dynamic keys are stored and reported only.
pub fn is_live(key: &str) -> bool {
    FIELDS.iter().any(|f| f.1 == key)
}

/// Every broker key Weir knows from `server.properties` (so a key that is not dynamic is known
/// to be read-only, not a custom one).
fn static_keys() -> &'static BTreeSet<&'static str> {
    static KEYS: OnceLock<BTreeSet<&'static str>> = OnceLock::new();
    KEYS.get_or_init(super::server::known_keys)
}

/// What a broker key is to APPEND and SUBTRACT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKey {
    /// Kafka's LIST type: the operations start from this default when the resource has no
    /// value of its own.
    List(&'static str),
    /// A key of another type (INVALID_CONFIG, "Config value append is not allowed").
    NotList,
    /// Nobody's key (INVALID_CONFIG, "Unknown config name").
    Unknown,
}

pub fn list_key(key: &str) -> ListKey {
    let base = listener_base(key).unwrap_or(key);
    match dynamic_entry(base) {
        Some((_, Type::List, default)) => ListKey::List(default),
        Some(_) => ListKey::NotList,
        // Read-only keys are refused later, by `validate`, as Kafka refuses them.
        None if static_keys().contains(base) => ListKey::List(""),
        None => ListKey::Unknown,
    }
}

fn check_value(key: &str, ty: Type, value: &str) -> Result<(), String> {
    match ty {
        Type::Double(_) if value.trim().parse::<f64>().is_err() => Err(format!(
            "Invalid value {value} for configuration {key}: Not a number of type DOUBLE"
        )),
        _ => super::server::check(key, ty, value).map_err(|e| e.to_string()),
    }
}

/// Checks a broker resource's dynamic configs as a whole (after a change), as Kafka's
/// `DynamicBrokerConfig.validateConfigs` does. `per_broker`: the resource names a broker (not
/// the cluster default). Every refusal is INVALID_REQUEST in Kafka (KAFKA-13609).
pub fn validate(configs: &BTreeMap<String, String>, per_broker: bool) -> Result<(), String> {
    let set = |keys: Vec<&str>| format!("Set({})", keys.join(", "));
    let read_only: Vec<&str> = configs
        .keys()
        .map(String::as_str)
        .filter(|k| !is_dynamic(k) && static_keys().contains(k))
        .collect();
    if !read_only.is_empty() {
        return Err(format!(
            "Cannot update these configs dynamically: {}",
            set(read_only)
        ));
    }
    let unprefixed: Vec<&str> = configs
        .keys()
        .map(String::as_str)
        .filter(|k| matches!(dynamic_entry(k), Some((Update::PerListener, _, _))))
        .collect();
    if !unprefixed.is_empty() {
        return Err(format!(
            "These security configs can be dynamically updated only per-listener using the \
             listener prefix: {}",
            set(unprefixed)
        ));
    }
    for (key, value) in configs {
        let base = listener_base(key).unwrap_or(key);
        if let Some((_, ty, _)) = dynamic_entry(base) {
            check_value(key, ty, value)?;
        }
    }
    // The `log.*` defaults must make a valid topic config.
    topic_defaults_with(&TopicConfig::default(), configs).map_err(|e| e.to_string())?;
    if !per_broker {
        let only_per_broker: Vec<&str> = configs
            .keys()
            .map(String::as_str)
            .filter(|k| match listener_base(k) {
                Some(base) => !CLUSTER_LEVEL_LISTENER.contains(&base),
                None => matches!(
                    dynamic_entry(k),
                    Some((Update::PerBroker | Update::PerListener, _, _))
                ),
            })
            .collect();
        if !only_per_broker.is_empty() {
            return Err(format!(
                "Cannot update these configs at default cluster level, broker id must be \
                 specified: {}",
                set(only_per_broker)
            ));
        }
    }
    Ok(())
}

/// The topic defaults with a broker resource's dynamic `log.*` keys on top (apply the cluster
/// default's first, then the broker's own). Other keys are ignored.
pub fn topic_defaults_with(
    base: &TopicConfig,
    configs: &BTreeMap<String, String>,
) -> Result<TopicConfig, super::ConfigError> {
    let logs: BTreeMap<String, String> = configs
        .iter()
        .filter(|(k, _)| is_live(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    super::server::topic_defaults::over(base.clone(), &logs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn what_librdkafka_sets_is_accepted_at_the_right_level() {
        let kerberos = map(&[("sasl.kerberos.min.time.before.relogin", "58000")]);
        assert_eq!(validate(&kerberos, true), Ok(()));
        assert!(validate(&kerberos, false)
            .unwrap_err()
            .starts_with("Cannot update these configs at default cluster level"));
        let both = map(&[
            ("background.threads", "9"),
            ("log.cleanup.policy", "delete,compact"),
        ]);
        assert_eq!(validate(&both, true), Ok(()));
        assert_eq!(validate(&both, false), Ok(()));
        // Custom keys are stored, as in Kafka.
        assert_eq!(validate(&map(&[("my.own.key", "x")]), false), Ok(()));
    }

    #[test]
    fn read_only_keys_and_bad_values_are_refused() {
        assert_eq!(
            validate(&map(&[("log.dirs", "/x"), ("node.id", "3")]), true),
            Err("Cannot update these configs dynamically: Set(log.dirs, node.id)".to_string())
        );
        assert!(validate(&map(&[("ssl.keystore.location", "/k")]), true)
            .unwrap_err()
            .contains("only per-listener"));
        assert_eq!(
            validate(
                &map(&[("listener.name.external.ssl.keystore.location", "/k")]),
                true
            ),
            Ok(())
        );
        assert!(validate(&map(&[("background.threads", "0")]), true).is_err());
        assert!(validate(&map(&[("log.retention.ms", "soon")]), true).is_err());
        assert!(validate(&map(&[("log.cleanup.policy", "")]), true).is_err());
    }

    #[test]
    fn list_defaults_for_append_and_subtract() {
        assert_eq!(list_key("log.cleanup.policy"), ListKey::List("delete"));
        assert_eq!(list_key("sasl.enabled.mechanisms"), ListKey::List("GSSAPI"));
        assert_eq!(list_key("background.threads"), ListKey::NotList);
        assert_eq!(list_key("no.such.key"), ListKey::Unknown);
    }

    #[test]
    fn log_defaults_apply_over_the_static_ones() {
        let base = TopicConfig {
            retention_ms: 1000,
            ..TopicConfig::default()
        };
        let t = topic_defaults_with(
            &base,
            &map(&[("log.segment.bytes", "4096"), ("background.threads", "9")]),
        )
        .unwrap();
        assert_eq!(t.segment_bytes, 4096);
        assert_eq!(t.retention_ms, 1000);
        assert!(is_live("log.retention.ms"));
        assert!(is_sensitive("listener.name.external.ssl.keystore.password"));
        assert!(!is_sensitive("ssl.keystore.location"));
        assert!(!is_live("background.threads"));
    }

    #[test]
    fn types_and_documentation_come_from_the_key_table() {
        assert_eq!(config_type("num.partitions"), 3);
        assert_eq!(config_type("default.replication.factor"), 4);
        assert_eq!(config_type("log.cleaner.backoff.ms"), 5);
        assert_eq!(
            config_type("listener.name.external.ssl.keystore.password"),
            9
        );
        assert_eq!(config_type("my.own.key"), 0);
        assert!(documentation("num.partitions").is_some_and(|d| d.contains("Partitions")));
        assert_eq!(documentation("my.own.key"), None);
    }
}
