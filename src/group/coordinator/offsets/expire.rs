//! Offset retention (KIP-211): offsets past their expiry go, and an empty group left with
//! nothing goes with them (Kafka's `cleanupGroupMetadata`).

use super::super::*;
use crate::group::records;

type ExpiredKeys = Vec<((String, i32), u64)>;

impl Coordinator {
    pub(in crate::group::coordinator) fn on_expire_offsets(
        &mut self,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let retention = self.config.offsets_retention_ms;
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for id in ids {
            let g = self.groups.get_mut(&id).expect("listed above");
            if g.appends_in_flight > 0 {
                continue;
            }
            let keys = expired_offsets(g, now, retention);
            let Some(batch) = expiry_batch(g, &keys) else {
                continue;
            };
            g.appends_in_flight += 1;
            let partition = self.partition_of(&id).expect("a held group's partition");
            let pending = Pending::Expire { group: id, keys };
            self.append(partition, batch, pending, out);
        }
    }

    /// The expiry is written: drop the offsets no commit replaced meanwhile.
    pub(in crate::group::coordinator) fn expiry_written(
        g: &mut Group,
        pending: Pending,
        error: Option<GroupError>,
        now: i64,
    ) {
        let Pending::Expire { keys, .. } = pending else {
            unreachable!("not an expiry")
        };
        if error.is_some() {
            return;
        }
        for (k, seq) in keys {
            if g.offsets.get(&k).is_some_and(|c| c.seq == seq) {
                g.offsets.remove(&k);
            }
        }
        if g.state == GroupState::Empty
            && g.offsets.is_empty()
            && g.pending_txn.is_empty()
            && g.appends_in_flight == 0
        {
            g.transition(GroupState::Dead, now);
        }
    }
}

/// The group's offsets past retention, with the commit each was (so a later commit survives).
fn expired_offsets(g: &Group, now: i64, retention: i64) -> ExpiredKeys {
    let expired_by = |c: &Committed, base: i64| match c.value.expire_timestamp {
        Some(at) => now >= at,
        None => now - base >= retention,
    };
    // Never an offset a transaction may still commit over (Kafka's rule).
    let pending = |k: &(String, i32)| super::txn::has_pending(g, k);
    let pick = |keep: &dyn Fn(&(String, i32), &Committed) -> bool| -> ExpiredKeys {
        g.offsets
            .iter()
            .filter(|(k, c)| !pending(k) && keep(k, c))
            .map(|(k, c)| (k.clone(), c.seq))
            .collect()
    };
    // Only offsets of topics nobody subscribes to expire from a live group.
    let unsubscribed = |topics: &BTreeSet<String>| {
        pick(&|(t, _), c| !topics.contains(t) && expired_by(c, c.value.commit_timestamp))
    };
    if let Some(c) = g.consumer.as_ref().filter(|c| !c.is_empty()) {
        return unsubscribed(&c.subscribed_topic_names());
    }
    match g.state {
        GroupState::Empty if g.protocol_type.is_some() => {
            pick(&|_, c| expired_by(c, g.state_since.max(c.value.commit_timestamp)))
        }
        GroupState::Empty => pick(&|_, c| expired_by(c, c.value.commit_timestamp)),
        GroupState::Stable => g
            .subscribed_topics()
            .map(|topics| unsubscribed(&topics))
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The tombstones for `keys`, plus the group's own records when nothing is left of it;
/// `None` when there is nothing to write.
fn expiry_batch(g: &mut Group, keys: &ExpiredKeys) -> Option<Vec<OffsetRecord>> {
    let all_gone = keys.len() == g.offsets.len() && g.pending_txn.is_empty();
    // An empty consumer group left with no offsets is deleted: its records become tombstones.
    let consumer_gone = g.consumer.as_ref().is_some_and(|c| c.is_empty()) && all_gone;
    let consumer_records = consumer_gone && g.consumer.as_ref().unwrap().has_records();
    if keys.is_empty() && !consumer_records {
        return None;
    }
    let mut batch: Vec<OffsetRecord> = keys
        .iter()
        .map(|((t, p), _)| (records::offset_key(&g.id, t, *p), None))
        .collect();
    if g.state == GroupState::Empty && all_gone && g.generation > 0 {
        batch.push((records::group_key(&g.id), None));
    }
    if consumer_gone {
        batch.extend(g.consumer.as_mut().unwrap().tombstones());
    }
    Some(batch)
}
