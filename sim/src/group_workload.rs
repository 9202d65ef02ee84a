//! Consumer groups in the simulator: classic members (KIP-848 ones are `consumer_workload`'s)
//! that `subscribe` to the workload's topic through Weir's own client (JoinGroup, SyncGroup with the range assignor run by the leader,
//! Heartbeat, fetch, commit after processing, LeaveGroup), as Kafka's Java consumer does with
//! the classic protocol, plus an observer that keeps reading the committed offsets. Before the
//! faults heal, members also churn: leave and come back, crash and come back, or stall past
//! their session timeout and then carry on with their old generation. Everything they see goes
//! into the history as [`GroupEvent`]s for `group_check`. Every loop is bounded by the run's
//! deadline; every call by a time-out.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use madsim::rand::Rng;
use weir::client::group_member::{
    decode_assignment, decode_subscription, encode_assignment, range_assign,
};
use weir::client::{Client, ClientError};
use weir::io::Io;

use crate::group_check::{Churn, GroupEvent};
use crate::group_route::{connect_coordinator, coordinator_moved, LeaderFetch, MemberRead};
use crate::history::{Event, History};
use crate::scenario::{GroupProtocol, Groups};
use crate::workload::{connect, decode, RunClock, RECONNECT_BACKOFF};

/// What every member and the observer of a run share.
#[derive(Clone, Debug)]
pub struct GroupsSpec {
    pub groups: Groups,
    pub addr: SocketAddr,
    /// Every broker, in a cluster (coordinators are found and partitions fetched through
    /// them, `group_route`); empty on one node, where `addr` is all there is.
    pub bootstrap: Vec<SocketAddr>,
    pub topic: String,
    pub partitions: i32,
    /// Bound on each request (not on a parked join, which adds the rebalance timeout).
    pub timeout: Duration,
    /// Churn stops here (when the faults heal).
    pub churn_until_ms: u64,
    /// Members and the observer stop here (after the drain).
    pub until_ms: u64,
}

/// Each fetch waits at most this long for data (a consumer's `fetch.max.wait.ms`, short so
/// that heartbeats stay on time with several partitions owned).
pub(crate) const FETCH_WAIT: Duration = Duration::from_millis(50);
/// How often the observer reads the committed offsets.
const OBSERVE_EVERY: Duration = Duration::from_millis(500);
/// A member that left or crashed comes back after this long: [min, max] ms.
pub(crate) const RETURN_MS: [u64; 2] = [500, 3000];
/// A stall lasts the session timeout plus this much: [min, max] ms.
pub(crate) const STALL_EXTRA_MS: [u64; 2] = [1000, 3000];

impl GroupsSpec {
    /// The brokers to ask for a coordinator.
    pub(crate) fn coordinator_bootstrap(&self) -> &[SocketAddr] {
        if self.bootstrap.is_empty() {
            std::slice::from_ref(&self.addr)
        } else {
            &self.bootstrap
        }
    }
}

/// Which broker a member found coordinating its group (the trace shows each failover).
pub(crate) fn coordinator_note(member: &str, group: u32, node: i32) -> String {
    format!("{member}: group-{group}'s coordinator is node {node}")
}

/// Whether a member goes away in the `elapsed_ms` since its last draw, and how: each kind at
/// its per-minute rate, leave before crash before stall (classic and KIP-848 members alike).
pub(crate) fn churn_in(g: &Groups, elapsed_ms: u64) -> Option<Churn> {
    let minutes = elapsed_ms as f64 / 60_000.0;
    let mut rng = madsim::rand::thread_rng();
    for (rate, what) in [
        (g.leaves_per_min, Churn::Leave),
        (g.crashes_per_min, Churn::Crash),
        (g.stalls_per_min, Churn::Stall),
    ] {
        let p = (rate * minutes).min(1.0);
        if p > 0.0 && rng.gen_bool(p) {
            return Some(what);
        }
    }
    None
}

pub use crate::group_check::group_name;

/// The consumer id a member's librdkafka-like fetcher records its validations under (standalone
/// consumers are 0..32).
pub(crate) fn member_id_number(group: u32, slot: u32) -> u32 {
    1000 + group * 100 + slot
}

