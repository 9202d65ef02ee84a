//! Transactions v2's implicit add (KIP-890 part 2): a partition leader receiving a Produce v12
//! (or the group coordinator a TxnOffsetCommit v5) from a producer with no transaction open
//! there adds the partition to the transaction at the coordinator itself — in the core when
//! this node coordinates the id, else with AddPartitionsToTxn v5 (`VerifyOnly = false`) to the
//! coordinator's node. The coordinator side of that broker-to-broker form (v4–5, batched by
//! transaction, each verify-only or not) is [`add_partitions_from_broker`]; it needs
//! CLUSTER_ACTION, as in Kafka.

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
use crate::txn::{Event, Reply, TopicPartition, TxnError};

/// The broker-to-broker version with the implicit add.
const VERSION: i16 = 5;
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
    /// Adds `partition` to the producer's transaction at its coordinator (transactions v2).
    pub(crate) async fn txn_add_implicit(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: TopicPartition,
    ) -> Result<(), TxnError> {
        let node = match self.txn_coordinator_endpoint(transactional_id) {
            Ok((node, _, _)) => node,
            Err(_) => return Err(TxnError::CoordinatorNotAvailable),
        };
        if node == self.config.node_id {
            return match self
                .txn_call(|request| Event::AddPartitions {
                    request,
                    transactional_id: transactional_id.to_string(),
                    producer_id,
                    producer_epoch,
                    partitions: vec![partition],
                    v2: true,
                })
                .await
            {
                Reply::Error(e) => Err(e),
                _ => Ok(()),
            };
        }
        self.txn_add_remote(
            node,
            transactional_id,
            producer_id,
            producer_epoch,
            partition,
        )
        .await
        .unwrap_or_else(|why| {
            tracing::debug!(%why, "the transaction coordinator did not answer an add");
            Err(TxnError::CoordinatorNotAvailable)
        })
    }

    async fn txn_add_remote(
        &self,
        node: i32,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: TopicPartition,
    ) -> Result<Result<(), TxnError>, String> {
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
        let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(
                    transactional_id.to_string(),
                )))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(producer_epoch)
                .with_verify_only(false)
                .with_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(partition.topic.clone())))
                    .with_partitions(vec![partition.partition])]),
        ]);
        let answer = self
            .inter_broker_call(
                addr,
                &endpoint.host,
                "weir-partition-leader",
                ApiKey::AddPartitionsToTxn,
                VERSION,
                &RequestKind::AddPartitionsToTxn(request),
                TIMEOUT,
            )
            .await?;
        let ResponseKind::AddPartitionsToTxn(response) = answer else {
            return Err("an answer of another kind".into());
        };
        if response.error_code != 0 {
            return Ok(error(response.error_code));
        }
        let code = response
            .results_by_transaction
            .iter()
            .flat_map(|t| t.topic_results.iter())
            .flat_map(|t| t.results_by_partition.iter())
            .map(|p| p.partition_error_code)
            .find(|&c| c != 0)
            .unwrap_or(0);
        Ok(error(code))
    }
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
}
