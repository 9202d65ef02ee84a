//! KIP-848 consumers in the simulator: members that `subscribe` to the workload's topic through
//! Weir's own client with the consumer group protocol ([`Membership`]: ConsumerGroupHeartbeat
//! with a client-made member id, the server-side assignor, OffsetCommit v9 at the member epoch),
//! as Kafka's Java consumer does with `group.protocol=consumer`. They fetch, process and commit
//! after processing like the classic members of `group_workload`, and churn the same way before
//! the faults heal: leave and come back, crash and come back, or stall past the session timeout
//! and then carry on with their stale epoch (the coordinator must refuse that commit).
//!
//! What a member owns is what it reports as [`GroupEvent::Owns`]: from the heartbeat answer that
//! assigns a partition until it drops it — before the heartbeat that reports it revoked, before
//! it leaves, when it crashes, or when it learns it was fenced. A stalled member keeps believing
//! it owns what it had. `group_check` judges its commits against that. Every loop is bounded by
//! the run's deadline; every call by a time-out.

use std::collections::BTreeMap;
use std::time::Duration;

use madsim::rand::Rng;
use uuid::Uuid;
use weir::client::consumer_member::{self, Membership, OnError};
use weir::client::{Client, ClientError};
use weir::io::Io;

use crate::group_check::{Churn, GroupEvent};
use crate::group_route::{connect_coordinator, coordinator_moved, LeaderFetch, MemberRead};
use crate::group_workload::{
    advance, commit_op, coordinator_note, group_name, member_name, read_event, GroupsSpec,
    RETURN_MS, STALL_EXTRA_MS,
};
use crate::history::{Event, History};
use crate::workload::{RunClock, RECONNECT_BACKOFF};

/// One member slot: a consumer process that comes back as a new member (a new member id) after
/// it leaves or crashes, and rejoins under the same id after it is fenced.
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
    /// The topic's id, learnt from Metadata (assignments name topics by id).
    topic_id: Option<Uuid>,
    membership: Membership,
    /// Next offset to process, per owned partition whose start offset is known.
    positions: BTreeMap<i32, i64>,
    /// What this member last had acknowledged, per partition (nothing new: no commit).
    committed: BTreeMap<i32, i64>,
    /// When the last heartbeat was answered.
    last_heartbeat_ms: u64,
    last_churn_check_ms: u64,
    commits: u64,
    history: History,
    clock: RunClock,
    io: Io,
}

impl Member {
    fn record(&self, event: GroupEvent) {
        self.history
            .record(self.clock.now_ms(), Event::Group(event));
    }

    fn new_membership(spec: &GroupsSpec, group: u32, io: &Io) -> Membership {
        let g = &spec.groups;
        Membership::new(
            &group_name(group),
            &consumer_member::new_member_id(io),
            &[&spec.topic],
            g.assignor.as_deref(),
            g.rebalance_timeout_ms as i32,
        )
    }

    fn owned_partitions(&self) -> Vec<i32> {
        self.topic_id
            .map(|t| self.membership.owned_partitions(t))
            .unwrap_or_default()
    }

    /// Reports what it believes it owns now, at its epoch.
    fn record_owns(&self) {
        self.record(GroupEvent::Owns {
            group: self.group,
            member: self.name.clone(),
            member_id: self.membership.member_id().to_string(),
            epoch: self.membership.epoch(),
            partitions: self.owned_partitions(),
        });
    }

    fn record_error(&self, call: &str, e: &ClientError) {
        self.record(GroupEvent::Error {
            group: self.group,
            member: self.name.clone(),
            call: call.to_string(),
            error: e.to_string(),
        });
    }

    /// Gives up everything without committing (fenced: it may be someone else's already).
    fn drop_all(&mut self) {
        let had = !self.membership.owned().is_empty() || self.membership.is_joined();
        self.membership.reset();
        self.positions.clear();
        self.committed.clear();
        if had {
            self.record_owns();
        }
    }

    /// Acts on a failed call.
    async fn on_error(&mut self, call: &str, e: &ClientError) {
        self.record_error(call, e);
        // The coordinator moved (or none leads the group's offsets partition): find it again.
        let next = if coordinator_moved(e) {
            OnError::Reconnect
        } else {
            consumer_member::on_error(e)
        };
        match next {
            OnError::Fenced => self.drop_all(),
            OnError::Refresh => self.membership.retry(true),
            OnError::Retry => {
                self.membership.retry(false);
                self.io.clock.sleep(RECONNECT_BACKOFF).await;
            }
            OnError::Reconnect => {
                self.membership.retry(false);
                self.client = None;
                self.io.clock.sleep(RECONNECT_BACKOFF).await;
            }
        }
    }

