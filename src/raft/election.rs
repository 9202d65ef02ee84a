//! Elections: Vote (with KIP-996 pre-vote), BeginQuorumEpoch and EndQuorumEpoch, on both the
//! asking and the answering side.

use super::action::DropReason;
use super::message::{
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest,
    EndQuorumEpochResponse, Message, RaftError, VoteRequest, VoteResponse,
};
use super::node::Raft;
use super::quorum::{self, VoteResult};
use super::role::Role;
use super::types::{Epoch, NodeId, OffsetAndEpoch};

impl Raft {
    /// The epoch rules every response obeys (KRaft's `maybeHandleCommonResponse`): a newer
    /// epoch moves us there and the response is otherwise ignored; an older one is dropped; a
    /// leader named for our epoch is learned. Returns whether to go on with the response.
    pub(super) fn on_response_epoch(
        &mut self,
        from: NodeId,
        epoch: Epoch,
        leader: Option<NodeId>,
    ) -> bool {
        if epoch > self.epoch {
            self.adopt_epoch(epoch, leader);
            return false;
        }
        if epoch < self.epoch {
            self.drop_input(Some(from), DropReason::StaleEpoch);
            return false;
        }
        match leader {
            // New information, or the leader's own word (a prospective that timed out on it
            // follows it again; hearsay about a leader it already gave up on does not).
            Some(l) if self.leader != Some(l) || (from == l && !self.follows_leader()) => {
                self.learn_leader(from, l)
            }
            _ => true,
        }
    }

    /// Whether our role already reflects the epoch's known leader.
    fn follows_leader(&self) -> bool {
        matches!(
            self.role,
            Role::Follower(_) | Role::Leader(_) | Role::Resigned { .. }
        )
    }

    /// The leader our responses name: never ourselves unless we lead (a resigned or
    /// restarted leader must not keep followers waiting on it).
    pub(super) fn advertised_leader(&self) -> Option<NodeId> {
        match self.leader {
            Some(l) if l == self.cfg.node_id && !matches!(self.role, Role::Leader(_)) => None,
            other => other,
        }
    }

    pub(super) fn on_vote_request(&mut self, from: NodeId, req: VoteRequest) {
        let refuse = |node: &Raft, error| VoteResponse {
            error: Some(error),
            leader_epoch: node.epoch,
            leader_id: node.advertised_leader(),
            vote_granted: false,
            pre_vote: req.pre_vote,
        };
        if !self.cfg.voters.contains(&from) {
            let response = refuse(self, RaftError::InconsistentVoterSet);
            return self.send(from, Message::VoteResponse(response));
        }
        if from != req.candidate_id || req.last_offset_epoch > req.candidate_epoch {
            let response = refuse(self, RaftError::InvalidRequest);
            return self.send(from, Message::VoteResponse(response));
        }
        if req.candidate_epoch < self.epoch {
            let response = refuse(self, RaftError::FencedLeaderEpoch);
            return self.send(from, Message::VoteResponse(response));
        }
        if req.candidate_epoch > self.epoch {
            // Pre-vote or not, a newer epoch exists: we are behind and know no leader in it.
            self.adopt_epoch(req.candidate_epoch, None);
        }
        let candidate_log = OffsetAndEpoch {
            epoch: req.last_offset_epoch,
            offset: req.last_offset,
        };
        let log_ok = if self.planted(PlantedVote::OffsetOnly) {
            candidate_log.offset >= self.log_end().offset
        } else {
            candidate_log >= self.log_end() || self.planted_grant_shorter_log()
        };
        let granted = self.is_voter
            && log_ok
            && if req.pre_vote {
                // KIP-996: a follower that still hears from its leader refuses to help unseat
                // it; a leader never grants.
                match &self.role {
                    Role::Leader(_) => false,
                    Role::Follower(f) => !f.fetched_ok,
                    _ => true,
                }
            } else {
                self.leader.is_none()
                    && match self.voted_for {
                        Some(v) => v == from || self.planted(PlantedVote::Twice),
                        None => matches!(
                            self.role,
                            Role::Unattached { .. } | Role::Prospective { .. }
                        ),
                    }
            };
        if granted && !req.pre_vote {
            // The vote is persisted before the response leaves (the send barrier).
            self.become_unattached(self.epoch, Some(from));
        }
        let response = VoteResponse {
            error: None,
            leader_epoch: self.epoch,
            leader_id: self.advertised_leader(),
            vote_granted: granted,
            pre_vote: req.pre_vote,
        };
        self.send(from, Message::VoteResponse(response));
    }

