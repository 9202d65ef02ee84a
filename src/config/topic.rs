//! Per-topic configuration: Kafka's topic-level keys, their defaults and their validation.

use std::collections::BTreeMap;
use std::fmt;

use super::{invalid, parse_int, parse_list, ConfigError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupPolicy {
    Delete,
    Compact,
    CompactDelete,
}

impl CleanupPolicy {
    /// Accepts Kafka's list form in either order; repeats are harmless.
    fn parse(key: &str, value: &str) -> Result<CleanupPolicy, ConfigError> {
        let bad = || invalid(key, value, "must be delete, compact or compact,delete");
        let (mut delete, mut compact) = (false, false);
        for item in parse_list(value) {
            if item.eq_ignore_ascii_case("delete") {
                delete = true;
            } else if item.eq_ignore_ascii_case("compact") {
                compact = true;
            } else {
                return Err(bad());
            }
        }
        match (delete, compact) {
            (true, false) => Ok(CleanupPolicy::Delete),
            (false, true) => Ok(CleanupPolicy::Compact),
            (true, true) => Ok(CleanupPolicy::CompactDelete),
            (false, false) => Err(bad()),
        }
    }
}

impl fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    fn parse(key: &str, value: &str) -> Result<TimestampType, ConfigError> {
        let v = value.trim();
        if v.eq_ignore_ascii_case("CreateTime") {
            Ok(TimestampType::CreateTime)
        } else if v.eq_ignore_ascii_case("LogAppendTime") {
            Ok(TimestampType::LogAppendTime)
        } else {
            Err(invalid(key, value, "must be CreateTime or LogAppendTime"))
        }
    }
}

impl fmt::Display for TimestampType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        })
    }
}

/// `compression.type`: what a topic stores. `Producer` keeps each batch as its producer
/// compressed it; any other value makes the broker recompress batches that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionType {
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    const NAMES: [(&'static str, CompressionType); 6] = [
        ("producer", CompressionType::Producer),
        ("uncompressed", CompressionType::Uncompressed),
        ("gzip", CompressionType::Gzip),
        ("snappy", CompressionType::Snappy),
        ("lz4", CompressionType::Lz4),
        ("zstd", CompressionType::Zstd),
    ];

    fn parse(key: &str, value: &str) -> Result<CompressionType, ConfigError> {
        let v = value.trim();
        CompressionType::NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(v))
            .map(|&(_, t)| t)
            .ok_or_else(|| {
                invalid(
                    key,
                    value,
                    "must be one of producer, uncompressed, gzip, snappy, lz4, zstd",
                )
            })
    }
}

impl fmt::Display for CompressionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = CompressionType::NAMES
            .iter()
            .find(|(_, t)| t == self)
            .map(|(name, _)| *name)
            .expect("every type is named");
        f.write_str(name)
    }
}

/// KIP-390 level bounds, Kafka's: gzip 1..=9 or -1 (the JDK default), lz4 1..=17, zstd
/// -131072..=22.
pub const GZIP_LEVEL_DEFAULT: i32 = -1;
pub const LZ4_LEVEL_DEFAULT: i32 = 9;
pub const ZSTD_LEVEL_DEFAULT: i32 = 3;

/// How an inert topic key's value is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InertKind {
    /// An integer in `min..=max` (Kafka's INT or LONG).
    Int(i64, i64),
    /// A double in `0..=1`.
    Ratio,
    Bool,
    /// Kafka's LIST: any comma-separated text.
    List,
    /// One of these words (any case, surrounding blanks ignored), stored as spelled here.
    Choice(&'static [&'static str]),
}

