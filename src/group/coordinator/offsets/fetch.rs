//! OffsetFetch: a read, answered from memory whatever the group's state.

use super::super::*;

impl Coordinator {
    /// Committed offsets of a group: all of them (`None`), or the named partitions (-1 for
    /// those without a commit). Group state does not matter. Each says whether a
    /// transactional commit for its partition waits for its marker, seen in the same look.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<CommittedOffset>, GroupError> {
        self.gate(group_id)?;
        let group = self.groups.get(group_id);
        let entry = |key: &(String, i32)| {
            let committed = group.and_then(|g| g.offsets.get(key));
            let unstable = group.is_some_and(|g| super::txn::has_pending(g, key));
            committed_offset(&key.0, key.1, committed, unstable)
        };
        Ok(match partitions {
            Some(list) => list.iter().map(entry).collect(),
            None => group
                .map(|g| g.offsets.keys().map(entry).collect())
                .unwrap_or_default(),
        })
    }
}

fn committed_offset(
    topic: &str,
    partition: i32,
    committed: Option<&Committed>,
    unstable: bool,
) -> CommittedOffset {
    match committed {
        Some(c) => CommittedOffset {
            topic: topic.to_string(),
            partition,
            offset: c.value.offset,
            leader_epoch: c.value.leader_epoch,
            metadata: c.value.metadata.clone(),
            unstable,
        },
        None => CommittedOffset {
            topic: topic.to_string(),
            partition,
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            unstable,
        },
    }
}
