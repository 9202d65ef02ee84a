//! The v2 record batch header, read and patched in place. Records themselves are never decoded
//! on the produce or fetch path: the broker keeps the bytes the client sent.
//!
//! Layout (big endian): baseOffset i64 @0, batchLength i32 @8, partitionLeaderEpoch i32 @12,
//! magic i8 @16, crc u32 @17, attributes i16 @21, lastOffsetDelta i32 @23, baseTimestamp i64 @27,
//! maxTimestamp i64 @35, producerId i64 @43, producerEpoch i16 @51, baseSequence i32 @53,
//! recordCount i32 @57. The CRC-32C covers bytes 21.. so baseOffset and the leader epoch can be
//! rewritten without recomputing it.

use std::fmt;

pub const HEADER_LEN: usize = 61;
/// baseOffset + batchLength: the part of the header not counted in batchLength.
pub const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;
const MAGIC_V2: i8 = 2;

const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;
/// KIP-534: the base timestamp holds the delete horizon (set by the log cleaner).
const ATTR_DELETE_HORIZON: i16 = 0x40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchError {
    /// Fewer bytes than a header, or than the header says the batch holds.
    Truncated {
        have: usize,
        need: usize,
    },
    /// Magic other than 2 (message sets v0/v1 are not supported).
    UnsupportedMagic(i8),
    /// A length, count or delta that cannot be right.
    Malformed(&'static str),
    CrcMismatch {
        stored: u32,
        computed: u32,
    },
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Truncated { have, need } => {
                write!(f, "truncated batch: {have} bytes, need {need}")
            }
            BatchError::UnsupportedMagic(m) => write!(f, "unsupported record batch magic {m}"),
            BatchError::Malformed(what) => write!(f, "malformed record batch: {what}"),
            BatchError::CrcMismatch { stored, computed } => {
                write!(
                    f,
                    "CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
                )
            }
        }
    }
}

impl std::error::Error for BatchError {}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

impl BatchHeader {
    /// Parses and sanity-checks the header at the start of `buf` (CRC not checked).
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < HEADER_LEN {
            return Err(BatchError::Truncated {
                have: buf.len(),
                need: HEADER_LEN,
            });
        }
        let header = BatchHeader {
            base_offset: i64_at(buf, 0),
            batch_length: i32_at(buf, 8),
            partition_leader_epoch: i32_at(buf, 12),
            magic: buf[16] as i8,
            crc: u32::from_be_bytes(buf[17..21].try_into().unwrap()),
            attributes: i16_at(buf, 21),
            last_offset_delta: i32_at(buf, 23),
            base_timestamp: i64_at(buf, 27),
            max_timestamp: i64_at(buf, 35),
            producer_id: i64_at(buf, 43),
            producer_epoch: i16_at(buf, 51),
            base_sequence: i32_at(buf, 53),
            record_count: i32_at(buf, 57),
        };
        if header.magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(header.magic));
        }
        if (header.batch_length as i64) < (HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(BatchError::Malformed(
                "batch length shorter than its header",
            ));
        }
        if header.last_offset_delta < 0 || header.record_count < 0 {
            return Err(BatchError::Malformed(
                "negative record count or offset delta",
            ));
        }
        // A stored batch may hold fewer records than its offsets span: the log cleaner removes
        // records but keeps lastOffsetDelta (and may keep an empty header for a producer's last
        // batch). A produce must still describe its offsets exactly (`is_dense`).
        if header.record_count as i64 > header.last_offset_delta as i64 + 1 {
            return Err(BatchError::Malformed(
                "more records than the batch's offsets span",
            ));
        }
        Ok(header)
    }

    /// Bytes of the whole batch, header included.
    pub fn total_len(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    pub fn compression(&self) -> i16 {
        self.attributes & ATTR_COMPRESSION_MASK
    }

    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// Whether the base timestamp is a delete horizon (KIP-534), stamped by the log cleaner.
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & ATTR_DELETE_HORIZON != 0
    }

    /// The delete horizon, when the cleaner stamped one.
    pub fn delete_horizon(&self) -> Option<i64> {
        self.has_delete_horizon().then_some(self.base_timestamp)
    }

    /// One record per offset, as a producer must send (a cleaned batch may have gaps).
    pub fn is_dense(&self) -> bool {
        self.record_count == self.last_offset_delta + 1
    }

    pub fn is_idempotent(&self) -> bool {
        self.producer_id >= 0
    }

    /// Sequence of the last record, wrapping as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let last = self.base_sequence as i64 + self.last_offset_delta as i64;
        (last % (i32::MAX as i64 + 1)) as i32
    }
}