/// What a member processed: with the serving replica's high watermark when it fetched as
/// librdkafka does (the checker judges those reads as a consumer's too).
pub(crate) fn read_event(
    group: u32,
    member: &str,
    generation: i32,
    (partition, offset, value, high_watermark): &MemberRead,
) -> GroupEvent {
    match high_watermark {
        None => GroupEvent::Read {
            group,
            member: member.to_string(),
            generation,
            partition: *partition,
            offset: *offset,
            value: value.clone(),
        },
        Some(hw) => GroupEvent::ReadServed {
            group,
            member: member.to_string(),
            generation,
            partition: *partition,
            offset: *offset,
            value: value.clone(),
            high_watermark: *hw,
        },
    }
}

/// Advances each position past the records processed.
pub(crate) fn advance(positions: &mut BTreeMap<i32, i64>, records: &[MemberRead]) {
    for (p, o, _, _) in records {
        let at = positions.entry(*p).or_insert(0);
        *at = (*at).max(o + 1);
    }
}

/// Commit ops: the top byte says "group", then the group, the member slot and a counter.
pub(crate) fn commit_op(group: u32, slot: u32, n: u64) -> u64 {
    0xC0 << 56 | (group as u64 & 0xff) << 48 | (slot as u64 & 0xff) << 40 | (n & 0xff_ffff_ffff)
}

/// One member slot: a consumer that comes back as a new member after it leaves or crashes.
struct Member {
    spec: GroupsSpec,
    group: u32,
    slot: u32,
    incarnation: u32,
    name: String,
    /// The connection to the group's coordinator.
    client: Option<Client>,
    /// Coordinator lookups so far (each asks the next bootstrap broker).
    lookups: u64,
    fetcher: LeaderFetch,
    member_id: String,
    /// The generation and partitions this member holds (`None`: it must (re)join).
    joined: Option<(i32, Vec<i32>)>,
    /// Next offset to process, per owned partition.
    positions: BTreeMap<i32, i64>,
    /// What this member last had acknowledged, per partition (nothing new: no commit).
    committed: BTreeMap<i32, i64>,
    last_heartbeat_ms: u64,
    last_churn_check_ms: u64,
    commits: u64,
    history: History,
    clock: RunClock,
    io: Io,
}

/// What an error tells a member to do next.
enum Next {
    /// Keep the generation; try again after a pause.
    Retry,
    /// Rejoin with this member id.
    Rejoin,
    /// Rejoin as a new member.
    Reset,
    /// The connection is gone.
    Reconnect,
}

fn next_after(e: &ClientError) -> Next {
    if coordinator_moved(e) {
        return Next::Reconnect;
    }
    match e {
        ClientError::Kafka(ResponseError::RebalanceInProgress, _)
        | ClientError::Kafka(ResponseError::IllegalGeneration, _) => Next::Rejoin,
        ClientError::Kafka(ResponseError::UnknownMemberId, _)
        | ClientError::Kafka(ResponseError::FencedInstanceId, _) => Next::Reset,
        ClientError::Kafka(_, _) => Next::Retry,
        ClientError::Io(_) | ClientError::Timeout | ClientError::Protocol(_) => Next::Reconnect,
    }
}

impl Member {
    fn record(&self, event: GroupEvent) {
        self.history
            .record(self.clock.now_ms(), Event::Group(event));
    }

    fn group_name(&self) -> String {
        group_name(self.group)
    }

    fn record_coordinator(&self, node: i32) {
        self.history.record(
            self.clock.now_ms(),
            Event::Note(coordinator_note(&self.name, self.group, node)),
        );
    }

    /// Acts on a failed call: forget the generation, the member id or the connection.
    async fn on_error(&mut self, call: &str, e: &ClientError) {
        self.record(GroupEvent::Error {
            group: self.group,
            member: self.name.clone(),
            call: call.to_string(),
            error: e.to_string(),
        });
        match next_after(e) {
            Next::Rejoin => self.drop_generation(),
            Next::Reset => {
                self.drop_generation();
                self.member_id.clear();
            }
            Next::Retry => self.io.clock.sleep(RECONNECT_BACKOFF).await,
            Next::Reconnect => {
                self.client = None;
                self.io.clock.sleep(RECONNECT_BACKOFF).await;
            }
        }
    }

    fn drop_generation(&mut self) {
        self.joined = None;
        self.positions.clear();
        self.committed.clear();
    }

