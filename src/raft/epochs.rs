//! The leader-epoch cache of the replicated log: for each epoch, the offset of its first entry
//! (Kafka's `LeaderEpochFileCache`). The core keeps its own copy, updated by the appends and
//! truncations it asks for, to answer `endOffsetFor(epoch)` and to validate fetches as KRaft's
//! `validateOffsetAndEpoch` does.

use super::types::{Epoch, Offset, OffsetAndEpoch};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochCache {
    /// `(epoch, start offset)`, strictly increasing in epoch and non-decreasing in offset.
    entries: Vec<OffsetAndEpoch>,
}

/// The verdict on a fetch's `(fetch_offset, last_fetched_epoch)` against the leader's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchPosition {
    /// The fetcher's log is a prefix of ours: send records from `fetch_offset`.
    Valid,
    /// The fetcher's log diverges: it must truncate to at most this epoch's end offset.
    Diverging(OffsetAndEpoch),
    /// The fetcher claims entries of an epoch newer than any we have: nonsense from a fetcher
    /// that agrees with our epoch.
    Invalid,
}

impl EpochCache {
    /// Rebuilds a cache from recovered pairs, dropping any that would break the order (a
    /// damaged checkpoint must not break the core's invariants).
    pub fn from_entries(entries: &[OffsetAndEpoch]) -> EpochCache {
        let mut cache = EpochCache::default();
        for e in entries {
            if e.epoch > cache.last_epoch() && e.offset >= cache.last_start() {
                cache.entries.push(*e);
            }
        }
        cache
    }

    pub fn entries(&self) -> &[OffsetAndEpoch] {
        &self.entries
    }

    /// The epoch of the last entry, 0 for an empty log.
    pub fn last_epoch(&self) -> Epoch {
        self.entries.last().map_or(0, |e| e.epoch)
    }

    fn last_start(&self) -> Offset {
        self.entries.last().map_or(0, |e| e.offset)
    }

    /// Records that `epoch` starts at `start`, if `epoch` is new. Entries at or after `start`
    /// or at or after `epoch` were truncated first by the caller, so this only appends.
    pub fn assign(&mut self, epoch: Epoch, start: Offset) {
        if self.last_epoch() == epoch && !self.entries.is_empty() {
            return;
        }
        assert!(
            epoch > self.last_epoch(),
            "epoch {epoch} goes back in the epoch cache"
        );
        assert!(
            start >= self.last_start(),
            "epoch {epoch} starts before the previous epoch"
        );
        self.entries.push(OffsetAndEpoch {
            epoch,
            offset: start,
        });
    }

    /// Forgets every epoch that starts at or after `offset` (the log was truncated there).
    pub fn truncate_from_end(&mut self, offset: Offset) {
        while self.entries.last().is_some_and(|e| e.offset >= offset) {
            self.entries.pop();
        }
    }

    /// The log start moved to `start` (a snapshot's end whose last entry has `epoch`): the
    /// epochs that began before it now begin there (Kafka's `truncateFromStart`).
    pub fn truncate_from_start(&mut self, start: Offset, epoch: Epoch) {
        let keep = self.entries.partition_point(|e| e.offset < start);
        let mut rest: Vec<OffsetAndEpoch> = self.entries.split_off(keep);
        rest.retain(|e| e.epoch > epoch);
        self.entries = vec![OffsetAndEpoch {
            epoch,
            offset: start,
        }];
        self.entries.extend(rest);
    }

    /// The epoch of the entry at `offset`, if the cache covers it.
    pub fn epoch_at(&self, offset: Offset) -> Option<Epoch> {
        let after = self.entries.partition_point(|e| e.offset <= offset);
        (after > 0).then(|| self.entries[after - 1].epoch)
    }

    /// `endOffsetFor(epoch)` for a log ending at `end_offset`: the largest epoch ≤ `epoch` we
    /// have and the offset where it ends. `None` if `epoch` is newer than every epoch we have.
    pub fn end_offset_for(&self, epoch: Epoch, end_offset: Offset) -> Option<OffsetAndEpoch> {
        let latest = self.last_epoch();
        if epoch > latest {
            return None;
        }
        if epoch == latest {
            return Some(OffsetAndEpoch {
                epoch,
                offset: end_offset,
            });
        }
        // Index of the first entry with an epoch above `epoch` (exists: epoch < latest).
        let above = self.entries.partition_point(|e| e.epoch <= epoch);
        let end = self.entries[above].offset;
        if above == 0 {
            // Older than everything we have: it ends where our log starts.
            return Some(OffsetAndEpoch { epoch, offset: end });
        }
        Some(OffsetAndEpoch {
            epoch: self.entries[above - 1].epoch,
            offset: end,
        })
    }