    pub(super) fn on_vote_response(&mut self, from: NodeId, resp: VoteResponse) {
        if !self.on_response_epoch(from, resp.leader_epoch, resp.leader_id) {
            return;
        }
        if !self.cfg.voters.contains(&from) {
            return self.drop_input(Some(from), DropReason::NotAVoter);
        }
        let granted = resp.vote_granted && resp.error.is_none();
        match &mut self.role {
            Role::Prospective { votes, .. } if resp.pre_vote => {
                votes.insert(from, granted);
            }
            Role::Candidate { votes, .. } if !resp.pre_vote => {
                votes.insert(from, granted);
            }
            _ => return self.drop_input(Some(from), DropReason::Unexpected),
        }
        self.maybe_end_election();
    }

    /// Ends a pre-vote or vote whose outcome is known. A candidate counts its own vote only
    /// once it is persisted.
    pub(super) fn maybe_end_election(&mut self) {
        let durable = self.state_is_durable();
        match &self.role {
            Role::Prospective { votes, .. } => match quorum::tally(&self.cfg.voters, votes) {
                VoteResult::Won => self.become_candidate(),
                // KIP-996: a majority still hears from the leader we lost; we follow it again
                // (and fetch at once) rather than wait out the deadline with a stale log. With
                // no leader known a lost pre-vote waits for the deadline, then pre-votes again.
                VoteResult::Lost => {
                    if let Some(leader) = self.last_known_leader() {
                        self.become_follower(self.epoch, leader);
                    }
                }
                VoteResult::Pending => {}
            },
            Role::Candidate { votes, retries, .. } => {
                match quorum::tally(&self.cfg.voters, votes) {
                    VoteResult::Won if durable => self.become_leader(),
                    VoteResult::Lost => {
                        let retries = retries + 1;
                        let backoff = self.election_backoff(retries);
                        let now = self.now;
                        if let Role::Candidate {
                            votes,
                            deadline,
                            retries: r,
                            ..
                        } = &mut self.role
                        {
                            // Back off once; further answers change nothing.
                            votes.clear();
                            votes.insert(self.cfg.node_id, true);
                            *deadline = (*deadline).min(now + backoff);
                            *r = retries;
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// (Re)sends Vote to every voter that has not answered this round.
    pub(super) fn send_vote_requests(&mut self, pre_vote: bool) {
        let votes = match &self.role {
            Role::Prospective { votes, .. } | Role::Candidate { votes, .. } => votes.clone(),
            _ => return,
        };
        let log_end = self.log_end();
        let request = VoteRequest {
            candidate_epoch: self.epoch,
            candidate_id: self.cfg.node_id,
            last_offset_epoch: log_end.epoch,
            last_offset: log_end.offset,
            pre_vote,
        };
        let voters: Vec<NodeId> = self.cfg.voters.iter().copied().collect();
        for voter in voters {
            if voter != self.cfg.node_id && !votes.contains_key(&voter) {
                self.send(voter, Message::VoteRequest(request.clone()));
            }
        }
    }

    pub(super) fn on_begin_quorum_epoch(&mut self, from: NodeId, req: BeginQuorumEpochRequest) {
        let error = if !self.cfg.voters.contains(&from) {
            Some(RaftError::InconsistentVoterSet)
        } else if from != req.leader_id {
            Some(RaftError::InvalidRequest)
        } else if req.leader_epoch < self.epoch {
            Some(RaftError::FencedLeaderEpoch)
        } else {
            None
        };
        if error.is_none() {
            if req.leader_epoch > self.epoch {
                self.adopt_epoch(req.leader_epoch, Some(req.leader_id));
            } else if !self.learn_leader(from, req.leader_id) {
                return;
            }
        }
        let response = BeginQuorumEpochResponse {
            error,
            leader_epoch: self.epoch,
            leader_id: self.advertised_leader(),
        };
        self.send(from, Message::BeginQuorumEpochResponse(response));
    }

    pub(super) fn on_begin_quorum_epoch_response(
        &mut self,
        from: NodeId,
        resp: BeginQuorumEpochResponse,
    ) {
        if !self.on_response_epoch(from, resp.leader_epoch, resp.leader_id) {
            return;
        }
        match &mut self.role {
            Role::Leader(state) if resp.error.is_none() => match state.voters.get_mut(&from) {
                Some(progress) => progress.acked = true,
                None => self.drop_input(Some(from), DropReason::NotAVoter),
            },
            _ => self.drop_input(Some(from), DropReason::Unexpected),
        }
    }

    pub(super) fn on_end_quorum_epoch(&mut self, from: NodeId, req: EndQuorumEpochRequest) {
        let error = if !self.cfg.voters.contains(&from) {
            Some(RaftError::InconsistentVoterSet)
        } else if from != req.leader_id {
            Some(RaftError::InvalidRequest)
        } else if req.leader_epoch < self.epoch {
            Some(RaftError::FencedLeaderEpoch)
        } else {
            None
        };
        if error.is_none() {
            if req.leader_epoch > self.epoch {
                self.adopt_epoch(req.leader_epoch, Some(req.leader_id));
            } else if !self.learn_leader(from, req.leader_id) {
                return;
            }
            // Stand soon, the most caught-up successor first (KRaft's `endEpochElectionBackoff`).
            let rank = req
                .preferred_successors
                .iter()
                .position(|s| *s == self.cfg.node_id);
            let delay = match rank {
                Some(0) => 0,
                Some(r) => self.election_backoff(u32::try_from(r).unwrap_or(u32::MAX)),
                None => self.cfg.election_backoff_max_ms,
            };
            let now = self.now;
            if let Role::Follower(f) = &mut self.role {
                if self.is_voter {
                    f.fetch_deadline = f.fetch_deadline.min(now + delay);
                }
                // The leader is leaving: pre-votes may be granted again.
                f.fetched_ok = false;
            }
        }
        let response = EndQuorumEpochResponse {
            error,
            leader_epoch: self.epoch,
            leader_id: self.advertised_leader(),
        };
        self.send(from, Message::EndQuorumEpochResponse(response));
    }

    pub(super) fn on_end_quorum_epoch_response(
        &mut self,
        from: NodeId,
        resp: EndQuorumEpochResponse,
    ) {
        if !self.on_response_epoch(from, resp.leader_epoch, resp.leader_id) {
            return;
        }
        match &mut self.role {
            Role::Resigned { unacked, .. } => {
                unacked.remove(&from);
            }
            _ => self.drop_input(Some(from), DropReason::Unexpected),
        }
    }

    /// (Re)sends EndQuorumEpoch to the voters that have not answered.
    pub(super) fn send_end_quorum_epoch(&mut self) {
        let Role::Resigned {
            unacked,
            successors,
            ..
        } = &self.role
        else {
            return;
        };
        let request = EndQuorumEpochRequest {
            leader_epoch: self.epoch,
            leader_id: self.cfg.node_id,
            preferred_successors: successors.clone(),
        };
        let unacked: Vec<NodeId> = unacked.iter().copied().collect();
        for voter in unacked {
            self.send(voter, Message::EndQuorumEpochRequest(request.clone()));
        }
    }

    fn planted(&self, bug: PlantedVote) -> bool {
        #[cfg(any(madsim, test))]
        {
            let bug = match bug {
                PlantedVote::Twice => crate::config::PlantedBug::QuorumDoubleVote,
                PlantedVote::OffsetOnly => crate::config::PlantedBug::QuorumVoteComparesOffsetOnly,
            };
            if (self.cfg.planted).is(bug) {
                return true;
            }
        }
        let _ = bug;
        false
    }

    fn planted_grant_shorter_log(&self) -> bool {
        #[cfg(any(madsim, test))]
        if (self.cfg.planted).is(crate::config::PlantedBug::QuorumGrantShorterLog) {
            return true;
        }
        false
    }
}

/// The vote bugs the mutation run plants (`quorum-double-vote`, `quorum-vote-compares-offset-only`).
#[derive(Clone, Copy)]
enum PlantedVote {
    /// A second candidate granted in an epoch already voted in.
    Twice,
    /// Logs compared by end offset alone.
    OffsetOnly,
}