/// Kafka topic keys Weir stores as validated text: most it accepts, stores and reports but does
/// not act on (preallocation, throttling, leader election, timestamp bounds), so a topic created
/// with Kafka's usual settings is accepted and DescribeConfigs shows what was set. The log
/// cleaner reads the compaction keys through [`TopicConfig::compaction`]. (topic key, broker key,
/// check, Kafka's default.) Sorted by topic key.
pub(super) const INERT: &[(&str, &str, InertKind, &str)] = &[
    (
        "delete.retention.ms",
        "log.cleaner.delete.retention.ms",
        InertKind::Int(0, i64::MAX),
        "86400000",
    ),
    (
        "file.delete.delay.ms",
        "log.segment.delete.delay.ms",
        InertKind::Int(0, i64::MAX),
        "60000",
    ),
    (
        "follower.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        InertKind::List,
        "",
    ),
    (
        "leader.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        InertKind::List,
        "",
    ),
    (
        "max.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        InertKind::Int(1, i64::MAX),
        "9223372036854775807",
    ),
    (
        "message.timestamp.after.max.ms",
        "log.message.timestamp.after.max.ms",
        InertKind::Int(0, i64::MAX),
        "9223372036854775807",
    ),
    (
        "message.timestamp.before.max.ms",
        "log.message.timestamp.before.max.ms",
        InertKind::Int(0, i64::MAX),
        "9223372036854775807",
    ),
    (
        "min.cleanable.dirty.ratio",
        "log.cleaner.min.cleanable.ratio",
        InertKind::Ratio,
        "0.5",
    ),
    (
        "min.compaction.lag.ms",
        "log.cleaner.min.compaction.lag.ms",
        InertKind::Int(0, i64::MAX),
        "0",
    ),
    ("preallocate", "log.preallocate", InertKind::Bool, "false"),
    (
        "segment.index.bytes",
        "log.index.size.max.bytes",
        InertKind::Int(4, i32::MAX as i64),
        "10485760",
    ),
    (
        "segment.jitter.ms",
        "log.roll.jitter.ms",
        InertKind::Int(0, i64::MAX),
        "0",
    ),
    (
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
        InertKind::Bool,
        "false",
    ),
    // KIP-966 part 2, read by the controller (`Controller::election_config`) when
    // `unclean.recovery.manager.enabled`; empty (the default), it follows
    // `unclean.leader.election.enable` as the KIP maps it (true: Aggressive, false: Balanced).
    (
        "unclean.recovery.strategy",
        "unclean.recovery.strategy",
        InertKind::Choice(&["", "None", "Balanced", "Aggressive"]),
        "",
    ),
];

/// The settings a topic carries. Broker-wide defaults come from [`super::ServerConfig`]'s
/// `log.*` keys; a topic's own overrides are applied with [`TopicConfig::with_overrides`].
/// [`Default`] gives Kafka's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    /// `retention.ms`; -1 keeps data forever.
    pub retention_ms: i64,
    /// `retention.bytes`, per partition; negative means unlimited.
    pub retention_bytes: i64,
    /// `segment.bytes`. Kafka's floor of 14 (the smallest legacy record) is kept so any file that
    /// Kafka accepts is accepted here; it is an INT in Kafka, so at most 2^31-1.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a segment this long after its first record even if it is not full.
    pub segment_ms: i64,
    /// `max.message.bytes`: the largest record batch accepted, after compression.
    pub max_message_bytes: i32,
    /// `min.insync.replicas`, checked for `acks=all` produces.
    pub min_insync_replicas: i32,
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `flush.messages`: fsync after this many records; `i64::MAX` leaves it to the OS.
    pub flush_messages: i64,
    /// `flush.ms`: fsync when the oldest unflushed record is this old; `i64::MAX` never.
    pub flush_ms: i64,
    /// `index.interval.bytes`: bytes of log between offset-index entries.
    pub index_interval_bytes: i32,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `compression.type`.
    pub compression_type: CompressionType,
    /// `compression.gzip.level`, `compression.lz4.level`, `compression.zstd.level` (KIP-390):
    /// used when the broker compresses for the topic.
    pub compression_gzip_level: i32,
    pub compression_lz4_level: i32,
    pub compression_zstd_level: i32,
    /// The [`INERT`] keys' values, in table order, as validated and normalised.
    pub inert: Vec<String>,
}

/// The compaction settings of a topic, read by the log cleaner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionConfig {
    /// `min.cleanable.dirty.ratio` (`log.cleaner.min.cleanable.ratio`).
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone stays readable after a pass kept it.
    pub delete_retention_ms: i64,
}

impl TopicConfig {
    fn inert_value(&self, key: &str) -> &str {
        let i = INERT
            .iter()
            .position(|e| e.0 == key)
            .expect("a key of the INERT table");
        &self.inert[i]
    }

    /// The compaction keys, parsed (they were validated when set).
    pub fn compaction(&self) -> CompactionConfig {
        let int = |key: &str, default: i64| self.inert_value(key).parse().unwrap_or(default);
        CompactionConfig {
            min_cleanable_dirty_ratio: self
                .inert_value("min.cleanable.dirty.ratio")
                .parse()
                .unwrap_or(0.5),
            min_compaction_lag_ms: int("min.compaction.lag.ms", 0),
            max_compaction_lag_ms: int("max.compaction.lag.ms", i64::MAX),
            delete_retention_ms: int("delete.retention.ms", 86_400_000),
        }
    }

