//! `__transaction_state` records in Kafka's layout (`TransactionLogKey` / `TransactionLogValue`),
//! so the log reads the same to Kafka's tools. Key: `i16 version = 0, string transactionalId`.
//! Value version 0 (a transactions v1 transaction): `i16 version = 0, i64 producerId, i16
//! producerEpoch, i32 timeoutMs, i8 state, [topic string, [i32 partition]] (null when Empty),
//! i64 lastUpdate, i64 start`. Version 1 (flexible: compact strings and arrays, tagged fields),
//! written for a transactions v2 transaction, adds tagged fields 0 PreviousProducerId, 1
//! NextProducerId and 2 ClientTransactionVersion (written only when not their defaults -1, -1,
//! 0), which a v2 end across an exhausted epoch needs after a failover. A null value is a
//! tombstone.

use super::{TopicPartition, TxnState};

/// One transactional id's persisted state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnRecord {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: Vec<TopicPartition>,
    pub last_update_ms: i64,
    pub start_ms: i64,
    /// Transactions v2 (ClientTransactionVersion 2; value version 1).
    pub v2: bool,
    pub previous_producer_id: i64,
    pub next_producer_id: i64,
}

impl TxnRecord {
    /// A transactions v1 record (value version 0: no v2 fields).
    pub fn v1(
        producer_id: i64,
        producer_epoch: i16,
        timeout_ms: i32,
        state: TxnState,
        partitions: Vec<TopicPartition>,
        last_update_ms: i64,
        start_ms: i64,
    ) -> TxnRecord {
        TxnRecord {
            producer_id,
            producer_epoch,
            timeout_ms,
            state,
            partitions,
            last_update_ms,
            start_ms,
            v2: false,
            previous_producer_id: -1,
            next_producer_id: -1,
        }
    }
}

pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&0i16.to_be_bytes());
    put_string(&mut out, transactional_id);
    out
}

pub fn decode_key(bytes: &[u8]) -> Result<String, String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if version != 0 {
        return Err(format!("transaction log key version {version}"));
    }
    r.string()
}

pub fn encode_value(v: &TxnRecord) -> Vec<u8> {
    let flexible = v.v2;
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&i16::from(flexible).to_be_bytes());
    out.extend_from_slice(&v.producer_id.to_be_bytes());
    out.extend_from_slice(&v.producer_epoch.to_be_bytes());
    out.extend_from_slice(&v.timeout_ms.to_be_bytes());
    out.push(v.state.id() as u8);
    // Grouped by topic, as Kafka writes them; null when Empty.
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in &v.partitions {
        match topics.last_mut() {
            Some((t, ps)) if *t == tp.topic => ps.push(tp.partition),
            _ => topics.push((&tp.topic, vec![tp.partition])),
        }
    }
    let null = v.state == TxnState::Empty;
    if flexible {
        put_uvarint(&mut out, if null { 0 } else { topics.len() as u32 + 1 });
    } else {
        let n = if null { -1 } else { topics.len() as i32 };
        out.extend_from_slice(&n.to_be_bytes());
    }
    if !null {
        for (topic, partitions) in topics {
            if flexible {
                put_uvarint(&mut out, topic.len() as u32 + 1);
                out.extend_from_slice(topic.as_bytes());
                put_uvarint(&mut out, partitions.len() as u32 + 1);
            } else {
                put_string(&mut out, topic);
                out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            }
            for p in partitions {
                out.extend_from_slice(&p.to_be_bytes());
            }
            if flexible {
                put_uvarint(&mut out, 0); // the topic's tagged fields
            }
        }
    }
    out.extend_from_slice(&v.last_update_ms.to_be_bytes());
    out.extend_from_slice(&v.start_ms.to_be_bytes());
    if flexible {
        let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
        if v.previous_producer_id != -1 {
            tagged.push((0, v.previous_producer_id.to_be_bytes().to_vec()));
        }
        if v.next_producer_id != -1 {
            tagged.push((1, v.next_producer_id.to_be_bytes().to_vec()));
        }
        tagged.push((2, 2i16.to_be_bytes().to_vec()));
        put_uvarint(&mut out, tagged.len() as u32);
        for (tag, data) in tagged {
            put_uvarint(&mut out, tag);
            put_uvarint(&mut out, data.len() as u32);
            out.extend_from_slice(&data);
        }
    }
    out
}

