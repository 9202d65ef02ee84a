//! The admin requests over groups of either protocol: ListGroups, DescribeGroups (classic
//! groups only, as Kafka's) and DeleteGroups.

use bytes::Bytes;

use super::*;
use crate::group::records;

impl Coordinator {
    pub fn list_groups(&self) -> (Option<GroupError>, Vec<GroupListing>) {
        let loading = self.partitions.values().any(|l| *l == Load::Loading);
        let groups = self.groups.values().map(listing).collect();
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
        match self.groups.get(group_id) {
            // Kafka's DescribeGroups knows only classic groups: a consumer group is "not found"
            // there (admin clients use ConsumerGroupDescribe for it).
            Some(g) if g.consumer.is_none() => describe_classic(g, d),
            _ => d,
        }
    }

    pub(super) fn on_delete_group(
        &mut self,
        request: RequestId,
        group_id: &str,
        out: &mut Vec<Action>,
    ) {
        let deny = |out: &mut Vec<Action>, e| respond(out, request, Response::Delete(Err(e)));
        if let Err(e) = self.gate(group_id) {
            return deny(out, e);
        }
        let Some(g) = self.groups.get_mut(group_id) else {
            return deny(out, GroupError::GroupIdNotFound);
        };
        if g.consumer.as_ref().is_some_and(|c| !c.is_empty()) {
            return deny(out, GroupError::NonEmptyGroup);
        }
        match g.state {
            GroupState::Dead => return deny(out, GroupError::GroupIdNotFound),
            GroupState::Empty => {}
            _ => return deny(out, GroupError::NonEmptyGroup),
        }
        // Pending transactional offsets go too (a tombstone of their key drops them on replay).
        let keys: BTreeSet<&(String, i32)> = g
            .offsets
            .keys()
            .chain(g.pending_txn.values().flat_map(|o| o.keys()))
            .collect();
        let mut batch: Vec<OffsetRecord> = keys
            .into_iter()
            .map(|(t, p)| (records::offset_key(group_id, t, *p), None))
            .collect();
        batch.push((records::group_key(group_id), None));
        if let Some(c) = g.consumer.as_mut() {
            batch.extend(c.tombstones());
        }
        g.appends_in_flight += 1;
        let partition = self
            .partition_of(group_id)
            .expect("a held group's partition");
        let pending = Pending::Delete {
            request,
            group: group_id.to_string(),
            keys: None,
            results: Vec::new(),
        };
        self.append(partition, batch, pending, out);
    }
}

fn listing(g: &Group) -> GroupListing {
    GroupListing {
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
    }
}

/// A classic group's description: protocol and member metadata only once Stable.
fn describe_classic(g: &Group, mut d: GroupDescription) -> GroupDescription {
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
    let only_stable = |b: Bytes| if stable { b } else { Bytes::new() };
    d.members = members
        .into_iter()
        .map(|m| MemberDescription {
            member_id: m.id.clone(),
            instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            metadata: only_stable(m.metadata(&protocol)),
            assignment: only_stable(m.assignment.clone()),
        })
        .collect();
    d
}
