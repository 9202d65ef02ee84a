//! Broker and topic configuration, spelled the way Apache Kafka spells it.
//!
//! `weir serve --config server.properties` must accept a file written for Kafka in KRaft mode, so
//! the keys, defaults, precedence rules and validation here follow Kafka's `KafkaConfig` and
//! `LogConfig`. Three pieces:
//!
//! - [`parse_properties`] turns Java `.properties` text into a key/value map.
//! - [`ServerConfig`] is the validated broker configuration, parsed from the broker key table
//!   (`server/keys.rs`, every key declared once). Keys Kafka has but Weir ignores are
//!   accepted silently (after a type check); keys nobody knows come back as warnings for the
//!   caller to log, because a typo should be visible but must not stop a broker from starting.
//! - [`TopicConfig`] holds the per-topic settings. The broker's `log.*` keys supply the defaults;
//!   topic-level overrides (CreateTopics, AlterConfigs) are applied on top with
//!   [`TopicConfig::with_overrides`] and persist with the topic as their raw strings.
//! - [`dynamic_broker`] says which broker keys AlterConfigs may change at run time (KIP-226) and
//!   validates them; [`group_configs`] does the same for per-group configs (KIP-848).
//!
//! Everything is pure: the caller reads files and logs warnings.

pub mod dynamic_broker;
#[cfg(any(madsim, test))]
pub mod fault_points;
pub mod group_configs;
mod listener;
#[cfg(any(madsim, test, feature = "planted"))]
pub mod planted;
mod properties;
mod server;
mod topic;

use std::fmt;

#[cfg(any(madsim, test))]
pub use fault_points::FaultPoints;
pub use group_configs::{GroupConfigBounds, GroupConfigs};
pub use listener::{Endpoint, Voter};
#[cfg(any(madsim, test, feature = "planted"))]
pub use planted::PlantedBug;
pub use properties::parse_properties;
pub use server::{
    per_ip_overrides, AuthorizerConfig, ListenerSecurity, Outbound, ReplicaSelector, Role,
    SecurityProtocol, ServerConfig, RACK_AWARE_SELECTOR, STANDARD_AUTHORIZER,
};
pub use topic::{CleanupPolicy, CompressionType, TimestampType, TopicConfig};

/// Production builds have no planted bugs: every `planted!(config, Bug)` check is `false`, and
/// the bug's name need not even exist. See `planted.rs` for the simulator and test builds (and
/// the test-only `planted` feature, the real-process fault suite's planted binary).
#[cfg(not(any(madsim, test, feature = "planted")))]
#[macro_export]
macro_rules! planted {
    ($config:expr, $bug:ident) => {
        false
    };
}

#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// A value (or a combination of values) is not acceptable; `key` is the key to fix.
    Invalid {
        key: String,
        value: String,
        reason: String,
    },
    /// The properties text itself is malformed; `line` is 1-based.
    Syntax { line: usize, reason: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Invalid { key, value, reason } => {
                write!(f, "invalid value '{value}' for '{key}': {reason}")
            }
            ConfigError::Syntax { line, reason } => {
                write!(f, "syntax error on line {line}: {reason}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Parses an integer the way Kafka's `ConfigDef` does (trimmed, optional sign, decimal only) and
/// checks it against `min..=max`. Kafka's INT, SHORT and LONG types become the `max` bound, so an
/// out-of-range value fails here instead of being truncated by a later cast.
fn parse_int(key: &str, value: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
    const TYPE_BOUNDS: [(i64, i64); 3] = [
        (i16::MIN as i64, i16::MAX as i64),
        (i32::MIN as i64, i32::MAX as i64),
        (i64::MIN, i64::MAX),
    ];
    let open_max = TYPE_BOUNDS.iter().any(|&(_, m)| m == max);
    let open_min = TYPE_BOUNDS.iter().any(|&(m, _)| m == min);
    let full_range = if open_min {
        format!("must be an integer <= {max}")
    } else {
        format!("must be an integer between {min} and {max}")
    };
    let usual = match (open_min, open_max) {
        (true, true) if max == i64::MAX => "must be an integer".to_string(),
        (false, true) => format!("must be an integer >= {min}"),
        _ => full_range.clone(),
    };
    match value.trim().parse::<i64>() {
        Ok(n) if n > max => Err(invalid(key, value, full_range)),
        Ok(n) if n >= min => Ok(n),
        _ => Err(invalid(key, value, usual)),
    }
}

/// Kafka accepts `true`/`false` in any case, nothing else.
fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if v.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(invalid(key, value, "must be true or false"))
    }
}

/// Kafka's LIST type: comma-separated, items trimmed. Empty items are dropped because a trailing
/// comma is an easy slip that Kafka (via `String.split`) also tolerates.
fn parse_list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_messages() {
        let e = parse_int("log.segment.bytes", "x", 14, i32::MAX as i64).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value 'x' for 'log.segment.bytes': must be an integer >= 14"
        );
        let e = parse_int("log.segment.bytes", "3000000000", 14, i32::MAX as i64).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value '3000000000' for 'log.segment.bytes': \
             must be an integer between 14 and 2147483647"
        );
        let e = parse_int("k", "99999999999999999999", i64::MIN, i64::MAX).unwrap_err();
        assert!(e.to_string().ends_with("must be an integer"), "{e}");
        let e = parse_int("k", "-5", -1, i64::MAX).unwrap_err();
        assert!(e.to_string().ends_with("must be an integer >= -1"), "{e}");
        let e = parse_int("k", "7", 1, 5).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("must be an integer between 1 and 5"),
            "{e}"
        );
        assert_eq!(parse_int("k", " +12 ", 1, 20), Ok(12));
        for bad in ["", " ", "1.5", "1e3", "0x10", "1_000", "--1", "12abc", "١٢"] {
            assert!(parse_int("k", bad, i64::MIN, i64::MAX).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bools_and_lists() {
        assert_eq!(parse_bool("k", " TRUE "), Ok(true));
        assert_eq!(parse_bool("k", "False"), Ok(false));
        for bad in ["", "yes", "1", "t"] {
            assert!(parse_bool("k", bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_list(" a , b,,c, "), vec!["a", "b", "c"]);
        assert!(parse_list("").is_empty());
        assert!(parse_list(" , ").is_empty());
    }

    #[test]
    fn syntax_display() {
        let e = ConfigError::Syntax {
            line: 3,
            reason: "malformed \\uXXXX escape".into(),
        };
        assert_eq!(
            e.to_string(),
            "syntax error on line 3: malformed \\uXXXX escape"
        );
    }
}
