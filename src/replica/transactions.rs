//! The transactions of one partition, as its producer state sees them (KIP-98): which are
//! open (by first offset), which ended with a marker the high watermark has not yet passed,
//! and the aborted-transaction index that `read_committed` fetches return.
//!
//! The last stable offset (LSO) is the first offset that is undecided or not yet replicated:
//! the first offset of an open transaction, or of a completed one whose marker is at or above
//! the high watermark (a truncation could still take that marker back), capped at the high
//! watermark. Kafka keeps the aborted index in per-segment `.txnindex` files; Weir keeps it
//! with the producer state (written in its snapshot, rebuilt by replay like the rest), and
//! drops entries the log start has passed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One aborted transaction: Kafka's `AbortedTxn` (the `.txnindex` entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The offset of its ABORT marker.
    pub last_offset: i64,
    /// The first offset of another producer's transaction still open when this one ended, else
    /// `last_offset + 1`: a reader whose data ends below it needs no later entry.
    pub last_stable_offset: i64,
}

/// A transaction whose marker is written but maybe not yet below the high watermark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Completed {
    producer_id: i64,
    first_offset: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transactions {
    /// Open transactions: first offset → producer id. Derived from the producer entries (each
    /// knows its open transaction's first offset), so rebuilt on load, not written.
    #[serde(skip)]
    ongoing: BTreeMap<i64, i64>,
    /// Ended transactions by marker offset, until the high watermark passes the marker.
    #[serde(default)]
    completed: BTreeMap<i64, Completed>,
    /// The aborted-transaction index, by marker offset (strictly increasing, as Kafka's).
    #[serde(default)]
    aborted: BTreeMap<i64, AbortedTxn>,
}

impl Transactions {
    /// A transaction of `producer_id` opened at `first_offset`.
    pub fn opened(&mut self, producer_id: i64, first_offset: i64) {
        let previous = self.ongoing.insert(first_offset, producer_id);
        assert!(previous.is_none(), "two transactions open at one offset");
    }

    /// The transaction of `producer_id` opened at `first_offset` ended with the marker at
    /// `marker_offset`. The high watermark `high_watermark` retires older completions.
    pub fn ended(
        &mut self,
        producer_id: i64,
        first_offset: i64,
        marker_offset: i64,
        aborted: bool,
        high_watermark: i64,
    ) {
        let removed = self.ongoing.remove(&first_offset);
        assert_eq!(removed, Some(producer_id), "only an open transaction ends");
        assert!(first_offset < marker_offset, "a marker follows its data");
        if aborted {
            let last_stable_offset = self
                .ongoing
                .keys()
                .next()
                .copied()
                .unwrap_or(marker_offset + 1);
            if let Some((&last, _)) = self.aborted.last_key_value() {
                assert!(last < marker_offset, "index entries go up");
            }
            self.aborted.insert(
                marker_offset,
                AbortedTxn {
                    producer_id,
                    first_offset,
                    last_offset: marker_offset,
                    last_stable_offset,
                },
            );
        }
        self.completed.insert(
            marker_offset,
            Completed {
                producer_id,
                first_offset,
            },
        );
        self.retire(high_watermark);
    }

    /// Forgets completions whose marker is below the high watermark: they are stable.
    pub fn retire(&mut self, high_watermark: i64) {
        self.completed = self.completed.split_off(&high_watermark);
    }