    async fn ensure_connected(&mut self) -> bool {
        if self.client.is_some() {
            return true;
        }
        // As a real client's first step: FindCoordinator (which makes sure
        // `__consumer_offsets` exists), then a connection to the broker it names.
        self.lookups += 1;
        let found = connect_coordinator(
            &self.io,
            self.spec.coordinator_bootstrap(),
            self.lookups,
            &self.group_name(),
            self.spec.timeout,
        )
        .await;
        match found {
            Ok((c, node)) => {
                self.record_coordinator(node);
                self.client = Some(c);
                true
            }
            Err(_) => {
                self.io.clock.sleep(RECONNECT_BACKOFF).await;
                false
            }
        }
    }

    /// JoinGroup, the leader's range assignment, SyncGroup, then the committed offsets of what
    /// it got (earliest where nothing is committed).
    async fn join(&mut self) -> Result<(), ClientError> {
        let g = &self.spec.groups;
        let (session, rebalance) = (g.session_timeout_ms as i32, g.rebalance_timeout_ms as i32);
        let group = self.group_name();
        let topic = self.spec.topic.clone();
        let client = self.client.as_mut().expect("connected");
        let joined = client
            .join_group(&group, &self.member_id, session, rebalance, &[&topic])
            .await;
        let joined = match joined {
            Ok(j) => j,
            Err(e) => {
                if let ClientError::Kafka(ResponseError::MemberIdRequired, _) = e {
                    self.member_id.clear();
                }
                return Err(e);
            }
        };
        self.member_id = joined.member_id.clone();
        let mut assignments = BTreeMap::new();
        if joined.is_leader() {
            let members: Vec<(String, Vec<String>)> = joined
                .members
                .iter()
                .map(|(id, meta)| (id.clone(), decode_subscription(meta).unwrap_or_default()))
                .collect();
            let counts = BTreeMap::from([(topic.clone(), self.spec.partitions)]);
            for (id, partitions) in range_assign(&members, &counts) {
                assignments.insert(id, encode_assignment(&partitions));
            }
        }
        let bytes: Bytes = client
            .sync_group(&group, &joined, &assignments, rebalance)
            .await?;
        let mut assigned = decode_assignment(&bytes)?;
        let partitions = assigned.remove(&topic).unwrap_or_default();
        self.record(GroupEvent::Assigned {
            group: self.group,
            member: self.name.clone(),
            member_id: self.member_id.clone(),
            generation: joined.generation,
            partitions: partitions.clone(),
        });
        self.joined = Some((joined.generation, partitions.clone()));
        self.last_heartbeat_ms = self.clock.now_ms();
        if partitions.is_empty() {
            return Ok(());
        }
        let client = self.client.as_mut().expect("connected");
        let committed = client
            .committed_positions(&group, Some((&topic, &partitions)))
            .await;
        match committed {
            Ok(list) => {
                for (_, p, o, epoch) in list {
                    self.positions.insert(p, o.max(0));
                    self.fetcher
                        .start_at(p, o.max(0), if o >= 0 { epoch } else { -1 });
                    if o >= 0 {
                        self.committed.insert(p, o);
                    }
                }
                for p in &partitions {
                    self.positions.entry(*p).or_insert(0);
                }
                Ok(())
            }
            Err(e) => {
                // Without its start positions the member cannot consume: rejoin (keeping
                // the id) unless the error says more.
                self.drop_generation();
                Err(e)
            }
        }
    }

    /// Fetches every owned partition once; returns the records read: (partition, offset,
    /// value), and advances nothing yet.
    async fn fetch(&mut self) -> Result<Vec<MemberRead>, ClientError> {
        let client = self.client.as_mut().expect("connected");
        self.fetcher
            .fetch(&self.io, client, &self.spec.topic, &mut self.positions)
            .await
    }

    fn process(&mut self, records: &[MemberRead]) {
        let generation = self.joined.as_ref().map_or(-1, |j| j.0);
        for r in records {
            self.record(read_event(self.group, &self.name, generation, r));
        }
    }

    fn advance(&mut self, records: &[MemberRead]) {
        advance(&mut self.positions, records);
    }

