//! A client of a whole cluster, as Kafka's console tools are: it starts from any bootstrap
//! broker that answers, sends partition requests (produce, fetch, list offsets) to the
//! partition's leader and group requests to the group's coordinator, and when one answers
//! that it no longer is (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR, a lost connection...) it
//! asks Metadata again and follows the move, a bounded number of times.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::{BrokerInfo, Client, ClientError, Fetched, GroupListing, Result, Security};
use crate::io::Io;

/// How often one call follows a leader or coordinator move before giving up (with the backoff
/// below, about 10 s: longer than a controller's election and a leader's failover).
pub(super) const MOVES: u32 = 50;
pub(super) const MOVE_BACKOFF: Duration = Duration::from_millis(200);

/// Connections to a cluster's brokers, made on demand.
pub struct ClusterClient {
    io: Io,
    /// Each bootstrap broker's host name (its TLS certificate names it) and address.
    bootstrap: Vec<(String, SocketAddr)>,
    security: Security,
    /// The connection metadata and admin requests go to (any broker).
    any: Option<Client>,
    /// Connections by broker id.
    brokers: BTreeMap<i32, Client>,
}

/// Whether an error means "ask again, after Metadata": a retriable one (the partition or group
/// moved, the broker does not know it yet, a connection was lost), as Kafka's clients retry.
fn moved(e: &ClientError) -> bool {
    e.is_retriable()
}

/// Whether a lookup (Metadata, FindCoordinator) failed for want of an answer, not because
/// what was asked does not exist.
fn unanswered(e: &ClientError) -> bool {
    matches!(e, ClientError::Io(_) | ClientError::Timeout)
}

impl ClusterClient {
    /// A client of the cluster `bootstrap` (addresses, the first that answers is used first).
    pub async fn connect(io: &Io, bootstrap: Vec<SocketAddr>) -> Result<ClusterClient> {
        let named = bootstrap
            .into_iter()
            .map(|a| (a.ip().to_string(), a))
            .collect();
        ClusterClient::connect_secure(io, named, Security::plaintext()).await
    }

    /// A client of the cluster `bootstrap` ((host, address) pairs) whose connections are
    /// secured as `security` says.
    pub async fn connect_secure(
        io: &Io,
        bootstrap: Vec<(String, SocketAddr)>,
        security: Security,
    ) -> Result<ClusterClient> {
        if bootstrap.is_empty() {
            return Err(ClientError::Protocol("no bootstrap broker".into()));
        }
        let mut c = ClusterClient {
            io: io.clone(),
            bootstrap,
            security,
            any: None,
            brokers: BTreeMap::new(),
        };
        c.any().await?;
        Ok(c)
    }

