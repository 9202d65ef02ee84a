//! Utilities for tracking time.
//!
//!

use crate::rand::{GlobalRng, Rng};
use futures_util::{select_biased, FutureExt};
use spin::Mutex;
#[doc(no_inline)]
pub use std::time::{Duration, Instant};
use std::{
    future::Future,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    task::Waker,
    time::SystemTime,
};
use timer::{Action, Timer, TimerKey};

pub mod error;
mod interval;
mod sleep;
mod system_time;
mod timer;

pub use self::interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use self::sleep::{sleep, sleep_until, Sleep};

pub(crate) struct TimeRuntime {
    handle: TimeHandle,
}

impl TimeRuntime {
    pub fn new(rand: &GlobalRng) -> Self {
        // around 2022
        let base_time = SystemTime::UNIX_EPOCH
            + Duration::from_secs(
                60 * 60 * 24 * 365 * (2022 - 1970)
                    + rand.with(|rng| rng.gen_range(0..60 * 60 * 24 * 365)),
            );
        let handle = TimeHandle {
            inner: Arc::new(TimeInner {
                timer: Mutex::new(Timer::default()),
                clock: Clock::new(base_time),
            }),
        };
        TimeRuntime { handle }
    }

    pub fn handle(&self) -> &TimeHandle {
        &self.handle
    }

    /// Advances time to the closest timer event. Returns true if succeed.
    pub fn advance_to_next_event(&self) -> bool {
        // Weir patch: the lock is not held while entries fire (see `TimeHandle::expire`).
        let next = self.handle.inner.timer.lock().next();
        if let Some(mut time) = next {
            // WARN: in some platform such as M1 macOS,
            //       let t0: Instant;
            //       let t1: Instant;
            //       t0 + (t1 - t0) < t1 !!
            // we should add eps to make sure 'now >= deadline' and avoid deadlock
            time += Duration::from_nanos(50);
            self.handle.expire(time);
            self.handle.inner.clock.set_elapsed(time);
            true
        } else {
            false
        }
    }

    #[allow(dead_code)]
    /// Get the current time.
    pub fn now_instant(&self) -> Instant {
        self.handle.now_instant()
    }
}

/// Handle to a shared time source.
// Weir patch (vendor/madsim/PATCHED.md): one `Arc` for the timer and the clock (upstream had
// one each), so a handle clone (every `Sleep` holds one) is one reference count, not two.
#[derive(Clone)]
pub struct TimeHandle {
    inner: Arc<TimeInner>,
}

struct TimeInner {
    timer: Mutex<Timer>,
    clock: Clock,
}

impl TimeHandle {
    /// Returns a `TimeHandle` view over the currently running Runtime.
    pub fn current() -> Self {
        crate::context::current(|h| h.time.clone())
    }

    /// Returns a `TimeHandle` view over the currently running Runtime.
    pub fn try_current() -> Option<Self> {
        crate::context::try_current(|h| h.time.clone())
    }

    /// Return the current time.
    pub fn now_instant(&self) -> Instant {
        self.inner.clock.now_instant()
    }

    /// Return the current time.
    pub fn now_time(&self) -> SystemTime {
        self.inner.clock.now_time()
    }

    /// Returns the amount of time elapsed since this handle was created.
    pub fn elapsed(&self) -> Duration {
        self.inner.clock.elapsed()
    }

    /// Advances time.
    pub fn advance(&self, duration: Duration) {
        let time = self.inner.clock.advance(duration);
        self.expire(time);
    }

