//! Harnesses for the fuzz targets in `fuzz_targets/`, kept in a library so the seed writer
//! (`src/bin/seeds.rs`) and the targets share one input format. See docs/FUZZING.md.

pub mod harness_io;
pub mod log_recovery;
pub mod requests;
pub mod unauthenticated;
