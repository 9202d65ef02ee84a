//! The leader-epoch cache of a partition log (Kafka's `LeaderEpochFileCache`): for each leader
//! epoch, the offset of its first batch. It answers OffsetForLeaderEpoch and the Fetch
//! divergence check (KIP-101, KIP-279, KIP-320) and drives a follower's truncation.
//!
//! It is kept in Kafka's `leader-epoch-checkpoint` text file (`0`, the entry count, then one
//! `epoch startOffset` line per entry), written atomically together with the recovery point (see
//! `Log::checkpoint`) and whenever a truncation changes it. Since the file is at least as new as
//! the recovery point it was written with, a log opened after a crash trusts the entries below
//! the checkpointed recovery point and rebuilds the rest from the batch headers after it; a
//! missing, damaged or inconsistent file is rebuilt from every batch header.

use std::collections::BTreeMap;

/// "No epoch" in OffsetForLeaderEpoch answers and batch headers.
pub const UNDEFINED_EPOCH: i32 = -1;
/// "No offset" in OffsetForLeaderEpoch answers.
pub const UNDEFINED_OFFSET: i64 = -1;

/// The file the cache is kept in, inside the log directory (Kafka's name).
pub const CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
const FILE_VERSION: i64 = 0;

/// One epoch and the offset of its first batch (or, for a leader that has written nothing in
/// it yet, the log end at its election).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// An `endOffsetFor` answer: the largest epoch at or below the one asked for and where it ends.
/// Both are undefined (-1) when the asked-for epoch is newer than every epoch here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEnd {
    pub epoch: i32,
    pub end_offset: i64,
}

impl EpochEnd {
    pub const UNDEFINED: EpochEnd = EpochEnd {
        epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_OFFSET,
    };

    pub fn is_undefined(&self) -> bool {
        self.end_offset == UNDEFINED_OFFSET
    }
}

/// The cache: entries strictly increasing in both epoch and start offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    /// epoch → start offset.
    entries: BTreeMap<i32, i64>,
}

