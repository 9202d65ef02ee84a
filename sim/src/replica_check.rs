//! Replicas never diverge below the high watermark (replication notes §8, invariants 2–4):
//! after healing, every replica's log of every partition is compared, batch by batch (base and
//! last offset, partition leader epoch, CRC), with every other replica's below the lower of
//! the two replicas' high watermarks; and each replica's high watermark must lie inside its
//! log (log start ≤ HW ≤ LEO). Pure: the world gathers the logs (`ReplicaLog`) from every
//! running broker, this judges them.

use std::collections::BTreeMap;

/// One batch as a replica stores it: enough to tell two copies apart without the bytes (the
/// CRC covers everything after the epoch; offsets and epoch are compared on their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchId {
    pub base: i64,
    pub last: i64,
    pub epoch: i32,
    pub crc: u32,
}

/// One replica's log of one partition, read on its broker after healing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaLog {
    /// The broker's node id.
    pub node: i32,
    pub leader: bool,
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub log_start: i64,
    pub log_end: i64,
    /// In offset order, from the log start.
    pub batches: Vec<BatchId>,
}

/// Bound on the divergences described per partition (the count is what fails the run).
const EXAMPLES: usize = 10;

/// Every divergence among one partition's replicas, described.
pub fn check(partition: i32, replicas: &[ReplicaLog]) -> Vec<String> {
    let mut out = Vec::new();
    for r in replicas {
        if !(r.log_start <= r.high_watermark && r.high_watermark <= r.log_end) {
            out.push(format!(
                "partition {partition} node {}: high watermark {} outside its log [{}, {})",
                r.node, r.high_watermark, r.log_start, r.log_end
            ));
        }
    }
    for (i, a) in replicas.iter().enumerate() {
        for b in &replicas[i + 1..] {
            let bound = a.high_watermark.min(b.high_watermark);
            let from = a.log_start.max(b.log_start);
            let mut found = 0;
            for d in diverging(a, b, from, bound)
                .into_iter()
                .chain(diverging(b, a, from, bound))
            {
                found += 1;
                if found <= EXAMPLES {
                    out.push(format!("partition {partition}: {d}"));
                }
            }
            if found > EXAMPLES {
                out.push(format!(
                    "partition {partition}: nodes {} and {}: {} more differences",
                    a.node,
                    b.node,
                    found - EXAMPLES
                ));
            }
        }
    }
    out
}

/// The batches of `a` in `[from, bound)` that `b` does not hold identically.
fn diverging(a: &ReplicaLog, b: &ReplicaLog, from: i64, bound: i64) -> Vec<String> {
    let theirs: BTreeMap<i64, &BatchId> = b.batches.iter().map(|x| (x.base, x)).collect();
    a.batches
        .iter()
        .filter(|x| x.base >= from && x.base < bound)
        .filter(|x| theirs.get(&x.base) != Some(x))
        .map(|x| {
            let other = theirs
                .get(&x.base)
                .map_or_else(|| "no batch starting there".to_string(), |y| describe(y));
            format!(
                "below high watermark {bound}, node {} holds {} but node {} {}",
                a.node,
                describe(x),
                b.node,
                other
            )
        })
        .collect()
}

fn describe(x: &BatchId) -> String {
    format!(
        "[{}..={}] epoch {} crc {:08x}",
        x.base, x.last, x.epoch, x.crc
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, last: i64, epoch: i32, crc: u32) -> BatchId {
        BatchId {
            base,
            last,
            epoch,
            crc,
        }
    }

    fn replica(node: i32, hw: i64, batches: Vec<BatchId>) -> ReplicaLog {
        let log_end = batches.last().map_or(0, |b| b.last + 1);
        ReplicaLog {
            node,
            leader: node == 1,
            leader_epoch: 2,
            high_watermark: hw,
            log_start: 0,
            log_end,
            batches,
        }
    }

    #[test]
    fn identical_prefixes_and_tails_above_the_high_watermark_agree() {
        let common = vec![batch(0, 4, 1, 0xa), batch(5, 9, 1, 0xb)];
        let mut leader = common.clone();
        leader.push(batch(10, 14, 2, 0xc));
        // The follower holds a stale tail from epoch 1 above its high watermark: allowed
        // (it truncates by diverging epoch on its next fetch).
        let mut follower = common.clone();
        follower.push(batch(10, 12, 1, 0xd));
        let lagging = vec![batch(0, 4, 1, 0xa)];
        let logs = [
            replica(1, 15, leader),
            replica(2, 10, follower),
            replica(3, 5, lagging),
        ];
        assert!(check(0, &logs).is_empty(), "{:?}", check(0, &logs));
    }

    #[test]
    fn a_different_batch_below_both_high_watermarks_diverges() {
        // KIP-101's double failure: offset 5 written in epoch 1 on one replica and in epoch 2
        // on the other, both committed as far as each replica knows.
        let a = replica(1, 10, vec![batch(0, 4, 1, 0xa), batch(5, 9, 2, 0xb)]);
        let b = replica(2, 10, vec![batch(0, 4, 1, 0xa), batch(5, 9, 1, 0xe)]);
        let found = check(3, &[a.clone(), b.clone()]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("partition 3") && found[0].contains("epoch 2"));
        // The same bytes and offsets but another epoch is a divergence too.
        let c = replica(2, 10, vec![batch(0, 4, 1, 0xa), batch(5, 9, 3, 0xb)]);
        assert_eq!(check(0, &[a.clone(), c]).len(), 2);
        // Batches split differently (5..=7 and 8..=9 against 5..=9) diverge.
        let d = replica(
            2,
            10,
            vec![
                batch(0, 4, 1, 0xa),
                batch(5, 7, 2, 0xb),
                batch(8, 9, 2, 0xf),
            ],
        );
        assert!(!check(0, &[a, d]).is_empty());
    }

    #[test]
    fn a_missing_batch_below_the_high_watermark_diverges() {
        // Node 2 claims a high watermark of 10 but lost [5..=9]: a hole under committed data.
        let a = replica(1, 10, vec![batch(0, 4, 1, 0xa), batch(5, 9, 1, 0xb)]);
        let mut b = replica(2, 10, vec![batch(0, 4, 1, 0xa)]);
        b.log_end = 10;
        let found = check(0, &[a, b]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("no batch starting there"));
    }

    #[test]
    fn a_high_watermark_outside_the_log_is_reported() {
        let mut a = replica(1, 12, vec![batch(0, 4, 1, 0xa)]);
        let found = check(0, std::slice::from_ref(&a));
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("outside its log"));
        a.high_watermark = 5;
        assert!(check(0, &[a]).is_empty());
    }

    #[test]
    fn retention_below_one_replica_start_is_not_divergence() {
        let a = replica(1, 10, vec![batch(0, 4, 1, 0xa), batch(5, 9, 1, 0xb)]);
        let mut b = replica(2, 10, vec![batch(5, 9, 1, 0xb)]);
        b.log_start = 5;
        assert!(check(0, &[a, b]).is_empty());
    }
}
