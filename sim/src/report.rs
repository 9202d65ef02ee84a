//! How a run or a sweep is shown: a human summary, one JSON object, JUnit XML.

use std::fmt::Write;

use serde_json::json;

use crate::checker::Findings;

/// What a run produced.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The whole history, for `--trace`.
    pub history: Vec<crate::history::Entry>,
    pub scenario: String,
    pub seed: u64,
    pub passed: bool,
    pub violations: Vec<String>,
    pub findings: Findings,
    pub trace_hash: u64,
    pub events: usize,
    pub faults: usize,
    pub simulated_secs: f64,
    pub wall_secs: f64,
    /// CPU time of the run's thread (`cpu.rs`): unlike wall time, not slowed by a busy machine.
    pub cpu_secs: Option<f64>,
    /// A panic inside the simulation (an assertion in the broker, a hang past the time limit).
    pub panic: Option<String>,
    /// Every fault injected: its kind and run time (ms), for fault coverage.
    pub injected: Vec<(crate::scenario::FaultKind, u64)>,
    /// When the first evidence of a violation appeared (run ms), if the run violated anything.
    pub evidence_ms: Option<u64>,
    /// Run with the seed's swarm configuration (`--swarm`): replaying needs the flag too.
    pub swarm: bool,
}

/// The one command that replays a run exactly.
pub fn replay_command(scenario_path: &str, seed: u64, swarm: bool) -> String {
    let swarm = if swarm { " --swarm" } else { "" };
    format!("cargo sim run {scenario_path} --seed {seed}{swarm}")
}

/// The command that shrinks a failing run to its smallest failing fault schedule.
pub fn shrink_command(scenario_path: &str, seed: u64, swarm: bool) -> String {
    let swarm = if swarm { " --swarm" } else { "" };
    format!("cargo sim shrink {scenario_path} --seed {seed}{swarm}")
}

pub fn summary(outcome: &RunOutcome, scenario_path: &str) -> String {
    let f = &outcome.findings;
    let mut s = String::new();
    let verdict = if outcome.passed { "PASS" } else { "FAIL" };
    let _ = writeln!(
        s,
        "{verdict} {} seed={} trace_hash={:016x}",
        outcome.scenario, outcome.seed, outcome.trace_hash
    );
    let _ = writeln!(
        s,
        "  writes: {} invoked, {} acknowledged, {} failed; {} reads; {} faults; {} events",
        f.invoked, f.acked, f.failed, f.reads, outcome.faults, outcome.events
    );
    let _ = writeln!(
        s,
        "  {:.1} simulated s in {:.2} wall s ({:.0}x real time){}",
        outcome.simulated_secs,
        outcome.wall_secs,
        outcome.simulated_secs / outcome.wall_secs.max(1e-9),
        outcome.cpu_secs.map_or(String::new(), |cpu| format!(
            ", {cpu:.2} CPU s ({:.0}x per CPU)",
            outcome.simulated_secs / cpu.max(1e-9)
        ))
    );
    if !f.truncations.is_empty() || f.validations > 0 || f.follower_switches > 0 {
        let _ = writeln!(
            s,
            "  consumers: {} positions validated, {} log truncations detected, {} switches to a follower",
            f.validations,
            f.truncations.len(),
            f.follower_switches
        );
    }
    if !f.surfaced.is_empty() {
        let kinds: Vec<String> = f
            .surfaced
            .iter()
            .map(|(kind, n)| format!("{kind} ×{n}"))
            .collect();
        let _ = writeln!(
            s,
            "  errors surfaced to the application: {}",
            kinds.join(", ")
        );
    }
    for v in &outcome.violations {
        let _ = writeln!(s, "  violation: {v}");
    }
    for note in &f.beyond_promise {
        let _ = writeln!(s, "  beyond acks=all's promise (not a violation): {note}");
    }
    if f.groups.stale_reads > 0 {
        let shown: Vec<&str> = f
            .groups
            .stale_examples
            .iter()
            .take(3)
            .map(|x| x.as_str())
            .collect();
        let _ = writeln!(
            s,
            "  stale committed offsets from a deposed coordinator (not a violation): {} answers, e.g. {}",
            f.groups.stale_reads,
            shown.join(", ")
        );
    }
    for (what, examples) in [
        ("lost", &f.lost),
        ("duplicated", &f.duplicated),
        ("non-monotonic", &f.nonmonotonic),
        ("corrupt", &f.corrupt),
        ("lost read", &f.lost_reads),
        ("uncommitted", &f.uncommitted),
        ("out of order", &f.misordered),
        ("metadata", &f.metadata),
        ("producer error", &f.producer_errors),
        ("admin error", &f.admin_errors),
        ("two leaders", &f.quorum.leaders),
        ("committed metadata", &f.quorum.committed),
        ("sent and lost", &f.sent_lost),
        ("group ownership", &f.groups.ownership),
        ("group offsets", &f.groups.offsets),
        ("group delivery", &f.groups.undelivered_examples),
        ("group settle", &f.groups.unsettled),
        ("log truncation", &f.truncations),
        ("deleted readable", &f.deleted_readable),
    ] {
        if !examples.is_empty() {
            let shown: Vec<&str> = examples.iter().take(5).map(|x| x.as_str()).collect();
            let _ = writeln!(s, "  {what} (e.g.): {}", shown.join(", "));
        }
    }
    for (p, o, values) in f.inconsistent.iter().take(5) {
        let _ = writeln!(
            s,
            "  inconsistent: partition {p} offset {o} held {values:?}"
        );
    }
    if !outcome.passed {
        let _ = writeln!(
            s,
            "  replay: {}",
            replay_command(scenario_path, outcome.seed, outcome.swarm)
        );
        let _ = writeln!(
            s,
            "  shrink: {}",
            shrink_command(scenario_path, outcome.seed, outcome.swarm)
        );
    }
    s
}

