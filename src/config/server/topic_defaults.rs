//! The broker-wide topic defaults: the `log.*` broker keys of the topic table (`topic::FIELDS`),
//! plus the older hour and minute spellings Kafka still accepts for two of them.

use std::collections::BTreeMap;

use super::super::topic::{TopicConfig, FIELDS};
use super::super::ConfigError;
use super::parse::Props;

/// The topic defaults `server.properties` sets. `flush_scheduler_ms`: an explicit
/// `log.flush.scheduler.interval.ms`.
pub(super) fn read(
    p: &mut Props<'_>,
    flush_scheduler_ms: Option<i64>,
) -> Result<TopicConfig, ConfigError> {
    read_over(TopicConfig::default(), p, flush_scheduler_ms)
}

/// `base` with the broker `log.*` keys of `map` on top (dynamic broker configs).
pub(in crate::config) fn over(
    base: TopicConfig,
    map: &BTreeMap<String, String>,
) -> Result<TopicConfig, ConfigError> {
    read_over(base, &mut Props::new(map), None)
}

fn read_over(
    mut topic: TopicConfig,
    p: &mut Props<'_>,
    flush_scheduler_ms: Option<i64>,
) -> Result<TopicConfig, ConfigError> {
    for &(_, key, field) in FIELDS {
        if let Some(v) = p.get(key) {
            topic.set(field, key, v)?;
        }
    }

    // The precise key wins; every key is still parsed, so a bad one fails even when a more
    // precise one is set.
    let scale = |n: i64, unit: i64| if n < 0 { -1 } else { n * unit };
    let minutes = p
        .given_int("log.retention.minutes")?
        .map(|m| scale(m, 60_000));
    let hours = p
        .given_int("log.retention.hours")?
        .map(|h| scale(h, 3_600_000));
    if !p.map.contains_key("log.retention.ms") {
        if let Some(ms) = minutes.or(hours) {
            topic.retention_ms = ms;
        }
    }
    let roll_hours = p.given_int("log.roll.hours")?.map(|h| h * 3_600_000);
    if let (false, Some(ms)) = (p.map.contains_key("log.roll.ms"), roll_hours) {
        topic.segment_ms = ms;
    }

    // Kafka falls back to the scheduler interval when log.flush.interval.ms is unset. Only an
    // explicit interval counts: Weir's own default scheduler interval must not turn on
    // time-based flushing.
    if let (false, Some(ms)) = (
        p.map.contains_key("log.flush.interval.ms"),
        flush_scheduler_ms,
    ) {
        topic.flush_ms = ms;
    }
    Ok(topic)
}
