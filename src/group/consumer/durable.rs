//! A consumer group as records of `__consumer_offsets` (Kafka's key versions 3–8): what a change
//! must append, and the group rebuilt from a replay. After failover or a restart the group comes
//! back with the same group epoch, assignment epoch, targets and member epochs, so a member that
//! heartbeats at its epoch is kept, not fenced; sessions (not persisted, as in Kafka) restart at
//! the load.
//!
//! Changes are found by diffing the records the group would write now against those last
//! written, so every path that mutates the group (heartbeat, leave, timeouts, static
//! replacement) persists the same way; a key that disappears becomes a tombstone.

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::Assignor;
use super::group::{ConsumerGroup, Member};
use super::reconcile::Reconciled;
use super::regex::TopicRegex;
use super::types::*;
use crate::group::records::consumer::{self as rec, CurrentAssignment, MemberMetadata};
use crate::group::records::DecodeError;
use crate::group::OffsetRecord;

/// One group's consumer records found by a replay, last write per key (tombstones applied).
#[derive(Clone, Debug, Default)]
pub struct Replay {
    /// The raw records, as they were in the log: the restored group's `written`.
    raw: BTreeMap<Vec<u8>, Vec<u8>>,
    epoch: Option<i32>,
    topics: Vec<rec::TopicMetadata>,
    assignment_epoch: Option<i32>,
    members: BTreeMap<String, MemberMetadata>,
    targets: BTreeMap<String, Assignment>,
    current: BTreeMap<String, CurrentAssignment>,
}

impl Replay {
    /// One record in log order. A value that does not decode is refused and changes nothing.
    pub fn record(
        &mut self,
        version: i16,
        member: Option<&str>,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), DecodeError> {
        let member = member.map(str::to_string);
        let by_member = || {
            member
                .clone()
                .ok_or(DecodeError("member record without member"))
        };
        match value {
            None => {
                match version {
                    rec::GROUP_METADATA => self.epoch = None,
                    rec::PARTITION_METADATA => self.topics.clear(),
                    rec::TARGET_METADATA => self.assignment_epoch = None,
                    rec::MEMBER_METADATA => {
                        self.members.remove(&by_member()?);
                    }
                    rec::TARGET_MEMBER => {
                        self.targets.remove(&by_member()?);
                    }
                    rec::CURRENT_ASSIGNMENT => {
                        self.current.remove(&by_member()?);
                    }
                    _ => return Err(DecodeError("not a consumer group record")),
                }
                self.raw.remove(key);
            }
            Some(v) => {
                match version {
                    rec::GROUP_METADATA => self.epoch = Some(rec::decode_epoch_value(v)?),
                    rec::PARTITION_METADATA => {
                        self.topics = rec::decode_partition_metadata_value(v)?.1;
                    }
                    rec::TARGET_METADATA => {
                        self.assignment_epoch = Some(rec::decode_epoch_value(v)?);
                    }
                    rec::MEMBER_METADATA => {
                        let m = rec::decode_member_metadata_value(v)?;
                        self.members.insert(by_member()?, m);
                    }
                    rec::TARGET_MEMBER => {
                        let a = rec::decode_target_member_value(v)?;
                        self.targets.insert(by_member()?, a);
                    }
                    rec::CURRENT_ASSIGNMENT => {
                        let c = rec::decode_current_assignment_value(v)?;
                        self.current.insert(by_member()?, c);
                    }
                    _ => return Err(DecodeError("not a consumer group record")),
                }
                self.raw.insert(key.to_vec(), v.to_vec());
            }
        }
        Ok(())
    }

    /// Nothing of the group is left (it was deleted or converted): no consumer group to restore.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
}

impl ConsumerGroup {
    /// The group-level records: epoch, subscribed topics metadata, assignment epoch.
    fn group_records(&self) -> [(Vec<u8>, Vec<u8>); 3] {
        let topics: Vec<rec::TopicMetadata> = self
            .subscribed_topics
            .iter()
            .map(|(name, t)| rec::TopicMetadata {
                id: t.id,
                name: name.clone(),
                partitions: t.partitions,
            })
            .collect();
        [
            (
                rec::group_record_key(rec::GROUP_METADATA, &self.id),
                rec::group_metadata_value(self.group_epoch),
            ),
            (
                rec::group_record_key(rec::PARTITION_METADATA, &self.id),
                rec::partition_metadata_value(self.group_epoch, &topics),
            ),
            (
                rec::group_record_key(rec::TARGET_METADATA, &self.id),
                rec::target_metadata_value(self.assignment_epoch),
            ),
        ]
    }

