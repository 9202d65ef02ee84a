//! Quorum safety, judged from samples of every node's own view while the run goes on:
//!
//! - **one leader per epoch**: every `(epoch, leader)` a node states — as Leader itself, or as
//!   the leader it follows — must agree with every other statement for that epoch. Two nodes
//!   naming different leaders for one epoch (two Leaders included) is a violation.
//! - **committed metadata is one sequence**: every record a node reports committed is
//!   remembered by offset; a different value at an offset already seen committed (on any node,
//!   at any time, before or after restarts) is a violation. At the end, after healing, every
//!   node's whole committed sequence is compared the same way.
//!
//! Plain code over plain values: the world feeds it, unit tests drive it directly.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use weir::broker::quorum_status::{QuorumRole, QuorumStatus};

/// Bound on how many examples of one anomaly are kept for the report.
const EXAMPLES: usize = 20;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuorumFindings {
    /// Conflicting leader statements for one epoch: how many (each stating node and leader
    /// counted once), and examples.
    pub leader_conflicts: usize,
    pub leaders: Vec<String>,
    /// Conflicting or gapped committed metadata (each offset and node counted once), and
    /// examples.
    pub committed_conflicts: usize,
    pub committed: Vec<String>,
    /// Run time (ms) of the first conflicting leader statement.
    pub leaders_ms: Option<u64>,
    /// Run time (ms) of the first committed-metadata conflict.
    pub committed_ms: Option<u64>,
    /// Status samples taken, epochs seen with a leader, committed offsets seen.
    pub samples: u64,
    pub epochs: usize,
    pub offsets: usize,
}

/// Who stated a leader for an epoch first, and when.
#[derive(Clone, Copy, Debug)]
struct Statement {
    leader: i32,
    by: i32,
    at_ms: u64,
}

#[derive(Debug, Default)]
pub struct QuorumObserver {
    leaders: BTreeMap<u32, Statement>,
    /// Offset → (value, the node that first reported it, when).
    committed: BTreeMap<u64, (Bytes, i32, u64)>,
    /// Per node, the next committed offset to ask for while sampling.
    cursors: BTreeMap<i32, u64>,
    /// Conflicts already reported: (epoch, stating node, leader named) and (offset, node), so
    /// that a conflict seen in every sample counts once.
    reported_leaders: BTreeSet<(u32, i32, i32)>,
    reported_offsets: BTreeSet<(u64, i32)>,
    findings: QuorumFindings,
}

fn push_example(list: &mut Vec<String>, example: impl FnOnce() -> String) {
    if list.len() < EXAMPLES {
        list.push(example());
    }
}

fn short(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    let mut s: String = text.chars().take(80).collect();
    if text.chars().count() > 80 {
        s.push('…');
    }
    s
}

impl QuorumObserver {
    pub fn findings(&self) -> &QuorumFindings {
        &self.findings
    }

    pub fn into_findings(mut self) -> QuorumFindings {
        self.findings.epochs = self.leaders.len();
        self.findings.offsets = self.committed.len();
        self.findings
    }

    /// The offset to sample node `node`'s committed metadata from.
    pub fn cursor(&self, node: i32) -> u64 {
        self.cursors.get(&node).copied().unwrap_or(0)
    }

    /// One node's status at run time `at_ms`.
    pub fn observe_status(&mut self, at_ms: u64, status: &QuorumStatus) {
        self.findings.samples += 1;
        let mut stated = Vec::new();
        if status.role == QuorumRole::Leader {
            stated.push(status.node_id);
        }
        if let Some(leader) = status.leader {
            stated.push(leader);
        }
        for leader in stated {
            self.state_leader(at_ms, status.epoch, leader, status.node_id);
        }
    }

    fn state_leader(&mut self, at_ms: u64, epoch: u32, leader: i32, by: i32) {
        match self.leaders.get(&epoch) {
            None => {
                self.leaders.insert(epoch, Statement { leader, by, at_ms });
            }
            Some(first) if first.leader == leader => {}
            Some(_) if !self.reported_leaders.insert((epoch, by, leader)) => {}
            Some(first) => {
                let first = *first;
                self.findings.leader_conflicts += 1;
                push_example(&mut self.findings.leaders, || {
                    format!(
                        "epoch {epoch}: node {by} names leader {leader} at {at_ms} ms, node {} named leader {} at {} ms",
                        first.by, first.leader, first.at_ms
                    )
                });
                self.findings.leaders_ms.get_or_insert(at_ms);
            }
        }
    }

    /// Committed records node `node` reported at `at_ms` (from its cursor on, while sampling).
    pub fn observe_committed(&mut self, at_ms: u64, node: i32, records: &[(u64, Bytes)]) {
        for (offset, value) in records {
            self.record_committed(at_ms, node, *offset, value);
        }
        if let Some((last, _)) = records.last() {
            let cursor = self.cursors.entry(node).or_insert(0);
            *cursor = (*cursor).max(last + 1);
        }
    }

