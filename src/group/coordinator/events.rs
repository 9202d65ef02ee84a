//! The core's contract: [`Event`]s in with `now`, [`Action`]s out, one entry point
//! ([`Coordinator::step`]) that asserts its preconditions and checks the invariants after
//! every event. The named methods (`join`, `commit`, `tick`…) are typed shorthands for `step`,
//! so every mutation goes through it.

use super::*;
use crate::group::consumer::{self, GroupOverrides, Topics};

/// Everything that changes the coordinator. Requests carry the id the driver answers them by;
/// the driver passes `now` (wall-clock ms) with each.
#[derive(Debug)]
pub enum Event<'a> {
    Join(RequestId, JoinRequest),
    Sync(RequestId, SyncRequest),
    Heartbeat(RequestId, HeartbeatRequest),
    Leave {
        request: RequestId,
        group_id: &'a str,
        members: Vec<LeavingMember>,
    },
    Commit(RequestId, CommitRequest),
    /// TxnOffsetCommit (after the broker verified the offsets partition is in the transaction).
    TxnCommit(RequestId, TxnCommitRequest),
    /// A transaction marker of `producer_id` is committed on offsets partition `partition`.
    TxnMarker {
        partition: i32,
        producer_id: i64,
        commit: bool,
    },
    /// DeleteGroups, for one group.
    DeleteGroup(RequestId, &'a str),
    /// OffsetDelete (KIP-496).
    DeleteOffsets {
        request: RequestId,
        group_id: &'a str,
        partitions: Vec<(String, i32)>,
    },
    /// ConsumerGroupHeartbeat (KIP-848), with the metadata image's topics and the group's own
    /// config overrides.
    ConsumerHeartbeat {
        request: RequestId,
        req: consumer::HeartbeatRequest,
        topics: &'a Topics,
        overrides: &'a GroupOverrides,
    },
    /// An append asked for by an [`Action::Append`] committed (`Ok`) or failed.
    AppendDone(AppendToken, Result<(), AppendError>),
    /// Timers: run whatever is due at `now` (see [`Coordinator::next_deadline`]).
    Tick,
    /// Offset expiry (KIP-211), every `offsets.retention.check.interval.ms`.
    ExpireOffsets,
    /// This node leads the offsets partition and starts replaying it.
    LoadBegin(i32),
    /// The replay of the partition is done.
    LoadFinish(i32),
    /// This node no longer leads the partition.
    Unload(i32),
}

impl Coordinator {
    /// Feeds one event; returns the actions to perform, in order.
    pub fn step(&mut self, now: i64, event: Event) -> Vec<Action> {
        self.check_preconditions(&event);
        let mut out = Vec::new();
        match event {
            Event::Join(request, req) => self.on_join(request, req, now, &mut out),
            Event::Sync(request, req) => self.on_sync(request, req, now, &mut out),
            Event::Heartbeat(request, req) => self.on_heartbeat(request, req, now, &mut out),
            Event::Leave {
                request,
                group_id,
                members,
            } => self.on_leave(request, group_id, members, now, &mut out),
            Event::Commit(request, req) => self.on_commit(request, req, now, &mut out),
            Event::TxnCommit(request, req) => self.on_txn_commit(request, req, now, &mut out),
            Event::TxnMarker {
                partition,
                producer_id,
                commit,
            } => self.on_txn_marker(partition, producer_id, commit),
            Event::DeleteGroup(request, group_id) => {
                self.on_delete_group(request, group_id, &mut out)
            }
            Event::DeleteOffsets {
                request,
                group_id,
                partitions,
            } => self.on_delete_offsets(request, group_id, partitions, &mut out),
            Event::ConsumerHeartbeat {
                request,
                req,
                topics,
                overrides,
            } => self.on_consumer_heartbeat(request, req, topics, overrides, now, &mut out),
            Event::AppendDone(token, result) => self.on_append_done(token, result, now, &mut out),
            Event::Tick => self.on_tick(now, &mut out),
            Event::ExpireOffsets => self.on_expire_offsets(now, &mut out),
            Event::LoadBegin(partition) => self.on_load_begin(partition),
            Event::LoadFinish(partition) => self.on_load_finish(partition, now),
            Event::Unload(partition) => self.on_unload(partition, &mut out),
        }
        self.check_after_step(&out);
        out
    }

    /// What the driver guarantees: ids it never reused, partitions of the offsets topic, tokens
    /// it was given.
    fn check_preconditions(&self, event: &Event) {
        match event {
            Event::Join(request, _)
            | Event::Sync(request, _)
            | Event::Heartbeat(request, _)
            | Event::Commit(request, _)
            | Event::TxnCommit(request, _)
            | Event::DeleteGroup(request, _)
            | Event::Leave { request, .. }
            | Event::DeleteOffsets { request, .. }
            | Event::ConsumerHeartbeat { request, .. } => self.assert_request_unused(*request),
            Event::AppendDone(token, _) => assert!(
                *token < self.next_token && self.pending.contains_key(token),
                "append token {token} unknown"
            ),
            Event::LoadBegin(partition)
            | Event::LoadFinish(partition)
            | Event::Unload(partition)
            | Event::TxnMarker { partition, .. } => {
                let count = self
                    .partition_count
                    .expect("offsets partitions before the offsets topic exists");
                assert!(
                    (0..count).contains(partition),
                    "offsets partition {partition} out of 0..{count}"
                );
            }
            Event::Tick | Event::ExpireOffsets => {}
        }
    }

