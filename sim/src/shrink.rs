//! Shrinking a failing run to the smallest fault schedule that still fails the same check
//! (`cargo sim shrink scenarios/X.toml --seed N`).
//!
//! A run records every fault it injects as an explicit [`TimedFault`] (`Event::Scheduled`):
//! kind, node, start and duration, for random and timeline faults alike. Shrinking replays the
//! seed with those faults as the scenario's `timeline` and its random faults off, then cuts the
//! schedule while the run keeps failing the same check: delta debugging over the faults
//! (Zeller's ddmin), then over the narrow-window points, then shorter faults, faults moved
//! later, and a shorter run. The result is printed as a scenario file that fails on replay.
//!
//! The oracle is noisy: madsim draws everything (network delays, the broker's entropy) from one
//! generator, so a run without the random nemesis's draws is a different run of the same seed.
//! That is fine for a minimizer: every step keeps only schedules that were seen to fail, and the
//! file printed at the end is run once more, exactly as printed, before it is offered.
//!
//! Faults are keyed by node index, so multi-broker schedules shrink the same way.

use std::collections::BTreeMap;

use toml::Value;

use crate::buggify::Point;
use crate::history::{Entry, Event};
use crate::report::RunOutcome;
use crate::scenario::{Check, FaultKind, Scenario, TimedFault};

/// What a failing run violated that a shrunk one must violate too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Failure {
    Check(Check),
    /// The broker panicked (an invariant's assertion), or the run failed as a whole.
    Panic,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Check(c) => write!(f, "{}", check_name(*c)),
            Failure::Panic => write!(f, "panic"),
        }
    }
}

/// A check's name as scenario files spell it.
pub fn check_name(check: Check) -> &'static str {
    match check {
        Check::Lost => "lost",
        Check::Duplicate => "duplicate",
        Check::Inconsistent => "inconsistent",
        Check::Monotonic => "monotonic",
        Check::Corrupt => "corrupt",
        Check::Liveness => "liveness",
        Check::LostRead => "lost-read",
        Check::Uncommitted => "uncommitted",
        Check::Order => "order",
        Check::Metadata => "metadata",
        Check::AdminAvailability => "admin-availability",
        Check::ProducerAvailability => "producer-availability",
        Check::Sent => "sent",
        Check::OneLeader => "one-leader",
        Check::CommittedPrefix => "committed-prefix",
        Check::QuorumLiveness => "quorum-liveness",
        Check::AckedOffset => "acked-offset",
        Check::Deleted => "deleted",
        Check::Replicas => "replicas",
        Check::GroupOwnership => "group-ownership",
        Check::GroupOffsets => "group-offsets",
        Check::GroupDelivery => "group-delivery",
        Check::GroupSettle => "group-settle",
        Check::Transactions => "transactions",
        Check::AdminLiveness => "admin-liveness",
        Check::GroupLiveness => "group-liveness",
        Check::TxnLiveness => "txn-liveness",
    }
}

/// Every failure of a run, among the checks its scenario asks for, in the order of
/// [`Check::all`] (lost writes first), a panic last.
pub fn failures(outcome: &RunOutcome, checks: &[Check]) -> Vec<Failure> {
    if outcome.passed {
        return Vec::new();
    }
    let mut out: Vec<Failure> = Check::all()
        .into_iter()
        .chain([Check::Sent])
        .filter(|c| checks.contains(c) && !outcome.findings.violations(&[*c]).is_empty())
        .map(Failure::Check)
        .collect();
    if outcome.panic.is_some() {
        out.push(Failure::Panic);
    }
    out
}