    /// Waits until `duration` has elapsed.
    ///
    /// It will sleep for at least 1ms to be consistent with the behavior of `tokio::time::sleep`.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        // Weir patch: computed on the elapsed time (a `Duration`), not on `Instant`s: the same
        // deadline as upstream's `now_instant() + duration`, clamped to 1 ms from now.
        let now = self.inner.clock.elapsed();
        self.sleep_at(now + duration, now)
    }

    /// Waits until `deadline` is reached.
    ///
    /// It will sleep for at least 1ms to be consistent with the behavior of `tokio::time::sleep_until`.
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        let now = self.inner.clock.elapsed();
        self.sleep_at(self.inner.clock.since_base(deadline), now)
    }

    /// Weir patch: a `Sleep` until `at` (time elapsed since the clock's base), at least 1 ms
    /// after `now` (upstream's `deadline.max(now_instant() + 1 ms)`, on `Duration`s: the clock's
    /// base instant is fixed, so the order of instants is the order of their offsets from it).
    pub(crate) fn sleep_at(&self, at: Duration, now: Duration) -> Sleep {
        Sleep {
            handle: self.clone(),
            at: at.max(now + Duration::from_millis(1)),
            armed: None,
        }
    }

    /// Require a `Future` to complete before the specified duration has elapsed.
    // TODO: make it Send
    pub fn timeout<T: Future>(
        &self,
        duration: Duration,
        future: T,
    ) -> impl Future<Output = Result<T::Output, error::Elapsed>> {
        let timeout = self.sleep(duration);
        async move {
            select_biased! {
                res = future.fuse() => Ok(res),
                _ = timeout.fuse() => Err(error::Elapsed),
            }
        }
    }

    /// Weir patch: fires every entry due at `now`, earliest first (by insertion among equal
    /// deadlines), one at a time without holding the lock while it fires, so that what an entry
    /// drops or wakes may itself cancel or add timers.
    fn expire(&self, now: Duration) {
        loop {
            let action = self.inner.timer.lock().pop_expired(now);
            match action {
                None => break,
                Some(Action::Wake(waker)) => waker.wake(),
                Some(Action::Call(callback)) => callback(),
            }
        }
    }

    /// Weir patch: arms the timer of a pending `Sleep`, which wakes `waker` at `deadline`.
    pub(crate) fn arm_sleep(&self, at: Duration, waker: Waker) -> TimerKey {
        self.inner.timer.lock().add(at, Action::Wake(waker))
    }

    /// Weir patch: makes an armed `Sleep`'s timer wake `waker` (tokio's rule: the latest
    /// waker). False if the entry has fired already.
    pub(crate) fn rearm_sleep(&self, key: TimerKey, waker: &Waker) -> bool {
        let replaced = {
            let mut timer = self.inner.timer.lock();
            match timer.waker_mut(key) {
                None => return false,
                Some(armed) if armed.will_wake(waker) => None,
                Some(armed) => Some(std::mem::replace(armed, waker.clone())),
            }
        };
        drop(replaced);
        true
    }

    /// Weir patch: removes a timer entry that has not fired (a dropped or reset `Sleep`).
    pub(crate) fn cancel(&self, key: TimerKey) {
        // The entry (a waker) is dropped after the lock is released.
        let removed = self.inner.timer.lock().remove(key);
        drop(removed);
    }

    pub(crate) fn add_timer(&self, dur: Duration, callback: impl FnOnce() + Send + Sync + 'static) {
        // Weir patch: on the elapsed time (the same deadline as `now_instant() + dur`).
        let deadline = self.inner.clock.elapsed() + dur;
        self.inner
            .timer
            .lock()
            .add(deadline, Action::Call(Box::new(callback)));
    }
}

/// Require a `Future` to complete before the specified duration has elapsed.
pub fn timeout<T: Future>(
    duration: Duration,
    future: T,
) -> impl Future<Output = Result<T::Output, error::Elapsed>> {
    let handle = TimeHandle::current();
    handle.timeout(duration, future)
}

/// Advances time.
///
/// Increments the saved `Instant::now()` value by `duration`.
/// Subsequent calls to `Instant::now()` will return the result of the increment.
#[cfg_attr(docsrs, doc(cfg(madsim)))]
pub fn advance(duration: Duration) {
    let handle = TimeHandle::current();
    handle.advance(duration);
}

// Weir patch (vendor/madsim/PATCHED.md): upstream kept the clock under a spin lock, taken on
// every read. The base time and instant never change after creation, so only the elapsed time
// moves, and an atomic holds it (in nanoseconds: 584 years).
struct Clock {
    /// Time basis for which mock time is derived.
    base_time: std::time::SystemTime,
    base_instant: std::time::Instant,
    /// The amount of mock time which has elapsed, in nanoseconds.
    advance_nanos: AtomicU64,
}

impl Clock {
    fn new(base_time: SystemTime) -> Self {
        Clock {
            base_time,
            base_instant: unsafe { std::mem::zeroed() },
            advance_nanos: AtomicU64::new(0),
        }
    }

    fn nanos(time: Duration) -> u64 {
        // Saturates at 584 years of simulated time, which no simulation reaches.
        u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
    }

    fn set_elapsed(&self, time: Duration) {
        self.advance_nanos
            .store(Self::nanos(time), Ordering::Relaxed);
    }

    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.advance_nanos.load(Ordering::Relaxed))
    }

    fn advance(&self, duration: Duration) -> Duration {
        let now = self.elapsed() + duration;
        self.set_elapsed(now);
        now
    }

    /// `instant`'s offset from the base instant (zero before it, as `Instant - Instant`).
    fn since_base(&self, instant: Instant) -> Duration {
        instant.saturating_duration_since(self.base_instant)
    }

    fn now_instant(&self) -> Instant {
        self.base_instant + self.elapsed()
    }

    fn now_time(&self) -> SystemTime {
        self.base_time + self.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Runtime;

    #[test]
    fn time() {
        let runtime = Runtime::new();
        runtime.block_on(async {
            // sleep for at least 1ms
            let t0 = Instant::now();
            sleep(Duration::default()).await;
            assert!(t0.elapsed() >= Duration::from_millis(1));

            let t0 = Instant::now();
            sleep_until(t0).await;
            assert!(t0.elapsed() >= Duration::from_millis(1));

            let t0 = Instant::now();

            sleep(Duration::from_secs(1)).await;
            assert!(t0.elapsed() >= Duration::from_secs(1));

            sleep_until(t0 + Duration::from_secs(2)).await;
            assert!(t0.elapsed() >= Duration::from_secs(2));

            assert!(
                timeout(Duration::from_secs(2), sleep(Duration::from_secs(1)))
                    .await
                    .is_ok()
            );
            assert!(
                timeout(Duration::from_secs(1), sleep(Duration::from_secs(2)))
                    .await
                    .is_err()
            );
        });
    }

    #[test]
    fn test_advance() {
        let runtime = Runtime::new();
        runtime.block_on(async {
            let t0 = Instant::now();
            advance(Duration::from_secs(1));
            assert!(t0.elapsed() >= Duration::from_secs(1));
        });
    }
}
