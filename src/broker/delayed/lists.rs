//! One partition's waiter lists and the events that complete or wake them. Synchronous: a
//! short-held mutex (a leaf lock: nothing else is taken under it), never held across an await.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{oneshot, Notify};

use super::outcome::{Closed, Committed, WaitError, MAX_WAITERS_PER_PARTITION};

/// The bound on waiters across every partition, shared by all their lists.
pub struct WaitBudget {
    used: AtomicUsize,
    max: usize,
}

impl WaitBudget {
    pub fn new(max: usize) -> Arc<WaitBudget> {
        Arc::new(WaitBudget {
            used: AtomicUsize::new(0),
            max,
        })
    }

    fn take(&self) -> Result<(), WaitError> {
        let taken = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                (used < self.max).then_some(used + 1)
            });
        taken.map(|_| ()).map_err(|_| {
            WaitError::Full(format!(
                "{} requests are waiting on partitions, the broker's bound",
                self.max
            ))
        })
    }

    fn give_back(&self) {
        let before = self.used.fetch_sub(1, Ordering::SeqCst);
        assert!(before > 0, "a waiter given back twice");
    }

    /// Waiters (and reservations) held now, across every partition.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }
}

/// What a partition looks like after a change: the positions waiters are keyed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    pub high_watermark: i64,
    pub log_end: i64,
    pub log_start: i64,
    /// DeleteRecords' low watermark (the lowest log start over the live replicas; -1 when
    /// unknown or when this broker does not lead the partition).
    pub low_watermark: i64,
    /// Whether the maximal in-sync set holds at least `min.insync.replicas` (read when a
    /// produce's offset is reached).
    pub enough_replicas: bool,
}

/// What a fetch may read: a consumer up to the high watermark, a follower up to the log end.
/// `LowWatermark` is DeleteRecords' sibling wait (Kafka's `DelayedDeleteRecords`): woken once
/// the low watermark reaches the offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    HighWatermark,
    LogEnd,
    LowWatermark,
}

/// One fetch request's wake-up, shared by its waiters on every partition it reads. A wake
/// before the request awaits is kept (one permit), so none is lost between read and wait.
#[derive(Clone, Default)]
pub struct FetchWake(Arc<Notify>);

impl FetchWake {
    pub fn new() -> FetchWake {
        FetchWake::default()
    }

    fn wake(&self) {
        self.0.notify_one();
    }

    pub async fn woken(&self) {
        self.0.notified().await
    }
}

type ProduceResult = Result<Committed, WaitError>;

struct FetchEntry {
    offset: i64,
    isolation: Isolation,
    wake: FetchWake,
}

struct Lists {
    /// The partition as of its last change.
    seen: Observed,
    /// Produce waiters by (required offset, id): a high-watermark advance completes a prefix.
    produce: BTreeMap<(i64, u64), oneshot::Sender<ProduceResult>>,
    /// Produce reservations not yet turned into waiters (they count against the bounds).
    reserved: usize,
    fetch: BTreeMap<u64, FetchEntry>,
    closed: Option<Closed>,
    next_id: u64,
    /// Fetch wake-ups delivered, for tests and diagnostics.
    fetch_wakes: u64,
}

impl Lists {
    /// The bookkeeping, checked after every change: the bounds hold (reservations count), a
    /// closed partition has no produce waiting, and no produce waits for an offset the high
    /// watermark already reached (those were completed by the change that moved it).
    fn check(&self) {
        assert!(
            self.produce.len() + self.reserved <= MAX_WAITERS_PER_PARTITION,
            "{} produce waiters and {} reservations past the bound",
            self.produce.len(),
            self.reserved
        );
        assert!(
            self.fetch.len() <= MAX_WAITERS_PER_PARTITION,
            "{} fetch waiters past the bound",
            self.fetch.len()
        );
        assert!(
            self.closed.is_none() || self.produce.is_empty(),
            "a closed partition still has {} produce waiters",
            self.produce.len()
        );
        if let Some(((required, _), _)) = self.produce.first_key_value() {
            assert!(
                *required > self.seen.high_watermark,
                "a produce waits for offset {required}, which the high watermark {} reached",
                self.seen.high_watermark
            );
        }
    }
}

/// Waiter counts of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaiterCounts {
    pub produce: usize,
    pub fetch: usize,
    pub fetch_wakes: u64,
}

/// A partition's delayed operations.
pub struct PartitionWaiters {
    lists: Mutex<Lists>,
    budget: Arc<WaitBudget>,
}

