//! Whether a request's connection is still there. The connection loop watches its socket while
//! a request is being handled; once the peer has closed it, the request's waits end early
//! (nobody is left to read the answer) and give their slots back. The same per-request handle
//! adds up the time its waits took (`add_waited`): the request metrics' remote time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::sync::watch;

/// Held by the connection loop: says when the connection went away.
pub struct ConnectionWatch {
    tx: watch::Sender<bool>,
    /// Nanoseconds the request spent in delayed waits (its "remote time" in Kafka's metrics).
    waited: Arc<AtomicU64>,
}

impl Default for ConnectionWatch {
    fn default() -> Self {
        ConnectionWatch::new()
    }
}

impl ConnectionWatch {
    pub fn new() -> ConnectionWatch {
        ConnectionWatch {
            tx: watch::channel(false).0,
            waited: Arc::default(),
        }
    }

    /// The signal handed to the requests of this connection.
    pub fn signal(&self) -> ConnectionGone {
        ConnectionGone {
            rx: Some(self.tx.subscribe()),
            waited: Some(self.waited.clone()),
        }
    }

    /// How long the request's delayed operations waited, in total.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited.load(Ordering::Relaxed))
    }

    pub fn mark_gone(&self) {
        self.tx.send_replace(true);
    }
}

/// A request's view of its connection.
#[derive(Clone)]
pub struct ConnectionGone {
    rx: Option<watch::Receiver<bool>>,
    waited: Option<Arc<AtomicU64>>,
}

impl ConnectionGone {
    /// For requests that have no connection (tests, the fuzzer): never gone.
    pub fn never() -> ConnectionGone {
        ConnectionGone {
            rx: None,
            waited: None,
        }
    }

    /// Adds a delayed wait's duration to the request's total (`ConnectionWatch::waited`).
    pub fn add_waited(&self, waited: Duration) {
        if let Some(total) = &self.waited {
            let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
            total.fetch_add(nanos, Ordering::Relaxed);
        }
    }

    /// The request's delayed waits so far (what its handler time leaves out).
    pub fn waited(&self) -> Duration {
        self.waited.as_ref().map_or(Duration::ZERO, |t| {
            Duration::from_nanos(t.load(Ordering::Relaxed))
        })
    }

    pub fn is_gone(&self) -> bool {
        self.rx.as_ref().is_some_and(|rx| *rx.borrow())
    }

    /// Resolves once the connection is gone; never, if it stays (or its watch is dropped,
    /// which only happens once the connection loop has finished with the request).
    pub async fn gone(&self) {
        let Some(rx) = &self.rx else {
            return std::future::pending().await;
        };
        let mut rx = rx.clone();
        loop {
            if *rx.borrow_and_update() {
                return;
            }
            if rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}
