//! Data-driven tests of the cleaner's decisions: each case is a table row.

use super::*;

fn seg(base: i64, next: i64, size: u64, max_ts: i64) -> SegmentInfo {
    SegmentInfo {
        base,
        next,
        size,
        max_timestamp: max_ts,
        first_timestamp: max_ts,
    }
}

/// Three closed segments of 100 bytes ([0,10), [10,20), [20,30)) and an active one at 30.
fn log() -> Vec<SegmentInfo> {
    vec![
        seg(0, 10, 100, 1_000),
        seg(10, 20, 100, 2_000),
        seg(20, 30, 100, 3_000),
        seg(30, 35, 50, 4_000),
    ]
}

/// (name, stored checkpoint, log start, upper bound, now, policy, expected range).
type RangeCase = (
    &'static str,
    Option<i64>,
    i64,
    i64,
    i64,
    CleanPolicy,
    Option<(i64, i64)>,
);

#[test]
fn cleanable_range_table() {
    let policy = CleanPolicy::default();
    // (name, stored checkpoint, log start, upper bound, now, policy, expected (dirty, uncleanable) or None)
    let lag = CleanPolicy {
        min_lag_ms: 1_500,
        ..policy
    };
    let forced = CleanPolicy {
        min_dirty_ratio: 0.99,
        max_lag_ms: 2_500,
        ..policy
    };
    let strict = CleanPolicy {
        min_dirty_ratio: 0.99,
        ..policy
    };
    let cases: Vec<RangeCase> = vec![
        (
            "fresh log: all closed segments",
            None,
            0,
            35,
            10_000,
            policy,
            Some((0, 30)),
        ),
        (
            "never the active segment",
            None,
            0,
            i64::MAX,
            10_000,
            policy,
            Some((0, 30)),
        ),
        (
            "upper bound rounds down to its segment",
            None,
            0,
            25,
            10_000,
            policy,
            Some((0, 20)),
        ),
        (
            "upper bound inside the first segment",
            None,
            0,
            5,
            10_000,
            policy,
            None,
        ),
        (
            "checkpoint past half: ratio 1/3 below 0.5",
            Some(20),
            0,
            35,
            10_000,
            policy,
            None,
        ),
        (
            "checkpoint at 10: ratio 2/3",
            Some(10),
            0,
            35,
            10_000,
            policy,
            Some((10, 30)),
        ),
        (
            "checkpoint past the end is reset",
            Some(99),
            0,
            35,
            10_000,
            policy,
            Some((0, 30)),
        ),
        (
            "checkpoint below the start is reset",
            Some(0),
            10,
            35,
            10_000,
            policy,
            Some((10, 30)),
        ),
        ("nothing dirty", Some(30), 0, 35, 10_000, policy, None),
        (
            "min lag keeps young segments",
            None,
            0,
            35,
            3_000,
            lag,
            Some((0, 10)),
        ),
        ("min lag: all young", None, 0, 35, 1_000, lag, None),
        ("ratio too low", Some(10), 0, 35, 10_000, strict, None),
        (
            "max lag forces a low ratio",
            Some(10),
            0,
            35,
            10_000,
            forced,
            Some((10, 30)),
        ),
        (
            "max lag not yet reached",
            Some(10),
            0,
            35,
            4_000,
            forced,
            None,
        ),
    ];
    for (name, stored, start, upper, now, policy, want) in cases {
        let got = cleanable_range(&log(), stored, start, upper, now, &policy)
            .map(|r| (r.first_dirty, r.first_uncleanable));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn ratio_and_forced_flag() {
    let r = cleanable_range(&log(), Some(10), 0, 35, 10_000, &CleanPolicy::default()).unwrap();
    assert!((r.dirty_ratio - 2.0 / 3.0).abs() < 1e-9);
    assert!(!r.forced);
}

#[test]
fn offset_map_is_bounded_and_keeps_the_last_offset() {
    let mut map = OffsetMap::new(2 * (1 + ENTRY_OVERHEAD));
    assert!(map.fits([&b"a"[..], b"b", b"a"]));
    map.put(b"a", 1);
    map.put(b"b", 2);
    map.put(b"a", 3);
    map.advance(3);
    assert_eq!(map.get(b"a"), Some(3));
    assert_eq!(map.len(), 2);
    assert_eq!(map.bytes(), 2 * (1 + ENTRY_OVERHEAD));
    // An old key still fits, a new one does not.
    assert!(map.fits([&b"a"[..]]));
    assert!(!map.fits([&b"c"[..]]));
    assert_eq!(map.latest(), 3);
}

#[test]
fn groups_respect_bytes_and_offset_span() {
    let segs = vec![
        seg(0, 10, 60, 0),
        seg(10, 20, 60, 0),
        seg(20, 30, 30, 0),
        seg(30, 40, 100, 0),
        seg(40, 50, 10, 0),
    ];
    assert_eq!(group_segments(&segs, 100), vec![0..1, 1..3, 3..4, 4..5]);
    assert_eq!(group_segments(&segs, 1000), vec![0..5]);
    let wide = vec![seg(0, 10, 1, 0), seg(10, u32::MAX as i64 + 5, 1, 0)];
    assert_eq!(group_segments(&wide, 1000), vec![0..1, 1..2]);
}

fn ctx<'a>(map: &'a OffsetMap, producers: &'a BTreeSet<i64>, now: i64) -> FilterContext<'a> {
    FilterContext {
        map,
        first_dirty: 10,
        producer_last: producers,
        first_uncleanable: 100,
        now_ms: now,
        delete_retention_ms: 1_000,
    }
}

fn rec(offset: i64, key: &'static [u8], tombstone: bool) -> RecordView<'static> {
    RecordView {
        offset,
        key: Some(key),
        tombstone,
    }
}

#[test]
fn record_retention_table() {
    let mut map = OffsetMap::new(1 << 20);
    for (k, o) in [(&b"a"[..], 12), (b"b", 15), (b"t", 20)] {
        map.put(k, o);
    }
    map.advance(50);
    let none = BTreeSet::new();
    let c = ctx(&map, &none, 5_000);
    // (name, record, batch horizon, kept)
    let cases: Vec<(&str, RecordView, Option<i64>, bool)> = vec![
        (
            "older value of a mapped key",
            rec(3, b"a", false),
            None,
            false,
        ),
        ("the mapped offset itself", rec(12, b"a", false), None, true),
        (
            "key not in the map (clean section)",
            rec(4, b"z", false),
            None,
            true,
        ),
        ("beyond the map is kept", rec(60, b"a", false), None, true),
        (
            "keyless is dropped",
            RecordView {
                offset: 30,
                key: None,
                tombstone: false,
            },
            None,
            false,
        ),
        (
            "newest tombstone, no horizon yet",
            rec(20, b"t", true),
            None,
            true,
        ),
        (
            "newest tombstone inside its horizon",
            rec(20, b"t", true),
            Some(6_000),
            true,
        ),
        (
            "newest tombstone past its horizon",
            rec(20, b"t", true),
            Some(5_000),
            false,
        ),
        ("superseded tombstone", rec(2, b"a", true), None, false),
    ];
    for (name, r, horizon, want) in cases {
        assert_eq!(c.keep(&r, horizon), want, "{name}");
    }
}

#[test]
fn batch_fate_table() {
    let mut map = OffsetMap::new(1 << 20);
    map.put(b"a", 12);
    map.put(b"t", 14);
    map.advance(50);
    let producers: BTreeSet<i64> = [7].into_iter().collect();
    let c = ctx(&map, &producers, 5_000);
    let fate =
        |records: &[RecordView], horizon, pid, last| batch_fate(&c, records, horizon, pid, last);
    // Nothing removed, no tombstone: copied as is.
    assert_eq!(
        fate(&[rec(12, b"a", false)], None, -1, 12),
        BatchFate::Unchanged
    );
    // One of two removed: rewritten with the survivor.
    assert_eq!(
        fate(&[rec(11, b"a", false), rec(12, b"a", false)], None, -1, 12),
        BatchFate::Rewrite {
            kept: vec![1],
            horizon: None
        }
    );
    // Everything removed: dropped, unless it is a producer's last batch or ends the pass.
    assert_eq!(
        fate(&[rec(5, b"a", false)], None, -1, 5),
        BatchFate::Dropped
    );
    assert_eq!(
        fate(&[rec(7, b"a", false)], None, 3, 7),
        BatchFate::Rewrite {
            kept: vec![],
            horizon: None
        }
    );
    assert_eq!(
        fate(&[rec(7, b"a", false)], None, -1, 7),
        BatchFate::Dropped
    );
    assert_eq!(
        fate(
            &[rec(99, b"x", false), rec(11, b"a", false)][1..],
            None,
            -1,
            99
        ),
        BatchFate::Rewrite {
            kept: vec![],
            horizon: None
        }
    );
    // A mapped tombstone gets a horizon now + delete.retention.ms.
    assert_eq!(
        fate(&[rec(14, b"t", true)], None, -1, 14),
        BatchFate::Rewrite {
            kept: vec![0],
            horizon: Some(6_000)
        }
    );
    // A tombstone in the clean section (below first_dirty, not mapped) gets none: kept as is.
    assert_eq!(
        fate(&[rec(4, b"u", true)], None, -1, 4),
        BatchFate::Unchanged
    );
    // A stamped tombstone is kept until its horizon, then dropped with its batch.
    assert_eq!(
        fate(&[rec(14, b"t", true)], Some(5_001), -1, 14),
        BatchFate::Unchanged
    );
    assert_eq!(
        fate(&[rec(14, b"t", true)], Some(5_000), -1, 14),
        BatchFate::Dropped
    );
}
