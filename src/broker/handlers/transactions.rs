//! Transactions v1 on the wire: InitProducerId with a transactional id, AddPartitionsToTxn
//! (v0–3, the client's form), AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers, and
//! KIP-890 part 1's verification of a producer's first transactional write to a partition.
//! The coordinator's decisions are the core's (`crate::txn`); this layer maps the wire to its
//! events and its errors to Kafka's codes. KIP-664's tooling APIs are in `describe`.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse, ProducerId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

use crate::broker::api::RequestContext;
use crate::broker::handlers::inter_node::forward;
use crate::broker::{errors, shared::Broker};
use crate::group::OFFSETS_TOPIC;
use crate::log::control::Marker;
use crate::txn::{Event, Reply, TopicPartition, TxnError};

mod describe;
mod error_codes;
mod implicit_add;
mod verify;

pub(crate) use describe::{describe_producers, describe_transactions, list_transactions};
use error_codes::code;

fn reply_code(reply: &Reply, fenced_since: i16, version: i16) -> i16 {
    match reply {
        Reply::Error(e) => code(*e, fenced_since, version).code(),
        _ => 0,
    }
}

pub(crate) async fn init_producer_id(
    broker: &Broker,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let version = ctx.version;
    let failed = |e: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(e.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let id = req
        .transactional_id
        .as_ref()
        .map(|t| t.to_string())
        .unwrap_or_default();
    if id.is_empty() {
        return failed(ResponseError::InvalidRequest);
    }
    if !broker.authz(ctx).transactional_id(&id) {
        return failed(ResponseError::TransactionalIdAuthorizationFailed);
    }
    // A producer id for the core to use if the transactional id is new (or its epoch
    // exhausted); wasted otherwise, as ids are plentiful.
    let fresh = match reserve_producer_id(broker).await {
        Ok(pid) => pid,
        Err(e) => {
            tracing::warn!(error = %e, "no producer id for a transactional producer");
            return failed(ResponseError::CoordinatorNotAvailable);
        }
    };
    let expected = (version >= 3).then_some((req.producer_id.0, req.producer_epoch));
    let reply = broker
        .txn_call(|request| Event::InitProducerId {
            request,
            transactional_id: id,
            timeout_ms: req.transaction_timeout_ms,
            fresh_producer_id: fresh,
            expected,
        })
        .await;
    match reply {
        Reply::ProducerId {
            producer_id,
            producer_epoch,
        } => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch),
        Reply::Error(e) => failed(code(e, 4, version)),
        Reply::Done => unreachable!("InitProducerId answers with an id"),
    }
}

pub(crate) async fn add_partitions(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if ctx.version >= 4 {
        // The brokers' batched form (verification, transactions v2's implicit add).
        return implicit_add::add_partitions_from_broker(broker, ctx, req).await;
    }
    let partitions: Vec<TopicPartition> = req
        .v3_and_below_topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.as_str(), *p))
        })
        .collect();
    if !broker
        .authz(ctx)
        .transactional_id(&req.v3_and_below_transactional_id)
    {
        let denied = ResponseError::TransactionalIdAuthorizationFailed.code();
        let results = req
            .v3_and_below_topics
            .iter()
            .map(|t| {
                AddPartitionsToTxnTopicResult::default()
                    .with_name(t.name.clone())
                    .with_results_by_partition(
                        t.partitions
                            .iter()
                            .map(|p| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(*p)
                                    .with_partition_error_code(denied)
                            })
                            .collect(),
                    )
            })
            .collect();
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    let image = broker.image();
    let unknown: Vec<&TopicPartition> = partitions
        .iter()
        .filter(|tp| {
            image
                .topic(&tp.topic)
                .is_none_or(|t| tp.partition < 0 || tp.partition >= t.partitions)
        })
        .collect();
    // As Kafka: any unknown partition fails the request (UNKNOWN_TOPIC_OR_PARTITION for it,
    // OPERATION_NOT_ATTEMPTED for the rest).
    let result_for: Box<dyn Fn(&TopicPartition) -> i16> = if !unknown.is_empty() {
        let unknown: Vec<TopicPartition> = unknown.into_iter().cloned().collect();
        Box::new(move |tp| {
            if unknown.contains(tp) {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                ResponseError::OperationNotAttempted.code()
            }
        })
    } else {
        let reply = broker
            .txn_call(|request| Event::AddPartitions {
                request,
                transactional_id: req.v3_and_below_transactional_id.to_string(),
                producer_id: req.v3_and_below_producer_id.0,
                producer_epoch: req.v3_and_below_producer_epoch,
                partitions: partitions.clone(),
                v2: false,
            })
            .await;
        let c = reply_code(&reply, 2, ctx.version);
        Box::new(move |_| c)
    };
    let results = req
        .v3_and_below_topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(result_for(&TopicPartition::new(
                                    t.name.as_str(),
                                    *p,
                                )))
                        })
                        .collect(),
                )
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

