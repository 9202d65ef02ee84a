//! Narrow-window faults (FoundationDB's BUGGIFY, aimed at the disk): at chosen points of the
//! broker's disk operations — right before or after an fsync, after a directory fsync, at a
//! segment roll, at a rename, at a recovery truncation, anywhere during start-up — the simulated
//! disk may crash the machine or cut its power at that very instant, or delay the operation.
//! The broker names none of these points: the simulator's disk (`disk.rs`) recognizes them from
//! the operation and its path, so production code pays nothing.
//!
//! This file holds the scenario's `[nemesis.buggify]` table; the striking is in `disk.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a narrow-window fault may strike.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// A file's fsync is in flight and has not reached the medium yet (whoever acted on it
    /// early, say a group commit that answered before the fsync, is caught out).
    BeforeSync,
    /// A file's fsync has finished, before the caller learns it (between the fsync and the
    /// recovery point, the checkpoint or the acknowledgement it allows).
    AfterSync,
    /// A directory's fsync has finished, before the caller learns it.
    AfterSyncDir,
    /// A new segment file (`*.log`) was just created (a segment roll).
    SegmentRoll,
    /// A rename just happened (atomic file replacement: checkpoints, snapshots, metadata).
    Rename,
    /// A segment file just shrank (a recovery cut or a truncation), before it is fsynced.
    Truncate,
    /// Any write, size change or fsync while the broker is starting (recovering): a second
    /// crash during recovery.
    Startup,
}

/// What a strike does.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The process dies at that instant; the OS keeps the page cache.
    Crash,
    /// The machine loses power at that instant.
    PowerLoss,
    /// The operation takes longer (fsyncs only; elsewhere a delay is a no-op).
    Delay,
    /// Every machine of the cluster dies at that instant (a correlated failure: one rack, one
    /// power feed, a bad deploy); each comes back after its own `restart_ms`. With one machine
    /// it is `crash`.
    CrashAll,
    /// Every machine loses power at that instant.
    PowerLossAll,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Buggify {
    /// Chance per matching disk operation, by point; points not named never strike.
    #[serde(default)]
    pub points: BTreeMap<Point, f64>,
    /// Strike only at files whose path contains one of these (say `quorum-state`, to aim at
    /// the quorum's election state); empty: every file.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Relative weights of the actions.
    #[serde(default = "default_actions")]
    pub actions: BTreeMap<Action, u32>,
    /// Extra latency of a delayed fsync, in simulated ms: [min, max].
    #[serde(default = "default_delay")]
    pub delay_ms: [u64; 2],
    /// How long a broker that crashed (by a strike, or because its log directory went
    /// offline) stays down before it is restarted, in simulated ms: [min, max].
    #[serde(default = "default_restart")]
    pub restart_ms: [u64; 2],
    /// At most this many crashes and power cuts per run, so that a high rate (say, at every
    /// start-up write) still lets the broker come back.
    #[serde(default = "default_max_crashes")]
    pub max_crashes: u32,
}

impl Default for Buggify {
    fn default() -> Self {
        Buggify {
            points: BTreeMap::new(),
            paths: Vec::new(),
            actions: default_actions(),
            delay_ms: default_delay(),
            restart_ms: default_restart(),
            max_crashes: default_max_crashes(),
        }
    }
}

fn default_actions() -> BTreeMap<Action, u32> {
    BTreeMap::from([
        (Action::Crash, 1),
        (Action::PowerLoss, 2),
        (Action::Delay, 1),
    ])
}
fn default_delay() -> [u64; 2] {
    [1, 300]
}
fn default_restart() -> [u64; 2] {
    [50, 1000]
}
fn default_max_crashes() -> u32 {
    20
}

impl Buggify {
    pub fn validate(&self) -> Result<(), String> {
        for (point, rate) in &self.points {
            if !(0.0..=1.0).contains(rate) {
                return Err(format!(
                    "nemesis.buggify.points.{point:?}: {rate} is not in 0..=1"
                ));
            }
        }
        if self.actions.values().all(|&w| w == 0) {
            return Err("nemesis.buggify.actions: every weight is 0".into());
        }
        for (name, [lo, hi]) in [("delay_ms", self.delay_ms), ("restart_ms", self.restart_ms)] {
            if lo > hi {
                return Err(format!(
                    "nemesis.buggify.{name} must be [min, max] with min ≤ max"
                ));
            }
        }
        Ok(())
    }

    /// The action a uniform draw in `0..total weight` picks.
    pub fn action(&self, mut pick: u32) -> Action {
        for (&action, &weight) in &self.actions {
            if pick < weight {
                return action;
            }
            pick -= weight;
        }
        unreachable!("pick is below the total weight")
    }

    /// Whether a strike may happen at `path`.
    pub fn aims_at(&self, path: &std::path::Path) -> bool {
        let path = path.to_string_lossy();
        self.paths.is_empty() || self.paths.iter().any(|p| path.contains(p.as_str()))
    }

    pub fn total_weight(&self) -> u32 {
        self.actions.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_validates() {
        let b: Buggify = toml::from_str(
            "points = { after_sync = 0.01, startup = 1.0 }\nactions = { power_loss = 1 }",
        )
        .unwrap();
        b.validate().unwrap();
        assert_eq!(b.points[&Point::Startup], 1.0);
        assert_eq!(b.action(0), Action::PowerLoss);
        assert!(b.aims_at(std::path::Path::new("/data/x.log")));
        let aimed: Buggify =
            toml::from_str("paths = [\"quorum-state\"]\nactions = { crash_all = 1 }").unwrap();
        assert!(aimed.aims_at(std::path::Path::new(
            "/data/__cluster_metadata-0/quorum-state.tmp"
        )));
        assert!(!aimed.aims_at(std::path::Path::new("/data/__cluster_metadata-0/0.log")));
        assert_eq!(aimed.action(0), Action::CrashAll);
        let bad: Buggify = toml::from_str("points = { after_sync = 2.0 }").unwrap();
        assert!(bad.validate().is_err());
        assert!(toml::from_str::<Buggify>("points = { nowhere = 0.1 }").is_err());
    }

    #[test]
    fn weights_split_the_draws() {
        let b = Buggify::default();
        let picks: Vec<Action> = (0..b.total_weight()).map(|p| b.action(p)).collect();
        assert_eq!(
            picks,
            vec![
                Action::Crash,
                Action::PowerLoss,
                Action::PowerLoss,
                Action::Delay
            ]
        );
    }
}
