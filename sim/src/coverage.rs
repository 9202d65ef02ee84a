//! Fault coverage of a sweep: for each fault kind, how often it was injected, in how many
//! runs, and how often it was active around a violation. A kind that is injected but never
//! near a violation (across planted bugs too) is a fault the checker may not be able to see;
//! a kind never injected is a hole in the scenarios.
//!
//! "Near" means injected within [`NEAR_MS`] either side of the run's first evidence of a
//! violation. The evidence is the read that went wrong, or the acknowledgement or read of a
//! value that a later fault took back, or the moment a broker panicked; so the faults that
//! matter come just before it (a read) or just after it (a loss).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::report::RunOutcome;
use crate::scenario::FaultKind;

/// How far from the first evidence a fault still counts as active around the violation.
pub const NEAR_MS: u64 = 10_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindCoverage {
    /// Faults of this kind injected, over all runs.
    pub injected: u64,
    /// Runs with at least one.
    pub runs: u64,
    /// Violating runs with at least one.
    pub violating_runs: u64,
    /// Violating runs with one within [`NEAR_MS`] of the first evidence.
    pub near_violation: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultCoverage {
    pub kinds: BTreeMap<FaultKind, KindCoverage>,
    pub runs: u64,
    pub violating_runs: u64,
}

impl FaultCoverage {
    pub fn add(&mut self, outcome: &RunOutcome) {
        self.runs += 1;
        let violated = !outcome.passed;
        if violated {
            self.violating_runs += 1;
        }
        let mut seen: BTreeMap<FaultKind, bool> = BTreeMap::new();
        for &(kind, at_ms) in &outcome.injected {
            self.kinds.entry(kind).or_default().injected += 1;
            let near = outcome
                .evidence_ms
                .is_some_and(|t| at_ms.abs_diff(t) <= NEAR_MS);
            *seen.entry(kind).or_default() |= near;
        }
        for (kind, near) in seen {
            let k = self.kinds.entry(kind).or_default();
            k.runs += 1;
            if violated {
                k.violating_runs += 1;
                if near {
                    k.near_violation += 1;
                }
            }
        }
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "fault coverage ({} runs, {} violating; near = within {} s of the first evidence):",
            self.runs,
            self.violating_runs,
            NEAR_MS / 1000
        );
        let _ = writeln!(
            s,
            "  {:<18} {:>9} {:>7} {:>14} {:>15}",
            "fault", "injected", "runs", "violating runs", "near violation"
        );
        for (kind, k) in &self.kinds {
            let _ = writeln!(
                s,
                "  {:<18} {:>9} {:>7} {:>14} {:>15}",
                format!("{kind:?}"),
                k.injected,
                k.runs,
                k.violating_runs,
                k.near_violation
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Findings;

    fn run(passed: bool, injected: Vec<(FaultKind, u64)>, evidence_ms: Option<u64>) -> RunOutcome {
        RunOutcome {
            history: Vec::new(),
            scenario: "s".into(),
            seed: 1,
            passed,
            violations: Vec::new(),
            findings: Findings::default(),
            trace_hash: 0,
            events: 0,
            faults: injected.len(),
            simulated_secs: 0.0,
            wall_secs: 0.0,
            cpu_secs: None,
            panic: None,
            injected,
            evidence_ms,
            swarm: false,
        }
    }

    #[test]
    fn counts_injections_runs_and_faults_near_violations() {
        let mut c = FaultCoverage::default();
        c.add(&run(
            true,
            vec![(FaultKind::Kill, 1_000), (FaultKind::Kill, 2_000)],
            None,
        ));
        c.add(&run(
            false,
            vec![(FaultKind::Kill, 1_000), (FaultKind::PowerLoss, 30_000)],
            Some(25_000),
        ));
        let kill = c.kinds[&FaultKind::Kill];
        assert_eq!(
            (
                kill.injected,
                kill.runs,
                kill.violating_runs,
                kill.near_violation
            ),
            (3, 2, 1, 0)
        );
        let power = c.kinds[&FaultKind::PowerLoss];
        assert_eq!((power.violating_runs, power.near_violation), (1, 1));
        assert_eq!((c.runs, c.violating_runs), (2, 1));
        assert!(c.render().contains("PowerLoss"));
    }
}
