//! The request decoder and dispatcher: the input is a client's byte stream (size-prefixed
//! request frames), answered by a fresh broker on an in-memory disk, then restarted.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_fuzz::requests::run(data));