/// Computes the CRC-32C that a batch stores.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[CRC_START..])
}

/// Parses the header of the batch at the start of `buf` and checks that the whole batch is
/// present and its CRC matches. Returns the header; the batch is `buf[..header.total_len()]`.
pub fn check(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let len = header.total_len();
    if buf.len() < len {
        return Err(BatchError::Truncated {
            have: buf.len(),
            need: len,
        });
    }
    let computed = compute_crc(&buf[..len]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
}

/// LogAppendTime: the broker's clock becomes the batch's max timestamp (and the attribute says
/// so); the CRC covers both, so it is recomputed.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attributes = i16_at(batch, 21) | ATTR_TIMESTAMP_TYPE;
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&now_ms.to_be_bytes());
    let crc = compute_crc(batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Iterates over the complete batches at the start of `buf`, verifying each, and stops at the
/// first error (returned as the last item) or at the end of the buffer.
pub fn iter(buf: &[u8]) -> BatchIter<'_> {
    BatchIter { buf, pos: 0 }
}

pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for BatchIter<'a> {
    /// (position in the buffer, header) or the error that ended the walk.
    type Item = Result<(usize, BatchHeader), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let at = self.pos;
        match check(&self.buf[at..]) {
            Ok(header) => {
                self.pos += header.total_len();
                Some(Ok((at, header)))
            }
            Err(e) => {
                self.pos = self.buf.len();
                Some(Err(e))
            }
        }
    }
}

/// Zig-zag varint (Kafka's varint and varlong share the encoding). Returns (value, bytes read).
pub(crate) fn read_varint(buf: &[u8]) -> Option<(i64, usize)> {
    let mut raw: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(10) {
        raw |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            let value = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
            return Some((value, i + 1));
        }
    }
    None
}

/// Builds an uncompressed v2 batch record by record, writing straight into one buffer (the
/// client's produce path and the metadata log; no allocation per record).
pub struct BatchBuilder {
    buf: Vec<u8>,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
}

pub(crate) fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

fn varint_len(value: i64) -> usize {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    let mut n = 1;
    while raw >= 0x80 {
        raw >>= 7;
        n += 1;
    }
    n
}

impl BatchBuilder {
    pub fn new(base_timestamp: i64) -> BatchBuilder {
        BatchBuilder::with_capacity(base_timestamp, 256)
    }

    pub fn with_capacity(base_timestamp: i64, bytes: usize) -> BatchBuilder {
        let mut buf = Vec::with_capacity(HEADER_LEN + bytes);
        buf.resize(HEADER_LEN, 0);
        BatchBuilder {
            buf,
            count: 0,
            base_timestamp,
            max_timestamp: base_timestamp,
        }
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the batch would have if finished now.
    pub fn size(&self) -> usize {
        self.buf.len()
    }

    pub fn push(&mut self, key: Option<&[u8]>, value: Option<&[u8]>, timestamp: i64) {
        let ts_delta = timestamp - self.base_timestamp;
        let offset_delta = self.count as i64;
        let key_len = key.map_or(-1, |k| k.len() as i64);
        let value_len = value.map_or(-1, |v| v.len() as i64);
        let body_len = 1
            + varint_len(ts_delta)
            + varint_len(offset_delta)
            + varint_len(key_len)
            + key.map_or(0, |k| k.len())
            + varint_len(value_len)
            + value.map_or(0, |v| v.len())
            + 1;
        put_varint(&mut self.buf, body_len as i64);
        self.buf.push(0);
        put_varint(&mut self.buf, ts_delta);
        put_varint(&mut self.buf, offset_delta);
        put_varint(&mut self.buf, key_len);
        if let Some(k) = key {
            self.buf.extend_from_slice(k);
        }
        put_varint(&mut self.buf, value_len);
        if let Some(v) = value {
            self.buf.extend_from_slice(v);
        }
        put_varint(&mut self.buf, 0); // no headers
        self.count += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp);
    }

