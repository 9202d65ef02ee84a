//! Clients in a cluster find a partition's leader as Kafka clients do: a Metadata request to
//! one of the bootstrap brokers (the next one on every attempt, so a broker that is down or
//! cut off is not asked twice in a row), then a connection to the leader it names. A leader
//! that moved answers NOT_LEADER_OR_FOLLOWER; the client drops the connection and asks again.
//!
//! [`Routes`] is a client's cached leader map, as librdkafka keeps one: one Metadata answer
//! fills every partition of the topic, a known leader is used without asking again until an
//! error says it may have moved (NOT_LEADER_OR_FOLLOWER, a network error, a time-out: the
//! client calls [`Routes::stale`]) or `topic.metadata.refresh.interval.ms` has passed. So a
//! client may well send to a broker that no longer leads (stale metadata is normal); the
//! broker's answer sends it back to Metadata. Metadata is asked on one kept connection per
//! bootstrap broker (librdkafka asks on its one connection per broker), dropped on any error. Like librdkafka (`rd_kafka_toppar_leader_update`)
//! and Kafka's Java client (KIP-320), it remembers the highest leader epoch it has seen for each
//! partition, across errors, and ignores an answer naming an older one: a broker that has not
//! caught up on the metadata log (cut off from the controllers, just restarted) still names
//! itself or an earlier leader, and a client trusting it would send to a deposed leader (whose
//! log may lack what the new leader acknowledged). The epochs start over when the topic's id
//! changes (deleted and created again, KAFKA-12257). The producers, the transactional clients, the
//! data and transaction liveness probes and group members hold one; the free functions ask
//! every time (the final read, which is the checker's, not a user's client, uses them).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use weir::client::{Client, ClientError};
use weir::io::Io;