    /// The first offset not yet stable, if any (before clamping to the log start and the high
    /// watermark).
    pub fn first_unstable_offset(&self, high_watermark: i64) -> Option<i64> {
        let open = self.ongoing.keys().next().copied();
        let unreplicated = self
            .completed
            .range(high_watermark..)
            .map(|(_, c)| c.first_offset)
            .min();
        match (open, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last stable offset for a partition with this log start and high watermark.
    pub fn last_stable_offset(&self, log_start: i64, high_watermark: i64) -> i64 {
        match self.first_unstable_offset(high_watermark) {
            Some(first) => first.max(log_start).min(high_watermark),
            None => high_watermark,
        }
    }

    /// The aborted transactions a `read_committed` fetch from `fetch_offset` whose data ends
    /// before `upper_bound` must report (Kafka's `collectAbortedTxns`): those ending at or after
    /// the fetch offset and starting before the bound.
    pub fn aborted_between(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let mut out = Vec::new();
        for entry in self.aborted.range(fetch_offset..).map(|(_, e)| e) {
            if entry.first_offset < upper_bound {
                out.push(*entry);
            }
            // A later entry started after this one's stable offset: past the bound too.
            if entry.last_stable_offset >= upper_bound {
                break;
            }
        }
        out
    }

    /// The log now starts at `log_start`: index entries wholly below it go.
    pub fn log_start_moved(&mut self, log_start: i64) {
        self.aborted = self.aborted.split_off(&log_start);
    }

    /// A producer with an open transaction was evicted (the table was full of them): its
    /// transaction no longer holds the LSO. Kafka never evicts such a producer; Weir's count
    /// bound must, and logs it (the caller).
    pub fn forget_open(&mut self, first_offset: i64) {
        self.ongoing.remove(&first_offset);
    }

    /// How many transactions are open here.
    pub fn open_count(&self) -> usize {
        self.ongoing.len()
    }

    /// Rebuilds the open set from the producers' open transactions (after loading).
    pub fn reindex(&mut self, open: impl Iterator<Item = (i64, i64)>) {
        self.ongoing = open.map(|(pid, first)| (first, pid)).collect();
    }

    /// The open transactions: (first offset, producer id).
    pub fn ongoing(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing.iter().map(|(&f, &p)| (f, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lso_waits_for_open_and_unreplicated_transactions() {
        let mut t = Transactions::default();
        assert_eq!(t.last_stable_offset(0, 10), 10);
        t.opened(1, 3);
        t.opened(2, 5);
        assert_eq!(t.last_stable_offset(0, 10), 3);
        // Producer 1 commits at 8; the high watermark (6) is below its marker.
        t.ended(1, 3, 8, false, 6);
        assert_eq!(t.last_stable_offset(0, 6), 3);
        assert_eq!(t.last_stable_offset(0, 9), 5);
        t.ended(2, 5, 9, true, 9);
        assert_eq!(t.last_stable_offset(0, 9), 5);
        assert_eq!(t.last_stable_offset(0, 10), 10);
        t.retire(10);
        assert_eq!(t.first_unstable_offset(0), None);
        // The log start clamps an open transaction retention cut into.
        t.opened(3, 12);
        assert_eq!(t.last_stable_offset(14, 20), 14);
        assert_eq!(t.last_stable_offset(0, 11), 11);
    }

    #[test]
    fn aborted_entries_for_a_fetch() {
        let mut t = Transactions::default();
        t.opened(1, 0);
        t.opened(2, 2);
        t.ended(1, 0, 4, true, 0); // stable offset 2: producer 2 still open
        t.ended(2, 2, 6, true, 0); // stable offset 7
        t.opened(3, 8);
        t.ended(3, 8, 9, false, 0); // a commit is not indexed
        t.opened(4, 10);
        t.ended(4, 10, 12, true, 0);
        let ids = |v: Vec<AbortedTxn>| v.iter().map(|a| a.producer_id).collect::<Vec<_>>();
        assert_eq!(ids(t.aborted_between(0, 13)), vec![1, 2, 4]);
        assert_eq!(ids(t.aborted_between(5, 13)), vec![2, 4]);
        assert_eq!(ids(t.aborted_between(0, 2)), vec![1]);
        assert_eq!(ids(t.aborted_between(7, 10)), Vec::<i64>::new());
        assert_eq!(t.aborted_between(0, 13)[0].last_stable_offset, 2);
        t.log_start_moved(5);
        assert_eq!(ids(t.aborted_between(0, 13)), vec![2, 4]);
    }
}
