//! Many seeds of many scenarios: each run on a fresh thread (madsim and std's HashMap keep
//! per-thread state), a few at a time, with a verdict per scenario. A safe scenario fails the
//! sweep on any violating seed; an unsafe one fails it if no seed catches its violation.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use crate::coverage::FaultCoverage;
use crate::report::RunOutcome;
use crate::report::{self, CaseResult};
use crate::scenario::{Check, Expect, Scenario};
use crate::world;

/// How many expected violations of an unsafe scenario a sweep prints in full.
const SHOWN_EXPECTED: usize = 2;

/// `A..B` (B excluded), `A..=B`, a single seed, or several of these joined by commas, run in
/// the order given (`80,111` replays a sweep's order when one run seems to depend on another).
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    let mut seeds = Vec::new();
    for part in text.split(',') {
        seeds.extend(parse_seed_range(part.trim()).map_err(|_| {
            format!("seeds must look like 1..500, 1..=500, 7 or 1..=5,9, not '{text}'")
        })?);
        if seeds.len() > 1_000_000 {
            return Err(format!("{text}: more than 1,000,000 seeds"));
        }
    }
    Ok(seeds)
}

fn parse_seed_range(text: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("seeds must look like 1..500, 1..=500 or 7, not '{text}'");
    let (lo, hi) = if let Some((a, b)) = text.split_once("..=") {
        (
            a.parse::<u64>().map_err(|_| bad())?,
            b.parse::<u64>().map_err(|_| bad())?,
        )
    } else if let Some((a, b)) = text.split_once("..") {
        let b = b.parse::<u64>().map_err(|_| bad())?;
        (
            a.parse::<u64>().map_err(|_| bad())?,
            b.checked_sub(1).ok_or_else(bad)?,
        )
    } else {
        let n = text.parse::<u64>().map_err(|_| bad())?;
        (n, n)
    };
    if lo > hi || hi - lo >= 1_000_000 {
        return Err(bad());
    }
    Ok((lo..=hi).collect())
}

/// Scenario files named directly or found (sorted) in named directories.
pub fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Wall time after which a run is reported as possibly stuck (a task that never waits keeps
/// madsim's executor busy and simulated time still): a run takes well under a second.
const STUCK_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs one seed on a fresh thread; says on stderr which run it is if it is still running
/// after [`STUCK_AFTER`] (and keeps waiting: the verdict is still the run's).
pub fn run_isolated(scenario: &Scenario, seed: u64) -> RunOutcome {
    let name = scenario.name.clone();
    let scenario = scenario.clone();
    let (done, outcome) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(format!("seed-{seed}"))
        .stack_size(64 << 20)
        .spawn(move || {
            let _ = done.send(world::run(&scenario, seed));
        })
        .expect("spawning a simulation thread");
    let result = match outcome.recv_timeout(STUCK_AFTER) {
        Ok(result) => result,
        Err(_) => {
            eprintln!(
                "still running after {} s (stuck?): {name} seed {seed}",
                STUCK_AFTER.as_secs()
            );
            outcome.recv().expect("world::run catches panics")
        }
    };
    thread.join().expect("world::run catches panics");
    result
}

pub struct SweepSummary {
    pub cases: Vec<CaseResult>,
    pub coverage: FaultCoverage,
    /// With `--plant`: (scenario, seeds run, seeds that caught the bug, first seed that did).
    pub plant_catches: Vec<(String, usize, usize, Option<u64>)>,
    /// Scenarios that failed as a whole (e.g. an unsafe one nobody caught).
    pub scenario_failures: Vec<(String, String)>,
    pub wall_secs: f64,
}

impl SweepSummary {
    pub fn passed(&self) -> bool {
        self.scenario_failures.is_empty() && !self.cases.iter().any(|c| c.failed)
    }
}

/// How a sweep changes the scenarios it loads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options<'a> {
    /// Keep only the safe scenarios and plant this bug in each, so that the sweep measures how
    /// often the checker catches it (every violation is a catch).
    pub plant: Option<&'a str>,
    /// Judge as the simulator did before reads counted as knowledge: only the original six
    /// checks, one produce request in flight per producer. For before/after measurements.
    pub baseline: bool,
    /// Swarm testing: each seed runs its own random subset of the fault kinds (`swarm.rs`).
    pub swarm: bool,
    /// Keep only the safe scenarios (expected safe, nothing planted): the long night sweep.
    pub safe_only: bool,
    /// Run every seed given on every scenario, past a scenario's own `seeds` cap (which keeps
    /// CI within its budget).
    pub ignore_caps: bool,
}