pub fn json(outcome: &RunOutcome) -> serde_json::Value {
    let f = &outcome.findings;
    let mut v = json!({
        "scenario": outcome.scenario,
        "seed": outcome.seed,
        "verdict": if outcome.passed { "pass" } else { "fail" },
        "trace_hash": format!("{:016x}", outcome.trace_hash),
        "acked": f.acked,
        "invoked": f.invoked,
        "failed": f.failed,
        "reads": f.reads,
        "lost": f.lost.len(),
        "duplicated": f.duplicated.len(),
        "inconsistent": f.inconsistent.len(),
        "nonmonotonic": f.nonmonotonic.len(),
        "corrupt": f.corrupt.len(),
        "lost_reads": f.lost_reads.len(),
        "uncommitted": f.uncommitted.len(),
        "misordered": f.misordered.len(),
        "sent_lost": f.sent_lost.len(),
        "truncations_detected": f.truncations.len(),
        "positions_validated": f.validations,
        "follower_switches": f.follower_switches,
        "surfaced_errors": f.surfaced,
        "evidence_ms": outcome.evidence_ms,
        "liveness": f.liveness,
        "leader_conflicts": f.quorum.leader_conflicts,
        "committed_conflicts": f.quorum.committed_conflicts,
        "quorum_liveness": f.quorum_liveness,
        "admin_liveness": f.probes.admin,
        "group_liveness": f.probes.group,
        "txn_liveness": f.probes.txn,
        "quorum_samples": f.quorum.samples,
        "group_commits_acked": f.groups.commits_acked,
        "group_processed": f.groups.processed,
        "group_settle_ms": f.groups.settle_ms.iter().map(|(_, ms)| ms).collect::<Vec<_>>(),
        "group_undelivered": f.groups.undelivered,
        "violations": outcome.violations,
        "faults": outcome.faults,
        "events": outcome.events,
        "simulated_secs": outcome.simulated_secs,
        "wall_secs": outcome.wall_secs,
        "cpu_secs": outcome.cpu_secs,
        "panic": outcome.panic,
    });
    // Outside the macro: one more key exceeds `json!`'s recursion limit.
    v["beyond_promise"] = json!(f.beyond_promise);
    v["group_stale_reads"] = json!(f.groups.stale_reads);
    v["deletions_sent"] = json!(f.deletions_sent);
    v["deletions_answered"] = json!(f.deletions_answered);
    v["deleted_readable"] = json!(f.deleted_readable.len());
    v
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One test case per (scenario, seed); an unsafe scenario's caught violations are passes.
pub struct CaseResult {
    pub scenario_path: String,
    pub outcome: RunOutcome,
    /// Whether this case counts as a failure of the suite.
    pub failed: bool,
}

pub fn junit(cases: &[CaseResult], extra_failures: &[(String, String)]) -> String {
    let failures = cases.iter().filter(|c| c.failed).count() + extra_failures.len();
    let total = cases.len() + extra_failures.len();
    let time: f64 = cases.iter().map(|c| c.outcome.wall_secs).sum();
    let mut x = String::new();
    let _ = writeln!(x, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        x,
        r#"<testsuite name="weir-sim" tests="{total}" failures="{failures}" time="{time:.3}">"#
    );
    for c in cases {
        let o = &c.outcome;
        let _ = write!(
            x,
            r#"  <testcase classname="{}" name="seed {}" time="{:.3}">"#,
            xml_escape(&o.scenario),
            o.seed,
            o.wall_secs
        );
        if c.failed {
            let _ = write!(
                x,
                r#"<failure message="{}">{}&#10;replay: {}</failure>"#,
                xml_escape(&o.violations.join("; ")),
                xml_escape(&o.violations.join("\n")),
                xml_escape(&replay_command(&c.scenario_path, o.seed, o.swarm))
            );
        }
        let _ = writeln!(
            x,
            "<system-out>trace_hash={:016x}</system-out></testcase>",
            o.trace_hash
        );
    }
    for (name, why) in extra_failures {
        let _ = writeln!(
            x,
            r#"  <testcase classname="{}" name="teeth"><failure message="{}"/></testcase>"#,
            xml_escape(name),
            xml_escape(why)
        );
    }
    let _ = writeln!(x, "</testsuite>");
    x
}

/// The history, one event a line, for reading a failure.
pub fn trace(outcome: &RunOutcome) -> String {
    let mut s = String::new();
    for e in &outcome.history {
        let _ = writeln!(s, "{:>8} ms  {:?}", e.at_ms, e.event);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(passed: bool) -> RunOutcome {
        let findings = Findings {
            invoked: 10,
            acked: 9,
            failed: 1,
            reads: 20,
            lost: if passed {
                vec![]
            } else {
                vec!["p0-3-0".into(), "p0-3-1".into()]
            },
            inconsistent: if passed {
                vec![]
            } else {
                vec![(0, 15, vec!["p0-3-0".into(), "p1-4-0".into()])]
            },
            ..Findings::default()
        };
        RunOutcome {
            history: Vec::new(),
            scenario: "power-loss".into(),
            seed: 7,
            passed,
            violations: findings.violations(&crate::scenario::Check::all()),
            findings,
            trace_hash: 0x0123_4567_89ab_cdef,
            events: 31,
            faults: 2,
            simulated_secs: 20.0,
            wall_secs: 0.04,
            cpu_secs: Some(0.02),
            panic: None,
            injected: Vec::new(),
            evidence_ms: None,
            swarm: false,
        }
    }

    #[test]
    fn failing_summary() {
        insta::assert_snapshot!(summary(&outcome(false), "scenarios/power-loss.toml"));
    }

    #[test]
    fn junit_with_a_failure_and_an_uncaught_unsafe_scenario() {
        let cases = vec![
            CaseResult {
                scenario_path: "scenarios/a.toml".into(),
                outcome: outcome(true),
                failed: false,
            },
            CaseResult {
                scenario_path: "scenarios/power-loss.toml".into(),
                outcome: outcome(false),
                failed: true,
            },
        ];
        let extra = vec![("unsafe-one".to_string(), "no seed caught it".to_string())];
        insta::assert_snapshot!(junit(&cases, &extra).replace("time=\"0.080\"", "time=\"T\""));
    }
}
