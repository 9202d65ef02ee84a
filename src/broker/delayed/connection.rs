//! Whether a request's connection is still there. The connection loop watches its socket while
//! a request is being handled; once the peer has closed it, the request's waits end early
//! (nobody is left to read the answer) and give their slots back. The same per-request handle
//! adds up the time its waits took (`add_waited`): the request metrics' remote time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// What the connection loop and the request's handles share: one allocation per request.
struct Shared {
    /// The peer closed the connection.
    gone: AtomicBool,
    /// The connection loop has finished with the request (its [`ConnectionWatch`] dropped).
    watch_dropped: AtomicBool,
    /// Notified (all waiters) when `gone` is set and when the watch is dropped.
    changed: Notify,
    /// Nanoseconds the request spent in delayed waits (its "remote time" in Kafka's metrics).
    waited: AtomicU64,
}

/// Held by the connection loop: says when the connection went away.
pub struct ConnectionWatch {
    shared: Arc<Shared>,
}

impl Default for ConnectionWatch {
    fn default() -> Self {
        ConnectionWatch::new()
    }
}

impl ConnectionWatch {
    pub fn new() -> ConnectionWatch {
        ConnectionWatch {
            shared: Arc::new(Shared {
                gone: AtomicBool::new(false),
                watch_dropped: AtomicBool::new(false),
                changed: Notify::new(),
                waited: AtomicU64::new(0),
            }),
        }
    }

    /// The request's handle on this connection.
    pub fn signal(&self) -> ConnectionGone {
        ConnectionGone {
            shared: Some(self.shared.clone()),
        }
    }

    /// How long the request's delayed waits took, in total.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.shared.waited.load(Ordering::Relaxed))
    }

    pub fn mark_gone(&self) {
        self.shared.gone.store(true, Ordering::Release);
        self.shared.changed.notify_waiters();
    }
}

impl Drop for ConnectionWatch {
    fn drop(&mut self) {
        // Waiters still there wake and find the request finished: they wait forever (they are
        // about to be dropped with it).
        self.shared.watch_dropped.store(true, Ordering::Release);
        self.shared.changed.notify_waiters();
    }
}

/// A request's view of its connection.
#[derive(Clone)]
pub struct ConnectionGone {
    shared: Option<Arc<Shared>>,
}

impl ConnectionGone {
    /// For requests that have no connection (tests, the fuzzer): never gone.
    pub fn never() -> ConnectionGone {
        ConnectionGone { shared: None }
    }

    /// Adds a delayed wait's duration to the request's total (`ConnectionWatch::waited`).
    pub fn add_waited(&self, waited: Duration) {
        if let Some(shared) = &self.shared {
            let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
            shared.waited.fetch_add(nanos, Ordering::Relaxed);
        }
    }

    /// The request's delayed waits so far (what its handler time leaves out).
    pub fn waited(&self) -> Duration {
        self.shared.as_ref().map_or(Duration::ZERO, |s| {
            Duration::from_nanos(s.waited.load(Ordering::Relaxed))
        })
    }

    pub fn is_gone(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.gone.load(Ordering::Acquire))
    }

    /// Resolves once the connection is gone; never, if it stays (or its watch is dropped,
    /// which only happens once the connection loop has finished with the request).
    pub async fn gone(&self) {
        let Some(shared) = &self.shared else {
            return std::future::pending().await;
        };
        loop {
            // Registered before the look, so a change in between is not missed.
            let changed = shared.changed.notified();
            if shared.gone.load(Ordering::Acquire) {
                return;
            }
            if shared.watch_dropped.load(Ordering::Acquire) {
                return std::future::pending().await;
            }
            changed.await;
        }
    }
}
