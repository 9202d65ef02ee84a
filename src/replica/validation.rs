//! Record-level rules a topic's config puts on an incoming batch, as Kafka's `LogValidator`
//! applies them: records on a compacted topic must have a key, and a topic whose
//! `compression.type` names a codec stores its batches with that codec (the broker recompresses
//! a batch that differs). Only these topics pay for looking inside a batch; on any other the
//! batch is kept exactly as sent, unread.
//!
//! Recompression keeps the batch itself: the records section is decompressed and compressed
//! again, byte for byte the same records (offset and timestamp deltas, keys, values, headers),
//! under the same header (base timestamp, max timestamp, producer id, epoch, base sequence,
//! record count), with only the codec bits, the length and the CRC changed.

use std::borrow::Cow;

use crate::config::{CleanupPolicy, CompressionType, TopicConfig};
use crate::log::batch::{self, BatchHeader};
use crate::log::codec::{self, Codec, DECOMPRESSED_LIMIT};

/// One record refused, by its index in the batch (Produce v8+ `record_errors`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

#[derive(Debug, PartialEq, Eq)]
pub enum ValidationError {
    /// The batch cannot be read: unknown codec, undecodable or oversized compressed data,
    /// broken record framing.
    Invalid(String),
    /// Some records break the topic's rules.
    Records(Vec<RecordError>),
}

/// The codec a topic's `compression.type` asks for; `None` keeps the producer's.
fn target(config: &TopicConfig) -> Option<(Codec, i32)> {
    Some(match config.compression_type {
        CompressionType::Producer => return None,
        CompressionType::Uncompressed => (Codec::None, 0),
        CompressionType::Gzip => (Codec::Gzip, config.compression_gzip_level),
        CompressionType::Snappy => (Codec::Snappy, 0),
        CompressionType::Lz4 => (Codec::Lz4, config.compression_lz4_level),
        CompressionType::Zstd => (Codec::Zstd, config.compression_zstd_level),
    })
}

/// Applies the topic's record rules to one checked batch. `Ok(None)`: store the batch as sent;
/// `Ok(Some(bytes))`: store this rewritten batch instead. `topic_partition` names the partition
/// in error messages, as Kafka does (`topic-0`).
pub fn apply(
    batch: &[u8],
    header: &BatchHeader,
    config: &TopicConfig,
    topic_partition: &str,
) -> Result<Option<Vec<u8>>, ValidationError> {
    let Some(source) = Codec::from_id(header.compression()) else {
        return Err(ValidationError::Invalid(format!(
            "unknown compression codec id {}",
            header.compression()
        )));
    };
    let recompress = target(config).filter(|&(codec, _)| codec != source);
    let check_keys = config.cleanup_policy != CleanupPolicy::Delete;
    if recompress.is_none() && !check_keys {
        return Ok(None);
    }
    let section = batch::records_section(batch, header);
    let plain: Cow<[u8]> = match source {
        Codec::None => Cow::Borrowed(section),
        codec => Cow::Owned(
            codec::decompress(codec, section, DECOMPRESSED_LIMIT)
                .map_err(|e| ValidationError::Invalid(e.to_string()))?,
        ),
    };
    let (records, used) = batch::parse_records(&plain, header)
        .map_err(|e| ValidationError::Invalid(e.to_string()))?;
    if used != plain.len() {
        return Err(ValidationError::Invalid(format!(
            "{} bytes after the last of {} records",
            plain.len() - used,
            header.record_count
        )));
    }
    if check_keys {
        let errors: Vec<RecordError> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.key.is_none())
            .map(|(i, _)| RecordError {
                batch_index: i as i32,
                message: format!(
                    "Compacted topic cannot accept message without key in topic partition {topic_partition}"
                ),
            })
            .collect();
        if !errors.is_empty() {
            return Err(ValidationError::Records(errors));
        }
    }
    let Some((codec, level)) = recompress else {
        return Ok(None);
    };
    let packed = codec::compress(codec, &plain, level)
        .map_err(|e| ValidationError::Invalid(e.to_string()))?;
    let rewritten = batch::with_records_section(batch, codec.id(), &packed);
    debug_assert!(batch::check(&rewritten).is_ok());
    Ok(Some(rewritten))
}