    /// `unclean.leader.election.enable` (validated when set).
    pub fn unclean_leader_election_enable(&self) -> bool {
        self.inert_value("unclean.leader.election.enable") == "true"
    }

    /// `unclean.recovery.strategy` (validated when set).
    pub fn unclean_recovery_strategy(&self) -> &str {
        self.inert_value("unclean.recovery.strategy")
    }

    /// Whether the cleaner compacts this topic (`compact` or `compact,delete`).
    pub fn is_compacted(&self) -> bool {
        matches!(
            self.cleanup_policy,
            CleanupPolicy::Compact | CleanupPolicy::CompactDelete
        )
    }
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            // 1 MiB plus the record batch overhead, as in Kafka.
            max_message_bytes: 1024 * 1024 + 12,
            min_insync_replicas: 1,
            cleanup_policy: CleanupPolicy::Delete,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            index_interval_bytes: 4096,
            message_timestamp_type: TimestampType::CreateTime,
            compression_type: CompressionType::Producer,
            compression_gzip_level: GZIP_LEVEL_DEFAULT,
            compression_lz4_level: LZ4_LEVEL_DEFAULT,
            compression_zstd_level: ZSTD_LEVEL_DEFAULT,
            inert: INERT.iter().map(|i| i.3.to_string()).collect(),
        }
    }
}

/// One topic setting; lets the broker's `log.*` keys share parsing with the topic keys while
/// errors still name whichever key the user wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    CleanupPolicy,
    CompressionGzipLevel,
    CompressionLz4Level,
    CompressionType,
    CompressionZstdLevel,
    /// An [`INERT`] key, by index.
    Inert(usize),
    FlushMessages,
    FlushMs,
    IndexIntervalBytes,
    MaxMessageBytes,
    MessageTimestampType,
    MinInsyncReplicas,
    RetentionBytes,
    RetentionMs,
    SegmentBytes,
    SegmentMs,
}

/// Topic key, the broker key that sets its default, and the field. Sorted by topic key.
pub(super) const FIELDS: &[(&str, &str, Field)] = &[
    ("cleanup.policy", "log.cleanup.policy", Field::CleanupPolicy),
    (
        "compression.gzip.level",
        "compression.gzip.level",
        Field::CompressionGzipLevel,
    ),
    (
        "compression.lz4.level",
        "compression.lz4.level",
        Field::CompressionLz4Level,
    ),
    (
        "compression.type",
        "compression.type",
        Field::CompressionType,
    ),
    (
        "compression.zstd.level",
        "compression.zstd.level",
        Field::CompressionZstdLevel,
    ),
    (
        "delete.retention.ms",
        "log.cleaner.delete.retention.ms",
        Field::Inert(0),
    ),
    (
        "file.delete.delay.ms",
        "log.segment.delete.delay.ms",
        Field::Inert(1),
    ),
    (
        "flush.messages",
        "log.flush.interval.messages",
        Field::FlushMessages,
    ),
    ("flush.ms", "log.flush.interval.ms", Field::FlushMs),
    (
        "follower.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        Field::Inert(2),
    ),
    (
        "index.interval.bytes",
        "log.index.interval.bytes",
        Field::IndexIntervalBytes,
    ),
    (
        "leader.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        Field::Inert(3),
    ),
    (
        "max.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        Field::Inert(4),
    ),
    (
        "max.message.bytes",
        "message.max.bytes",
        Field::MaxMessageBytes,
    ),
    (
        "message.timestamp.after.max.ms",
        "log.message.timestamp.after.max.ms",
        Field::Inert(5),
    ),
    (
        "message.timestamp.before.max.ms",
        "log.message.timestamp.before.max.ms",
        Field::Inert(6),
    ),
    (
        "message.timestamp.type",
        "log.message.timestamp.type",
        Field::MessageTimestampType,
    ),
    (
        "min.cleanable.dirty.ratio",
        "log.cleaner.min.cleanable.ratio",
        Field::Inert(7),
    ),
    (
        "min.compaction.lag.ms",
        "log.cleaner.min.compaction.lag.ms",
        Field::Inert(8),
    ),
    (
        "min.insync.replicas",
        "min.insync.replicas",
        Field::MinInsyncReplicas,
    ),
    ("preallocate", "log.preallocate", Field::Inert(9)),
    (
        "retention.bytes",
        "log.retention.bytes",
        Field::RetentionBytes,
    ),
    ("retention.ms", "log.retention.ms", Field::RetentionMs),
    ("segment.bytes", "log.segment.bytes", Field::SegmentBytes),
    (
        "segment.index.bytes",
        "log.index.size.max.bytes",
        Field::Inert(10),
    ),
    ("segment.jitter.ms", "log.roll.jitter.ms", Field::Inert(11)),
    ("segment.ms", "log.roll.ms", Field::SegmentMs),
    (
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
        Field::Inert(12),
    ),
    (
        "unclean.recovery.strategy",
        "unclean.recovery.strategy",
        Field::Inert(13),
    ),
];