    /// KRaft's `validateOffsetAndEpoch`: may a fetcher at `fetch_offset` whose last entry has
    /// `last_fetched_epoch` be sent records as is?
    pub fn validate(
        &self,
        fetch_offset: Offset,
        last_fetched_epoch: Epoch,
        end_offset: Offset,
    ) -> FetchPosition {
        if fetch_offset == 0 && last_fetched_epoch == 0 {
            return FetchPosition::Valid;
        }
        match self.end_offset_for(last_fetched_epoch, end_offset) {
            None => FetchPosition::Invalid,
            Some(end) if end.epoch != last_fetched_epoch || end.offset < fetch_offset => {
                FetchPosition::Diverging(end)
            }
            Some(_) => FetchPosition::Valid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oe(epoch: Epoch, offset: Offset) -> OffsetAndEpoch {
        OffsetAndEpoch { epoch, offset }
    }

    fn cache() -> EpochCache {
        // Epoch 1 at 0..5, epoch 3 at 5..9, epoch 4 from 9; end offset 12.
        EpochCache::from_entries(&[oe(1, 0), oe(3, 5), oe(4, 9)])
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let c = cache();
        let cases = [
            (4, Some(oe(4, 12))), // latest epoch: the log end
            (3, Some(oe(3, 9))),  // an epoch we have: where the next starts
            (2, Some(oe(1, 5))),  // a gap: the largest epoch below, ending where 3 starts
            (1, Some(oe(1, 5))),
            (0, Some(oe(0, 0))), // older than everything: our log start
            (5, None),           // newer than everything
        ];
        for (epoch, want) in cases {
            assert_eq!(c.end_offset_for(epoch, 12), want, "epoch {epoch}");
        }
    }

    #[test]
    fn validate_follows_kraft() {
        let c = cache();
        let cases = [
            (0, 0, FetchPosition::Valid),
            (12, 4, FetchPosition::Valid),
            (10, 4, FetchPosition::Valid),
            (13, 4, FetchPosition::Diverging(oe(4, 12))), // past our end
            (7, 3, FetchPosition::Valid),
            (10, 3, FetchPosition::Diverging(oe(3, 9))), // epoch 3 ended at 9
            (6, 2, FetchPosition::Diverging(oe(1, 5))),  // we never had epoch 2
            (3, 0, FetchPosition::Diverging(oe(0, 0))),
            (3, 7, FetchPosition::Invalid),
        ];
        for (offset, epoch, want) in cases {
            assert_eq!(
                c.validate(offset, epoch, 12),
                want,
                "fetch {offset} epoch {epoch}"
            );
        }
    }

    #[test]
    fn truncation_and_assignment() {
        let mut c = cache();
        c.truncate_from_end(9);
        assert_eq!(c.entries(), &[oe(1, 0), oe(3, 5)]);
        c.truncate_from_end(6);
        assert_eq!(c.entries(), &[oe(1, 0), oe(3, 5)]);
        c.truncate_from_end(5);
        assert_eq!(c.last_epoch(), 1);
        c.assign(1, 5); // same epoch: no new entry
        c.assign(6, 5);
        assert_eq!(c.entries(), &[oe(1, 0), oe(6, 5)]);
        // The log start moves to 7 (its last entry was in epoch 6): epoch 6 now starts there.
        let mut t = c.clone();
        t.truncate_from_start(7, 6);
        assert_eq!(t.entries(), &[oe(6, 7)]);
        assert_eq!(c.epoch_at(4), Some(1));
        assert_eq!(c.epoch_at(5), Some(6));
        let mut t = cache();
        assert_eq!(t.epoch_at(8), Some(3));
        t.truncate_from_start(9, 3);
        assert_eq!(t.entries(), &[oe(3, 9), oe(4, 9)]);
        // A damaged recovered cache keeps only its ordered prefix-consistent entries.
        let bad = EpochCache::from_entries(&[oe(2, 4), oe(1, 6), oe(3, 2), oe(5, 8)]);
        assert_eq!(bad.entries(), &[oe(2, 4), oe(5, 8)]);
    }
}
