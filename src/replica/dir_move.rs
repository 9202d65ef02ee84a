//! Moving replicas between the log directories of one broker (KIP-113, KIP-858), as a pure
//! state machine: Kafka's `ReplicaAlterLogDirsThread` decisions without its I/O. The driver
//! (`broker::drivers::dir_mover`) does the I/O and reports each result back.
//!
//! A move of one replica: `request` → [`Action::OpenFuture`] (create, or reopen after a
//! restart, the *future* log `<topic>-<p>.<id>-future` in the destination) → `opened` →
//! [`Action::Copy`] rounds (batches read from the current log on this broker from the future's
//! end, appended at their offsets; the driver cuts the future back where it diverged) →
//! `copied` → once the future reached the current log's end, [`Action::FlushAndSwap`] (fsync
//! the future, then, with appends held under the partition's lock, swap it in if it is still
//! at the current end, and delete the old log) → `swapped` (done) or `not_swapped` (appends
//! won the race: copy on). A request to the replica's own directory cancels a move
//! ([`Action::Abandon`]); so does the partition going away or the destination failing
//! (`cancel`).
//!
//! Throttle (`replica.alter.log.dirs.io.max.bytes.per.second`, one limit for the broker's
//! moves, Kafka's): the bytes copied are paced: after `n` bytes at `now` under a limit `L`, no
//! copy starts before `max(pace, now) + n / L`. Without a limit copies follow each other.
//!
//! Every action carries the move's `id`; a result for another id (a move replaced or cancelled
//! while its action ran) is ignored.
//!
//! Invariants (checked after every step): at most one move per replica, each with a distinct
//! id below `next_id`; a move with an action out is `Busy` or `Swapping`; the pace never goes
//! back.

use std::collections::BTreeMap;
use std::time::Duration;

use uuid::Uuid;

/// A replica on this broker: (topic, index).
pub type Key = (String, i32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoveConfig {
    /// The most one copy step reads (Kafka's `replica.fetch.max.bytes` per partition).
    pub chunk_bytes: usize,
    /// How long a move waits after a failed step before trying again.
    pub retry_backoff: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create (or reopen after a restart) the future log of `key` in the directory `dest`.
    OpenFuture { id: u64, key: Key, dest: Uuid },
    /// Copy at most `max_bytes` from the current log, from the future's end on.
    Copy { id: u64, key: Key, max_bytes: usize },
    /// The future reached the current log's end: make it durable, then swap it in if it still
    /// is at the end.
    FlushAndSwap { id: u64, key: Key },
    /// Delete the future log (the move is cancelled, replaced or failed).
    Abandon { id: u64, key: Key, dest: Uuid },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// `OpenFuture` is out.
    Opening,
    /// Its open failed for a reason that may pass: asked again at `ready_at`.
    OpenLater,
    /// Waiting for its turn to copy.
    Ready,
    /// A `Copy` is out.
    Busy,
    /// `FlushAndSwap` is out.
    Swapping,
}

#[derive(Clone, Debug)]
struct Move {
    id: u64,
    dest: Uuid,
    phase: Phase,
    /// Not before this (after a failure).
    ready_at: Duration,
    future_end: i64,
    current_end: i64,
}

/// A move as DescribeLogDirs shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveView {
    pub key: Key,
    pub dest: Uuid,
    /// The future log's end and the current log's, as of the last step (-1: not opened yet).
    pub future_end: i64,
    pub current_end: i64,
}

#[derive(Debug)]
pub struct DirMover {
    config: MoveConfig,
    moves: BTreeMap<Key, Move>,
    next_id: u64,
    /// No copy starts before this (the throttle).
    pace: Duration,
    /// Bytes/s; `None`: unlimited.
    limit: Option<u64>,
    /// Bytes copied by every move so far.
    copied_bytes: u64,
}

impl DirMover {
    pub fn new(config: MoveConfig) -> DirMover {
        assert!(config.chunk_bytes > 0);
        DirMover {
            config,
            moves: BTreeMap::new(),
            next_id: 1,
            pace: Duration::ZERO,
            limit: None,
            copied_bytes: 0,
        }
    }

    /// The throttle in bytes/s (`None` or 0: unlimited).
    pub fn set_limit(&mut self, limit: Option<u64>) {
        self.limit = limit.filter(|&l| l > 0);
    }

    /// AlterReplicaLogDirs for a replica hosted here in `current` (its directory now): to
    /// `current`, cancels a move; to the destination of the move under way, nothing; else
    /// starts a move (replacing one to another destination).
    pub fn request(&mut self, now: Duration, key: Key, dest: Uuid, current: Uuid) -> Vec<Action> {
        assert!(!dest.is_nil(), "a move needs a destination");
        let mut actions = Vec::new();
        if let Some(m) = self.moves.get(&key) {
            if m.dest == dest {
                return actions;
            }
            let old = self.moves.remove(&key).expect("just seen");
            actions.push(Action::Abandon {
                id: old.id,
                key: key.clone(),
                dest: old.dest,
            });
        }
        if dest != current {
            let id = self.next_id;
            self.next_id += 1;
            self.moves.insert(
                key.clone(),
                Move {
                    id,
                    dest,
                    phase: Phase::Opening,
                    ready_at: now,
                    future_end: -1,
                    current_end: -1,
                },
            );
            actions.push(Action::OpenFuture { id, key, dest });
        }
        self.check_invariants();
        actions
    }

    /// The future log is open and ends at `future_end`.
    pub fn opened(&mut self, now: Duration, id: u64, future_end: i64) {
        if let Some(m) = self.current(id, Phase::Opening) {
            m.phase = Phase::Ready;
            m.ready_at = now;
            m.future_end = future_end;
        }
        self.check_invariants();
    }

