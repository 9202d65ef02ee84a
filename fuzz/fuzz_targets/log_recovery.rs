//! The batch validator and log recovery: the input becomes the files of a partition directory
//! (segments, indexes, checkpoint, clean marker) on an in-memory disk, and the log is opened.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_fuzz::log_recovery::run(data));