/// The address of `partition`'s leader as broker `bootstrap[attempt % len]` knows it.
pub async fn leader(
    io: &Io,
    bootstrap: &[SocketAddr],
    attempt: u64,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> Result<SocketAddr, ClientError> {
    assert!(!bootstrap.is_empty(), "routing needs a bootstrap broker");
    let via = bootstrap[(attempt % bootstrap.len() as u64) as usize];
    let asked = async {
        let mut c = Client::connect(io, via).await?;
        c.set_timeout(timeout);
        c.wait_for_leader(topic, partition).await
    };
    let info = io
        .timeout(timeout, asked)
        .await
        .ok_or(ClientError::Timeout)??;
    format!("{}:{}", info.host, info.port)
        .parse()
        .map_err(|e| ClientError::Protocol(format!("leader address {}: {e}", info.host)))
}

/// Connects to `partition`'s leader (see [`leader`]), with the client's time-out set.
pub async fn connect_leader(
    io: &Io,
    bootstrap: &[SocketAddr],
    attempt: u64,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> Result<Client, ClientError> {
    let addr = leader(io, bootstrap, attempt, topic, partition, timeout).await?;
    crate::workload::connect(io, addr, timeout).await
}

/// `topic.metadata.refresh.interval.ms` of the clients without a scenario key for it
/// (librdkafka's 300 s, scaled by 1/10 as the other client time-outs are).
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30);

/// One client's leader map (see the module comment).
pub struct Routes {
    bootstrap: Vec<SocketAddr>,
    /// Metadata requests so far (which bootstrap broker to ask next).
    asked: u64,
    /// `topic.metadata.refresh.interval.ms`: how long a leader is trusted without an error.
    max_age: Duration,
    /// (topic, partition) → leader and when it was learnt (the clock's monotonic time).
    leaders: BTreeMap<(String, i32), (SocketAddr, Duration)>,
    /// (topic, partition) → the highest leader epoch an answer named, kept when the leader is
    /// marked stale; with the topic's id (epochs of a topic created again start over).
    epochs: BTreeMap<(String, i32), (uuid::Uuid, i32)>,
    /// The connections Metadata was asked on, one per broker and kept, as librdkafka keeps
    /// one connection per broker rather than opening one per question. Dropped on any error
    /// (a time-out leaves an answer owed on it).
    metadata_conns: BTreeMap<SocketAddr, Client>,
}

impl Routes {
    /// `first`: which bootstrap broker to ask first (clients spread their first question).
    pub fn new(bootstrap: Vec<SocketAddr>, max_age: Duration, first: u64) -> Routes {
        assert!(!bootstrap.is_empty(), "routing needs a bootstrap broker");
        assert!(!max_age.is_zero());
        Routes {
            bootstrap,
            asked: first,
            max_age,
            leaders: BTreeMap::new(),
            epochs: BTreeMap::new(),
            metadata_conns: BTreeMap::new(),
        }
    }

    /// `partition`'s leader: the cached one while fresh, else from a Metadata request (which
    /// refreshes every partition of `topic`). LEADER_NOT_AVAILABLE when it names none.
    pub async fn leader(
        &mut self,
        io: &Io,
        topic: &str,
        partition: i32,
        timeout: Duration,
    ) -> Result<SocketAddr, ClientError> {
        let now = io.clock.monotonic();
        let key = (topic.to_string(), partition);
        if let Some(&(addr, at)) = self.leaders.get(&key) {
            if now.saturating_sub(at) < self.max_age {
                return Ok(addr);
            }
        }
        self.refresh(io, topic, timeout).await?;
        match self.leaders.get(&key) {
            Some(&(addr, _)) => Ok(addr),
            None => Err(ClientError::Kafka(
                ResponseError::LeaderNotAvailable,
                format!("{topic}-{partition} has no live leader"),
            )),
        }
    }

    /// Connects to `partition`'s leader (see [`Routes::leader`]); a failed connection marks
    /// the leader stale.
    pub async fn connect_leader(
        &mut self,
        io: &Io,
        topic: &str,
        partition: i32,
        timeout: Duration,
    ) -> Result<Client, ClientError> {
        let addr = self.leader(io, topic, partition, timeout).await?;
        let connected = crate::workload::connect(io, addr, timeout).await;
        if connected.is_err() {
            self.stale(topic, partition);
        }
        connected
    }

    /// The cached leader of `partition` may have moved: the next look-up asks Metadata.
    pub fn stale(&mut self, topic: &str, partition: i32) {
        self.leaders.remove(&(topic.to_string(), partition));
    }

    async fn refresh(
        &mut self,
        io: &Io,
        topic: &str,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let via = self.bootstrap[(self.asked % self.bootstrap.len() as u64) as usize];
        self.asked += 1;
        let kept = self.metadata_conns.remove(&via);
        let asked = async {
            let mut c = match kept {
                Some(c) => c,
                None => Client::connect(io, via).await?,
            };
            c.set_timeout(timeout);
            let answer = c.topic_leaders(topic).await?;
            Ok::<_, ClientError>((answer, c))
        };
        let (answer, c) = io
            .timeout(timeout, asked)
            .await
            .ok_or(ClientError::Timeout)??;
        self.metadata_conns.insert(via, c);
        let now = io.clock.monotonic();
        self.leaders.retain(|(t, _), _| t != topic);
        for (partition, (info, epoch)) in answer.leaders {
            let key = (topic.to_string(), partition);
            if !newer_or_same(self.epochs.get(&key).copied(), answer.id, epoch) {
                // An outdated answer: the partition stays without a leader, so the client
                // backs off and asks again (librdkafka keeps its old delegation, which failed).
                continue;
            }
            let addr: SocketAddr = format!("{}:{}", info.host, info.port)
                .parse()
                .map_err(|e| ClientError::Protocol(format!("leader address {}: {e}", info.host)))?;
            if epoch >= 0 {
                self.epochs.insert(key.clone(), (answer.id, epoch));
            }
            self.leaders.insert(key, (addr, now));
        }
        Ok(())
    }
}

/// Whether an answer naming leader epoch `epoch` of the topic with id `id` may replace what the
/// cache knows (`known`: the topic id and highest epoch seen). -1 (a broker without KIP-320)
/// is always taken, as librdkafka takes it; so is any epoch of a topic with another id.
fn newer_or_same(known: Option<(uuid::Uuid, i32)>, id: uuid::Uuid, epoch: i32) -> bool {
    match known {
        Some((known_id, known_epoch)) => epoch < 0 || known_id != id || epoch >= known_epoch,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::newer_or_same;
    use uuid::Uuid;

    #[test]
    fn an_older_leader_epoch_of_the_same_topic_is_ignored() {
        let id = Uuid::from_u128(7);
        assert!(newer_or_same(None, id, 0));
        assert!(newer_or_same(Some((id, 3)), id, 3));
        assert!(newer_or_same(Some((id, 3)), id, 4));
        assert!(!newer_or_same(Some((id, 3)), id, 2));
        // No epoch in the answer (a broker before KIP-320): taken.
        assert!(newer_or_same(Some((id, 3)), id, -1));
        // The topic was deleted and created again: its epochs start over.
        assert!(newer_or_same(Some((id, 3)), Uuid::from_u128(8), 0));
    }
}
