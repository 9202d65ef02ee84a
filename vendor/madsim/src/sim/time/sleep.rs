use super::*;
use std::{
    fmt,
    pin::Pin,
    sync::Weak,
    task::{Poll, Waker},
};

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
    pub(super) deadline: Instant,
    // Weir patch (vendor/madsim/PATCHED.md): the waker the one timer registered for `deadline`
    // will wake. Upstream added a timer-heap entry on every poll of a pending sleep and never
    // took one back, so a sleep polled 10 times woke its task 10 times and a dropped sleep
    // (the loser of a `select!`) woke it once more later. Now one entry per deadline, which
    // wakes the latest waker (tokio's rule) and nothing once the sleep is dropped or reset.
    pub(super) armed: Option<Arc<Mutex<Option<Waker>>>>,
}

impl Sleep {
    /// Returns the instant at which the future will complete.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Returns `true` if `Sleep` has elapsed.
    ///
    /// A `Sleep` instance is elapsed when the requested duration has elapsed.
    pub fn is_elapsed(&self) -> bool {
        self.handle.clock.now_instant() >= self.deadline
    }

    /// Resets the `Sleep` instance to a new deadline.
    pub fn reset(mut self: Pin<&mut Self>, deadline: Instant) {
        self.deadline = deadline;
        // Weir patch: the timer armed for the old deadline must not wake anyone.
        self.armed = None;
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        if self.is_elapsed() {
            return Poll::Ready(());
        }
        // Weir patch: reuse the armed timer (only its waker may change); arm one otherwise, or
        // again should the armed one have fired already (it cannot fire before `deadline`).
        if let Some(slot) = &self.armed {
            let mut waker = slot.lock();
            if let Some(waker) = waker.as_mut() {
                if !waker.will_wake(cx.waker()) {
                    *waker = cx.waker().clone();
                }
                return Poll::Pending;
            }
        }
        let slot = Arc::new(Mutex::new(Some(cx.waker().clone())));
        let weak: Weak<Mutex<Option<Waker>>> = Arc::downgrade(&slot);
        self.handle.add_timer_at(self.deadline, move || {
            let waker = weak.upgrade().and_then(|slot| slot.lock().take());
            if let Some(waker) = waker {
                waker.wake();
            }
        });
        self.armed = Some(slot);
        Poll::Pending
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .finish()
    }
}
