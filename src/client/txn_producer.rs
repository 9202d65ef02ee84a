//! A transactional producer on one connection (the coordinator and the partition leaders are
//! the broker it talks to: a single node, or tests that know where everything is), in either
//! protocol: transactions v1 (AddPartitionsToTxn v3, Produce v11, AddOffsetsToTxn +
//! TxnOffsetCommit v3, EndTxn v3: librdkafka's, kafkajs' and Java < 4's path) or v2 (KIP-890
//! part 2: Produce v12 and TxnOffsetCommit v5 add partitions implicitly, EndTxn v5 answers the
//! bumped epoch, which the producer adopts with its sequences starting again at 0: Java 4.x's
//! path). As Java's producer, v2 is for clusters that finalize `transaction.version` 2
//! ([`Client::describe_features`]).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiVersionsRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TransactionalId, TxnOffsetCommitRequest,
    UpdateFeaturesRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{check, name, produce_offsets, produce_request, Client, ClientError, Result};
use crate::log::batch::{compute_crc, BatchBuilder};

/// The transaction protocol a producer speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnMode {
    V1,
    V2,
}

impl TxnMode {
    fn produce_version(self) -> i16 {
        match self {
            TxnMode::V1 => 11,
            TxnMode::V2 => 12,
        }
    }
    fn end_txn_version(self) -> i16 {
        match self {
            TxnMode::V1 => 3,
            TxnMode::V2 => 5,
        }
    }
    fn txn_offset_commit_version(self) -> i16 {
        match self {
            TxnMode::V1 => 3,
            TxnMode::V2 => 5,
        }
    }
}

/// A transactional producer's state.
#[derive(Clone, Debug)]
pub struct TxnProducer {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub mode: TxnMode,
    /// The next sequence per partition.
    sequences: BTreeMap<(String, i32), i32>,
    /// Partitions added to the open transaction (v1 adds each once).
    added: BTreeSet<(String, i32)>,
}

/// A feature as ApiVersions describes it: supported range and finalized level (0 if none).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FeatureInfo {
    pub name: String,
    pub supported_min: i16,
    pub supported_max: i16,
    pub finalized: i16,
    pub epoch: i64,
}

const INIT_PRODUCER_ID_VERSION: i16 = 4;
const ADD_PARTITIONS_VERSION: i16 = 3;
const ADD_OFFSETS_VERSION: i16 = 3;
const API_VERSIONS_VERSION: i16 = 4;
const UPDATE_FEATURES_VERSION: i16 = 1;
/// Retries of a request answered CONCURRENT_TRANSACTIONS (a transaction still completing).
const CONCURRENT_RETRIES: usize = 200;

fn ts(v: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(v.to_string()))
}

impl Client {
    /// The features of the broker (ApiVersions v4): each supported one with its finalized level.
    pub async fn describe_features(&mut self) -> Result<Vec<FeatureInfo>> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("weir-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response = self.call(&request, API_VERSIONS_VERSION).await?;
        check(response.error_code, None)?;
        Ok(response
            .supported_features
            .iter()
            .map(|s| FeatureInfo {
                name: s.name.to_string(),
                supported_min: s.min_version,
                supported_max: s.max_version,
                finalized: response
                    .finalized_features
                    .iter()
                    .find(|f| f.name == s.name)
                    .map_or(0, |f| f.max_version_level),
                epoch: response.finalized_features_epoch,
            })
            .collect())
    }

