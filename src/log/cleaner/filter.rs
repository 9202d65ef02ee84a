//! Re-encodes one batch the way Kafka's `MemoryRecords.filterTo` does: a batch that loses
//! nothing (and needs no horizon) keeps its bytes and CRC; otherwise it is rebuilt with the
//! same base offset, lastOffsetDelta, producer id, epoch, base sequence, leader epoch,
//! attributes and codec (decompressed, filtered, recompressed), each kept record byte for byte
//! except its timestamp delta when a KIP-534 horizon becomes the base timestamp.

use std::fmt;

use super::plan::{batch_fate, BatchFate, FilterContext, RecordView};
use crate::log::batch::{self, put_varint, read_varint, BatchHeader, HEADER_LEN};
use crate::log::codec::{self, Codec, CodecError, DECOMPRESSED_LIMIT};

/// Compression levels for recompressed batches: Kafka's defaults (the codec's own level is not
/// recorded in a batch).
const GZIP_LEVEL: i32 = -1;
const LZ4_LEVEL: i32 = 9;
const ZSTD_LEVEL: i32 = 3;
const ATTR_DELETE_HORIZON: i16 = 0x40;

#[derive(Debug)]
pub enum FilterError {
    Codec(CodecError),
    Malformed(String),
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterError::Codec(e) => write!(f, "{e}"),
            FilterError::Malformed(why) => write!(f, "malformed batch: {why}"),
        }
    }
}

impl std::error::Error for FilterError {}

/// One record of a records section, located by byte range.
struct RawRecord {
    /// The whole record, its length prefix included.
    start: usize,
    end: usize,
    /// Where its timestamp delta starts and ends (after the attributes byte).
    ts_start: usize,
    ts_end: usize,
    timestamp_delta: i64,
    offset: i64,
    key: Option<(usize, usize)>,
    has_value: bool,
}

fn split_records(section: &[u8], header: &BatchHeader) -> Result<Vec<RawRecord>, FilterError> {
    let bad = || FilterError::Malformed(format!("record framing at offset {}", header.base_offset));
    let mut out =
        Vec::with_capacity((header.record_count.max(0) as usize).min(section.len() / 7 + 1));
    let mut pos = 0usize;
    for _ in 0..header.record_count {
        let (len, n) = read_varint(section.get(pos..).ok_or_else(bad)?).ok_or_else(bad)?;
        let body = pos + n;
        let end = body
            .checked_add(usize::try_from(len).map_err(|_| bad())?)
            .filter(|&e| e <= section.len())
            .ok_or_else(bad)?;
        let mut at = body + 1; // attributes
        let (ts_delta, m) = read_varint(section.get(at..end).ok_or_else(bad)?).ok_or_else(bad)?;
        let ts_start = at;
        at += m;
        let ts_end = at;
        let (offset_delta, m) =
            read_varint(section.get(at..end).ok_or_else(bad)?).ok_or_else(bad)?;
        at += m;
        let (key_len, m) = read_varint(section.get(at..end).ok_or_else(bad)?).ok_or_else(bad)?;
        at += m;
        let key = if key_len < 0 {
            None
        } else {
            let k_end = at + key_len as usize;
            if k_end > end {
                return Err(bad());
            }
            let k = (at, k_end);
            at = k_end;
            Some(k)
        };
        let (value_len, _) = read_varint(section.get(at..end).ok_or_else(bad)?).ok_or_else(bad)?;
        out.push(RawRecord {
            start: pos,
            end,
            ts_start,
            ts_end,
            timestamp_delta: ts_delta,
            offset: header.base_offset + offset_delta,
            key,
            has_value: value_len >= 0,
        });
        pos = end;
    }
    Ok(out)
}

/// The result of filtering one batch.
pub enum Filtered<'a> {
    /// Keep these bytes (the original batch).
    Unchanged(&'a [u8]),
    Rewritten(Vec<u8>),
    Dropped,
}

/// The records section of `bytes`, decompressed.
fn plain_section(bytes: &[u8], header: &BatchHeader) -> Result<(Codec, Vec<u8>), FilterError> {
    let codec = Codec::from_id(header.compression())
        .ok_or_else(|| FilterError::Malformed(format!("codec {}", header.compression())))?;
    let section = batch::records_section(bytes, header);
    let plain = match codec {
        Codec::None => section.to_vec(),
        c => codec::decompress(c, section, DECOMPRESSED_LIMIT).map_err(FilterError::Codec)?,
    };
    Ok((codec, plain))
}

/// Calls `visit(offset, key)` for every keyed record of a data batch (building the map).
pub fn for_each_key(
    bytes: &[u8],
    header: &BatchHeader,
    mut visit: impl FnMut(i64, &[u8]),
) -> Result<(), FilterError> {
    let (_, plain) = plain_section(bytes, header)?;
    for r in split_records(&plain, header)? {
        if let Some((s, e)) = r.key {
            visit(r.offset, &plain[s..e]);
        }
    }
    Ok(())
}

