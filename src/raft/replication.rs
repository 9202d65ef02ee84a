//! Pull replication: followers and observers Fetch from the leader; the leader answers with
//! records or a diverging epoch, tracks the voters' progress, advances the high watermark,
//! and runs check-quorum.

use std::collections::{BTreeMap, BTreeSet};

use super::action::{Action, DropReason};
use super::epochs::FetchPosition;
use super::message::{BeginQuorumEpochRequest, FetchRequest, FetchResponse, Message, RaftError};
use super::node::{successors_by_progress, Raft};
use super::quorum;
use super::role::{InflightFetch, Role};
use super::types::{Batch, NodeId, Offset, OffsetAndEpoch};

impl Raft {
    pub(super) fn leader_tick(&mut self) {
        let now = self.now;
        let window = self.check_quorum_window();
        let half = (self.cfg.fetch_timeout_ms / 2).max(1);
        let Role::Leader(state) = &mut self.role else {
            return;
        };
        if now >= state.next_check {
            state.next_check = now + half;
            let mut heard: BTreeSet<NodeId> = state
                .voters
                .iter()
                .filter(|(_, p)| p.last_fetch_at.is_some_and(|t| t + window >= now))
                .map(|(id, _)| *id)
                .collect();
            heard.insert(self.cfg.node_id);
            if now >= state.became_at + window && !quorum::is_majority(&self.cfg.voters, &heard) {
                let successors = successors_by_progress(&state.voters);
                self.become_resigned(successors);
                return;
            }
        }
        if now >= state.begin_resend_at {
            state.begin_resend_at = now + half;
            let unacked: Vec<NodeId> = state
                .voters
                .iter()
                .filter(|(_, p)| !p.acked)
                .map(|(id, _)| *id)
                .collect();
            let request = BeginQuorumEpochRequest {
                leader_epoch: self.epoch,
                leader_id: self.cfg.node_id,
            };
            for voter in unacked {
                self.send(voter, Message::BeginQuorumEpochRequest(request.clone()));
            }
        }
    }

    pub(super) fn follower_tick(&mut self) {
        let now = self.now;
        let request = self.cfg.request_timeout_ms;
        let Role::Follower(f) = &mut self.role else {
            return;
        };
        if now >= f.fetch_deadline {
            if self.is_voter {
                self.become_prospective();
            } else {
                // An observer forgets the silent leader and probes the voters again.
                self.leader = None;
                self.become_unattached(self.epoch, self.voted_for);
                self.probe_voters();
            }
            return;
        }
        if f.inflight.is_some_and(|i| now >= i.sent_at + request) {
            f.inflight = None; // lost: fetch again
        }
        self.maybe_fetch();
    }

    /// Whether a follower may fetch: the log must be durable up to its end, because the fetch
    /// offset tells the leader everything below it is replicated here (KAFKA-10533).
    pub(super) fn can_fetch(&self) -> bool {
        self.durable_end == self.end_offset
    }

    pub(super) fn maybe_fetch(&mut self) {
        if !self.can_fetch() || self.maybe_fetch_snapshot() {
            return;
        }
        let now = self.now;
        let can_fetch = self.can_fetch();
        let request = self.fetch_request();
        let Some(leader) = self.leader else {
            return;
        };
        let Role::Follower(f) = &mut self.role else {
            return;
        };
        if f.inflight.is_some() || !can_fetch || now < f.next_fetch_at {
            return;
        }
        f.inflight = Some(InflightFetch {
            sent_at: now,
            fetch_offset: request.fetch_offset,
            last_fetched_epoch: request.last_fetched_epoch,
        });
        self.send(leader, Message::FetchRequest(request));
    }

    fn fetch_request(&self) -> FetchRequest {
        FetchRequest {
            current_leader_epoch: self.epoch,
            fetch_offset: self.end_offset,
            last_fetched_epoch: self.cache.last_epoch(),
        }
    }

    /// An observer with no leader asks the voters in turn; any answer names the leader.
    pub(super) fn probe_voters(&mut self) {
        let now = self.now;
        let request = self.cfg.request_timeout_ms;
        let Role::Unattached {
            election_deadline: None,
            probe_sent_at,
        } = &mut self.role
        else {
            return;
        };
        if probe_sent_at.is_some_and(|t| now < t + request) {
            return;
        }
        *probe_sent_at = Some(now);
        let voters: Vec<NodeId> = self.cfg.voters.iter().copied().collect();
        let target = voters[self.probe_next % voters.len()];
        self.probe_next = self.probe_next.wrapping_add(1);
        let request = self.fetch_request();
        self.send(target, Message::FetchRequest(request));
    }

