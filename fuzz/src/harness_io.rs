//! An `Io` for running the broker inside a fuzz target: an in-memory disk, a seeded generator,
//! a clock whose sleeps end at once (a long poll or a timeout costs no wall time), a network
//! that binds but never accepts, and a spawner that drops its tasks (no accept loop, no
//! background loop): requests go straight to `Broker::handle_request`.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use weir::io::memdisk::MemDisk;
use weir::io::os::OsRng;
use weir::io::{BoxFuture, BoxStream, Clock, Io, Listener, Network, Spawn};

/// Time moves only when something sleeps: by exactly the sleep.
#[derive(Default)]
pub struct InstantClock {
    elapsed_ms: Arc<AtomicU64>,
}

/// Wall-clock origin: 2026-01-01, so record timestamps look ordinary.
const WALL_ORIGIN_MS: i64 = 1_767_225_600_000;

impl Clock for InstantClock {
    fn monotonic(&self) -> Duration {
        Duration::from_millis(self.elapsed_ms.load(Ordering::SeqCst))
    }

    fn wall_ms(&self) -> i64 {
        WALL_ORIGIN_MS + self.elapsed_ms.load(Ordering::SeqCst) as i64
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let ms = duration.as_millis().min(u64::MAX as u128 / 2) as u64;
        self.elapsed_ms.fetch_add(ms.max(1), Ordering::SeqCst);
        Box::pin(std::future::ready(()))
    }
}

struct DropTasks;

impl Spawn for DropTasks {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        drop(task);
    }
}

struct NoNetwork;

struct IdleListener(SocketAddr);

impl Listener for IdleListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>> {
        Box::pin(std::future::pending())
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.0)
    }
}

impl Network for NoNetwork {
    fn bind(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<Box<dyn Listener>>> {
        Box::pin(async move { Ok(Box::new(IdleListener(addr)) as Box<dyn Listener>) })
    }

    fn connect(&self, _addr: SocketAddr) -> BoxFuture<'static, io::Result<BoxStream>> {
        Box::pin(async { Err(io::Error::other("no network in the fuzz harness")) })
    }

    /// IP literals and `localhost` only: the harness has no resolver.
    fn resolve(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<SocketAddr>> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let found = if host.eq_ignore_ascii_case("localhost") {
            Ok(SocketAddr::from(([127, 0, 0, 1], port)))
        } else {
            host.parse::<std::net::IpAddr>()
                .map(|ip| SocketAddr::new(ip, port))
                .map_err(|_| io::Error::other(format!("no resolver in the fuzz harness: {host}")))
        };
        Box::pin(async move { found })
    }
}

pub fn io(disk: &MemDisk) -> Io {
    Io {
        clock: Arc::new(InstantClock::default()),
        rng: Arc::new(OsRng::with_seed(1)),
        spawner: Arc::new(DropTasks),
        net: Arc::new(NoNetwork),
        disk: Arc::new(disk.clone()),
    }
}

/// Polls a future to completion without a runtime. Nothing in the harness waits on anything
/// but the instant clock and the in-memory disk, so a future still pending after this many
/// polls is a hang in the broker: that is a finding, and it panics.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    const MAX_POLLS: usize = 10_000;
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..MAX_POLLS {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
    panic!("a request did not complete: the broker waits on something that never comes");
}