    /// Finishes a transactional batch of producer (`producer_id`, `producer_epoch`) written by a
    /// coordinator on its behalf: no sequence (-1), the transactional attribute set.
    pub fn finish_transactional(self, producer_id: i64, producer_epoch: i16) -> Vec<u8> {
        assert!(
            producer_id >= 0 && producer_epoch >= 0,
            "a transactional producer"
        );
        let mut b = self.finish(producer_id, producer_epoch, -1);
        b[21..23].copy_from_slice(&ATTR_TRANSACTIONAL.to_be_bytes());
        let crc = compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    /// Finishes the batch: base offset 0, the given producer id, epoch and base sequence (use
    /// `(-1, -1, -1)` for a non-idempotent producer). Panics on an empty batch.
    pub fn finish(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Vec<u8> {
        assert!(self.count > 0, "a batch holds at least one record");
        let b = &mut self.buf;
        let batch_length = (b.len() - LOG_OVERHEAD) as i32;
        b[0..8].copy_from_slice(&0i64.to_be_bytes());
        b[8..12].copy_from_slice(&batch_length.to_be_bytes());
        b[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        b[16] = MAGIC_V2 as u8;
        b[21..23].copy_from_slice(&0i16.to_be_bytes());
        b[23..27].copy_from_slice(&(self.count - 1).to_be_bytes());
        b[27..35].copy_from_slice(&self.base_timestamp.to_be_bytes());
        b[35..43].copy_from_slice(&self.max_timestamp.to_be_bytes());
        b[43..51].copy_from_slice(&producer_id.to_be_bytes());
        b[51..53].copy_from_slice(&producer_epoch.to_be_bytes());
        b[53..57].copy_from_slice(&base_sequence.to_be_bytes());
        b[57..61].copy_from_slice(&self.count.to_be_bytes());
        let crc = compute_crc(b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        self.buf
    }
}

/// One record of an uncompressed batch, borrowed from the batch bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// The records of a checked, uncompressed batch. `None` if it is compressed; a malformed record
/// ends the list early with an error.
pub fn records<'a>(
    batch: &'a [u8],
    header: &BatchHeader,
) -> Option<Result<Vec<Record<'a>>, BatchError>> {
    if header.compression() != 0 {
        return None;
    }
    let end = header.total_len().min(batch.len());
    Some(parse_records(&batch[HEADER_LEN.min(end)..end], header).map(|(records, _)| records))
}

/// The records section of a checked batch: everything after the header, compressed or not.
pub fn records_section<'a>(batch: &'a [u8], header: &BatchHeader) -> &'a [u8] {
    &batch[HEADER_LEN..header.total_len()]
}

/// Parses `header.record_count` records from an uncompressed records section (for a compressed
/// batch, its decompressed section). Returns them and the bytes they took.
pub fn parse_records<'a>(
    section: &'a [u8],
    header: &BatchHeader,
) -> Result<(Vec<Record<'a>>, usize), BatchError> {
    let end = section.len();
    let mut pos = 0;
    // Each record takes at least 7 bytes: never reserve more than the bytes could hold.
    let mut out = Vec::with_capacity((header.record_count.max(0) as usize).min(end / 7 + 1));
    for _ in 0..header.record_count {
        let parsed = (|| {
            let (len, n) = read_varint(section.get(pos..end)?)?;
            let body_start = pos + n;
            let body_end = body_start.checked_add(usize::try_from(len).ok()?)?;
            let body = section.get(body_start..body_end)?;
            let mut at = 1; // attributes
            let (ts_delta, m) = read_varint(body.get(at..)?)?;
            at += m;
            let (offset_delta, m) = read_varint(body.get(at..)?)?;
            at += m;
            let bytes_field = |at: &mut usize| -> Option<Option<&'a [u8]>> {
                let (len, m) = read_varint(body.get(*at..)?)?;
                *at += m;
                if len < 0 {
                    return Some(None);
                }
                let field = body.get(*at..at.checked_add(usize::try_from(len).ok()?)?)?;
                *at += len as usize;
                Some(Some(field))
            };
            let key = bytes_field(&mut at)?;
            let value = bytes_field(&mut at)?;
            let timestamp = if header.is_log_append_time() {
                header.max_timestamp
            } else {
                header.base_timestamp.wrapping_add(ts_delta)
            };
            pos = body_end;
            Some(Record {
                offset: header.base_offset.wrapping_add(offset_delta),
                timestamp,
                key,
                value,
            })
        })();
        match parsed {
            Some(record) => out.push(record),
            None => return Err(BatchError::Malformed("record framing")),
        }
    }
    Ok((out, pos))
}

