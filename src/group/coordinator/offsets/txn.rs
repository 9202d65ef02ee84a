//! Transactional offsets (KIP-98, KIP-447; Kafka's `OffsetMetadataManager` pending
//! transactional offsets): TxnOffsetCommit writes the offsets to `__consumer_offsets` as a
//! transactional batch of the producer, and they stay pending, per producer id, until the
//! transaction's marker reaches the group's offsets partition: COMMIT makes each one the
//! committed offset (unless a commit later in the log replaced it), ABORT drops them. They are
//! pending from the moment their batch is appended (a marker can be committed before the
//! append's own completion is reported) until the marker, or until their append fails.
//! OffsetFetch never sees them; with `require_stable` a partition that has one answers
//! UNSTABLE_OFFSET_COMMIT. A replay rebuilds both the committed and the still-pending ones.

use super::super::*;
use super::commit::refuse;

impl Coordinator {
    pub(in crate::group::coordinator) fn on_txn_commit(
        &mut self,
        request: RequestId,
        req: TxnCommitRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        let TxnCommitRequest {
            commit: req,
            producer_id,
            producer_epoch,
        } = req;
        // The group gate, the size check, and an unknown group created Empty for a commit
        // outside any generation (Kafka creates it for TxnOffsetCommit too).
        if let Err(e) = self.admit_commit(&req, now) {
            return refuse(out, request, &req, e);
        }
        let fenced = self.validate_txn_commit(
            &req.group_id,
            &req.member_id,
            req.instance_id.as_deref(),
            req.generation,
        );
        let dead = self
            .groups
            .get(&req.group_id)
            .is_some_and(|g| g.state == GroupState::Dead);
        if let Some(e) = fenced
            .err()
            .or(dead.then_some(GroupError::CoordinatorNotAvailable))
        {
            // A group just created for this request and refused is forgotten again.
            self.with_group(&req.group_id, |_, _| {});
            return refuse(out, request, &req, e);
        }
        let batch = self.commit_batch(&req, now);
        let id = req.group_id.clone();
        if batch.records.is_empty() {
            self.with_group(&id, |_, _| {});
            return respond(out, request, Response::Commit(batch.response));
        }
        let seq = self.take_seq();
        let transaction = Some(TxnProducer {
            producer_id,
            producer_epoch,
        });
        let partition = self.partition_of(&id).expect("a held group's partition");
        self.with_group(&id, |c, g| {
            let pending = g.pending_txn.entry(producer_id).or_default();
            let written = batch
                .accepted
                .iter()
                .map(|(i, value)| {
                    let (topic, partition, _) = &batch.response.partitions[*i];
                    let key = (topic.clone(), *partition);
                    let new = Committed {
                        value: value.clone(),
                        seq,
                    };
                    let replaced = pending.insert(key.clone(), new);
                    TxnWritten { key, replaced }
                })
                .collect();
            let pending = Pending::TxnCommit {
                request,
                group: id.clone(),
                producer_id,
                seq,
                written,
                response: batch.response,
                accepted: batch.accepted.into_iter().map(|(i, _)| i).collect(),
            };
            g.appends_in_flight += 1;
            c.append_as(partition, batch.records, pending, transaction, out);
        })
        .expect("admitted above");
    }

    /// The transactional commit is written (its offsets stay pending until the marker), or
    /// not (they are taken back, unless the marker already settled them or a later commit of
    /// the same transaction replaced them).
    pub(in crate::group::coordinator) fn txn_commit_written(
        g: &mut Group,
        pending: Pending,
        error: Option<GroupError>,
        out: &mut Vec<Action>,
    ) {
        let Pending::TxnCommit {
            request,
            producer_id,
            seq,
            written,
            mut response,
            accepted,
            ..
        } = pending
        else {
            unreachable!("not a transactional commit")
        };
        if let Some(e) = error {
            for i in accepted {
                response.partitions[i].2 = Some(e);
            }
            if let Some(offsets) = g.pending_txn.get_mut(&producer_id) {
                for w in written {
                    if offsets.get(&w.key).is_some_and(|c| c.seq == seq) {
                        match w.replaced {
                            Some(before) => offsets.insert(w.key, before),
                            None => offsets.remove(&w.key),
                        };
                    }
                }
                if offsets.is_empty() {
                    g.pending_txn.remove(&producer_id);
                }
            }
        }
        respond(out, request, Response::Commit(response));
    }

