//! The group coordinator state machine: every group led by this node, their members, their
//! committed offsets, the timers that bound every wait, and the offsets-log appends in flight.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::consumer::{ConsumerConfig, ConsumerGroup};
use super::member::{Member, ParkedJoin};
use super::placement::partition_for;
use super::records::{self, GroupValue, MemberValue, OffsetValue, RecordKey};
use super::types::*;

mod consumer_calls;

/// Broker settings the coordinator honours (Kafka's keys, see `config::server`).
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.max.size`.
    pub max_size: usize,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
    /// Bound on groups held (a hard limit Kafka does not have; new groups past it are refused).
    pub max_groups: usize,
    /// The consumer protocol's settings (KIP-848).
    pub consumer: ConsumerConfig,
}

impl Default for GroupConfig {
    fn default() -> GroupConfig {
        GroupConfig {
            initial_rebalance_delay_ms: 3000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            max_size: MAX_MEMBERS,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 7 * 24 * 3600 * 1000,
            max_groups: 100_000,
            consumer: ConsumerConfig::default(),
        }
    }
}

/// Hard bound on members (plus pending members) of one group, whatever `group.max.size` says:
/// every member can park two requests, so this bounds the parked requests too.
pub const MAX_MEMBERS: usize = 10_000;
/// Bound on partitions in one commit, delete or fetch.
const MAX_PARTITIONS_PER_REQUEST: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    Loading,
    Loaded,
}

#[derive(Clone, Debug)]
struct Committed {
    value: OffsetValue,
    /// Append order: a completion never overwrites a later commit's value.
    seq: u64,
}

/// The KIP-134 wait of a rebalance that starts from Empty.
#[derive(Clone, Copy, Debug)]
struct InitialDelay {
    /// What is left of the budget `max(rebalanceTimeout - delay, 0)` for extensions.
    remaining_ms: i64,
    joined_during: bool,
}

#[derive(Clone, Debug)]
struct Group {
    id: String,
    state: GroupState,
    state_since: i64,
    generation: i32,
    /// `None` for a simple group (commits only, never joined).
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Static members: instance id → member id.
    instances: BTreeMap<String, String>,
    /// KIP-394 ids handed out but not yet used: id → expiry.
    pending: BTreeMap<String, i64>,
    join_deadline: Option<i64>,
    initial_delay: Option<InitialDelay>,
    sync_deadline: Option<i64>,
    /// Members of the current generation that have not sent SyncGroup yet.
    awaiting_sync: BTreeSet<String>,
    /// The generation whose leader assignment is being persisted. Per generation: a write of
    /// an earlier generation still in flight must not hold back the current leader's (its
    /// SyncGroup would stay parked until the clients time out).
    assignment_in_flight: Option<i32>,
    offsets: BTreeMap<(String, i32), Committed>,
    appends_in_flight: usize,
    /// Set when the group speaks the consumer protocol (KIP-848): then the classic fields stay
    /// empty (state Empty, no members) and only the offsets above are shared.
    consumer: Option<Box<ConsumerGroup>>,
    /// Planted `group-keeps-departed-member`: removed members still listed to the leader.
    #[cfg(madsim)]
    departed: Vec<Member>,
}

impl Group {
    fn new(id: &str, now: i64) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            state_since: now,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            instances: BTreeMap::new(),
            pending: BTreeMap::new(),
            join_deadline: None,
            initial_delay: None,
            sync_deadline: None,
            awaiting_sync: BTreeSet::new(),
            assignment_in_flight: None,
            offsets: BTreeMap::new(),
            appends_in_flight: 0,
            consumer: None,
            #[cfg(madsim)]
            departed: Vec::new(),
        }
    }

    fn transition(&mut self, next: GroupState, now: i64) {
        assert!(
            self.state.may_become(next),
            "group {}: illegal transition {:?} -> {:?}",
            self.id,
            self.state,
            next
        );
        self.state = next;
        self.state_since = now;
    }

    fn max_rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0)
    }

    fn deadline(&self) -> Option<i64> {
        // A Dead group (deleted, or unloaded with appends in flight) runs no timers.
        if self.state == GroupState::Dead {
            return None;
        }
        let members = self.members.values().filter_map(Member::session_deadline);
        let pending = self.pending.values().copied();
        let consumer = self.consumer.as_ref().and_then(|c| c.deadline());
        [self.join_deadline, self.sync_deadline, consumer]
            .into_iter()
            .flatten()
            .chain(members)
            .chain(pending)
            .min()
    }

    /// Validates the member named by a request (`validateCurrentMember`).
    fn validate(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), GroupError> {
        if let Some(instance) = instance_id {
            return match self.instances.get(instance) {
                Some(mapped) if mapped != member_id => Err(GroupError::FencedInstanceId),
                Some(_) => Ok(()),
                None => Err(GroupError::UnknownMemberId),
            };
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId)
        }
    }

    /// Candidates supported by every member; each member votes for its first candidate; most
    /// votes wins, ties going to the earliest in the leader's list (Kafka leaves ties to
    /// HashMap order; we make them deterministic).
    fn select_protocol(&self) -> Option<String> {
        let leader = self.leader.as_ref().and_then(|l| self.members.get(l))?;
        let candidates: Vec<&str> = leader
            .protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| self.members.values().all(|m| m.supports(n)))
            .collect();
        let mut votes = vec![0usize; candidates.len()];
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(&&**n)) {
                let i = candidates.iter().position(|c| c == name).unwrap();
                votes[i] += 1;
            }
        }
        let best = (0..candidates.len()).max_by_key(|&i| (votes[i], std::cmp::Reverse(i)))?;
        Some(candidates[best].to_string())
    }

    /// Can `protocol_type`/`protocols` join? (`supportsProtocols`), not counting `except`.
    fn accepts_protocols(
        &self,
        protocol_type: &str,
        protocols: &[(String, Bytes)],
        except: &str,
    ) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        let others: Vec<&Member> = self.members.values().filter(|m| m.id != except).collect();
        if others.is_empty() {
            return true;
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(name, _)| others.iter().all(|m| m.supports(name)))
    }

    fn first_member(&self, parked_only: bool) -> Option<String> {
        self.members
            .values()
            .filter(|m| !parked_only || m.join.is_some())
            .min_by_key(|m| m.seq)
            .map(|m| m.id.clone())
    }

    fn join_response(&self, member_id: &str) -> JoinResponse {
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = if leader == member_id {
            self.member_list(&protocol)
        } else {
            Vec::new()
        };
        JoinResponse {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader,
            member_id: member_id.to_string(),
            skip_assignment: false,
            members,
        }
    }

    fn member_list(&self, protocol: &str) -> Vec<JoinedMember> {
        let mut members: Vec<&Member> = self.members.values().collect();
        members.sort_by_key(|m| m.seq);
        #[cfg(madsim)]
        members.extend(self.departed.iter());
        members
            .into_iter()
            .map(|m| JoinedMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: m.metadata(protocol),
            })
            .collect()
    }

    fn value(&self, now: i64) -> GroupValue {
        let protocol = self.protocol.clone().unwrap_or_default();
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: now,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Topics the members subscribe to (`consumer` groups); `None` = unknown (treat as all).
    fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol.as_deref()?;
        let mut topics = BTreeSet::new();
        for m in self.members.values() {
            topics.extend(records::subscribed_topics(&m.metadata(protocol))?);
        }
        Some(topics)
    }

    /// Nothing left worth keeping in memory.
    fn is_forgettable(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending.is_empty()
            && self.offsets.is_empty()
            && self.appends_in_flight == 0
            && self.generation == 0
            && self
                .consumer
                .as_ref()
                .is_none_or(|c| c.is_empty() && !c.has_records())
    }
}

/// What a completed append should do.
#[derive(Debug)]
enum Pending {
    Commit {
        request: RequestId,
        group: String,
        /// Index into `response.partitions` with the value written there.
        accepted: Vec<(usize, OffsetValue)>,
        response: CommitResponse,
        seq: u64,
    },
    Assignment {
        group: String,
        generation: i32,
        assignments: BTreeMap<String, Bytes>,
    },
    StaticReplace {
        request: RequestId,
        group: String,
        old: Box<Member>,
        new_id: String,
        was_leader: bool,
        skip_assignment: bool,
        generation: i32,
    },
    GroupRecord {
        group: String,
    },
    /// A consumer heartbeat whose group epoch moved: answered once the epoch is written.
    ConsumerHeartbeat {
        request: RequestId,
        group: String,
        response: super::consumer::HeartbeatResponse,
    },
    Delete {
        request: RequestId,
        group: String,
        /// `None`: the whole group (DeleteGroups).
        keys: Option<Vec<(String, i32)>>,
        results: Vec<(String, i32, Option<GroupError>)>,
    },
    Expire {
        group: String,
        keys: Vec<((String, i32), u64)>,
    },
}

/// What one partition's replay has found so far.
#[derive(Default)]
struct Loaded {
    group: Option<GroupValue>,
    /// The records of a KIP-848 consumer group.
    consumer: super::consumer::Replay,
    offsets: BTreeMap<(String, i32), OffsetValue>,
}

pub struct Coordinator {
    config: GroupConfig,
    /// Partition count of `__consumer_offsets`, once it exists.
    partition_count: Option<i32>,
    partitions: BTreeMap<i32, Load>,
    loading: BTreeMap<i32, BTreeMap<String, Loaded>>,
    groups: BTreeMap<String, Group>,
    /// (deadline, group): the next time each group's timers need a look.
    timers: BTreeSet<(i64, String)>,
    armed: BTreeMap<String, i64>,
    pending: BTreeMap<AppendToken, Pending>,
    next_token: AppendToken,
    next_seq: u64,
}

fn respond(out: &mut Vec<Action>, request: RequestId, response: Response) {
    out.push(Action::Respond(request, response));
}

fn join_error(error: GroupError, member_id: &str) -> Response {
    Response::Join(JoinResponse {
        error: Some(error),
        generation: -1,
        member_id: member_id.to_string(),
        ..JoinResponse::default()
    })
}

fn sync_error(error: GroupError) -> Response {
    Response::Sync(SyncResponse {
        error: Some(error),
        ..SyncResponse::default()
    })
}

fn mint_member_id(prefix: &str, fresh: u128) -> String {
    let uuid = uuid::Builder::from_random_bytes(fresh.to_be_bytes()).into_uuid();
    format!("{prefix}-{uuid}")
}

impl Coordinator {
    pub fn new(config: GroupConfig) -> Coordinator {
        assert!(config.min_session_timeout_ms <= config.max_session_timeout_ms);
        assert!(config.initial_rebalance_delay_ms >= 0);
        Coordinator {
            config,
            partition_count: None,
            partitions: BTreeMap::new(),
            loading: BTreeMap::new(),
            groups: BTreeMap::new(),
            timers: BTreeSet::new(),
            armed: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_token: 1,
            next_seq: 1,
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    // ---------------------------------------------------------------- offsets-log partitions

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

    /// This node leads the partition and starts replaying it: its groups answer
    /// COORDINATOR_LOAD_IN_PROGRESS until [`Coordinator::load_finish`].
    pub fn load_begin(&mut self, partition: i32) {
        assert!(
            !self.partitions.contains_key(&partition),
            "partition {partition} loaded twice"
        );
        self.partitions.insert(partition, Load::Loading);
        self.loading.insert(partition, BTreeMap::new());
    }

    /// One record replayed from the partition, in log order (last write per key wins).
    pub fn load_record(
        &mut self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), records::DecodeError> {
        let loading = self
            .loading
            .get_mut(&partition)
            .expect("load_record outside load_begin/load_finish");
        match records::decode_key(key)? {
            RecordKey::Offset {
                group,
                topic,
                partition: p,
            } => {
                let entry = loading.entry(group).or_default();
                match value {
                    Some(v) => {
                        entry
                            .offsets
                            .insert((topic, p), records::decode_offset_value(v)?);
                    }
                    None => {
                        entry.offsets.remove(&(topic, p));
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
                    .record(version, member.as_deref(), key, value)?;
            }
            RecordKey::Other(_) => {}
        }
        Ok(())
    }

    /// The replay is done: groups with members come back Stable (sessions armed from now), the
    /// rest Empty.
    pub fn load_finish(&mut self, partition: i32, now: i64) {
        let loaded = self
            .loading
            .remove(&partition)
            .expect("load_finish without load_begin");
        for (id, l) in loaded {
            if l.group.is_none() && l.offsets.is_empty() && l.consumer.is_empty() {
                continue;
            }
            let mut g = Group::new(&id, now);
            if let Some(v) = l.group {
                g.generation = v.generation;
                g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
                g.protocol = v.protocol.clone();
                if v.current_state_timestamp > 0 {
                    g.state_since = v.current_state_timestamp;
                }
                for (seq, m) in v.members.into_iter().enumerate() {
                    if let Some(instance) = &m.instance_id {
                        g.instances.insert(instance.clone(), m.member_id.clone());
                    }
                    let protocols = vec![(v.protocol.clone().unwrap_or_default(), m.subscription)];
                    g.members.insert(
                        m.member_id.clone(),
                        Member {
                            id: m.member_id,
                            instance_id: m.instance_id,
                            client_id: m.client_id,
                            client_host: m.client_host,
                            session_timeout_ms: m.session_timeout_ms,
                            rebalance_timeout_ms: m.rebalance_timeout_ms,
                            protocol_type: g.protocol_type.clone().unwrap_or_default(),
                            protocols,
                            assignment: m.assignment,
                            join: None,
                            sync: None,
                            last_heard: now,
                            is_new: false,
                            seq: seq as u64,
                        },
                    );
                }
                if !g.members.is_empty() {
                    g.leader = v.leader.filter(|l| g.members.contains_key(l));
                    if g.leader.is_none() {
                        g.leader = g.first_member(false);
                    }
                    g.state = GroupState::Stable;
                }
            }
            // A consumer group comes back whole: epochs, targets, members and what each holds
            // (Kafka's replay); only a classic group with members would win over it.
            if !l.consumer.is_empty() && g.members.is_empty() {
                g.become_consumer(&self.config.consumer);
                g.consumer = Some(Box::new(ConsumerGroup::restore(
                    &id,
                    &self.config.consumer,
                    l.consumer,
                    now,
                )));
            }
            for (key, value) in l.offsets {
                let seq = self.next_seq;
                self.next_seq += 1;
                g.offsets.insert(key, Committed { value, seq });
            }
            self.groups.insert(id.clone(), g);
            self.rearm(&id);
        }
        self.partitions.insert(partition, Load::Loaded);
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

    /// This node no longer leads the partition (`removeGroupsForPartition`): its groups go
    /// Dead, parked joins and syncs are answered NOT_COORDINATOR, their timers are dropped.
    /// A group with appends in flight is kept (Dead) until their completions, which then fail.
    pub fn unload(&mut self, partition: i32) -> Vec<Action> {
        let mut out = Vec::new();
        if self.partitions.remove(&partition).is_none() {
            return out;
        }
        self.loading.remove(&partition);
        let ids: Vec<String> = self
            .groups
            .keys()
            .filter(|id| self.partition_of(id) == Some(partition))
            .cloned()
            .collect();
        for id in ids {
            self.with_group(&id, |_, g| {
                for m in g.members.values_mut() {
                    if let Some(join) = m.join.take() {
                        respond(
                            &mut out,
                            join.request,
                            join_error(GroupError::NotCoordinator, &m.id),
                        );
                    }
                    if let Some(sync) = m.sync.take() {
                        respond(&mut out, sync, sync_error(GroupError::NotCoordinator));
                    }
                }
                g.join_deadline = None;
                g.sync_deadline = None;
                g.state = GroupState::Dead;
            });
        }
        out
    }

    /// A partition that is new and empty: loaded at once.
    pub fn partition_ready(&mut self, partition: i32, now: i64) {
        self.load_begin(partition);
        self.load_finish(partition, now);
    }

    fn gate(&self, group_id: &str) -> Result<(), GroupError> {
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
            Some(Load::Loading) => Err(GroupError::CoordinatorLoadInProgress),
            Some(Load::Loaded) => Ok(()),
        }
    }

    // ---------------------------------------------------------------- timers

    /// The earliest time [`Coordinator::tick`] has work to do.
    pub fn next_deadline(&self) -> Option<i64> {
        self.timers.first().map(|(at, _)| *at)
    }

    fn rearm(&mut self, group_id: &str) {
        if let Some(old) = self.armed.remove(group_id) {
            self.timers.remove(&(old, group_id.to_string()));
        }
        if let Some(at) = self.groups.get(group_id).and_then(Group::deadline) {
            self.armed.insert(group_id.to_string(), at);
            self.timers.insert((at, group_id.to_string()));
        }
    }

    /// Runs every timer that is due: join and sync timeouts, session expiry, pending ids.
    pub fn tick(&mut self, now: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let due: Vec<String> = self
            .timers
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, g)| g.clone())
            .collect();
        for id in due {
            self.with_group(&id, |c, g| c.run_timers(g, now, &mut out));
        }
        out
    }

    fn run_timers(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        if g.state == GroupState::Dead {
            return;
        }
        if let Some(c) = g.consumer.as_mut() {
            let gone = c.expire(now);
            for member in &gone {
                tracing::info!(group = %g.id, %member, "consumer group member removed: session or rebalance timeout");
            }
            if !gone.is_empty() {
                self.persist_consumer(g, out);
            }
        }
        let expired: Vec<String> = g
            .pending
            .iter()
            .filter(|(_, &at)| at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            g.pending.remove(id);
        }
        if !expired.is_empty() {
            self.maybe_complete_join(g, now, out);
        }
        if g.join_deadline.is_some_and(|at| at <= now) {
            self.on_join_timer(g, now, out);
        }
        if g.sync_deadline.is_some_and(|at| at <= now) {
            self.on_sync_timer(g, now, out);
        }
        let dead: Vec<String> = g
            .members
            .values()
            .filter(|m| m.session_deadline().is_some_and(|at| at <= now))
            .map(|m| m.id.clone())
            .collect();
        for id in dead {
            // An earlier removal may have rebalanced and changed this member's deadline.
            if g.members
                .get(&id)
                .and_then(Member::session_deadline)
                .is_some_and(|at| at <= now)
            {
                self.remove_member_and_react(g, &id, now, out);
            }
        }
    }

    fn on_join_timer(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        assert_eq!(g.state, GroupState::PreparingRebalance);
        if let Some(mut delay) = g.initial_delay {
            if delay.joined_during && delay.remaining_ms > 0 {
                let step = self
                    .config
                    .initial_rebalance_delay_ms
                    .min(delay.remaining_ms);
                delay.remaining_ms -= step;
                delay.joined_during = false;
                g.initial_delay = Some(delay);
                g.join_deadline = Some(now + step);
                return;
            }
            g.initial_delay = None;
        }
        self.complete_join(g, now, out);
    }

    fn on_sync_timer(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        g.sync_deadline = None;
        if !matches!(
            g.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) || g.awaiting_sync.is_empty()
        {
            g.awaiting_sync.clear();
            return;
        }
        // KAFKA-12890: members that never synced are gone; the rest rebalance without them.
        let missing: Vec<String> = std::mem::take(&mut g.awaiting_sync).into_iter().collect();
        for id in &missing {
            self.remove_member(g, id, out);
        }
        self.prepare_rebalance(g, now, out);
    }

    // ---------------------------------------------------------------- membership core

    /// Runs `f` on a group taken out of the map (so `self` stays usable), puts it back, re-arms
    /// its timer and forgets it if nothing is left.
    fn with_group<T>(&mut self, id: &str, f: impl FnOnce(&mut Self, &mut Group) -> T) -> Option<T> {
        let mut g = self.groups.remove(id)?;
        let out = f(self, &mut g);
        // Kept while appends are in flight: their completions need the group.
        let forget =
            (g.is_forgettable() || g.state == GroupState::Dead) && g.appends_in_flight == 0;
        if !forget {
            self.groups.insert(id.to_string(), g);
        }
        self.rearm(id);
        Some(out)
    }

    fn prepare_rebalance(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        if g.state == GroupState::CompletingRebalance {
            for m in g.members.values_mut() {
                if let Some(sync) = m.sync.take() {
                    respond(out, sync, sync_error(GroupError::RebalanceInProgress));
                }
                m.assignment = Bytes::new();
            }
        }
        g.sync_deadline = None;
        g.awaiting_sync.clear();
        let from_empty = g.state == GroupState::Empty;
        g.transition(GroupState::PreparingRebalance, now);
        let delay = self.config.initial_rebalance_delay_ms;
        if from_empty && delay > 0 {
            g.initial_delay = Some(InitialDelay {
                remaining_ms: (g.max_rebalance_timeout() - delay).max(0),
                joined_during: false,
            });
            g.join_deadline = Some(now + delay);
        } else {
            g.initial_delay = None;
            g.join_deadline = Some(now + g.max_rebalance_timeout());
            self.maybe_complete_join(g, now, out);
        }
    }

    /// Completes the join early once every member has rejoined and no id is pending (never
    /// during the initial delay, which always runs its course).
    fn maybe_complete_join(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        if g.state != GroupState::PreparingRebalance || g.initial_delay.is_some() {
            return;
        }
        if g.pending.is_empty() && g.members.values().all(|m| m.join.is_some()) {
            self.complete_join(g, now, out);
        }
    }

    fn complete_join(&mut self, g: &mut Group, now: i64, out: &mut Vec<Action>) {
        assert_eq!(g.state, GroupState::PreparingRebalance);
        g.join_deadline = None;
        g.initial_delay = None;
        let gone: Vec<String> = g
            .members
            .values()
            .filter(|m| m.join.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            self.remove_member(g, id, out);
        }
        if !g.members.is_empty() && g.members.values().all(|m| m.join.is_none()) {
            // Only static members that have not rejoined: wait another round for them.
            g.join_deadline = Some(now + g.max_rebalance_timeout());
            return;
        }
        let previous = g.generation;
        g.generation = g.generation.checked_add(1).expect("generation overflow");
        assert!(g.generation > previous, "generations never go back");
        if g.members.is_empty() {
            g.protocol = None;
            g.leader = None;
            g.transition(GroupState::Empty, now);
            let group = g.id.clone();
            self.append_group_record(g, now, Pending::GroupRecord { group }, out);
            return;
        }
        let leader_rejoined = g
            .leader
            .as_ref()
            .and_then(|l| g.members.get(l))
            .is_some_and(|m| m.join.is_some());
        if !leader_rejoined {
            g.leader = g.first_member(true);
        }
        g.protocol = g.select_protocol();
        assert!(g.protocol.is_some(), "members share no protocol");
        g.transition(GroupState::CompletingRebalance, now);
        let ids: Vec<String> = g.members.keys().cloned().collect();
        for id in &ids {
            let response = g.join_response(id);
            let m = g.members.get_mut(id).unwrap();
            m.last_heard = now;
            m.is_new = false;
            if let Some(join) = m.join.take() {
                respond(out, join.request, Response::Join(response));
            }
        }
        g.awaiting_sync = ids.into_iter().collect();
        g.sync_deadline = Some(now + g.max_rebalance_timeout());
    }

    /// Removes a member; its parked requests are told it is unknown.
    fn remove_member(&mut self, g: &mut Group, id: &str, out: &mut Vec<Action>) {
        let Some(m) = g.members.remove(id) else {
            return;
        };
        #[cfg(madsim)]
        if m.instance_id.is_none()
            && g.departed.len() < 8
            && crate::config::planted::active(crate::config::PlantedBug::GroupKeepsDepartedMember)
        {
            g.departed.push(m.clone());
        }
        if let Some(join) = m.join {
            respond(
                out,
                join.request,
                join_error(GroupError::UnknownMemberId, id),
            );
        }
        if let Some(sync) = m.sync {
            respond(out, sync, sync_error(GroupError::UnknownMemberId));
        }
        if let Some(instance) = &m.instance_id {
            if g.instances.get(instance).map(String::as_str) == Some(id) {
                g.instances.remove(instance);
            }
        }
        g.awaiting_sync.remove(id);
        if g.leader.as_deref() == Some(id) {
            g.leader = g.first_member(false);
        }
    }

    /// Removal by session expiry or LeaveGroup, then what the state calls for. Every removal
    /// path re-checks join completion, so a group never hangs in PreparingRebalance.
    fn remove_member_and_react(
        &mut self,
        g: &mut Group,
        id: &str,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        self.remove_member(g, id, out);
        match g.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(g, now, out)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(g, now, out),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    fn append(
        &mut self,
        partition: i32,
        records: Vec<OffsetRecord>,
        pending: Pending,
        out: &mut Vec<Action>,
    ) {
        assert!(!records.is_empty());
        let token = self.next_token;
        self.next_token += 1;
        self.pending.insert(token, pending);
        out.push(Action::Append {
            partition,
            token,
            records,
        });
    }

    fn append_group_record(
        &mut self,
        g: &mut Group,
        now: i64,
        pending: Pending,
        out: &mut Vec<Action>,
    ) {
        let partition = self.partition_of(&g.id).expect("group without a partition");
        let record = (
            records::group_key(&g.id),
            Some(records::group_value(&g.value(now))),
        );
        g.appends_in_flight += 1;
        self.append(partition, vec![record], pending, out);
    }

    // ---------------------------------------------------------------- JoinGroup

    pub fn join(&mut self, request: RequestId, mut req: JoinRequest, now: i64) -> Vec<Action> {
        let mut out = Vec::new();
        if req.rebalance_timeout_ms <= 0 {
            // A zero rebalance timeout would spin the join timer (apache/kafka#7072).
            req.rebalance_timeout_ms = req.session_timeout_ms;
        }
        let fail = |out: &mut Vec<Action>, e| respond(out, request, join_error(e, &req.member_id));
        if req.group_id.is_empty() {
            fail(&mut out, GroupError::InvalidGroupId);
            return out;
        }
        if let Err(e) = self.gate(&req.group_id) {
            fail(&mut out, e);
            return out;
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            fail(&mut out, GroupError::InvalidSessionTimeout);
            return out;
        }
        if !self.groups.contains_key(&req.group_id) {
            if !req.member_id.is_empty() {
                fail(&mut out, GroupError::UnknownMemberId);
                return out;
            }
            if self.groups.len() >= self.config.max_groups {
                fail(&mut out, GroupError::CoordinatorNotAvailable);
                return out;
            }
            self.groups
                .insert(req.group_id.clone(), Group::new(&req.group_id, now));
        }
        let mut converted: Vec<OffsetRecord> = Vec::new();
        if let Some(g) = self.groups.get_mut(&req.group_id) {
            match &g.consumer {
                Some(c) if !c.is_empty() => {
                    fail(&mut out, GroupError::InconsistentGroupProtocol);
                    return out;
                }
                // An empty consumer group becomes classic again (Kafka converts empty groups).
                Some(_) => {
                    let mut c = g.consumer.take().unwrap();
                    converted = c.tombstones();
                    g.protocol_type = None;
                    if !converted.is_empty() {
                        g.appends_in_flight += 1;
                    }
                }
                None => {}
            }
        }
        if !converted.is_empty() {
            // Its consumer-group records go, so a restart does not bring the old type back.
            let partition = self.partition_of(&req.group_id).unwrap();
            let pending = Pending::GroupRecord {
                group: req.group_id.clone(),
            };
            self.append(partition, converted, pending, &mut out);
        }
        let id = req.group_id.clone();
        self.with_group(&id, |c, g| c.join_group(g, request, req, now, &mut out));
        out
    }

    fn join_group(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let fail = |out: &mut Vec<Action>, e| respond(out, request, join_error(e, &req.member_id));
        if g.state == GroupState::Dead {
            return fail(out, GroupError::CoordinatorNotAvailable);
        }
        let known = g.members.contains_key(&req.member_id)
            || g.pending.contains_key(&req.member_id)
            || req
                .instance_id
                .as_ref()
                .is_some_and(|i| g.instances.contains_key(i));
        let max = self.config.max_size.min(MAX_MEMBERS);
        let fits = match g.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                let parked = g.members.values().filter(|m| m.join.is_some()).count();
                (known
                    && g.members
                        .get(&req.member_id)
                        .is_some_and(|m| m.join.is_some()))
                    || parked < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => known || g.members.len() < max,
        } && (known || g.members.len() + g.pending.len() < MAX_MEMBERS);
        if !fits {
            if g.members.contains_key(&req.member_id) {
                self.remove_member_and_react(g, &req.member_id, now, out);
            }
            return fail(out, GroupError::GroupMaxSizeReached);
        }
        if !g.accepts_protocols(&req.protocol_type, &req.protocols, &req.member_id) {
            return fail(out, GroupError::InconsistentGroupProtocol);
        }
        if req.member_id.is_empty() {
            if let Some(instance) = req.instance_id.clone() {
                return self.static_join(g, request, req, &instance, now, out);
            }
            let member_id = mint_member_id(&req.client_id, req.fresh_id);
            if req.require_known_member {
                g.pending
                    .insert(member_id.clone(), now + req.session_timeout_ms as i64);
                respond(
                    out,
                    request,
                    join_error(GroupError::MemberIdRequired, &member_id),
                );
                return;
            }
            return self.add_member(g, request, member_id, req, now, out);
        }
        if g.pending.remove(&req.member_id).is_some() {
            let member_id = req.member_id.clone();
            return self.add_member(g, request, member_id, req, now, out);
        }
        if let Err(e) = g.validate(&req.member_id, req.instance_id.as_deref()) {
            return fail(out, e);
        }
        self.current_member_join(g, request, req, now, out)
    }

    fn add_member(
        &mut self,
        g: &mut Group,
        request: RequestId,
        member_id: String,
        req: JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        assert!(!g.members.contains_key(&member_id));
        if g.members.is_empty() {
            g.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.instance_id {
            g.instances.insert(instance.clone(), member_id.clone());
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        g.members.insert(
            member_id.clone(),
            Member {
                id: member_id.clone(),
                instance_id: req.instance_id,
                client_id: req.client_id,
                client_host: req.client_host,
                session_timeout_ms: req.session_timeout_ms,
                rebalance_timeout_ms: req.rebalance_timeout_ms,
                protocol_type: req.protocol_type,
                protocols: req.protocols,
                assignment: Bytes::new(),
                join: Some(ParkedJoin { request }),
                sync: None,
                last_heard: now,
                is_new: true,
                seq,
            },
        );
        if g.leader.is_none() {
            g.leader = Some(member_id);
        }
        if let Some(delay) = &mut g.initial_delay {
            delay.joined_during = true;
        }
        match g.state {
            GroupState::PreparingRebalance => self.maybe_complete_join(g, now, out),
            _ => self.prepare_rebalance(g, now, out),
        }
    }

    /// Updates a known member from its JoinGroup and parks it (a retried join replaces the
    /// earlier one, which is told to rejoin).
    fn park_join(g: &mut Group, request: RequestId, req: &JoinRequest, out: &mut Vec<Action>) {
        let m = g.members.get_mut(&req.member_id).unwrap();
        m.protocols = req.protocols.clone();
        m.protocol_type = req.protocol_type.clone();
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        if let Some(old) = m.join.replace(ParkedJoin { request }) {
            respond(
                out,
                old.request,
                join_error(GroupError::RebalanceInProgress, &m.id),
            );
        }
    }

    fn current_member_join(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let member_id = req.member_id.clone();
        match g.state {
            GroupState::PreparingRebalance => {
                Self::park_join(g, request, &req, out);
                self.maybe_complete_join(g, now, out);
            }
            GroupState::CompletingRebalance => {
                if g.members[&member_id].protocols == req.protocols {
                    // A lost JoinGroup response: answer it again.
                    respond(out, request, Response::Join(g.join_response(&member_id)));
                } else {
                    Self::park_join(g, request, &req, out);
                    self.prepare_rebalance(g, now, out);
                }
            }
            GroupState::Stable => {
                let is_leader = g.leader.as_deref() == Some(member_id.as_str());
                if is_leader || g.members[&member_id].protocols != req.protocols {
                    Self::park_join(g, request, &req, out);
                    self.prepare_rebalance(g, now, out);
                } else {
                    g.members.get_mut(&member_id).unwrap().last_heard = now;
                    respond(out, request, Response::Join(g.join_response(&member_id)));
                }
            }
            GroupState::Empty | GroupState::Dead => respond(
                out,
                request,
                join_error(GroupError::UnknownMemberId, &member_id),
            ),
        }
    }

    /// KIP-345: a static member joining with an empty member id.
    fn static_join(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: JoinRequest,
        instance: &str,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let new_id = mint_member_id(instance, req.fresh_id);
        let Some(old_id) = g.instances.get(instance).cloned() else {
            return self.add_member(g, request, new_id, req, now, out);
        };
        // Replace the old incarnation: its parked requests are fenced, its place is inherited.
        let mut old = g
            .members
            .remove(&old_id)
            .expect("instance maps to a member");
        if let Some(join) = old.join.take() {
            respond(
                out,
                join.request,
                join_error(GroupError::FencedInstanceId, &old_id),
            );
        }
        if let Some(sync) = old.sync.take() {
            respond(out, sync, sync_error(GroupError::FencedInstanceId));
        }
        let was_leader = g.leader.as_deref() == Some(old_id.as_str());
        let mut member = old.clone();
        member.id = new_id.clone();
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.last_heard = now;
        g.members.insert(new_id.clone(), member);
        g.instances.insert(instance.to_string(), new_id.clone());
        if g.awaiting_sync.remove(&old_id) {
            g.awaiting_sync.insert(new_id.clone());
        }
        if was_leader {
            g.leader = Some(new_id.clone());
        }
        let mut req = req;
        req.member_id = new_id.clone();
        match g.state {
            GroupState::Stable => {
                let previous = g.protocol.clone();
                let before = g.members[&new_id].clone();
                {
                    let m = g.members.get_mut(&new_id).unwrap();
                    m.protocols = req.protocols.clone();
                    m.session_timeout_ms = req.session_timeout_ms;
                    m.rebalance_timeout_ms = req.rebalance_timeout_ms;
                }
                if g.select_protocol() == previous {
                    // No rebalance: persist the replacement, then hand back the generation.
                    let pending = Pending::StaticReplace {
                        request,
                        group: g.id.clone(),
                        old: Box::new(old),
                        new_id,
                        was_leader,
                        skip_assignment: req.supports_skip_assignment,
                        generation: g.generation,
                    };
                    self.append_group_record(g, now, pending, out);
                } else {
                    *g.members.get_mut(&new_id).unwrap() = before;
                    Self::park_join(g, request, &req, out);
                    self.prepare_rebalance(g, now, out);
                }
            }
            GroupState::CompletingRebalance => {
                Self::park_join(g, request, &req, out);
                self.prepare_rebalance(g, now, out);
            }
            GroupState::PreparingRebalance => {
                Self::park_join(g, request, &req, out);
                self.maybe_complete_join(g, now, out);
            }
            GroupState::Empty | GroupState::Dead => {
                unreachable!("a group with members is neither Empty nor Dead")
            }
        }
    }

    // ---------------------------------------------------------------- SyncGroup

    pub fn sync(&mut self, request: RequestId, req: SyncRequest, now: i64) -> Vec<Action> {
        let mut out = Vec::new();
        if req.group_id.is_empty() {
            respond(&mut out, request, sync_error(GroupError::InvalidGroupId));
            return out;
        }
        match self.gate(&req.group_id) {
            // Legacy answer while loading: old clients rejoin on it.
            Err(GroupError::CoordinatorLoadInProgress) => {
                respond(
                    &mut out,
                    request,
                    sync_error(GroupError::RebalanceInProgress),
                );
                return out;
            }
            Err(e) => {
                respond(&mut out, request, sync_error(e));
                return out;
            }
            Ok(()) => {}
        }
        let id = req.group_id.clone();
        let found = self.with_group(&id, |c, g| c.sync_group(g, request, req, now, &mut out));
        if found.is_none() {
            respond(&mut out, request, sync_error(GroupError::UnknownMemberId));
        }
        out
    }

    fn sync_group(
        &mut self,
        g: &mut Group,
        request: RequestId,
        req: SyncRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let fail = |out: &mut Vec<Action>, e| respond(out, request, sync_error(e));
        if g.state == GroupState::Dead {
            return fail(out, GroupError::CoordinatorNotAvailable);
        }
        if let Err(e) = g.validate(&req.member_id, req.instance_id.as_deref()) {
            return fail(out, e);
        }
        if req.generation != g.generation {
            return fail(out, GroupError::IllegalGeneration);
        }
        let type_differs = req
            .protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != g.protocol_type.as_ref());
        let name_differs = req
            .protocol_name
            .as_ref()
            .is_some_and(|n| Some(n) != g.protocol.as_ref());
        if type_differs || name_differs {
            return fail(out, GroupError::InconsistentGroupProtocol);
        }
        g.awaiting_sync.remove(&req.member_id);
        match g.state {
            GroupState::Empty => fail(out, GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => fail(out, GroupError::RebalanceInProgress),
            GroupState::Stable => {
                let m = g.members.get_mut(&req.member_id).unwrap();
                m.last_heard = now;
                let response = SyncResponse {
                    error: None,
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol.clone(),
                    assignment: m.assignment.clone(),
                };
                respond(out, request, Response::Sync(response));
            }
            GroupState::CompletingRebalance => {
                let m = g.members.get_mut(&req.member_id).unwrap();
                if let Some(old) = m.sync.replace(request) {
                    respond(out, old, sync_error(GroupError::RebalanceInProgress));
                }
                let is_leader = g.leader.as_deref() == Some(req.member_id.as_str());
                if is_leader && g.assignment_in_flight != Some(g.generation) {
                    let mut given: BTreeMap<String, Bytes> = req.assignments.into_iter().collect();
                    let assignments: BTreeMap<String, Bytes> = g
                        .members
                        .keys()
                        .map(|id| (id.clone(), given.remove(id).unwrap_or_default()))
                        .collect();
                    // Persist with the assignment in the record, apply once durable.
                    let mut snapshot = g.clone();
                    for (id, a) in &assignments {
                        snapshot.members.get_mut(id).unwrap().assignment = a.clone();
                    }
                    let partition = self.partition_of(&g.id).unwrap();
                    let record = (
                        records::group_key(&g.id),
                        Some(records::group_value(&snapshot.value(now))),
                    );
                    g.assignment_in_flight = Some(g.generation);
                    g.appends_in_flight += 1;
                    let pending = Pending::Assignment {
                        group: g.id.clone(),
                        generation: g.generation,
                        assignments,
                    };
                    self.append(partition, vec![record], pending, out);
                }
            }
            GroupState::Dead => unreachable!(),
        }
    }

    // ---------------------------------------------------------------- Heartbeat, LeaveGroup

    pub fn heartbeat(
        &mut self,
        request: RequestId,
        req: HeartbeatRequest,
        now: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let result = self.heartbeat_result(&req, now);
        respond(&mut out, request, Response::Heartbeat(result));
        out
    }

    fn heartbeat_result(&mut self, req: &HeartbeatRequest, now: i64) -> Option<GroupError> {
        if req.group_id.is_empty() {
            return Some(GroupError::InvalidGroupId);
        }
        match self.gate(&req.group_id) {
            Err(GroupError::CoordinatorLoadInProgress) => return None,
            Err(e) => return Some(e),
            Ok(()) => {}
        }
        let id = req.group_id.clone();
        self.with_group(&id, |_, g| {
            if g.state == GroupState::Dead {
                return Some(GroupError::CoordinatorNotAvailable);
            }
            if let Err(e) = g.validate(&req.member_id, req.instance_id.as_deref()) {
                return Some(e);
            }
            if req.generation != g.generation {
                return Some(GroupError::IllegalGeneration);
            }
            let m = g.members.get_mut(&req.member_id).unwrap();
            match g.state {
                GroupState::Empty => Some(GroupError::UnknownMemberId),
                GroupState::PreparingRebalance => {
                    m.last_heard = now;
                    Some(GroupError::RebalanceInProgress)
                }
                _ => {
                    m.last_heard = now;
                    None
                }
            }
        })
        .unwrap_or(Some(GroupError::UnknownMemberId))
    }

    pub fn leave(
        &mut self,
        request: RequestId,
        group_id: &str,
        members: Vec<LeavingMember>,
        now: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let top = if group_id.is_empty() {
            Some(GroupError::InvalidGroupId)
        } else {
            self.gate(group_id).err()
        };
        if let Some(e) = top {
            let response = LeaveResponse {
                error: Some(e),
                members: vec![Some(e); members.len()],
            };
            respond(&mut out, request, Response::Leave(response));
            return out;
        }
        let mut results = Vec::with_capacity(members.len());
        let found = self.with_group(group_id, |c, g| {
            for leaving in &members {
                results.push(c.leave_one(g, leaving, now, &mut out));
            }
        });
        if found.is_none() {
            results = vec![Some(GroupError::UnknownMemberId); members.len()];
        }
        let response = LeaveResponse {
            error: None,
            members: results,
        };
        respond(&mut out, request, Response::Leave(response));
        out
    }

    fn leave_one(
        &mut self,
        g: &mut Group,
        leaving: &LeavingMember,
        now: i64,
        out: &mut Vec<Action>,
    ) -> Option<GroupError> {
        if g.state == GroupState::Dead {
            return Some(GroupError::CoordinatorNotAvailable);
        }
        let member_id = if leaving.member_id.is_empty() {
            // An admin removing a static member by instance id.
            match leaving
                .instance_id
                .as_ref()
                .and_then(|i| g.instances.get(i))
            {
                Some(id) => id.clone(),
                None => return Some(GroupError::UnknownMemberId),
            }
        } else {
            if g.pending.remove(&leaving.member_id).is_some() {
                self.maybe_complete_join(g, now, out);
                return None;
            }
            if let Err(e) = g.validate(&leaving.member_id, leaving.instance_id.as_deref()) {
                return Some(e);
            }
            leaving.member_id.clone()
        };
        self.remove_member_and_react(g, &member_id, now, out);
        None
    }

    // ---------------------------------------------------------------- offsets

    pub fn commit(&mut self, request: RequestId, req: CommitRequest, now: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let all = |e: GroupError| CommitResponse {
            partitions: req
                .offsets
                .iter()
                .map(|o| (o.topic.clone(), o.partition, Some(e)))
                .collect(),
        };
        let refuse = |out: &mut Vec<Action>, e| respond(out, request, Response::Commit(all(e)));
        if let Err(e) = self.gate(&req.group_id) {
            refuse(&mut out, e);
            return out;
        }
        if req.offsets.len() > MAX_PARTITIONS_PER_REQUEST {
            refuse(&mut out, GroupError::InvalidCommitOffsetSize);
            return out;
        }
        if !self.groups.contains_key(&req.group_id) {
            if req.generation >= 0 {
                refuse(&mut out, req.unknown_group);
                return out;
            }
            if self.groups.len() >= self.config.max_groups {
                refuse(&mut out, GroupError::CoordinatorNotAvailable);
                return out;
            }
            // A simple group: commits only (`assign()` users, admin tools).
            self.groups
                .insert(req.group_id.clone(), Group::new(&req.group_id, now));
        }
        let mut response = CommitResponse::default();
        let mut accepted = Vec::new();
        let mut batch = Vec::new();
        for (i, o) in req.offsets.iter().enumerate() {
            let metadata = o.metadata.clone().unwrap_or_default();
            if metadata.len() > self.config.offset_metadata_max_bytes {
                response.partitions.push((
                    o.topic.clone(),
                    o.partition,
                    Some(GroupError::OffsetMetadataTooLarge),
                ));
                continue;
            }
            response
                .partitions
                .push((o.topic.clone(), o.partition, None));
            let value = OffsetValue {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata,
                commit_timestamp: now,
                expire_timestamp: (req.retention_ms >= 0).then(|| now + req.retention_ms),
            };
            batch.push((
                records::offset_key(&req.group_id, &o.topic, o.partition),
                Some(records::offset_value(&value)),
            ));
            accepted.push((i, value));
        }
        let id = req.group_id.clone();
        let will_append = !batch.is_empty();
        let verdict = self
            .with_group(&id, |_, g| {
                let verdict = Self::commit_verdict(g, &req, now);
                if verdict.is_ok() && will_append {
                    // Counted before `with_group` decides whether to forget the group.
                    g.appends_in_flight += 1;
                }
                verdict
            })
            .expect("group exists");
        if let Err(e) = verdict {
            refuse(&mut out, e);
            return out;
        }
        if batch.is_empty() {
            respond(&mut out, request, Response::Commit(response));
            return out;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let partition = self.partition_of(&id).unwrap();
        let pending = Pending::Commit {
            request,
            group: id,
            accepted,
            response,
            seq,
        };
        self.append(partition, batch, pending, &mut out);
        out
    }

    /// Whether a commit may be written (`validateOffsetCommit`); refreshes the session.
    fn commit_verdict(g: &mut Group, req: &CommitRequest, now: i64) -> Result<(), GroupError> {
        if g.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if let Some(c) = &g.consumer {
            // The generation field carries the member epoch (OffsetCommit v9).
            return c.validate_commit(&req.member_id, req.generation);
        }
        #[cfg(madsim)]
        if req.generation >= 0
            && req.generation < g.generation
            && crate::config::planted::active(crate::config::PlantedBug::GroupCommitStaleGeneration)
        {
            return Ok(());
        }
        let is_member_commit =
            req.generation >= 0 || !req.member_id.is_empty() || req.instance_id.is_some();
        if req.generation < 0 && g.state == GroupState::Empty {
            return Ok(());
        }
        if !is_member_commit {
            return Err(GroupError::UnknownMemberId);
        }
        g.validate(&req.member_id, req.instance_id.as_deref())?;
        if req.generation != g.generation {
            return Err(GroupError::IllegalGeneration);
        }
        match g.state {
            GroupState::CompletingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::Stable | GroupState::PreparingRebalance => {
                g.members.get_mut(&req.member_id).unwrap().last_heard = now;
                Ok(())
            }
            GroupState::Empty => Ok(()),
            GroupState::Dead => unreachable!(),
        }
    }

    /// Committed offsets of a group: all of them (`None`), or the named partitions (-1 for
    /// those without a commit). Group state does not matter.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<CommittedOffset>, GroupError> {
        self.gate(group_id)?;
        let group = self.groups.get(group_id);
        let entry = |(topic, partition): &(String, i32)| match group
            .and_then(|g| g.offsets.get(&(topic.clone(), *partition)))
        {
            Some(c) => CommittedOffset {
                topic: topic.clone(),
                partition: *partition,
                offset: c.value.offset,
                leader_epoch: c.value.leader_epoch,
                metadata: c.value.metadata.clone(),
            },
            None => CommittedOffset {
                topic: topic.clone(),
                partition: *partition,
                offset: -1,
                leader_epoch: -1,
                metadata: String::new(),
            },
        };
        Ok(match partitions {
            Some(list) => list.iter().map(entry).collect(),
            None => group
                .map(|g| g.offsets.keys().map(entry).collect())
                .unwrap_or_default(),
        })
    }

    pub fn list_groups(&self) -> (Option<GroupError>, Vec<GroupListing>) {
        let loading = self.partitions.values().any(|l| *l == Load::Loading);
        let groups = self
            .groups
            .values()
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
                state_name: match &g.consumer {
                    Some(c) => c.state().name(),
                    None => g.state.name(),
                },
                group_type: if g.consumer.is_some() {
                    "consumer"
                } else {
                    "classic"
                },
            })
            .collect();
        (
            loading.then_some(GroupError::CoordinatorLoadInProgress),
            groups,
        )
    }

    pub fn describe_group(&self, group_id: &str) -> GroupDescription {
        let mut d = GroupDescription {
            error: None,
            group_id: group_id.to_string(),
            state: GroupState::Dead,
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        };
        if let Err(e) = self.gate(group_id) {
            d.error = Some(e);
            return d;
        }
        let Some(g) = self.groups.get(group_id) else {
            return d;
        };
        if g.consumer.is_some() {
            // Kafka's DescribeGroups knows only classic groups: a consumer group is "not found"
            // there (admin clients use ConsumerGroupDescribe for it).
            return d;
        }
        let stable = g.state == GroupState::Stable;
        let protocol = g.protocol.clone().unwrap_or_default();
        d.state = g.state;
        d.protocol_type = g.protocol_type.clone().unwrap_or_default();
        d.protocol = if stable {
            protocol.clone()
        } else {
            String::new()
        };
        let mut members: Vec<&Member> = g.members.values().collect();
        members.sort_by_key(|m| m.seq);
        d.members = members
            .into_iter()
            .map(|m| MemberDescription {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata(&protocol)
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        d
    }

    /// DeleteGroups for one group: only an Empty group goes, with all its offsets.
    pub fn delete_group(&mut self, request: RequestId, group_id: &str, now: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let deny = |out: &mut Vec<Action>, e| respond(out, request, Response::Delete(Err(e)));
        if let Err(e) = self.gate(group_id) {
            deny(&mut out, e);
            return out;
        }
        let Some(g) = self.groups.get_mut(group_id) else {
            deny(&mut out, GroupError::GroupIdNotFound);
            return out;
        };
        if g.consumer.as_ref().is_some_and(|c| !c.is_empty()) {
            deny(&mut out, GroupError::NonEmptyGroup);
            return out;
        }
        match g.state {
            GroupState::Dead => {
                return {
                    deny(&mut out, GroupError::GroupIdNotFound);
                    out
                }
            }
            GroupState::Empty => {}
            _ => {
                return {
                    deny(&mut out, GroupError::NonEmptyGroup);
                    out
                }
            }
        }
        let mut batch: Vec<OffsetRecord> = g
            .offsets
            .keys()
            .map(|(t, p)| (records::offset_key(group_id, t, *p), None))
            .collect();
        batch.push((records::group_key(group_id), None));
        if let Some(c) = g.consumer.as_mut() {
            batch.extend(c.tombstones());
        }
        g.appends_in_flight += 1;
        let partition = self.partition_of(group_id).unwrap();
        let _ = now;
        let pending = Pending::Delete {
            request,
            group: group_id.to_string(),
            keys: None,
            results: Vec::new(),
        };
        self.append(partition, batch, pending, &mut out);
        out
    }

    /// OffsetDelete (KIP-496).
    pub fn delete_offsets(
        &mut self,
        request: RequestId,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let deny = |out: &mut Vec<Action>, e| respond(out, request, Response::Delete(Err(e)));
        if let Err(e) = self.gate(group_id) {
            deny(&mut out, e);
            return out;
        }
        if partitions.len() > MAX_PARTITIONS_PER_REQUEST {
            deny(&mut out, GroupError::InvalidCommitOffsetSize);
            return out;
        }
        let Some(g) = self.groups.get_mut(group_id) else {
            deny(&mut out, GroupError::GroupIdNotFound);
            return out;
        };
        let consumer_subscribed = g
            .consumer
            .as_ref()
            .filter(|c| !c.is_empty())
            .map(|c| c.subscribed_topic_names());
        let subscribed: Option<BTreeSet<String>> = match g.state {
            _ if consumer_subscribed.is_some() => consumer_subscribed,
            GroupState::Dead => {
                deny(&mut out, GroupError::GroupIdNotFound);
                return out;
            }
            GroupState::Empty => Some(BTreeSet::new()),
            _ if g.protocol_type.as_deref() == Some("consumer") => {
                Some(g.subscribed_topics().unwrap_or_default())
            }
            _ => {
                deny(&mut out, GroupError::NonEmptyGroup);
                return out;
            }
        };
        // A consumer group whose subscriptions do not parse counts as subscribed to everything.
        let all_subscribed = g.state != GroupState::Empty
            && g.consumer.is_none()
            && g.protocol_type.as_deref() == Some("consumer")
            && g.subscribed_topics().is_none();
        let subscribed = subscribed.unwrap_or_default();
        let mut results = Vec::with_capacity(partitions.len());
        let mut keys = Vec::new();
        for (topic, partition) in partitions {
            if all_subscribed || subscribed.contains(&topic) {
                results.push((topic, partition, Some(GroupError::GroupSubscribedToTopic)));
            } else {
                if g.offsets.contains_key(&(topic.clone(), partition)) {
                    keys.push((topic.clone(), partition));
                }
                results.push((topic, partition, None));
            }
        }
        if keys.is_empty() {
            respond(&mut out, request, Response::Delete(Ok(results)));
            return out;
        }
        let batch = keys
            .iter()
            .map(|(t, p)| (records::offset_key(group_id, t, *p), None))
            .collect();
        g.appends_in_flight += 1;
        let partition = self.partition_of(group_id).unwrap();
        let pending = Pending::Delete {
            request,
            group: group_id.to_string(),
            keys: Some(keys),
            results,
        };
        self.append(partition, batch, pending, &mut out);
        out
    }

    /// Offset expiry (KIP-211), run every `offsets.retention.check.interval.ms`.
    pub fn expire_offsets(&mut self, now: i64) -> Vec<Action> {
        let mut out = Vec::new();
        let retention = self.config.offsets_retention_ms;
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for id in ids {
            let g = self.groups.get_mut(&id).unwrap();
            let expired_by = |c: &Committed, base: i64| match c.value.expire_timestamp {
                Some(at) => now >= at,
                None => now - base >= retention,
            };
            let consumer_subscribed = g
                .consumer
                .as_ref()
                .filter(|c| !c.is_empty())
                .map(|c| c.subscribed_topic_names());
            let keys: Vec<((String, i32), u64)> = match g.state {
                // A live consumer group: only offsets of topics nobody subscribes to expire.
                _ if consumer_subscribed.is_some() => {
                    let topics = consumer_subscribed.unwrap_or_default();
                    g.offsets
                        .iter()
                        .filter(|((t, _), c)| {
                            !topics.contains(t) && expired_by(c, c.value.commit_timestamp)
                        })
                        .map(|(k, c)| (k.clone(), c.seq))
                        .collect()
                }
                GroupState::Empty if g.protocol_type.is_some() => g
                    .offsets
                    .iter()
                    .filter(|(_, c)| expired_by(c, g.state_since.max(c.value.commit_timestamp)))
                    .map(|(k, c)| (k.clone(), c.seq))
                    .collect(),
                GroupState::Empty => g
                    .offsets
                    .iter()
                    .filter(|(_, c)| expired_by(c, c.value.commit_timestamp))
                    .map(|(k, c)| (k.clone(), c.seq))
                    .collect(),
                GroupState::Stable => match g.subscribed_topics() {
                    Some(topics) => g
                        .offsets
                        .iter()
                        .filter(|((t, _), c)| {
                            !topics.contains(t) && expired_by(c, c.value.commit_timestamp)
                        })
                        .map(|(k, c)| (k.clone(), c.seq))
                        .collect(),
                    None => Vec::new(),
                },
                _ => Vec::new(),
            };
            if g.appends_in_flight > 0 {
                continue;
            }
            // An empty consumer group left with no offsets is deleted (Kafka's
            // `cleanupGroupMetadata`): its records become tombstones.
            let consumer_gone =
                g.consumer.as_ref().is_some_and(|c| c.is_empty()) && keys.len() == g.offsets.len();
            if keys.is_empty() && !(consumer_gone && g.consumer.as_ref().unwrap().has_records()) {
                continue;
            }
            let mut batch: Vec<OffsetRecord> = keys
                .iter()
                .map(|((t, p), _)| (records::offset_key(&id, t, *p), None))
                .collect();
            let empties = g.state == GroupState::Empty && keys.len() == g.offsets.len();
            if empties && g.generation > 0 {
                batch.push((records::group_key(&id), None));
            }
            if consumer_gone {
                batch.extend(g.consumer.as_mut().unwrap().tombstones());
            }
            g.appends_in_flight += 1;
            let partition = self.partition_of(&id).unwrap();
            self.append(
                partition,
                batch,
                Pending::Expire { group: id, keys },
                &mut out,
            );
        }
        out
    }

    // ---------------------------------------------------------------- append completion

    /// An append this coordinator asked for is committed (`Ok`) or failed.
    pub fn append_done(
        &mut self,
        token: AppendToken,
        result: Result<(), AppendError>,
        now: i64,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let pending = self.pending.remove(&token).expect("unknown append token");
        let group_id = match &pending {
            Pending::Commit { group, .. }
            | Pending::Assignment { group, .. }
            | Pending::StaticReplace { group, .. }
            | Pending::GroupRecord { group }
            | Pending::ConsumerHeartbeat { group, .. }
            | Pending::Delete { group, .. }
            | Pending::Expire { group, .. } => group.clone(),
        };
        let found = self.with_group(&group_id, |c, g| {
            assert!(g.appends_in_flight > 0);
            g.appends_in_flight -= 1;
            c.complete(g, pending, result, now, &mut out);
        });
        assert!(found.is_some(), "a group with appends in flight is kept");
        out
    }

    fn complete(
        &mut self,
        g: &mut Group,
        pending: Pending,
        result: Result<(), AppendError>,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let error = result.err().map(AppendError::to_group_error);
        match pending {
            Pending::Commit {
                request,
                accepted,
                mut response,
                seq,
                ..
            } => {
                for (i, value) in accepted {
                    let slot = &mut response.partitions[i];
                    if let Some(e) = error {
                        slot.2 = Some(e);
                        continue;
                    }
                    let key = (slot.0.clone(), slot.1);
                    let newer = g.offsets.get(&key).is_some_and(|c| c.seq > seq);
                    if !newer {
                        g.offsets.insert(key, Committed { value, seq });
                    }
                }
                respond(out, request, Response::Commit(response));
            }
            Pending::Assignment {
                generation,
                assignments,
                ..
            } => {
                if g.assignment_in_flight == Some(generation) {
                    g.assignment_in_flight = None;
                }
                if g.generation != generation || g.state != GroupState::CompletingRebalance {
                    return; // A rebalance already failed the parked syncs.
                }
                if let Some(e) = error {
                    for m in g.members.values_mut() {
                        if let Some(sync) = m.sync.take() {
                            respond(out, sync, sync_error(e));
                        }
                    }
                    self.prepare_rebalance(g, now, out);
                    return;
                }
                for (id, assignment) in assignments {
                    if let Some(m) = g.members.get_mut(&id) {
                        m.assignment = assignment;
                    }
                }
                for m in g.members.values_mut() {
                    if let Some(sync) = m.sync.take() {
                        m.last_heard = now;
                        let response = SyncResponse {
                            error: None,
                            protocol_type: g.protocol_type.clone(),
                            protocol_name: g.protocol.clone(),
                            assignment: m.assignment.clone(),
                        };
                        respond(out, sync, Response::Sync(response));
                    }
                }
                g.transition(GroupState::Stable, now);
            }
            Pending::StaticReplace {
                request,
                old,
                new_id,
                was_leader,
                skip_assignment,
                generation,
                ..
            } => {
                let still = g.generation == generation
                    && g.state == GroupState::Stable
                    && g.members.contains_key(&new_id);
                if let Some(e) = error {
                    if still {
                        // Revert: the old incarnation keeps its place.
                        let instance = old.instance_id.clone().unwrap();
                        g.members.remove(&new_id);
                        g.instances.insert(instance, old.id.clone());
                        if was_leader {
                            g.leader = Some(old.id.clone());
                        }
                        g.members.insert(old.id.clone(), *old);
                    }
                    respond(out, request, join_error(e, ""));
                    return;
                }
                if !still {
                    respond(
                        out,
                        request,
                        join_error(GroupError::RebalanceInProgress, &new_id),
                    );
                    return;
                }
                let mut response = g.join_response(&new_id);
                if was_leader {
                    if skip_assignment {
                        response.skip_assignment = true;
                    } else {
                        // Below v9 the leader is told the old leader id so it does not reassign.
                        response.leader = old.id.clone();
                        response.members.clear();
                    }
                }
                g.members.get_mut(&new_id).unwrap().last_heard = now;
                respond(out, request, Response::Join(response));
            }
            // Nothing waits on it: a lost record only means a restart finds the previous state.
            Pending::GroupRecord { .. } => {}
            Pending::ConsumerHeartbeat {
                request, response, ..
            } => {
                let response = match error {
                    Some(e) => super::consumer::HeartbeatResponse::error(
                        e,
                        "The group change could not be written to __consumer_offsets.",
                    ),
                    None => response,
                };
                respond(out, request, Response::ConsumerHeartbeat(response));
            }
            Pending::Delete {
                request,
                keys,
                results,
                ..
            } => {
                if let Some(e) = error {
                    respond(out, request, Response::Delete(Err(e)));
                    return;
                }
                match keys {
                    Some(keys) => {
                        for k in keys {
                            g.offsets.remove(&k);
                        }
                    }
                    None => {
                        g.offsets.clear();
                        if g.state == GroupState::Empty {
                            g.transition(GroupState::Dead, now);
                        }
                    }
                }
                respond(out, request, Response::Delete(Ok(results)));
            }
            Pending::Expire { keys, .. } => {
                if error.is_some() {
                    return;
                }
                for (k, seq) in keys {
                    if g.offsets.get(&k).is_some_and(|c| c.seq == seq) {
                        g.offsets.remove(&k);
                    }
                }
                if g.state == GroupState::Empty && g.offsets.is_empty() && g.appends_in_flight == 0
                {
                    g.transition(GroupState::Dead, now);
                }
            }
        }
    }

    // ---------------------------------------------------------------- introspection (tests)

    pub fn group_state(&self, group_id: &str) -> Option<(GroupState, i32)> {
        self.groups.get(group_id).map(|g| (g.state, g.generation))
    }

    pub fn member_ids(&self, group_id: &str) -> Vec<String> {
        self.groups
            .get(group_id)
            .map(|g| g.members.keys().cloned().collect())
            .unwrap_or_default()
    }
}
