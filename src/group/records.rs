//! The records of `__consumer_offsets` in Kafka's own layouts (`OffsetCommitKey`/`Value`,
//! `GroupMetadataKey`/`Value`): big-endian, version-prefixed, so a reader of Kafka's format
//! (`kafka-console-consumer --formatter ...OffsetsMessageFormatter`) decodes them and we can
//! replay a log written by either. The key's version is the record type. A null value is a
//! tombstone. We write one version per type (offset key 1, value 3 or 1; group key 2, value 3)
//! so that compaction, when it comes, deduplicates keys byte for byte. The KIP-848 records
//! (key versions 3–8) are in [`consumer`].

use bytes::Bytes;

pub mod consumer;

/// Key version of an offset commit (0 and 1 are both offset keys; we write 1).
const OFFSET_KEY_V1: i16 = 1;
/// Key version of a group's metadata.
const GROUP_KEY_V2: i16 = 2;
/// Sanity bound on the members one group record may hold when decoding.
const MAX_DECODED_MEMBERS: usize = 100_000;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
    /// A KIP-848 consumer-group record (key versions 3–8, [`consumer`]); `member` for the
    /// per-member ones (5, 7, 8).
    ConsumerRecord {
        version: i16,
        group: String,
        member: Option<String>,
    },
    /// A record type this coordinator does not use (KIP-848, share groups): skipped on load.
    Other(i16),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// -1 when unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// Only from OffsetCommit v2–v4 with an explicit retention: when the offset expires.
    pub expire_timestamp: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed __consumer_offsets record: {}", self.0)
    }
}

// ---- encoding ----

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Kafka strings are at most i16::MAX bytes; longer ones are refused before they get here.
    assert!(
        s.len() <= i16::MAX as usize,
        "string too long for the record format"
    );
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    assert!(b.len() <= i32::MAX as usize);
    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
    out.extend_from_slice(b);
}

pub fn offset_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + group.len() + topic.len());
    out.extend_from_slice(&OFFSET_KEY_V1.to_be_bytes());
    put_str(&mut out, group);
    put_str(&mut out, topic);
    out.extend_from_slice(&partition.to_be_bytes());
    out
}

pub fn group_key(group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + group.len());
    out.extend_from_slice(&GROUP_KEY_V2.to_be_bytes());
    put_str(&mut out, group);
    out
}

/// Version 1 when an explicit expire time exists (the only version that carries it), else 3.
pub fn offset_value(v: &OffsetValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + v.metadata.len());
    match v.expire_timestamp {
        Some(expire) => {
            out.extend_from_slice(&1i16.to_be_bytes());
            out.extend_from_slice(&v.offset.to_be_bytes());
            put_str(&mut out, &v.metadata);
            out.extend_from_slice(&v.commit_timestamp.to_be_bytes());
            out.extend_from_slice(&expire.to_be_bytes());
        }
        None => {
            out.extend_from_slice(&3i16.to_be_bytes());
            out.extend_from_slice(&v.offset.to_be_bytes());
            out.extend_from_slice(&v.leader_epoch.to_be_bytes());
            put_str(&mut out, &v.metadata);
            out.extend_from_slice(&v.commit_timestamp.to_be_bytes());
        }
    }
    out
}

/// Version 3 (static membership, no tagged fields).
pub fn group_value(v: &GroupValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&3i16.to_be_bytes());
    put_str(&mut out, &v.protocol_type);
    out.extend_from_slice(&v.generation.to_be_bytes());
    put_nullable_str(&mut out, v.protocol.as_deref());
    put_nullable_str(&mut out, v.leader.as_deref());
    out.extend_from_slice(&v.current_state_timestamp.to_be_bytes());
    out.extend_from_slice(&(v.members.len() as i32).to_be_bytes());
    for m in &v.members {
        put_str(&mut out, &m.member_id);
        put_nullable_str(&mut out, m.instance_id.as_deref());
        put_str(&mut out, &m.client_id);
        put_str(&mut out, &m.client_host);
        out.extend_from_slice(&m.rebalance_timeout_ms.to_be_bytes());
        out.extend_from_slice(&m.session_timeout_ms.to_be_bytes());
        put_bytes(&mut out, &m.subscription);
        put_bytes(&mut out, &m.assignment);
    }
    out
}

// ---- decoding ----

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError("truncated"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn nullable_str(&mut self) -> Result<Option<String>, DecodeError> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let raw = self.take(len as usize)?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| DecodeError("string is not UTF-8"))
    }
    fn str(&mut self) -> Result<String, DecodeError> {
        self.nullable_str()?.ok_or(DecodeError("null string"))
    }
    fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Bytes::new());
        }
        Ok(Bytes::copy_from_slice(self.take(len as usize)?))
    }
}