    /// Commits the positions that moved since the last acknowledged commit.
    async fn commit(&mut self) -> Result<(), ClientError> {
        let Some((generation, _)) = self.joined.clone() else {
            return Ok(());
        };
        let offsets: Vec<(i32, i64)> = self
            .positions
            .iter()
            .filter(|(p, o)| self.committed.get(p) != Some(o))
            .map(|(p, o)| (*p, *o))
            .collect();
        if offsets.is_empty() {
            return Ok(());
        }
        self.commits += 1;
        let op = commit_op(self.group, self.slot, self.commits);
        self.record(GroupEvent::Commit {
            op,
            group: self.group,
            member: self.name.clone(),
            generation,
            offsets: offsets.clone(),
        });
        let (group, topic) = (self.group_name(), self.spec.topic.clone());
        let epochs: Vec<(i32, i64, i32)> = offsets
            .iter()
            .map(|&(p, o)| (p, o, self.fetcher.epoch_at(p, o)))
            .collect();
        let client = self.client.as_mut().expect("connected");
        let result = client
            .commit_member_offsets(&group, generation, &self.member_id, &topic, &epochs)
            .await;
        match &result {
            Ok(()) => {
                self.record(GroupEvent::CommitAck { op });
                // A commit keeps the session alive too, but only a heartbeat tells the member
                // that a rebalance began (commits are accepted while it prepares), so it does
                // not replace one.
                self.committed.extend(offsets.iter().copied());
            }
            Err(e) => self.record(GroupEvent::CommitFail {
                op,
                error: e.to_string(),
            }),
        }
        result
    }

    /// Heartbeats when due. On REBALANCE_IN_PROGRESS commits what it processed first (as the
    /// Java consumer does before revoking partitions), then rejoins.
    async fn heartbeat(&mut self) -> Result<(), ClientError> {
        let Some((generation, _)) = self.joined.clone() else {
            return Ok(());
        };
        let now = self.clock.now_ms();
        if now < self.last_heartbeat_ms + self.spec.groups.heartbeat_interval_ms {
            return Ok(());
        }
        let group = self.group_name();
        let client = self.client.as_mut().expect("connected");
        match client.heartbeat(&group, generation, &self.member_id).await {
            Ok(()) => {
                self.last_heartbeat_ms = self.clock.now_ms();
                Ok(())
            }
            Err(ClientError::Kafka(ResponseError::RebalanceInProgress, m)) => {
                self.commit().await?;
                Err(ClientError::Kafka(ResponseError::RebalanceInProgress, m))
            }
            Err(e) => Err(e),
        }
    }

    /// Draws the churn for the time since the last draw; `Some` if this member goes away.
    fn draw_churn(&mut self) -> Option<Churn> {
        let now = self.clock.now_ms();
        let elapsed = now.saturating_sub(self.last_churn_check_ms);
        self.last_churn_check_ms = now;
        if now >= self.spec.churn_until_ms || self.joined.is_none() {
            return None;
        }
        churn_in(&self.spec.groups, elapsed)
    }

    /// Leaves (or vanishes), waits, and comes back as a new member.
    async fn go_away(&mut self, what: Churn) {
        self.record(GroupEvent::Churn {
            group: self.group,
            member: self.name.clone(),
            what,
        });
        if what == Churn::Leave {
            let (group, id) = (self.group_name(), self.member_id.clone());
            if let Some(c) = self.client.as_mut() {
                let _ = c.leave_group(&group, &id).await;
            }
        }
        self.client = None;
        self.fetcher.reset();
        self.member_id.clear();
        self.drop_generation();
        let pause = madsim::rand::thread_rng().gen_range(RETURN_MS[0]..=RETURN_MS[1]);
        self.io.clock.sleep(Duration::from_millis(pause)).await;
        self.incarnation += 1;
        self.name = member_name(self.group, self.slot, self.incarnation);
    }

    async fn stall(&mut self) {
        self.record(GroupEvent::Churn {
            group: self.group,
            member: self.name.clone(),
            what: Churn::Stall,
        });
        let extra = madsim::rand::thread_rng().gen_range(STALL_EXTRA_MS[0]..=STALL_EXTRA_MS[1]);
        let pause = self.spec.groups.session_timeout_ms + extra;
        self.io.clock.sleep(Duration::from_millis(pause)).await;
    }

