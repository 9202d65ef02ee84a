//! Where a new partition's replicas go: Kafka's rack-unaware assignment (AdminUtils'
//! `assignReplicasToBrokersRackUnaware`), and the checks on a manual assignment.
//!
//! The assignment walks the sorted brokers round-robin from a random start, so leaders spread
//! evenly; the followers of a partition sit at a shift from its leader that grows by one each
//! time the partitions wrap around the brokers, so followers spread too. The randomness is the
//! `entropy` the driver passes: the same entropy gives the same placement.

use super::ControllerError;

/// Assigns `replication_factor` distinct brokers to each of the partitions
/// `first..first + count`. `brokers` are the unfenced brokers that may take new replicas.
pub fn assign(
    brokers: &[i32],
    first: i32,
    count: i32,
    replication_factor: i16,
    entropy: u64,
) -> Result<Vec<Vec<i32>>, ControllerError> {
    let mut brokers = brokers.to_vec();
    brokers.sort_unstable();
    brokers.dedup();
    let n = brokers.len();
    if replication_factor < 1 {
        return Err(ControllerError::InvalidReplicationFactor(format!(
            "replication factor must be at least 1, got {replication_factor}"
        )));
    }
    if replication_factor as usize > n {
        return Err(ControllerError::InvalidReplicationFactor(format!(
            "Unable to replicate the partition {replication_factor} time(s): The target \
             replication factor of {replication_factor} cannot be reached because only {n} \
             broker(s) are registered."
        )));
    }
    assert!(first >= 0 && count >= 0);
    let start = (entropy % n as u64) as usize;
    let mut shift = ((entropy >> 32) % n as u64) as usize;
    let mut out = Vec::with_capacity(count as usize);
    for partition in first as usize..(first + count) as usize {
        if partition > 0 && partition % n == 0 {
            shift += 1;
        }
        let leader = (partition + start) % n;
        let mut replicas = vec![brokers[leader]];
        for j in 0..replication_factor as usize - 1 {
            // Never 0 mod n: a follower never lands on the leader, and the shifts of one
            // partition's followers differ, so the replicas are distinct.
            let step = 1 + (shift + j) % (n - 1);
            replicas.push(brokers[(leader + step) % n]);
        }
        out.push(replicas);
    }
    Ok(out)
}

