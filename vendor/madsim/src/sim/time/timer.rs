//! Weir patch (vendor/madsim/PATCHED.md): the timer structure, replacing `naive_timer`.
//!
//! `naive_timer` kept a binary heap of boxed callbacks that could not be cancelled: a dropped or
//! reset `Sleep` left its entry until its deadline (the connections' 10-minute idle timeouts
//! never left it), and every sleep cost a boxed callback plus an `Arc` slot for its waker. Here
//! an entry's action (a `Sleep`'s waker, or a callback) lives in a slab slot; a binary heap
//! orders (deadline, insertion sequence, slot). A `Sleep` keeps its entry's key, replaces the
//! waker in place, and empties the slot when it is dropped or reset; the heap item left behind
//! is skipped when it surfaces (no allocation, no wake). Entries with the same deadline fire in
//! the order they were added: a deterministic order, as the simulation needs (the old heap's
//! order among equal deadlines was deterministic too, but arbitrary). A `BTreeMap` keyed by
//! (deadline, sequence) gives the same order but cost more instructions than the old heap.

use std::{collections::BinaryHeap, task::Waker, time::Duration};

/// A callback run when its deadline is reached (network delivery, node restarts).
pub(crate) type Callback = Box<dyn FnOnce() + Send + Sync + 'static>;

/// What an entry does when its deadline is reached.
pub(crate) enum Action {
    /// Wake a pending `Sleep`'s task.
    Wake(Waker),
    /// Run a callback.
    Call(Callback),
}

/// Names one entry: its slab slot and its insertion sequence (which tells a slot's occupants
/// apart, so a stale key never touches a later entry in the same slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerKey {
    slot: u32,
    seq: u64,
}

struct Slot {
    /// The sequence of the entry in the slot (meaningless while `action` is `None`).
    seq: u64,
    action: Option<Action>,
}

/// A heap item: an entry's deadline and insertion sequence packed in one integer (deadline
/// nanoseconds in the high half, sequence in the low half, so the integer orders as the pair
/// (deadline, sequence) does: one comparison instead of a tuple's three), and its slot. The
/// sequence is unique, so the slot never decides an order.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Item {
    key: u128,
    slot: u32,
}

impl Item {
    fn new(deadline: Duration, seq: u64, slot: u32) -> Item {
        // Deadlines past 584 years (a time-out configured to "forever") all rank last, by
        // insertion; a simulation never gets there.
        let nanos = u64::try_from(deadline.as_nanos()).unwrap_or(u64::MAX);
        Item {
            key: (u128::from(nanos) << 64) | u128::from(seq),
            slot,
        }
    }

    fn deadline(self) -> Duration {
        Duration::from_nanos((self.key >> 64) as u64)
    }

    fn seq(self) -> u64 {
        self.key as u64
    }
}

impl Ord for Item {
    /// Reversed: `BinaryHeap` is a max-heap and the earliest item must be on top.
    fn cmp(&self, other: &Item) -> std::cmp::Ordering {
        other.key.cmp(&self.key)
    }
}

impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Item) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Default)]
pub(crate) struct Timer {
    /// Items (deadline, sequence, slot), earliest first; items of removed entries stay until
    /// they surface.
    heap: BinaryHeap<Item>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    next_seq: u64,
    /// Heap items whose entries were removed. Once they are most of the heap it is rebuilt
    /// without them: most sleeps are dropped before their deadline (time-outs that did not
    /// fire), and every stale item made each push and pop deeper.
    stale: usize,
}

