//! Whether the log directory can still be trusted. After a failed fsync the kernel may have
//! marked the unwritten pages clean (Linux does), so a later fsync would "succeed" without
//! writing them and a recovery point advanced by it would cover data that is not on disk.
//! Kafka and PostgreSQL answer the same way: stop using the directory. Weir has one log
//! directory, so the broker stops serving data (produce and fetch answer KAFKA_STORAGE_ERROR)
//! until it is restarted, and the restart recovers from the checkpoint, rewriting and fsyncing
//! everything after it (see `Log::open`).

use crate::sync::watch;

pub struct LogDirHealth {
    /// `Some(reason)` once the directory went offline; never goes back.
    offline: watch::Sender<Option<String>>,
}

impl LogDirHealth {
    pub fn new() -> LogDirHealth {
        LogDirHealth {
            offline: watch::channel(None).0,
        }
    }

    /// Takes the directory offline for good (the first reason wins).
    pub fn fail(&self, reason: String) {
        self.offline.send_if_modified(|state| {
            if state.is_some() {
                return false;
            }
            tracing::error!(
                %reason,
                "log directory is offline: the broker stops serving partitions; restart it \
                 to recover from what is on disk"
            );
            *state = Some(reason);
            true
        });
    }

    pub fn is_offline(&self) -> bool {
        self.offline.borrow().is_some()
    }

    pub fn reason(&self) -> Option<String> {
        self.offline.borrow().clone()
    }

    /// Resolves once the directory is offline, with the reason.
    pub async fn offline(&self) -> String {
        let mut rx = self.offline.subscribe();
        let reason = match rx.wait_for(|state| state.is_some()).await {
            Ok(state) => state.clone().unwrap_or_default(),
            // The sender lives as long as the broker, which outlives this borrow.
            Err(_) => String::from("broker gone"),
        };
        reason
    }
}
