//! `cargo sim run scenarios/X.toml --seed N [--json]` and
//! `cargo sim sweep scenarios/ --seeds 1..500 [--jobs N] [--junit FILE]`.
//! Only meaningful under `--cfg madsim`, which the `cargo sim` alias sets.

/// A run allocates ~12,000 times per simulated second (115 times per request handled);
/// mimalloc's thread-local free lists cost less than glibc's malloc/free (19 % of a run's
/// instructions). Nothing in a run depends on addresses: trace hashes are unchanged.
#[cfg(madsim)]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process. mimalloc 3 asks for them
/// (`madvise(MADV_HUGEPAGE)` on its arenas), and every seed runs on a fresh thread whose heap
/// takes fresh pages: each first touch made the kernel zero 2 MiB (`clear_page_erms`, 5 % of a
/// sweep's CPU in `perf`; 3 × 20 seeds of replication-3-kills and kill-page-cache took 5 % less
/// CPU without). Same as `MIMALLOC_ALLOW_THP=0`, but in force whatever the environment says.
/// Addresses do not reach a run's results: trace hashes are unchanged.
#[cfg(all(madsim, target_os = "linux"))]
fn no_transparent_huge_pages() {
    // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

#[cfg(all(madsim, not(target_os = "linux")))]
fn no_transparent_huge_pages() {}

#[cfg(madsim)]
mod cli {
    use std::path::PathBuf;
    use std::process::ExitCode;

    use clap::{Parser, Subcommand};
    use weir_sim::report;
    use weir_sim::scenario::Scenario;
    use weir_sim::sweep;

    #[derive(Parser)]
    #[command(
        name = "cargo sim",
        about = "Deterministic simulation of Weir under seeded faults"
    )]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Subcommand)]
    enum Command {
        /// Run one seed of one scenario.
        Run {
            scenario: PathBuf,
            #[arg(long)]
            seed: u64,
            /// Print one JSON object instead of the summary.
            #[arg(long)]
            json: bool,
            /// Also print the whole history, one event a line.
            #[arg(long)]
            trace: bool,
            /// Run the seed's swarm configuration (as `sweep --swarm` did).
            #[arg(long)]
            swarm: bool,
            /// Write a picture of the run here: one self-contained HTML page (a space-time
            /// diagram of every node and client, the violations and their witnesses).
            #[arg(long)]
            html: Option<PathBuf>,
        },
        /// Shrink a failing seed to the smallest fault schedule that still fails the same
        /// check; print it as a scenario file (TOML with a `timeline`) that fails on replay.
        Shrink {
            scenario: PathBuf,
            #[arg(long)]
            seed: u64,
            /// Shrink the seed's swarm configuration (as `sweep --swarm` ran it).
            #[arg(long)]
            swarm: bool,
            /// At most this many simulation runs.
            #[arg(long, default_value_t = 200)]
            max_runs: usize,
            /// Write the shrunk scenario here instead of to standard output.
            #[arg(long)]
            out: Option<PathBuf>,
        },
        /// Run many seeds of many scenarios; exit non-zero on any violation.
        Sweep {
            /// Scenario files or directories of them.
            #[arg(required = true)]
            paths: Vec<PathBuf>,
            /// 1..500 (500 excluded), 1..=500, or one seed.
            #[arg(long, default_value = "1..=20")]
            seeds: String,
            /// Seeds run at once (each on its own thread).
            #[arg(long, default_value_t = 2)]
            jobs: usize,
            /// Write JUnit XML here.
            #[arg(long)]
            junit: Option<PathBuf>,
            /// Measure a planted bug: plant it in every safe scenario and count the seeds that
            /// catch it (`cargo sim plants` lists them). Always exits 0 unless arguments are bad.
            #[arg(long)]
            plant: Option<String>,
            /// Judge as before reads counted as knowledge (the original six checks, one request
            /// in flight per producer): the "before" column of the catch-rate table.
            #[arg(long)]
            baseline: bool,
            /// Swarm testing: per seed, only a random subset of each scenario's fault kinds, at
            /// random rates, drawn from the seed (replay with `run --swarm`).
            #[arg(long)]
            swarm: bool,
            /// Only the safe scenarios (expected safe, nothing planted), as the long night
            /// sweep runs them.
            #[arg(long)]
            safe_only: bool,
            /// Every seed on every scenario, past a scenario's own `seeds` cap (CI's budget).
            #[arg(long)]
            ignore_caps: bool,
        },
        /// Judge your own settings: run the standard fault suite (process kill, power loss,
        /// network partition, disk faults, leader failover) against them and say, class by
        /// class, whether data the client was told about can be lost. Exits 1 if any can.
        Check {
            /// Your broker's server.properties.
            #[arg(long)]
            config: PathBuf,
            /// Topic-level settings, k=v,k=v (replication.factor is accepted here too).
            #[arg(long)]
            topic_config: Option<String>,
            /// Producer settings, k=v,k=v (acks, enable.idempotence, retries,
            /// max.in.flight.requests.per.connection).
            #[arg(long)]
            producer: Option<String>,
            /// Seeds per fault class.
            #[arg(long, default_value = "1..=20")]
            seeds: String,
            /// Where the shrunk schedules of unsafe classes are written.
            #[arg(long, default_value = "target/sim-check")]
            out_dir: PathBuf,
        },
        /// List the bugs `sweep --plant` can plant.
        Plants,
    }

    /// `cargo sim shrink`: the shrunk scenario to stdout (or `out`), the progress to stderr.
    fn shrink_cli(
        path: &std::path::Path,
        seed: u64,
        swarm: bool,
        max_runs: usize,
        out: Option<&std::path::Path>,
    ) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let base: toml::Value =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let shrunk = weir_sim::shrink::shrink(&base, &name, seed, swarm, max_runs, &mut |m| {
            eprintln!("{m}")
        })?;
        let (b, a) = (&shrunk.before, &shrunk.after);
        let shown = out.map_or("shrunk.toml".to_string(), |p| p.display().to_string());
        let header = format!(
            "# Shrunk from {} --seed {seed}{}: fails `{}` with {} faults and {} narrow-window \
             points\n# (was {} and {}), {} s instead of {} s; {} runs. Replay:\n#   {}\n",
            path.display(),
            if swarm { " --swarm" } else { "" },
            shrunk.target,
            a.faults.len(),
            a.points.len(),
            b.faults.len(),
            b.points.len(),
            a.duration_secs,
            b.duration_secs,
            shrunk.runs,
            report::replay_command(&shown, seed, false)
        );
        let file = format!("{header}{}", shrunk.toml);
        match out {
            Some(p) => std::fs::write(p, &file).map_err(|e| format!("{}: {e}", p.display()))?,
            None => print!("{file}"),
        }
        eprintln!(
            "shrunk: {} → {} faults ({} → {} with narrow-window points), fails {} on replay \
             (trace_hash {:016x})",
            b.faults.len(),
            a.faults.len(),
            b.size(),
            a.size(),
            shrunk.target,
            shrunk.outcome.trace_hash
        );
        Ok(())
    }

    /// The simulated time since the run began, in milliseconds as the history prints it (so a
    /// log line lines up with `--trace`); blank outside a simulation.
    struct SimTime;

    impl tracing_subscriber::fmt::time::FormatTime for SimTime {
        fn format_time(
            &self,
            w: &mut tracing_subscriber::fmt::format::Writer<'_>,
        ) -> std::fmt::Result {
            match madsim::time::TimeHandle::try_current() {
                Some(time) => write!(w, "{:>8} ms", time.elapsed().as_millis()),
                None => Ok(()),
            }
        }
    }

    pub fn main() -> ExitCode {
        // The brokers' own logs, for debugging one seed: `WEIR_SIM_LOG=info cargo sim run ...`
        // (to stderr; the simulated node's name is in each line's span, the run's seed in its thread name,
        // `seed-N`, which tells the runs of a sweep apart).
        if let Ok(filter) = std::env::var("WEIR_SIM_LOG") {
            tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_writer(std::io::stderr)
                .with_thread_names(true)
                .with_timer(SimTime)
                .init();
        }
        let cli = Cli::parse();
        match cli.command {
            Command::Run {
                scenario,
                seed,
                json,
                trace,
                swarm,
                html,
            } => {
                let mut loaded = match Scenario::load(&scenario) {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                };
                if swarm {
                    weir_sim::swarm::apply(&mut loaded, seed);
                }
                let mut outcome = sweep::run_isolated(&loaded, seed);
                outcome.swarm = swarm;
                if trace {
                    print!("{}", report::trace(&outcome));
                }
                if let Some(path) = &html {
                    let page = weir_sim::html::page(
                        &outcome,
                        loaded.cluster.brokers,
                        &scenario.display().to_string(),
                    );
                    if let Err(e) = std::fs::write(path, page) {
                        eprintln!("error: {}: {e}", path.display());
                        return ExitCode::from(2);
                    }
                    eprintln!("wrote {}", path.display());
                }
                if json {
                    println!("{}", report::json(&outcome));
                } else {
                    print!(
                        "{}",
                        report::summary(&outcome, &scenario.display().to_string())
                    );
                }
                if outcome.passed {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            }
            Command::Shrink {
                scenario,
                seed,
                swarm,
                max_runs,
                out,
            } => match shrink_cli(&scenario, seed, swarm, max_runs, out.as_deref()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            },
            Command::Check {
                config,
                topic_config,
                producer,
                seeds,
                out_dir,
            } => {
                use weir_sim::verdict;
                let run = || -> Result<bool, String> {
                    let text = std::fs::read_to_string(&config)
                        .map_err(|e| format!("{}: {e}", config.display()))?;
                    let user = verdict::UserConfig {
                        broker: verdict::parse_properties(&text)
                            .map_err(|e| format!("{}: {e}", config.display()))?,
                        topic: verdict::parse_pairs(topic_config.as_deref().unwrap_or(""))?,
                        producer: verdict::parse_pairs(producer.as_deref().unwrap_or(""))?,
                    };
                    let seeds = sweep::parse_seeds(&seeds)?;
                    let results =
                        verdict::check(&user, &seeds, &out_dir, &mut |m| eprintln!("{m}"))?;
                    print!("{}", verdict::render(&user, &results));
                    Ok(!results.iter().any(|(_, v)| {
                        matches!(
                            v,
                            verdict::Verdict::Unsafe { .. }
                                | verdict::Verdict::Dropped { .. }
                                | verdict::Verdict::Inconclusive { .. }
                        )
                    }))
                };
                match run() {
                    Ok(true) => ExitCode::SUCCESS,
                    Ok(false) => ExitCode::FAILURE,
                    Err(e) => {
                        eprintln!("error: {e}");
                        ExitCode::from(2)
                    }
                }
            }
            Command::Plants => {
                for (name, _) in weir::config::PlantedBug::NAMES {
                    println!("{name}");
                }
                ExitCode::SUCCESS
            }
            Command::Sweep {
                paths,
                seeds,
                jobs,
                junit,
                plant,
                baseline,
                swarm,
                safe_only,
                ignore_caps,
            } => {
                let run = || -> Result<bool, String> {
                    let seeds = sweep::parse_seeds(&seeds)?;
                    let files = sweep::scenario_files(&paths)?;
                    if files.is_empty() {
                        return Err("no scenario files found".into());
                    }
                    let summary = sweep::sweep(
                        &files,
                        &seeds,
                        jobs,
                        sweep::Options {
                            plant: plant.as_deref(),
                            baseline,
                            swarm,
                            safe_only,
                            ignore_caps,
                        },
                    )?;
                    let runs = summary.cases.len();
                    // The scenarios that ran (`--plant` and `--safe-only` leave some files out).
                    let scenarios = summary
                        .cases
                        .iter()
                        .map(|c| c.scenario_path.as_str())
                        .collect::<std::collections::BTreeSet<_>>()
                        .len();
                    let sim: f64 = summary.cases.iter().map(|c| c.outcome.simulated_secs).sum();
                    let cpu: Option<f64> = summary.cases.iter().map(|c| c.outcome.cpu_secs).sum();
                    println!(
                        "{runs} runs ({scenarios} scenarios x {} seeds) in {:.1} s: {:.0} seeds/min, {:.0} simulated s per wall s{}",
                        seeds.len(),
                        summary.wall_secs,
                        runs as f64 / summary.wall_secs.max(1e-9) * 60.0,
                        sim / summary.wall_secs.max(1e-9),
                        cpu.map_or(String::new(), |cpu| format!(
                            ", {:.0} per CPU s ({cpu:.1} CPU s)",
                            sim / cpu.max(1e-9)
                        ))
                    );
                    print!("{}", summary.coverage.render());
                    if let Some(bug) = &plant {
                        let runs: usize = summary.plant_catches.iter().map(|c| c.1).sum();
                        let caught: usize = summary.plant_catches.iter().map(|c| c.2).sum();
                        let scenarios = summary.plant_catches.iter().filter(|c| c.2 > 0).count();
                        let first = summary.plant_catches.iter().filter_map(|c| c.3).min();
                        // Seeds to first detection, per scenario, a scenario that never caught
                        // it counted as one more seed than it ran (censored).
                        let to_first: Vec<usize> = summary
                            .plant_catches
                            .iter()
                            .map(|c| {
                                c.3.map_or(c.1 + 1, |s| {
                                    seeds
                                        .iter()
                                        .position(|&x| x == s)
                                        .map_or(c.1 + 1, |p| p + 1)
                                })
                            })
                            .collect();
                        let mean =
                            to_first.iter().sum::<usize>() as f64 / to_first.len().max(1) as f64;
                        // Per scenario, for the mutation table (scripts/mutation-run).
                        for (name, runs, caught, first) in &summary.plant_catches {
                            println!(
                                "plant-catch-scenario: {bug} {name} {caught}/{runs} first seed {}",
                                first.map_or("-".to_string(), |s| s.to_string())
                            );
                        }
                        println!(
                            "plant-catch: {bug} caught in {caught}/{runs} runs, {scenarios}/{} scenarios, first seed {}, mean seeds to first detection {mean:.1}{}",
                            summary.plant_catches.len(),
                            first.map_or("-".to_string(), |s| s.to_string()),
                            if swarm { " (swarm)" } else { "" }
                        );
                    }
                    if let Some(path) = junit {
                        sweep::write_junit(&path, &summary)?;
                    }
                    Ok(summary.passed())
                };
                match run() {
                    Ok(true) => ExitCode::SUCCESS,
                    Ok(false) => {
                        eprintln!("sweep failed: see the violations and replay commands above");
                        ExitCode::FAILURE
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        ExitCode::from(2)
                    }
                }
            }
        }
    }
}

#[cfg(madsim)]
fn main() -> std::process::ExitCode {
    no_transparent_huge_pages();
    cli::main()
}

#[cfg(not(madsim))]
fn main() -> std::process::ExitCode {
    eprintln!("weir-sim must be built with --cfg madsim: run it as `cargo sim ...`");
    std::process::ExitCode::from(2)
}