    /// One round: (re)join if needed, heartbeat, fetch, process, commit; churn on the way.
    async fn step(&mut self) {
        if !self.ensure_connected().await {
            return;
        }
        if self.joined.is_none() {
            if let Err(e) = self.join().await {
                self.on_error("join", &e).await;
            }
            return;
        }
        if let Err(e) = self.heartbeat().await {
            self.on_error("heartbeat", &e).await;
            return;
        }
        let records = match self.fetch().await {
            Ok(r) => r,
            Err(e) => {
                self.on_error("fetch", &e).await;
                return;
            }
        };
        let churn = self.draw_churn();
        if self.spec.groups.commit_after_processing {
            self.process(&records);
            self.advance(&records);
            if churn == Some(Churn::Stall) {
                // Processed, not yet committed: the commit below carries the old generation.
                self.stall().await;
            } else if let Some(what) = churn {
                return self.go_away(what).await;
            }
            if let Err(e) = self.commit().await {
                self.on_error("commit", &e).await;
            }
        } else {
            // At most once: commit what was fetched, then process it (a crash in between
            // loses it for this group).
            self.advance(&records);
            let committed = self.commit().await;
            if churn == Some(Churn::Stall) {
                self.stall().await;
            } else if let Some(what) = churn {
                return self.go_away(what).await;
            }
            self.process(&records);
            if let Err(e) = committed {
                self.on_error("commit", &e).await;
            }
        }
    }
}

/// Fetches every partition of `positions` once (moving a position that fell off the log to the
/// log start, `auto.offset.reset=earliest`); returns the records read below the high
/// watermark: (partition, offset, value). Advances nothing: processing comes first.
pub(crate) async fn fetch_owned(
    client: &mut Client,
    io: &Io,
    topic: &str,
    positions: &mut BTreeMap<i32, i64>,
) -> Result<Vec<(i32, i64, String)>, ClientError> {
    let mut out = Vec::new();
    let owned: Vec<i32> = positions.keys().copied().collect();
    if owned.is_empty() {
        // Nothing assigned: a consumer's poll still waits (and the loop must not spin).
        io.clock.sleep(FETCH_WAIT).await;
    }
    for p in owned {
        out.extend(fetch_partition(client, topic, p, positions).await?);
    }
    Ok(out)
}

/// One partition of [`fetch_owned`], from `client` (its leader).
pub(crate) async fn fetch_partition(
    client: &mut Client,
    topic: &str,
    p: i32,
    positions: &mut BTreeMap<i32, i64>,
) -> Result<Vec<(i32, i64, String)>, ClientError> {
    let mut out = Vec::new();
    let position = positions.get(&p).copied().unwrap_or(0);
    match client.fetch(topic, p, position, 1 << 20, FETCH_WAIT).await {
        Ok(fetched) => {
            for r in decode(&fetched.records, position) {
                match r {
                    // Only what the broker calls committed is processed, as a
                    // read_committed-free consumer still gets it below the HW.
                    Ok((o, v)) if o < fetched.high_watermark => out.push((p, o, v)),
                    _ => break,
                }
            }
        }
        Err(ClientError::Kafka(ResponseError::OffsetOutOfRange, _)) => {
            let (start, _) = client.list_offset(topic, p, -2).await?;
            positions.insert(p, start.max(0));
        }
        Err(e) => return Err(e),
    }
    Ok(out)
}

pub(crate) fn member_name(group: u32, slot: u32, incarnation: u32) -> String {
    format!("g{group}-m{slot}.{incarnation}")
}

/// Runs member `slot` of group `group` until the spec's deadline, then reports what it holds.
pub async fn run_member(
    io: Io,
    spec: GroupsSpec,
    group: u32,
    slot: u32,
    history: History,
    clock: RunClock,
) {
    let until = spec.until_ms;
    let fetcher = LeaderFetch::for_member(&spec, group, slot, &io, &history, clock);
    let mut m = Member {
        spec,
        group,
        slot,
        incarnation: 0,
        name: member_name(group, slot, 0),
        client: None,
        lookups: 0,
        fetcher,
        member_id: String::new(),
        joined: None,
        positions: BTreeMap::new(),
        committed: BTreeMap::new(),
        last_heartbeat_ms: 0,
        last_churn_check_ms: clock.now_ms(),
        commits: 0,
        history,
        clock,
        io,
    };
    while clock.now_ms() < until {
        m.step().await;
    }
    let (generation, partitions) = match &m.joined {
        Some((g, p)) => (Some(*g), p.clone()),
        None => (None, Vec::new()),
    };
    m.record(GroupEvent::Final {
        group,
        member: m.name.clone(),
        generation,
        partitions,
    });
}

