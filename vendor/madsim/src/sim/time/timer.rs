//! Weir patch (vendor/madsim/PATCHED.md): the timer structure, replacing `naive_timer`.
//!
//! `naive_timer` kept a binary heap of boxed callbacks that could not be cancelled: a dropped or
//! reset `Sleep` left its entry until its deadline (the connections' 10-minute idle timeouts
//! never left it), and every sleep cost a boxed callback plus an `Arc` slot for its waker. Here
//! entries live in a `BTreeMap` keyed by (deadline, insertion sequence): a `Sleep` stores its
//! waker in its entry and removes the entry when it is dropped or reset, and entries with the
//! same deadline fire in the order they were added (a deterministic order, as the simulation
//! needs; the heap's order among equal deadlines was deterministic too, but arbitrary).

use std::{collections::BTreeMap, task::Waker, time::Duration};

/// A callback run when its deadline is reached (network delivery, node restarts).
pub(crate) type Callback = Box<dyn FnOnce() + Send + Sync + 'static>;

/// What an entry does when its deadline is reached.
pub(crate) enum Action {
    /// Wake a pending `Sleep`'s task.
    Wake(Waker),
    /// Run a callback.
    Call(Callback),
}

/// Names one entry: its deadline (since the clock's base) and its insertion sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TimerKey {
    deadline: Duration,
    seq: u64,
}

#[derive(Default)]
pub(crate) struct Timer {
    entries: BTreeMap<TimerKey, Action>,
    next_seq: u64,
}

impl Timer {
    /// Adds an entry; it fires after every entry already added with the same deadline.
    pub(crate) fn add(&mut self, deadline: Duration, action: Action) -> TimerKey {
        let key = TimerKey {
            deadline,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.entries.insert(key, action);
        key
    }

    /// The waker of a `Wake` entry still pending, to replace it.
    pub(crate) fn waker_mut(&mut self, key: TimerKey) -> Option<&mut Waker> {
        match self.entries.get_mut(&key) {
            Some(Action::Wake(waker)) => Some(waker),
            _ => None,
        }
    }

    /// Removes an entry if it has not fired (the caller drops it after releasing the lock).
    pub(crate) fn remove(&mut self, key: TimerKey) -> Option<Action> {
        self.entries.remove(&key)
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Duration> {
        self.entries.first_key_value().map(|(key, _)| key.deadline)
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    pub(crate) fn pop_expired(&mut self, now: Duration) -> Option<Action> {
        let entry = self.entries.first_entry()?;
        if entry.key().deadline > now {
            return None;
        }
        Some(entry.remove())
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn call(log: &Arc<Mutex<Vec<u32>>>, n: u32) -> Action {
        let log = log.clone();
        Action::Call(Box::new(move || log.lock().unwrap().push(n)))
    }

    fn run_expired(timer: &mut Timer, now: Duration) {
        while let Some(action) = timer.pop_expired(now) {
            match action {
                Action::Call(f) => f(),
                Action::Wake(w) => w.wake(),
            }
        }
    }

    #[test]
    fn fires_by_deadline_then_insertion_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut timer = Timer::default();
        let ms = Duration::from_millis;
        timer.add(ms(5), call(&log, 1));
        timer.add(ms(3), call(&log, 2));
        timer.add(ms(5), call(&log, 3));
        timer.add(ms(3), call(&log, 4));
        timer.add(ms(9), call(&log, 5));
        assert_eq!(timer.next(), Some(ms(3)));
        run_expired(&mut timer, ms(4));
        assert_eq!(*log.lock().unwrap(), vec![2, 4]);
        run_expired(&mut timer, ms(5));
        assert_eq!(*log.lock().unwrap(), vec![2, 4, 1, 3]);
        assert_eq!(timer.next(), Some(ms(9)));
        assert_eq!(timer.len(), 1);
    }

    #[test]
    fn removed_entries_never_fire() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut timer = Timer::default();
        let ms = Duration::from_millis;
        let a = timer.add(ms(1), call(&log, 1));
        timer.add(ms(2), call(&log, 2));
        let c = timer.add(ms(600_000), call(&log, 3));
        assert!(timer.remove(a).is_some());
        assert!(timer.remove(c).is_some());
        assert!(timer.remove(c).is_none());
        assert_eq!(timer.len(), 1);
        run_expired(&mut timer, ms(1_000_000));
        assert_eq!(*log.lock().unwrap(), vec![2]);
        assert_eq!(timer.next(), None);
        assert!(timer.remove(a).is_none());
    }
}
