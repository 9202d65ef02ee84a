//! Raft batches as the v2 record batches stored in `__cluster_metadata-0` and carried by
//! Fetch: a batch's `partitionLeaderEpoch` is its raft epoch, its offsets are its entries.
//! `Payload::Data` is the whole v2 batch of JSON records (as the controller built it);
//! `Payload::LeaderChange` is a control batch holding one record whose key is Kafka's control
//! key (version 0, type 2 = LEADER_CHANGE) and whose value is a `LeaderChangeMessage` v0.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::leader_change_message::{LeaderChangeMessage, Voter};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::log::batch::{self, BatchBuilder, BatchHeader};
use crate::raft::{Batch, Payload};

/// Kafka's control record type of a LeaderChange record.
const LEADER_CHANGE_TYPE: i16 = 2;
/// The attribute bit that marks a control batch.
const ATTR_CONTROL: i16 = 0x20;

/// A data batch of `values` (one JSON record each), base offset 0 and no epoch yet: the log
/// adapter sets both when it appends.
pub fn data_batch(values: &[&[u8]], now_ms: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(now_ms);
    for value in values {
        builder.push(None, Some(value), now_ms);
    }
    builder.finish(-1, -1, -1)
}

/// The v2 bytes of one raft batch, with its base offset and epoch.
pub fn encode(b: &Batch, now_ms: i64) -> Vec<u8> {
    let mut bytes = match &b.payload {
        Payload::Data(data) => data.to_vec(),
        Payload::LeaderChange { leader, voters } => leader_change_batch(*leader, voters, now_ms),
    };
    batch::set_base_offset(&mut bytes, b.base_offset as i64);
    // Neither field is under the CRC.
    batch::set_partition_leader_epoch(&mut bytes, i32::try_from(b.epoch).unwrap_or(i32::MAX));
    bytes
}

fn leader_change_batch(leader: i32, voters: &[i32], now_ms: i64) -> Vec<u8> {
    let message = LeaderChangeMessage::default()
        .with_version(0)
        .with_leader_id(BrokerId(leader))
        .with_voters(
            voters
                .iter()
                .map(|v| Voter::default().with_voter_id(*v))
                .collect(),
        );
    let mut value = BytesMut::new();
    message
        .encode(&mut value, 0)
        .expect("LeaderChangeMessage v0 encodes");
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&LEADER_CHANGE_TYPE.to_be_bytes());
    let mut builder = BatchBuilder::new(now_ms);
    builder.push(Some(&key), Some(&value), now_ms);
    let mut bytes = builder.finish(-1, -1, -1);
    let attributes = i16::from_be_bytes([bytes[21], bytes[22]]) | ATTR_CONTROL;
    bytes[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = batch::compute_crc(&bytes);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// Parses back-to-back v2 batches (CRC checked) into raft batches. A data batch's payload is a
/// copy of its bytes; a control batch must be one LeaderChange record.
pub fn parse(bytes: &[u8]) -> Result<Vec<Batch>, String> {
    let mut out = Vec::new();
    for item in batch::iter(bytes) {
        let (at, header) = item.map_err(|e| format!("{e:?}"))?;
        let raw = &bytes[at..at + header.total_len()];
        out.push(one(raw, &header)?);
    }
    Ok(out)
}

/// One checked v2 batch as a raft batch.
pub fn one(raw: &[u8], header: &BatchHeader) -> Result<Batch, String> {
    let base_offset = u64::try_from(header.base_offset)
        .map_err(|_| format!("negative base offset {}", header.base_offset))?;
    let epoch = u32::try_from(header.partition_leader_epoch)
        .map_err(|_| format!("batch without an epoch at offset {base_offset}"))?;
    let count = u32::try_from(header.last_offset_delta + 1).map_err(|_| "bad offset delta")?;
    let payload = if header.is_control() {
        let records = batch::records(raw, header)
            .ok_or("a compressed control batch")?
            .map_err(|e| format!("{e:?}"))?;
        let [record] = records.as_slice() else {
            return Err(format!(
                "a control batch of {} records at offset {base_offset}",
                records.len()
            ));
        };
        let key = record.key.unwrap_or_default();
        if key.len() < 4 || i16::from_be_bytes([key[2], key[3]]) != LEADER_CHANGE_TYPE {
            return Err(format!(
                "a control record other than LeaderChange at offset {base_offset}"
            ));
        }
        let mut value = Bytes::copy_from_slice(record.value.unwrap_or_default());
        let message = std::panic::catch_unwind(move || LeaderChangeMessage::decode(&mut value, 0))
            .map_err(|_| "LeaderChangeMessage decoder panicked".to_string())?
            .map_err(|e| format!("LeaderChangeMessage: {e}"))?;
        Payload::LeaderChange {
            leader: message.leader_id.0,
            voters: message.voters.iter().map(|v| v.voter_id).collect(),
        }
    } else {
        Payload::Data(Bytes::copy_from_slice(raw))
    };
    Ok(Batch {
        base_offset,
        epoch,
        count,
        payload,
    })
}

/// The JSON values of a data batch's records, with their offsets.
pub fn values(raw: &[u8]) -> Result<Vec<(u64, Bytes)>, String> {
    let header = batch::check(raw).map_err(|e| format!("{e:?}"))?;
    if header.is_control() {
        return Ok(Vec::new());
    }
    let records = batch::records(raw, &header)
        .ok_or("a compressed metadata batch")?
        .map_err(|e| format!("{e:?}"))?;
    Ok(records
        .iter()
        .map(|r| {
            (
                r.offset as u64,
                Bytes::copy_from_slice(r.value.unwrap_or_default()),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_and_leader_change_batches_round_trip() {
        let data = data_batch(&[b"1".as_slice(), b"22".as_slice(), b"333".as_slice()], 5);
        let b = Batch {
            base_offset: 40,
            epoch: 6,
            count: 3,
            payload: Payload::Data(data.into()),
        };
        let raw = encode(&b, 5);
        let back = parse(&raw).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(
            (back[0].base_offset, back[0].epoch, back[0].count),
            (40, 6, 3)
        );
        let got = values(&raw).unwrap();
        let offsets: Vec<u64> = got.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, [40, 41, 42]);
        assert_eq!(&got[2].1[..], b"333");
        let lc = Batch {
            base_offset: 43,
            epoch: 7,
            count: 1,
            payload: Payload::LeaderChange {
                leader: 2,
                voters: vec![1, 2, 3],
            },
        };
        let raw = encode(&lc, 9);
        assert_eq!(parse(&raw).unwrap(), vec![lc]);
        assert!(values(&raw).unwrap().is_empty());
    }

    #[test]
    fn damaged_bytes_are_refused() {
        let b = Batch {
            base_offset: 0,
            epoch: 1,
            count: 1,
            payload: Payload::LeaderChange {
                leader: 1,
                voters: vec![1],
            },
        };
        let mut raw = encode(&b, 0);
        let last = raw.len() - 1;
        raw[last] ^= 0xff;
        assert!(parse(&raw).is_err());
        let mut raw = encode(&b, 0);
        batch::set_partition_leader_epoch(&mut raw, -1);
        assert!(parse(&raw).is_err());
    }
}
