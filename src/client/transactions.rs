//! Transaction admin calls (KIP-664) for `weir transactions`, as Kafka's Admin makes them:
//! ListTransactions to every broker, DescribeTransactions at each id's coordinator,
//! DescribeProducers at a partition's leader (or a chosen replica), find-hanging from those
//! three, and abort as WriteTxnMarkers(ABORT) at the leader.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeTransactionsRequest, FindCoordinatorRequest,
    ListTransactionsRequest, ProducerId, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{check, name, BrokerInfo, Client, ClientError, ClusterClient, Result};

const FIND_COORDINATOR_VERSION: i16 = 3;
/// v1 carries the duration filter.
const LIST_TRANSACTIONS_VERSION: i16 = 1;
const DESCRIBE_TRANSACTIONS_VERSION: i16 = 0;
const DESCRIBE_PRODUCERS_VERSION: i16 = 0;
const WRITE_TXN_MARKERS_VERSION: i16 = 1;
/// FindCoordinator's key type for a transactional id.
const TRANSACTION_KEY: i8 = 1;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TransactionListing {
    pub transactional_id: String,
    /// The broker that listed it (its coordinator).
    pub coordinator: i32,
    pub producer_id: i64,
    pub state: String,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TransactionDescription {
    pub coordinator: i32,
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: String,
    pub timeout_ms: i32,
    /// -1: no transaction since InitProducerId.
    pub start_ms: i64,
    pub partitions: Vec<(String, i32)>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ProducerDescription {
    pub producer_id: i64,
    pub producer_epoch: i32,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    pub coordinator_epoch: i32,
    /// -1: no transaction open on the partition.
    pub current_txn_start_offset: i64,
}

/// A transaction open on a partition that its coordinator does not know to be open there.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HangingTransaction {
    pub topic: String,
    pub partition: i32,
    pub producer: ProducerDescription,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

impl Client {
    /// The broker that coordinates `transactional_id`.
    pub async fn transaction_coordinator(&mut self, transactional_id: &str) -> Result<BrokerInfo> {
        let request = FindCoordinatorRequest::default()
            .with_key(s(transactional_id))
            .with_key_type(TRANSACTION_KEY);
        let response = self.call(&request, FIND_COORDINATOR_VERSION).await?;
        check(response.error_code, response.error_message.as_ref())?;
        let port = u16::try_from(response.port).map_err(|_| {
            ClientError::Protocol(format!("coordinator port {} out of range", response.port))
        })?;
        Ok(BrokerInfo {
            id: response.node_id.0,
            host: response.host.to_string(),
            port,
        })
    }

    /// The transactions this broker coordinates: in `states` (all if empty), of `producer_ids`
    /// (all if empty), running longer than `min_duration_ms` (all if negative). The broker's
    /// id is the caller's to fill in.
    pub async fn list_transactions(
        &mut self,
        states: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
    ) -> Result<Vec<TransactionListing>> {
        let request = ListTransactionsRequest::default()
            .with_state_filters(states.iter().map(|n| s(n)).collect())
            .with_producer_id_filters(producer_ids.iter().map(|p| ProducerId(*p)).collect())
            .with_duration_filter(min_duration_ms);
        let response = self.call(&request, LIST_TRANSACTIONS_VERSION).await?;
        check(response.error_code, None)?;
        Ok(response
            .transaction_states
            .into_iter()
            .map(|t| TransactionListing {
                transactional_id: t.transactional_id.to_string(),
                coordinator: -1,
                producer_id: t.producer_id.0,
                state: t.transaction_state.to_string(),
            })
            .collect())
    }

    /// DescribeTransactions of one id at this broker (which must coordinate it).
    pub async fn describe_transaction(
        &mut self,
        transactional_id: &str,
    ) -> Result<TransactionDescription> {
        let request = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s(transactional_id))]);
        let response = self.call(&request, DESCRIBE_TRANSACTIONS_VERSION).await?;
        let t = response
            .transaction_states
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Protocol("empty DescribeTransactions response".into()))?;
        check(t.error_code, None)?;
        Ok(TransactionDescription {
            coordinator: -1,
            transactional_id: t.transactional_id.to_string(),
            producer_id: t.producer_id.0,
            producer_epoch: t.producer_epoch,
            state: t.transaction_state.to_string(),
            timeout_ms: t.transaction_timeout_ms,
            start_ms: t.transaction_start_time_ms,
            partitions: t
                .topics
                .iter()
                .flat_map(|tp| tp.partitions.iter().map(|p| (tp.topic.to_string(), *p)))
                .collect(),
        })
    }

    /// DescribeProducers of partitions of one topic at this broker.
    pub async fn describe_producers(
        &mut self,
        topic: &str,
        partitions: &[i32],
    ) -> Result<Vec<(i32, Result<Vec<ProducerDescription>>)>> {
        let request = DescribeProducersRequest::default()
            .with_topics(vec![TopicRequest::default()
                .with_name(name(topic))
                .with_partition_indexes(partitions.to_vec())]);
        let response = self.call(&request, DESCRIBE_PRODUCERS_VERSION).await?;
        let mut out = Vec::new();
        for t in response.topics {
            for p in t.partitions {
                let described = check(p.error_code, p.error_message.as_ref()).map(|()| {
                    p.active_producers
                        .iter()
                        .map(|a| ProducerDescription {
                            producer_id: a.producer_id.0,
                            producer_epoch: a.producer_epoch,
                            last_sequence: a.last_sequence,
                            last_timestamp: a.last_timestamp,
                            coordinator_epoch: a.coordinator_epoch,
                            current_txn_start_offset: a.current_txn_start_offset,
                        })
                        .collect()
                });
                out.push((p.partition_index, described));
            }
        }
        Ok(out)
    }

    /// WriteTxnMarkers(ABORT) for one producer's transaction on one partition (this broker
    /// must lead it), as Admin's abortTransaction sends it.
    pub async fn abort_transaction(
        &mut self,
        topic: &str,
        partition: i32,
        producer: &ProducerDescription,
    ) -> Result<()> {
        let epoch = i16::try_from(producer.producer_epoch)
            .map_err(|_| ClientError::Protocol("producer epoch out of range".into()))?;
        let request =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(ProducerId(producer.producer_id))
                .with_producer_epoch(epoch)
                .with_transaction_result(false)
                .with_coordinator_epoch(producer.coordinator_epoch)
                .with_topics(vec![WritableTxnMarkerTopic::default()
                    .with_name(name(topic))
                    .with_partition_indexes(vec![partition])])]);
        let response = self.call(&request, WRITE_TXN_MARKERS_VERSION).await?;
        for m in response.markers {
            for t in m.topics {
                for p in t.partitions {
                    check(p.error_code, None)?;
                }
            }
        }
        Ok(())
    }
}

