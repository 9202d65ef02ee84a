//! Fetch from follower (KIP-392): which replica a leader sends a consumer to. Kafka's
//! `RackAwareReplicaSelector` over Kafka's `ReplicaView` ordering, as a pure function; the
//! leader side (`Partition::preferred_read_replica`) picks the candidates, the broker supplies
//! the racks from the metadata image.
//!
//! Rules (Kafka's `ReplicaManager.findPreferredReadReplica` and the selector):
//! - only consumers (never a follower's replication fetch), only with a client rack, only when
//!   `replica.selector.class` is set;
//! - candidates are the leader and the followers in the committed ISR whose log end (as last
//!   fetched) reaches the consumer's fetch offset;
//! - the leader when it is in the client's rack, or when no candidate is; otherwise the most
//!   caught-up candidate in the rack: highest log end, then least time since it was last caught
//!   up, then highest broker id (a total order, so the choice is deterministic).

use std::cmp::Reverse;

/// One replica as the selector sees it (Kafka's `ReplicaView`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaView {
    pub id: i32,
    /// Its broker's `broker.rack`; `None` when unset or when the broker cannot be reached
    /// (fenced or unregistered: Kafka's `Node.noNode()`, which matches no rack).
    pub rack: Option<String>,
    /// The replica's log end: the leader's own, a follower's as of its last fetch.
    pub log_end: i64,
    /// Milliseconds since it was last caught up with the leader (0 for the leader).
    pub since_caught_up_ms: i64,
}

/// Kafka's `RackAwareReplicaSelector`: the id of the replica a consumer in `client_rack` should
/// read from, `leader.id` when the leader itself serves it. An empty rack always gets the
/// leader.
pub fn rack_aware(client_rack: &str, leader: &ReplicaView, followers: &[ReplicaView]) -> i32 {
    let in_rack =
        |r: &&ReplicaView| !client_rack.is_empty() && r.rack.as_deref() == Some(client_rack);
    if in_rack(&leader) {
        return leader.id;
    }
    followers
        .iter()
        .filter(in_rack)
        .max_by_key(|r| (r.log_end, Reverse(r.since_caught_up_ms), r.id))
        .map_or(leader.id, |r| r.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: i32, rack: Option<&str>, log_end: i64, since: i64) -> ReplicaView {
        ReplicaView {
            id,
            rack: rack.map(str::to_string),
            log_end,
            since_caught_up_ms: since,
        }
    }

    #[test]
    fn no_rack_or_no_replica_in_it_reads_from_the_leader() {
        let leader = view(1, Some("a"), 10, 0);
        let followers = [view(2, Some("b"), 10, 0), view(3, None, 10, 0)];
        assert_eq!(rack_aware("", &leader, &followers), 1);
        assert_eq!(rack_aware("c", &leader, &followers), 1);
        assert_eq!(rack_aware("b", &leader, &[]), 1);
    }

    #[test]
    fn the_leader_wins_in_its_own_rack() {
        let leader = view(1, Some("a"), 5, 0);
        let followers = [view(2, Some("a"), 9, 0)];
        assert_eq!(rack_aware("a", &leader, &followers), 1);
    }

    #[test]
    fn a_follower_in_the_rack_is_chosen() {
        let leader = view(1, Some("a"), 10, 0);
        let followers = [view(2, Some("b"), 10, 0), view(3, Some("c"), 10, 0)];
        assert_eq!(rack_aware("b", &leader, &followers), 2);
        assert_eq!(rack_aware("c", &leader, &followers), 3);
    }

    #[test]
    fn the_most_caught_up_follower_in_the_rack_wins() {
        let leader = view(1, Some("a"), 20, 0);
        // Highest log end first.
        let followers = [view(2, Some("b"), 18, 0), view(3, Some("b"), 19, 500)];
        assert_eq!(rack_aware("b", &leader, &followers), 3);
        // Then the least time since caught up.
        let followers = [view(2, Some("b"), 19, 100), view(3, Some("b"), 19, 500)];
        assert_eq!(rack_aware("b", &leader, &followers), 2);
        // Then the highest id (Kafka's comparator's last key, under max).
        let followers = [view(4, Some("b"), 19, 100), view(2, Some("b"), 19, 100)];
        assert_eq!(rack_aware("b", &leader, &followers), 4);
    }

    #[test]
    fn rack_names_match_exactly() {
        let leader = view(1, Some("RACK1"), 10, 0);
        let followers = [view(2, Some("rack2"), 10, 0)];
        assert_eq!(rack_aware("RACK2", &leader, &followers), 1);
        assert_eq!(rack_aware("rack2", &leader, &followers), 2);
    }
}
