//! KIP-848 consumer-group records of `__consumer_offsets` in Kafka's layouts (key versions 3–8,
//! `group-coordinator/src/main/resources/common/message/ConsumerGroup*.json`): keys are the
//! classic non-flexible form (int16 version, then strings), values an int16 version 0 followed by
//! the flexible encoding (compact strings and arrays, a tagged-field section after every struct).
//! We write no tagged fields and skip any we read (Kafka's MetadataHash, ClassicMemberMetadata).

use std::collections::BTreeSet;

use uuid::Uuid;

use super::{put_str, DecodeError, Reader};
use crate::group::consumer::{Assignment, MemberState};

/// `ConsumerGroupMetadataKey`: the group epoch.
pub const GROUP_METADATA: i16 = 3;
/// `ConsumerGroupPartitionMetadataKey`: the subscribed topics as the last assignment saw them.
pub const PARTITION_METADATA: i16 = 4;
/// `ConsumerGroupMemberMetadataKey`: a member's subscription and client facts.
pub const MEMBER_METADATA: i16 = 5;
/// `ConsumerGroupTargetAssignmentMetadataKey`: the assignment epoch.
pub const TARGET_METADATA: i16 = 6;
/// `ConsumerGroupTargetAssignmentMemberKey`: one member's target partitions.
pub const TARGET_MEMBER: i16 = 7;
/// `ConsumerGroupCurrentMemberAssignmentKey`: a member's epoch and what it holds now.
pub const CURRENT_ASSIGNMENT: i16 = 8;

/// Sanity bounds while decoding (a corrupt length must not allocate the world).
const MAX_ITEMS: usize = 1_000_000;

/// Key of a group-level record (3, 4, 6).
pub fn group_record_key(version: i16, group: &str) -> Vec<u8> {
    assert!(matches!(
        version,
        GROUP_METADATA | PARTITION_METADATA | TARGET_METADATA
    ));
    let mut out = Vec::with_capacity(4 + group.len());
    out.extend_from_slice(&version.to_be_bytes());
    put_str(&mut out, group);
    out
}

/// Key of a per-member record (5, 7, 8).
pub fn member_record_key(version: i16, group: &str, member: &str) -> Vec<u8> {
    assert!(matches!(
        version,
        MEMBER_METADATA | TARGET_MEMBER | CURRENT_ASSIGNMENT
    ));
    let mut out = Vec::with_capacity(6 + group.len() + member.len());
    out.extend_from_slice(&version.to_be_bytes());
    put_str(&mut out, group);
    put_str(&mut out, member);
    out
}

/// `ConsumerGroupMemberMetadataValue` v0.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
}

/// `ConsumerGroupCurrentMemberAssignmentValue` v0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub revoking: Assignment,
}

/// One topic of `ConsumerGroupPartitionMetadataValue` (racks are not tracked: written empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMetadata {
    pub id: Uuid,
    pub name: String,
    pub partitions: i32,
}

// ---- flexible encoding ----

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_compact_str(out: &mut Vec<u8>, s: &str) {
    assert!(s.len() < u32::MAX as usize);
    put_uvarint(out, s.len() as u32 + 1);
    out.extend_from_slice(s.as_bytes());
}

fn put_compact_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_compact_str(out, s),
        None => put_uvarint(out, 0),
    }
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    assert!(n < u32::MAX as usize);
    put_uvarint(out, n as u32 + 1);
}

/// An empty tagged-field section.
fn no_tags(out: &mut Vec<u8>) {
    out.push(0);
}

fn value_header() -> Vec<u8> {
    0i16.to_be_bytes().to_vec()
}

/// `[]TopicPartitions` (TopicId, Partitions, tags), topics in id order.
fn put_assignment(out: &mut Vec<u8>, a: &Assignment) {
    let topics: Vec<_> = a.iter().filter(|(_, ps)| !ps.is_empty()).collect();
    put_len(out, topics.len());
    for (id, ps) in topics {
        out.extend_from_slice(id.as_bytes());
        put_len(out, ps.len());
        for p in ps {
            out.extend_from_slice(&p.to_be_bytes());
        }
        no_tags(out);
    }
}

pub fn group_metadata_value(epoch: i32) -> Vec<u8> {
    let mut out = value_header();
    out.extend_from_slice(&epoch.to_be_bytes());
    no_tags(&mut out);
    out
}

pub fn partition_metadata_value(epoch: i32, topics: &[TopicMetadata]) -> Vec<u8> {
    let mut out = value_header();
    out.extend_from_slice(&epoch.to_be_bytes());
    put_len(&mut out, topics.len());
    for t in topics {
        out.extend_from_slice(t.id.as_bytes());
        put_compact_str(&mut out, &t.name);
        out.extend_from_slice(&t.partitions.to_be_bytes());
        put_len(&mut out, 0); // PartitionRacks
        no_tags(&mut out);
    }
    no_tags(&mut out);
    out
}

