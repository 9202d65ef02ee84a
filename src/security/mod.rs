//! Listener security: TLS ([`tls`], rustls over the io layer), SASL ([`sasl`], a pure core per
//! connection) and principals from certificates ([`principal`]). The broker's connection loop
//! (`broker::server`) drives them; nothing here touches a socket.

pub mod principal;
pub mod sasl;
pub mod tls;

use crate::io::Io;

/// Fresh random bytes for a SCRAM server nonce: the OS's CSPRNG in production, the io
/// generator in the simulator (so a seed replays the exchange).
pub fn entropy(io: &Io) -> [u8; 18] {
    let mut out = [0u8; 18];
    #[cfg(not(madsim))]
    {
        use ring::rand::SecureRandom;
        if ring::rand::SystemRandom::new().fill(&mut out).is_ok() {
            return out;
        }
    }
    for chunk in out.chunks_mut(8) {
        let bytes = io.rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    out
}