    /// UpdateFeatures: each (feature, level) with upgrade type 1 (upgrade), 2 (safe downgrade)
    /// or 3 (unsafe downgrade). All or none, as the controller decides.
    pub async fn update_features(
        &mut self,
        updates: &[(String, i16)],
        upgrade_type: i8,
        validate_only: bool,
    ) -> Result<()> {
        let request = UpdateFeaturesRequest::default()
            .with_timeout_ms(self.timeout.as_millis() as i32)
            .with_validate_only(validate_only)
            .with_feature_updates(
                updates
                    .iter()
                    .map(|(n, l)| {
                        FeatureUpdateKey::default()
                            .with_feature(StrBytes::from_string(n.clone()))
                            .with_max_version_level(*l)
                            .with_upgrade_type(upgrade_type)
                    })
                    .collect(),
            );
        let response = self.call(&request, UPDATE_FEATURES_VERSION).await?;
        check(response.error_code, response.error_message.as_ref())
    }

    /// InitProducerId for `transactional_id` (retried while a previous transaction completes).
    pub async fn init_transactions(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        mode: TxnMode,
    ) -> Result<TxnProducer> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(ts(transactional_id)))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        // FindCoordinator first, as clients do (it makes `__transaction_state` on first use).
        for _ in 0..CONCURRENT_RETRIES {
            match self.transaction_coordinator(transactional_id).await {
                Ok(_) => break,
                Err(ClientError::Kafka(e, _)) if retriable(e.code()) => {
                    self.io
                        .clock
                        .sleep(std::time::Duration::from_millis(20))
                        .await
                }
                Err(e) => return Err(e),
            }
        }
        for _ in 0..CONCURRENT_RETRIES {
            let response = self.call(&request, INIT_PRODUCER_ID_VERSION).await?;
            if retriable(response.error_code) {
                self.io
                    .clock
                    .sleep(std::time::Duration::from_millis(20))
                    .await;
                continue;
            }
            check(response.error_code, None)?;
            return Ok(TxnProducer {
                transactional_id: transactional_id.to_string(),
                producer_id: response.producer_id.0,
                producer_epoch: response.producer_epoch,
                mode,
                sequences: BTreeMap::new(),
                added: BTreeSet::new(),
            });
        }
        Err(ClientError::Timeout)
    }

    /// Writes `values` to `topic`/`partition` in the producer's transaction; returns the base
    /// offset. v1 adds the partition first (AddPartitionsToTxn); v2's Produce v12 adds it.
    pub async fn txn_produce(
        &mut self,
        producer: &mut TxnProducer,
        topic: &str,
        partition: i32,
        values: &[&[u8]],
    ) -> Result<i64> {
        let key = (topic.to_string(), partition);
        if producer.mode == TxnMode::V1 && !producer.added.contains(&key) {
            let request = AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(ts(&producer.transactional_id))
                .with_v3_and_below_producer_id(ProducerId(producer.producer_id))
                .with_v3_and_below_producer_epoch(producer.producer_epoch)
                .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![partition])]);
            let response = self.call(&request, ADD_PARTITIONS_VERSION).await?;
            for t in &response.results_by_topic_v3_and_below {
                for p in &t.results_by_partition {
                    check(p.partition_error_code, None)?;
                }
            }
        }
        producer.added.insert(key.clone());
        let sequence = producer.sequences.get(&key).copied().unwrap_or(0);
        let now = self.io.clock.wall_ms();
        let mut builder = BatchBuilder::new(now);
        for v in values {
            builder.push(None, Some(v), now);
        }
        let mut batch = builder.finish(producer.producer_id, producer.producer_epoch, sequence);
        // The transactional attribute (bit 4), then the CRC again.
        batch[22] |= 0x10;
        let crc = compute_crc(&batch);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        let request = produce_request(topic, &[(partition, Bytes::from(batch))], -1, self.timeout)
            .with_transactional_id(Some(ts(&producer.transactional_id)));
        let response = self.call(&request, producer.mode.produce_version()).await?;
        let offsets = produce_offsets(&response)?;
        producer
            .sequences
            .insert(key, sequence.wrapping_add(values.len() as i32));
        offsets
            .first()
            .map(|&(_, o)| o)
            .ok_or_else(|| ClientError::Protocol("partition missing from produce response".into()))
    }

    /// sendOffsetsToTransaction: v1 adds the group's offsets partition (AddOffsetsToTxn), then
    /// TxnOffsetCommit v3; v2 sends TxnOffsetCommit v5, which adds it. Offsets as (topic,
    /// partition, offset).
    pub async fn txn_send_offsets(
        &mut self,
        producer: &TxnProducer,
        group_id: &str,
        offsets: &[(&str, i32, i64)],
    ) -> Result<()> {
        let group = GroupId(StrBytes::from_string(group_id.to_string()));
        // The group's coordinator first, as clients do (it makes `__consumer_offsets`).
        for _ in 0..CONCURRENT_RETRIES {
            match self.coordinator(group_id).await {
                Ok(_) => break,
                Err(ClientError::Kafka(e, _)) if retriable(e.code()) => {
                    self.io
                        .clock
                        .sleep(std::time::Duration::from_millis(20))
                        .await
                }
                Err(e) => return Err(e),
            }
        }
        if producer.mode == TxnMode::V1 {
            let request = AddOffsetsToTxnRequest::default()
                .with_transactional_id(ts(&producer.transactional_id))
                .with_producer_id(ProducerId(producer.producer_id))
                .with_producer_epoch(producer.producer_epoch)
                .with_group_id(group.clone());
            let response = self.call(&request, ADD_OFFSETS_VERSION).await?;
            check(response.error_code, None)?;
        }
        let mut topics: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
        for &(topic, partition, offset) in offsets {
            topics.entry(topic).or_default().push(
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset),
            );
        }
        let request = TxnOffsetCommitRequest::default()
            .with_transactional_id(ts(&producer.transactional_id))
            .with_group_id(group)
            .with_producer_id(ProducerId(producer.producer_id))
            .with_producer_epoch(producer.producer_epoch)
            .with_generation_id(-1)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        TxnOffsetCommitRequestTopic::default()
                            .with_name(name(t))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let response = self
            .call(&request, producer.mode.txn_offset_commit_version())
            .await?;
        for t in &response.topics {
            for p in &t.partitions {
                check(p.error_code, None)?;
            }
        }
        Ok(())
    }

    /// Commits or aborts the open transaction (retried while the coordinator is busy). Under v2
    /// the producer adopts the id and epoch the answer names, its sequences starting at 0.
    pub async fn end_txn(&mut self, producer: &mut TxnProducer, commit: bool) -> Result<()> {
        for _ in 0..CONCURRENT_RETRIES {
            let (code, pid, epoch) = self
                .end_txn_as(
                    &producer.transactional_id,
                    producer.producer_id,
                    producer.producer_epoch,
                    commit,
                    producer.mode,
                )
                .await?;
            if retriable(code) {
                self.io
                    .clock
                    .sleep(std::time::Duration::from_millis(20))
                    .await;
                continue;
            }
            check(code, None)?;
            producer.added.clear();
            if producer.mode == TxnMode::V2 {
                producer.producer_id = pid;
                producer.producer_epoch = epoch;
                producer.sequences.clear();
            }
            return Ok(());
        }
        Err(ClientError::Timeout)
    }

    /// One EndTxn as given (a retry from an earlier transaction, in tests): the error code and
    /// the producer id and epoch answered (-1 before v5).
    pub async fn end_txn_as(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        mode: TxnMode,
    ) -> Result<(i16, i64, i16)> {
        let request = EndTxnRequest::default()
            .with_transactional_id(ts(transactional_id))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_committed(commit);
        let version = mode.end_txn_version();
        let response = self.call(&request, version).await?;
        Ok((
            response.error_code,
            response.producer_id.0,
            response.producer_epoch,
        ))
    }
}

/// Answers a transactional client retries (a transaction still completing, a coordinator
/// loading or `__transaction_state` being made; this client has one broker to ask).
fn retriable(code: i16) -> bool {
    [
        ResponseError::ConcurrentTransactions,
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
    ]
    .iter()
    .any(|e| e.code() == code)
}
