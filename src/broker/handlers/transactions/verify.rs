//! KIP-890 part 1: a partition leader asks a transaction's coordinator whether the partitions a
//! producer is about to open its transaction on were added to it (AddPartitionsToTxn), before
//! the write is appended — in the core when this node coordinates the transactional id, else in
//! AddPartitionsToTxn v4 (`VerifyOnly`) to the coordinator's node, batched with other
//! producers' asks to it (`txn::add_batches`, Kafka's `AddPartitionsToTxnManager`). The
//! partition's verification guard (`replica::producer::VerificationGuard`) then makes sure no
//! marker ended the transaction between the answer and the append. Transactions v2's implicit
//! add (`implicit_add`) goes the same way with v5.
//!
//! `transaction.partition.verification.enable` (Kafka's key, default true; dynamic, per broker
//! or cluster-wide) turns part 1 off; the v2 add is the protocol itself and always made.

use crate::broker::shared::Broker;
use crate::controller::image::ConfigResource;
use crate::txn::add_batches::TxnAsk;
use crate::txn::{Event, Reply, TopicPartition, TxnError};

const ENABLE_KEY: &str = "transaction.partition.verification.enable";

impl Broker {
    /// `transaction.partition.verification.enable`: this broker's dynamic value, else the
    /// cluster-wide one, else `server.properties` (Kafka's default: true).
    pub(crate) fn txn_verification_enabled(&self) -> bool {
        let image = self.image();
        let own = image.resource_configs(&ConfigResource::Broker(self.config.node_id.to_string()));
        let cluster = image.resource_configs(&ConfigResource::Broker(String::new()));
        let dynamic = [own, cluster].into_iter().find_map(|configs| {
            let v = configs.get(ENABLE_KEY)?.trim();
            // Validated when written; one that does not parse leaves the level out.
            if v.eq_ignore_ascii_case("true") {
                Some(true)
            } else if v.eq_ignore_ascii_case("false") {
                Some(false)
            } else {
                None
            }
        });
        dynamic.unwrap_or(self.config.transaction_partition_verification_enable)
    }

    /// Asks the coordinator of `transactional_id` about `partitions` of the producer's
    /// transaction: whether each is in it (`add` false: part 1's verification) or adds them
    /// (`add` true: part 2's implicit add). One result per partition, in order; a coordinator
    /// that cannot be reached gives COORDINATOR_NOT_AVAILABLE (retriable) for each.
    pub(crate) async fn txn_partitions_at_coordinator(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[TopicPartition],
        add: bool,
    ) -> Vec<Result<(), TxnError>> {
        let unavailable = || vec![Err(TxnError::CoordinatorNotAvailable); partitions.len()];
        let node = match self.txn_coordinator_endpoint(transactional_id) {
            Ok((node, _, _)) => node,
            Err(_) => return unavailable(),
        };
        let (producer_id, producer_epoch) = producer;
        if node != self.config.node_id {
            // Batched with other producers' asks to that node, one request in flight.
            let ask = TxnAsk {
                transactional_id: transactional_id.to_string(),
                producer_id,
                producer_epoch,
                verify_only: !add,
                partitions: partitions.to_vec(),
            };
            return self.txn_ask_node(node, ask).await;
        }
        if add {
            // One record for all of them: the same answer for each.
            let reply = self
                .txn_call(|request| Event::AddPartitions {
                    request,
                    transactional_id: transactional_id.to_string(),
                    producer_id,
                    producer_epoch,
                    partitions: partitions.to_vec(),
                    v2: true,
                })
                .await;
            let result = match reply {
                Reply::Error(e) => Err(e),
                _ => Ok(()),
            };
            return vec![result; partitions.len()];
        }
        let mut results = Vec::with_capacity(partitions.len());
        for partition in partitions {
            let reply = self
                .txn_call(|request| Event::Verify {
                    request,
                    transactional_id: transactional_id.to_string(),
                    producer_id,
                    producer_epoch,
                    partition: partition.clone(),
                })
                .await;
            results.push(match reply {
                Reply::Error(e) => Err(e),
                _ => Ok(()),
            });
        }
        results
    }

    /// TxnOffsetCommit's offsets partition at the coordinator: added to the transaction when
    /// `add` (v5, transactions v2: no AddOffsetsToTxn), else verified to be in it (part 1; Ok
    /// when verification is off).
    pub(crate) async fn txn_offsets_partition(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partition: TopicPartition,
        add: bool,
    ) -> Result<(), TxnError> {
        if !add && !self.txn_verification_enabled() {
            return Ok(());
        }
        let mut results = self
            .txn_partitions_at_coordinator(transactional_id, producer, &[partition], add)
            .await;
        results.pop().expect("one partition, one result")
    }
}