pub(crate) async fn add_offsets(
    broker: &Broker,
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let authz = broker.authz(ctx);
    if !authz.transactional_id(&req.transactional_id) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if !authz.group(crate::acl::Operation::Read, &req.group_id) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    // The group's `__consumer_offsets` partition joins the transaction.
    if let Err(why) = broker.ensure_offsets_topic().await {
        tracing::debug!(%why, "AddOffsetsToTxn before the offsets topic exists");
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ResponseError::CoordinatorNotAvailable.code());
    }
    let Some(partitions) = broker.image().topic(OFFSETS_TOPIC).map(|t| t.partitions) else {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ResponseError::CoordinatorNotAvailable.code());
    };
    let partition = crate::group::placement::partition_for(&req.group_id, partitions);
    let reply = broker
        .txn_call(|request| Event::AddPartitions {
            request,
            transactional_id: req.transactional_id.to_string(),
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
            partitions: vec![TopicPartition::new(OFFSETS_TOPIC, partition)],
            v2: false,
        })
        .await;
    AddOffsetsToTxnResponse::default().with_error_code(reply_code(&reply, 2, ctx.version))
}

pub(crate) async fn end_txn(
    broker: &Broker,
    ctx: &RequestContext,
    req: EndTxnRequest,
) -> EndTxnResponse {
    if !broker.authz(ctx).transactional_id(&req.transactional_id) {
        return EndTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    // EndTxn v5 is transactions v2: the coordinator bumps the epoch and answers the producer
    // id and epoch to go on with (a new id when the bump exhausts the epoch: reserved first).
    let v2 = ctx.version >= 5;
    let id = req.transactional_id.to_string();
    let fresh =
        if v2 && broker.txn_read(|core, _| core.is_some_and(|c| c.needs_fresh_producer_id(&id))) {
            match reserve_producer_id(broker).await {
                Ok(pid) => pid,
                Err(e) => {
                    tracing::warn!(error = %e, "no producer id for a transactions v2 rotation");
                    return EndTxnResponse::default()
                        .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1);
                }
            }
        } else {
            -1
        };
    let reply = broker
        .txn_call(|request| Event::EndTxn {
            request,
            transactional_id: id,
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
            commit: req.committed,
            v2,
            fresh_producer_id: fresh,
        })
        .await;
    let (producer_id, producer_epoch) = match reply {
        Reply::ProducerId {
            producer_id,
            producer_epoch,
        } => (producer_id, producer_epoch),
        _ => (-1, -1),
    };
    EndTxnResponse::default()
        .with_error_code(reply_code(&reply, 2, ctx.version))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
}

