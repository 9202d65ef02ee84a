//! A node's clock in the simulation: simulated time, seen through that node's own offset and
//! drift, and jumpable by the nemesis. Monotonic time only drifts; wall time also jumps.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use madsim::time::TimeHandle;
use weir::io::{BoxFuture, Clock};

/// Read on every clock read (thousands per simulated second), written only by the nemesis:
/// atomics, not a lock.
#[derive(Debug)]
struct Skew {
    /// Added to the wall clock, ms (the nemesis jumps it).
    offset_ms: AtomicI64,
    /// Parts per million faster (positive) or slower (negative) than simulated time.
    drift_ppm: AtomicI64,
}

/// Shared between a node's broker (as its [`Clock`]) and the nemesis (which jumps it); it
/// outlives restarts, like the hardware clock it stands for.
#[derive(Clone)]
pub struct NodeClock {
    skew: Arc<Skew>,
    /// The simulation's time source, read directly: `Instant::now()` goes through madsim's
    /// `clock_gettime` hook (a thread-local look-up, a handle clone and a timespec round
    /// trip), about 200 instructions a read, for the same value.
    time: TimeHandle,
    /// Simulated time elapsed at this clock's creation.
    origin: Duration,
    /// The simulated wall time at `origin`.
    wall_origin_ms: i64,
}

/// The simulation's own wall clock (madsim's, the same for every node and seeded), in Unix
/// milliseconds: what a node's skewed clock starts from.
pub fn simulated_wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64
}

impl NodeClock {
    pub fn new(offset_ms: i64, drift_ppm: i64) -> NodeClock {
        let wall = simulated_wall_ms();
        let time = TimeHandle::current();
        NodeClock {
            skew: Arc::new(Skew {
                offset_ms: AtomicI64::new(offset_ms),
                drift_ppm: AtomicI64::new(drift_ppm),
            }),
            origin: time.elapsed(),
            time,
            wall_origin_ms: wall,
        }
    }

    /// Moves the wall clock by `delta_ms` (NTP step, operator error, VM migration).
    pub fn jump(&self, delta_ms: i64) {
        self.skew.offset_ms.fetch_add(delta_ms, Ordering::Relaxed);
    }

    fn drifted(&self, real: Duration) -> Duration {
        let ppm = self.skew.drift_ppm.load(Ordering::Relaxed);
        if ppm == 0 {
            return real;
        }
        let nanos = real.as_nanos() as i128;
        let adjusted = nanos + nanos * ppm as i128 / 1_000_000;
        Duration::from_nanos(adjusted.max(0) as u64)
    }
}

impl Clock for NodeClock {
    fn monotonic(&self) -> Duration {
        self.drifted(self.time.elapsed().saturating_sub(self.origin))
    }

    fn wall_ms(&self) -> i64 {
        let offset = self.skew.offset_ms.load(Ordering::Relaxed);
        self.wall_origin_ms + self.monotonic().as_millis() as i64 + offset
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        // A fast clock's timers fire early in simulated time, a slow one's late.
        let ppm = self.skew.drift_ppm.load(Ordering::Relaxed);
        let nanos = duration.as_nanos() as i128;
        let real = nanos * 1_000_000 / (1_000_000 + ppm as i128).max(1);
        // Through the clock's own handle: `tokio::time::sleep` looks the same handle up in
        // madsim's thread-local context on every call.
        Box::pin(self.time.sleep(Duration::from_nanos(real.max(0) as u64)))
    }
}