pub fn decode_key(raw: &[u8]) -> Result<RecordKey, DecodeError> {
    let mut r = Reader { buf: raw };
    match r.i16()? {
        0 | 1 => Ok(RecordKey::Offset {
            group: r.str()?,
            topic: r.str()?,
            partition: r.i32()?,
        }),
        2 => Ok(RecordKey::Group { group: r.str()? }),
        v @ (consumer::GROUP_METADATA
        | consumer::PARTITION_METADATA
        | consumer::TARGET_METADATA) => Ok(RecordKey::ConsumerRecord {
            version: v,
            group: r.str()?,
            member: None,
        }),
        v
        @ (consumer::MEMBER_METADATA | consumer::TARGET_MEMBER | consumer::CURRENT_ASSIGNMENT) => {
            Ok(RecordKey::ConsumerRecord {
                version: v,
                group: r.str()?,
                member: Some(r.str()?),
            })
        }
        other => Ok(RecordKey::Other(other)),
    }
}

pub fn decode_offset_value(raw: &[u8]) -> Result<OffsetValue, DecodeError> {
    let mut r = Reader { buf: raw };
    let version = r.i16()?;
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.str()?;
    let commit_timestamp = r.i64()?;
    let expire_timestamp = match version {
        1 => Some(r.i64()?),
        0 | 2 | 3 => None,
        _ => return Err(DecodeError("unsupported offset value version")),
    };
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
        expire_timestamp,
    })
}

pub fn decode_group_value(raw: &[u8]) -> Result<GroupValue, DecodeError> {
    let mut r = Reader { buf: raw };
    let version = r.i16()?;
    if !(0..=3).contains(&version) {
        return Err(DecodeError("unsupported group value version"));
    }
    let protocol_type = r.str()?;
    let generation = r.i32()?;
    let protocol = r.nullable_str()?;
    let leader = r.nullable_str()?;
    let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let count = r.i32()?;
    if count < 0 || count as usize > MAX_DECODED_MEMBERS {
        return Err(DecodeError("member count out of range"));
    }
    let mut members = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let member_id = r.str()?;
        let instance_id = if version >= 3 {
            r.nullable_str()?
        } else {
            None
        };
        let client_id = r.str()?;
        let client_host = r.str()?;
        let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
        let session_timeout_ms = r.i32()?;
        let rebalance_timeout_ms = if rebalance_timeout_ms < 0 {
            session_timeout_ms
        } else {
            rebalance_timeout_ms
        };
        members.push(MemberValue {
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription: r.bytes()?,
            assignment: r.bytes()?,
        });
    }
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

/// The topics a `consumer`-protocol subscription names: only the v0 prefix (version, topics) is
/// read, as Kafka does; `None` if it does not parse (then treat the member as subscribed to
/// everything).
pub fn subscribed_topics(subscription: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader { buf: subscription };
    let _version = r.i16().ok()?;
    let count = r.i32().ok()?;
    if count < 0 || count as usize > MAX_DECODED_MEMBERS {
        return None;
    }
    (0..count).map(|_| r.str().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_key_layout_is_kafkas() {
        let key = offset_key("g", "t", 7);
        assert_eq!(key, [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]);
        assert_eq!(
            decode_key(&key).unwrap(),
            RecordKey::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 7
            }
        );
        assert_eq!(group_key("g"), [0, 2, 0, 1, b'g']);
        assert_eq!(decode_key(&[0, 9, 1, 2]).unwrap(), RecordKey::Other(9));
        assert!(decode_key(&[0, 1, 0, 9, b'x']).is_err());
    }

    #[test]
    fn offset_values_round_trip_in_both_written_versions() {
        let mut v = OffsetValue {
            offset: 42,
            leader_epoch: 3,
            metadata: "meta".into(),
            commit_timestamp: 1_000,
            expire_timestamp: None,
        };
        let raw = offset_value(&v);
        assert_eq!(&raw[..2], &[0, 3]);
        assert_eq!(decode_offset_value(&raw).unwrap(), v);
        v.expire_timestamp = Some(2_000);
        v.leader_epoch = -1;
        let raw = offset_value(&v);
        assert_eq!(&raw[..2], &[0, 1]);
        assert_eq!(decode_offset_value(&raw).unwrap(), v);
        assert!(decode_offset_value(&raw[..raw.len() - 1]).is_err());
    }

    #[test]
    fn group_value_round_trips() {
        let v = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp: 77,
            members: vec![MemberValue {
                member_id: "m-1".into(),
                instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(decode_group_value(&group_value(&v)).unwrap(), v);
        let empty = GroupValue {
            protocol: None,
            leader: None,
            members: vec![],
            ..v
        };
        assert_eq!(decode_group_value(&group_value(&empty)).unwrap(), empty);
    }

    #[test]
    fn subscription_prefix() {
        // version 0, topics ["a", "bc"], then user data we never read.
        let raw = [0, 0, 0, 0, 0, 2, 0, 1, b'a', 0, 2, b'b', b'c', 0xff, 0xff];
        assert_eq!(subscribed_topics(&raw), Some(vec!["a".into(), "bc".into()]));
        assert_eq!(subscribed_topics(&[0, 0, 0]), None);
    }
}
