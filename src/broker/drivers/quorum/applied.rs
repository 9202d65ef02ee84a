//! The committed metadata records a node applied, kept for readers that must not wait for the
//! quorum driver (`Broker::committed_metadata`, the simulator's prefix check), and the name of
//! the metadata log's directory.

use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// The metadata log's directory under `log.dirs` (Kafka's name).
pub const METADATA_DIR: &str = "__cluster_metadata-0";

/// The committed metadata records a node applied, in order: `(offset, raw value)`. Shared
/// between the writer (the quorum's applier) and readers that must not wait for the
/// writer's lock (`Broker::committed_metadata`). It holds the same bytes as the metadata log
/// from the snapshot it started from on.
#[derive(Clone, Default)]
pub struct AppliedRecords {
    inner: Arc<Mutex<AppliedInner>>,
}

#[derive(Default)]
struct AppliedInner {
    records: Vec<(u64, Bytes)>,
    /// The offset after the last committed entry (records and control batches alike).
    end: u64,
}

impl AppliedRecords {
    /// Records a committed record. Offsets strictly increase.
    pub fn push(&self, offset: u64, value: Bytes) {
        let mut inner = self.inner.lock().unwrap();
        assert!(
            offset >= inner.end,
            "committed metadata goes back: {offset} < {}",
            inner.end
        );
        inner.records.push((offset, value));
        inner.end = offset + 1;
    }

    /// Everything below `end` is committed (control batches carry no record to push).
    pub fn advance_to(&self, end: u64) {
        let mut inner = self.inner.lock().unwrap();
        inner.end = inner.end.max(end);
    }

    pub fn end(&self) -> u64 {
        self.inner.lock().unwrap().end
    }

    /// At most `max` records from offset `from`.
    pub fn read(&self, from: u64, max: usize) -> Vec<(u64, Bytes)> {
        let inner = self.inner.lock().unwrap();
        let start = inner.records.partition_point(|(o, _)| *o < from);
        inner.records[start..].iter().take(max).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_in_order_from_any_offset() {
        let applied = AppliedRecords::default();
        applied.advance_to(3); // a snapshot covered 0..3
        applied.push(3, Bytes::from_static(b"a"));
        applied.push(5, Bytes::from_static(b"b"));
        applied.advance_to(7); // a control batch at 6
        assert_eq!(applied.end(), 7);
        let offsets =
            |from, max| -> Vec<u64> { applied.read(from, max).iter().map(|(o, _)| *o).collect() };
        assert_eq!(offsets(0, 10), [3, 5]);
        assert_eq!(offsets(4, 10), [5]);
        assert_eq!(offsets(0, 1), [3]);
        assert!(offsets(6, 10).is_empty());
    }

    #[test]
    #[should_panic(expected = "goes back")]
    fn an_offset_below_the_end_is_refused() {
        let applied = AppliedRecords::default();
        applied.advance_to(4);
        applied.push(2, Bytes::new());
    }
}
