//! The follower's Fetch, built from where each partition stands (pure: positions in, request
//! out). Kafka's follower shape (v15+): `ReplicaState` with this broker's id and epoch, no
//! fetch session (a full fetch each time), and per partition the image's leader epoch
//! (`CurrentLeaderEpoch`, so a stale leader or follower is fenced), the log end as the fetch
//! offset, the epoch of the last batch held (`LastFetchedEpoch`, so the leader can say where
//! the logs diverge, KIP-320) and the local log start.

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::{BrokerId, FetchRequest};

pub use crate::replica::fetcher::Position;

/// The Fetch version a follower sends: the first with `ReplicaState` (broker epoch, KIP-903).
pub const FETCH_VERSION: i16 = 15;

/// What every follower fetch of this broker carries (`replica.fetch.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchSettings {
    pub replica_id: i32,
    /// This broker's epoch (its registration's offset), -1 if not known yet.
    pub broker_epoch: i64,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub response_max_bytes: i32,
    pub partition_max_bytes: i32,
}

/// The Fetch for `positions` (grouped under their topics in the order given).
pub fn build(settings: &FetchSettings, positions: &[Position]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for p in positions {
        if topics.last().is_none_or(|t| t.topic_id != p.topic_id) {
            topics.push(FetchTopic::default().with_topic_id(p.topic_id));
        }
        let partition = FetchPartition::default()
            .with_partition(p.partition)
            .with_current_leader_epoch(p.leader_epoch)
            .with_fetch_offset(p.fetch_offset)
            .with_last_fetched_epoch(p.last_fetched_epoch)
            .with_log_start_offset(p.log_start_offset)
            .with_partition_max_bytes(settings.partition_max_bytes);
        topics.last_mut().unwrap().partitions.push(partition);
    }
    FetchRequest::default()
        .with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(settings.replica_id))
                .with_replica_epoch(settings.broker_epoch),
        )
        .with_max_wait_ms(settings.max_wait_ms)
        .with_min_bytes(settings.min_bytes)
        .with_max_bytes(settings.response_max_bytes)
        // Sessionless: every request names every partition (FetchRequest.FINAL_EPOCH... -1).
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::protocol::{Decodable, Encodable};

    use uuid::Uuid;

    use super::*;

    fn position(topic: &str, id: u64, partition: i32, offset: i64) -> Position {
        Position {
            topic: topic.into(),
            topic_id: Uuid::from_u64_pair(0, id),
            partition,
            leader_epoch: 4,
            fetch_offset: offset,
            last_fetched_epoch: 3,
            log_start_offset: 0,
        }
    }

    #[test]
    fn the_request_is_kafkas_follower_fetch_and_survives_the_wire() {
        let settings = FetchSettings {
            replica_id: 2,
            broker_epoch: 77,
            max_wait_ms: 500,
            min_bytes: 1,
            response_max_bytes: 10_000,
            partition_max_bytes: 1_000,
        };
        let positions = [
            position("a", 1, 0, 10),
            position("a", 1, 1, 20),
            position("b", 2, 0, 0),
        ];
        let req = build(&settings, &positions);
        let mut buf = bytes::BytesMut::new();
        req.encode(&mut buf, FETCH_VERSION).unwrap();
        let back = FetchRequest::decode(&mut buf.freeze(), FETCH_VERSION).unwrap();
        assert_eq!(back.replica_state.replica_id.0, 2);
        assert_eq!(back.replica_state.replica_epoch, 77);
        assert_eq!(back.replica_id.0, -1, "v15 moves the id into ReplicaState");
        assert_eq!(
            (back.max_wait_ms, back.min_bytes, back.max_bytes),
            (500, 1, 10_000)
        );
        assert_eq!(back.topics.len(), 2, "partitions grouped under their topic");
        assert_eq!(back.topics[0].topic_id, Uuid::from_u64_pair(0, 1));
        let p = &back.topics[0].partitions[1];
        assert_eq!(
            (
                p.partition,
                p.fetch_offset,
                p.current_leader_epoch,
                p.last_fetched_epoch,
                p.partition_max_bytes
            ),
            (1, 20, 4, 3, 1_000)
        );
        assert_eq!(back.topics[1].partitions[0].fetch_offset, 0);
    }
}