    /// The copies that may start now (every ready move, once the pace allows).
    pub fn poll(&mut self, now: Duration) -> Vec<Action> {
        let mut actions = Vec::new();
        for (key, m) in self.moves.iter_mut() {
            if m.phase == Phase::OpenLater && m.ready_at <= now {
                m.phase = Phase::Opening;
                actions.push(Action::OpenFuture {
                    id: m.id,
                    key: key.clone(),
                    dest: m.dest,
                });
            }
        }
        if now < self.pace {
            self.check_invariants();
            return actions;
        }
        for (key, m) in self.moves.iter_mut() {
            if m.phase == Phase::Ready && m.ready_at <= now {
                m.phase = Phase::Busy;
                actions.push(Action::Copy {
                    id: m.id,
                    key: key.clone(),
                    max_bytes: self.config.chunk_bytes,
                });
            }
        }
        self.check_invariants();
        actions
    }

    /// A copy step moved `bytes`; the future now ends at `future_end`, the current log at
    /// `current_end`. Caught up: flush and swap; else copy on.
    pub fn copied(
        &mut self,
        now: Duration,
        id: u64,
        bytes: u64,
        future_end: i64,
        current_end: i64,
    ) -> Vec<Action> {
        self.copied_bytes += bytes;
        if let Some(limit) = self.limit {
            let cost = Duration::from_secs_f64(bytes as f64 / limit as f64);
            let pace = self.pace.max(now) + cost;
            assert!(pace >= self.pace, "the pace went back");
            self.pace = pace;
        }
        let mut actions = Vec::new();
        if let Some(m) = self.current(id, Phase::Busy) {
            m.future_end = future_end;
            m.current_end = current_end;
            if future_end >= current_end {
                m.phase = Phase::Swapping;
                actions.push(Action::FlushAndSwap {
                    id,
                    key: self.key_of(id),
                });
            } else {
                m.phase = Phase::Ready;
            }
        }
        self.check_invariants();
        actions
    }

    /// The future is now the replica: the move is done.
    pub fn swapped(&mut self, id: u64) {
        if self.current(id, Phase::Swapping).is_some() {
            let key = self.key_of(id);
            self.moves.remove(&key);
        }
        self.check_invariants();
    }

    /// The current log moved on (or its start did) before the swap: copy on.
    pub fn not_swapped(&mut self, now: Duration, id: u64) {
        if let Some(m) = self.current(id, Phase::Swapping) {
            m.phase = Phase::Ready;
            m.ready_at = now;
        }
        self.check_invariants();
    }

    /// A step failed for a reason that may pass (the replica not open here yet, a transient
    /// refusal): the same step is tried again after the backoff (an open is asked for again,
    /// a copy or swap becomes a copy).
    pub fn retry(&mut self, now: Duration, id: u64) {
        let backoff = self.config.retry_backoff;
        if let Some(m) = self.moves.values_mut().find(|m| m.id == id) {
            m.phase = match m.phase {
                Phase::Opening | Phase::OpenLater => Phase::OpenLater,
                _ => Phase::Ready,
            };
            m.ready_at = now + backoff;
        }
        self.check_invariants();
    }

    /// The move ends without a swap (the partition is gone here, the destination failed, the
    /// future could not be written): its future log is deleted.
    pub fn cancel(&mut self, id: u64) -> Vec<Action> {
        let Some(key) = self
            .moves
            .iter()
            .find(|(_, m)| m.id == id)
            .map(|(k, _)| k.clone())
        else {
            return Vec::new();
        };
        let m = self.moves.remove(&key).expect("just found");
        self.check_invariants();
        vec![Action::Abandon {
            id,
            key,
            dest: m.dest,
        }]
    }

    /// The moves into directory `dest` (to cancel when it fails).
    pub fn ids_into(&self, dest: Uuid) -> Vec<u64> {
        self.moves
            .values()
            .filter(|m| m.dest == dest)
            .map(|m| m.id)
            .collect()
    }

    /// The move of `key` under way, if any: (id, destination).
    pub fn move_of(&self, key: &Key) -> Option<(u64, Uuid)> {
        self.moves.get(key).map(|m| (m.id, m.dest))
    }

    /// When the next copy or reopen may start (`None`: nothing waits for time).
    pub fn next_deadline(&self) -> Option<Duration> {
        self.moves
            .values()
            .filter_map(|m| match m.phase {
                Phase::Ready => Some(m.ready_at.max(self.pace)),
                Phase::OpenLater => Some(m.ready_at),
                _ => None,
            })
            .min()
    }

    pub fn views(&self) -> Vec<MoveView> {
        self.moves
            .iter()
            .map(|(key, m)| MoveView {
                key: key.clone(),
                dest: m.dest,
                future_end: m.future_end,
                current_end: m.current_end,
            })
            .collect()
    }

    /// Bytes copied by every move so far.
    pub fn copied_bytes(&self) -> u64 {
        self.copied_bytes
    }

    fn current(&mut self, id: u64, phase: Phase) -> Option<&mut Move> {
        self.moves
            .values_mut()
            .find(|m| m.id == id && m.phase == phase)
    }

    fn key_of(&self, id: u64) -> Key {
        self.moves
            .iter()
            .find(|(_, m)| m.id == id)
            .map(|(k, _)| k.clone())
            .expect("a move of this id")
    }

    fn check_invariants(&self) {
        let mut ids: Vec<u64> = self.moves.values().map(|m| m.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), self.moves.len(), "two moves share an id");
        assert!(
            ids.iter().all(|&id| id < self.next_id),
            "a move id not handed out"
        );
        assert!(
            self.moves.values().all(|m| !m.dest.is_nil()),
            "a move without a destination"
        );
    }
}

#[cfg(test)]
mod tests;