impl PartitionWaiters {
    pub fn new(budget: Arc<WaitBudget>, now: Observed) -> Arc<PartitionWaiters> {
        Arc::new(PartitionWaiters {
            lists: Mutex::new(Lists {
                seen: now,
                produce: BTreeMap::new(),
                reserved: 0,
                fetch: BTreeMap::new(),
                closed: None,
                next_id: 0,
                fetch_wakes: 0,
            }),
            budget,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Lists> {
        // A panic under this lock is an invariant violation; poison would only hide it.
        self.lists.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a produce waiter, taken before the append so that a full list refuses the
    /// produce before anything is written.
    pub fn reserve_produce(self: &Arc<Self>) -> Result<ProduceReservation, WaitError> {
        let mut lists = self.lock();
        if let Some(closed) = lists.closed {
            return Err(WaitError::Closed(closed));
        }
        if lists.produce.len() + lists.reserved >= MAX_WAITERS_PER_PARTITION {
            return Err(WaitError::Full(format!(
                "{MAX_WAITERS_PER_PARTITION} produce requests are waiting on this partition"
            )));
        }
        self.budget.take()?;
        lists.reserved += 1;
        lists.check();
        Ok(ProduceReservation {
            waiters: Some(self.clone()),
        })
    }

    /// Registers a fetch waiter at `offset`, woken through `wake` by this partition's events
    /// that may give it something new to read (with [`Isolation::LowWatermark`]: a DeleteRecords
    /// waiter, woken when the low watermark reaches `offset`; every waiter also wakes on a
    /// truncation, a lost leadership and a close). Removed when the registration is dropped.
    pub fn register_fetch(
        self: &Arc<Self>,
        offset: i64,
        isolation: Isolation,
        wake: &FetchWake,
    ) -> Result<FetchRegistration, WaitError> {
        let mut lists = self.lock();
        if let Some(closed) = lists.closed {
            return Err(WaitError::Closed(closed));
        }
        if lists.fetch.len() >= MAX_WAITERS_PER_PARTITION {
            return Err(WaitError::Full(format!(
                "{MAX_WAITERS_PER_PARTITION} fetches are waiting on this partition"
            )));
        }
        self.budget.take()?;
        let id = lists.next_id;
        lists.next_id += 1;
        lists.fetch.insert(
            id,
            FetchEntry {
                offset,
                isolation,
                wake: wake.clone(),
            },
        );
        Ok(FetchRegistration {
            waiters: self.clone(),
            id,
        })
    }

    /// The partition changed (called under the partition lock, after every change): completes
    /// the produce waiters the high watermark reached, fails those a truncation removed, and
    /// wakes the fetches that may now read something new.
    pub fn observe(&self, now: Observed) {
        let mut lists = self.lock();
        let before = lists.seen;
        if before == now {
            return;
        }
        lists.seen = now;
        let hw_up = now.high_watermark > before.high_watermark;
        let end_up = now.log_end > before.log_end;
        let truncated = now.log_end < before.log_end || now.high_watermark < before.high_watermark;
        let start_up = now.log_start > before.log_start;
        let low_up = now.low_watermark > before.low_watermark;
        if hw_up {
            let committed = if now.enough_replicas {
                Committed::InSync
            } else {
                Committed::BelowMinIsr
            };
            let rest = lists.produce.split_off(&(now.high_watermark + 1, 0));
            let done = std::mem::replace(&mut lists.produce, rest);
            self.finish(done, Ok(committed));
        }
        if truncated {
            // Records a produce waits for are gone: only a follower truncates, so this broker
            // no longer leads the partition.
            let gone = lists.produce.split_off(&(now.log_end + 1, 0));
            self.finish(gone, Err(WaitError::NotLeader));
        }
        let mut woken = 0;
        for entry in lists.fetch.values() {
            let moved = match entry.isolation {
                Isolation::HighWatermark => hw_up && entry.offset < now.high_watermark,
                // A follower also learns the high watermark from its fetches.
                Isolation::LogEnd => (end_up && entry.offset < now.log_end) || hw_up,
                Isolation::LowWatermark => low_up && entry.offset <= now.low_watermark,
            };
            if moved || truncated || (start_up && entry.offset < now.log_start) {
                entry.wake.wake();
                woken += 1;
            }
        }
        lists.fetch_wakes += woken;
        lists.check();
    }

    /// This broker no longer leads the partition: waiting produces fail with
    /// NOT_LEADER_OR_FOLLOWER and fetches wake (their re-read reports the new state).
    pub fn leadership_lost(&self) {
        let mut lists = self.lock();
        let all = std::mem::take(&mut lists.produce);
        self.finish(all, Err(WaitError::NotLeader));
        Self::wake_all_fetches(&mut lists);
        lists.check();
    }

    /// The partition takes no more waits (deleted, log directory offline, shutdown): every
    /// waiter ends now, and later registrations are refused. The first reason stays.
    pub fn close(&self, why: Closed) {
        let mut lists = self.lock();
        let why = *lists.closed.get_or_insert(why);
        let all = std::mem::take(&mut lists.produce);
        self.finish(all, Err(WaitError::Closed(why)));
        Self::wake_all_fetches(&mut lists);
        lists.check();
    }

    pub fn counts(&self) -> WaiterCounts {
        let lists = self.lock();
        WaiterCounts {
            produce: lists.produce.len(),
            fetch: lists.fetch.len(),
            fetch_wakes: lists.fetch_wakes,
        }
    }

    fn wake_all_fetches(lists: &mut Lists) {
        for entry in lists.fetch.values() {
            entry.wake.wake();
        }
        lists.fetch_wakes += lists.fetch.len() as u64;
    }

    fn finish(
        &self,
        done: BTreeMap<(i64, u64), oneshot::Sender<ProduceResult>>,
        result: ProduceResult,
    ) {
        for (_, tx) in done {
            self.budget.give_back();
            // The waiter may have been dropped a moment ago; nothing to tell then.
            let _ = tx.send(result.clone());
        }
    }
}

/// A produce waiter's slot, held across the append. Dropped unused, it frees the slot.
pub struct ProduceReservation {
    waiters: Option<Arc<PartitionWaiters>>,
}

impl ProduceReservation {
    /// Waits for the high watermark to reach `required` (the offset after the batch). Call it
    /// under the partition lock that made the append: the change the lock's release reports
    /// then reaches this waiter.
    pub fn wait_for(mut self, required: i64) -> ProduceWait {
        let waiters = self.waiters.take().expect("a reservation is used once");
        let mut lists = waiters.lock();
        lists.reserved -= 1;
        let ready = if let Some(closed) = lists.closed {
            Some(Err(WaitError::Closed(closed)))
        } else if lists.seen.high_watermark >= required {
            Some(Ok(if lists.seen.enough_replicas {
                Committed::InSync
            } else {
                Committed::BelowMinIsr
            }))
        } else {
            None
        };
        if let Some(result) = ready {
            drop(lists);
            waiters.budget.give_back();
            return ProduceWait {
                state: WaitState::Ready(Some(result)),
            };
        }
        let key = (required, lists.next_id);
        lists.next_id += 1;
        let (tx, rx) = oneshot::channel();
        lists.produce.insert(key, tx);
        lists.check();
        drop(lists);
        ProduceWait {
            state: WaitState::Waiting { rx, key, waiters },
        }
    }
}

impl Drop for ProduceReservation {
    fn drop(&mut self) {
        if let Some(waiters) = self.waiters.take() {
            waiters.lock().reserved -= 1;
            waiters.budget.give_back();
        }
    }
}

enum WaitState {
    Ready(Option<ProduceResult>),
    Waiting {
        rx: oneshot::Receiver<ProduceResult>,
        key: (i64, u64),
        waiters: Arc<PartitionWaiters>,
    },
}

/// A produce waiting for the high watermark. Dropping it (a timeout, a closed connection)
/// removes it from its partition's list.
pub struct ProduceWait {
    state: WaitState,
}

impl ProduceWait {
    /// The outcome if it is known without waiting.
    pub(super) fn try_result(&mut self) -> Option<ProduceResult> {
        match &mut self.state {
            WaitState::Ready(result) => result.take(),
            WaitState::Waiting { rx, .. } => rx.try_recv().ok(),
        }
    }

    /// Resolves once the waiter's outcome is known (its sender is only dropped after sending,
    /// or by the partition's lists going away, reported as a closed partition).
    pub(super) async fn result(&mut self) -> ProduceResult {
        match &mut self.state {
            WaitState::Ready(result) => result.take().expect("a result is read once"),
            WaitState::Waiting { rx, .. } => rx
                .await
                .unwrap_or(Err(WaitError::Closed(Closed::ShuttingDown))),
        }
    }
}

impl Drop for ProduceWait {
    fn drop(&mut self) {
        if let WaitState::Waiting { key, waiters, .. } = &self.state {
            let removed = waiters.lock().produce.remove(key);
            if removed.is_some() {
                waiters.budget.give_back();
            }
        }
    }
}

/// A fetch's waiter on one partition, removed when dropped.
pub struct FetchRegistration {
    waiters: Arc<PartitionWaiters>,
    id: u64,
}

impl Drop for FetchRegistration {
    fn drop(&mut self) {
        if self.waiters.lock().fetch.remove(&self.id).is_some() {
            self.waiters.budget.give_back();
        }
    }
}
