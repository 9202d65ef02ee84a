//! OffsetCommit: validated against the group (generation, or KIP-848 member epoch), written to
//! the offsets log, applied and answered once written.

use super::super::*;
use crate::group::records;

/// The commit's records and what each accepted partition will hold once written.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) response: CommitResponse,
    pub(super) accepted: Vec<(usize, OffsetValue)>,
    pub(super) records: Vec<OffsetRecord>,
}

impl Coordinator {
    pub(in crate::group::coordinator) fn on_commit(
        &mut self,
        request: RequestId,
        req: CommitRequest,
        now: i64,
        out: &mut Vec<Action>,
    ) {
        if let Err(e) = self.admit_commit(&req, now) {
            return refuse(out, request, &req, e);
        }
        let batch = self.commit_batch(&req, now);
        let id = req.group_id.clone();
        let will_append = !batch.records.is_empty();
        let verdict = self
            .with_group(&id, |c, g| {
                let verdict = commit_verdict(&c.config, g, &req, now);
                if verdict.is_ok() && will_append {
                    // Counted before `with_group` decides whether to forget the group.
                    g.appends_in_flight += 1;
                }
                verdict
            })
            .expect("group exists");
        if let Err(e) = verdict {
            return refuse(out, request, &req, e);
        }
        if !will_append {
            return respond(out, request, Response::Commit(batch.response));
        }
        let pending = Pending::Commit {
            request,
            group: id.clone(),
            accepted: batch.accepted,
            response: batch.response,
            seq: self.take_seq(),
        };
        let partition = self.partition_of(&id).expect("a held group's partition");
        self.append(partition, batch.records, pending, out);
    }

    /// The checks before the group is touched; creates a simple group (commits only: `assign()`
    /// users, admin tools) for a commit outside any generation.
    pub(super) fn admit_commit(&mut self, req: &CommitRequest, now: i64) -> Result<(), GroupError> {
        self.gate(&req.group_id)?;
        if req.offsets.len() > MAX_PARTITIONS_PER_REQUEST {
            return Err(GroupError::InvalidCommitOffsetSize);
        }
        if self.groups.contains_key(&req.group_id) {
            return Ok(());
        }
        if req.generation >= 0 {
            return Err(req.unknown_group);
        }
        if self.groups.len() >= self.config.max_groups {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let g = Group::new(&req.group_id, now);
        self.groups.insert(req.group_id.clone(), g);
        Ok(())
    }

    /// One record per partition whose metadata fits `offset.metadata.max.bytes`.
    pub(super) fn commit_batch(&self, req: &CommitRequest, now: i64) -> Batch {
        let mut batch = Batch::default();
        for (i, o) in req.offsets.iter().enumerate() {
            let metadata = o.metadata.clone().unwrap_or_default();
            if metadata.len() > self.config.offset_metadata_max_bytes {
                let e = Some(GroupError::OffsetMetadataTooLarge);
                batch
                    .response
                    .partitions
                    .push((o.topic.clone(), o.partition, e));
                continue;
            }
            batch
                .response
                .partitions
                .push((o.topic.clone(), o.partition, None));
            let value = OffsetValue {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata,
                commit_timestamp: now,
                expire_timestamp: (req.retention_ms >= 0).then(|| now + req.retention_ms),
            };
            batch.records.push((
                records::offset_key(&req.group_id, &o.topic, o.partition),
                Some(records::offset_value(&value)),
            ));
            batch.accepted.push((i, value));
        }
        batch
    }

    /// The commit is written (or not): apply it unless a later commit already landed, answer.
    pub(in crate::group::coordinator) fn commit_written(
        g: &mut Group,
        pending: Pending,
        error: Option<GroupError>,
        out: &mut Vec<Action>,
    ) {
        let Pending::Commit {
            request,
            accepted,
            mut response,
            seq,
            ..
        } = pending
        else {
            unreachable!("not a commit")
        };
        for (i, value) in accepted {
            let slot = &mut response.partitions[i];
            if let Some(e) = error {
                slot.2 = Some(e);
                continue;
            }
            let key = (slot.0.clone(), slot.1);
            let newer = g.offsets.get(&key).is_some_and(|c| c.seq > seq);
            if !newer {
                g.offsets.insert(key, Committed { value, seq });
            }
        }
        respond(out, request, Response::Commit(response));
    }
}

/// Every partition of the commit fails with `e`.
pub(super) fn refuse(
    out: &mut Vec<Action>,
    request: RequestId,
    req: &CommitRequest,
    e: GroupError,
) {
    let partitions = req
        .offsets
        .iter()
        .map(|o| (o.topic.clone(), o.partition, Some(e)))
        .collect();
    respond(
        out,
        request,
        Response::Commit(CommitResponse { partitions }),
    );
}

/// Whether a commit may be written (`validateOffsetCommit`); refreshes the session.
#[cfg_attr(not(any(madsim, test)), allow(unused_variables))]
fn commit_verdict(
    config: &GroupConfig,
    g: &mut Group,
    req: &CommitRequest,
    now: i64,
) -> Result<(), GroupError> {
    if g.state == GroupState::Dead {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    if let Some(c) = &g.consumer {
        // The generation field carries the member epoch (OffsetCommit v9).
        return c.validate_commit(&req.member_id, req.generation);
    }
    #[cfg(any(madsim, test))]
    if req.generation >= 0
        && req.generation < g.generation
        && (config.planted).is(crate::config::PlantedBug::GroupCommitStaleGeneration)
    {
        return Ok(());
    }
    let is_member_commit =
        req.generation >= 0 || !req.member_id.is_empty() || req.instance_id.is_some();
    if req.generation < 0 && g.state == GroupState::Empty {
        return Ok(());
    }
    if !is_member_commit {
        return Err(GroupError::UnknownMemberId);
    }
    g.validate(&req.member_id, req.instance_id.as_deref())?;
    if req.generation != g.generation {
        return Err(GroupError::IllegalGeneration);
    }
    match g.state {
        GroupState::CompletingRebalance => Err(GroupError::RebalanceInProgress),
        GroupState::Stable | GroupState::PreparingRebalance => {
            g.members.get_mut(&req.member_id).unwrap().last_heard = now;
            Ok(())
        }
        GroupState::Empty => Ok(()),
        GroupState::Dead => unreachable!(),
    }
}

impl Coordinator {
    /// TxnOffsetCommit's fencing (KIP-447, v3+), checked when the offsets are sent (they are
    /// written unchecked when the transaction commits): applies only when the request names a
    /// member, an instance or a generation; then the member must exist and the generation be
    /// the group's (a consumer-protocol group: its member epoch). A group that does not exist
    /// or is empty accepts it without a generation.
    pub fn validate_txn_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        if generation < 0 && member_id.is_empty() && instance_id.is_none() {
            return Ok(());
        }
        let Some(g) = self.groups.get(group_id) else {
            // Kafka creates it Empty, where only a commit without a generation passes.
            return if generation < 0 {
                Ok(())
            } else {
                Err(GroupError::UnknownMemberId)
            };
        };
        if g.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if let Some(c) = &g.consumer {
            return c.validate_commit(member_id, generation);
        }
        if generation < 0 && g.state == GroupState::Empty {
            return Ok(());
        }
        g.validate(member_id, instance_id)?;
        if generation != g.generation {
            return Err(GroupError::IllegalGeneration);
        }
        Ok(())
    }
}
