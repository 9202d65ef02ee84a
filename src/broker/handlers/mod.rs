//! The request handlers, by area, and the one table from API key to handler
//! ([`ROUTES`]): the versions served, the listeners that serve them, the function that answers.
//! The connection loop decodes against it (`api::decode`) and ApiVersions advertises from it.
//! A handler translates wire types to core calls and back; nothing below this layer sees the
//! wire.

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::broker::api::{self, RequestContext, Route, Serves, Versions};
use crate::broker::shared::Broker;
use groups::{classic, consumer};
use inter_node::{broker_rpc, quorum_rpc};
use records::{delete_records, fetch, offset_for_leader_epoch, produce};
use security::{acls, quotas, scram};
use topics::{admin, elect_leaders, metadata, reassignments, topic_partitions};

pub(crate) mod configs;
pub(crate) mod features;
pub(crate) mod groups;
pub(crate) mod inter_node;
pub(crate) mod log_dirs;
pub(crate) mod records;
pub(crate) mod security;
pub(crate) mod topics;
pub(crate) mod transactions;
pub(crate) mod unregister_broker;

/// A route: `$key` at `$versions` on `$serves`, answered by `$body` (an expression of
/// `Option<ResponseKind>`, or `Result<Option<ResponseKind>, String>` after `try`) with the
/// broker, the context and the request body bound to the names given.
macro_rules! route {
    ($key:ident, $versions:expr, $serves:ident, |$b:pat_param, $c:pat_param, $r:ident| $body:expr) => {
        route!(@make $key, $versions, $serves, true, |$b, $c, $r| Ok($body))
    };
    ($key:ident, $versions:expr, $serves:ident, hidden, try |$b:pat_param, $c:pat_param, $r:ident| $body:expr) => {
        route!(@make $key, $versions, $serves, false, |$b, $c, $r| $body)
    };
    ($key:ident, $versions:expr, $serves:ident, try |$b:pat_param, $c:pat_param, $r:ident| $body:expr) => {
        route!(@make $key, $versions, $serves, true, |$b, $c, $r| $body)
    };
    (@make $key:ident, $versions:expr, $serves:ident, $advertised:expr, |$b:pat_param, $c:pat_param, $r:ident| $body:expr) => {{
        fn run<'a>($b: &'a Broker, $c: &'a RequestContext, body: RequestKind) -> api::Reply<'a> {
            Box::pin(async move {
                let RequestKind::$key($r) = body else {
                    return Err(format!("a body that is not {}", stringify!($key)));
                };
                $body
            })
        }
        Route {
            key: ApiKey::$key,
            versions: $versions,
            serves: Serves::$serves,
            advertised: $advertised,
            run,
        }
    }};
}

use Versions::{Codec, Range};