pub fn member_metadata_value(m: &MemberMetadata) -> Vec<u8> {
    let mut out = value_header();
    put_compact_nullable_str(&mut out, m.instance_id.as_deref());
    put_compact_nullable_str(&mut out, m.rack_id.as_deref());
    put_compact_str(&mut out, &m.client_id);
    put_compact_str(&mut out, &m.client_host);
    put_len(&mut out, m.subscribed_topic_names.len());
    for t in &m.subscribed_topic_names {
        put_compact_str(&mut out, t);
    }
    put_compact_nullable_str(&mut out, m.subscribed_topic_regex.as_deref());
    out.extend_from_slice(&m.rebalance_timeout_ms.to_be_bytes());
    put_compact_nullable_str(&mut out, m.server_assignor.as_deref());
    no_tags(&mut out);
    out
}

pub fn target_metadata_value(assignment_epoch: i32) -> Vec<u8> {
    group_metadata_value(assignment_epoch)
}

pub fn target_member_value(a: &Assignment) -> Vec<u8> {
    let mut out = value_header();
    put_assignment(&mut out, a);
    no_tags(&mut out);
    out
}

/// Kafka's `MemberState` bytes.
fn state_byte(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

pub fn current_assignment_value(c: &CurrentAssignment) -> Vec<u8> {
    let mut out = value_header();
    out.extend_from_slice(&c.member_epoch.to_be_bytes());
    out.extend_from_slice(&c.previous_member_epoch.to_be_bytes());
    out.push(state_byte(c.state) as u8);
    put_assignment(&mut out, &c.assigned);
    put_assignment(&mut out, &c.revoking);
    no_tags(&mut out);
    out
}

// ---- flexible decoding ----

impl Reader<'_> {
    fn uvarint(&mut self) -> Result<u32, DecodeError> {
        let mut v: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u32) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError("varint too long"))
    }

    /// A compact length: `None` for null.
    fn compact_len(&mut self) -> Result<Option<usize>, DecodeError> {
        match self.uvarint()? {
            0 => Ok(None),
            n => Ok(Some(n as usize - 1)),
        }
    }

    fn compact_items(&mut self) -> Result<usize, DecodeError> {
        let n = self.compact_len()?.ok_or(DecodeError("null array"))?;
        if n > MAX_ITEMS || n > self.buf.len() {
            return Err(DecodeError("array length out of range"));
        }
        Ok(n)
    }

    fn compact_nullable_str(&mut self) -> Result<Option<String>, DecodeError> {
        let Some(n) = self.compact_len()? else {
            return Ok(None);
        };
        let raw = self.take(n)?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| DecodeError("string is not UTF-8"))
    }

    fn compact_str(&mut self) -> Result<String, DecodeError> {
        self.compact_nullable_str()?
            .ok_or(DecodeError("null string"))
    }

    fn uuid(&mut self) -> Result<Uuid, DecodeError> {
        Ok(Uuid::from_bytes(self.take(16)?.try_into().unwrap()))
    }

    /// Skips a tagged-field section (fields we do not use).
    fn skip_tags(&mut self) -> Result<(), DecodeError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }

    fn value_version(&mut self) -> Result<(), DecodeError> {
        if self.i16()? != 0 {
            return Err(DecodeError("unsupported consumer group value version"));
        }
        Ok(())
    }

    fn assignment(&mut self) -> Result<Assignment, DecodeError> {
        let mut a = Assignment::new();
        for _ in 0..self.compact_items()? {
            let id = self.uuid()?;
            let mut ps = BTreeSet::new();
            for _ in 0..self.compact_items()? {
                ps.insert(self.i32()?);
            }
            self.skip_tags()?;
            if !ps.is_empty() {
                a.entry(id).or_default().extend(ps);
            }
        }
        Ok(a)
    }
}

/// The epoch of a `ConsumerGroupMetadataValue` or `ConsumerGroupTargetAssignmentMetadataValue`.
pub fn decode_epoch_value(raw: &[u8]) -> Result<i32, DecodeError> {
    let mut r = Reader { buf: raw };
    r.value_version()?;
    let epoch = r.i32()?;
    r.skip_tags()?;
    Ok(epoch)
}

pub fn decode_partition_metadata_value(
    raw: &[u8],
) -> Result<(i32, Vec<TopicMetadata>), DecodeError> {
    let mut r = Reader { buf: raw };
    r.value_version()?;
    let epoch = r.i32()?;
    let mut topics = Vec::new();
    for _ in 0..r.compact_items()? {
        let id = r.uuid()?;
        let name = r.compact_str()?;
        let partitions = r.i32()?;
        for _ in 0..r.compact_items()? {
            let _partition = r.i32()?;
            for _ in 0..r.compact_items()? {
                r.compact_str()?;
            }
            r.skip_tags()?;
        }
        r.skip_tags()?;
        topics.push(TopicMetadata {
            id,
            name,
            partitions,
        });
    }
    r.skip_tags()?;
    Ok((epoch, topics))
}

