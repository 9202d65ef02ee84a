//! `__transaction_state` records in Kafka's layout (`TransactionLogKey` / `TransactionLogValue`,
//! value version 0), so the log reads the same to Kafka's tools. Key: `i16 version = 0,
//! string transactionalId`. Value: `i16 version = 0, i64 producerId, i16 producerEpoch, i32
//! timeoutMs, i8 state, [topic string, [i32 partition]] (null when Empty), i64 lastUpdate,
//! i64 start`. A null value is a tombstone. Version 1 (flexible, with tagged previous and
//! next producer ids) is not written; loading reads version 0 only.

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
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&v.producer_id.to_be_bytes());
    out.extend_from_slice(&v.producer_epoch.to_be_bytes());
    out.extend_from_slice(&v.timeout_ms.to_be_bytes());
    out.push(v.state.id() as u8);
    if v.state == TxnState::Empty {
        out.extend_from_slice(&(-1i32).to_be_bytes());
    } else {
        // Grouped by topic, as Kafka writes them.
        let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
        for tp in &v.partitions {
            match topics.last_mut() {
                Some((t, ps)) if *t == tp.topic => ps.push(tp.partition),
                _ => topics.push((&tp.topic, vec![tp.partition])),
            }
        }
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for (topic, partitions) in topics {
            put_string(&mut out, topic);
            out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for p in partitions {
                out.extend_from_slice(&p.to_be_bytes());
            }
        }
    }
    out.extend_from_slice(&v.last_update_ms.to_be_bytes());
    out.extend_from_slice(&v.start_ms.to_be_bytes());
    out
}

pub fn decode_value(bytes: &[u8]) -> Result<TxnRecord, String> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if version != 0 {
        return Err(format!("transaction log value version {version}"));
    }
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state_id = r.i8()?;
    let state =
        TxnState::from_id(state_id).ok_or_else(|| format!("transaction state {state_id}"))?;
    let topics = r.i32()?;
    let mut partitions = Vec::new();
    for _ in 0..topics.max(0) {
        let topic = r.string()?;
        let n = r.i32()?;
        for _ in 0..n.max(0) {
            partitions.push(TopicPartition {
                topic: topic.clone(),
                partition: r.i32()?,
            });
        }
    }
    Ok(TxnRecord {
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_ms: r.i64()?,
        start_ms: r.i64()?,
    })
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
}
