//! After healing and the final read: wait (bounded) until every replica of the workload's
//! partitions has caught up with its leader, then read every replica's log straight from its
//! running broker (the partition under its lock, batch headers only) for `replica_check`.
//! Nothing is written; the read goes through the log's own read path, like a follower's fetch.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use weir::log::batch;
use weir::replica::partition::Role;

use crate::nemesis::Machine;
use crate::replica_check::{BatchId, ReplicaLog};
use crate::workload::RunClock;

/// How long replicas may take to catch up with their leaders once everything has healed.
pub const CATCH_UP_BOUND: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(250);
/// Bytes read from a log per call.
const CHUNK: usize = 1 << 20;
/// Bound on batches read from one replica (a run writes far fewer).
const MAX_BATCHES: usize = 2_000_000;

/// Every running broker's replica of each partition of `topic`, by partition.
pub fn read_replicas(
    machines: &[Machine],
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, Vec<ReplicaLog>> {
    let mut out: BTreeMap<i32, Vec<ReplicaLog>> = BTreeMap::new();
    for (index, m) in machines.iter().enumerate() {
        let Some(broker) = m.broker.lock().unwrap().clone() else {
            continue;
        };
        for p in 0..partitions {
            let Some(handle) = broker.partition(topic, p) else {
                continue;
            };
            let g = handle.lock();
            let (start, end) = (g.log_start_offset(), g.log_end_offset());
            let mut batches = Vec::new();
            let mut offset = start;
            while offset < end && batches.len() < MAX_BATCHES {
                let Ok(bytes) = g.log().read(offset, CHUNK, end) else {
                    break;
                };
                let before = offset;
                for item in batch::iter(&bytes) {
                    let Ok((_, h)) = item else { break };
                    batches.push(BatchId {
                        base: h.base_offset,
                        last: h.next_offset() - 1,
                        epoch: h.partition_leader_epoch,
                        crc: h.crc,
                    });
                    offset = h.next_offset();
                }
                // Every round makes progress or ends this replica's read.
                if offset == before {
                    break;
                }
            }
            out.entry(p).or_default().push(ReplicaLog {
                node: index as i32 + 1,
                leader: g.role() == Role::Leader,
                leader_epoch: g.leader_epoch(),
                high_watermark: g.high_watermark(),
                log_start: start,
                log_end: end,
                batches,
            });
        }
    }
    out
}

/// Why the replicas have not caught up: a partition with fewer than `replication_factor`
/// running replicas, none leading, or one whose log end or high watermark is below its
/// leader's high watermark. `exempt` partitions (leaderless by design) are not waited for.
pub fn lagging(
    logs: &BTreeMap<i32, Vec<ReplicaLog>>,
    partitions: i32,
    replication_factor: usize,
    exempt: &BTreeSet<i32>,
) -> Option<String> {
    for p in (0..partitions).filter(|p| !exempt.contains(p)) {
        let replicas = logs.get(&p).map(Vec::as_slice).unwrap_or_default();
        if replicas.len() < replication_factor {
            return Some(format!(
                "partition {p}: {} of {replication_factor} replicas running",
                replicas.len()
            ));
        }
        let Some(leader) = replicas
            .iter()
            .filter(|r| r.leader)
            .max_by_key(|r| r.leader_epoch)
        else {
            return Some(format!("partition {p}: no replica leads"));
        };
        if let Some(r) = replicas
            .iter()
            .find(|r| r.log_end < leader.high_watermark || r.high_watermark < leader.high_watermark)
        {
            return Some(format!(
                "partition {p}: node {} at log end {} high watermark {}, leader node {} (epoch {}) at high watermark {}",
                r.node, r.log_end, r.high_watermark, leader.node, leader.leader_epoch, leader.high_watermark
            ));
        }
    }
    None
}

/// Polls until every replica has caught up or [`CATCH_UP_BOUND`] passes; returns the logs
/// last read and, if they never caught up, why.
pub async fn settle(
    machines: &[Machine],
    topic: &str,
    partitions: i32,
    replication_factor: usize,
    exempt: &std::sync::Mutex<BTreeSet<i32>>,
    clock: RunClock,
) -> (BTreeMap<i32, Vec<ReplicaLog>>, Option<String>) {
    let deadline = clock.now_ms() + CATCH_UP_BOUND.as_millis() as u64;
    loop {
        let logs = read_replicas(machines, topic, partitions);
        let exempt = exempt.lock().unwrap().clone();
        let lag = lagging(&logs, partitions, replication_factor, &exempt);
        if lag.is_none() || clock.now_ms() >= deadline {
            return (logs, lag);
        }
        tokio::time::sleep(POLL).await;
    }
}
