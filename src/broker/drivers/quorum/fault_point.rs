//! The quorum driver's fault points (simulator and unit tests only; `config::fault_points`).
//! The core stays pure: each point is something the driver's own I/O may do anyway — a fetch
//! answer cut short by its size, an fsync or a read that hangs for seconds — struck at the
//! moment Raft's narrow election schedules need:
//!
//! - `quorum_answer_one_batch`: a fetch answer carries one batch;
//! - `quorum_leader_flush_stall`: a leader's fsync of a proposal stalls (the entry stays on it
//!   alone while the others elect someone else);
//! - `quorum_new_leader_flush_stall`: a new leader's fsync of its LeaderChange stalls (a
//!   leader gone right after it appended in its epoch, back later with that entry);
//! - `quorum_first_commit_stall`: a leader stalls at its epoch's first commit, before the
//!   answer to the fetch that made the majority goes out; `quorum_old_tail_commit_stall`: the
//!   same for a leader elected with an uncommitted tail of an older epoch than the last;
//! - `quorum_vote_request_delay`: a candidate's vote request leaves late (two candidates of
//!   one epoch, and a stalled voter that answers both when it comes back);
//! - `quorum_rival_vote_hold`: a candidate reads a rival candidate's vote request of its own
//!   epoch late (both keep standing, and the voters they share decide).
//!
//! Together they make Raft's figure 8 reachable: A's entry X alone on A; B elected, its
//! LeaderChange at X's offset, stalled; A elected again, C fetches X alone (one batch) and
//! acknowledges X's end, which is A's epoch start; A stalls there; B back wins C's vote with its
//! newer epoch and overwrites X. KRaft's rule (commit only past the epoch start) never commits
//! X; counting replicas (`quorum-commit-old-epoch`) does, and A is then left with a committed
//! entry the majority replaced.

use std::time::Duration;

use bytes::Bytes;

use super::Driver;
use crate::config::fault_points::{
    QUORUM_RIVAL_VOTE_HOLD_MS, QUORUM_STALL_MS, QUORUM_VOTE_DELAY_MS,
};
use crate::config::FaultPoints;
use crate::raft::{Action, Message, NodeId, RoleKind};

impl Driver {
    /// `chance` inside the points' window (`quorum_window_ms`, the node's monotonic clock),
    /// else 0. Reads the clock only for an armed point.
    fn armed(&self, chance: f64) -> f64 {
        let [from, until] = self.fault_points.quorum_window_ms;
        if chance <= 0.0 || (from, until) == (0, 0) {
            return chance;
        }
        let now = self.now();
        if (from..until).contains(&now) {
            chance
        } else {
            0.0
        }
    }

    /// `records` of a fetch answer as sent: only the first batch when the point strikes.
    pub(super) fn answer_one_batch(&self, records: Bytes) -> Bytes {
        let chance = self.armed(self.fault_points.quorum_answer_one_batch);
        if chance <= 0.0 || records.is_empty() {
            return records;
        }
        let Some(Ok((at, header))) = crate::log::batch::iter(&records).next() else {
            return records;
        };
        let first = at + header.total_len();
        if first >= records.len() || !FaultPoints::strikes(chance, self.io.rng.as_ref()) {
            return records;
        }
        tracing::debug!(
            base_offset = header.base_offset,
            "fault point quorum_answer_one_batch: the answer carries one batch"
        );
        records.slice(at..first)
    }

    /// Before the fsync of what was just appended: a leader's may stall.
    pub(super) async fn flush_stall(&mut self) {
        if self.core.role() != RoleKind::Leader {
            return;
        }
        let epoch = self.core.epoch();
        // The LeaderChange (just below `since`) not yet durable: a new leader's first flush.
        let new_leader = self
            .leader_since
            .is_some_and(|(e, since)| e == epoch && self.core.durable_end() < since);
        let (chance, point) = if new_leader {
            let p = self.armed(self.fault_points.quorum_new_leader_flush_stall);
            (p, "quorum_new_leader_flush_stall")
        } else {
            let p = self.armed(self.fault_points.quorum_leader_flush_stall);
            (p, "quorum_leader_flush_stall")
        };
        if FaultPoints::strikes(chance, self.io.rng.as_ref()) {
            self.stall(point).await;
        }
    }