/// Every API Weir serves, in the order ApiVersions lists them. Ceilings sit below the codec's
/// where a newer version changes semantics Weir does not have yet (Produce 13+ topic ids, Fetch
/// 17+ follower-only fields, InitProducerId 6 two-phase commit).
/// OffsetCommit and OffsetFetch v9 carry KIP-848 member epochs, which a classic group ignores
/// as Kafka's does. On the controller listener a Fetch is the metadata log's.
pub static ROUTES: &[Route<Broker>] = &[
    // The quorum's RPCs and the broker sessions (controller listener only, every version the
    // codec decodes). Fetch and FetchSnapshot are not advertised there (Fetch keeps the
    // client's range in the controller listener's ApiVersions).
    route!(Fetch, Codec, ControllerOnly, hidden, try |b, c, r| quorum_rpc::answer(b, c, RequestKind::Fetch(r)).await),
    route!(FetchSnapshot, Codec, ControllerOnly, hidden, try |b, c, r| quorum_rpc::answer(b, c, RequestKind::FetchSnapshot(r)).await),
    // A client request another broker relays to the active controller (KIP-590): opened by
    // the connection loop, which answers the inner request as it would any (`server`), so
    // this handler never runs.
    route!(Envelope, Range(0, 0), ControllerOnly, try |_, _, _r| Err("an Envelope is opened by the connection loop, not routed".to_string())),
    // The client APIs (both listeners).
    route!(Produce, Range(3, 12), Both, try |b, c, r| Ok(produce::handle(b, c, r).await.map(ResponseKind::Produce))),
    route!(Fetch, Range(4, 16), ClientOnly, |b, c, r| Some(
        ResponseKind::Fetch(fetch::handle(b, c, r).await)
    )),
    route!(ListOffsets, Range(1, 10), Both, |b, c, r| Some(
        ResponseKind::ListOffsets(fetch::list_offsets(b, c, r))
    )),
    route!(Metadata, Range(0, 13), Both, |b, c, r| Some(
        ResponseKind::Metadata(metadata::handle(b, c, r).await)
    )),
    route!(FindCoordinator, Range(0, 6), Both, |b, c, r| Some(
        ResponseKind::FindCoordinator(classic::find_coordinator(b, c, r).await)
    )),
    route!(ApiVersions, Range(0, 4), Both, |b, c, _r| Some(
        ResponseKind::ApiVersions(features::advertise(
            &b.image(),
            c.version,
            api::api_versions(ROUTES, c.listener)
        ))
    )),
    route!(UpdateFeatures, Range(0, 2), Both, |b, c, r| Some(
        ResponseKind::UpdateFeatures(features::update(b, c, r).await)
    )),
    // On a SASL listener the authenticator answers these before authentication
    // (`secure_connection`); here, after it or on another listener: ILLEGAL_SASL_STATE.
    route!(SaslHandshake, Range(0, 1), Both, |_, _, _r| Some(
        ResponseKind::SaslHandshake(
            kafka_protocol::messages::SaslHandshakeResponse::default()
                .with_error_code(kafka_protocol::error::ResponseError::IllegalSaslState.code())
        )
    )),
    route!(SaslAuthenticate, Range(0, 2), Both, |_, _, _r| Some(
        ResponseKind::SaslAuthenticate(
            kafka_protocol::messages::SaslAuthenticateResponse::default()
                .with_error_code(kafka_protocol::error::ResponseError::IllegalSaslState.code())
                .with_error_message(Some(
                    "Unexpected SASL request: the connection is not authenticating".into()
                ))
        )
    )),
    route!(CreateTopics, Range(2, 7), Both, |b, c, r| Some(
        ResponseKind::CreateTopics(admin::create_topics(b, c, r).await)
    )),
    route!(DeleteTopics, Range(1, 6), Both, |b, c, r| Some(
        ResponseKind::DeleteTopics(admin::delete_topics(b, c, r).await)
    )),
    route!(InitProducerId, Range(0, 5), Both, |b, c, r| Some(
        ResponseKind::InitProducerId(produce::init_producer_id(b, c, r).await)
    )),
    // Transactions v1 (KIP-98 with KIP-890 part 1's verification) and v2 (KIP-890 part 2:
    // Produce 12 and TxnOffsetCommit 5 add partitions implicitly, EndTxn 5 bumps the epoch,
    // AddPartitionsToTxn 4–5 is the brokers' batched form). Clients take v2 only when
    // `transaction.version` 2 is finalized (ApiVersions' features).
    route!(AddPartitionsToTxn, Range(0, 5), Both, |b, c, r| Some(
        ResponseKind::AddPartitionsToTxn(transactions::add_partitions(b, c, r).await)
    )),
    route!(AddOffsetsToTxn, Range(0, 3), Both, |b, c, r| Some(
        ResponseKind::AddOffsetsToTxn(transactions::add_offsets(b, c, r).await)
    )),
    route!(EndTxn, Range(0, 5), Both, |b, c, r| Some(
        ResponseKind::EndTxn(transactions::end_txn(b, c, r).await)
    )),
    route!(TxnOffsetCommit, Range(0, 5), Both, |b, c, r| Some(
        ResponseKind::TxnOffsetCommit(transactions::txn_offset_commit(b, c, r).await)
    )),
    route!(WriteTxnMarkers, Range(1, 1), Both, |b, c, r| Some(
        ResponseKind::WriteTxnMarkers(transactions::write_txn_markers(b, c, r).await)
    )),
    route!(DescribeProducers, Range(0, 0), Both, |b, c, r| Some(
        ResponseKind::DescribeProducers(transactions::describe_producers(b, c, r))
    )),
    route!(DescribeTransactions, Range(0, 0), Both, |b, c, r| Some(
        ResponseKind::DescribeTransactions(transactions::describe_transactions(b, c, r))
    )),
    route!(ListTransactions, Range(0, 2), Both, |b, c, r| Some(
        ResponseKind::ListTransactions(transactions::list_transactions(b, c, r))
    )),
    route!(DescribeConfigs, Range(1, 4), Both, |b, c, r| Some(
        ResponseKind::DescribeConfigs(configs::describe(b, c, r))
    )),
    route!(AlterConfigs, Range(0, 2), Both, |b, c, r| Some(
        ResponseKind::AlterConfigs(configs::alter(b, c, r).await)
    )),
    route!(CreatePartitions, Range(0, 3), Both, |b, c, r| Some(
        ResponseKind::CreatePartitions(admin::create_partitions(b, c, r).await)
    )),
    route!(IncrementalAlterConfigs, Range(0, 1), Both, |b, c, r| Some(
        ResponseKind::IncrementalAlterConfigs(configs::incremental_alter(b, c, r).await)
    )),
    route!(DeleteRecords, Range(0, 2), Both, |b, c, r| Some(
        ResponseKind::DeleteRecords(delete_records::handle(b, c, r).await)
    )),
    route!(OffsetForLeaderEpoch, Range(2, 4), Both, |b, c, r| Some(
        ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(b, c, r))
    )),
    route!(DescribeAcls, Range(1, 3), Both, |b, c, r| Some(
        ResponseKind::DescribeAcls(acls::describe(b, c, r))
    )),
    route!(CreateAcls, Range(1, 3), Both, |b, c, r| Some(
        ResponseKind::CreateAcls(acls::create(b, c, r).await)
    )),
    route!(DeleteAcls, Range(1, 3), Both, |b, c, r| Some(
        ResponseKind::DeleteAcls(acls::delete(b, c, r).await)
    )),
    route!(
        DescribeUserScramCredentials,
        Range(0, 0),
        Both,
        |b, c, r| Some(ResponseKind::DescribeUserScramCredentials(scram::describe(
            b, c, r
        )))
    ),
    route!(
        AlterUserScramCredentials,
        Range(0, 0),
        Both,
        |b, c, r| Some(ResponseKind::AlterUserScramCredentials(
            scram::alter(b, c, r).await
        ))
    ),
    route!(DescribeClientQuotas, Range(0, 1), Both, |b, c, r| Some(
        ResponseKind::DescribeClientQuotas(quotas::describe(b, c, r))
    )),
    route!(AlterClientQuotas, Range(0, 1), Both, |b, c, r| Some(
        ResponseKind::AlterClientQuotas(quotas::alter(b, c, r).await)
    )),
    route!(DescribeCluster, Range(0, 2), Both, |b, c, r| Some(
        ResponseKind::DescribeCluster(metadata::describe_cluster(b, c, r))
    )),
    route!(DescribeLogDirs, Range(1, 5), Both, |b, c, r| Some(
        ResponseKind::DescribeLogDirs(log_dirs::describe(b, c, r))
    )),
    route!(AlterReplicaLogDirs, Range(1, 2), Both, |b, c, r| Some(
        ResponseKind::AlterReplicaLogDirs(log_dirs::alter(b, c, r))
    )),
    route!(DescribeQuorum, Range(0, 2), Both, |b, c, r| Some(
        ResponseKind::DescribeQuorum(quorum_rpc::describe_quorum(b, c, &r))
    )),
    route!(DescribeTopicPartitions, Range(0, 0), Both, |b, c, r| Some(
        ResponseKind::DescribeTopicPartitions(topic_partitions::handle(b, c, r))
    )),
    route!(ElectLeaders, Range(0, 2), Both, |b, c, r| Some(
        ResponseKind::ElectLeaders(elect_leaders::handle(b, c, r).await)
    )),
    route!(AlterPartitionReassignments, Range(0, 1), Both, |b, c, r| {
        Some(ResponseKind::AlterPartitionReassignments(
            reassignments::alter(b, c, r).await,
        ))
    }),
    route!(ListPartitionReassignments, Range(0, 0), Both, |b, c, r| {
        Some(ResponseKind::ListPartitionReassignments(
            reassignments::list(b, c, r),
        ))
    }),
    route!(UnregisterBroker, Range(0, 0), Both, |b, c, r| Some(
        ResponseKind::UnregisterBroker(unregister_broker::handle(b, c, r).await)
    )),
    route!(OffsetCommit, Range(2, 9), Both, |b, c, r| Some(
        ResponseKind::OffsetCommit(classic::offset_commit(b, c, r).await)
    )),
    route!(OffsetFetch, Range(1, 9), Both, |b, c, r| Some(
        ResponseKind::OffsetFetch(classic::offset_fetch(b, c, r))
    )),
    route!(JoinGroup, Range(0, 9), Both, |b, c, r| Some(
        ResponseKind::JoinGroup(classic::join_group(b, c, r).await)
    )),
    route!(Heartbeat, Range(0, 4), Both, |b, c, r| Some(
        ResponseKind::Heartbeat(classic::heartbeat(b, c, r).await)
    )),
    route!(LeaveGroup, Range(0, 5), Both, |b, c, r| Some(
        ResponseKind::LeaveGroup(classic::leave_group(b, c, r).await)
    )),
    route!(SyncGroup, Range(0, 5), Both, |b, c, r| Some(
        ResponseKind::SyncGroup(classic::sync_group(b, c, r).await)
    )),
    route!(DescribeGroups, Range(0, 6), Both, |b, c, r| Some(
        ResponseKind::DescribeGroups(classic::describe_groups(b, c, r))
    )),
    route!(ListGroups, Range(0, 5), Both, |b, c, r| Some(
        ResponseKind::ListGroups(classic::list_groups(b, c, r))
    )),
    route!(DeleteGroups, Range(0, 2), Both, |b, c, r| Some(
        ResponseKind::DeleteGroups(classic::delete_groups(b, c, r).await)
    )),
    route!(OffsetDelete, Range(0, 0), Both, |b, c, r| Some(
        ResponseKind::OffsetDelete(classic::offset_delete(b, c, r).await)
    )),
    // KIP-848: librdkafka with group.protocol=consumer speaks v1 only (client-made member ids).
    route!(ConsumerGroupHeartbeat, Range(0, 1), Both, |b, c, r| Some(
        ResponseKind::ConsumerGroupHeartbeat(consumer::heartbeat(b, c, r).await)
    )),
    route!(ConsumerGroupDescribe, Range(0, 1), Both, |b, c, r| Some(
        ResponseKind::ConsumerGroupDescribe(consumer::describe(b, c, r))
    )),
    // Inter-node APIs only the controller listener answers, at every version the codec decodes.
    route!(Vote, Codec, ControllerOnly, try |b, c, r| quorum_rpc::answer(b, c, RequestKind::Vote(r)).await),
    route!(BeginQuorumEpoch, Codec, ControllerOnly, try |b, c, r| quorum_rpc::answer(b, c, RequestKind::BeginQuorumEpoch(r)).await),
    route!(EndQuorumEpoch, Codec, ControllerOnly, try |b, c, r| quorum_rpc::answer(b, c, RequestKind::EndQuorumEpoch(r)).await),
    route!(BrokerRegistration, Codec, ControllerOnly, try |b, _, r| broker_rpc::answer_rpc(b, RequestKind::BrokerRegistration(r)).await),
    route!(BrokerHeartbeat, Codec, ControllerOnly, try |b, _, r| broker_rpc::answer_rpc(b, RequestKind::BrokerHeartbeat(r)).await),
    route!(AlterPartition, Codec, ControllerOnly, try |b, _, r| broker_rpc::answer_rpc(b, RequestKind::AlterPartition(r)).await),
    route!(AssignReplicasToDirs, Codec, ControllerOnly, try |b, _, r| broker_rpc::answer_rpc(b, RequestKind::AssignReplicasToDirs(r)).await),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::api::{api_versions, find, ListenerKind};

    fn served(key: ApiKey, version: i16) -> bool {
        find(ROUTES, ListenerKind::Client, key, version).is_some()
    }

    #[test]
    fn advertised_versions_fit_the_codec() {
        let client = api_versions(ROUTES, ListenerKind::Client).api_keys;
        assert_eq!(client.len(), 54);
        assert!(served(ApiKey::UnregisterBroker, 0));
        assert!(served(ApiKey::AlterPartitionReassignments, 1));
        assert!(served(ApiKey::ListPartitionReassignments, 0));
        assert!(served(ApiKey::DescribeClientQuotas, 1) && served(ApiKey::AlterClientQuotas, 1));
        assert!(served(ApiKey::Produce, 9));
        // Transactions v2's versions (KIP-890 part 2), and not Produce's topic ids.
        assert!(served(ApiKey::EndTxn, 5) && served(ApiKey::TxnOffsetCommit, 5));
        assert!(served(ApiKey::Produce, 12) && !served(ApiKey::Produce, 13));
        assert!(served(ApiKey::AddPartitionsToTxn, 5));
        assert!(served(ApiKey::InitProducerId, 5) && !served(ApiKey::InitProducerId, 6));
        assert!(!served(ApiKey::Produce, 2));
        assert!(served(ApiKey::JoinGroup, 0));
        // KIP-848: librdkafka's group.protocol=consumer needs v1.
        assert!(served(ApiKey::ConsumerGroupHeartbeat, 1));
        assert!(served(ApiKey::ConsumerGroupDescribe, 1));
        assert!(!served(ApiKey::ConsumerGroupHeartbeat, 2));
        // The quorum's RPCs are not a client's.
        assert!(!served(ApiKey::Vote, 0));
        assert!(find(ROUTES, ListenerKind::Controller, ApiKey::Vote, 0).is_some());
    }

    #[test]
    fn the_controller_listener_also_advertises_alter_partition_v2_v3() {
        let keys = api_versions(ROUTES, ListenerKind::Controller).api_keys;
        let alter = keys
            .iter()
            .find(|k| k.api_key == ApiKey::AlterPartition as i16)
            .expect("AlterPartition advertised");
        assert_eq!((alter.min_version, alter.max_version), (2, 3));
        let fetch = keys
            .iter()
            .find(|k| k.api_key == ApiKey::Fetch as i16)
            .expect("Fetch advertised");
        assert_eq!((fetch.min_version, fetch.max_version), (4, 16));
        assert!(!keys
            .iter()
            .any(|k| k.api_key == ApiKey::FetchSnapshot as i16));
        assert!(!api_versions(ROUTES, ListenerKind::Client)
            .api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::AlterPartition as i16));
    }

    #[test]
    fn each_api_has_one_route_per_listener() {
        for listener in [ListenerKind::Client, ListenerKind::Controller] {
            let mut keys: Vec<i16> = ROUTES
                .iter()
                .filter(|r| r.serves(listener))
                .map(|r| r.key as i16)
                .collect();
            let all = keys.len();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), all, "{listener:?}");
        }
    }
}