const I32_MAX: i64 = i32::MAX as i64;

impl TopicConfig {
    /// The topic-level keys Weir understands, sorted.
    pub const KEYS: &'static [&'static str] = &[
        "cleanup.policy",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "preallocate",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.jitter.ms",
        "segment.ms",
        "unclean.leader.election.enable",
        "unclean.recovery.strategy",
    ];

    /// Applies topic-level overrides (topic key names) on top of `self`, all or nothing.
    pub fn with_overrides(
        &self,
        overrides: &BTreeMap<String, String>,
    ) -> Result<TopicConfig, ConfigError> {
        let mut config = self.clone();
        for (key, value) in overrides {
            config.set(field_of(key, value)?, key, value)?;
        }
        Ok(config)
    }

    /// Checks one topic-level key and value without applying it (CreateTopics, AlterConfigs
    /// with `validate_only`).
    pub fn validate(key: &str, value: &str) -> Result<(), ConfigError> {
        TopicConfig::default().set(field_of(key, value)?, key, value)
    }

    /// Every topic-level key with its value rendered as Kafka renders it, in [`Self::KEYS`] order.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        FIELDS
            .iter()
            .map(|&(key, _, field)| (key, self.render(field)))
            .collect()
    }

    pub(super) fn render(&self, field: Field) -> String {
        match field {
            Field::CleanupPolicy => self.cleanup_policy.to_string(),
            Field::CompressionGzipLevel => self.compression_gzip_level.to_string(),
            Field::CompressionLz4Level => self.compression_lz4_level.to_string(),
            Field::CompressionType => self.compression_type.to_string(),
            Field::CompressionZstdLevel => self.compression_zstd_level.to_string(),
            Field::Inert(i) => self.inert[i].clone(),
            Field::FlushMessages => self.flush_messages.to_string(),
            Field::FlushMs => self.flush_ms.to_string(),
            Field::IndexIntervalBytes => self.index_interval_bytes.to_string(),
            Field::MaxMessageBytes => self.max_message_bytes.to_string(),
            Field::MessageTimestampType => self.message_timestamp_type.to_string(),
            Field::MinInsyncReplicas => self.min_insync_replicas.to_string(),
            Field::RetentionBytes => self.retention_bytes.to_string(),
            Field::RetentionMs => self.retention_ms.to_string(),
            Field::SegmentBytes => self.segment_bytes.to_string(),
            Field::SegmentMs => self.segment_ms.to_string(),
        }
    }

    /// Parses `value` into `field`; `key` is whichever name (topic or broker) the user wrote.
    /// Bounds are Kafka's validators and types.
    pub(super) fn set(&mut self, field: Field, key: &str, value: &str) -> Result<(), ConfigError> {
        let int = |min: i64, max: i64| parse_int(key, value, min, max);
        match field {
            Field::CleanupPolicy => self.cleanup_policy = CleanupPolicy::parse(key, value)?,
            Field::CompressionGzipLevel => {
                let level = int(i32::MIN as i64, I32_MAX)?;
                if level != GZIP_LEVEL_DEFAULT as i64 && !(1..=9).contains(&level) {
                    return Err(invalid(
                        key,
                        value,
                        "must be between 1 and 9 or equal to -1",
                    ));
                }
                self.compression_gzip_level = level as i32;
            }
            Field::CompressionLz4Level => self.compression_lz4_level = int(1, 17)? as i32,
            Field::CompressionType => self.compression_type = CompressionType::parse(key, value)?,
            Field::CompressionZstdLevel => self.compression_zstd_level = int(-131072, 22)? as i32,
            Field::Inert(i) => {
                self.inert[i] = match INERT[i].2 {
                    InertKind::Int(min, max) => int(min, max)?.to_string(),
                    InertKind::Bool => super::parse_bool(key, value)?.to_string(),
                    InertKind::Ratio => match value.trim().parse::<f64>() {
                        Ok(r) if (0.0..=1.0).contains(&r) => r.to_string(),
                        _ => return Err(invalid(key, value, "must be a number between 0 and 1")),
                    },
                    InertKind::List => parse_list(value).join(","),
                    InertKind::Choice(words) => words
                        .iter()
                        .find(|w| w.eq_ignore_ascii_case(value.trim()))
                        .map(|w| w.to_string())
                        .ok_or_else(|| {
                            let named: Vec<&str> =
                                words.iter().copied().filter(|w| !w.is_empty()).collect();
                            let empty = if words.contains(&"") { " or empty" } else { "" };
                            invalid(
                                key,
                                value,
                                format!("must be one of {}{empty}", named.join(", ")),
                            )
                        })?,
                }
            }
            Field::FlushMessages => self.flush_messages = int(1, i64::MAX)?,
            Field::FlushMs => self.flush_ms = int(0, i64::MAX)?,
            Field::IndexIntervalBytes => self.index_interval_bytes = int(0, I32_MAX)? as i32,
            Field::MaxMessageBytes => self.max_message_bytes = int(0, I32_MAX)? as i32,
            Field::MessageTimestampType => {
                self.message_timestamp_type = TimestampType::parse(key, value)?
            }
            Field::MinInsyncReplicas => self.min_insync_replicas = int(1, I32_MAX)? as i32,
            Field::RetentionBytes => self.retention_bytes = int(i64::MIN, i64::MAX)?,
            Field::RetentionMs => self.retention_ms = int(-1, i64::MAX)?,
            Field::SegmentBytes => self.segment_bytes = int(14, I32_MAX)? as u64,
            Field::SegmentMs => self.segment_ms = int(1, i64::MAX)?,
        }
        Ok(())
    }
}