    /// Before performing `actions`: a leader's first commit in its epoch may stall, ahead of
    /// the answer that carries it.
    pub(super) async fn first_commit_stall(&mut self, actions: &[Action]) {
        let epoch = self.core.epoch();
        if self.core.role() != RoleKind::Leader
            || self.first_commit_epoch == Some(epoch)
            || !actions.iter().any(|a| matches!(a, Action::Commit { .. }))
        {
            return;
        }
        self.first_commit_epoch = Some(epoch);
        let (chance, point) = if self.old_tail_epoch == Some(epoch) {
            let p = self.armed(self.fault_points.quorum_old_tail_commit_stall);
            (p, "quorum_old_tail_commit_stall")
        } else {
            let p = self.armed(self.fault_points.quorum_first_commit_stall);
            (p, "quorum_first_commit_stall")
        };
        if FaultPoints::strikes(chance, self.io.rng.as_ref()) {
            self.stall(point).await;
        }
    }

    /// Tracks what `quorum_old_tail_commit_stall` needs: the log a candidate stood with, and
    /// whether the leader it became holds an uncommitted tail of an epoch older than the one
    /// before its own. Draws nothing.
    pub(super) fn note_role(&mut self, role: RoleKind, epoch: u32) {
        match role {
            RoleKind::Candidate => self.standing_log = Some(self.core.log_end()),
            RoleKind::Leader => {
                let hw = self.core.high_watermark();
                let old = self
                    .standing_log
                    .take()
                    .is_some_and(|log| log.epoch.saturating_add(1) < epoch && hw < log.offset);
                if old {
                    self.old_tail_epoch = Some(epoch);
                }
            }
            _ => {}
        }
    }

    /// How long `message` waits before it leaves: a vote request (not a pre-vote) may wait
    /// [`QUORUM_VOTE_DELAY_MS`].
    pub(super) fn vote_request_delay(&self, message: &Message) -> Option<Duration> {
        let Message::VoteRequest(request) = message else {
            return None;
        };
        let chance = self.armed(self.fault_points.quorum_vote_request_delay);
        if request.pre_vote || !FaultPoints::strikes(chance, self.io.rng.as_ref()) {
            return None;
        }
        let ms = FaultPoints::draw(QUORUM_VOTE_DELAY_MS, self.io.rng.as_ref());
        tracing::debug!(
            ms,
            "fault point quorum_vote_request_delay: the vote request waits"
        );
        Some(Duration::from_millis(ms))
    }

    /// How long an inbound `message` from `from` is held before the core reads it: a vote
    /// request (not a pre-vote) of this candidate's own epoch from a rival candidate may wait
    /// [`QUORUM_RIVAL_VOTE_HOLD_MS`]. Draws only for such a request.
    pub(super) fn rival_vote_hold(&self, from: NodeId, message: &Message) -> Option<Duration> {
        let Message::VoteRequest(request) = message else {
            return None;
        };
        if request.pre_vote
            || from == self.handle.node_id
            || self.core.role() != RoleKind::Candidate
            || request.candidate_epoch != self.core.epoch()
        {
            return None;
        }
        let chance = self.armed(self.fault_points.quorum_rival_vote_hold);
        if !FaultPoints::strikes(chance, self.io.rng.as_ref()) {
            return None;
        }
        let ms = FaultPoints::draw(QUORUM_RIVAL_VOTE_HOLD_MS, self.io.rng.as_ref());
        tracing::debug!(
            ms,
            from,
            epoch = request.candidate_epoch,
            "fault point quorum_rival_vote_hold: a rival's vote request waits"
        );
        Some(Duration::from_millis(ms))
    }

    /// The quorum thread hangs (a disk that does not answer): nothing is received, sent or
    /// timed meanwhile.
    async fn stall(&self, point: &str) {
        let ms = FaultPoints::draw(QUORUM_STALL_MS, self.io.rng.as_ref());
        tracing::debug!(
            ms,
            epoch = self.core.epoch(),
            "fault point {point}: the quorum thread stalls"
        );
        self.io.clock.sleep(Duration::from_millis(ms)).await;
    }
}