    /// A connection to some broker: the last one used, else the first bootstrap broker that
    /// answers, else any broker Metadata listed.
    pub async fn any(&mut self) -> Result<&mut Client> {
        if self.any.is_none() {
            let mut last = ClientError::Protocol("no bootstrap broker".into());
            let known = self.bootstrap.clone();
            for (host, addr) in known {
                match Client::connect_secure(&self.io, addr, &host, &self.security).await {
                    Ok(c) => {
                        self.any = Some(c);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            if self.any.is_none() {
                return Err(last);
            }
        }
        Ok(self.any.as_mut().expect("connected above"))
    }

    pub(super) fn io(&self) -> &Io {
        &self.io
    }

    /// Forgets the connection to broker `id` (it answered that it moved, or failed).
    pub(super) fn forget(&mut self, id: i32) {
        self.drop_connections(Some(id), false);
    }

    /// Forgets a connection that failed, so the next call makes a new one.
    fn drop_connections(&mut self, broker: Option<i32>, any: bool) {
        if let Some(id) = broker {
            self.brokers.remove(&id);
        }
        if any {
            self.any = None;
        }
    }

    /// The connection to broker `b`, made if needed.
    pub(super) async fn broker(&mut self, b: &BrokerInfo) -> Result<&mut Client> {
        if !self.brokers.contains_key(&b.id) {
            let addr = self.io.net.resolve(&b.host, b.port).await?;
            let client = Client::connect_secure(&self.io, addr, &b.host, &self.security).await?;
            self.brokers.insert(b.id, client);
        }
        Ok(self.brokers.get_mut(&b.id).expect("inserted above"))
    }

    /// The current leader of `topic`-`partition` (auto-creating the topic when the broker
    /// allows, as a producer's Metadata does).
    async fn leader(&mut self, topic: &str, partition: i32) -> Result<BrokerInfo> {
        let result = self.any().await?.wait_for_leader(topic, partition).await;
        if result.as_ref().is_err_and(unanswered) {
            self.drop_connections(None, true);
        }
        result
    }

    /// One `call` at `node`. A connection that gave no answer is dropped, so that the retry
    /// of a moved partition or group reconnects.
    async fn call_at<T>(
        &mut self,
        node: &BrokerInfo,
        call: &mut impl for<'c> FnMut(
            &'c mut Client,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T>> + Send + 'c>,
        >,
    ) -> Result<T> {
        let result = match self.broker(node).await {
            Ok(client) => call(client).await,
            Err(e) => Err(e),
        };
        if result.as_ref().is_err_and(|e| moved(e) && unanswered(e)) {
            self.drop_connections(Some(node.id), false);
        }
        result
    }

    /// Runs `call` against the leader of `topic`-`partition`, following leadership moves.
    pub(super) async fn at_leader<T>(
        &mut self,
        topic: &str,
        partition: i32,
        mut call: impl for<'c> FnMut(
            &'c mut Client,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T>> + Send + 'c>,
        >,
    ) -> Result<T> {
        let mut last = ClientError::Timeout;
        for attempt in 0..MOVES {
            if attempt > 0 {
                self.io.clock.sleep(MOVE_BACKOFF).await;
            }
            let leader = match self.leader(topic, partition).await {
                Ok(l) => l,
                // `wait_for_leader` already waited for a leader; a missing topic is final.
                Err(e) if unanswered(&e) => {
                    last = e;
                    continue;
                }
                Err(e) => return Err(e),
            };
            match self.call_at(&leader, &mut call).await {
                Err(e) if moved(&e) => last = e,
                other => return other,
            }
        }
        Err(last)
    }

    /// Produces one batch to the partition's leader; the offset of its first record (`None`
    /// with acks=0).
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        batch: bytes::Bytes,
        acks: i16,
    ) -> Result<Option<i64>> {
        let t = topic.to_string();
        self.at_leader(topic, partition, move |c| {
            let (t, batch) = (t.clone(), batch.clone());
            Box::pin(async move { c.produce(&t, partition, batch, acks).await })
        })
        .await
    }

    /// Fetches from the partition's leader.
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait: Duration,
    ) -> Result<Fetched> {
        let t = topic.to_string();
        self.at_leader(topic, partition, move |c| {
            let t = t.clone();
            Box::pin(async move { c.fetch(&t, partition, offset, max_bytes, max_wait).await })
        })
        .await
    }

    /// ListOffsets at the partition's leader: -1 latest, -2 earliest, or a timestamp.
    pub async fn list_offset(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<(i64, i64)> {
        let t = topic.to_string();
        self.at_leader(topic, partition, move |c| {
            let t = t.clone();
            Box::pin(async move { c.list_offset(&t, partition, timestamp).await })
        })
        .await
    }

    /// Runs `call` against the coordinator of `group`, following coordinator moves.
    pub async fn at_coordinator<T>(
        &mut self,
        group: &str,
        mut call: impl for<'c> FnMut(
            &'c mut Client,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T>> + Send + 'c>,
        >,
    ) -> Result<T> {
        let mut last = ClientError::Timeout;
        for attempt in 0..MOVES {
            if attempt > 0 {
                self.io.clock.sleep(MOVE_BACKOFF).await;
            }
            let found = self.any().await?.coordinator(group).await;
            let coordinator = match found {
                Ok(c) => c,
                Err(e) if moved(&e) => {
                    if unanswered(&e) {
                        self.drop_connections(None, true);
                    }
                    last = e;
                    continue;
                }
                Err(e) => return Err(e),
            };
            match self.call_at(&coordinator, &mut call).await {
                Err(e) if moved(&e) => last = e,
                other => return other,
            }
        }
        Err(last)
    }

    /// Every group of every broker (ListGroups goes to each, as Kafka's admin client sends
    /// it: a broker lists the groups it coordinates), by group id.
    pub async fn list_groups(&mut self) -> Result<Vec<GroupListing>> {
        // The offsets topic is made on the first FindCoordinator: before it, no group exists.
        self.at_coordinator("", |c| {
            Box::pin(async move { Ok(c.list_groups().await.is_ok()) })
        })
        .await?;
        let brokers = self.any().await?.brokers().await?;
        let mut groups = BTreeMap::new();
        for b in &brokers {
            let listed = match self.broker(b).await {
                Ok(c) => c.list_groups().await,
                Err(e) => Err(e),
            };
            match listed {
                Ok(list) => {
                    for g in list {
                        groups.insert(g.group_id.clone(), g);
                    }
                }
                Err(e) => {
                    self.drop_connections(Some(b.id), false);
                    return Err(e);
                }
            }
        }
        Ok(groups.into_values().collect())
    }
}