    async fn ensure_connected(&mut self) -> bool {
        if self.client.is_some() {
            return true;
        }
        // As a real consumer's first steps: find the coordinator (which makes sure
        // `__consumer_offsets` exists) and connect there, and learn the subscribed topic's id.
        self.lookups += 1;
        let found = connect_coordinator(
            &self.io,
            self.spec.coordinator_bootstrap(),
            self.lookups,
            &group_name(self.group),
            self.spec.timeout,
        )
        .await;
        let Ok((mut c, node)) = found else {
            self.io.clock.sleep(RECONNECT_BACKOFF).await;
            return false;
        };
        self.history.record(
            self.clock.now_ms(),
            Event::Note(coordinator_note(&self.name, self.group, node)),
        );
        let ready = match self.topic_id {
            Some(_) => true,
            None => match c.metadata(Some(&[&self.spec.topic])).await {
                Ok(topics) => {
                    self.topic_id = topics
                        .iter()
                        .find(|t| t.name == self.spec.topic && t.error.is_none())
                        .map(|t| t.id)
                        .filter(|id| !id.is_nil());
                    self.topic_id.is_some()
                }
                Err(_) => false,
            },
        };
        if !ready {
            self.io.clock.sleep(RECONNECT_BACKOFF).await;
            return false;
        }
        self.client = Some(c);
        true
    }

    /// Heartbeats if due, and reconciles what the answer changed: commit and drop revoked
    /// partitions, then look up where to start on new ones. The acknowledgement (the owned set
    /// without the revoked partitions) goes with the next heartbeat, due at once.
    async fn heartbeat(&mut self) -> Result<(), ClientError> {
        let since = self.clock.now_ms().saturating_sub(self.last_heartbeat_ms);
        if !self.membership.heartbeat_due(since) {
            return Ok(());
        }
        let hb = self.membership.heartbeat();
        let client = self.client.as_mut().expect("connected");
        let answer = client.consumer_heartbeat(&hb).await?;
        self.last_heartbeat_ms = self.clock.now_ms();
        let epoch_before = self.membership.epoch();
        let change = self.membership.on_answer(&answer);
        let topic = self.topic_id.expect("connected");
        let revoked: Vec<i32> = change
            .revoked
            .get(&topic)
            .map(|ps| ps.iter().copied().collect())
            .unwrap_or_default();
        if !revoked.is_empty() {
            // The application finishes what it has in hand first (bounded by `revoke_ms`).
            let most = self.spec.groups.revoke_ms;
            if most > 0 {
                let pause = madsim::rand::thread_rng().gen_range(0..=most);
                self.io.clock.sleep(Duration::from_millis(pause)).await;
            }
            // Commit what it processed of them while it still owns them (the coordinator keeps
            // its epoch until it hears they are gone), then let go. A failed commit does not
            // stop the revocation: the next owner processes those records again.
            if let Err(e) = self.commit(Some(&revoked)).await {
                self.record_error("commit", &e);
            }
            for p in &revoked {
                self.positions.remove(p);
                self.committed.remove(p);
            }
        }
        if !change.is_empty() || self.membership.epoch() != epoch_before {
            self.record_owns();
        }
        Ok(())
    }

    /// Start offsets of owned partitions without a position: the committed offset, else the
    /// earliest. The revoking owner committed before the coordinator let this member have them.
    async fn fill_positions(&mut self) -> Result<(), ClientError> {
        let missing: Vec<i32> = self
            .owned_partitions()
            .into_iter()
            .filter(|p| !self.positions.contains_key(p))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let (group, topic) = (group_name(self.group), self.spec.topic.clone());
        let client = self.client.as_mut().expect("connected");
        let list = client
            .committed_positions(&group, Some((&topic, &missing)))
            .await?;
        for (_, p, o, epoch) in list {
            if !missing.contains(&p) {
                continue;
            }
            self.positions.insert(p, o.max(0));
            self.fetcher
                .start_at(p, o.max(0), if o >= 0 { epoch } else { -1 });
            if o >= 0 {
                self.committed.insert(p, o);
            }
        }
        for p in missing {
            self.positions.entry(p).or_insert(0);
        }
        Ok(())
    }

    fn process(&mut self, records: &[MemberRead]) {
        let epoch = self.membership.epoch();
        for r in records {
            self.record(read_event(self.group, &self.name, epoch, r));
        }
    }

    fn advance(&mut self, records: &[MemberRead]) {
        advance(&mut self.positions, records);
    }