    pub(super) fn on_fetch_request(&mut self, from: NodeId, req: FetchRequest) {
        let error = if req.current_leader_epoch < self.epoch {
            Some(RaftError::FencedLeaderEpoch)
        } else if req.current_leader_epoch > self.epoch {
            Some(RaftError::UnknownLeaderEpoch)
        } else if !matches!(self.role, Role::Leader(_)) {
            Some(RaftError::NotLeaderOrFollower)
        } else {
            None
        };
        let mut response = FetchResponse {
            error,
            leader_epoch: self.epoch,
            leader_id: self.advertised_leader(),
            high_watermark: None,
            diverging_epoch: None,
            snapshot_id: None,
            records: Vec::new(),
            request: OffsetAndEpoch {
                epoch: req.last_fetched_epoch,
                offset: req.fetch_offset,
            },
        };
        if error.is_some() {
            return self.send(from, Message::FetchResponse(response));
        }
        if let Some(id) = self.snapshot_for_fetch(req.fetch_offset, req.last_fetched_epoch) {
            // Below our log start: the fetcher loads the snapshot first. Its fetch offset
            // acknowledges nothing we still have in the log.
            self.note_fetch(from, None);
            response.high_watermark = Some(self.high_watermark);
            response.snapshot_id = Some(id);
            return self.send(from, Message::FetchResponse(response));
        }
        let position = if self.planted_no_fetch_epoch_check() && req.fetch_offset <= self.end_offset
        {
            FetchPosition::Valid
        } else {
            self.cache
                .validate(req.fetch_offset, req.last_fetched_epoch, self.end_offset)
        };
        match position {
            FetchPosition::Invalid => {
                response.error = Some(RaftError::InvalidRequest);
                self.send(from, Message::FetchResponse(response));
            }
            FetchPosition::Diverging(end) => {
                // The fetcher must truncate first; this fetch acknowledges nothing.
                response.high_watermark = Some(self.high_watermark);
                response.diverging_epoch = Some(end);
                self.send(from, Message::FetchResponse(response));
            }
            FetchPosition::Valid => {
                self.note_fetch(from, Some(req.fetch_offset));
                self.update_high_watermark();
                response.high_watermark = Some(self.high_watermark);
                let (start, end) = (req.fetch_offset, self.end_offset);
                self.send_fetch_records(from, response, start, end);
            }
        }
    }

    pub(super) fn on_fetch_response(&mut self, from: NodeId, resp: FetchResponse) {
        if resp.error.is_some() {
            // An error names the responder's epoch and leader: adopt or learn them.
            if resp.leader_epoch > self.epoch {
                self.adopt_epoch(resp.leader_epoch, resp.leader_id);
            } else if resp.leader_epoch == self.epoch {
                if let Some(l) = resp.leader_id.filter(|l| Some(*l) != self.leader) {
                    self.learn_leader(from, l);
                }
            }
            if let Role::Follower(f) = &mut self.role {
                if self.leader == Some(from) {
                    f.inflight = None;
                }
            }
            if let Role::Unattached { probe_sent_at, .. } = &mut self.role {
                *probe_sent_at = None; // ask the next voter now
            }
            return;
        }
        if !self.on_response_epoch(from, resp.leader_epoch, resp.leader_id) {
            return;
        }
        let log_end = self.log_end();
        let Role::Follower(f) = &mut self.role else {
            return self.drop_input(Some(from), DropReason::Unexpected);
        };
        // Only an answer to a fetch from our current position counts (a late answer to an
        // older fetch, or a duplicate, could truncate what we have since fetched).
        if self.leader != Some(from) || resp.request != log_end {
            return self.drop_input(Some(from), DropReason::StaleFetchResponse);
        }
        if f.inflight.is_some_and(|i| i.fetch_offset == log_end.offset) {
            f.inflight = None;
        }
        f.fetched_ok = true;
        f.fetch_deadline = self.now + self.cfg.fetch_timeout_ms;
        if let Some(id) = resp.snapshot_id {
            return self.start_snapshot_fetch(from, id);
        }
        let idle = resp.records.is_empty() && resp.diverging_epoch.is_none();
        f.next_fetch_at = if idle {
            self.now + self.cfg.fetch_idle_backoff_ms
        } else {
            self.now
        };
        if let Some(diverging) = resp.diverging_epoch {
            // KRaft's `truncateToEndOffset`: to where our log leaves the leader's.
            let offset = match self.cache.end_offset_for(diverging.epoch, self.end_offset) {
                Some(ours) if ours.epoch == diverging.epoch => ours.offset.min(diverging.offset),
                Some(ours) => ours.offset,
                None => self.end_offset.min(diverging.offset),
            };
            let offset = offset.min(self.end_offset);
            if offset < self.high_watermark {
                return self.drop_input(Some(from), DropReason::TruncationBelowHighWatermark);
            }
            self.truncate(offset);
        } else if !resp.records.is_empty() {
            if !self.valid_batches(&resp.records) {
                return self.drop_input(Some(from), DropReason::InvalidBatches);
            }
            for batch in &resp.records {
                self.cache.assign(batch.epoch, batch.base_offset);
                self.end_offset = batch.next_offset();
            }
            self.push(Action::Append {
                batches: resp.records,
            });
        }
        if resp.diverging_epoch.is_none() {
            if let Some(hw) = resp.high_watermark {
                // Follower HW = min(leader HW, our end); it never goes back.
                let hw = hw.min(self.end_offset);
                if hw > self.high_watermark {
                    self.set_high_watermark(hw);
                }
            }
        }
        self.maybe_fetch();
    }