/// Applies the pass's retention rules to one batch (`bytes` is exactly the batch).
pub fn filter_batch<'a>(
    bytes: &'a [u8],
    header: &BatchHeader,
    ctx: &FilterContext<'_>,
) -> Result<Filtered<'a>, FilterError> {
    if header.is_control() {
        // Transaction markers are kept: producer state rebuilt from the log needs every one
        // (Kafka drops a marker only once its transaction's data is gone, KIP-534).
        return Ok(Filtered::Unchanged(bytes));
    }
    let (codec, plain) = plain_section(bytes, header)?;
    let raw = split_records(&plain, header)?;
    let views: Vec<RecordView<'_>> = raw
        .iter()
        .map(|r| RecordView {
            offset: r.offset,
            key: r.key.map(|(s, e)| &plain[s..e]),
            tombstone: r.key.is_some() && !r.has_value,
        })
        .collect();
    let fate = batch_fate(
        ctx,
        &views,
        header.delete_horizon(),
        header.producer_id,
        header.last_offset(),
    );
    let (kept, horizon) = match fate {
        BatchFate::Unchanged => return Ok(Filtered::Unchanged(bytes)),
        BatchFate::Dropped => return Ok(Filtered::Dropped),
        BatchFate::Rewrite { kept, horizon } => (kept, horizon),
    };
    // Absolute record timestamps stay; the base timestamp is the horizon when there is one,
    // else the original base (NO_TIMESTAMP for an emptied batch, as Kafka writes it).
    let old_base = header.base_timestamp;
    let new_base = match (horizon, kept.is_empty()) {
        (Some(h), _) => h,
        (None, true) => -1,
        (None, false) if header.has_delete_horizon() => {
            // Losing the horizon bit: rebase on the first kept record's timestamp.
            old_base.wrapping_add(raw[kept[0]].timestamp_delta)
        }
        (None, false) => old_base,
    };
    let mut section = Vec::with_capacity(plain.len());
    let mut max_ts = -1i64;
    for &i in &kept {
        let r = &raw[i];
        let absolute = old_base.wrapping_add(r.timestamp_delta);
        max_ts = max_ts.max(absolute);
        if new_base == old_base {
            section.extend_from_slice(&plain[r.start..r.end]);
            continue;
        }
        // Same record with a new timestamp delta: attributes, then delta, then the rest.
        let mut body = Vec::with_capacity(r.end - r.start);
        let (_, len_bytes) = read_varint(&plain[r.start..]).expect("parsed above");
        body.extend_from_slice(&plain[r.start + len_bytes..r.ts_start]);
        put_varint(&mut body, absolute.wrapping_sub(new_base));
        body.extend_from_slice(&plain[r.ts_end..r.end]);
        put_varint(&mut section, body.len() as i64);
        section.extend_from_slice(&body);
    }
    let mut head = bytes[..HEADER_LEN].to_vec();
    let mut attributes = header.attributes & !ATTR_DELETE_HORIZON;
    if horizon.is_some() {
        attributes |= ATTR_DELETE_HORIZON;
    }
    head[21..23].copy_from_slice(&attributes.to_be_bytes());
    head[27..35].copy_from_slice(&new_base.to_be_bytes());
    let max_timestamp = if header.is_log_append_time() || kept.is_empty() {
        header.max_timestamp
    } else {
        max_ts
    };
    head[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    head[57..61].copy_from_slice(&(kept.len() as i32).to_be_bytes());
    let encoded = match codec {
        Codec::None => section,
        c => {
            let level = match c {
                Codec::Gzip => GZIP_LEVEL,
                Codec::Lz4 => LZ4_LEVEL,
                Codec::Zstd => ZSTD_LEVEL,
                _ => 0,
            };
            codec::compress(c, &section, level).map_err(FilterError::Codec)?
        }
    };
    Ok(Filtered::Rewritten(batch::with_records_section(
        &head,
        codec.id(),
        &encoded,
    )))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::log::batch::{check, records, BatchBuilder};
    use crate::log::cleaner::plan::OffsetMap;

    fn keyed(records: &[(&[u8], Option<&[u8]>)], base_offset: i64, pid: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new(1_000);
        for (i, (k, v)) in records.iter().enumerate() {
            b.push(Some(k), *v, 1_000 + i as i64);
        }
        let mut out = b.finish(
            pid,
            if pid >= 0 { 0 } else { -1 },
            if pid >= 0 { 5 } else { -1 },
        );
        batch::set_base_offset(&mut out, base_offset);
        out
    }

    fn run(bytes: &[u8], map: &OffsetMap, producers: &BTreeSet<i64>, now: i64) -> Option<Vec<u8>> {
        let header = check(bytes).unwrap();
        let ctx = FilterContext {
            map,
            first_dirty: 0,
            producer_last: producers,
            first_uncleanable: 1_000,
            now_ms: now,
            delete_retention_ms: 100,
        };
        match filter_batch(bytes, &header, &ctx).unwrap() {
            Filtered::Unchanged(b) => Some(b.to_vec()),
            Filtered::Rewritten(b) => Some(b),
            Filtered::Dropped => None,
        }
    }

    #[test]
    fn rewrite_keeps_header_fields_and_offsets() {
        let original = keyed(
            &[(b"a", Some(b"1")), (b"b", Some(b"2")), (b"a", Some(b"3"))],
            40,
            9,
        );
        let mut map = OffsetMap::new(1 << 20);
        map.put(b"a", 42);
        map.put(b"b", 41);
        map.advance(42);
        let out = run(&original, &map, &BTreeSet::new(), 0).unwrap();
        let (h0, h) = (check(&original).unwrap(), check(&out).unwrap());
        assert_eq!(
            (
                h.base_offset,
                h.last_offset_delta,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence
            ),
            (
                h0.base_offset,
                h0.last_offset_delta,
                h0.producer_id,
                h0.producer_epoch,
                h0.base_sequence
            )
        );
        assert_eq!(h.record_count, 2);
        let recs = records(&out, &h).unwrap().unwrap();
        let got: Vec<_> = recs
            .iter()
            .map(|r| (r.offset, r.timestamp, r.key.unwrap(), r.value.unwrap()))
            .collect();
        assert_eq!(
            got,
            vec![
                (41, 1_001, &b"b"[..], &b"2"[..]),
                (42, 1_002, &b"a"[..], &b"3"[..])
            ]
        );
        assert_eq!(h.max_timestamp, 1_002);
        // Nothing more to remove: the second pass copies the bytes.
        assert_eq!(run(&out, &map, &BTreeSet::new(), 0).unwrap(), out);
    }

    #[test]
    fn compressed_batches_are_recompressed_with_their_codec() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let plain = keyed(&[(b"k", Some(b"old")), (b"k", Some(b"new"))], 0, -1);
            let h = check(&plain).unwrap();
            let section = codec::compress(codec, batch::records_section(&plain, &h), 3).unwrap();
            let packed = batch::with_records_section(&plain, codec.id(), &section);
            let mut map = OffsetMap::new(1 << 20);
            map.put(b"k", 1);
            map.advance(1);
            let out = run(&packed, &map, &BTreeSet::new(), 0).unwrap();
            let h = check(&out).unwrap();
            assert_eq!(h.compression(), codec.id(), "{codec:?}");
            let (_, plain) = plain_section(&out, &h).unwrap();
            let (recs, _) = batch::parse_records(&plain, &h).unwrap();
            assert_eq!(recs.len(), 1);
            assert_eq!((recs[0].offset, recs[0].value), (1, Some(&b"new"[..])));
        }
    }

    #[test]
    fn tombstones_get_a_horizon_then_go() {
        let original = keyed(&[(b"a", Some(b"1")), (b"t", None)], 0, -1);
        let mut map = OffsetMap::new(1 << 20);
        map.put(b"a", 0);
        map.put(b"t", 1);
        map.advance(1);
        let stamped = run(&original, &map, &BTreeSet::new(), 5_000).unwrap();
        let h = check(&stamped).unwrap();
        assert_eq!(h.delete_horizon(), Some(5_100));
        let recs = records(&stamped, &h).unwrap().unwrap();
        // Record timestamps survive the new base.
        assert_eq!(
            recs.iter().map(|r| r.timestamp).collect::<Vec<_>>(),
            vec![1_000, 1_001]
        );
        assert_eq!(
            run(&stamped, &map, &BTreeSet::new(), 5_099).unwrap(),
            stamped
        );
        let after = run(&stamped, &map, &BTreeSet::new(), 5_100).unwrap();
        let h = check(&after).unwrap();
        let recs = records(&after, &h).unwrap().unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!((recs[0].offset, recs[0].timestamp), (0, 1_000));
        assert!(h.has_delete_horizon(), "a batch keeps its horizon");
    }

    #[test]
    fn a_producers_last_batch_survives_empty() {
        let original = keyed(&[(b"a", Some(b"1"))], 3, 7);
        let mut map = OffsetMap::new(1 << 20);
        map.put(b"a", 9);
        map.advance(9);
        assert!(run(&original, &map, &BTreeSet::new(), 0).is_none());
        let kept = run(&original, &map, &[3].into_iter().collect(), 0).unwrap();
        let h = check(&kept).unwrap();
        assert_eq!(
            (
                h.record_count,
                h.base_offset,
                h.last_offset(),
                h.base_sequence
            ),
            (0, 3, 3, 5)
        );
        assert_eq!(h.base_timestamp, -1);
    }
}
