//! Bugs the simulator plants on purpose, to show that its checker catches them.
//!
//! This module exists only in the simulator build (`cfg(madsim)`) and in unit tests
//! (`cfg(test)`): the production binary has no switch, no field and no name for any of them.
//! No config file can turn one on; only code that builds a [`ServerConfig`] by hand can.
//!
//! Planting a new bug takes two lines: a variant here (with its name in [`PlantedBug::NAMES`]),
//! and at the plant site `if planted!(config, Variant) { ... }`. Outside these builds the
//! [`planted!`] macro is the constant `false`, so the buggy branch is dead code and the
//! optimiser removes it.
//!
//! [`ServerConfig`]: super::ServerConfig

/// One plantable bug; its scenario name (kebab-case) is in [`PlantedBug::NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedBug {
    /// With `weir.fsync.before.ack=true`, acknowledge a batch after syncing only what came
    /// before it (an off-by-one-batch durability bug).
    AckBeforeFsync,
    /// Serve stored batches without checking their CRC (bit rot reaches clients).
    NoReadCrc,
    /// Never fsync a partition directory after creating a segment in it (a new segment's
    /// name may vanish at power loss, with its fsynced data).
    SkipDirFsync,
    /// Advance the recovery point (and so the high watermark and group commit) before the
    /// fsync it stands for, instead of after.
    RecoveryPointBeforeFsync,
    /// Keep serving after a failed fsync (the fsyncgate mistake: a later fsync "succeeds"
    /// over pages the failure dropped).
    ServeAfterFsyncError,
}

impl PlantedBug {
    /// Every bug with the name a scenario file uses for it.
    pub const NAMES: &'static [(&'static str, PlantedBug)] = &[
        ("ack-before-fsync", PlantedBug::AckBeforeFsync),
        ("no-read-crc", PlantedBug::NoReadCrc),
        ("skip-dir-fsync", PlantedBug::SkipDirFsync),
        (
            "recovery-point-before-fsync",
            PlantedBug::RecoveryPointBeforeFsync,
        ),
        ("serve-after-fsync-error", PlantedBug::ServeAfterFsyncError),
    ];

    pub fn parse(name: &str) -> Result<PlantedBug, String> {
        match PlantedBug::NAMES.iter().find(|(n, _)| *n == name) {
            Some(&(_, bug)) => Ok(bug),
            None => {
                let known: Vec<&str> = PlantedBug::NAMES.iter().map(|(n, _)| *n).collect();
                Err(format!(
                    "unknown planted bug '{name}' (known: {})",
                    known.join(", ")
                ))
            }
        }
    }

    pub fn name(self) -> &'static str {
        let found = PlantedBug::NAMES.iter().find(|(_, b)| *b == self);
        found.map(|(n, _)| *n).expect("every variant is in NAMES")
    }
}

/// `planted!(config, Variant)`: is this bug planted in this broker? `config` is a
/// [`ServerConfig`](super::ServerConfig) (or a reference to one).
#[macro_export]
macro_rules! planted {
    ($config:expr, $bug:ident) => {
        $config.planted_bug == Some($crate::config::PlantedBug::$bug)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &(name, bug) in PlantedBug::NAMES {
            assert_eq!(PlantedBug::parse(name), Ok(bug));
            assert_eq!(bug.name(), name);
        }
        let e = PlantedBug::parse("nope").unwrap_err();
        assert!(e.contains("ack-before-fsync, no-read-crc"), "{e}");
    }

    #[test]
    fn macro_reads_the_config() {
        let mut config = crate::config::ServerConfig::default_single_node();
        assert!(!planted!(config, NoReadCrc));
        config.planted_bug = Some(PlantedBug::NoReadCrc);
        assert!(planted!(config, NoReadCrc));
        assert!(!planted!(&config, AckBeforeFsync));
    }
}