impl Timer {
    /// Adds an entry; it fires after every entry already added with the same deadline.
    pub(crate) fn add(&mut self, deadline: Duration, action: Action) -> TimerKey {
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Slot {
                    seq,
                    action: Some(action),
                };
                slot
            }
            None => {
                let slot = u32::try_from(self.slots.len()).expect("fewer than 2^32 timers");
                self.slots.push(Slot {
                    seq,
                    action: Some(action),
                });
                slot
            }
        };
        self.heap.push(Item::new(deadline, seq, slot));
        TimerKey { slot, seq }
    }

    fn live(&mut self, key: TimerKey) -> Option<&mut Slot> {
        let slot = self.slots.get_mut(key.slot as usize)?;
        (slot.seq == key.seq && slot.action.is_some()).then_some(slot)
    }

    /// The waker of a `Wake` entry still pending, to replace it.
    pub(crate) fn waker_mut(&mut self, key: TimerKey) -> Option<&mut Waker> {
        match self.live(key)?.action.as_mut() {
            Some(Action::Wake(waker)) => Some(waker),
            _ => None,
        }
    }

    /// Removes an entry if it has not fired (the caller drops it after releasing the lock).
    pub(crate) fn remove(&mut self, key: TimerKey) -> Option<Action> {
        let action = self.live(key)?.action.take();
        self.free.push(key.slot);
        self.stale += 1;
        if self.stale > 64 && self.stale > self.heap.len() / 2 {
            let slots = &self.slots;
            self.heap.retain(|item| {
                let entry = &slots[item.slot as usize];
                entry.seq == item.seq() && entry.action.is_some()
            });
            self.stale = 0;
        }
        action
    }

    /// Drops the heap's top items whose entries were removed.
    fn skip_removed(&mut self) {
        while let Some(&item) = self.heap.peek() {
            let entry = &self.slots[item.slot as usize];
            if entry.seq == item.seq() && entry.action.is_some() {
                return;
            }
            self.heap.pop();
            self.stale -= 1;
        }
    }

    /// The earliest deadline.
    pub(crate) fn next(&mut self) -> Option<Duration> {
        self.skip_removed();
        self.heap.peek().map(|item| item.deadline())
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    pub(crate) fn pop_expired(&mut self, now: Duration) -> Option<Action> {
        self.skip_removed();
        let item = *self.heap.peek()?;
        if item.deadline() > now {
            return None;
        }
        self.heap.pop();
        let action = self.slots[item.slot as usize].action.take();
        self.free.push(item.slot);
        action
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots
            .iter()
            .filter(|slot| slot.action.is_some())
            .count()
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

    #[test]
    fn many_removals_keep_the_order_of_what_is_left() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut timer = Timer::default();
        let ms = Duration::from_millis;
        let mut keep = Vec::new();
        for n in 0..1000u32 {
            let key = timer.add(ms(u64::from(n % 7)), call(&log, n));
            if n % 10 == 0 {
                keep.push((n % 7, n));
            } else {
                assert!(timer.remove(key).is_some());
            }
        }
        assert!(timer.heap.len() < 1000, "stale items were dropped");
        assert_eq!(timer.len(), 100);
        run_expired(&mut timer, ms(100));
        keep.sort();
        let expected: Vec<u32> = keep.into_iter().map(|(_, n)| n).collect();
        assert_eq!(*log.lock().unwrap(), expected);
        assert_eq!(timer.stale, 0);
        assert_eq!(timer.next(), None);
    }

    #[test]
    fn the_packed_key_orders_as_deadline_then_insertion() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut timer = Timer::default();
        let far = Duration::from_secs(u64::MAX / 2); // past 584 years: ranks last
        timer.add(far, call(&log, 1));
        timer.add(Duration::new(1, 0), call(&log, 2));
        timer.add(Duration::new(0, 999_999_999), call(&log, 3));
        timer.add(Duration::new(1, 0), call(&log, 4));
        timer.add(Duration::new(1, 1), call(&log, 5));
        timer.add(far, call(&log, 6));
        assert_eq!(timer.next(), Some(Duration::new(0, 999_999_999)));
        run_expired(&mut timer, Duration::new(1, 0));
        assert_eq!(*log.lock().unwrap(), vec![3, 2, 4]);
        run_expired(&mut timer, Duration::MAX);
        assert_eq!(*log.lock().unwrap(), vec![3, 2, 4, 5, 1, 6]);
    }

    #[test]
    fn a_stale_key_does_not_touch_the_slot_s_next_entry() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut timer = Timer::default();
        let ms = Duration::from_millis;
        let a = timer.add(ms(7), call(&log, 1));
        assert!(timer.remove(a).is_some());
        let b = timer.add(ms(8), call(&log, 2)); // reuses a's slot
        assert!(timer.remove(a).is_none());
        assert!(timer.waker_mut(a).is_none());
        assert_eq!(timer.next(), Some(ms(8)));
        run_expired(&mut timer, ms(8));
        assert_eq!(*log.lock().unwrap(), vec![2]);
        assert!(timer.remove(b).is_none());
        assert_eq!(timer.next(), None);
        assert_eq!(timer.len(), 0);
    }
}
