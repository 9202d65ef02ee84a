//! The offsets partitions this node holds: replaying `__consumer_offsets` into groups when it
//! takes one (last write per key wins, as Kafka's `GroupCoordinatorShard.replay`), dropping
//! its groups when it loses one, and the gate every request passes first.

use super::offsets::txn;
use super::*;
use crate::group::consumer::{self, ConsumerGroup};
use crate::group::placement::partition_for;
use crate::group::records::{self, GroupValue, MemberValue, RecordKey};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Load {
    Loading,
    Loaded,
}

/// What one partition's replay has found so far for one group.
#[derive(Default)]
pub(super) struct Loaded {
    group: Option<GroupValue>,
    /// The records of a KIP-848 consumer group.
    consumer: consumer::Replay,
    /// Committed offsets, each with a sequence number in log order.
    offsets: BTreeMap<(String, i32), Committed>,
    /// Transactional offsets whose marker the replay has not reached yet, by producer id.
    pending_txn: BTreeMap<i64, BTreeMap<(String, i32), Committed>>,
}

impl Loaded {
    fn is_empty(&self) -> bool {
        self.group.is_none()
            && self.offsets.is_empty()
            && self.pending_txn.is_empty()
            && self.consumer.is_empty()
    }
}

impl Coordinator {
    /// The offsets topic exists with this many partitions (never changes once set).
    pub fn set_partition_count(&mut self, count: i32) {
        assert!(count > 0);
        if let Some(existing) = self.partition_count {
            assert_eq!(
                existing, count,
                "the offsets topic's partition count changed"
            );
        }
        self.partition_count = Some(count);
    }

    /// The partition that holds `group_id`, when the offsets topic exists.
    pub fn partition_of(&self, group_id: &str) -> Option<i32> {
        self.partition_count.map(|n| partition_for(group_id, n))
    }

    /// Whether this node holds the partition (loading or loaded).
    pub fn holds_partition(&self, partition: i32) -> bool {
        self.partitions.contains_key(&partition)
    }

    /// Whether groups of an unloaded partition are still kept for appends in flight: the
    /// partition may not be loaded again until they are gone (their completions need them).
    pub fn has_unloading_groups(&self, partition: i32) -> bool {
        !self.partitions.contains_key(&partition)
            && self
                .groups
                .keys()
                .any(|id| self.partition_of(id) == Some(partition))
    }

    pub(super) fn on_load_begin(&mut self, partition: i32) {
        assert!(
            !self.partitions.contains_key(&partition),
            "partition {partition} loaded twice"
        );
        assert!(
            !self.has_unloading_groups(partition),
            "partition {partition} loaded while its old groups finish appends"
        );
        self.partitions.insert(partition, Load::Loading);
        self.loading.insert(partition, BTreeMap::new());
    }

    /// One record replayed from the partition, in log order (last write per key wins). It
    /// touches only the replay buffer, so it is checked on entry, not swept after.
    pub fn load_record(
        &mut self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), records::DecodeError> {
        self.load_any_record(partition, None, key, value)
    }

    /// A record of a transactional batch of `producer_id`, replayed in log order: an offset
    /// commit stays pending until the replay reaches the producer's marker
    /// ([`Coordinator::load_marker`]), or the end (then the coordinator's marker settles it).
    pub fn load_txn_record(
        &mut self,
        partition: i32,
        producer_id: i64,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), records::DecodeError> {
        self.load_any_record(partition, Some(producer_id), key, value)
    }

    /// A transaction marker of `producer_id`, replayed in log order: the pending offsets of
    /// its transaction are committed or dropped, as the live marker does.
    pub fn load_marker(&mut self, partition: i32, producer_id: i64, commit: bool) {
        assert_eq!(self.partitions.get(&partition), Some(&Load::Loading));
        let loading = self
            .loading
            .get_mut(&partition)
            .expect("load_marker outside load_begin/load_finish");
        for l in loading.values_mut() {
            txn::settle(&mut l.pending_txn, &mut l.offsets, producer_id, commit);
        }
    }

    fn load_any_record(
        &mut self,
        partition: i32,
        producer_id: Option<i64>,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), records::DecodeError> {
        assert_eq!(self.partitions.get(&partition), Some(&Load::Loading));
        let raw_key = key;
        let key = records::decode_key(raw_key)?;
        // Log order, so that a marker commits a pending offset only over older commits.
        let seq = self.take_seq();
        let loading = self
            .loading
            .get_mut(&partition)
            .expect("load_record outside load_begin/load_finish");
        match key {
            RecordKey::Offset {
                group,
                topic,
                partition: p,
            } => {
                let entry = loading.entry(group).or_default();
                let key = (topic, p);
                match (value, producer_id) {
                    (Some(v), None) => {
                        let value = records::decode_offset_value(v)?;
                        entry.offsets.insert(key, Committed { value, seq });
                    }
                    (Some(v), Some(pid)) => {
                        let value = records::decode_offset_value(v)?;
                        let pending = entry.pending_txn.entry(pid).or_default();
                        pending.insert(key, Committed { value, seq });
                    }
                    (None, _) => {
                        entry.offsets.remove(&key);
                        txn::forget_pending(&mut entry.pending_txn, &key);
                    }
                }
            }
            RecordKey::Group { group } => {
                let entry = loading.entry(group).or_default();
                entry.group = value.map(records::decode_group_value).transpose()?;
            }
            RecordKey::ConsumerRecord {
                version,
                group,
                member,
            } => {
                let entry = loading.entry(group).or_default();
                entry
                    .consumer
                    .record(version, member.as_deref(), raw_key, value)?;
            }
            RecordKey::Other(_) => {}
        }
        Ok(())
    }

