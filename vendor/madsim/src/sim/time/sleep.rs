use super::timer::TimerKey;
use super::*;
use std::{fmt, pin::Pin, task::Poll};

/// Waits until `duration` has elapsed.
pub fn sleep(duration: Duration) -> Sleep {
    let handle = TimeHandle::current();
    handle.sleep(duration)
}

/// Waits until `deadline` is reached.
pub fn sleep_until(deadline: Instant) -> Sleep {
    let handle = TimeHandle::current();
    handle.sleep_until(deadline)
}

/// Future returned by [`sleep`] and [`sleep_until`].
///
/// [`sleep`]: sleep()
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    pub(super) handle: TimeHandle,
    // Weir patch (vendor/madsim/PATCHED.md): the deadline as the time elapsed since the clock's
    // base instant (upstream kept an `Instant` and converted it at every arming and every poll).
    pub(super) at: Duration,
    // Weir patch (vendor/madsim/PATCHED.md): the timer entry armed for `deadline`, which holds
    // the waker to wake. Upstream added a timer-heap entry (a boxed callback) on every poll of
    // a pending sleep and never took one back, so a sleep polled 10 times woke its task 10
    // times and a dropped sleep (the loser of a `select!`) woke it once more later. Now one
    // entry per deadline, which wakes the latest waker (tokio's rule); a dropped or reset sleep
    // removes its entry.
    pub(super) armed: Option<TimerKey>,
}

impl Sleep {
    /// Returns the instant at which the future will complete.
    pub fn deadline(&self) -> Instant {
        self.handle.inner.clock.base_instant + self.at
    }

    /// Returns `true` if `Sleep` has elapsed.
    ///
    /// A `Sleep` instance is elapsed when the requested duration has elapsed.
    pub fn is_elapsed(&self) -> bool {
        self.handle.inner.clock.elapsed() >= self.at
    }

    /// Resets the `Sleep` instance to a new deadline.
    pub fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.at = self.handle.inner.clock.since_base(deadline);
        // Weir patch: the timer armed for the old deadline must not wake anyone.
        if let Some(key) = self.armed.take() {
            self.handle.cancel(key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        if self.is_elapsed() {
            // Weir patch: the armed entry has fired (it is due no later than now); removing it
            // covers a clock advanced by `time::advance` before its entries fired.
            if let Some(key) = self.armed.take() {
                self.handle.cancel(key);
            }
            return Poll::Ready(());
        }
        // Weir patch: reuse the armed entry (only its waker may change); arm one otherwise, or
        // again should the armed one have fired already (it cannot fire before `deadline`).
        if let Some(key) = self.armed {
            if self.handle.rearm_sleep(key, cx.waker()) {
                return Poll::Pending;
            }
        }
        let key = self.handle.arm_sleep(self.at, cx.waker().clone());
        self.armed = Some(key);
        Poll::Pending
    }
}

// Weir patch: a dropped sleep removes its timer entry.
impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.armed.take() {
            self.handle.cancel(key);
        }
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline())
            .finish()
    }
}