/// TxnOffsetCommit at the group coordinator: once the offsets partition is verified to be in
/// the transaction, the group core fences the member (KIP-447) and writes the offsets as the
/// producer's transactional batch; they stay pending until the transaction's marker reaches
/// the group's `__consumer_offsets` partition.
pub(crate) async fn txn_offset_commit(
    broker: &Broker,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let group_id = req.group_id.to_string();
    let authz = broker.authz(ctx);
    let partitions = broker.image().topic(OFFSETS_TOPIC).map(|t| t.partitions);
    // The group gate: this broker must coordinate the group (it leads its offsets partition).
    let gate = match partitions {
        None => Err(ResponseError::CoordinatorNotAvailable),
        Some(n) => {
            let p = crate::group::placement::partition_for(&group_id, n);
            match broker.coordinator_endpoint(&group_id) {
                Ok((node, _, _)) if node == broker.config.node_id => Ok(p),
                Ok(_) => Err(ResponseError::NotCoordinator),
                Err(_) => Err(ResponseError::CoordinatorNotAvailable),
            }
        }
    };
    // The offsets partition must be in the transaction (KIP-890 verification).
    let verdict = match gate {
        _ if !authz.transactional_id(&req.transactional_id) => {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        }
        _ if !authz.group(crate::acl::Operation::Read, &group_id) => {
            Err(ResponseError::GroupAuthorizationFailed)
        }
        Err(e) => Err(e),
        Ok(p) => {
            // v5 is transactions v2: the offsets partition joins the transaction here
            // (no AddOffsetsToTxn); before, it must already be in it.
            let partition = TopicPartition::new(OFFSETS_TOPIC, p);
            let producer = (req.producer_id.0, req.producer_epoch);
            let reply = broker
                .txn_offsets_partition(&req.transactional_id, producer, partition, ctx.version >= 5)
                .await;
            match reply {
                Ok(()) => Ok(()),
                Err(TxnError::ProducerFenced) => Err(ResponseError::InvalidProducerEpoch),
                Err(TxnError::NotInTransaction) | Err(TxnError::InvalidProducerIdMapping) => {
                    Err(ResponseError::InvalidTxnState)
                }
                Err(_) => Err(ResponseError::CoordinatorNotAvailable),
            }
        }
    };
    let offsets: Vec<crate::group::OffsetToCommit> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| crate::group::OffsetToCommit {
                topic: t.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            })
        })
        .collect();
    // One code per partition in request order.
    let codes: Vec<i16> = match verdict {
        Err(e) => vec![e.code(); offsets.len()],
        Ok(()) => {
            // Before v3 the request names no member: unfenced (kafkajs sends v0-1).
            let named = ctx.version >= 3;
            let commit = crate::group::CommitRequest {
                group_id: group_id.clone(),
                member_id: if named {
                    req.member_id.to_string()
                } else {
                    String::new()
                },
                instance_id: req
                    .group_instance_id
                    .as_ref()
                    .filter(|_| named)
                    .map(|i| i.to_string()),
                generation: if named { req.generation_id } else { -1 },
                retention_ms: -1,
                unknown_group: crate::group::GroupError::UnknownMemberId,
                offsets,
            };
            let n = commit.offsets.len();
            let txn = crate::group::TxnCommitRequest {
                commit,
                producer_id: req.producer_id.0,
                producer_epoch: req.producer_epoch,
            };
            broker.hold_while_loading(&txn.commit.group_id).await;
            match broker
                .group_call(|c, id, now| c.txn_commit(id, txn, now))
                .await
            {
                Ok(crate::group::Response::Commit(r)) => r
                    .partitions
                    .iter()
                    .map(|(_, _, e)| errors::group_code(*e))
                    .collect(),
                Ok(other) => unreachable!("a commit answered with {other:?}"),
                Err(e) => vec![errors::group(e).code(); n],
            }
        }
    };
    let mut codes = codes.into_iter();
    TxnOffsetCommitResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                TxnOffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                TxnOffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(codes.next().unwrap_or(0))
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// WriteTxnMarkers at a partition leader (from a transaction coordinator on another broker,
/// or Admin's abortTransaction).
pub(crate) async fn write_txn_markers(
    broker: &Broker,
    ctx: &RequestContext,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    // As Kafka: CLUSTER_ACTION on the cluster (with an authorizer, the brokers' principal
    // needs it, as for replication in Kafka).
    let allowed = broker
        .authz(ctx)
        .cluster(crate::acl::Operation::ClusterAction);
    let mut markers = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let marker = Marker {
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        let v2 = crate::broker::drivers::txn_coordinator::marker_is_v2(&m);
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let mut partitions = Vec::with_capacity(t.partition_indexes.len());
            for p in t.partition_indexes {
                let tp = TopicPartition::new(t.name.as_str(), p);
                let code = match broker.partition(&tp.topic, p) {
                    _ if !allowed => ResponseError::ClusterAuthorizationFailed.code(),
                    None => ResponseError::UnknownTopicOrPartition.code(),
                    Some(_) => match broker
                        .write_marker_here(&tp, m.producer_id.0, m.producer_epoch, marker, v2)
                        .await
                    {
                        Ok(()) => 0,
                        Err(e) => errors::produce(&e).code(),
                    },
                };
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions),
            );
        }
        markers.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// A new producer id: reserved here on the active controller, else asked of it (an
/// InitProducerId without a transactional id, as a forwarded one would be).
async fn reserve_producer_id(broker: &Broker) -> Result<i64, String> {
    let quorum = &broker.quorum;
    if quorum.is_active() {
        return broker
            .allocate_producer_id()
            .await
            .map_err(|e| e.to_string());
    }
    let body = kafka_protocol::messages::RequestKind::InitProducerId(
        InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1),
    );
    let key = kafka_protocol::messages::ApiKey::InitProducerId;
    let limit = std::time::Duration::from_secs(5);
    match forward::ask_controller(broker, key, 0, &body, limit)
        .await
        .map_err(|e| e.to_string())?
    {
        kafka_protocol::messages::ResponseKind::InitProducerId(r) if r.error_code == 0 => {
            Ok(r.producer_id.0)
        }
        other => Err(format!("the controller refused a producer id: {other:?}")),
    }
}