    /// Groups with members come back Stable (sessions armed from now), the rest Empty.
    pub(super) fn on_load_finish(&mut self, partition: i32, now: i64) {
        let loaded = self
            .loading
            .remove(&partition)
            .expect("load_finish without load_begin");
        for (id, l) in loaded {
            if l.is_empty() {
                continue;
            }
            let g = self.restore_group(&id, l, now);
            assert!(
                self.groups.insert(id.clone(), g).is_none(),
                "group {id} held twice"
            );
            self.rearm(&id);
        }
        self.partitions.insert(partition, Load::Loaded);
    }

    fn restore_group(&mut self, id: &str, l: Loaded, now: i64) -> Group {
        let mut g = Group::new(id, now);
        if let Some(v) = l.group {
            restore_classic(&mut g, v, now);
        }
        // A consumer group comes back whole: epochs, targets, members and what each holds
        // (Kafka's replay); only a classic group with members would win over it.
        if !l.consumer.is_empty() && g.members.is_empty() {
            g.become_consumer(&self.config.consumer);
            let c = ConsumerGroup::restore(id, &self.config.consumer, l.consumer, now);
            g.consumer = Some(Box::new(c));
        }
        g.offsets = l.offsets;
        g.pending_txn = l.pending_txn;
        g
    }

    pub(super) fn on_unload(&mut self, partition: i32, out: &mut Vec<Action>) {
        if self.partitions.remove(&partition).is_none() {
            return;
        }
        self.loading.remove(&partition);
        let ids: Vec<String> = self
            .groups
            .keys()
            .filter(|id| self.partition_of(id) == Some(partition))
            .cloned()
            .collect();
        for id in ids {
            self.with_group(&id, |_, g| drop_group(g, out));
        }
    }

    /// Whether requests for `group_id` are answered COORDINATOR_LOAD_IN_PROGRESS here now: the
    /// offsets topic is not applied yet, or the group's partition is loading. The driver holds
    /// an offset commit while this lasts (bounded) rather than answer it at once.
    pub fn load_in_progress(&self, group_id: &str) -> bool {
        self.gate(group_id) == Err(GroupError::CoordinatorLoadInProgress)
    }

    /// Whether requests for `group_id` may be served here.
    pub(super) fn gate(&self, group_id: &str) -> Result<(), GroupError> {
        // The offsets topic is not applied here yet: it was just created, and FindCoordinator
        // on a node that has applied it already names this one. Retriable in place, as Kafka's
        // answer for a partition still loading (librdkafka retries an OffsetFetch on
        // COORDINATOR_LOAD_IN_PROGRESS but hands COORDINATOR_NOT_AVAILABLE to the application:
        // 0090 on three nodes). Once applied, a group this node does not hold is NOT_COORDINATOR.
        let Some(p) = self.partition_of(group_id) else {
            return Err(GroupError::CoordinatorLoadInProgress);
        };
        match self.partitions.get(&p) {
            None => Err(GroupError::NotCoordinator),
            #[cfg(any(madsim, test))]
            Some(Load::Loading)
                if (self.config.planted).is(crate::config::PlantedBug::GroupServeWhileLoading) =>
            {
                Ok(())
            }
            Some(Load::Loading) => Err(GroupError::CoordinatorLoadInProgress),
            Some(Load::Loaded) => Ok(()),
        }
    }
}

/// A classic group's record: its generation, protocol and members, Stable if it has any.
fn restore_classic(g: &mut Group, v: GroupValue, now: i64) {
    g.generation = v.generation;
    g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
    g.protocol = v.protocol.clone();
    if v.current_state_timestamp > 0 {
        g.state_since = v.current_state_timestamp;
    }
    let protocol = v.protocol.clone().unwrap_or_default();
    let protocol_type = g.protocol_type.clone().unwrap_or_default();
    for (seq, m) in v.members.into_iter().enumerate() {
        if let Some(instance) = &m.instance_id {
            g.instances.insert(instance.clone(), m.member_id.clone());
        }
        let member = restore_member(m, &protocol, &protocol_type, seq as u64, now);
        g.members.insert(member.id.clone(), member);
    }
    if !g.members.is_empty() {
        g.leader = v.leader.filter(|l| g.members.contains_key(l));
        if g.leader.is_none() {
            g.leader = g.first_member(false);
        }
        g.state = GroupState::Stable;
    }
}

fn restore_member(
    m: MemberValue,
    protocol: &str,
    protocol_type: &str,
    seq: u64,
    now: i64,
) -> Member {
    Member {
        id: m.member_id,
        instance_id: m.instance_id,
        client_id: m.client_id,
        client_host: m.client_host,
        session_timeout_ms: m.session_timeout_ms,
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        protocol_type: protocol_type.to_string(),
        protocols: vec![(protocol.to_string(), m.subscription)],
        assignment: m.assignment,
        join: None,
        sync: None,
        last_heard: now,
        is_new: false,
        seq,
    }
}

/// The partition is lost: parked requests are told NOT_COORDINATOR and the group goes Dead.
fn drop_group(g: &mut Group, out: &mut Vec<Action>) {
    for m in g.members.values_mut() {
        if let Some(join) = m.join.take() {
            let response = join_error(GroupError::NotCoordinator, &m.id);
            respond(out, join.request, response);
        }
        if let Some(sync) = m.sync.take() {
            respond(out, sync, sync_error(GroupError::NotCoordinator));
        }
    }
    g.join_deadline = None;
    g.initial_delay = None;
    g.sync_deadline = None;
    g.state = GroupState::Dead;
}