    /// One member's records: its metadata, its target and its current assignment.
    fn member_records(&self, m: &Member) -> [(Vec<u8>, Vec<u8>); 3] {
        let metadata = MemberMetadata {
            instance_id: m.instance_id.clone(),
            rack_id: m.rack_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            subscribed_topic_names: m.subscribed.iter().cloned().collect(),
            subscribed_topic_regex: m.regex.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            server_assignor: m.server_assignor.map(|a| a.name().to_string()),
        };
        let current = CurrentAssignment {
            member_epoch: m.now.epoch,
            previous_member_epoch: m.now.previous_epoch,
            state: m.now.state,
            assigned: m.now.assigned.clone(),
            revoking: m.now.revoking.clone(),
        };
        let empty = Assignment::new();
        let target = self.target.get(&m.id).unwrap_or(&empty);
        [
            (
                rec::member_record_key(rec::MEMBER_METADATA, &self.id, &m.id),
                rec::member_metadata_value(&metadata),
            ),
            (
                rec::member_record_key(rec::TARGET_MEMBER, &self.id, &m.id),
                rec::target_member_value(target),
            ),
            (
                rec::member_record_key(rec::CURRENT_ASSIGNMENT, &self.id, &m.id),
                rec::current_assignment_value(&current),
            ),
        ]
    }

    /// The records to append for what changed since the last call (or the replay), and takes
    /// them as written. Members' records come before the group epoch, as Kafka orders them; a
    /// member's tombstones (current assignment, target, metadata) in Kafka's order too.
    pub fn changes(&mut self) -> Vec<OffsetRecord> {
        let ids: Vec<String> = if self.all_dirty {
            self.members.keys().cloned().collect()
        } else {
            self.touched
                .iter()
                .filter(|id| self.members.contains_key(*id))
                .cloned()
                .collect()
        };
        let mut now: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for id in &ids {
            now.extend(self.member_records(&self.members[id]));
        }
        let mut out: Vec<OffsetRecord> = Vec::new();
        if self.all_dirty {
            // Members gone since the last write: every written per-member key not in `now`.
            let gone: Vec<Vec<u8>> = self
                .written
                .keys()
                .filter(|k| is_member_key(k) && !now.contains_key(*k))
                .cloned()
                .collect();
            let mut gone = gone;
            // Kafka's order for a departing member: current assignment, target, metadata.
            gone.sort_by_key(|k| std::cmp::Reverse(k[..2].to_vec()));
            for k in gone {
                self.written.remove(&k);
                out.push((k, None));
            }
        }
        for (k, v) in now.into_iter().chain(self.group_records()) {
            if self.written.get(&k) != Some(&v) {
                self.written.insert(k.clone(), v.clone());
                out.push((k, Some(v)));
            }
        }
        self.all_dirty = false;
        self.touched.clear();
        out
    }

    /// Tombstones for every record written for the group (deleted, or converted to classic).
    pub fn tombstones(&mut self) -> Vec<OffsetRecord> {
        let mut keys: Vec<Vec<u8>> = std::mem::take(&mut self.written).into_keys().collect();
        // Per-member records first, the group epoch last (Kafka's deletion order).
        keys.sort_by_key(|k| std::cmp::Reverse(k[..2].to_vec()));
        keys.into_iter().map(|k| (k, None)).collect()
    }

    /// Whether the log holds records of this group (then it is not forgotten when empty).
    pub fn has_records(&self) -> bool {
        !self.written.is_empty()
    }

