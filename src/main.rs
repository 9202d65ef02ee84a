//! The `weir` command: run a broker, administer topics, groups, configs and ACLs, produce and
//! consume, benchmark. The commands live in `cli/`, one file a command.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    // Rust ignores SIGPIPE, so a closed pipe (`weir topics list | head`) makes `println!`
    // panic; a command-line tool should just stop, as `kafka-topics.sh | head` does.
    #[cfg(unix)]
    // SAFETY: restoring a signal's default disposition before any thread starts touches no
    // memory of this process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("weir: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir: {e:#}");
            ExitCode::FAILURE
        }
    }
}
