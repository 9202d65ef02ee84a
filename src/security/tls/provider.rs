//! rustls's crypto provider and clock, through the io layer. The simulator's builds draw
//! rustls's random bytes (client/server randoms, session ids, tickets) from the io generator,
//! so a seed replays them; production keeps ring's OS-seeded CSPRNG, which the io generator
//! (ids and jitter, not cryptography) must not replace. Certificate validity is checked
//! against the io clock's wall time in both. (ring's key exchange draws from the OS itself:
//! the ciphertext differs between runs, the control flow does not.)

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::UnixTime;
use rustls::time_provider::TimeProvider;

use crate::io::{Clock, Io};

#[derive(Debug)]
struct IoTime(ClockRef);

/// `Clock` is not `Debug`; rustls wants its providers to be.
struct ClockRef(Arc<dyn Clock>);

impl std::fmt::Debug for ClockRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("io clock")
    }
}

impl TimeProvider for IoTime {
    fn current_time(&self) -> Option<UnixTime> {
        let ms = self.0 .0.wall_ms();
        (ms >= 0).then(|| UnixTime::since_unix_epoch(std::time::Duration::from_millis(ms as u64)))
    }
}

pub(super) fn time(io: &Io) -> Arc<dyn TimeProvider> {
    Arc::new(IoTime(ClockRef(io.clock.clone())))
}

#[cfg(madsim)]
mod simulated {
    use std::sync::Arc;

    use rustls::crypto::{GetRandomFailed, SecureRandom};

    use crate::io::Rng;

    pub(super) struct IoRandom(pub(super) Arc<dyn Rng>);

    impl std::fmt::Debug for IoRandom {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("io rng")
        }
    }

    impl SecureRandom for IoRandom {
        fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
            for chunk in buf.chunks_mut(8) {
                let bytes = self.0.next_u64().to_le_bytes();
                chunk.copy_from_slice(&bytes[..chunk.len()]);
            }
            Ok(())
        }
    }

    // rustls takes `&'static dyn SecureRandom`: one per simulated node's io, leaked once each.
    pub(super) fn leak(rng: Arc<dyn Rng>) -> &'static dyn SecureRandom {
        Box::leak(Box::new(IoRandom(rng)))
    }
}

pub(super) fn provider(io: &Io) -> CryptoProvider {
    // Deprecated only for lacking post-quantum key exchange, which ring does not have.
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    #[cfg(madsim)]
    let provider = CryptoProvider {
        secure_random: simulated::leak(io.rng.clone()),
        ..provider
    };
    #[cfg(not(madsim))]
    let _ = io;
    provider
}
