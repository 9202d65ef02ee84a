//! `weir-jepsen run SCENARIO... [--runs N] [--seed S] [--duration SECS] [--junit FILE]`: the
//! simulator's scenarios on real `weir serve` processes under real faults (root only), judged
//! by the simulator's checker; exits 1 on any violation of a safe scenario and on any unsafe
//! scenario (a tooth) that no run caught. `weir-jepsen check HISTORY --scenario FILE` judges a
//! kept history file again. See docs/JEPSEN.md.

#[cfg(not(madsim))]
mod cli {
    use std::path::PathBuf;
    use std::process::ExitCode;

    use clap::{Parser, Subcommand};
    use weir_sim::jepsen::run::{self, Options, Outcome};
    use weir_sim::scenario::{Expect, Scenario};

    #[derive(Parser)]
    #[command(
        name = "weir-jepsen",
        about = "The simulator's scenarios on real weir processes under real faults"
    )]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Run scenarios on real processes (root: namespaces, nftables, tc).
        Run {
            #[arg(required = true)]
            scenarios: Vec<PathBuf>,
            /// The broker binary.
            #[arg(long, default_value = "target/release/weir")]
            weir: PathBuf,
            /// A `cargo build --features planted` broker, for scenarios with `planted_bug`.
            #[arg(long)]
            weir_planted: Option<PathBuf>,
            /// Runs per scenario (seeds `seed`, `seed+1`, ...). An unsafe scenario stops at
            /// its first caught run.
            #[arg(long, default_value_t = 1)]
            runs: u64,
            #[arg(long, default_value_t = 1)]
            seed: u64,
            /// Seconds of workload and faults per run (default: the scenario's).
            #[arg(long)]
            duration: Option<u64>,
            /// Where each run keeps its properties, logs and history.
            #[arg(long, default_value = "target/jepsen/runs")]
            out: PathBuf,
            /// Write JUnit XML here.
            #[arg(long)]
            junit: Option<PathBuf>,
            /// Keep the data directories of passing runs too.
            #[arg(long)]
            keep: bool,
            /// A Python with confluent-kafka: each run adds the librdkafka clients
            /// (tests/jepsen/confluent_*.py): a producer with the scenario's acks and
            /// idempotence, an assign() consumer, a classic and a KIP-848 consumer group, an
            /// AdminClient.
            #[arg(long)]
            python: Option<PathBuf>,
            /// A node with kafkajs installed in tests/jepsen (npm ci): each run adds an
            /// idempotent acks=all kafkajs producer (tests/jepsen/kafkajs_producer.mjs).
            #[arg(long)]
            node: Option<PathBuf>,
        },
        /// Judge a history file (`history.jsonl` of a run) with the scenario's checks.
        Check {
            history: PathBuf,
            #[arg(long)]
            scenario: PathBuf,
        },
    }

    fn xml(s: &str) -> String {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    }

    fn junit(cases: &[(String, Outcome, String, bool)]) -> String {
        let failures = cases.iter().filter(|c| c.3).count();
        let time: f64 = cases.iter().map(|c| c.1.wall_secs).sum();
        let mut x = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"weir-jepsen\" tests=\"{}\" failures=\"{failures}\" time=\"{time:.3}\">\n",
            cases.len()
        );
        for (path, o, rerun, case_failed) in cases {
            x.push_str(&format!(
                "  <testcase classname=\"{}\" name=\"seed {}\" time=\"{:.3}\">",
                xml(path),
                o.seed,
                o.wall_secs
            ));
            if *case_failed {
                let why = match (&o.error, o.expect) {
                    (Some(e), _) => e.clone(),
                    (None, Expect::Unsafe) => "unsafe scenario not caught".into(),
                    (None, Expect::Safe) => o.violations.join("; "),
                };
                x.push_str(&format!(
                    "<failure message=\"{}\">history: {}&#10;rerun: {}</failure>",
                    xml(&why),
                    xml(&o.history.display().to_string()),
                    xml(rerun)
                ));
            }
            x.push_str(&format!(
                "<system-out>faults={} invoked={} acked={} reads={} violations={}</system-out></testcase>\n",
                o.faults,
                o.invoked,
                o.acked,
                o.reads,
                xml(&o.violations.join("; "))
            ));
        }
        x.push_str("</testsuite>\n");
        x
    }

    pub fn main() -> ExitCode {
        let cli = Cli::parse();
        match cli.command {
            Command::Check { history, scenario } => {
                let scenario = match Scenario::load(&scenario) {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("{e}");
                        return ExitCode::from(2);
                    }
                };
                match run::judge(&history, &scenario) {
                    Ok(j) => {
                        println!(
                            "invoked {} acked {} reads {}: {}",
                            j.invoked,
                            j.acked,
                            j.reads,
                            if j.violations.is_empty() {
                                "no violations".to_string()
                            } else {
                                j.violations.join("; ")
                            }
                        );
                        ExitCode::from(u8::from(!j.violations.is_empty()))
                    }
                    Err(e) => {
                        eprintln!("{e}");
                        ExitCode::from(2)
                    }
                }
            }
            Command::Run {
                scenarios,
                weir,
                weir_planted,
                runs,
                seed,
                duration,
                out,
                junit: junit_path,
                keep,
                python,
                node,
            } => {
                let mut cases = Vec::new();
                let mut failed = false;
                for path in &scenarios {
                    let scenario = match Scenario::load(path) {
                        Ok(s) => s,
                        Err(e) => {
                            eprintln!("{e}");
                            return ExitCode::from(2);
                        }
                    };
                    let mut caught = false;
                    for s in seed..seed + runs.min(1_000) {
                        let dir = out.join(format!("{}-seed{s}", scenario.name));
                        let _ = std::fs::remove_dir_all(&dir);
                        let opts = Options {
                            weir: weir.clone(),
                            weir_planted: weir_planted.clone(),
                            seed: s,
                            duration_secs: duration,
                            dir: dir.clone(),
                            python: python.clone(),
                            node: node.clone(),
                        };
                        let o = run::run(&scenario, &opts);
                        let rerun = format!(
                            "sudo target/debug/weir-jepsen run {} --seed {s} --runs 1{} --weir {}{}",
                            path.display(),
                            duration.map_or(String::new(), |d| format!(" --duration {d}")),
                            weir.display(),
                            weir_planted
                                .as_ref()
                                .map_or(String::new(), |p| format!(" --weir-planted {}", p.display())),
                        ) + &python
                            .as_ref()
                            .map_or(String::new(), |p| format!(" --python {}", p.display()))
                            + &node
                                .as_ref()
                                .map_or(String::new(), |p| format!(" --node {}", p.display()));
                        println!(
                            "{} seed {s}: {} in {:.1} s; faults {} [{}]; produce ops {} (acked {}), reads {}; violations: {}{}{}",
                            scenario.name,
                            match (o.failed(), scenario.expect) {
                                (false, Expect::Safe) => "ok",
                                (false, Expect::Unsafe) => "caught",
                                (true, Expect::Unsafe) if o.error.is_none() => "not caught",
                                (true, _) => "FAIL",
                            },
                            o.wall_secs,
                            o.faults,
                            o.fault_kinds,
                            o.invoked,
                            o.acked,
                            o.reads,
                            if o.violations.is_empty() { "none".to_string() } else { o.violations.join("; ") },
                            o.error.as_ref().map_or(String::new(), |e| format!("; error: {e}")),
                            if o.left_out.is_empty() { String::new() } else { format!("; left out: {}", o.left_out.join(", ")) },
                        );
                        for c in &o.clients {
                            println!("  {c}");
                        }
                        let this_failed =
                            o.error.is_some() || (scenario.expect == Expect::Safe && o.failed());
                        if this_failed {
                            failed = true;
                            println!("  kept {}; rerun: {rerun}", dir.display());
                        } else if !keep {
                            for i in 0..scenario.cluster.nodes() {
                                let _ = std::fs::remove_dir_all(dir.join(format!("node{}", i + 1)));
                            }
                        }
                        caught |= o.error.is_none() && !o.violations.is_empty();
                        let stop = scenario.expect == Expect::Unsafe && caught;
                        cases.push((path.display().to_string(), o, rerun, this_failed));
                        if stop {
                            break;
                        }
                    }
                    if scenario.expect == Expect::Unsafe && !caught {
                        failed = true;
                        // Every run of an uncaught tooth is a failed case.
                        for c in cases
                            .iter_mut()
                            .filter(|c| c.0 == path.display().to_string())
                        {
                            c.3 = true;
                        }
                        println!(
                            "{}: TEETH MISSING: no run caught the unsafe scenario",
                            scenario.name
                        );
                    }
                }
                // An unsafe scenario's uncaught runs before its catch are not failures.
                let report = cases;
                let runs_total = report.len();
                let faults: usize = report.iter().map(|c| c.1.faults).sum();
                let ops: usize = report.iter().map(|c| c.1.invoked).sum();
                let wall: f64 = report.iter().map(|c| c.1.wall_secs).sum();
                println!(
                    "weir-jepsen: {runs_total} runs, {faults} faults, {ops} produce ops, {:.0} s; {}",
                    wall,
                    if failed { "FAILED" } else { "passed" }
                );
                if let Some(p) = junit_path {
                    if let Some(d) = p.parent() {
                        let _ = std::fs::create_dir_all(d);
                    }
                    if let Err(e) = std::fs::write(&p, junit(&report)) {
                        eprintln!("{}: {e}", p.display());
                        return ExitCode::from(2);
                    }
                }
                ExitCode::from(u8::from(failed))
            }
        }
    }
}

#[cfg(not(madsim))]
fn main() -> std::process::ExitCode {
    cli::main()
}

/// Real processes and real faults only: the simulator build has nothing to run here.
#[cfg(madsim)]
fn main() {
    eprintln!("weir-jepsen runs real processes: build it without --cfg madsim");
    std::process::exit(2);
}