    /// A transaction marker of `producer_id` is committed on offsets partition `partition`:
    /// its pending offsets in every group held there are committed or dropped. A partition
    /// still loading ignores it: its replay reads the log to its end, marker included.
    pub(in crate::group::coordinator) fn on_txn_marker(
        &mut self,
        partition: i32,
        producer_id: i64,
        commit: bool,
    ) {
        if self.partitions.get(&partition) != Some(&Load::Loaded) {
            return;
        }
        let ids: Vec<String> = self
            .groups
            .iter()
            .filter(|(id, g)| {
                g.pending_txn.contains_key(&producer_id) && self.partition_of(id) == Some(partition)
            })
            .map(|(id, _)| id.clone())
            .collect();
        #[cfg(any(madsim, test))]
        let commit =
            commit || (self.config.planted).is(crate::config::PlantedBug::TxnOffsetsOnAbort);
        for id in ids {
            self.with_group(&id, |_, g| {
                settle(&mut g.pending_txn, &mut g.offsets, producer_id, commit)
            });
        }
    }

    /// Whether `group_id` has a transactional offset for (`topic`, `partition`) waiting for its
    /// transaction's marker (OffsetFetch answers it with the offset: [`CommittedOffset::unstable`]).
    pub fn has_pending_txn_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        self.groups
            .get(group_id)
            .is_some_and(|g| has_pending(g, &key))
    }

    /// The pending transactional offsets of `group_id`: (producer id, topic, partition, offset).
    pub fn pending_txn_offsets(&self, group_id: &str) -> Vec<(i64, String, i32, i64)> {
        let Some(g) = self.groups.get(group_id) else {
            return Vec::new();
        };
        g.pending_txn
            .iter()
            .flat_map(|(pid, offsets)| {
                offsets
                    .iter()
                    .map(move |((t, p), c)| (*pid, t.clone(), *p, c.value.offset))
            })
            .collect()
    }
}

/// Whether a transactional commit for `key` in `g` waits for its transaction's marker.
pub(in crate::group::coordinator) fn has_pending(g: &Group, key: &(String, i32)) -> bool {
    g.pending_txn.values().any(|o| o.contains_key(key))
}

/// One offset a transactional commit made pending, and what it replaced (an earlier commit of
/// the same transaction), to put back if the append fails.
#[derive(Debug)]
pub(in crate::group::coordinator) struct TxnWritten {
    key: (String, i32),
    replaced: Option<Committed>,
}

/// The marker of `producer_id`: COMMIT makes each pending offset the committed one unless a
/// commit later in the log (a higher sequence) is already there; ABORT drops them. Used live
/// and by the replay, so both end the same.
pub(in crate::group::coordinator) fn settle(
    pending_txn: &mut BTreeMap<i64, BTreeMap<(String, i32), Committed>>,
    offsets: &mut BTreeMap<(String, i32), Committed>,
    producer_id: i64,
    commit: bool,
) {
    let Some(pending) = pending_txn.remove(&producer_id) else {
        return;
    };
    if !commit {
        return;
    }
    for (key, c) in pending {
        if offsets.get(&key).is_none_or(|current| current.seq < c.seq) {
            offsets.insert(key, c);
        }
    }
}

/// A tombstone for `key` (OffsetDelete, DeleteGroups, expiry) removes its pending
/// transactional offsets too (Kafka's replay of an offset tombstone does).
pub(in crate::group::coordinator) fn forget_pending(
    pending_txn: &mut BTreeMap<i64, BTreeMap<(String, i32), Committed>>,
    key: &(String, i32),
) {
    pending_txn.retain(|_, offsets| {
        offsets.remove(key);
        !offsets.is_empty()
    });
}
