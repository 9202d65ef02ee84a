//! The unauthenticated path of a SASL listener (SASL frames, requests out of turn, TLS records
//! before the handshake), as one connection to a fresh broker.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_fuzz::unauthenticated::run(data));
