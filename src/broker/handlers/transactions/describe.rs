//! KIP-664's tooling APIs: DescribeTransactions and ListTransactions (answered by the
//! transaction coordinator from its core's state) and DescribeProducers (answered by any
//! replica of a partition from its producer state). Authorization as Kafka's: DESCRIBE on each
//! transactional id (ListTransactions leaves out the ids the caller may not describe), READ on
//! the topic for DescribeProducers.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::{self, TopicData};
use kafka_protocol::messages::list_transactions_response;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::{Operation, ResourceType};
use crate::broker::api::RequestContext;
use crate::broker::shared::Broker;
use crate::txn::{ListFilter, TxnError, TxnState};

use super::code;

/// Kafka's state names Weir never holds (a forgotten id is gone, not Dead; a fence is a
/// PrepareAbort at a bumped epoch): known as filters, they match nothing.
const STATES_NEVER_HELD: [&str; 2] = ["Dead", "PrepareEpochFence"];

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(crate) fn describe_transactions(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let authz = broker.authz(ctx);
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let state = describe_transactions_response::TransactionState::default()
                .with_transactional_id(id.clone())
                .with_transaction_state(s(""))
                .with_transaction_start_time_ms(-1)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            if !authz.allows(Operation::Describe, ResourceType::TransactionalId, &id) {
                let denied = ResponseError::TransactionalIdAuthorizationFailed.code();
                return state.with_error_code(denied);
            }
            let described = broker.txn_read(|core, _| match core {
                None => Err(TxnError::NotCoordinator),
                Some(core) => core.describe_transaction(&id),
            });
            match described {
                Err(e) => state.with_error_code(code(e, 0, 0).code()),
                Ok(d) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    for tp in d.partitions {
                        match topics.last_mut() {
                            Some(t) if t.topic.as_str() == tp.topic => {
                                t.partitions.push(tp.partition)
                            }
                            _ => topics.push(
                                TopicData::default()
                                    .with_topic(TopicName(s(tp.topic)))
                                    .with_partitions(vec![tp.partition]),
                            ),
                        }
                    }
                    state
                        .with_transaction_state(s(d.state.name()))
                        .with_transaction_timeout_ms(d.timeout_ms)
                        .with_transaction_start_time_ms(d.start_ms)
                        .with_producer_id(ProducerId(d.producer_id))
                        .with_producer_epoch(d.producer_epoch)
                        .with_topics(topics)
                }
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// ListTransactions: the ids this broker coordinates (Admin asks every broker). v1's duration
/// filter and v2's id pattern (a regex, matched in full as Java's `matches`) are honoured at
/// the versions that carry them.
pub(crate) fn list_transactions(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let response = ListTransactionsResponse::default();
    let mut unknown = Vec::new();
    let states = (!req.state_filters.is_empty()).then(|| {
        let mut states = Vec::new();
        for name in &req.state_filters {
            match TxnState::from_name(name.as_str()) {
                Some(state) => states.push(state),
                None if STATES_NEVER_HELD.contains(&name.as_str()) => {}
                None => unknown.push(name.clone()),
            }
        }
        states
    });
    let pattern = match req
        .transactional_id_pattern
        .as_ref()
        .filter(|p| !p.is_empty())
    {
        None => None,
        Some(p) => match regex::Regex::new(&format!("^(?:{})$", p.as_str())) {
            Ok(re) => Some(re),
            Err(_) => return response.with_error_code(ResponseError::InvalidRequest.code()),
        },
    };
    let filter = ListFilter {
        states,
        producer_ids: req.producer_id_filters.iter().map(|p| p.0).collect(),
        min_duration_ms: if ctx.version >= 1 {
            req.duration_filter
        } else {
            -1
        },
    };
    let listed = broker.txn_read(|core, now| match core {
        None => Ok(Vec::new()),
        Some(core) => core.list_transactions(now, &filter),
    });
    let listed = match listed {
        Ok(l) => l,
        Err(e) => return response.with_error_code(code(e, 0, 0).code()),
    };
    let authz = broker.authz(ctx);
    let states = listed
        .into_iter()
        .filter(|t| {
            pattern
                .as_ref()
                .is_none_or(|re| re.is_match(&t.transactional_id))
        })
        .filter(|t| {
            authz.allows(
                Operation::Describe,
                ResourceType::TransactionalId,
                &t.transactional_id,
            )
        })
        .map(|t| {
            list_transactions_response::TransactionState::default()
                .with_transactional_id(TransactionalId(s(t.transactional_id)))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(s(t.state.name()))
        })
        .collect();
    response
        .with_unknown_state_filters(unknown)
        .with_transaction_states(states)
}

/// DescribeProducers: each partition's producers as this replica holds them (leader or not:
/// `kafka-transactions.sh describe-producers --broker-id` asks a follower).
pub(crate) fn describe_producers(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let authz = broker.authz(ctx);
    let image = broker.image();
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let readable = authz.topic(Operation::Read, &t.name);
            let known = image.topic(&t.name);
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let answer = PartitionResponse::default().with_partition_index(p);
                    let failed = |e: ResponseError| {
                        answer
                            .clone()
                            .with_error_code(e.code())
                            .with_error_message(Some(s(e.to_string())))
                    };
                    if !readable {
                        return failed(ResponseError::TopicAuthorizationFailed);
                    }
                    let exists = known.is_some_and(|k| (0..k.partitions).contains(&p));
                    let Some(handle) = broker.partition(&t.name, p) else {
                        return failed(if exists {
                            ResponseError::NotLeaderOrFollower
                        } else {
                            ResponseError::UnknownTopicOrPartition
                        });
                    };
                    let producers = handle.lock().active_producers();
                    answer.with_active_producers(
                        producers
                            .into_iter()
                            .map(|a| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(a.producer_id))
                                    .with_producer_epoch(a.epoch as i32)
                                    .with_last_sequence(a.last_sequence)
                                    .with_last_timestamp(a.last_timestamp)
                                    .with_coordinator_epoch(a.coordinator_epoch)
                                    .with_current_txn_start_offset(a.txn_start_offset.unwrap_or(-1))
                            })
                            .collect(),
                    )
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
