//! A single-value channel that wakes receivers in the order they started waiting: tokio's
//! `watch` interface (the subset Weir uses) with a deterministic wake-up order (see the
//! module above for why tokio's own is not).
//!
//! One value behind a lock and a version that every change bumps; each receiver remembers the
//! version it last saw. Waiting receivers park on one `Notify`, which `notify_waiters` wakes in
//! FIFO order, and which wakes even the `Notified` futures created but not yet polled — so a
//! receiver that checks the version after creating its `Notified` never misses a change.

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use tokio::sync::Notify;

/// The sender has gone: no value will change any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvError;

impl std::fmt::Display for RecvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("channel closed")
    }
}

impl std::error::Error for RecvError {}

/// Every receiver has gone; the value was not stored (as tokio's `send`).
#[derive(Debug, PartialEq, Eq)]
pub struct SendError<T>(pub T);

impl<T> std::fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("channel closed")
    }
}

impl<T: std::fmt::Debug> std::error::Error for SendError<T> {}

struct Shared<T> {
    value: RwLock<Value<T>>,
    receivers: AtomicUsize,
    /// Receivers waiting for a change or for the sender to go.
    changed: Notify,
    /// A sender waiting for the last receiver to go.
    emptied: Notify,
}

struct Value<T> {
    value: T,
    /// Bumped by every change; a receiver has seen the value when it holds the same number.
    version: u64,
    sender_gone: bool,
}

impl<T> Shared<T> {
    fn read(&self) -> RwLockReadGuard<'_, Value<T>> {
        // A panic while holding the lock leaves a value that is still whole (every write is
        // one assignment or a caller's closure): keep serving it, as tokio's lock does.
        self.value.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Value<T>> {
        self.value.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// A borrowed value; holds the channel's read lock (keep it short, as tokio's `Ref`).
pub struct Ref<'a, T> {
    guard: RwLockReadGuard<'a, Value<T>>,
    has_changed: bool,
}

impl<T> Ref<'_, T> {
    /// Whether the value was new to the receiver that borrowed it.
    pub fn has_changed(&self) -> bool {
        self.has_changed
    }
}

impl<T> Deref for Ref<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard.value
    }
}

/// A channel holding `init`.
pub fn channel<T>(init: T) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        value: RwLock::new(Value {
            value: init,
            version: 0,
            sender_gone: false,
        }),
        receivers: AtomicUsize::new(1),
        changed: Notify::new(),
        emptied: Notify::new(),
    });
    let receiver = Receiver {
        shared: shared.clone(),
        seen: 0,
    };
    (Sender { shared }, receiver)
}

pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Sender<T> {
    /// Stores `value` and wakes the receivers; refused when no receiver is left.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        if self.receiver_count() == 0 {
            return Err(SendError(value));
        }
        self.send_replace(value);
        Ok(())
    }

    /// Stores `value` whether or not anyone listens; returns the old one.
    pub fn send_replace(&self, value: T) -> T {
        let old = {
            let mut slot = self.shared.write();
            slot.version += 1;
            std::mem::replace(&mut slot.value, value)
        };
        self.shared.changed.notify_waiters();
        old
    }

    /// Lets `modify` change the value in place; a change (it returns true) wakes the receivers.
    pub fn send_if_modified(&self, modify: impl FnOnce(&mut T) -> bool) -> bool {
        let modified = {
            let mut slot = self.shared.write();
            let modified = modify(&mut slot.value);
            if modified {
                slot.version += 1;
            }
            modified
        };
        if modified {
            self.shared.changed.notify_waiters();
        }
        modified
    }

    pub fn send_modify(&self, modify: impl FnOnce(&mut T)) {
        self.send_if_modified(|value| {
            modify(value);
            true
        });
    }

    pub fn borrow(&self) -> Ref<'_, T> {
        Ref {
            guard: self.shared.read(),
            has_changed: false,
        }
    }

    /// A new receiver, which has seen the current value.
    pub fn subscribe(&self) -> Receiver<T> {
        self.shared.receivers.fetch_add(1, Ordering::AcqRel);
        Receiver {
            seen: self.shared.read().version,
            shared: self.shared.clone(),
        }
    }

    pub fn receiver_count(&self) -> usize {
        self.shared.receivers.load(Ordering::Acquire)
    }

    /// No receiver is left.
    pub fn is_closed(&self) -> bool {
        self.receiver_count() == 0
    }

    /// Waits until no receiver is left.
    pub async fn closed(&self) {
        loop {
            let emptied = self.shared.emptied.notified();
            if self.is_closed() {
                return;
            }
            emptied.await;
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.shared.write().sender_gone = true;
        self.shared.changed.notify_waiters();
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("value", &self.shared.read().value)
            .finish()
    }
}

pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// The version this receiver last saw.
    seen: u64,
}

impl<T> Receiver<T> {
    /// The current value, without marking it seen.
    pub fn borrow(&self) -> Ref<'_, T> {
        let guard = self.shared.read();
        let has_changed = guard.version != self.seen;
        Ref { guard, has_changed }
    }

    /// The current value, marked seen.
    pub fn borrow_and_update(&mut self) -> Ref<'_, T> {
        let guard = self.shared.read();
        let has_changed = guard.version != self.seen;
        self.seen = guard.version;
        Ref { guard, has_changed }
    }

    /// Whether a value not yet seen is there; an error once the sender has gone.
    pub fn has_changed(&self) -> Result<bool, RecvError> {
        let slot = self.shared.read();
        if slot.sender_gone {
            return Err(RecvError);
        }
        Ok(slot.version != self.seen)
    }

    /// Waits for a value not yet seen and marks it seen; an error once the sender has gone
    /// with nothing new left (a last change before it went is still delivered, as tokio's).
    pub async fn changed(&mut self) -> Result<(), RecvError> {
        loop {
            // Created before the check: a change between the check and the wait still wakes it.
            let notified = self.shared.changed.notified();
            {
                let slot = self.shared.read();
                if slot.version != self.seen {
                    self.seen = slot.version;
                    return Ok(());
                }
                if slot.sender_gone {
                    return Err(RecvError);
                }
            }
            notified.await;
        }
    }

    /// Waits until `ready` holds for the value (checked at once, then after each change) and
    /// returns it marked seen; an error once the sender has gone and it does not hold.
    pub async fn wait_for(
        &mut self,
        mut ready: impl FnMut(&T) -> bool,
    ) -> Result<Ref<'_, T>, RecvError> {
        loop {
            let notified = self.shared.changed.notified();
            {
                let slot = self.shared.read();
                let has_changed = slot.version != self.seen;
                self.seen = slot.version;
                if ready(&slot.value) {
                    return Ok(Ref {
                        guard: slot,
                        has_changed,
                    });
                }
                if slot.sender_gone {
                    return Err(RecvError);
                }
            }
            notified.await;
        }
    }

    pub fn same_channel(&self, other: &Receiver<T>) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Receiver<T> {
        self.shared.receivers.fetch_add(1, Ordering::AcqRel);
        Receiver {
            shared: self.shared.clone(),
            seen: self.seen,
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        if self.shared.receivers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.emptied.notify_waiters();
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("value", &self.shared.read().value)
            .field("seen", &self.seen)
            .finish()
    }
}

#[cfg(test)]
mod tests;