/// The faults a run injected, in order: its schedule, explicit.
pub fn schedule(history: &[Entry]) -> Vec<TimedFault> {
    history
        .iter()
        .filter_map(|e| match &e.event {
            Event::Scheduled(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

/// Faults that do something for a while (the rest act at once: a clock jump, a bit flip).
fn lasts(kind: FaultKind) -> bool {
    !matches!(kind, FaultKind::ClockJump | FaultKind::BitFlip)
}

/// One schedule under test.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub faults: Vec<TimedFault>,
    /// Narrow-window points still on, with their chances.
    pub points: BTreeMap<Point, f64>,
    pub duration_secs: u64,
    /// Replay the faults the random streams drew with the draws they made
    /// (`nemesis.replay_draws`): the full schedule is then the original run itself.
    pub replay_draws: bool,
}

impl Candidate {
    /// Faults plus narrow-window points: the "faults" count of the before → after figures.
    pub fn size(&self) -> usize {
        self.faults.len() + self.points.len()
    }
}

/// The scenario file for `candidate`: `base` (the scenario as written) with the random faults
/// off, the candidate's timeline, points and duration, and the rates and ranges `scenario` ran
/// with (a swarm run changes them). With `replay_draws` the weights stay (the replayed
/// streams draw from them); without, the timeline is a plain one.
pub fn render(base: &Value, scenario: &Scenario, candidate: &Candidate) -> Value {
    let mut v = base.clone();
    let root = v.as_table_mut().expect("a scenario is a table");
    root.insert("name".into(), Value::String(scenario.name.clone()));
    root.insert(
        "duration_secs".into(),
        Value::Integer(candidate.duration_secs as i64),
    );
    // A shrunk scenario is one seed's replay: no cap, and no expectation to fail every seed.
    root.remove("seeds");
    let nemesis = root
        .entry("nemesis")
        .or_insert_with(|| Value::Table(Default::default()))
        .as_table_mut()
        .expect("[nemesis] is a table");
    let weights = if candidate.replay_draws {
        scenario
            .nemesis
            .weights
            .iter()
            .map(|(k, w)| (name_of(k), Value::Integer(i64::from(*w))))
            .collect()
    } else {
        Default::default()
    };
    nemesis.insert("weights".into(), Value::Table(weights));
    if candidate.replay_draws {
        nemesis.insert("replay_draws".into(), Value::Boolean(true));
    } else {
        nemesis.remove("replay_draws");
    }
    let range = |r: [u64; 2]| Value::Array(r.iter().map(|&x| Value::Integer(x as i64)).collect());
    nemesis.insert("interval_ms".into(), range(scenario.nemesis.interval_ms));
    nemesis.insert("duration_ms".into(), range(scenario.nemesis.duration_ms));
    nemesis.insert(
        "timeline".into(),
        Value::Array(
            candidate
                .faults
                .iter()
                .map(|f| {
                    let mut f = f.clone();
                    if !candidate.replay_draws {
                        f.stream = None;
                    }
                    Value::try_from(&f).expect("a fault renders")
                })
                .collect(),
        ),
    );
    nemesis.insert(
        "disk_error_rate".into(),
        Value::Float(scenario.nemesis.disk_error_rate),
    );
    nemesis.insert("loss_rate".into(), Value::Float(scenario.nemesis.loss_rate));
    if !scenario.nemesis.buggify.points.is_empty() {
        let buggify = nemesis
            .entry("buggify")
            .or_insert_with(|| Value::Table(Default::default()))
            .as_table_mut()
            .expect("[nemesis.buggify] is a table");
        let points = candidate
            .points
            .iter()
            .map(|(p, chance)| (name_of(p), Value::Float(*chance)))
            .collect();
        buggify.insert("points".into(), Value::Table(points));
    }
    v
}

/// A unit variant's name as scenario files spell it.
fn name_of<T: serde::Serialize>(x: &T) -> String {
    Value::try_from(x)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .expect("a name renders as a string")
}

/// A scenario from its TOML value, validated as `Scenario::load` does.
pub fn parse(value: &Value, name: &str) -> Result<Scenario, String> {
    let mut s: Scenario = value.clone().try_into().map_err(|e| format!("{e}"))?;
    if s.name.is_empty() {
        s.name = name.to_string();
    }
    s.validate()?;
    Ok(s)
}

/// Zeller's ddmin: a 1-minimal subset of `items` for which `fails` holds, given that it holds
/// for all of them. Tries the empty set first (some bugs need no fault at all).
pub fn ddmin<T: Clone>(items: Vec<T>, fails: &mut dyn FnMut(&[T]) -> bool) -> Vec<T> {
    if items.is_empty() || fails(&[]) {
        return Vec::new();
    }
    let mut items = items;
    let mut n = 2usize;
    while items.len() >= 2 {
        let chunk = items.len().div_ceil(n);
        let parts: Vec<Vec<T>> = items.chunks(chunk).map(|c| c.to_vec()).collect();
        let mut reduced = false;
        for (i, part) in parts.iter().enumerate() {
            if fails(part) {
                items = part.clone();
                n = 2;
                reduced = true;
                break;
            }
            let complement: Vec<T> = parts
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .flat_map(|(_, p)| p.iter().cloned())
                .collect();
            if parts.len() > 2 && fails(&complement) {
                items = complement;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced {
            if n >= items.len() {
                break;
            }
            n = (n * 2).min(items.len());
        }
    }
    if items.len() == 1 && fails(&[]) {
        return Vec::new();
    }
    items
}

/// Shorter faults, faults moved later, a shorter run: each step kept only if `fails` holds.
pub fn tighten(mut c: Candidate, fails: &mut dyn FnMut(&Candidate) -> bool) -> Candidate {
    // Shorter: halve each lasting fault's duration while it still fails (a few times at most).
    for i in 0..c.faults.len() {
        if !lasts(c.faults[i].fault) {
            continue;
        }
        for _ in 0..3 {
            let d = c.faults[i].duration_ms.unwrap_or(0);
            if d < 20 {
                break;
            }
            let mut next = c.clone();
            next.faults[i].duration_ms = Some(d / 2);
            if fails(&next) {
                c = next;
            } else {
                break;
            }
        }
    }
    // Later: from the last fault back, halve the gap to whatever follows (faults run one after
    // another, so a fault never passes the next one's start).
    let end_ms = c.duration_secs * 1000;
    // A step that fails is kept; one that passes is retried at half the distance.
    for i in (0..c.faults.len()).rev() {
        let mut share = 2;
        for _ in 0..3 {
            let f = &c.faults[i];
            let d = f.duration_ms.unwrap_or(0);
            let limit = c
                .faults
                .get(i + 1)
                .map_or(end_ms.saturating_sub(1), |g| g.at_ms)
                .saturating_sub(d);
            if limit <= f.at_ms + 200 {
                break;
            }
            let mut next = c.clone();
            next.faults[i].at_ms = f.at_ms + (limit - f.at_ms) / share;
            if fails(&next) {
                c = next;
            } else {
                share *= 2;
            }
        }
    }
    // A shorter run: end a couple of seconds after the last fault heals.
    let last_end = c
        .faults
        .iter()
        .map(|f| f.at_ms + f.duration_ms.unwrap_or(0))
        .max()
        .unwrap_or(0);
    let needed = (last_end / 1000 + 3).max(2);
    for secs in [needed, (needed + c.duration_secs) / 2] {
        if secs < c.duration_secs {
            let mut next = c.clone();
            next.duration_secs = secs;
            if fails(&next) {
                c = next;
                break;
            }
        }
    }
    c
}

#[cfg(madsim)]
pub use run::{shrink, Shrunk};

#[cfg(madsim)]
mod run {
    use super::*;
    use crate::sweep::run_isolated;

    /// A shrunk failure.
    pub struct Shrunk {
        pub target: Failure,
        pub before: Candidate,
        pub after: Candidate,
        /// Simulation runs spent (the first and the final check included).
        pub runs: usize,
        /// The scenario file, as printed and as checked.
        pub toml: String,
        /// The final check's run of that file.
        pub outcome: RunOutcome,
    }

    /// Shrinks the failing `seed` of the scenario `base` (as written; `name` when it names
    /// none), with the swarm configuration of that seed if `swarm`. At most `max_runs` runs.
    pub fn shrink(
        base: &Value,
        name: &str,
        seed: u64,
        swarm: bool,
        max_runs: usize,
        log: &mut dyn FnMut(&str),
    ) -> Result<Shrunk, String> {
        let mut scenario = parse(base, name)?;
        if swarm {
            crate::swarm::apply(&mut scenario, seed);
        }
        let original = run_isolated(&scenario, seed);
        let Some(&target) = failures(&original, &scenario.checks).first() else {
            return Err(format!(
                "seed {seed} of {} passes: nothing to shrink",
                scenario.name
            ));
        };
        let before = Candidate {
            faults: schedule(&original.history),
            points: scenario
                .nemesis
                .buggify
                .points
                .iter()
                .filter(|(_, &p)| p > 0.0)
                .map(|(&k, &p)| (k, p))
                .collect(),
            duration_secs: scenario.duration_secs,
            replay_draws: scenario.nemesis.weights.values().any(|&w| w > 0),
        };
        log(&format!(
            "shrink: seed {seed} fails {target} with {} faults and {} narrow-window points",
            before.faults.len(),
            before.points.len()
        ));
        let mut runs = 1usize;
        // Trace hashes of the candidates run, for the log (does the replay reproduce the run?).
        let last_hash = std::cell::Cell::new(0u64);
        let mut fails = |c: &Candidate| -> bool {
            if runs >= max_runs {
                return false;
            }
            runs += 1;
            let Ok(s) = parse(&render(base, &scenario, c), name) else {
                return false;
            };
            let o = run_isolated(&s, seed);
            last_hash.set(o.trace_hash);
            failures(&o, &s.checks).contains(&target)
        };
        let mut before = before;
        let mut replayed = fails(&before);
        log(&format!(
            "shrink: the recorded schedule replayed{}: {} (trace_hash {:016x}, the run's {:016x})",
            if before.replay_draws {
                " with its draws"
            } else {
                ""
            },
            if replayed { "fails" } else { "passes" },
            last_hash.get(),
            original.trace_hash
        ));
        if !replayed && before.replay_draws {
            before.replay_draws = false;
            replayed = fails(&before);
            log(&format!(
                "shrink: replayed as a plain timeline: {}",
                if replayed { "fails" } else { "passes" }
            ));
        }
        if !replayed {
            return Err(format!(
                "seed {seed} fails {target}, but not once its {} faults are replayed as a \
                 timeline (the random draws it no longer makes moved everything else): try \
                 another failing seed",
                before.faults.len()
            ));
        }
        let mut current = before.clone();
        // The oracle is noisy (a schedule without some faults is a different run), so a
        // 1-minimal set may shrink again from where it landed: repeat while it does.
        for _ in 0..3 {
            let faults = ddmin(current.faults.clone(), &mut |fs| {
                let mut c = current.clone();
                c.faults = fs.to_vec();
                fails(&c)
            });
            let shrank = faults.len() < current.faults.len();
            current.faults = faults;
            if !shrank || current.faults.len() <= 1 {
                break;
            }
        }
        log(&format!(
            "shrink: {} → {} faults",
            before.faults.len(),
            current.faults.len()
        ));
        let points: Vec<(Point, f64)> = current.points.clone().into_iter().collect();
        if !points.is_empty() {
            let kept = ddmin(points, &mut |ps| {
                let mut c = current.clone();
                c.points = ps.iter().copied().collect();
                fails(&c)
            });
            current.points = kept.into_iter().collect();
            log(&format!(
                "shrink: {} → {} narrow-window points",
                before.points.len(),
                current.points.len()
            ));
        }
        // A plain timeline (no replayed draws) reads more simply: keep it if it still fails.
        if current.replay_draws {
            let mut plain = current.clone();
            plain.replay_draws = false;
            if fails(&plain) {
                current = plain;
                log("shrink: it fails as a plain timeline too");
            }
        }
        let current = tighten(current, &mut fails);
        // The file as printed, run once more exactly as printed.
        let value = render(base, &scenario, &current);
        let text = toml::to_string_pretty(&value).map_err(|e| e.to_string())?;
        let reparsed: Value = toml::from_str(&text).map_err(|e| e.to_string())?;
        let replayed = parse(&reparsed, name)?;
        let outcome = run_isolated(&replayed, seed);
        runs += 1;
        if !failures(&outcome, &replayed.checks).contains(&target) {
            return Err(format!(
                "the shrunk schedule did not fail {target} on its final replay (a bug in shrinking)"
            ));
        }
        Ok(Shrunk {
            target,
            before,
            after: current,
            runs,
            toml: text,
            outcome,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(at_ms: u64, fault: FaultKind, d: u64) -> TimedFault {
        TimedFault {
            at_ms,
            fault,
            node: 0,
            duration_ms: Some(d),
            partition: None,
            stream: None,
        }
    }

    #[test]
    fn ddmin_finds_the_pair_that_matters() {
        let items: Vec<u32> = (0..16).collect();
        let mut tries = 0;
        let found = ddmin(items, &mut |s| {
            tries += 1;
            s.contains(&3) && s.contains(&11)
        });
        assert_eq!(found, vec![3, 11]);
        assert!(tries < 60, "{tries} tries");
    }

    #[test]
    fn ddmin_returns_nothing_when_nothing_is_needed() {
        assert!(ddmin(vec![1, 2, 3], &mut |_| true).is_empty());
        assert_eq!(ddmin(vec![1, 2, 3], &mut |s| s.contains(&2)), vec![2]);
    }

    #[test]
    fn tighten_shortens_moves_and_trims_while_it_fails() {
        let c = Candidate {
            faults: vec![fault(1000, FaultKind::PowerLoss, 800)],
            points: BTreeMap::new(),
            duration_secs: 20,
            replay_draws: false,
        };
        // Fails while the power loss lasts at least 100 ms and starts before 10 s.
        let t = tighten(c, &mut |c| {
            let f = &c.faults[0];
            f.duration_ms.unwrap() >= 100 && f.at_ms < 10_000
        });
        let f = &t.faults[0];
        assert_eq!(f.duration_ms, Some(100));
        assert!(f.at_ms > 1000 && f.at_ms < 10_000, "{f:?}");
        assert!(t.duration_secs < 20);
    }

    #[test]
    fn a_rendered_candidate_parses_back_with_its_timeline() {
        let text = r#"
            description = "x"
            seeds = 50
            [nemesis]
            weights = { power_loss = 1, kill = 2 }
            [nemesis.buggify]
            points = { before_sync = 0.01, rename = 0.5 }
        "#;
        let base: Value = toml::from_str(text).unwrap();
        let scenario = parse(&base, "x").unwrap();
        let c = Candidate {
            faults: vec![
                fault(1500, FaultKind::PowerLoss, 300),
                fault(4000, FaultKind::ClockJump, 0),
            ],
            points: BTreeMap::from([(Point::Rename, 0.5)]),
            duration_secs: 9,
            replay_draws: false,
        };
        let rendered = toml::to_string_pretty(&render(&base, &scenario, &c)).unwrap();
        let back = parse(&toml::from_str(&rendered).unwrap(), "x").unwrap();
        assert_eq!(back.nemesis.timeline, c.faults);
        assert!(back.nemesis.weights.is_empty());
        assert_eq!(back.duration_secs, 9);
        assert_eq!(back.seeds, None);
        assert_eq!(
            back.nemesis.buggify.points,
            BTreeMap::from([(Point::Rename, 0.5)])
        );
    }
}
