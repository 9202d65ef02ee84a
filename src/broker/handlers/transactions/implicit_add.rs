//! Transactions v2's implicit add (KIP-890 part 2): a partition leader receiving a Produce v12
//! (or the group coordinator a TxnOffsetCommit v5) from a producer with no transaction open
//! there adds the partition to the transaction at the coordinator itself — in the core when
//! this node coordinates the id, else with AddPartitionsToTxn v5 (`VerifyOnly = false`) to the
//! coordinator's node. Part 1's verification (`verify`) asks the same way with v4
//! (`VerifyOnly = true`). The coordinator side of that broker-to-broker form (v4–5, batched by
//! transaction, each verify-only or not) is [`add_partitions_from_broker`]; it needs
//! CLUSTER_ACTION, as in Kafka.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, RequestKind,
    ResponseKind, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::broker::api::RequestContext;
use crate::broker::shared::Broker;
use crate::txn::add_batches::{BatchAnswer, TxnAsk};
use crate::txn::{Event, Reply, TopicPartition, TxnError};

/// The broker-to-broker version with the implicit add.
const VERSION: i16 = 5;
/// The broker-to-broker version of KIP-890 part 1's verify-only form.
const VERIFY_VERSION: i16 = 4;
/// How long the coordinator may take to answer.
const TIMEOUT: Duration = Duration::from_millis(5000);

/// A coordinator error in the broker form's per-partition codes (a partition not in the
/// transaction is TRANSACTION_ABORTABLE, as Kafka's verification answers).
fn code(e: TxnError) -> i16 {
    match e {
        TxnError::NotInTransaction => ResponseError::TransactionAbortable.code(),
        e => super::error_codes::code(e, 0, 5).code(),
    }
}

/// The coordinator error a per-partition code stands for (the inverse of [`code`]).
fn error(code: i16) -> Result<(), TxnError> {
    match code {
        0 => Ok(()),
        48 | 120 => Err(TxnError::NotInTransaction),
        47 | 90 => Err(TxnError::ProducerFenced),
        49 => Err(TxnError::InvalidProducerIdMapping),
        51 => Err(TxnError::ConcurrentTransactions),
        14 => Err(TxnError::CoordinatorLoadInProgress),
        16 => Err(TxnError::NotCoordinator),
        _ => Err(TxnError::CoordinatorNotAvailable),
    }
}

impl Broker {
    /// One AddPartitionsToTxn to the coordinator on `node` with a batch of producers' asks
    /// (`txn::add_batches`): v4 when every one only verifies (KIP-890 part 1), v5 when one adds
    /// (part 2). The answer per transactional id and partition.
    pub(crate) async fn add_partitions_remote(&self, node: i32, asks: &[TxnAsk]) -> BatchAnswer {
        let answer = self.add_partitions_call(node, asks).await;
        answer.unwrap_or_else(|why| {
            tracing::debug!(%why, node, "the transaction coordinator did not answer");
            Err(TxnError::CoordinatorNotAvailable)
        })
    }

    async fn add_partitions_call(&self, node: i32, asks: &[TxnAsk]) -> Result<BatchAnswer, String> {
        let image = self.image();
        let registration = image.broker(node).ok_or("unknown coordinator")?;
        let endpoint = registration
            .endpoint(&self.config.inter_broker_listener_name)
            .or_else(|| registration.listeners.first())
            .ok_or("the coordinator has no endpoint")?;
        let addr = self
            .io
            .net
            .resolve(&endpoint.host, endpoint.port)
            .await
            .map_err(|e| e.to_string())?;
        let transactions = asks
            .iter()
            .map(|ask| {
                let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
                for tp in &ask.partitions {
                    match topics.iter_mut().find(|t| t.name.as_str() == tp.topic) {
                        Some(t) => t.partitions.push(tp.partition),
                        None => topics.push(
                            AddPartitionsToTxnTopic::default()
                                .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                                .with_partitions(vec![tp.partition]),
                        ),
                    }
                }
                AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(
                        ask.transactional_id.clone(),
                    )))
                    .with_producer_id(ProducerId(ask.producer_id))
                    .with_producer_epoch(ask.producer_epoch)
                    .with_verify_only(ask.verify_only)
                    .with_topics(topics)
            })
            .collect();
        let version = if asks.iter().all(|a| a.verify_only) {
            VERIFY_VERSION
        } else {
            VERSION
        };
        let request = AddPartitionsToTxnRequest::default().with_transactions(transactions);
        let answer = self
            .inter_broker_call(
                addr,
                &endpoint.host,
                "weir-partition-leader",
                ApiKey::AddPartitionsToTxn,
                version,
                &RequestKind::AddPartitionsToTxn(request),
                TIMEOUT,
            )
            .await?;
        let ResponseKind::AddPartitionsToTxn(response) = answer else {
            return Err("an answer of another kind".into());
        };
        Ok(batch_answer(&response))
    }
}

