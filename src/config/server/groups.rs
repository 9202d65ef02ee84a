//! The group coordinator's broker keys that are checked against each other at start.

use super::super::group_configs::GroupConfigBounds;
use super::super::{invalid, ConfigError};
use super::parse::Props;

/// The `group.consumer.min/max.*` and `group.share.*` keys, checked against each other and the
/// broker's own consumer session timeout and heartbeat interval as Kafka's
/// `GroupCoordinatorConfig` checks them at start.
pub(super) fn config_bounds(
    p: &mut Props<'_>,
    consumer_session_timeout_ms: i32,
    consumer_heartbeat_interval_ms: i32,
) -> Result<GroupConfigBounds, ConfigError> {
    let mut int = |key: &'static str| -> Result<i32, ConfigError> { Ok(p.int(key)? as i32) };
    let b = GroupConfigBounds {
        consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms,
        consumer_min_session_timeout_ms: int("group.consumer.min.session.timeout.ms")?,
        consumer_max_session_timeout_ms: int("group.consumer.max.session.timeout.ms")?,
        consumer_min_heartbeat_interval_ms: int("group.consumer.min.heartbeat.interval.ms")?,
        consumer_max_heartbeat_interval_ms: int("group.consumer.max.heartbeat.interval.ms")?,
        share_session_timeout_ms: int("group.share.session.timeout.ms")?,
        share_min_session_timeout_ms: int("group.share.min.session.timeout.ms")?,
        share_max_session_timeout_ms: int("group.share.max.session.timeout.ms")?,
        share_heartbeat_interval_ms: int("group.share.heartbeat.interval.ms")?,
        share_min_heartbeat_interval_ms: int("group.share.min.heartbeat.interval.ms")?,
        share_max_heartbeat_interval_ms: int("group.share.max.heartbeat.interval.ms")?,
        share_record_lock_duration_ms: int("group.share.record.lock.duration.ms")?,
        share_min_record_lock_duration_ms: int("group.share.min.record.lock.duration.ms")?,
        share_max_record_lock_duration_ms: int("group.share.max.record.lock.duration.ms")?,
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
pub(super) fn parse_assignors(value: &str) -> Result<Vec<String>, ConfigError> {
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
