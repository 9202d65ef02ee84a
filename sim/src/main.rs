//! `cargo sim run scenarios/X.toml --seed N [--json]` and
//! `cargo sim sweep scenarios/ --seeds 1..500 [--jobs N] [--junit FILE]`.
//! Only meaningful under `--cfg madsim`, which the `cargo sim` alias sets.

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
        },
        /// List the bugs `sweep --plant` can plant.
        Plants,
    }

    pub fn main() -> ExitCode {
        let cli = Cli::parse();
        match cli.command {
            Command::Run {
                scenario,
                seed,
                json,
                trace,
            } => {
                let loaded = match Scenario::load(&scenario) {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                };
                let outcome = sweep::run_isolated(&loaded, seed);
                if trace {
                    print!("{}", report::trace(&outcome));
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
                        },
                    )?;
                    let runs = summary.cases.len();
                    let sim: f64 = summary.cases.iter().map(|c| c.outcome.simulated_secs).sum();
                    println!(
                        "{runs} runs ({} scenarios x {} seeds) in {:.1} s: {:.0} seeds/min, {:.0} simulated s per wall s",
                        files.len(),
                        seeds.len(),
                        summary.wall_secs,
                        runs as f64 / summary.wall_secs.max(1e-9) * 60.0,
                        sim / summary.wall_secs.max(1e-9)
                    );
                    print!("{}", summary.coverage.render());
                    if let Some(bug) = &plant {
                        let runs: usize = summary.plant_catches.iter().map(|c| c.1).sum();
                        let caught: usize = summary.plant_catches.iter().map(|c| c.2).sum();
                        let scenarios = summary.plant_catches.iter().filter(|c| c.2 > 0).count();
                        let first = summary.plant_catches.iter().filter_map(|c| c.3).min();
                        println!(
                            "plant-catch: {bug} caught in {caught}/{runs} runs, {scenarios}/{} scenarios, first seed {}",
                            summary.plant_catches.len(),
                            first.map_or("-".to_string(), |s| s.to_string())
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
    cli::main()
}

#[cfg(not(madsim))]
fn main() -> std::process::ExitCode {
    eprintln!("weir-sim must be built with --cfg madsim: run it as `cargo sim ...`");
    std::process::ExitCode::from(2)
}
