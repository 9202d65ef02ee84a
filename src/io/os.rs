//! Production implementations of the I/O traits, on tokio and the OS.
//!
//! Under `--cfg madsim` the `tokio` alias is madsim's, so [`TokioClock`], [`TokioSpawn`] and
//! [`TokioNet`] become simulated too. The real disk lives in [`super::osdisk`], which simulation
//! builds leave out (the simulator supplies [`super::memdisk::MemDisk`]).

use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use rand::{RngCore, SeedableRng};

use super::{BoxFuture, BoxStream, Clock, Generator, Listener, Network, Rng, Spawn};

pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    pub fn new() -> TokioClock {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn monotonic(&self) -> Duration {
        tokio::time::Instant::now().duration_since(self.origin)
    }

    fn wall_ms(&self) -> i64 {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        since_epoch.as_millis() as i64
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// The production [`Rng`]: the io layer's one generator ([`super::Generator`]), seeded once from
/// the OS. Not for cryptography: ids and jitter only. The simulator builds it with
/// [`OsRng::with_seed`] from the run's seed, so it decides every draw.
pub struct OsRng {
    state: Mutex<Generator>,
}

impl OsRng {
    pub fn new() -> OsRng {
        // Without OS randomness fall back to the clock: ids must still differ between runs.
        let state = Generator::try_from_os_rng().unwrap_or_else(|_| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos() as u64;
            super::generator(nanos)
        });
        OsRng {
            state: Mutex::new(state),
        }
    }

    pub fn with_seed(seed: u64) -> OsRng {
        OsRng {
            state: Mutex::new(super::generator(seed)),
        }
    }
}

impl Default for OsRng {
    fn default() -> Self {
        Self::new()
    }
}

impl Rng for OsRng {
    fn next_u64(&self) -> u64 {
        // A panic elsewhere while drawing leaves the generator whole: keep drawing.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        RngCore::next_u64(&mut *state)
    }
}

pub struct TokioSpawn;

impl Spawn for TokioSpawn {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        tokio::spawn(task);
    }
}

pub struct TokioNet;

struct TokioListener(tokio::net::TcpListener);

impl Listener for TokioListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>> {
        Box::pin(async move {
            let (stream, peer) = self.0.accept().await?;
            let _ = stream.set_nodelay(true);
            Ok((Box::new(stream) as BoxStream, peer))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Network for TokioNet {
    fn bind(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            Ok(Box::new(TokioListener(listener)) as Box<dyn Listener>)
        })
    }

    fn connect(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            let _ = stream.set_nodelay(true);
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn resolve(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<SocketAddr>> {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        Box::pin(async move {
            // Literals and `localhost` need no resolver (and give the same answer everywhere).
            if let Ok(ip) = host.parse::<std::net::IpAddr>() {
                return Ok(SocketAddr::new(ip, port));
            }
            if host.eq_ignore_ascii_case("localhost") {
                return Ok(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port)));
            }
            let mut found = tokio::net::lookup_host((host.as_str(), port)).await?;
            found.next().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("host name '{host}' has no address"),
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn names_and_literals_resolve() {
        let net = TokioNet;
        let v4: SocketAddr = "127.0.0.1:9092".parse().unwrap();
        assert_eq!(net.resolve("127.0.0.1", 9092).await.unwrap(), v4);
        assert_eq!(net.resolve("localhost", 9092).await.unwrap(), v4);
        assert_eq!(net.resolve("LOCALHOST", 9092).await.unwrap(), v4);
        let v6: SocketAddr = "[::1]:9093".parse().unwrap();
        assert_eq!(net.resolve("[::1]", 9093).await.unwrap(), v6);
        assert_eq!(net.resolve("::1", 9093).await.unwrap(), v6);
        // RFC 2606: `.invalid` never resolves.
        assert!(net.resolve("no-such-broker.invalid", 9092).await.is_err());
    }
}
