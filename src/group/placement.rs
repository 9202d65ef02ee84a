//! Which `__consumer_offsets` partition owns a group: Kafka's `abs(groupId.hashCode()) % n`,
//! bit for bit, so a client or tool that computes the placement itself agrees with us.

/// Java's `String.hashCode`: over UTF-16 code units, wrapping `i32` arithmetic.
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// Kafka's `Utils.abs`: `i32::MIN` maps to 0 (unlike `Math.abs`, which leaves it negative).
fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN {
        0
    } else {
        n.abs()
    }
}

/// The offsets-log partition of `group_id` among `partitions` partitions.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    assert!(
        partitions > 0,
        "the offsets topic has at least one partition"
    );
    let p = kafka_abs(java_hash(group_id)) % partitions;
    assert!((0..partitions).contains(&p));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_from_kafka() {
        let cases: &[(&str, i32, i32)] = &[
            ("", 0, 0),
            ("my-group", -1906497762, 12),
            ("test-group", 627841412, 12),
            ("group-a", 293427347, 47),
            ("é", 233, 33),
            ("grp-😀", -1235730613, 13),
            ("polygenelubricants", i32::MIN, 0),
        ];
        for &(group, hash, partition) in cases {
            assert_eq!(java_hash(group), hash, "hash of {group:?}");
            assert_eq!(
                partition_for(group, 50),
                partition,
                "partition of {group:?}"
            );
        }
    }

    #[test]
    fn one_partition_takes_everything() {
        assert_eq!(partition_for("anything", 1), 0);
    }
}
