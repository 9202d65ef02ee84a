//! Record-batch compression codecs, as Kafka frames them: gzip, snappy (xerial framing when
//! writing; xerial or raw block when reading, since librdkafka writes raw blocks), lz4 (the LZ4
//! frame format, independent 64 KiB blocks, as Kafka's `Lz4BlockOutputStream` writes it) and
//! zstd. Used only where the broker must look inside a batch; the default produce path never
//! decompresses.
//!
//! Decompression is bounded: a small batch that inflates past [`DECOMPRESSED_LIMIT`] is refused
//! rather than allowed to exhaust memory.

use std::fmt;
use std::io::{Read, Write};

/// The most bytes a batch's records may decompress to.
pub const DECOMPRESSED_LIMIT: usize = 64 << 20;

/// The compression codec of a batch: the low three bits of its attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    pub fn from_id(id: i16) -> Option<Codec> {
        Some(match id {
            0 => Codec::None,
            1 => Codec::Gzip,
            2 => Codec::Snappy,
            3 => Codec::Lz4,
            4 => Codec::Zstd,
            _ => return None,
        })
    }

    pub fn id(self) -> i16 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum CodecError {
    /// The compressed bytes do not decode.
    Corrupt(String),
    /// They decode to more than the limit.
    TooLarge { limit: usize },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Corrupt(why) => write!(f, "cannot decompress records: {why}"),
            CodecError::TooLarge { limit } => {
                write!(f, "records decompress to more than {limit} bytes")
            }
        }
    }
}

impl std::error::Error for CodecError {}

/// xerial snappy-java's stream header: magic, version 1, minimum compatible version 1.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// snappy-java's block size.
const XERIAL_BLOCK: usize = 32 * 1024;

/// Decompresses a records section, refusing output beyond `limit` bytes.
pub fn decompress(codec: Codec, data: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    let corrupt = |e: std::io::Error| CodecError::Corrupt(e.to_string());
    match codec {
        Codec::None => bounded(data, limit),
        Codec::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(data), limit),
        Codec::Lz4 => read_bounded(lz4::Decoder::new(data).map_err(corrupt)?, limit),
        Codec::Zstd => read_bounded(
            zstd::stream::read::Decoder::with_buffer(data).map_err(corrupt)?,
            limit,
        ),
        Codec::Snappy if data.starts_with(XERIAL_MAGIC) => xerial_decompress(data, limit),
        Codec::Snappy => snappy_block(data, limit),
    }
}

fn bounded(data: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    if data.len() > limit {
        return Err(CodecError::TooLarge { limit });
    }
    Ok(data.to_vec())
}

fn read_bounded(reader: impl Read, limit: usize) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| CodecError::Corrupt(e.to_string()))?;
    if out.len() > limit {
        return Err(CodecError::TooLarge { limit });
    }
    Ok(out)
}

fn snappy_block(data: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    let corrupt = |e: snap::Error| CodecError::Corrupt(e.to_string());
    let len = snap::raw::decompress_len(data).map_err(corrupt)?;
    if len > limit {
        return Err(CodecError::TooLarge { limit });
    }
    snap::raw::Decoder::new()
        .decompress_vec(data)
        .map_err(corrupt)
}

/// The xerial stream: the 16-byte header, then blocks of (u32 big-endian length, raw block).
fn xerial_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    let mut rest = data
        .get(XERIAL_HEADER.len()..)
        .ok_or_else(|| CodecError::Corrupt("short xerial snappy header".into()))?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| CodecError::Corrupt("short xerial snappy block length".into()))?;
        let len = u32::from_be_bytes(*len) as usize;
        let block = tail
            .get(..len)
            .ok_or_else(|| CodecError::Corrupt("short xerial snappy block".into()))?;
        let decoded = snappy_block(block, limit - out.len())?;
        out.extend_from_slice(&decoded);
        rest = &tail[len..];
    }
    Ok(out)
}

/// Compresses a records section. `level` is the codec's level as Kafka's
/// `compression.<codec>.level` gives it (ignored for snappy and none).
pub fn compress(codec: Codec, data: &[u8], level: i32) -> Result<Vec<u8>, CodecError> {
    let failed = |e: std::io::Error| CodecError::Corrupt(format!("compression failed: {e}"));
    match codec {
        Codec::None => Ok(data.to_vec()),
        Codec::Gzip => {
            // Kafka's -1 is the JDK's default deflate level, 6.
            let level = if level < 0 {
                6
            } else {
                level.clamp(1, 9) as u32
            };
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
            encoder.write_all(data).map_err(failed)?;
            encoder.finish().map_err(failed)
        }
        Codec::Snappy => {
            let mut out = Vec::with_capacity(XERIAL_HEADER.len() + data.len() / 2);
            out.extend_from_slice(XERIAL_HEADER);
            let mut encoder = snap::raw::Encoder::new();
            for chunk in data.chunks(XERIAL_BLOCK) {
                let block = encoder
                    .compress_vec(chunk)
                    .map_err(|e| CodecError::Corrupt(e.to_string()))?;
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        Codec::Lz4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .level(level.clamp(1, 17) as u32)
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .build(Vec::new())
                .map_err(failed)?;
            encoder.write_all(data).map_err(failed)?;
            let (out, result) = encoder.finish();
            result.map_err(failed)?;
            Ok(out)
        }
        Codec::Zstd => zstd::stream::encode_all(data, level).map_err(failed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let data = sample();
        for codec in [
            Codec::None,
            Codec::Gzip,
            Codec::Snappy,
            Codec::Lz4,
            Codec::Zstd,
        ] {
            for level in [-1, 1, 3, 9] {
                let packed = compress(codec, &data, level).unwrap();
                assert_eq!(
                    decompress(codec, &packed, 1 << 30).unwrap(),
                    data,
                    "{codec:?}"
                );
                if codec != Codec::None {
                    assert!(packed.len() < data.len(), "{codec:?} compresses");
                }
            }
            assert_eq!(Codec::from_id(codec.id()), Some(codec));
        }
        assert_eq!(Codec::from_id(5), None);
    }

    #[test]
    fn raw_snappy_blocks_decode_too() {
        let data = sample();
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(Codec::Snappy, &raw, 1 << 30).unwrap(), data);
    }

    #[test]
    fn decompression_is_bounded_and_garbage_is_an_error() {
        let zeros = vec![0u8; 1 << 20];
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let packed = compress(codec, &zeros, -1).unwrap();
            assert_eq!(
                decompress(codec, &packed, 1000),
                Err(CodecError::TooLarge { limit: 1000 }),
                "{codec:?}"
            );
            let garbage = [0x5au8; 64];
            assert!(decompress(codec, &garbage, 1 << 20).is_err(), "{codec:?}");
            // Truncated input never panics.
            for cut in [0, 1, 7, packed.len() / 2] {
                let _ = decompress(codec, &packed[..cut], 1 << 20);
            }
        }
    }
}