pub fn decode_value(bytes: &[u8]) -> Result<TxnRecord, String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(format!("transaction log value version {version}"));
    }
    let flexible = version == 1;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state_id = r.i8()?;
    let state =
        TxnState::from_id(state_id).ok_or_else(|| format!("transaction state {state_id}"))?;
    let topics = if flexible {
        r.uvarint()? as i64 - 1
    } else {
        i64::from(r.i32()?)
    };
    let mut partitions = Vec::new();
    for _ in 0..topics.max(0) {
        let topic = if flexible {
            r.compact_string()?
        } else {
            r.string()?
        };
        let n = if flexible {
            r.uvarint()? as i64 - 1
        } else {
            i64::from(r.i32()?)
        };
        for _ in 0..n.max(0) {
            partitions.push(TopicPartition {
                topic: topic.clone(),
                partition: r.i32()?,
            });
        }
        if flexible {
            r.skip_tagged()?;
        }
    }
    let mut record = TxnRecord::v1(
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        r.i64()?,
        r.i64()?,
    );
    if flexible {
        let n = r.uvarint()?;
        for _ in 0..n {
            let tag = r.uvarint()?;
            let size = r.uvarint()? as usize;
            let data = r.take(size)?;
            match (tag, size) {
                (0, 8) => {
                    record.previous_producer_id = i64::from_be_bytes(data.try_into().unwrap())
                }
                (1, 8) => record.next_producer_id = i64::from_be_bytes(data.try_into().unwrap()),
                (2, 2) => record.v2 = i16::from_be_bytes(data.try_into().unwrap()) >= 2,
                _ => {}
            }
        }
    }
    Ok(record)
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err("truncated transaction log record".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn uvarint(&mut self) -> Result<u32, String> {
        let mut v: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            v |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint too long in a transaction log record".into())
    }
    fn compact_string(&mut self) -> Result<String, String> {
        let len = self.uvarint()?;
        if len == 0 {
            return Err("null string in a transaction log record".into());
        }
        String::from_utf8(self.take(len as usize - 1)?.to_vec()).map_err(|e| e.to_string())
    }
    fn skip_tagged(&mut self) -> Result<(), String> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
    fn string(&mut self) -> Result<String, String> {
        let len = self.i16()?;
        if len < 0 {
            return Err("null string in a transaction log record".into());
        }
        String::from_utf8(self.take(len as usize)?.to_vec()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_kafkas_bytes() {
        let key = encode_key("tx");
        assert_eq!(key, [0, 0, 0, 2, b't', b'x']);
        assert_eq!(decode_key(&key).unwrap(), "tx");
        let record = TxnRecord {
            producer_id: 5,
            producer_epoch: 2,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: vec![
                TopicPartition::new("a", 0),
                TopicPartition::new("a", 1),
                TopicPartition::new("b", 0),
            ],
            last_update_ms: 10,
            start_ms: 9,
            v2: false,
            previous_producer_id: -1,
            next_producer_id: -1,
        };
        let bytes = encode_value(&record);
        assert_eq!(decode_value(&bytes).unwrap(), record);
        // version, pid, epoch, timeout, state 1, two topics.
        assert_eq!(
            &bytes[..17],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 2, 0, 0, 0xea, 0x60, 1]
        );
        assert_eq!(&bytes[17..21], &2i32.to_be_bytes());
        let empty = TxnRecord {
            state: TxnState::Empty,
            partitions: vec![],
            ..record
        };
        let bytes = encode_value(&empty);
        assert_eq!(
            &bytes[17..21],
            &(-1i32).to_be_bytes(),
            "null partitions when Empty"
        );
        assert_eq!(decode_value(&bytes).unwrap(), empty);
        assert!(decode_value(&bytes[..20]).is_err());
    }

    #[test]
    fn a_v2_transaction_is_written_as_value_version_1_with_its_tagged_fields() {
        let record = TxnRecord {
            producer_id: 5,
            producer_epoch: i16::MAX,
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: vec![TopicPartition::new("a", 0), TopicPartition::new("b", 3)],
            last_update_ms: 10,
            start_ms: 9,
            v2: true,
            previous_producer_id: 4,
            next_producer_id: 6,
        };
        let bytes = encode_value(&record);
        assert_eq!(&bytes[..2], &[0, 1], "value version 1");
        // Compact array of two topics, then "a" as a compact string.
        assert_eq!(&bytes[17..20], &[3, 2, b'a']);
        assert_eq!(decode_value(&bytes).unwrap(), record);
        let empty = TxnRecord {
            state: TxnState::Empty,
            partitions: vec![],
            previous_producer_id: -1,
            next_producer_id: -1,
            ..record
        };
        let bytes = encode_value(&empty);
        assert_eq!(bytes[17], 0, "null compact array when Empty");
        // Only ClientTransactionVersion is tagged: count 1, tag 2, size 2, value 2.
        assert_eq!(&bytes[bytes.len() - 5..], &[1, 2, 2, 0, 2]);
        assert_eq!(decode_value(&bytes).unwrap(), empty);
        assert!(decode_value(&bytes[..bytes.len() - 1]).is_err());
    }
}