    /// Records from the leader must start at our end, be contiguous and non-empty, and carry
    /// epochs that never go back and never pass the leader's.
    fn valid_batches(&self, batches: &[Batch]) -> bool {
        let mut next = self.end_offset;
        let mut epoch = self.cache.last_epoch();
        for b in batches {
            if b.base_offset != next || b.count == 0 || b.epoch < epoch || b.epoch > self.epoch {
                return false;
            }
            next = b.next_offset();
            epoch = b.epoch;
        }
        true
    }

    fn truncate(&mut self, offset: Offset) {
        assert!(
            offset >= self.high_watermark,
            "truncating committed entries"
        );
        assert!(
            !matches!(self.role, Role::Leader(_)),
            "a leader never truncates"
        );
        if offset >= self.end_offset {
            return;
        }
        self.cache.truncate_from_end(offset);
        self.end_offset = offset;
        self.durable_end = self.durable_end.min(offset);
        self.push(Action::Truncate { offset });
    }

    pub(super) fn flushed(&mut self, end_offset: Offset) {
        if end_offset > self.end_offset {
            return self.drop_input(None, DropReason::InvalidReport);
        }
        self.durable_end = self.durable_end.max(end_offset);
        match self.role {
            Role::Leader(_) => self.update_high_watermark(),
            Role::Follower(_) => self.maybe_fetch(),
            _ => {}
        }
    }

    /// Leader: the HW is the offset a majority of voters has durably replicated, once that
    /// passes the start of our epoch.
    pub(super) fn update_high_watermark(&mut self) {
        let Role::Leader(state) = &self.role else {
            return;
        };
        let mut matches: BTreeMap<NodeId, Offset> = state
            .voters
            .iter()
            .map(|(id, p)| (*id, p.match_offset.unwrap_or(0)))
            .collect();
        matches.insert(self.cfg.node_id, self.durable_end);
        let mut committed = quorum::committed_offset(&self.cfg.voters, &matches);
        if self.planted_commit_on_minority() {
            committed = self.durable_end;
        }
        assert!(
            committed <= self.end_offset,
            "a majority is past the leader's end"
        );
        if (committed > state.epoch_start || self.planted_commit_old_epoch())
            && committed > self.high_watermark
        {
            self.set_high_watermark(committed);
        }
    }

    fn set_high_watermark(&mut self, hw: Offset) {
        assert!(hw > self.high_watermark, "the high watermark goes back");
        assert!(
            hw <= self.end_offset,
            "the high watermark passes the log end"
        );
        self.high_watermark = hw;
        self.push(Action::Commit { high_watermark: hw });
    }

    fn planted_commit_on_minority(&self) -> bool {
        #[cfg(any(madsim, test))]
        if (self.cfg.planted).is(crate::config::PlantedBug::QuorumCommitOnMinority) {
            return true;
        }
        false
    }

    /// Planted `quorum-commit-old-epoch`: Raft's figure 8, an earlier epoch's entries committed
    /// by counting replicas.
    fn planted_commit_old_epoch(&self) -> bool {
        #[cfg(any(madsim, test))]
        if (self.cfg.planted).is(crate::config::PlantedBug::QuorumCommitOldEpoch) {
            return true;
        }
        false
    }

    fn planted_no_fetch_epoch_check(&self) -> bool {
        #[cfg(any(madsim, test))]
        if (self.cfg.planted).is(crate::config::PlantedBug::QuorumNoDivergingEpoch) {
            return true;
        }
        false
    }
}
