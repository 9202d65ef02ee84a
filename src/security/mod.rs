//! Listener security: TLS ([`tls`], rustls over the io layer), SASL ([`sasl`], a pure core per
//! connection) and principals from certificates ([`principal`]). The broker's connection loop
//! (`broker::server`) drives them; nothing here touches a socket.

pub mod principal;
pub mod sasl;
pub mod tls;

use crate::io::Io;

/// Fresh random bytes for a SCRAM server nonce (see [`crate::io::secure_random`]).
pub fn entropy(io: &Io) -> [u8; 18] {
    let mut out = [0u8; 18];
    crate::io::secure_random(io.rng.as_ref(), &mut out);
    out
}