impl ClusterClient {
    /// Every broker's transactions (ListTransactions goes to each, as Kafka's Admin sends it),
    /// by transactional id.
    pub async fn list_transactions(
        &mut self,
        states: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
    ) -> Result<Vec<TransactionListing>> {
        let brokers = self.any().await?.brokers().await?;
        let mut listed = BTreeMap::new();
        for b in &brokers {
            let client = self.broker(b).await?;
            for mut t in client
                .list_transactions(states, producer_ids, min_duration_ms)
                .await?
            {
                t.coordinator = b.id;
                listed.insert(t.transactional_id.clone(), t);
            }
        }
        Ok(listed.into_values().collect())
    }

    /// DescribeTransactions at the id's coordinator, following coordinator moves.
    pub async fn describe_transaction(
        &mut self,
        transactional_id: &str,
    ) -> Result<TransactionDescription> {
        let id = transactional_id.to_string();
        let mut last = ClientError::Timeout;
        for attempt in 0..super::cluster::MOVES {
            if attempt > 0 {
                self.io().clock.sleep(super::cluster::MOVE_BACKOFF).await;
            }
            let coordinator = match self.any().await?.transaction_coordinator(&id).await {
                Ok(c) => c,
                Err(e) if e.is_retriable() => {
                    last = e;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let described = match self.broker(&coordinator).await {
                Ok(c) => c.describe_transaction(&id).await,
                Err(e) => Err(e),
            };
            match described {
                Ok(mut d) => {
                    d.coordinator = coordinator.id;
                    return Ok(d);
                }
                Err(e) if e.is_retriable() => {
                    self.forget(coordinator.id);
                    last = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// DescribeProducers of one partition, at its leader or at `broker` (any replica).
    pub async fn describe_producers(
        &mut self,
        topic: &str,
        partition: i32,
        broker: Option<i32>,
    ) -> Result<Vec<ProducerDescription>> {
        let t = topic.to_string();
        let described = match broker {
            Some(id) => {
                let brokers = self.any().await?.brokers().await?;
                let b = brokers.into_iter().find(|b| b.id == id).ok_or_else(|| {
                    ClientError::Protocol(format!("no broker {id} in the cluster"))
                })?;
                self.broker(&b)
                    .await?
                    .describe_producers(topic, &[partition])
                    .await?
            }
            None => {
                self.at_leader(topic, partition, move |c| {
                    let t = t.clone();
                    Box::pin(async move { c.describe_producers(&t, &[partition]).await })
                })
                .await?
            }
        };
        described
            .into_iter()
            .find(|(p, _)| *p == partition)
            .map(|(_, r)| r)
            .unwrap_or_else(|| Err(ClientError::Protocol("partition missing in answer".into())))
    }

    /// Kafka's find-hanging for the partitions `broker` hosts: open transactions older than
    /// `max_timeout_ms` whose producer id no coordinator lists, whose id is not described, or
    /// whose coordinator does not count the partition in the transaction.
    pub async fn find_hanging(
        &mut self,
        broker: i32,
        max_timeout_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<HangingTransaction>> {
        let topics = self.any().await?.describe_topics(None).await?;
        let mut candidates = Vec::new();
        for t in &topics {
            let hosted: Vec<i32> = t
                .partitions
                .iter()
                .filter(|p| p.replicas.contains(&broker))
                .map(|p| p.partition)
                .collect();
            if hosted.is_empty() {
                continue;
            }
            for (partition, described) in self.at_broker(broker, &t.name, &hosted).await? {
                for producer in described? {
                    if producer.current_txn_start_offset >= 0
                        && now_ms.saturating_sub(producer.last_timestamp) > max_timeout_ms
                    {
                        candidates.push(HangingTransaction {
                            topic: t.name.clone(),
                            partition,
                            producer,
                        });
                    }
                }
            }
        }
        if candidates.is_empty() {
            return Ok(candidates);
        }
        let pids: Vec<i64> = candidates
            .iter()
            .map(|c| c.producer.producer_id)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let listed = self.list_transactions(&[], &pids, -1).await?;
        let mut open: BTreeMap<i64, BTreeSet<(String, i32)>> = BTreeMap::new();
        for t in listed {
            match self.describe_transaction(&t.transactional_id).await {
                Ok(d) => open.entry(d.producer_id).or_default().extend(d.partitions),
                Err(ClientError::Kafka(..)) => {}
                Err(e) => return Err(e),
            }
        }
        candidates.retain(|c| {
            !open
                .get(&c.producer.producer_id)
                .is_some_and(|parts| parts.contains(&(c.topic.clone(), c.partition)))
        });
        Ok(candidates)
    }

    /// Kafka's abort: finds the producer whose open transaction on the partition starts at
    /// `start_offset` and writes an ABORT marker for it at the leader.
    pub async fn abort_transaction(
        &mut self,
        topic: &str,
        partition: i32,
        start_offset: i64,
    ) -> Result<ProducerDescription> {
        let producers = self.describe_producers(topic, partition, None).await?;
        let producer = producers
            .into_iter()
            .find(|p| p.current_txn_start_offset == start_offset)
            .ok_or_else(|| {
                ClientError::Protocol(format!(
                    "no open transaction starts at offset {start_offset} of {topic}-{partition}"
                ))
            })?;
        let t = topic.to_string();
        let p = producer.clone();
        self.at_leader(topic, partition, move |c| {
            let (t, p) = (t.clone(), p.clone());
            Box::pin(async move { c.abort_transaction(&t, partition, &p).await })
        })
        .await?;
        Ok(producer)
    }

    /// DescribeProducers of `partitions` of `topic` at broker `id`.
    async fn at_broker(
        &mut self,
        id: i32,
        topic: &str,
        partitions: &[i32],
    ) -> Result<Vec<(i32, Result<Vec<ProducerDescription>>)>> {
        let brokers = self.any().await?.brokers().await?;
        let b = brokers
            .into_iter()
            .find(|b| b.id == id)
            .ok_or_else(|| ClientError::Protocol(format!("no broker {id} in the cluster")))?;
        self.broker(&b)
            .await?
            .describe_producers(topic, partitions)
            .await
    }
}
