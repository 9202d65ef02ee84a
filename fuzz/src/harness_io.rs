//! An `Io` for running the broker inside a fuzz target: an in-memory disk, a seeded generator,
//! a clock that moves only when a sleep ends (a long poll or a timeout costs no wall time), a
//! network that binds but never accepts, and a spawner whose tasks [`block_on`] polls beside
//! the future it waits for: the broker's own drivers (the metadata quorum every metadata change
//! commits through, even on one node) run, and requests go straight to
//! `Broker::handle_request`.
//!
//! The executor has no wakers: each round polls the awaited future and then every spawned task
//! once. A sleep ends only after [`SLEEP_ROUNDS`] polls, so the tasks a request waits for (a
//! commit through the quorum driver) get that many rounds before a timeout beside them fires.

use std::cell::RefCell;
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
        let elapsed = self.elapsed_ms.clone();
        let mut polls = 0;
        Box::pin(std::future::poll_fn(move |_| {
            polls += 1;
            if polls < SLEEP_ROUNDS {
                return Poll::Pending;
            }
            elapsed.fetch_add(ms.max(1), Ordering::SeqCst);
            Poll::Ready(())
        }))
    }
}

/// Polls a sleep takes to end: the rounds other tasks get before a timeout fires.
pub const SLEEP_ROUNDS: usize = 64;

thread_local! {
    /// The spawned tasks [`block_on`] polls, and those spawned while it polls them.
    static TASKS: RefCell<Vec<BoxFuture<'static, ()>>> = const { RefCell::new(Vec::new()) };
    static SPAWNED: RefCell<Vec<BoxFuture<'static, ()>>> = const { RefCell::new(Vec::new()) };
}

/// Keeps spawned tasks for [`block_on`] to poll (on this thread).
struct PolledTasks;

impl Spawn for PolledTasks {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        SPAWNED.with(|s| s.borrow_mut().push(task));
    }
}

/// Drops every spawned task, as a process kill does: call it before a broker starts again on
/// the same disk, so the old one's drivers never write beside the new one's.
pub fn kill_tasks() {
    let tasks = TASKS.with(|t| std::mem::take(&mut *t.borrow_mut()));
    let spawned = SPAWNED.with(|s| std::mem::take(&mut *s.borrow_mut()));
    drop(tasks);
    drop(spawned);
}

/// Polls every spawned task once; finished ones are dropped.
fn poll_tasks(cx: &mut Context<'_>) {
    let mut tasks = TASKS.with(|t| std::mem::take(&mut *t.borrow_mut()));
    tasks.append(&mut SPAWNED.with(|s| std::mem::take(&mut *s.borrow_mut())));
    tasks.retain_mut(|task| task.as_mut().poll(cx).is_pending());
    TASKS.with(|t| {
        let mut kept = t.borrow_mut();
        assert!(
            kept.is_empty(),
            "tasks are polled by one block_on at a time"
        );
        *kept = tasks;
    });
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
        spawner: Arc::new(PolledTasks),
        net: Arc::new(NoNetwork),
        disk: Arc::new(disk.clone()),
    }
}

/// Polls a future to completion without a runtime, the spawned tasks beside it. Nothing in the
/// harness waits on anything but the clock, the in-memory disk and those tasks, so a future
/// still pending after this many rounds is a hang in the broker: that is a finding, and it
/// panics.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    const MAX_ROUNDS: usize = 100_000;
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..MAX_ROUNDS {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        poll_tasks(&mut cx);
    }
    panic!("a request did not complete: the broker waits on something that never comes");
}
