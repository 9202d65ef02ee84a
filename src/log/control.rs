//! Transaction markers: the control batches (KIP-98) a partition leader writes when a
//! transaction ends, in Kafka's layout. A marker batch is transactional and control (attribute
//! bits 0x10 and 0x20), uncompressed, base sequence -1, and holds one record: key
//! `i16 version = 0, i16 type` (0 ABORT, 1 COMMIT), value `i16 version = 0, i32
//! coordinatorEpoch`. Clients never receive control records as messages but count their
//! offsets, so the layout must be exactly this one (librdkafka and kafkajs parse it).

use super::batch::{self, BatchBuilder, BatchError, BatchHeader};

/// Control record types Kafka defines for transactions (2.. are KRaft's own).
const TYPE_ABORT: i16 = 0;
const TYPE_COMMIT: i16 = 1;
const ATTR_TRANSACTIONAL_CONTROL: i16 = 0x30;

/// What a transaction marker says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub commit: bool,
    /// The epoch of the transaction coordinator that wrote it (its `__transaction_state`
    /// partition's leader epoch): a marker from an older coordinator is refused.
    pub coordinator_epoch: i32,
}

/// The marker batch for producer (`producer_id`, `producer_epoch`), stamped `timestamp`, at
/// base offset 0 (the log assigns the real one).
pub fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: Marker,
    timestamp: i64,
) -> Vec<u8> {
    let kind = if marker.commit {
        TYPE_COMMIT
    } else {
        TYPE_ABORT
    };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut builder = BatchBuilder::new(timestamp);
    builder.push(Some(&key), Some(&value), timestamp);
    let mut out = builder.finish(producer_id, producer_epoch, -1);
    out[21..23].copy_from_slice(&ATTR_TRANSACTIONAL_CONTROL.to_be_bytes());
    let crc = batch::compute_crc(&out);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The marker a checked control batch holds; `Ok(None)` for a control batch of another type
/// (KRaft's leader-change and snapshot records), which says nothing about transactions.
pub fn parse_marker(bytes: &[u8], header: &BatchHeader) -> Result<Option<Marker>, BatchError> {
    if !header.is_control() {
        return Err(BatchError::Malformed("not a control batch"));
    }
    let records = batch::records(bytes, header)
        .ok_or(BatchError::Malformed("a compressed control batch"))??;
    let [record] = records.as_slice() else {
        return Err(BatchError::Malformed("a control batch holds one record"));
    };
    let key = record
        .key
        .ok_or(BatchError::Malformed("control record key"))?;
    if key.len() < 4 {
        return Err(BatchError::Malformed("control record key"));
    }
    let kind = i16::from_be_bytes([key[2], key[3]]);
    let commit = match kind {
        TYPE_ABORT => false,
        TYPE_COMMIT => true,
        _ => return Ok(None),
    };
    let value = record
        .value
        .filter(|v| v.len() >= 6)
        .ok_or(BatchError::Malformed("transaction marker value"))?;
    let coordinator_epoch = i32::from_be_bytes(value[2..6].try_into().expect("four bytes"));
    Ok(Some(Marker {
        commit,
        coordinator_epoch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_batch_has_kafkas_shape_and_parses_back() {
        for commit in [true, false] {
            let marker = Marker {
                commit,
                coordinator_epoch: 7,
            };
            let bytes = marker_batch(42, 3, marker, 1_000);
            let header = batch::check(&bytes).expect("a valid batch");
            assert!(header.is_control() && header.is_transactional());
            assert_eq!(header.compression(), 0);
            assert_eq!((header.producer_id, header.producer_epoch), (42, 3));
            assert_eq!((header.base_sequence, header.record_count), (-1, 1));
            assert_eq!(header.last_offset_delta, 0);
            assert_eq!(parse_marker(&bytes, &header), Ok(Some(marker)));
            // Key: version 0, type; value: version 0, coordinator epoch (6 bytes).
            let records = batch::records(&bytes, &header).unwrap().unwrap();
            assert_eq!(records[0].key, Some(&[0, 0, 0, commit as u8][..]));
            assert_eq!(records[0].value, Some(&[0, 0, 0, 0, 0, 7][..]));
        }
    }

    #[test]
    fn other_control_types_are_not_markers_and_data_is_refused() {
        let mut builder = BatchBuilder::new(0);
        builder.push(Some(&[0, 0, 0, 2]), Some(&[0, 0, 0, 0, 0, 0]), 0);
        let mut bytes = builder.finish(-1, -1, -1);
        bytes[21..23].copy_from_slice(&0x20i16.to_be_bytes());
        let crc = batch::compute_crc(&bytes);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        let header = batch::check(&bytes).unwrap();
        assert_eq!(parse_marker(&bytes, &header), Ok(None));
        let mut builder = BatchBuilder::new(0);
        builder.push(None, Some(b"v"), 0);
        let data = builder.finish(1, 0, 0);
        let header = batch::check(&data).unwrap();
        assert!(parse_marker(&data, &header).is_err());
    }
}
