//! Per-group configs (KIP-848's GROUP config resource, Kafka's `GroupConfig`): the keys a group
//! may override, their validation against the broker's `group.consumer.*` / `group.share.*`
//! bounds, and the effective values DescribeConfigs reports. Overrides are stored as metadata
//! records on the group's name (a group need not exist to have them); the consumer-protocol
//! coordinator reads the session timeout and heartbeat interval from them at every heartbeat.

use std::collections::BTreeMap;

use super::{parse_int, ConfigError};

/// The broker's bounds and defaults for group configs (Kafka's `GroupCoordinatorConfig` and
/// `ShareGroupConfig` keys of the same names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfigBounds {
    /// `group.consumer.session.timeout.ms` (the default of `consumer.session.timeout.ms`).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.min.session.timeout.ms` / `group.consumer.max.session.timeout.ms`.
    pub consumer_min_session_timeout_ms: i32,
    pub consumer_max_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (the default of `consumer.heartbeat.interval.ms`).
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.min.heartbeat.interval.ms` / `group.consumer.max.heartbeat.interval.ms`.
    pub consumer_min_heartbeat_interval_ms: i32,
    pub consumer_max_heartbeat_interval_ms: i32,
    /// `group.share.session.timeout.ms` and its bounds. Weir has no share groups: these only
    /// validate and report the share keys.
    pub share_session_timeout_ms: i32,
    pub share_min_session_timeout_ms: i32,
    pub share_max_session_timeout_ms: i32,
    /// `group.share.heartbeat.interval.ms` and its bounds.
    pub share_heartbeat_interval_ms: i32,
    pub share_min_heartbeat_interval_ms: i32,
    pub share_max_heartbeat_interval_ms: i32,
    /// `group.share.record.lock.duration.ms` and its bounds.
    pub share_record_lock_duration_ms: i32,
    pub share_min_record_lock_duration_ms: i32,
    pub share_max_record_lock_duration_ms: i32,
}

/// The bounds `server.properties` gives when it sets none of the group keys (their defaults are
/// in the broker key table).
impl Default for GroupConfigBounds {
    fn default() -> GroupConfigBounds {
        super::ServerConfig::default_single_node().group_config_bounds
    }
}

pub const CONSUMER_SESSION_TIMEOUT: &str = "consumer.session.timeout.ms";
pub const CONSUMER_HEARTBEAT_INTERVAL: &str = "consumer.heartbeat.interval.ms";
const SHARE_SESSION_TIMEOUT: &str = "share.session.timeout.ms";
const SHARE_HEARTBEAT_INTERVAL: &str = "share.heartbeat.interval.ms";
const SHARE_RECORD_LOCK_DURATION: &str = "share.record.lock.duration.ms";
const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";

/// Every group config key, sorted (DescribeConfigs lists them in this order).
pub const GROUP_CONFIG_KEYS: &[&str] = &[
    CONSUMER_HEARTBEAT_INTERVAL,
    CONSUMER_SESSION_TIMEOUT,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_HEARTBEAT_INTERVAL,
    SHARE_RECORD_LOCK_DURATION,
    SHARE_SESSION_TIMEOUT,
];

/// A group's effective settings: its overrides over the broker's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfigs {
    pub consumer_session_timeout_ms: i32,
    pub consumer_heartbeat_interval_ms: i32,
    pub share_session_timeout_ms: i32,
    pub share_heartbeat_interval_ms: i32,
    pub share_record_lock_duration_ms: i32,
    pub share_auto_offset_reset: String,
}

impl GroupConfigBounds {
    /// The group's effective configs. Overrides were validated when written; one that no
    /// longer parses (it cannot, the key table only grows) falls back to the default.
    pub fn effective(&self, overrides: &BTreeMap<String, String>) -> GroupConfigs {
        let int = |key: &str, default: i32| {
            overrides
                .get(key)
                .and_then(|v| v.trim().parse::<i32>().ok())
                .unwrap_or(default)
        };
        GroupConfigs {
            consumer_session_timeout_ms: int(
                CONSUMER_SESSION_TIMEOUT,
                self.consumer_session_timeout_ms,
            ),
            consumer_heartbeat_interval_ms: int(
                CONSUMER_HEARTBEAT_INTERVAL,
                self.consumer_heartbeat_interval_ms,
            ),
            share_session_timeout_ms: int(SHARE_SESSION_TIMEOUT, self.share_session_timeout_ms),
            share_heartbeat_interval_ms: int(
                SHARE_HEARTBEAT_INTERVAL,
                self.share_heartbeat_interval_ms,
            ),
            share_record_lock_duration_ms: int(
                SHARE_RECORD_LOCK_DURATION,
                self.share_record_lock_duration_ms,
            ),
            share_auto_offset_reset: overrides
                .get(SHARE_AUTO_OFFSET_RESET)
                .cloned()
                .unwrap_or_else(|| "latest".to_string()),
        }
    }

    /// Checks a group's overrides as a whole (after a change), as Kafka's
    /// `GroupConfig.validate` does: known names only, each value of its type, within the
    /// broker's bounds, and each session timeout above its heartbeat interval. Keys left out
    /// take Kafka's built-in defaults for the pairwise checks, as there.
    pub fn validate(&self, overrides: &BTreeMap<String, String>) -> Result<(), String> {
        if let Some(key) = overrides
            .keys()
            .find(|k| !GROUP_CONFIG_KEYS.contains(&k.as_str()))
        {
            return Err(format!("Unknown group config name: {key}"));
        }
        let builtin = GroupConfigBounds::default();
        let int = |key: &str, min: i64, default: i32| -> Result<i32, String> {
            match overrides.get(key) {
                None => Ok(default),
                Some(v) => parse_int(key, v, min, i32::MAX as i64)
                    .map(|n| n as i32)
                    .map_err(|e: ConfigError| e.to_string()),
            }
        };
        let consumer_session = int(
            CONSUMER_SESSION_TIMEOUT,
            1,
            builtin.consumer_session_timeout_ms,
        )?;
        let consumer_heartbeat = int(
            CONSUMER_HEARTBEAT_INTERVAL,
            1,
            builtin.consumer_heartbeat_interval_ms,
        )?;
        let share_session = int(SHARE_SESSION_TIMEOUT, 1, builtin.share_session_timeout_ms)?;
        let share_heartbeat = int(
            SHARE_HEARTBEAT_INTERVAL,
            1,
            builtin.share_heartbeat_interval_ms,
        )?;
        let lock = int(
            SHARE_RECORD_LOCK_DURATION,
            1000,
            builtin.share_record_lock_duration_ms,
        )?;
        if let Some(v) = overrides.get(SHARE_AUTO_OFFSET_RESET) {
            if !matches!(v.trim(), "latest" | "earliest") {
                return Err(format!(
                    "Invalid value {v} for configuration {SHARE_AUTO_OFFSET_RESET}: String must be one of: latest, earliest"
                ));
            }
        }
        let within = |key: &str, v: i32, min: (i32, &str), max: (i32, &str)| {
            if v < min.0 {
                Err(format!("{key} must be greater than or equal to {}", min.1))
            } else if v > max.0 {
                Err(format!("{key} must be less than or equal to {}", max.1))
            } else {
                Ok(())
            }
        };
        within(
            CONSUMER_HEARTBEAT_INTERVAL,
            consumer_heartbeat,
            (
                self.consumer_min_heartbeat_interval_ms,
                "group.consumer.min.heartbeat.interval.ms",
            ),
            (
                self.consumer_max_heartbeat_interval_ms,
                "group.consumer.max.heartbeat.interval.ms",
            ),
        )?;
        within(
            CONSUMER_SESSION_TIMEOUT,
            consumer_session,
            (
                self.consumer_min_session_timeout_ms,
                "group.consumer.min.session.timeout.ms",
            ),
            (
                self.consumer_max_session_timeout_ms,
                "group.consumer.max.session.timeout.ms",
            ),
        )?;
        within(
            SHARE_HEARTBEAT_INTERVAL,
            share_heartbeat,
            (
                self.share_min_heartbeat_interval_ms,
                "group.share.min.heartbeat.interval.ms",
            ),
            (
                self.share_max_heartbeat_interval_ms,
                "group.share.max.heartbeat.interval.ms",
            ),
        )?;
        within(
            SHARE_SESSION_TIMEOUT,
            share_session,
            (
                self.share_min_session_timeout_ms,
                "group.share.min.session.timeout.ms",
            ),
            (
                self.share_max_session_timeout_ms,
                "group.share.max.session.timeout.ms",
            ),
        )?;
        within(
            SHARE_RECORD_LOCK_DURATION,
            lock,
            (
                self.share_min_record_lock_duration_ms,
                "group.share.min.record.lock.duration.ms",
            ),
            (
                self.share_max_record_lock_duration_ms,
                "group.share.max.record.lock.duration.ms",
            ),
        )?;
        if consumer_session <= consumer_heartbeat {
            return Err(format!(
                "{CONSUMER_SESSION_TIMEOUT} must be greater than {CONSUMER_HEARTBEAT_INTERVAL}"
            ));
        }
        if share_session <= share_heartbeat {
            return Err(format!(
                "{SHARE_SESSION_TIMEOUT} must be greater than {SHARE_HEARTBEAT_INTERVAL}"
            ));
        }
        Ok(())
    }
}

impl GroupConfigs {
    /// Every key with its value, in [`GROUP_CONFIG_KEYS`] order.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                CONSUMER_HEARTBEAT_INTERVAL,
                self.consumer_heartbeat_interval_ms.to_string(),
            ),
            (
                CONSUMER_SESSION_TIMEOUT,
                self.consumer_session_timeout_ms.to_string(),
            ),
            (
                SHARE_AUTO_OFFSET_RESET,
                self.share_auto_offset_reset.clone(),
            ),
            (
                SHARE_HEARTBEAT_INTERVAL,
                self.share_heartbeat_interval_ms.to_string(),
            ),
            (
                SHARE_RECORD_LOCK_DURATION,
                self.share_record_lock_duration_ms.to_string(),
            ),
            (
                SHARE_SESSION_TIMEOUT,
                self.share_session_timeout_ms.to_string(),
            ),
        ]
    }
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
    fn overrides_within_the_broker_bounds_are_accepted_and_take_effect() {
        let b = GroupConfigBounds::default();
        let o = map(&[
            ("consumer.session.timeout.ms", "50000"),
            ("consumer.heartbeat.interval.ms", "6000"),
        ]);
        assert_eq!(b.validate(&o), Ok(()));
        let e = b.effective(&o);
        assert_eq!(e.consumer_session_timeout_ms, 50_000);
        assert_eq!(e.consumer_heartbeat_interval_ms, 6_000);
        assert_eq!(e.share_session_timeout_ms, 45_000);
        assert_eq!(
            b.effective(&BTreeMap::new()).consumer_session_timeout_ms,
            45_000
        );
        let keys: Vec<&str> = e.entries().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, GROUP_CONFIG_KEYS);
        let mut sorted = GROUP_CONFIG_KEYS.to_vec();
        sorted.sort();
        assert_eq!(sorted, GROUP_CONFIG_KEYS);
    }

    #[test]
    fn unknown_names_bad_values_and_out_of_bounds_are_refused_with_kafkas_reasons() {
        let b = GroupConfigBounds::default();
        let err = |pairs: &[(&str, &str)]| b.validate(&map(pairs)).unwrap_err();
        assert_eq!(
            err(&[("consumer.sesion.timeout.ms", "50000")]),
            "Unknown group config name: consumer.sesion.timeout.ms"
        );
        assert!(err(&[("consumer.session.timeout.ms", "soon")]).contains("soon"));
        assert_eq!(
            err(&[("consumer.session.timeout.ms", "1000")]),
            "consumer.session.timeout.ms must be greater than or equal to \
             group.consumer.min.session.timeout.ms"
        );
        assert_eq!(
            err(&[("consumer.session.timeout.ms", "600000")]),
            "consumer.session.timeout.ms must be less than or equal to \
             group.consumer.max.session.timeout.ms"
        );
        assert_eq!(
            err(&[("consumer.heartbeat.interval.ms", "16000")]),
            "consumer.heartbeat.interval.ms must be less than or equal to \
             group.consumer.max.heartbeat.interval.ms"
        );
        assert!(err(&[("share.record.lock.duration.ms", "999")]).contains("999"));
        assert!(err(&[("share.auto.offset.reset", "none")]).contains("latest, earliest"));
        // Wider broker bounds let the pairwise rule speak.
        let wide = GroupConfigBounds {
            consumer_min_session_timeout_ms: 1,
            consumer_min_heartbeat_interval_ms: 1,
            ..GroupConfigBounds::default()
        };
        assert_eq!(
            wide.validate(&map(&[
                ("consumer.session.timeout.ms", "5000"),
                ("consumer.heartbeat.interval.ms", "5000"),
            ])),
            Err(
                "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
                    .to_string()
            )
        );
    }
}