/// An AddPartitionsToTxn v4–5 answer per transactional id and partition. A request-level
/// error applies to all (CLUSTER_AUTHORIZATION_FAILED becomes INVALID_TXN_STATE, as Kafka's
/// leader tells its client); a partition left out counts as not verified (`add_batches`).
fn batch_answer(response: &AddPartitionsToTxnResponse) -> BatchAnswer {
    match response.error_code {
        0 => {}
        31 => return Err(TxnError::InvalidTxnState),
        c => return Err(error(c).expect_err("not 0")),
    }
    let mut by_id: BTreeMap<String, BTreeMap<TopicPartition, Result<(), TxnError>>> =
        BTreeMap::new();
    for t in &response.results_by_transaction {
        let results = by_id.entry(t.transactional_id.to_string()).or_default();
        for topic in &t.topic_results {
            for p in &topic.results_by_partition {
                results.insert(
                    TopicPartition::new(topic.name.as_str(), p.partition_index),
                    error(p.partition_error_code),
                );
            }
        }
    }
    Ok(by_id)
}

/// AddPartitionsToTxn v4–5 at the coordinator: each transaction verified (KIP-890 part 1) or
/// added to (part 2, v5), partition by partition.
pub(crate) async fn add_partitions_from_broker(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if !broker
        .authz(ctx)
        .cluster(crate::acl::Operation::ClusterAction)
    {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let v2 = ctx.version >= 5;
    let mut results = Vec::with_capacity(req.transactions.len());
    for txn in req.transactions {
        let id = txn.transactional_id.to_string();
        let mut topics = Vec::with_capacity(txn.topics.len());
        for topic in &txn.topics {
            let mut partitions = Vec::with_capacity(topic.partitions.len());
            for &p in &topic.partitions {
                let tp = TopicPartition::new(topic.name.as_str(), p);
                let (pid, epoch) = (txn.producer_id.0, txn.producer_epoch);
                let reply = if txn.verify_only {
                    broker
                        .txn_call(|request| Event::Verify {
                            request,
                            transactional_id: id.clone(),
                            producer_id: pid,
                            producer_epoch: epoch,
                            partition: tp,
                        })
                        .await
                } else {
                    broker
                        .txn_call(|request| Event::AddPartitions {
                            request,
                            transactional_id: id.clone(),
                            producer_id: pid,
                            producer_epoch: epoch,
                            partitions: vec![tp],
                            v2,
                        })
                        .await
                };
                let c = match reply {
                    Reply::Error(e) => code(e),
                    _ => 0,
                };
                partitions.push(
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(c),
                );
            }
            topics.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_results_by_partition(partitions),
            );
        }
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id)
                .with_topic_results(topics),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_go_both_ways() {
        for e in [
            TxnError::NotInTransaction,
            TxnError::ProducerFenced,
            TxnError::InvalidProducerIdMapping,
            TxnError::ConcurrentTransactions,
            TxnError::NotCoordinator,
            TxnError::CoordinatorLoadInProgress,
            TxnError::CoordinatorNotAvailable,
        ] {
            assert_eq!(error(code(e)), Err(e), "{e:?}");
        }
        assert_eq!(error(0), Ok(()));
    }

    /// A coordinator's AddPartitionsToTxn v4–5 answer per transactional id and partition; a
    /// request-level error for all (CLUSTER_AUTHORIZATION_FAILED as INVALID_TXN_STATE, as
    /// Kafka's leader tells its client).
    #[test]
    fn each_partition_gets_its_own_answer() {
        let result = |id: &str, codes: &[(&str, i32, i16)]| {
            let topics = codes
                .iter()
                .map(|&(t, p, c)| {
                    AddPartitionsToTxnTopicResult::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_string())))
                        .with_results_by_partition(vec![
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(c),
                        ])
                })
                .collect();
            AddPartitionsToTxnResult::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id.to_string())))
                .with_topic_results(topics)
        };
        let response = AddPartitionsToTxnResponse::default().with_results_by_transaction(vec![
            result("x", &[("a", 2, 120), ("b", 1, 0)]),
            result("y", &[("a", 0, 90)]),
        ]);
        let answer = batch_answer(&response).unwrap();
        let tp = TopicPartition::new;
        assert_eq!(answer["x"][&tp("a", 2)], Err(TxnError::NotInTransaction));
        assert_eq!(answer["x"][&tp("b", 1)], Ok(()));
        assert_eq!(answer["y"][&tp("a", 0)], Err(TxnError::ProducerFenced));
        let refused = AddPartitionsToTxnResponse::default().with_error_code(31);
        assert_eq!(batch_answer(&refused), Err(TxnError::InvalidTxnState));
        let busy = AddPartitionsToTxnResponse::default().with_error_code(51);
        assert_eq!(batch_answer(&busy), Err(TxnError::ConcurrentTransactions));
    }
}
