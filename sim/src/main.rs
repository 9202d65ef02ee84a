//! The simulator's command line. Only meaningful under `--cfg madsim` (use `cargo sim`).

fn main() {
    #[cfg(not(madsim))]
    {
        eprintln!("weir-sim must be built with --cfg madsim: run it as `cargo sim ...`");
        std::process::exit(2);
    }
}