    // ---------------------------------------------------------------- shorthands for `step`

    pub fn join(&mut self, request: RequestId, req: JoinRequest, now: i64) -> Vec<Action> {
        self.step(now, Event::Join(request, req))
    }

    pub fn sync(&mut self, request: RequestId, req: SyncRequest, now: i64) -> Vec<Action> {
        self.step(now, Event::Sync(request, req))
    }

    pub fn heartbeat(
        &mut self,
        request: RequestId,
        req: HeartbeatRequest,
        now: i64,
    ) -> Vec<Action> {
        self.step(now, Event::Heartbeat(request, req))
    }

    pub fn leave(
        &mut self,
        request: RequestId,
        group_id: &str,
        members: Vec<LeavingMember>,
        now: i64,
    ) -> Vec<Action> {
        let event = Event::Leave {
            request,
            group_id,
            members,
        };
        self.step(now, event)
    }

    pub fn commit(&mut self, request: RequestId, req: CommitRequest, now: i64) -> Vec<Action> {
        self.step(now, Event::Commit(request, req))
    }

    /// TxnOffsetCommit: the offsets are written as the producer's transactional batch and
    /// stay pending until [`Coordinator::txn_marker`].
    pub fn txn_commit(
        &mut self,
        request: RequestId,
        req: TxnCommitRequest,
        now: i64,
    ) -> Vec<Action> {
        self.step(now, Event::TxnCommit(request, req))
    }

    /// A COMMIT (`commit`) or ABORT marker of `producer_id` is committed on `partition`.
    pub fn txn_marker(
        &mut self,
        partition: i32,
        producer_id: i64,
        commit: bool,
        now: i64,
    ) -> Vec<Action> {
        let event = Event::TxnMarker {
            partition,
            producer_id,
            commit,
        };
        self.step(now, event)
    }

    /// DeleteGroups for one group: only an Empty group goes, with all its offsets.
    pub fn delete_group(&mut self, request: RequestId, group_id: &str, now: i64) -> Vec<Action> {
        self.step(now, Event::DeleteGroup(request, group_id))
    }

    /// OffsetDelete (KIP-496).
    pub fn delete_offsets(
        &mut self,
        request: RequestId,
        group_id: &str,
        partitions: Vec<(String, i32)>,
        now: i64,
    ) -> Vec<Action> {
        let event = Event::DeleteOffsets {
            request,
            group_id,
            partitions,
        };
        self.step(now, event)
    }

    pub fn consumer_heartbeat(
        &mut self,
        request: RequestId,
        req: consumer::HeartbeatRequest,
        topics: &Topics,
        overrides: &GroupOverrides,
        now: i64,
    ) -> Vec<Action> {
        let event = Event::ConsumerHeartbeat {
            request,
            req,
            topics,
            overrides,
        };
        self.step(now, event)
    }

    /// An append this coordinator asked for is committed (`Ok`) or failed.
    pub fn append_done(
        &mut self,
        token: AppendToken,
        result: Result<(), AppendError>,
        now: i64,
    ) -> Vec<Action> {
        self.step(now, Event::AppendDone(token, result))
    }

    /// Runs every timer that is due: join and sync timeouts, session expiry, pending ids.
    pub fn tick(&mut self, now: i64) -> Vec<Action> {
        self.step(now, Event::Tick)
    }

    /// Offset expiry (KIP-211), run every `offsets.retention.check.interval.ms`.
    pub fn expire_offsets(&mut self, now: i64) -> Vec<Action> {
        self.step(now, Event::ExpireOffsets)
    }

    /// This node leads the partition and starts replaying it: its groups answer
    /// COORDINATOR_LOAD_IN_PROGRESS until [`Coordinator::load_finish`].
    pub fn load_begin(&mut self, partition: i32) {
        // Taking a partition reads no clock.
        let out = self.step(0, Event::LoadBegin(partition));
        assert!(out.is_empty());
    }

    /// The replay is done: groups with members come back Stable (sessions armed from now), the
    /// rest Empty.
    pub fn load_finish(&mut self, partition: i32, now: i64) {
        let out = self.step(now, Event::LoadFinish(partition));
        assert!(out.is_empty());
    }

    /// A partition that is new and empty: loaded at once.
    pub fn partition_ready(&mut self, partition: i32, now: i64) {
        self.load_begin(partition);
        self.load_finish(partition, now);
    }

    /// This node no longer leads the partition (`removeGroupsForPartition`): its groups go
    /// Dead, parked joins and syncs are answered NOT_COORDINATOR, their timers are dropped.
    /// A group with appends in flight is kept (Dead) until their completions, which then fail.
    pub fn unload(&mut self, partition: i32) -> Vec<Action> {
        // Dropping a partition reads no clock.
        self.step(0, Event::Unload(partition))
    }
}