    /// The group as a replay left it. `now` starts every session (and the rebalance timer of a
    /// member that must still revoke). Inconsistent records (a partition held twice, a member
    /// beyond the assignment epoch) are repaired, never trusted into a broken invariant.
    pub fn restore(id: &str, config: &ConsumerConfig, replay: Replay, now: i64) -> ConsumerGroup {
        let mut g = ConsumerGroup::new(id, config);
        g.group_epoch = replay.epoch.unwrap_or(0).max(0);
        g.assignment_epoch = replay
            .assignment_epoch
            .unwrap_or(g.group_epoch)
            .clamp(0, g.group_epoch);
        g.subscribed_topics = replay
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    TopicView {
                        id: t.id,
                        partitions: t.partitions,
                    },
                )
            })
            .collect();
        let mut current = replay.current;
        let mut targets = replay.targets;
        for (member_id, meta) in replay.members {
            let reconciled = g.restored_assignment(&member_id, current.remove(&member_id));
            if let Some(instance) = &meta.instance_id {
                g.instances.insert(instance.clone(), member_id.clone());
            }
            if let Some(t) = targets.remove(&member_id) {
                g.target.insert(member_id.clone(), t);
            }
            let member = g.restored_member(member_id, meta, reconciled, config, now);
            g.members.insert(member.id.clone(), member);
        }
        g.assignor = g.chosen_assignor(config);
        g.written = replay.raw;
        // Compare everything at the next change: records Kafka wrote with fields we do not
        // keep, or ones repaired above, are rewritten in our form once.
        g.all_dirty = true;
        g.check();
        g
    }

    /// A member's current assignment as replayed, repaired: its epoch at most the assignment
    /// epoch, and no partition in two members' hands (a later claimant loses it).
    fn restored_assignment(&mut self, member_id: &str, c: Option<CurrentAssignment>) -> Reconciled {
        let mut reconciled = match c {
            Some(c) => Reconciled {
                epoch: c.member_epoch,
                previous_epoch: c.previous_member_epoch,
                state: c.state,
                assigned: c.assigned,
                revoking: c.revoking,
            },
            None => Reconciled {
                epoch: 0,
                previous_epoch: -1,
                state: MemberState::Stable,
                assigned: Assignment::new(),
                revoking: Assignment::new(),
            },
        };
        if reconciled.epoch > self.assignment_epoch {
            tracing::warn!(group = %self.id, member = %member_id, epoch = reconciled.epoch,
                "consumer member beyond the assignment epoch in __consumer_offsets");
            reconciled.epoch = self.assignment_epoch;
        }
        for set in [&mut reconciled.assigned, &mut reconciled.revoking] {
            for (topic, ps) in set.iter_mut() {
                ps.retain(|p| match self.owners.get(&(*topic, *p)) {
                    None => {
                        self.owners.insert((*topic, *p), member_id.to_string());
                        true
                    }
                    Some(_) => false,
                });
            }
            set.retain(|_, ps| !ps.is_empty());
        }
        reconciled
    }

    /// A member from its metadata record: sessions start at `now`, as does the rebalance timer
    /// of a member that must still revoke.
    fn restored_member(
        &self,
        member_id: String,
        meta: MemberMetadata,
        reconciled: Reconciled,
        config: &ConsumerConfig,
        now: i64,
    ) -> Member {
        let matcher = meta
            .subscribed_topic_regex
            .as_deref()
            .and_then(|p| TopicRegex::parse(p).ok());
        let regex = matcher.as_ref().and(meta.subscribed_topic_regex.clone());
        // The topics its regex matched when the group last saw them.
        let matched: BTreeSet<String> = match &matcher {
            None => BTreeSet::new(),
            Some(r) => self
                .subscribed_topics
                .keys()
                .filter(|t| !t.starts_with("__") && r.matches(t))
                .cloned()
                .collect(),
        };
        let revoke_deadline = (reconciled.state == MemberState::UnrevokedPartitions)
            .then(|| now + meta.rebalance_timeout_ms.max(0) as i64);
        Member {
            id: member_id,
            instance_id: meta.instance_id,
            rack_id: meta.rack_id,
            client_id: meta.client_id,
            client_host: meta.client_host,
            rebalance_timeout_ms: meta.rebalance_timeout_ms,
            session_timeout_ms: config.session_timeout_ms,
            subscribed: meta.subscribed_topic_names.into_iter().collect(),
            regex,
            matcher,
            matched,
            regex_pending: false,
            server_assignor: meta.server_assignor.as_deref().and_then(Assignor::parse),
            now: reconciled,
            last_heard: now,
            revoke_deadline,
        }
    }
}

/// Whether a key is one of the per-member records (5, 7, 8).
fn is_member_key(key: &[u8]) -> bool {
    key.len() >= 2
        && matches!(
            i16::from_be_bytes([key[0], key[1]]),
            rec::MEMBER_METADATA | rec::TARGET_MEMBER | rec::CURRENT_ASSIGNMENT
        )
}