/// Checks a manual assignment (CreateTopics / CreatePartitions `assignments`) as Kafka's
/// controller does: each partition names distinct registered brokers, all partitions the same
/// number of them (and `replication_factor` when one is fixed), and at least one active.
pub fn check_manual(
    assignments: &[Vec<i32>],
    replication_factor: Option<usize>,
    registered: impl Fn(i32) -> bool,
    active: impl Fn(i32) -> bool,
    first: i32,
) -> Result<(), ControllerError> {
    let invalid = |m: String| Err(ControllerError::InvalidReplicaAssignment(m));
    let want = replication_factor.or_else(|| assignments.first().map(Vec::len));
    for (i, replicas) in assignments.iter().enumerate() {
        let index = first + i as i32;
        if replicas.is_empty() {
            return invalid(format!("The manual partition assignment includes an empty replica list (partition {index})."));
        }
        let mut sorted = replicas.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return invalid(format!(
                "The manual partition assignment includes the broker {} more than once (partition {index}).",
                sorted.windows(2).find(|w| w[0] == w[1]).unwrap()[0]
            ));
        }
        if let Some(b) = replicas.iter().find(|b| !registered(**b)) {
            return invalid(format!(
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            ));
        }
        if Some(replicas.len()) != want {
            return invalid(format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {} replica(s).",
                replicas.len(),
                want.unwrap_or(0)
            ));
        }
        if !replicas.iter().any(|b| active(*b)) {
            return invalid(format!(
                "All brokers specified in the manual partition assignment for partition {index} are fenced or in controlled shutdown."
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (brokers, first, count, rf, entropy) → expected replicas, by partition.
    type Case = (
        &'static [i32],
        i32,
        i32,
        i16,
        u64,
        &'static [&'static [i32]],
    );
    type ManualCase = (&'static [&'static [i32]], Option<usize>, &'static str);

    #[test]
    fn assignments_follow_kafkas_round_robin() {
        let cases: &[Case] = &[
            // Start 0, shift 0: leaders 1,2,3; the follower right after the leader.
            (&[1, 2, 3], 0, 3, 2, 0, &[&[1, 2], &[2, 3], &[3, 1]]),
            // Wrapping around bumps the shift: the follower moves one further out.
            (
                &[1, 2, 3],
                0,
                6,
                2,
                0,
                &[&[1, 2], &[2, 3], &[3, 1], &[1, 3], &[2, 1], &[3, 2]],
            ),
            // 2^32: start index 1 (entropy % 3), shift 1 (entropy >> 32, % 3).
            (
                &[1, 2, 3],
                0,
                3,
                3,
                1 << 32,
                &[&[2, 1, 3], &[3, 2, 1], &[1, 3, 2]],
            ),
            // Brokers are sorted first; RF 1 is round-robin alone.
            (&[9, 4, 7], 0, 4, 1, 0, &[&[4], &[7], &[9], &[4]]),
            // New partitions continue the walk from their index (CreatePartitions).
            (&[1, 2, 3], 3, 2, 2, 0, &[&[1, 3], &[2, 1]]),
            // One broker.
            (&[5], 0, 2, 1, 12345, &[&[5], &[5]]),
        ];
        for &(brokers, first, count, rf, entropy, want) in cases {
            let got = assign(brokers, first, count, rf, entropy).unwrap();
            let want: Vec<Vec<i32>> = want.iter().map(|r| r.to_vec()).collect();
            assert_eq!(
                got, want,
                "brokers {brokers:?} first {first} rf {rf} entropy {entropy}"
            );
        }
    }

    #[test]
    fn replicas_are_distinct_and_leaders_balanced_for_any_entropy() {
        for n in 1..=6i32 {
            let brokers: Vec<i32> = (1..=n).collect();
            for rf in 1..=n as i16 {
                for entropy in [0u64, 1, 7, 1 << 33, u64::MAX] {
                    let got = assign(&brokers, 0, 4 * n, rf, entropy).unwrap();
                    let mut leaders = vec![0; n as usize + 1];
                    for replicas in &got {
                        let mut s = replicas.clone();
                        s.sort_unstable();
                        s.dedup();
                        assert_eq!(s.len(), rf as usize, "{replicas:?}");
                        leaders[replicas[0] as usize] += 1;
                    }
                    assert!(leaders[1..].iter().all(|&l| l == 4), "{leaders:?}");
                }
            }
        }
    }

    #[test]
    fn a_replication_factor_above_the_brokers_is_refused() {
        assert!(matches!(
            assign(&[1, 2], 0, 1, 3, 0),
            Err(ControllerError::InvalidReplicationFactor(_))
        ));
        assert!(matches!(
            assign(&[], 0, 1, 1, 0),
            Err(ControllerError::InvalidReplicationFactor(_))
        ));
    }

    #[test]
    fn manual_assignments_are_checked_as_kafka_checks_them() {
        let registered = |b: i32| (1..=3).contains(&b);
        let active = |b: i32| b != 3;
        let check = |a: &[&[i32]], rf: Option<usize>| {
            let a: Vec<Vec<i32>> = a.iter().map(|r| r.to_vec()).collect();
            check_manual(&a, rf, registered, active, 0)
        };
        assert!(check(&[&[1, 2], &[2, 3]], None).is_ok());
        let cases: &[ManualCase] = &[
            (&[&[]], None, "empty replica list"),
            (&[&[1, 1]], None, "more than once"),
            (&[&[1, 4]], None, "no such broker"),
            (&[&[1, 2], &[1]], None, "not consistent"),
            (&[&[1]], Some(2), "not consistent"),
            (&[&[3]], None, "fenced or in controlled shutdown"),
        ];
        for &(a, rf, why) in cases {
            match check(a, rf) {
                Err(ControllerError::InvalidReplicaAssignment(m)) => {
                    assert!(m.contains(why), "{a:?}: {m}")
                }
                other => panic!("{a:?}: {other:?}"),
            }
        }
    }
}