/// Kafka's summary of refused records, for the response's error message.
pub fn summary(errors: &[RecordError]) -> String {
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|e| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                e.batch_index, e.message
            )
        })
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::BatchBuilder;

    fn config(pairs: &[(&str, &str)]) -> TopicConfig {
        let overrides = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TopicConfig::default().with_overrides(&overrides).unwrap()
    }

    fn plain_batch(keys: &[Option<&[u8]>]) -> Vec<u8> {
        let mut b = BatchBuilder::new(1_000);
        for (i, key) in keys.iter().enumerate() {
            b.push(
                *key,
                Some(format!("value-{i}").as_bytes()),
                1_000 + i as i64,
            );
        }
        b.finish(7, 2, 40)
    }

    fn compressed(batch: &[u8], codec: Codec) -> Vec<u8> {
        let header = batch::check(batch).unwrap();
        let section = batch::records_section(batch, &header);
        let packed = codec::compress(codec, section, -1).unwrap();
        batch::with_records_section(batch, codec.id(), &packed)
    }

    /// (offset, timestamp, key, value) of each record.
    type Decoded = (i64, i64, Option<Vec<u8>>, Vec<u8>);

    fn values(batch: &[u8]) -> Vec<Decoded> {
        let header = batch::check(batch).unwrap();
        let codec = Codec::from_id(header.compression()).unwrap();
        let plain =
            codec::decompress(codec, batch::records_section(batch, &header), 1 << 20).unwrap();
        batch::parse_records(&plain, &header)
            .unwrap()
            .0
            .iter()
            .map(|r| {
                (
                    r.offset,
                    r.timestamp,
                    r.key.map(|k| k.to_vec()),
                    r.value.unwrap().to_vec(),
                )
            })
            .collect()
    }

    #[test]
    fn default_topics_never_look_inside() {
        let b = compressed(&plain_batch(&[None, None]), Codec::Gzip);
        let header = batch::check(&b).unwrap();
        assert_eq!(apply(&b, &header, &TopicConfig::default(), "t-0"), Ok(None));
        // Even garbage inside a compressed batch passes untouched: zero copy, zero decode.
        let mut garbage = b.clone();
        garbage[batch::HEADER_LEN..].fill(0x5a);
        let garbage = batch::with_records_section(&garbage, 1, &garbage[batch::HEADER_LEN..]);
        let header = batch::check(&garbage).unwrap();
        assert_eq!(
            apply(&garbage, &header, &TopicConfig::default(), "t-0"),
            Ok(None)
        );
    }

    #[test]
    fn compacted_topics_refuse_keyless_records_compressed_or_not() {
        let compact = config(&[("cleanup.policy", "compact")]);
        let both = config(&[("cleanup.policy", "compact,delete")]);
        let raw = plain_batch(&[Some(b"k"), None, Some(b"k"), None]);
        for b in [
            raw.clone(),
            compressed(&raw, Codec::Lz4),
            compressed(&raw, Codec::Snappy),
        ] {
            let header = batch::check(&b).unwrap();
            for c in [&compact, &both] {
                let Err(ValidationError::Records(errors)) = apply(&b, &header, c, "t-3") else {
                    panic!("keyless records accepted");
                };
                let indexes: Vec<i32> = errors.iter().map(|e| e.batch_index).collect();
                assert_eq!(indexes, [1, 3]);
                assert_eq!(
                    errors[0].message,
                    "Compacted topic cannot accept message without key in topic partition t-3"
                );
                assert!(summary(&errors).starts_with(
                    "One or more records have been rejected due to 2 record errors in total"
                ));
            }
        }
        let keyed = compressed(&plain_batch(&[Some(b"a"), Some(b"")]), Codec::Zstd);
        let header = batch::check(&keyed).unwrap();
        assert_eq!(
            apply(&keyed, &header, &compact, "t-0"),
            Ok(None),
            "empty keys are keys"
        );
    }

    #[test]
    fn recompression_keeps_everything_but_the_codec() {
        let raw = plain_batch(&[Some(b"k1"), None, Some(b"k3")]);
        let original = batch::check(&raw).unwrap();
        let expected = values(&raw);
        for (name, codec) in [
            ("uncompressed", Codec::None),
            ("gzip", Codec::Gzip),
            ("snappy", Codec::Snappy),
            ("lz4", Codec::Lz4),
            ("zstd", Codec::Zstd),
        ] {
            let topic = config(&[("compression.type", name)]);
            for source in [
                Codec::None,
                Codec::Gzip,
                Codec::Snappy,
                Codec::Lz4,
                Codec::Zstd,
            ] {
                let incoming = compressed(&raw, source);
                let header = batch::check(&incoming).unwrap();
                let out = apply(&incoming, &header, &topic, "t-0").unwrap();
                if source == codec {
                    assert_eq!(out, None, "same codec: kept as sent");
                    continue;
                }
                let out = out.expect("recompressed");
                let h = batch::check(&out).unwrap();
                assert_eq!(Codec::from_id(h.compression()), Some(codec));
                assert_eq!(values(&out), expected, "{source:?} -> {codec:?}");
                let same = |h: &BatchHeader| {
                    (
                        h.base_offset,
                        h.last_offset_delta,
                        h.base_timestamp,
                        h.max_timestamp,
                        h.producer_id,
                        h.producer_epoch,
                        h.base_sequence,
                        h.record_count,
                        h.attributes & !7,
                    )
                };
                assert_eq!(same(&h), same(&original));
            }
        }
    }

    #[test]
    fn unreadable_batches_are_invalid_on_topics_that_read_them() {
        let topic = config(&[("compression.type", "zstd")]);
        let raw = plain_batch(&[Some(b"k")]);
        let mut bad = compressed(&raw, Codec::Gzip);
        let last = bad.len() - 3;
        bad[last] ^= 0xff;
        let bad = batch::with_records_section(&bad, 1, &bad.clone()[batch::HEADER_LEN..]);
        let header = batch::check(&bad).unwrap();
        assert!(matches!(
            apply(&bad, &header, &topic, "t-0"),
            Err(ValidationError::Invalid(_))
        ));
        let unknown = batch::with_records_section(&raw, 6, &raw[batch::HEADER_LEN..]);
        let header = batch::check(&unknown).unwrap();
        assert!(matches!(
            apply(&unknown, &header, &topic, "t-0"),
            Err(ValidationError::Invalid(_))
        ));
    }
}