/// Reads every group's committed offsets every [`OBSERVE_EVERY`] until the deadline, and once
/// more after it (when the members have stopped, with the coordinator's view of each KIP-848
/// group), retrying that last round a few times. Each group is asked at its coordinator (on one
/// node: the one broker, over one connection).
pub async fn run_observer(io: Io, spec: GroupsSpec, history: History, clock: RunClock) {
    let routed = !spec.bootstrap.is_empty();
    // Per group in a cluster, with the coordinator's broker id; one shared (key 0) on one node
    // (id -1).
    let mut clients: BTreeMap<u32, (Client, i32)> = BTreeMap::new();
    let mut lookups = 0u64;
    let mut tries_after_end = 0;
    loop {
        let last = clock.now_ms() >= spec.until_ms;
        let mut ok = true;
        for group in 0..spec.groups.count {
            let key = if routed { group } else { 0 };
            if let Entry::Vacant(slot) = clients.entry(key) {
                let connected = if routed {
                    lookups += 1;
                    connect_coordinator(
                        &io,
                        &spec.bootstrap,
                        lookups,
                        &group_name(group),
                        spec.timeout,
                    )
                    .await
                } else {
                    connect(&io, spec.addr, spec.timeout).await.map(|c| (c, -1))
                };
                match connected {
                    Ok(c) => {
                        slot.insert(c);
                    }
                    Err(_) => {
                        ok = false;
                        if routed {
                            continue;
                        }
                        break;
                    }
                }
            }
            let (c, coordinator) = clients.get_mut(&key).expect("connected above");
            let coordinator = *coordinator;
            let answered = observe(c, &spec, group, coordinator, &history, clock, last).await
                && (!last || describe(c, &spec, group, &history, clock, last).await);
            if !answered {
                clients.remove(&key);
                ok = false;
                if !routed {
                    break;
                }
            }
        }
        if last {
            tries_after_end += 1;
            if ok || tries_after_end > 20 {
                return;
            }
            io.clock.sleep(RECONNECT_BACKOFF).await;
        } else {
            io.clock.sleep(OBSERVE_EVERY).await;
        }
    }
}

/// `true` if the observer should look for the group's coordinator again: connection trouble,
/// or (in a cluster) a coordinator that moved; and, in the last round, one still loading (the
/// final offsets must come from the coordinator that has them).
fn observer_retries(e: &ClientError, last: bool) -> bool {
    match e {
        ClientError::Kafka(ResponseError::CoordinatorLoadInProgress, _) => last,
        ClientError::Kafka(_, _) => coordinator_moved(e),
        _ => true,
    }
}

/// One OffsetFetch of `group` at broker `coordinator`; `false` when the coordinator must be found again (another broker
/// error, such as one still loading mid-run, just skips the group this round).
async fn observe(
    c: &mut Client,
    spec: &GroupsSpec,
    group: u32,
    coordinator: i32,
    history: &History,
    clock: RunClock,
    last: bool,
) -> bool {
    let partitions: Vec<i32> = (0..spec.partitions).collect();
    let invoked_ms = clock.now_ms();
    let fetched = c
        .committed_offsets(&group_name(group), Some((&spec.topic, &partitions)))
        .await;
    match fetched {
        Ok(list) => {
            let offsets = list
                .into_iter()
                .filter(|(_, _, o)| *o >= 0)
                .map(|(_, p, o)| (p, o))
                .collect();
            history.record(
                clock.now_ms(),
                Event::Group(GroupEvent::Offsets {
                    group,
                    invoked_ms,
                    offsets,
                    coordinator,
                }),
            );
            true
        }
        Err(e) => !observer_retries(&e, last),
    }
}

/// ConsumerGroupDescribe of `group` if it is a KIP-848 group: the coordinator's side of
/// settling (state, group epoch, each member's epoch). `false` as for [`observe`].
async fn describe(
    c: &mut Client,
    spec: &GroupsSpec,
    group: u32,
    history: &History,
    clock: RunClock,
    last: bool,
) -> bool {
    if spec.groups.protocol_of(group) != GroupProtocol::Consumer {
        return true;
    }
    match c.describe_consumer_group(&group_name(group)).await {
        Ok(Some(d)) => history.record(
            clock.now_ms(),
            Event::Group(GroupEvent::Described {
                group,
                state: d.state,
                group_epoch: d.group_epoch,
                assignment_epoch: d.assignment_epoch,
                member_epochs: d
                    .members
                    .into_iter()
                    .map(|m| (m.member_id, m.member_epoch))
                    .collect(),
            }),
        ),
        Ok(None) => {}
        Err(e) => return !observer_retries(&e, last),
    }
    true
}