    /// Commits the positions (of `only`, or all) that moved since the last acknowledged
    /// commit, at the member's epoch.
    async fn commit(&mut self, only: Option<&[i32]>) -> Result<(), ClientError> {
        let epoch = self.membership.epoch();
        if !self.membership.is_joined() {
            return Ok(());
        }
        let offsets: Vec<(i32, i64)> = self
            .positions
            .iter()
            .filter(|(p, o)| self.committed.get(p) != Some(o))
            .filter(|(p, _)| only.is_none_or(|ps| ps.contains(p)))
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
            generation: epoch,
            offsets: offsets.clone(),
        });
        let (group, topic) = (group_name(self.group), self.spec.topic.clone());
        let id = self.membership.member_id().to_string();
        let epochs: Vec<(i32, i64, i32)> = offsets
            .iter()
            .map(|&(p, o)| (p, o, self.fetcher.epoch_at(p, o)))
            .collect();
        let client = self.client.as_mut().expect("connected");
        let result = client
            .commit_consumer_offsets(&group, &id, epoch, &topic, &epochs)
            .await;
        match &result {
            Ok(()) => {
                self.record(GroupEvent::CommitAck { op });
                self.committed.extend(offsets.iter().copied());
            }
            Err(e) => self.record(GroupEvent::CommitFail {
                op,
                error: e.to_string(),
            }),
        }
        result
    }

    /// Draws the churn for the time since the last draw; `Some` if this member goes away.
    fn draw_churn(&mut self) -> Option<Churn> {
        let now = self.clock.now_ms();
        let elapsed = now.saturating_sub(self.last_churn_check_ms);
        self.last_churn_check_ms = now;
        if now >= self.spec.churn_until_ms || !self.membership.is_joined() {
            return None;
        }
        crate::group_workload::churn_in(&self.spec.groups, elapsed)
    }

    /// Leaves (epoch -1) or vanishes, waits, and comes back as a new consumer (new member id).
    async fn go_away(&mut self, what: Churn) {
        self.record(GroupEvent::Churn {
            group: self.group,
            member: self.name.clone(),
            what,
        });
        // It stops consuming here, whatever it does next.
        let leave = self.membership.leave();
        self.drop_all();
        if what == Churn::Leave {
            if let Some(c) = self.client.as_mut() {
                let _ = c.consumer_heartbeat(&leave).await;
            }
        }
        self.client = None;
        self.fetcher.reset();
        let pause = madsim::rand::thread_rng().gen_range(RETURN_MS[0]..=RETURN_MS[1]);
        self.io.clock.sleep(Duration::from_millis(pause)).await;
        self.incarnation += 1;
        self.name = member_name(self.group, self.slot, self.incarnation);
        self.membership = Member::new_membership(&self.spec, self.group, &self.io);
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

    /// One round of a poll loop: fetch, process, heartbeat when due (reconciling: a revocation
    /// commits what was just processed of the revoked partitions), commit the rest; joining
    /// first if needed; churn on the way.
    async fn step(&mut self) {
        if !self.ensure_connected().await {
            return;
        }
        if !self.membership.is_joined() {
            if let Err(e) = self.heartbeat().await {
                self.on_error("heartbeat", &e).await;
            } else if !self.membership.is_joined() {
                // Answered without an epoch: do not spin.
                self.io.clock.sleep(RECONNECT_BACKOFF).await;
            }
            return;
        }
        if let Err(e) = self.fill_positions().await {
            self.on_error("offset-fetch", &e).await;
            return;
        }
        let client = self.client.as_mut().expect("connected");
        let fetched = self
            .fetcher
            .fetch(&self.io, client, &self.spec.topic, &mut self.positions)
            .await;
        let records = match fetched {
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
            match churn {
                Some(Churn::Stall) => {
                    // Processed, not yet committed: it wakes up and commits with its stale
                    // epoch before anything tells it that it was fenced.
                    self.stall().await;
                    if let Err(e) = self.commit(None).await {
                        self.on_error("commit", &e).await;
                    }
                    return;
                }
                Some(what) => return self.go_away(what).await,
                None => {}
            }
            if let Err(e) = self.heartbeat().await {
                self.on_error("heartbeat", &e).await;
                return;
            }
            if let Err(e) = self.commit(None).await {
                self.on_error("commit", &e).await;
            }
        } else {
            // At most once: commit what was fetched, then process it.
            self.advance(&records);
            let committed = self.commit(None).await;
            if churn == Some(Churn::Stall) {
                self.stall().await;
            } else if let Some(what) = churn {
                return self.go_away(what).await;
            }
            self.process(&records);
            if let Err(e) = committed {
                return self.on_error("commit", &e).await;
            }
            if let Err(e) = self.heartbeat().await {
                self.on_error("heartbeat", &e).await;
            }
        }
    }
}

/// Runs KIP-848 member `slot` of group `group` until the spec's deadline, then reports what it
/// holds (its epoch as the generation).
pub async fn run_member(
    io: Io,
    spec: GroupsSpec,
    group: u32,
    slot: u32,
    history: History,
    clock: RunClock,
) {
    let until = spec.until_ms;
    let membership = Member::new_membership(&spec, group, &io);
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
        topic_id: None,
        membership,
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
    let joined = m.membership.is_joined();
    m.record(GroupEvent::Final {
        group,
        member: m.name.clone(),
        generation: joined.then(|| m.membership.epoch()),
        partitions: m.owned_partitions(),
    });
}