impl LeaderEpochCache {
    pub fn entries(&self) -> Vec<EpochEntry> {
        self.entries
            .iter()
            .map(|(&epoch, &start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries
            .iter()
            .next_back()
            .map(|(&epoch, &start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
    }

    /// The latest epoch, or [`UNDEFINED_EPOCH`] for an empty cache.
    pub fn latest_epoch(&self) -> i32 {
        self.latest().map_or(UNDEFINED_EPOCH, |e| e.epoch)
    }

    pub fn earliest(&self) -> Option<EpochEntry> {
        self.entries
            .iter()
            .next()
            .map(|(&epoch, &start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
    }

    /// The epoch whose range holds `offset` (Kafka's `epochForOffset`): the latest cached epoch
    /// starting at or before it, or [`UNDEFINED_EPOCH`] when every epoch starts after it.
    pub fn epoch_for_offset(&self, offset: i64) -> i32 {
        self.entries
            .iter()
            .rev()
            .find(|(_, &start)| start <= offset)
            .map_or(UNDEFINED_EPOCH, |(&epoch, _)| epoch)
    }

    /// The start offset of `epoch`, if it is cached.
    pub fn start_of(&self, epoch: i32) -> Option<i64> {
        self.entries.get(&epoch).copied()
    }

    /// Whether [`LeaderEpochCache::assign`] would accept `(epoch, start_offset)`.
    pub fn can_assign(&self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        match self.latest() {
            None => true,
            Some(l) if epoch == l.epoch => start_offset >= l.start_offset,
            Some(l) => epoch > l.epoch && start_offset >= l.start_offset,
        }
    }

    /// Records that `epoch` starts at `start_offset`. The same epoch again is a no-op; a new
    /// epoch at the latest entry's start offset replaces that entry (its leader wrote nothing,
    /// KAFKA-7415). Returns whether the cache changed. Epochs and offsets never go back: the
    /// caller checks untrusted input with [`LeaderEpochCache::can_assign`] first.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        assert!(
            self.can_assign(epoch, start_offset),
            "epoch cache assignment ({epoch}, {start_offset}) goes back from {:?}",
            self.latest()
        );
        match self.latest() {
            Some(l) if l.epoch == epoch => return false,
            Some(l) if l.start_offset == start_offset => {
                self.entries.remove(&l.epoch);
            }
            _ => {}
        }
        self.entries.insert(epoch, start_offset);
        self.check();
        true
    }

    /// Forgets every epoch that starts at or after `end_offset` (the log was cut there).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let mut changed = false;
        while let Some(l) = self.latest() {
            if l.start_offset < end_offset {
                break;
            }
            self.entries.remove(&l.epoch);
            changed = true;
        }
        changed
    }

    /// The log now starts at `start_offset`: epochs that started at or before it are dropped,
    /// and the last of them comes back starting at `start_offset` (it still covers it).
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let mut last_dropped = None;
        while let Some(e) = self.earliest() {
            if e.start_offset > start_offset {
                break;
            }
            self.entries.remove(&e.epoch);
            last_dropped = Some(e);
        }
        match last_dropped {
            None => false,
            Some(e) => {
                self.entries.insert(e.epoch, start_offset);
                self.check();
                e.start_offset != start_offset
            }
        }
    }

    /// `endOffsetFor(requested)` for a log ending at `log_end` (KIP-101 with KIP-279's epoch):
    /// - undefined for [`UNDEFINED_EPOCH`] or an epoch above every cached one;
    /// - the latest epoch ends at the log end;
    /// - an epoch below every cached one ends where the first cached epoch starts;
    /// - otherwise the largest cached epoch at or below it, ending where the next one starts.
    pub fn end_offset_for(&self, requested: i32, log_end: i64) -> EpochEnd {
        if requested == UNDEFINED_EPOCH {
            return EpochEnd::UNDEFINED;
        }
        if let Some(l) = self.latest() {
            if l.epoch == requested {
                return EpochEnd {
                    epoch: requested,
                    end_offset: log_end,
                };
            }
        }
        let Some((_, &higher_start)) = self.entries.range(requested + 1..).next() else {
            return EpochEnd::UNDEFINED;
        };
        let floor = self
            .entries
            .range(..=requested)
            .next_back()
            .map_or(requested, |(&e, _)| e);
        EpochEnd {
            epoch: floor,
            end_offset: higher_start,
        }
    }

    fn check(&self) {
        let mut prev: Option<i64> = None;
        for &start in self.entries.values() {
            assert!(start >= 0, "epoch start offsets are not negative");
            if let Some(p) = prev {
                assert!(start > p, "epoch start offsets strictly increase");
            }
            prev = Some(start);
        }
    }

    /// The checkpoint file's text.
    pub fn render(&self) -> String {
        let mut text = format!("{FILE_VERSION}\n{}\n", self.entries.len());
        for (epoch, start) in &self.entries {
            text.push_str(&format!("{epoch} {start}\n"));
        }
        text
    }

    /// Parses a checkpoint file; `None` if it is damaged in any way (bad version, count, line,
    /// or entries out of order).
    pub fn parse(raw: &[u8]) -> Option<LeaderEpochCache> {
        let text = std::str::from_utf8(raw).ok()?;
        let mut lines = text.lines();
        if lines.next()?.trim().parse::<i64>().ok()? != FILE_VERSION {
            return None;
        }
        let count: usize = lines.next()?.trim().parse().ok()?;
        let mut cache = LeaderEpochCache::default();
        for _ in 0..count {
            let mut fields = lines.next()?.split_whitespace();
            let epoch: i32 = fields.next()?.parse().ok()?;
            let start: i64 = fields.next()?.parse().ok()?;
            if fields.next().is_some() {
                return None;
            }
            let ordered = cache
                .latest()
                .is_none_or(|l| epoch > l.epoch && start > l.start_offset);
            if epoch < 0 || start < 0 || !ordered {
                return None;
            }
            cache.entries.insert(epoch, start);
        }
        if lines.any(|l| !l.trim().is_empty()) {
            return None;
        }
        Some(cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::default();
        for &(e, o) in entries {
            c.assign(e, o);
        }
        c
    }

    fn end(epoch: i32, end_offset: i64) -> EpochEnd {
        EpochEnd { epoch, end_offset }
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        // Epoch 1 at 0..5, epoch 3 at 5..9, epoch 4 from 9; log end 12.
        let c = cache(&[(1, 0), (3, 5), (4, 9)]);
        assert_eq!(c.end_offset_for(4, 12), end(4, 12));
        assert_eq!(c.end_offset_for(3, 12), end(3, 9));
        assert_eq!(c.end_offset_for(2, 12), end(1, 5));
        assert_eq!(c.end_offset_for(1, 12), end(1, 5));
        assert_eq!(c.end_offset_for(0, 12), end(0, 0));
        assert_eq!(c.end_offset_for(5, 12), EpochEnd::UNDEFINED);
        assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, 12), EpochEnd::UNDEFINED);
        assert!(LeaderEpochCache::default()
            .end_offset_for(0, 0)
            .is_undefined());
    }

    #[test]
    fn the_fast_double_failover_gets_the_kip_279_answer() {
        // Notes §7.3: C's cache {1:0, 3:5}; B asks about epoch 2 and must hear (1, 5).
        let c = cache(&[(1, 0), (3, 5)]);
        assert_eq!(c.end_offset_for(2, 7), end(1, 5));
    }

    #[test]
    fn assignment_rules() {
        let mut c = cache(&[(1, 0)]);
        assert!(!c.assign(1, 4), "the same epoch again changes nothing");
        assert!(c.assign(2, 5));
        // A leader that wrote nothing in epoch 2 is replaced by the next one at that offset.
        assert!(c.assign(4, 5));
        assert_eq!(
            c.entries(),
            vec![
                EpochEntry {
                    epoch: 1,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 4,
                    start_offset: 5
                }
            ]
        );
        assert!(!c.can_assign(3, 9));
        assert!(!c.can_assign(5, 4));
        assert!(!c.can_assign(-1, 9));
        assert!(c.can_assign(5, 5));
    }

    #[test]
    #[should_panic(expected = "goes back")]
    fn assign_refuses_an_older_epoch() {
        cache(&[(3, 0)]).assign(2, 10);
    }

    #[test]
    fn truncation_from_both_ends() {
        let mut c = cache(&[(1, 0), (3, 5), (4, 9)]);
        assert!(c.truncate_from_end(9));
        assert_eq!(c.latest_epoch(), 3);
        assert!(!c.truncate_from_end(6));
        assert!(c.truncate_from_start(7));
        assert_eq!(
            c.entries(),
            vec![EpochEntry {
                epoch: 3,
                start_offset: 7
            }]
        );
        assert!(c.truncate_from_end(0));
        assert!(c.is_empty());
    }

    #[test]
    fn file_round_trip_and_damage() {
        let c = cache(&[(0, 0), (2, 17), (5, 40)]);
        let text = c.render();
        assert_eq!(text, "0\n3\n0 0\n2 17\n5 40\n");
        assert_eq!(LeaderEpochCache::parse(text.as_bytes()), Some(c));
        for bad in [
            "1\n0\n",
            "0\n2\n0 0\n",
            "0\n1\n0 x\n",
            "0\n2\n3 0\n2 5\n",
            "0\n2\n1 5\n2 5\n",
            "0\n1\n0 0 0\n",
            "0\n1\n0 0\n9 9\n",
            "",
        ] {
            assert_eq!(LeaderEpochCache::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(
            LeaderEpochCache::parse(b"0\n0\n"),
            Some(LeaderEpochCache::default())
        );
    }

    /// The naive model: a list of (epoch, start) kept in insertion order with the same rules.
    #[derive(Default)]
    struct Model(Vec<(i32, i64)>);

    impl Model {
        fn assign(&mut self, epoch: i32, start: i64) {
            if let Some(&(e, o)) = self.0.last() {
                if e == epoch {
                    return;
                }
                if o == start {
                    self.0.pop();
                }
            }
            self.0.push((epoch, start));
        }
        fn end_offset_for(&self, requested: i32, log_end: i64) -> EpochEnd {
            if requested < 0 {
                return EpochEnd::UNDEFINED;
            }
            if self.0.last().map(|l| l.0) == Some(requested) {
                return end(requested, log_end);
            }
            // Linear scan: the first entry above, and the last at or below.
            let Some(&(_, higher)) = self.0.iter().find(|(e, _)| *e > requested) else {
                return EpochEnd::UNDEFINED;
            };
            let floor = self
                .0
                .iter()
                .filter(|(e, _)| *e <= requested)
                .map(|(e, _)| *e)
                .next_back()
                .unwrap_or(requested);
            end(floor, higher)
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Append a batch: epoch bump (0 = same epoch) and record count.
        Append(i32, i64),
        /// A new leader epoch with nothing written yet.
        Elect(i32),
        TruncateEnd(i64),
        TruncateStart(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..3i32, 1..5i64).prop_map(|(b, n)| Op::Append(b, n)),
            1 => (1..3i32).prop_map(Op::Elect),
            1 => (0..40i64).prop_map(Op::TruncateEnd),
            1 => (0..40i64).prop_map(Op::TruncateStart),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_naive_model(ops in proptest::collection::vec(op(), 1..40)) {
            let mut cache = LeaderEpochCache::default();
            let mut model = Model::default();
            let (mut start, mut end_offset, mut epoch) = (0i64, 0i64, 0i32);
            for op in ops {
                match op {
                    Op::Append(bump, n) => {
                        epoch = epoch.max(cache.latest_epoch()) + bump;
                        cache.assign(epoch, end_offset);
                        model.assign(epoch, end_offset);
                        end_offset += n;
                    }
                    Op::Elect(bump) => {
                        epoch = epoch.max(cache.latest_epoch()) + bump;
                        cache.assign(epoch, end_offset);
                        model.assign(epoch, end_offset);
                    }
                    Op::TruncateEnd(to) => {
                        let to = to.clamp(start, end_offset);
                        cache.truncate_from_end(to);
                        model.0.retain(|&(_, o)| o < to);
                        end_offset = to;
                    }
                    Op::TruncateStart(to) => {
                        let to = to.clamp(start, end_offset);
                        cache.truncate_from_start(to);
                        let below: Vec<_> = model.0.iter().filter(|e| e.1 <= to).copied().collect();
                        model.0.retain(|&(_, o)| o > to);
                        if let Some(&(e, _)) = below.last() {
                            model.0.insert(0, (e, to));
                        }
                        start = to;
                    }
                }
                let entries: Vec<(i32, i64)> =
                    cache.entries().iter().map(|e| (e.epoch, e.start_offset)).collect();
                prop_assert_eq!(&entries, &model.0);
                for requested in -1..=epoch + 1 {
                    prop_assert_eq!(
                        cache.end_offset_for(requested, end_offset),
                        model.end_offset_for(requested, end_offset),
                        "epoch {}", requested
                    );
                }
                prop_assert_eq!(LeaderEpochCache::parse(cache.render().as_bytes()), Some(cache.clone()));
            }
        }
    }
}
