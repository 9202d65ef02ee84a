//! One group entry's own logic: its state transitions, what it answers about its members, its
//! persisted value, and when its timers are due (Kafka's `ClassicGroup`).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::Group;
use crate::group::consumer::{ConsumerConfig, ConsumerGroup};
use crate::group::member::Member;
use crate::group::records::{self, GroupValue, MemberValue};
use crate::group::types::*;

impl Group {
    pub(super) fn new(id: &str, now: i64) -> Group {
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
            pending_txn: BTreeMap::new(),
            appends_in_flight: 0,
            consumer: None,
            #[cfg(any(madsim, test))]
            departed: Vec::new(),
        }
    }

    pub(super) fn transition(&mut self, next: GroupState, now: i64) {
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

    pub(super) fn max_rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0)
    }

    pub(super) fn deadline(&self) -> Option<i64> {
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
    pub(super) fn validate(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
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
    pub(super) fn select_protocol(&self) -> Option<String> {
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
    pub(super) fn accepts_protocols(
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

    pub(super) fn first_member(&self, parked_only: bool) -> Option<String> {
        self.members
            .values()
            .filter(|m| !parked_only || m.join.is_some())
            .min_by_key(|m| m.seq)
            .map(|m| m.id.clone())
    }

    pub(super) fn join_response(&self, member_id: &str) -> JoinResponse {
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

    pub(super) fn member_list(&self, protocol: &str) -> Vec<JoinedMember> {
        let mut members: Vec<&Member> = self.members.values().collect();
        members.sort_by_key(|m| m.seq);
        #[cfg(any(madsim, test))]
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

    pub(super) fn value(&self, now: i64) -> GroupValue {
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
    pub(super) fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
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
    pub(super) fn is_forgettable(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending.is_empty()
            && self.offsets.is_empty()
            && self.pending_txn.is_empty()
            && self.appends_in_flight == 0
            && self.generation == 0
            && self
                .consumer
                .as_ref()
                .is_none_or(|c| c.is_empty() && !c.has_records())
    }

    /// A classic group with nobody in it (a simple group, or one whose members all left) may
    /// become a consumer group.
    pub(super) fn is_classic_and_empty(&self) -> bool {
        self.state == GroupState::Empty && self.members.is_empty() && self.pending.is_empty()
    }

    pub(super) fn become_consumer(&mut self, config: &ConsumerConfig) {
        assert!(
            self.members.is_empty(),
            "group {}: converted with members",
            self.id
        );
        self.consumer = Some(Box::new(ConsumerGroup::new(&self.id, config)));
        self.protocol_type = Some("consumer".to_string());
        self.protocol = None;
        self.leader = None;
    }
}
