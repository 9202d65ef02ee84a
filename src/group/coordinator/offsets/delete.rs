//! OffsetDelete (KIP-496): offsets of topics the group does not subscribe to go; and the
//! completion of every delete, DeleteGroups' included.

use std::collections::BTreeSet;

use super::super::*;
use crate::group::records;

impl Coordinator {
    pub(in crate::group::coordinator) fn on_delete_offsets(
        &mut self,
        request: RequestId,
        group_id: &str,
        partitions: Vec<(String, i32)>,
        out: &mut Vec<Action>,
    ) {
        let deny = |out: &mut Vec<Action>, e| respond(out, request, Response::Delete(Err(e)));
        if let Err(e) = self.gate(group_id) {
            return deny(out, e);
        }
        if partitions.len() > MAX_PARTITIONS_PER_REQUEST {
            return deny(out, GroupError::InvalidCommitOffsetSize);
        }
        let Some(g) = self.groups.get(group_id) else {
            return deny(out, GroupError::GroupIdNotFound);
        };
        let subscribed = match subscriptions(g) {
            Ok(subscribed) => subscribed,
            Err(e) => return deny(out, e),
        };
        let mut results = Vec::with_capacity(partitions.len());
        let mut keys = Vec::new();
        for (topic, partition) in partitions {
            if subscribed.as_ref().is_none_or(|s| s.contains(&topic)) {
                results.push((topic, partition, Some(GroupError::GroupSubscribedToTopic)));
                continue;
            }
            if g.offsets.contains_key(&(topic.clone(), partition)) {
                keys.push((topic.clone(), partition));
            }
            results.push((topic, partition, None));
        }
        if keys.is_empty() {
            return respond(out, request, Response::Delete(Ok(results)));
        }
        let batch = keys
            .iter()
            .map(|(t, p)| (records::offset_key(group_id, t, *p), None))
            .collect();
        let pending = Pending::Delete {
            request,
            group: group_id.to_string(),
            keys: Some(keys),
            results,
        };
        self.groups.get_mut(group_id).unwrap().appends_in_flight += 1;
        let partition = self
            .partition_of(group_id)
            .expect("a held group's partition");
        self.append(partition, batch, pending, out);
    }

    /// A delete is written (or not): drop the offsets (and an Empty group entirely), answer.
    pub(in crate::group::coordinator) fn delete_written(
        g: &mut Group,
        pending: Pending,
        error: Option<GroupError>,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let Pending::Delete {
            request,
            keys,
            results,
            ..
        } = pending
        else {
            unreachable!("not a delete")
        };
        if let Some(e) = error {
            return respond(out, request, Response::Delete(Err(e)));
        }
        match keys {
            Some(keys) => {
                for k in keys {
                    g.offsets.remove(&k);
                    super::txn::forget_pending(&mut g.pending_txn, &k);
                }
            }
            None => {
                g.offsets.clear();
                g.pending_txn.clear();
                if g.state == GroupState::Empty {
                    g.transition(GroupState::Dead, now);
                }
            }
        }
        respond(out, request, Response::Delete(Ok(results)));
    }
}

/// The topics whose offsets may not be deleted: what a live group subscribes to (`None`: every
/// topic, for a consumer group whose subscriptions do not parse), nothing for an Empty group.
fn subscriptions(g: &Group) -> Result<Option<BTreeSet<String>>, GroupError> {
    if let Some(c) = g.consumer.as_ref().filter(|c| !c.is_empty()) {
        return Ok(Some(c.subscribed_topic_names()));
    }
    match g.state {
        GroupState::Dead => Err(GroupError::GroupIdNotFound),
        GroupState::Empty => Ok(Some(BTreeSet::new())),
        _ if g.protocol_type.as_deref() == Some("consumer") && g.consumer.is_none() => {
            Ok(g.subscribed_topics())
        }
        _ if g.protocol_type.as_deref() == Some("consumer") => Ok(Some(BTreeSet::new())),
        _ => Err(GroupError::NonEmptyGroup),
    }
}
