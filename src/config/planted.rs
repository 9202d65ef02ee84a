//! Bugs the simulator plants on purpose, to show that its checker catches them, and the bug
//! planted in the current simulated run.
//!
//! This module exists only in the simulator build (`cfg(madsim)`) and in unit tests
//! (`cfg(test)`): the production binary has no switch, no field and no name for any of them.
//! No config file can turn one on.
//!
//! Plant sites in the broker read `ServerConfig::planted_bug`. Plant sites below it (the log,
//! the replica, the metadata store), which no `ServerConfig` reaches, ask [`active`]: threading
//! a test-only switch through every constructor would widen production signatures for nothing.
//! It is per thread, and that is per run: madsim runs a whole simulated world (every broker
//! node and every client) on one thread, and the simulator gives each seed a fresh thread.

use std::cell::Cell;

/// Bugs the simulator can plant on purpose, to show that its checker catches them. No config
/// file can turn one on: only code that builds a [`ServerConfig`](super::ServerConfig) by hand (the simulator).
/// The variants behind `cfg(madsim)` are the catalogue the catch-rate measurement plants
/// (`scripts/plant-catch-rate`); their plant sites ask [`active`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PlantedBug {
    /// With `weir.fsync.before.ack=true`, acknowledge a batch after syncing only what came
    /// before it (an off-by-one-batch durability bug).
    AckBeforeFsync,
    /// Serve stored batches without checking their CRC (bit rot reaches clients).
    NoReadCrc,
    /// Idempotence: remember only the last four batches per producer instead of five, so a
    /// retry of the fifth-newest batch is refused (or worse, re-appended) instead of answered.
    #[cfg(madsim)]
    DedupWindowFour,
    /// Idempotence: a retried batch recognised as a duplicate is appended again.
    #[cfg(madsim)]
    DuplicateAppended,
    /// Reads: serve up to the log end instead of the high watermark.
    #[cfg(madsim)]
    ReadPastHighWatermark,
    /// Retention: delete segments regardless of the high watermark.
    #[cfg(madsim)]
    RetentionPastHighWatermark,
    /// Metadata: a commit is applied and acknowledged without its fsync.
    #[cfg(madsim)]
    MetadataNotSynced,
    /// Flushing: the recovery point (and with durable reads, the high watermark) moves before
    /// the fsync has returned, so a failed or interrupted fsync leaves it too far ahead.
    #[cfg(madsim)]
    RecoveryPointBeforeFsync,
    /// Flushing: a flush syncs only the active segment, forgetting segments rolled since the
    /// last flush.
    #[cfg(madsim)]
    FlushActiveSegmentOnly,
    /// Flushing: new segment files' directory entries are never fsynced.
    #[cfg(madsim)]
    DirectoryNotSynced,
    /// Recovery: the cut of a torn tail is not fsynced before new data is written after it.
    #[cfg(madsim)]
    RecoveryCutNotSynced,
    /// Recovery: a producer-state snapshot is trusted even when it covers offsets the
    /// recovered log no longer holds.
    #[cfg(madsim)]
    SnapshotBeyondLog,
    /// Reads: the offset index lookup returns the entry after the target instead of before.
    #[cfg(madsim)]
    IndexLookupPastTarget,
}

impl PlantedBug {
    /// Every bug with the name a scenario file (or `sweep --plant`) uses for it.
    pub const NAMES: &'static [(&'static str, PlantedBug)] = &[
        ("ack-before-fsync", PlantedBug::AckBeforeFsync),
        ("no-read-crc", PlantedBug::NoReadCrc),
        #[cfg(madsim)]
        ("dedup-window-four", PlantedBug::DedupWindowFour),
        #[cfg(madsim)]
        ("duplicate-appended", PlantedBug::DuplicateAppended),
        #[cfg(madsim)]
        ("read-past-hw", PlantedBug::ReadPastHighWatermark),
        #[cfg(madsim)]
        ("retention-past-hw", PlantedBug::RetentionPastHighWatermark),
        #[cfg(madsim)]
        ("metadata-not-synced", PlantedBug::MetadataNotSynced),
        #[cfg(madsim)]
        (
            "recovery-point-before-fsync",
            PlantedBug::RecoveryPointBeforeFsync,
        ),
        #[cfg(madsim)]
        (
            "flush-active-segment-only",
            PlantedBug::FlushActiveSegmentOnly,
        ),
        #[cfg(madsim)]
        ("directory-not-synced", PlantedBug::DirectoryNotSynced),
        #[cfg(madsim)]
        ("recovery-cut-not-synced", PlantedBug::RecoveryCutNotSynced),
        #[cfg(madsim)]
        ("snapshot-beyond-log", PlantedBug::SnapshotBeyondLog),
        #[cfg(madsim)]
        (
            "index-lookup-past-target",
            PlantedBug::IndexLookupPastTarget,
        ),
    ];

    pub fn parse(name: &str) -> Result<PlantedBug, String> {
        PlantedBug::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, bug)| *bug)
            .ok_or_else(|| {
                let known: Vec<&str> = PlantedBug::NAMES.iter().map(|(n, _)| *n).collect();
                format!("unknown planted bug '{name}' (known: {})", known.join(", "))
            })
    }

    pub fn name(self) -> &'static str {
        PlantedBug::NAMES
            .iter()
            .find(|(_, bug)| *bug == self)
            .map(|(n, _)| *n)
            .expect("every bug is in NAMES")
    }
}

thread_local! {
    static ACTIVE: Cell<Option<PlantedBug>> = const { Cell::new(None) };
}

/// Sets the bug planted for the run on this thread (`None`: a correct broker).
pub fn set(bug: Option<PlantedBug>) {
    ACTIVE.with(|a| a.set(bug));
}

/// Whether `bug` is planted in the run on this thread.
pub fn active(bug: PlantedBug) -> bool {
    ACTIVE.with(|a| a.get()) == Some(bug)
}
