//! The group coordinator core: every group led by this node, their members, their committed
//! offsets, the timers that bound every wait, and the offsets-log appends in flight.
//!
//! Split the way Kafka's `group-coordinator` module is (a shard dispatching to one manager per
//! concern), each file with one job:
//! - `events`: the contract. [`Event`]s in with `now` through [`Coordinator::step`] (the named
//!   methods `join`, `commit`, `tick`… are shorthands for it), [`Action`]s out (answers and
//!   records to append), [`Coordinator::next_deadline`] for the driver's timer; preconditions
//!   asserted on entry, invariants checked after every step.
//! - `group`: one group entry (classic state, committed offsets, an optional KIP-848 group).
//! - `classic/`: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the rebalance they drive
//!   (Kafka's `classic/` and the classic half of `GroupMetadataManager`).
//! - `consumer_protocol`: ConsumerGroupHeartbeat and ConsumerGroupDescribe, on the KIP-848
//!   state machine in `group::consumer` (Kafka's `modern/consumer`).
//! - `offsets/`: commit, fetch, delete and expiry of committed offsets (`OffsetMetadataManager`).
//! - `admin`: ListGroups, DescribeGroups, DeleteGroups.
//! - `loading`: the offsets partitions held, the replay of `__consumer_offsets` records into
//!   groups, unloading, and the gate every request passes (`GroupCoordinatorShard.replay`).
//! - `timers`: the per-group deadline index and what a tick runs (`CoordinatorTimer`).
//! - `appends`: appends in flight and the dispatch of their completions; each request's file
//!   owns its completion.
//! - `invariants`: the checks of the invariants stated on [`Coordinator`].

mod admin;
mod appends;
mod classic;
mod config;
mod consumer_protocol;
mod events;
mod group;
mod invariants;
mod loading;
mod offsets;
mod timers;

use std::collections::{BTreeMap, BTreeSet};

use super::consumer::ConsumerGroup;
use super::member::Member;
use super::records::OffsetValue;
use super::types::*;
use appends::Pending;
use config::MAX_PARTITIONS_PER_REQUEST;
pub use config::{GroupConfig, MAX_MEMBERS};
pub use events::Event;
use loading::{Load, Loaded};

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

/// One group entry: its classic state, its committed offsets, and its KIP-848 state when it
/// speaks the consumer protocol.
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
    /// Transactional offsets waiting for their transaction's marker, by producer id (never an
    /// empty map). Their sequence numbers place them in log order among the commits.
    pending_txn: BTreeMap<i64, BTreeMap<(String, i32), Committed>>,
    appends_in_flight: usize,
    /// Set when the group speaks the consumer protocol (KIP-848): then the classic fields stay
    /// empty (state Empty, no members) and only the offsets above are shared.
    consumer: Option<Box<ConsumerGroup>>,
    /// Planted `group-keeps-departed-member`: removed members still listed to the leader.
    #[cfg(any(madsim, test))]
    departed: Vec<Member>,
}

/// The group coordinator state machine: [`Event`]s in through [`Coordinator::step`] with `now`,
/// [`Action`]s out, [`Coordinator::next_deadline`] for the driver's timer.
///
/// # Invariants (checked after every step in tests, debug builds and the simulator)
/// - Timers: `timers` and `armed` mirror each other, and each group's armed deadline is exactly
///   its `Group::deadline()` (none for a group no longer held), so a tick never misses a due
///   member, a pending id or a join/sync timeout.
/// - Appends: every append in flight names a group that is held, each group's
///   `appends_in_flight` equals the appends naming it, and tokens are below `next_token`.
/// - Classic groups: the leader is a member exactly when there are members; Empty holds no
///   member; a parked JoinGroup only in PreparingRebalance, a parked SyncGroup only in
///   CompletingRebalance; the join deadline is armed exactly in PreparingRebalance, the sync
///   deadline only while completing or stable; members awaiting sync are members; static
///   instances map to members of that instance; pending ids are not members; members plus
///   pending ids stay within `MAX_MEMBERS`. Members carry no generation of their own: every
///   generation the coordinator still acts on (an assignment or static replacement being
///   written) is ≤ the group's generation.
/// - Consumer groups (KIP-848, `ConsumerGroup::check`): member epoch ≤ assignment epoch ≤ group
///   epoch, each partition held by at most one member (assignments disjoint), the owners map
///   exactly what members hold; such a group's classic side is Empty (or Dead) with no members.
/// - Offsets: every committed or pending transactional offset's sequence number is below
///   `next_seq`; no producer holds an empty set of pending offsets.
/// - Requests: a request id is parked at most once, and a step answers each request at most
///   once and never leaves an answered request parked.
/// - Loading: a partition being replayed is held as `Loading`, and only such partitions have a
///   replay buffer.
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

impl Coordinator {
    pub fn new(config: GroupConfig) -> Coordinator {
        assert!(config.min_session_timeout_ms <= config.max_session_timeout_ms);
        assert!(config.initial_rebalance_delay_ms >= 0);
        assert!(config.max_groups > 0 && config.max_size > 0);
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

    /// The next commit sequence number (append order of offsets).
    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
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