fn field_of(key: &str, value: &str) -> Result<Field, ConfigError> {
    FIELDS
        .iter()
        .find(|&&(k, _, _)| k == key)
        .map(|&(_, _, field)| field)
        .ok_or_else(|| invalid(key, value, "unknown topic config"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_are_sorted_and_match_fields() {
        let mut sorted = TopicConfig::KEYS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, TopicConfig::KEYS);
        let field_keys: Vec<&str> = FIELDS.iter().map(|f| f.0).collect();
        assert_eq!(field_keys, TopicConfig::KEYS);
    }

    #[test]
    fn defaults_render_like_kafka() {
        let entries: BTreeMap<&str, String> =
            TopicConfig::default().entries().into_iter().collect();
        assert_eq!(entries.len(), TopicConfig::KEYS.len());
        assert_eq!(entries["retention.ms"], "604800000");
        assert_eq!(entries["retention.bytes"], "-1");
        assert_eq!(entries["segment.bytes"], "1073741824");
        assert_eq!(entries["segment.ms"], "604800000");
        assert_eq!(entries["max.message.bytes"], "1048588");
        assert_eq!(entries["min.insync.replicas"], "1");
        assert_eq!(entries["cleanup.policy"], "delete");
        assert_eq!(entries["flush.messages"], "9223372036854775807");
        assert_eq!(entries["flush.ms"], "9223372036854775807");
        assert_eq!(entries["index.interval.bytes"], "4096");
        assert_eq!(entries["message.timestamp.type"], "CreateTime");
        assert_eq!(entries["compression.type"], "producer");
        assert_eq!(entries["compression.gzip.level"], "-1");
        assert_eq!(entries["compression.lz4.level"], "9");
        assert_eq!(entries["compression.zstd.level"], "3");
    }

    #[test]
    fn overrides_apply_on_top() {
        let base = TopicConfig::default();
        let t = base
            .with_overrides(&overrides(&[
                ("retention.ms", "-1"),
                ("cleanup.policy", "delete, compact"),
                ("segment.bytes", "14"),
                ("message.timestamp.type", "LogAppendTime"),
                ("max.message.bytes", "0"),
            ]))
            .unwrap();
        assert_eq!(t.retention_ms, -1);
        assert_eq!(t.cleanup_policy, CleanupPolicy::CompactDelete);
        assert_eq!(t.segment_bytes, 14);
        assert_eq!(t.message_timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(t.max_message_bytes, 0);
        assert_eq!(t.retention_bytes, base.retention_bytes);
        assert_eq!(
            t.entries()[0],
            ("cleanup.policy", "compact,delete".to_string())
        );
        assert_eq!(base.with_overrides(&BTreeMap::new()).unwrap(), base);
    }

    #[test]
    fn overrides_are_all_or_nothing_and_name_the_key() {
        let err = TopicConfig::default()
            .with_overrides(&overrides(&[
                ("retention.ms", "5"),
                ("segment.bytes", "13"),
            ]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value '13' for 'segment.bytes': must be an integer >= 14"
        );
        let err = TopicConfig::default()
            .with_overrides(&overrides(&[("compression.codec", "lz4")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value 'lz4' for 'compression.codec': unknown topic config"
        );
    }

    #[test]
    fn cleanup_policies() {
        for (v, p) in [
            ("delete", CleanupPolicy::Delete),
            ("compact", CleanupPolicy::Compact),
            ("compact,delete", CleanupPolicy::CompactDelete),
            ("delete,compact", CleanupPolicy::CompactDelete),
            (" Compact , DELETE ", CleanupPolicy::CompactDelete),
            ("compact,compact", CleanupPolicy::Compact),
        ] {
            assert_eq!(CleanupPolicy::parse("cleanup.policy", v), Ok(p), "{v}");
        }
        for v in ["", ",", "none", "compact,none", "delete;compact"] {
            assert!(CleanupPolicy::parse("cleanup.policy", v).is_err(), "{v}");
        }
    }

    #[test]
    fn validate_edges() {
        let ok = [
            ("retention.ms", "-1"),
            ("retention.ms", "9223372036854775807"),
            ("retention.bytes", "-100"),
            ("segment.bytes", "2147483647"),
            ("segment.ms", "1"),
            ("flush.messages", "1"),
            ("flush.ms", "0"),
            ("index.interval.bytes", "0"),
            ("min.insync.replicas", "1"),
            ("message.timestamp.type", "createtime"),
            ("compression.type", "producer"),
            ("compression.type", "uncompressed"),
            ("compression.type", "gzip"),
            ("compression.type", "snappy"),
            ("compression.type", "lz4"),
            ("compression.type", "zstd"),
            ("compression.gzip.level", "-1"),
            ("compression.gzip.level", "1"),
            ("compression.gzip.level", "9"),
            ("compression.lz4.level", "1"),
            ("compression.lz4.level", "17"),
            ("compression.zstd.level", "-131072"),
            ("compression.zstd.level", "22"),
            ("delete.retention.ms", "900"),
            ("max.compaction.lag.ms", "3600000"),
            ("min.cleanable.dirty.ratio", "0.1"),
            ("preallocate", "TRUE"),
            ("leader.replication.throttled.replicas", "0:1, 1:1"),
        ];
        for (k, v) in ok {
            assert_eq!(TopicConfig::validate(k, v), Ok(()), "{k}={v}");
        }
        let bad = [
            ("retention.ms", "-2"),
            ("retention.ms", "9223372036854775808"),
            ("retention.ms", ""),
            ("segment.bytes", "2147483648"),
            ("segment.bytes", "-1"),
            ("segment.ms", "0"),
            ("flush.messages", "0"),
            ("flush.ms", "-1"),
            ("max.message.bytes", "-1"),
            ("max.message.bytes", "2147483648"),
            ("min.insync.replicas", "0"),
            ("index.interval.bytes", "1.5"),
            ("message.timestamp.type", "Now"),
            ("compression.type", "none"),
            ("compression.type", "brotli"),
            ("compression.gzip.level", "0"),
            ("compression.gzip.level", "10"),
            ("compression.gzip.level", "-2"),
            ("compression.lz4.level", "0"),
            ("compression.lz4.level", "18"),
            ("compression.zstd.level", "23"),
            ("compression.zstd.level", "-131073"),
            ("min.cleanable.dirty.ratio", "2"),
            ("max.compaction.lag.ms", "0"),
            ("preallocate", "yes"),
            ("segment.index.bytes", "3"),
            ("cleanup.policy", ""),
            ("Retention.ms", "1"),
            ("", ""),
        ];
        for (k, v) in bad {
            match TopicConfig::validate(k, v) {
                Err(ConfigError::Invalid { key, value, .. }) => {
                    assert_eq!((key.as_str(), value.as_str()), (k, v))
                }
                other => panic!("{k}={v}: {other:?}"),
            }
        }
    }
}