/// The checks the simulator had before `lost-read`, `uncommitted` and `order`.
const BASELINE_CHECKS: [Check; 6] = [
    Check::Lost,
    Check::Duplicate,
    Check::Inconsistent,
    Check::Monotonic,
    Check::Corrupt,
    Check::Liveness,
];

pub fn load(files: &[PathBuf], options: Options) -> Result<Vec<(String, Scenario)>, String> {
    let plant = options.plant;
    if let Some(bug) = plant {
        weir::config::PlantedBug::parse(bug)?;
    }
    let mut out = Vec::new();
    for f in files {
        let mut scenario = Scenario::load(f)?;
        let safe = scenario.expect == Expect::Safe && scenario.planted_bug.is_none();
        if options.safe_only && !safe {
            continue;
        }
        if options.ignore_caps {
            scenario.seeds = None;
        }
        if let Some(bug) = plant {
            if !safe {
                continue;
            }
            scenario.planted_bug = Some(bug.to_string());
            scenario.expect = Expect::Unsafe;
        }
        if options.baseline {
            scenario.checks.retain(|c| BASELINE_CHECKS.contains(c));
            scenario.producers.max_in_flight = 1;
        }
        out.push((f.display().to_string(), scenario));
    }
    Ok(out)
}

pub fn sweep(
    files: &[PathBuf],
    seeds: &[u64],
    jobs: usize,
    options: Options,
) -> Result<SweepSummary, String> {
    let started = Instant::now();
    let plant = options.plant;
    let scenarios = load(files, options)?;
    // A scenario's own cap takes the first seeds of the list.
    let queue: Mutex<VecDeque<(usize, u64)>> = Mutex::new(
        scenarios
            .iter()
            .enumerate()
            .flat_map(|(i, (_, s))| {
                let cap = s.seeds.map_or(usize::MAX, |n| n as usize);
                seeds.iter().take(cap).map(move |&seed| (i, seed))
            })
            .collect(),
    );
    let total = queue.lock().unwrap().len();
    let progress = crate::progress::Progress::new(total, crate::progress::wanted());
    let results: Mutex<Vec<(usize, RunOutcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let Some((index, seed)) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let (path, scenario) = &scenarios[index];
                let mut outcome = if options.swarm {
                    let mut narrowed = scenario.clone();
                    crate::swarm::apply(&mut narrowed, seed);
                    run_isolated(&narrowed, seed)
                } else {
                    run_isolated(scenario, seed)
                };
                outcome.swarm = options.swarm;
                // With --plant every catch is expected and counted, not shown.
                let quiet = plant.is_some();
                // A sweep keeps verdicts, not histories: thousands of them would not fit.
                outcome.history = Vec::new();
                let mut results = results.lock().unwrap();
                if !outcome.passed {
                    // Every violation of a safe scenario is shown; of an unsafe one (expected),
                    // the first few, to show what is caught without drowning the log.
                    let caught_before = results
                        .iter()
                        .filter(|(i, o): &&(usize, RunOutcome)| *i == index && !o.passed)
                        .count();
                    match scenario.expect {
                        Expect::Safe => {
                            progress.clear();
                            eprint!("VIOLATION: {}", report::summary(&outcome, path))
                        }
                        Expect::Unsafe if caught_before < SHOWN_EXPECTED && !quiet => {
                            progress.clear();
                            eprint!("caught (expected): {}", report::summary(&outcome, path))
                        }
                        Expect::Unsafe => {}
                    }
                }
                progress.tick(!outcome.passed);
                results.push((index, outcome));
            });
        }
    });
    progress.clear();
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, o)| (*i, o.seed));
    let mut cases = Vec::new();
    let mut scenario_failures = Vec::new();
    let mut coverage = FaultCoverage::default();
    let mut plant_catches = Vec::new();
    let mut rows = Vec::new();
    for (index, (path, scenario)) in scenarios.iter().enumerate() {
        let runs: Vec<&RunOutcome> = results
            .iter()
            .filter(|(i, _)| *i == index)
            .map(|(_, o)| o)
            .collect();
        let violating = runs.iter().filter(|o| !o.passed).count();
        for o in &runs {
            coverage.add(o);
        }
        if plant.is_some() {
            let first = runs.iter().find(|o| !o.passed).map(|o| o.seed);
            plant_catches.push((scenario.name.clone(), runs.len(), violating, first));
        }
        let sim: f64 = runs.iter().map(|o| o.simulated_secs).sum();
        let wall: f64 = runs.iter().map(|o| o.wall_secs).sum();
        let cpu: Option<f64> = runs.iter().map(|o| o.cpu_secs).sum();
        let verdict = match scenario.expect {
            _ if plant.is_some() => format!("planted bug caught in {violating} seeds"),
            Expect::Safe if violating == 0 => "ok".to_string(),
            Expect::Safe => format!("FAILED ({violating} seeds violate)"),
            Expect::Unsafe if violating > 0 => {
                format!("ok (unsafe configuration caught in {violating} seeds)")
            }
            Expect::Unsafe => {
                let why = format!(
                    "no seed caught the known-unsafe configuration of {}",
                    scenario.name
                );
                scenario_failures.push((scenario.name.clone(), why));
                "FAILED (nothing caught: the checker has no teeth here)".to_string()
            }
        };
        rows.push(crate::progress::Row {
            scenario: scenario.name.clone(),
            seeds: runs.len(),
            violating,
            first_violating: runs.iter().find(|o| !o.passed).map(|o| o.seed),
            simulated_secs: sim,
            wall_secs: wall,
            cpu_secs: cpu,
            verdict,
        });
        for o in runs {
            cases.push(CaseResult {
                scenario_path: path.clone(),
                outcome: o.clone(),
                failed: scenario.expect == Expect::Safe && !o.passed,
            });
        }
    }
    print!("{}", crate::progress::table(&rows));
    Ok(SweepSummary {
        cases,
        coverage,
        plant_catches,
        scenario_failures,
        wall_secs: started.elapsed().as_secs_f64(),
    })
}

pub fn write_junit(path: &Path, summary: &SweepSummary) -> Result<(), String> {
    let xml = report::junit(&summary.cases, &summary.scenario_failures);
    std::fs::write(path, xml).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_scenario(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios")
            .join(name)
    }

    /// The long night sweep's selection: only the safe scenarios, every seed on each.
    #[test]
    fn safe_only_and_ignore_caps_select_the_night_sweep() {
        let files = [
            repo_scenario("replication-3-kills.toml"),
            repo_scenario("planted-ack-before-fsync.toml"),
        ];
        let all = load(&files, Options::default()).unwrap();
        assert_eq!(all.len(), 2);
        assert!(
            all.iter().all(|(_, s)| s.seeds.is_some()),
            "both are capped"
        );

        let night = Options {
            safe_only: true,
            ignore_caps: true,
            ..Options::default()
        };
        let safe = load(&files, night).unwrap();
        assert_eq!(safe.len(), 1);
        assert!(safe[0].0.ends_with("replication-3-kills.toml"));
        assert_eq!(safe[0].1.seeds, None);
    }
}