pub fn decode_member_metadata_value(raw: &[u8]) -> Result<MemberMetadata, DecodeError> {
    let mut r = Reader { buf: raw };
    r.value_version()?;
    let instance_id = r.compact_nullable_str()?;
    let rack_id = r.compact_nullable_str()?;
    let client_id = r.compact_str()?;
    let client_host = r.compact_str()?;
    let mut subscribed_topic_names = Vec::new();
    for _ in 0..r.compact_items()? {
        subscribed_topic_names.push(r.compact_str()?);
    }
    let subscribed_topic_regex = r.compact_nullable_str()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.compact_nullable_str()?;
    r.skip_tags()?;
    Ok(MemberMetadata {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
    })
}

pub fn decode_target_member_value(raw: &[u8]) -> Result<Assignment, DecodeError> {
    let mut r = Reader { buf: raw };
    r.value_version()?;
    let a = r.assignment()?;
    r.skip_tags()?;
    Ok(a)
}

pub fn decode_current_assignment_value(raw: &[u8]) -> Result<CurrentAssignment, DecodeError> {
    let mut r = Reader { buf: raw };
    r.value_version()?;
    let member_epoch = r.i32()?;
    let previous_member_epoch = r.i32()?;
    let state = match r.take(1)?[0] {
        0 => MemberState::Stable,
        1 => MemberState::UnrevokedPartitions,
        2 => MemberState::UnreleasedPartitions,
        _ => return Err(DecodeError("unknown member state")),
    };
    let assigned = r.assignment()?;
    let revoking = r.assignment()?;
    r.skip_tags()?;
    Ok(CurrentAssignment {
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        revoking,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::records::{decode_key, RecordKey};

    fn parts(t: u128, ps: &[i32]) -> Assignment {
        let mut a = Assignment::new();
        a.insert(Uuid::from_u128(t), ps.iter().copied().collect());
        a
    }

    #[test]
    fn keys_are_kafkas_and_decode_to_their_group_and_member() {
        assert_eq!(group_record_key(GROUP_METADATA, "g"), [0, 3, 0, 1, b'g']);
        let key = member_record_key(CURRENT_ASSIGNMENT, "g", "m");
        assert_eq!(key, [0, 8, 0, 1, b'g', 0, 1, b'm']);
        assert_eq!(
            decode_key(&key).unwrap(),
            RecordKey::ConsumerRecord {
                version: CURRENT_ASSIGNMENT,
                group: "g".into(),
                member: Some("m".into())
            }
        );
        assert_eq!(
            decode_key(&group_record_key(TARGET_METADATA, "g")).unwrap(),
            RecordKey::ConsumerRecord {
                version: TARGET_METADATA,
                group: "g".into(),
                member: None
            }
        );
    }

    #[test]
    fn values_match_kafkas_flexible_layout_and_round_trip() {
        // Epoch 7, no tags: exactly what Kafka's ConsumerGroupMetadataValue v0 writes.
        assert_eq!(group_metadata_value(7), [0, 0, 0, 0, 0, 7, 0]);
        // Kafka 4.1 adds MetadataHash as tag 0 (8 bytes): skipped.
        let tagged = [0, 0, 0, 0, 0, 7, 1, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(decode_epoch_value(&tagged).unwrap(), 7);
        let m = MemberMetadata {
            instance_id: None,
            rack_id: Some("r1".into()),
            client_id: "rdkafka".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: vec!["a".into(), "b".into()],
            subscribed_topic_regex: None,
            rebalance_timeout_ms: 300_000,
            server_assignor: Some("uniform".into()),
        };
        let raw = member_metadata_value(&m);
        // version, null instance (0), "r1" as length 2+1.
        assert_eq!(&raw[..6], &[0, 0, 0, 3, b'r', b'1']);
        assert_eq!(decode_member_metadata_value(&raw).unwrap(), m);
        let c = CurrentAssignment {
            member_epoch: 5,
            previous_member_epoch: 4,
            state: MemberState::UnrevokedPartitions,
            assigned: parts(1, &[0, 2]),
            revoking: parts(2, &[1]),
        };
        let raw = current_assignment_value(&c);
        assert_eq!(raw[10], 1, "Kafka's UNREVOKED_PARTITIONS byte");
        assert_eq!(decode_current_assignment_value(&raw).unwrap(), c);
        let a = parts(3, &[4, 5]);
        assert_eq!(
            decode_target_member_value(&target_member_value(&a)).unwrap(),
            a
        );
        let topics = vec![TopicMetadata {
            id: Uuid::from_u128(9),
            name: "t".into(),
            partitions: 3,
        }];
        let raw = partition_metadata_value(2, &topics);
        assert_eq!(decode_partition_metadata_value(&raw).unwrap(), (2, topics));
        for bad in [&raw[..raw.len() - 1], &[0, 1, 0, 0, 0, 1, 0][..]] {
            assert!(decode_partition_metadata_value(bad).is_err());
        }
        // A huge array length is refused, not allocated.
        assert!(decode_target_member_value(&[0, 0, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }
}