    fn record_committed(&mut self, at_ms: u64, node: i32, offset: u64, value: &Bytes) {
        match self.committed.get(&offset) {
            None => {
                self.committed.insert(offset, (value.clone(), node, at_ms));
            }
            Some((seen, _, _)) if seen == value => {}
            Some(_) if !self.reported_offsets.insert((offset, node)) => {}
            Some((seen, by, when)) => {
                let (seen, by, when) = (seen.clone(), *by, *when);
                self.findings.committed_conflicts += 1;
                push_example(&mut self.findings.committed, || {
                    format!(
                        "offset {offset}: node {node} has {} at {at_ms} ms, node {by} had {} at {when} ms",
                        short(value),
                        short(&seen)
                    )
                });
                self.findings.committed_ms.get_or_insert(at_ms);
            }
        }
    }

    /// A node's whole committed sequence after healing: it must agree with everything seen.
    /// (Offsets may skip: control batches such as LeaderChange hold no metadata record.)
    pub fn observe_final(&mut self, at_ms: u64, node: i32, records: &[(u64, Bytes)]) {
        for (offset, value) in records {
            self.record_committed(at_ms, node, *offset, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(node: i32, role: QuorumRole, epoch: u32, leader: Option<i32>) -> QuorumStatus {
        QuorumStatus {
            node_id: node,
            role,
            epoch,
            leader,
            high_watermark: 0,
            log_end: 0,
            log_start: 0,
            snapshot: None,
            replicas: Vec::new(),
        }
    }

    fn rec(offset: u64, v: &str) -> (u64, Bytes) {
        (offset, Bytes::from(v.to_string()))
    }

    #[test]
    fn one_leader_per_epoch_holds_across_epochs() {
        let mut o = QuorumObserver::default();
        o.observe_status(10, &status(1, QuorumRole::Leader, 1, Some(1)));
        o.observe_status(10, &status(2, QuorumRole::Follower, 1, Some(1)));
        o.observe_status(20, &status(2, QuorumRole::Leader, 2, Some(2)));
        // A stale leader of an older epoch is no conflict.
        o.observe_status(20, &status(1, QuorumRole::Leader, 1, Some(1)));
        o.observe_status(30, &status(3, QuorumRole::Candidate, 3, None));
        assert!(o.findings().leaders.is_empty());
        assert_eq!(o.into_findings().epochs, 2);
    }

    #[test]
    fn two_leaders_in_one_epoch_are_caught() {
        let mut o = QuorumObserver::default();
        o.observe_status(10, &status(1, QuorumRole::Leader, 4, Some(1)));
        o.observe_status(15, &status(3, QuorumRole::Leader, 4, Some(3)));
        // The same conflict sampled again counts once.
        o.observe_status(35, &status(3, QuorumRole::Leader, 4, Some(3)));
        let f = o.findings();
        assert_eq!(f.leaders.len(), 1, "{:?}", f.leaders);
        assert_eq!(f.leader_conflicts, 1);
        assert_eq!(f.leaders_ms, Some(15));
    }

    #[test]
    fn a_follower_naming_another_leader_is_caught() {
        let mut o = QuorumObserver::default();
        o.observe_status(10, &status(1, QuorumRole::Leader, 4, Some(1)));
        o.observe_status(12, &status(2, QuorumRole::Follower, 4, Some(3)));
        assert_eq!(o.findings().leaders.len(), 1);
    }

    #[test]
    fn committed_prefixes_agree() {
        let mut o = QuorumObserver::default();
        o.observe_committed(10, 1, &[rec(0, "a"), rec(1, "b")]);
        assert_eq!(o.cursor(1), 2);
        o.observe_committed(12, 2, &[rec(0, "a")]);
        o.observe_committed(14, 2, &[rec(1, "b"), rec(2, "c")]);
        o.observe_final(20, 3, &[rec(0, "a"), rec(1, "b"), rec(2, "c")]);
        assert!(o.findings().committed.is_empty());
        assert_eq!(o.into_findings().offsets, 3);
    }

    #[test]
    fn a_changed_committed_record_is_caught() {
        let mut o = QuorumObserver::default();
        o.observe_committed(10, 1, &[rec(0, "a"), rec(1, "b")]);
        // After a failover, offset 1 holds another record: a committed record was lost.
        o.observe_committed(30, 2, &[rec(0, "a"), rec(1, "x")]);
        let f = o.findings();
        assert_eq!(f.committed.len(), 1, "{:?}", f.committed);
        assert_eq!(f.committed_ms, Some(30));
    }
}