/// A copy of the checked batch `batch` whose records section is `section`, encoded with the
/// compression codec `codec` (the attribute's low three bits). Every other header field is kept
/// (offsets, timestamps, producer id, epoch, sequence, record count); length and CRC follow.
pub fn with_records_section(batch: &[u8], codec: i16, section: &[u8]) -> Vec<u8> {
    assert!((0..=ATTR_COMPRESSION_MASK).contains(&codec));
    let mut out = Vec::with_capacity(HEADER_LEN + section.len());
    out.extend_from_slice(&batch[..HEADER_LEN]);
    out.extend_from_slice(section);
    let length = i32::try_from(out.len() - LOG_OVERHEAD).expect("batch under 2 GiB");
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let attributes = (i16_at(&out, 21) & !ATTR_COMPRESSION_MASK) | codec;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

#[cfg(test)]
pub mod testing {
    use super::*;

    /// A batch of `values` (no keys) with consecutive timestamps from `base_timestamp`.
    pub fn batch(
        values: &[&[u8]],
        base_timestamp: i64,
        producer: Option<(i64, i16, i32)>,
    ) -> Vec<u8> {
        let mut builder = BatchBuilder::new(base_timestamp);
        for (i, value) in values.iter().enumerate() {
            builder.push(None, Some(value), base_timestamp + i as i64);
        }
        let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
        builder.finish(pid, epoch, seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks_a_batch() {
        let b = testing::batch(&[b"a", b"bb", b"ccc"], 1000, None);
        let h = check(&b).unwrap();
        assert_eq!(h.record_count, 3);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(h.total_len(), b.len());
        let recs = records(&b, &h).unwrap().unwrap();
        let got: Vec<_> = recs
            .iter()
            .map(|r| (r.offset, r.timestamp, r.value.unwrap()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 1000, &b"a"[..]),
                (1, 1001, &b"bb"[..]),
                (2, 1002, &b"ccc"[..])
            ]
        );
    }

    #[test]
    fn base_offset_rewrite_keeps_crc_valid() {
        let mut b = testing::batch(&[b"x"], 5, None);
        set_base_offset(&mut b, 42);
        set_partition_leader_epoch(&mut b, 7);
        let h = check(&b).unwrap();
        assert_eq!(h.base_offset, 42);
        assert_eq!(h.partition_leader_epoch, 7);
    }

    #[test]
    fn log_append_time_recomputes_crc() {
        let mut b = testing::batch(&[b"x", b"y"], 5, None);
        set_log_append_time(&mut b, 99);
        let h = check(&b).unwrap();
        assert_eq!(h.max_timestamp, 99);
        assert!(h.is_log_append_time());
    }

    #[test]
    fn detects_corruption_and_truncation() {
        let b = testing::batch(&[b"hello"], 5, None);
        let mut flipped = b.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(
            check(&flipped),
            Err(BatchError::CrcMismatch { .. })
        ));
        assert!(matches!(
            check(&b[..b.len() - 1]),
            Err(BatchError::Truncated { .. })
        ));
        let mut magic = b.clone();
        magic[16] = 1;
        assert_eq!(check(&magic), Err(BatchError::UnsupportedMagic(1)));
    }

    #[test]
    fn never_panics_on_garbage() {
        let mut seed = 7u64;
        for len in 0..200 {
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (seed >> 33) as u8
                })
                .collect();
            for item in iter(&buf) {
                let _ = item;
            }
        }
    }
}
