//! Every API at every version the broker advertises gets an answer the client can decode: the
//! codec refuses to encode a field a version lacks, so a handler that sets one for the wrong
//! version would close the connection instead of answering. This walks them all.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Request, StrBytes};
use weir::broker::Broker;
use weir::client::Connection;
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::os::{OsRng, TokioClock, TokioNet, TokioSpawn};
use weir::io::Io;
use weir::log::batch::BatchBuilder;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

async fn call<R: Request>(conn: &mut Connection, request: &R, version: i16) -> R::Response {
    let what = format!("{:?} v{version}", ApiKey::try_from(R::KEY).unwrap());
    match conn.call(request, version).await {
        Ok(response) => response,
        Err(e) => panic!("{what}: {e}"),
    }
}

fn versions(conn: &Connection, api: ApiKey) -> std::ops::RangeInclusive<i16> {
    let max = conn.version(api, i16::MAX).unwrap();
    let mut min = max;
    while min > 0 && conn.version(api, min - 1).is_ok() {
        min -= 1;
    }
    min..=max
}

fn batch(value: &str) -> Bytes {
    let mut b = BatchBuilder::new(1_000);
    b.push(Some(b"k"), Some(value.as_bytes()), 1_000);
    Bytes::from(b.finish(-1, -1, -1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_version_is_answered() {
    let io = Io {
        clock: Arc::new(TokioClock::new()),
        rng: Arc::new(OsRng::with_seed(3)),
        spawner: Arc::new(TokioSpawn),
        net: Arc::new(TokioNet),
        disk: Arc::new(MemDisk::new(3)),
    };
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        (
            "group.initial.rebalance.delay.ms".to_string(),
            "0".to_string(),
        ),
    ]);
    let running = Broker::start(ServerConfig::from_properties(&props).unwrap().0, io.clone())
        .await
        .unwrap();
    let mut conn = Connection::connect(&io, running.local_addr, "every-version")
        .await
        .unwrap();

    for v in versions(&conn, ApiKey::CreateTopics) {
        let topic = format!("t{v}");
        let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name(&topic))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
        let response = call(&mut conn, &request, v).await;
        assert_eq!(response.topics[0].error_code, 0, "CreateTopics v{v}");
        if v >= 1 {
            assert_eq!(response.topics[0].error_message, None, "CreateTopics v{v}");
        }
    }
    let metadata = call(&mut conn, &MetadataRequest::default().with_topics(None), 12).await;
    let topic_id = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == "t2"))
        .unwrap()
        .topic_id;

    for v in versions(&conn, ApiKey::Metadata) {
        // Authorized operations (v8+): all of them without an authorizer, when asked.
        if v >= 8 {
            let request = MetadataRequest::default()
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name("t2")))
                ]))
                .with_include_cluster_authorized_operations(v <= 10)
                .with_include_topic_authorized_operations(true);
            let response = call(&mut conn, &request, v).await;
            assert_eq!(response.topics[0].topic_authorized_operations, 0x0df8);
            if v <= 10 {
                assert_eq!(response.cluster_authorized_operations, 0x1fa0);
            }
            let plain = MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("t2"))),
            ]));
            let response = call(&mut conn, &plain, v).await;
            assert_eq!(response.topics[0].topic_authorized_operations, i32::MIN);
            assert_eq!(response.cluster_authorized_operations, i32::MIN);
        }
        let topics = if v == 0 {
            Some(vec![])
        } else {
            Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("t2")))
            ])
        };
        let response = call(
            &mut conn,
            &MetadataRequest::default().with_topics(topics),
            v,
        )
        .await;
        assert!(
            response
                .topics
                .iter()
                .any(|t| t.name.as_ref().is_some_and(|n| n.as_str() == "t2")),
            "Metadata v{v}"
        );
    }
    for v in versions(&conn, ApiKey::Produce) {
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("t2"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(&format!("v{v}"))))])]);
        let response = call(&mut conn, &request, v).await;
        assert_eq!(
            response.responses[0].partition_responses[0].error_code, 0,
            "Produce v{v}"
        );
    }
    for v in versions(&conn, ApiKey::Fetch) {
        let mut topic = FetchTopic::default().with_partitions(vec![FetchPartition::default()
            .with_partition(0)
            .with_fetch_offset(0)
            .with_partition_max_bytes(1 << 20)]);
        if v >= 13 {
            topic.topic_id = topic_id;
        } else {
            topic.topic = name("t2");
        }
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![topic]);
        let response = call(&mut conn, &request, v).await;
        let p = &response.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "Fetch v{v}");
        assert!(
            p.records.as_ref().is_some_and(|r| !r.is_empty()),
            "Fetch v{v}"
        );
        // Past the log end: OFFSET_OUT_OF_RANGE with empty (not null) records, as Kafka sends;
        // librdkafka rejects the whole response on a null record set.
        let mut past = request.clone();
        past.topics[0].partitions[0].fetch_offset = 1_000_000;
        let response = call(&mut conn, &past, v).await;
        let p = &response.responses[0].partitions[0];
        assert_eq!(p.error_code, 1, "Fetch v{v} past the end");
        assert_eq!(
            p.records.as_deref(),
            Some(&b""[..]),
            "Fetch v{v} past the end"
        );
        assert_eq!(p.high_watermark, -1, "Fetch v{v} past the end");
        // An unknown partition, likewise.
        let mut unknown = request.clone();
        unknown.topics[0].partitions[0].partition = 99;
        let response = call(&mut conn, &unknown, v).await;
        let p = &response.responses[0].partitions[0];
        assert_ne!(p.error_code, 0, "Fetch v{v} unknown partition");
        assert_eq!(p.records.as_deref(), Some(&b""[..]), "Fetch v{v} unknown");
        // KIP-320: a current leader epoch newer than the broker's is UNKNOWN_LEADER_EPOCH...
        if v >= 9 {
            let mut newer = request.clone();
            newer.topics[0].partitions[0].current_leader_epoch = 1;
            let response = call(&mut conn, &newer, v).await;
            let p = &response.responses[0].partitions[0];
            assert_eq!(p.error_code, 75, "Fetch v{v} newer leader epoch");
            let mut same = request.clone();
            same.topics[0].partitions[0].current_leader_epoch = 0;
            let response = call(&mut conn, &same, v).await;
            assert_eq!(
                response.responses[0].partitions[0].error_code, 0,
                "Fetch v{v}"
            );
        }
        // ...and a fetcher claiming more of the last epoch than the log has is told where it
        // diverges, with no records.
        if v >= 12 {
            let mut ahead = request.clone();
            ahead.topics[0].partitions[0].last_fetched_epoch = 0;
            ahead.topics[0].partitions[0].fetch_offset = 1_000_000;
            let response = call(&mut conn, &ahead, v).await;
            let p = &response.responses[0].partitions[0];
            assert_eq!(p.error_code, 0, "Fetch v{v} diverging");
            assert_eq!(p.diverging_epoch.epoch, 0, "Fetch v{v} diverging");
            assert!(p.diverging_epoch.end_offset > 0, "Fetch v{v} diverging");
            assert_eq!(p.records.as_deref(), Some(&b""[..]), "Fetch v{v} diverging");
            let mut unknown_epoch = ahead.clone();
            unknown_epoch.topics[0].partitions[0].last_fetched_epoch = 3;
            let response = call(&mut conn, &unknown_epoch, v).await;
            assert_eq!(
                response.responses[0].partitions[0].error_code, 1,
                "Fetch v{v}"
            );
        }
    }
    for v in versions(&conn, ApiKey::OffsetForLeaderEpoch) {
        use kafka_protocol::messages::offset_for_leader_epoch_request::{
            OffsetForLeaderPartition, OffsetForLeaderTopic,
        };
        let ask = |partition: i32, current: i32, epoch: i32| {
            OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![OffsetForLeaderTopic::default()
                    .with_topic(name("t2"))
                    .with_partitions(vec![OffsetForLeaderPartition::default()
                        .with_partition(partition)
                        .with_current_leader_epoch(current)
                        .with_leader_epoch(epoch)])])
        };
        let response = call(&mut conn, &ask(0, 0, 0), v).await;
        let p = &response.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "OffsetForLeaderEpoch v{v}");
        assert_eq!(p.leader_epoch, 0, "OffsetForLeaderEpoch v{v}");
        assert!(p.end_offset > 0, "OffsetForLeaderEpoch v{v}");
        let response = call(&mut conn, &ask(0, -1, 7), v).await;
        let p = &response.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.leader_epoch, p.end_offset),
            (0, -1, -1),
            "v{v} undefined"
        );
        let response = call(&mut conn, &ask(0, 2, 0), v).await;
        assert_eq!(
            response.topics[0].partitions[0].error_code, 75,
            "v{v} unknown epoch"
        );
        let response = call(&mut conn, &ask(99, -1, 0), v).await;
        assert_eq!(
            response.topics[0].partitions[0].error_code, 3,
            "v{v} unknown partition"
        );
    }
    for v in versions(&conn, ApiKey::ListOffsets) {
        for timestamp in [-2, -1, 500] {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name("t2"))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp)])]);
            let response = call(&mut conn, &request, v).await;
            assert_eq!(
                response.topics[0].partitions[0].error_code, 0,
                "ListOffsets v{v}"
            );
        }
    }
    for v in versions(&conn, ApiKey::DeleteRecords) {
        use kafka_protocol::messages::delete_records_request as dr;
        let offset = 1 + v as i64;
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(1000)
            .with_topics(vec![dr::DeleteRecordsTopic::default()
                .with_name(name("t2"))
                .with_partitions(vec![dr::DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(offset)])]);
        let response = call(&mut conn, &request, v).await;
        let p = &response.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.low_watermark),
            (0, offset),
            "DeleteRecords v{v}"
        );
    }
    for v in versions(&conn, ApiKey::InitProducerId) {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let response = call(&mut conn, &request, v).await;
        assert_eq!(response.error_code, 0, "InitProducerId v{v}");
    }
    for v in versions(&conn, ApiKey::FindCoordinator) {
        let mut request = FindCoordinatorRequest::default();
        if v >= 4 {
            request.coordinator_keys = vec![StrBytes::from_static_str("g")];
        } else {
            request.key = StrBytes::from_static_str("g");
        }
        let response = call(&mut conn, &request, v).await;
        let error = if v >= 4 {
            response.coordinators[0].error_code
        } else {
            response.error_code
        };
        assert_eq!(error, 0, "FindCoordinator v{v}: {response:?}");
    }
    groups(&mut conn).await;
    for v in versions(&conn, ApiKey::DescribeConfigs) {
        for (resource_type, resource_name) in [(2i8, "t2"), (4, "1")] {
            let request = DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(StrBytes::from_static_str(resource_name))
                    .with_configuration_keys(None),
            ]);
            let response = call(&mut conn, &request, v).await;
            assert_eq!(response.results[0].error_code, 0, "DescribeConfigs v{v}");
            assert!(!response.results[0].configs.is_empty());
        }
    }
    for v in versions(&conn, ApiKey::AlterConfigs) {
        let request = AlterConfigsRequest::default().with_resources(vec![
            kafka_protocol::messages::alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("t2"))
                .with_configs(vec![
                    kafka_protocol::messages::alter_configs_request::AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("retention.ms"))
                        .with_value(Some(StrBytes::from_static_str("3600000"))),
                ]),
        ]);
        let response = call(&mut conn, &request, v).await;
        assert_eq!(response.responses[0].error_code, 0, "AlterConfigs v{v}");
    }
    for v in versions(&conn, ApiKey::IncrementalAlterConfigs) {
        use kafka_protocol::messages::incremental_alter_configs_request as iac;
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            iac::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("t2"))
                .with_configs(vec![iac::AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from_static_str("7200000")))]),
        ]);
        let response = call(&mut conn, &request, v).await;
        assert_eq!(
            response.responses[0].error_code, 0,
            "IncrementalAlterConfigs v{v}"
        );
    }
    for (i, v) in versions(&conn, ApiKey::CreatePartitions).enumerate() {
        let request =
            CreatePartitionsRequest::default().with_topics(vec![CreatePartitionsTopic::default()
                .with_name(name("t3"))
                .with_count(2 + i as i32)]);
        let response = call(&mut conn, &request, v).await;
        assert_eq!(response.results[0].error_code, 0, "CreatePartitions v{v}");
    }
    for v in versions(&conn, ApiKey::DeleteTopics) {
        let topic = format!("t{}", v + 1);
        let mut request = DeleteTopicsRequest::default();
        if v >= 6 {
            request.topics = vec![DeleteTopicState::default().with_name(Some(name(&topic)))];
        } else {
            request.topic_names = vec![name(&topic)];
        }
        let response = call(&mut conn, &request, v).await;
        assert_eq!(
            response.responses[0].error_code, 0,
            "DeleteTopics v{v} ({topic})"
        );
    }
    for v in versions(&conn, ApiKey::DescribeCluster) {
        for include in [false, true] {
            let request = DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(include);
            let response = call(&mut conn, &request, v).await;
            assert_eq!(response.error_code, 0, "DescribeCluster v{v}");
            assert_eq!(response.brokers.len(), 1, "DescribeCluster v{v}");
            assert_eq!(response.controller_id, response.brokers[0].broker_id);
            assert!(!response.cluster_id.is_empty());
            let expected = if include { 0x1fa0 } else { i32::MIN };
            assert_eq!(response.cluster_authorized_operations, expected);
        }
        if v >= 1 {
            let request = DescribeClusterRequest::default().with_endpoint_type(2);
            let response = call(&mut conn, &request, v).await;
            assert_eq!(response.error_code, 114, "DescribeCluster v{v} controller");
        }
    }
    // No authorizer: SECURITY_DISABLED (54), as Kafka answers without one.
    for v in versions(&conn, ApiKey::DescribeAcls) {
        let response = call(&mut conn, &DescribeAclsRequest::default(), v).await;
        assert_eq!(response.error_code, 54, "DescribeAcls v{v}");
    }
    for v in versions(&conn, ApiKey::CreateAcls) {
        use kafka_protocol::messages::create_acls_request::AclCreation;
        let request = CreateAclsRequest::default().with_creations(vec![AclCreation::default()]);
        let response = call(&mut conn, &request, v).await;
        assert_eq!(response.results[0].error_code, 54, "CreateAcls v{v}");
    }
    for v in versions(&conn, ApiKey::DeleteAcls) {
        use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
        let request = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()]);
        let response = call(&mut conn, &request, v).await;
        assert_eq!(response.filter_results[0].error_code, 54, "DeleteAcls v{v}");
    }
    for v in versions(&conn, ApiKey::ApiVersions) {
        let response = call(&mut conn, &ApiVersionsRequest::default(), v).await;
        assert_eq!(response.error_code, 0, "ApiVersions v{v}");
    }
    transaction_tooling(&mut conn).await;
    transactions_every_version(&mut conn).await;
    features_every_version(&mut conn).await;
    running.broker.shutdown().await.unwrap();
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Joins `group` at JoinGroup version `v` (two steps from v4 on); returns (member, generation).
async fn join(conn: &mut Connection, group: &str, v: i16) -> (String, i32) {
    let mut request = JoinGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(sb("consumer"))
        .with_protocols(vec![
            kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                .with_name(sb("range"))
                .with_metadata(Bytes::from_static(b"subscription")),
        ]);
    let mut response = call(conn, &request, v).await;
    if v >= 4 {
        assert_eq!(
            response.error_code, 79,
            "JoinGroup v{v}: MEMBER_ID_REQUIRED first"
        );
        request.member_id = response.member_id.clone();
        response = call(conn, &request, v).await;
    }
    assert_eq!(response.error_code, 0, "JoinGroup v{v}");
    assert_eq!(response.leader, response.member_id, "JoinGroup v{v}");
    assert_eq!(response.members.len(), 1, "JoinGroup v{v}");
    (response.member_id.to_string(), response.generation_id)
}

/// A one-member Stable group; returns (member, generation).
async fn stable(conn: &mut Connection, group: &str) -> (String, i32) {
    let (member, generation) = join(conn, group, 5).await;
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_generation_id(generation)
        .with_member_id(sb(&member))
        .with_assignments(vec![
            kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(sb(&member))
                .with_assignment(Bytes::from_static(b"assignment")),
        ]);
    let response = call(conn, &request, 3).await;
    assert_eq!(response.error_code, 0);
    (member, generation)
}

async fn groups(conn: &mut Connection) {
    for v in versions(conn, ApiKey::JoinGroup) {
        let (_, generation) = join(conn, &format!("join-{v}"), v).await;
        assert_eq!(generation, 1, "JoinGroup v{v}");
    }
    for v in versions(conn, ApiKey::SyncGroup) {
        let group = format!("sync-{v}");
        let (member, generation) = join(conn, &group, 5).await;
        let mut request = SyncGroupRequest::default()
            .with_group_id(GroupId(sb(&group)))
            .with_generation_id(generation)
            .with_member_id(sb(&member))
            .with_assignments(vec![
                kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(sb(&member))
                    .with_assignment(Bytes::from_static(b"mine")),
            ]);
        if v >= 5 {
            request.protocol_type = Some(sb("consumer"));
            request.protocol_name = Some(sb("range"));
        }
        let response = call(conn, &request, v).await;
        assert_eq!(response.error_code, 0, "SyncGroup v{v}");
        assert_eq!(
            response.assignment,
            Bytes::from_static(b"mine"),
            "SyncGroup v{v}"
        );
    }
    let (member, generation) = stable(conn, "stable").await;
    for v in versions(conn, ApiKey::Heartbeat) {
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(sb("stable")))
            .with_generation_id(generation)
            .with_member_id(sb(&member));
        let response = call(conn, &request, v).await;
        assert_eq!(response.error_code, 0, "Heartbeat v{v}");
    }
    for v in versions(conn, ApiKey::OffsetCommit) {
        use kafka_protocol::messages::offset_commit_request as oc;
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("simple")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![oc::OffsetCommitRequestTopic::default()
                .with_name(name("t2"))
                .with_partitions(vec![oc::OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(v as i64)
                    .with_committed_metadata(Some(sb("meta")))])]);
        let response = call(conn, &request, v).await;
        assert_eq!(
            response.topics[0].partitions[0].error_code, 0,
            "OffsetCommit v{v}"
        );
    }
    for v in versions(conn, ApiKey::OffsetCommit) {
        // A member commit to a group that does not exist: ILLEGAL_GENERATION (22) before v9,
        // GROUP_ID_NOT_FOUND (69) from v9, as Kafka's OffsetMetadataManager answers.
        use kafka_protocol::messages::offset_commit_request as oc;
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("never-joined")))
            .with_generation_id_or_member_epoch(1)
            .with_member_id(sb("m"))
            .with_topics(vec![oc::OffsetCommitRequestTopic::default()
                .with_name(name("t2"))
                .with_partitions(vec![
                    oc::OffsetCommitRequestPartition::default().with_committed_offset(1)
                ])]);
        let response = call(conn, &request, v).await;
        let want = if v >= 9 { 69 } else { 22 };
        assert_eq!(
            response.topics[0].partitions[0].error_code, want,
            "OffsetCommit v{v} to an unknown group"
        );
    }
    let last_commit = *versions(conn, ApiKey::OffsetCommit).end() as i64;
    for v in versions(conn, ApiKey::OffsetFetch) {
        use kafka_protocol::messages::offset_fetch_request as of;
        let mut request = OffsetFetchRequest::default();
        if v >= 8 {
            request.groups = vec![of::OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(sb("simple")))
                .with_topics(Some(vec![of::OffsetFetchRequestTopics::default()
                    .with_name(name("t2"))
                    .with_partition_indexes(vec![0])]))];
            let response = call(conn, &request, v).await;
            let group = &response.groups[0];
            assert_eq!(group.error_code, 0, "OffsetFetch v{v}");
            assert_eq!(group.topics[0].partitions[0].committed_offset, last_commit);
        } else {
            request.group_id = GroupId(sb("simple"));
            request.topics = Some(vec![of::OffsetFetchRequestTopic::default()
                .with_name(name("t2"))
                .with_partition_indexes(vec![0])]);
            let response = call(conn, &request, v).await;
            assert_eq!(response.error_code, 0, "OffsetFetch v{v}");
            let p = &response.topics[0].partitions[0];
            assert_eq!(
                (p.error_code, p.committed_offset),
                (0, last_commit),
                "OffsetFetch v{v}"
            );
        }
    }
    for v in versions(conn, ApiKey::DescribeGroups) {
        let request = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(sb("stable")), GroupId(sb("missing"))]);
        let response = call(conn, &request, v).await;
        let g = &response.groups[0];
        assert_eq!(
            (g.error_code, g.group_state.as_str()),
            (0, "Stable"),
            "DescribeGroups v{v}"
        );
        assert_eq!(g.protocol_data.as_str(), "range");
        assert_eq!(
            g.members[0].member_assignment,
            Bytes::from_static(b"assignment")
        );
        let missing = &response.groups[1];
        assert_eq!(missing.group_state.as_str(), "Dead");
        // KIP-1043: v6 names the missing group as such; older versions answer Dead, no error.
        if v >= 6 {
            assert_eq!(missing.error_code, 69, "DescribeGroups v{v}");
            assert_eq!(
                missing.error_message.as_deref(),
                Some("Group missing not found.")
            );
        } else {
            assert_eq!(missing.error_code, 0, "DescribeGroups v{v}");
        }
    }
    for v in versions(conn, ApiKey::ListGroups) {
        let response = call(conn, &ListGroupsRequest::default(), v).await;
        assert_eq!(response.error_code, 0, "ListGroups v{v}");
        let listed = response
            .groups
            .iter()
            .find(|g| g.group_id.as_str() == "stable")
            .expect("listed");
        assert_eq!(listed.protocol_type.as_str(), "consumer");
        if v >= 4 {
            assert_eq!(listed.group_state.as_str(), "Stable");
        }
    }
    for v in versions(conn, ApiKey::LeaveGroup) {
        let group = format!("leave-{v}");
        let (member, _) = stable(conn, &group).await;
        let mut request = LeaveGroupRequest::default().with_group_id(GroupId(sb(&group)));
        if v >= 3 {
            request.members = vec![
                kafka_protocol::messages::leave_group_request::MemberIdentity::default()
                    .with_member_id(sb(&member)),
            ];
        } else {
            request.member_id = sb(&member);
        }
        let response = call(conn, &request, v).await;
        assert_eq!(response.error_code, 0, "LeaveGroup v{v}");
        if v >= 3 {
            assert_eq!(response.members[0].error_code, 0, "LeaveGroup v{v}");
        }
    }
    for v in versions(conn, ApiKey::OffsetDelete) {
        use kafka_protocol::messages::offset_delete_request as od;
        let request = OffsetDeleteRequest::default()
            .with_group_id(GroupId(sb("simple")))
            .with_topics(vec![od::OffsetDeleteRequestTopic::default()
                .with_name(name("t2"))
                .with_partitions(vec![
                    od::OffsetDeleteRequestPartition::default().with_partition_index(0)
                ])]);
        let response = call(conn, &request, v).await;
        assert_eq!(response.error_code, 0, "OffsetDelete v{v}");
        assert_eq!(response.topics[0].partitions[0].error_code, 0);
    }
    for v in versions(conn, ApiKey::DeleteGroups) {
        let request = DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(sb(&format!("leave-{v}")))]);
        let response = call(conn, &request, v).await;
        assert_eq!(response.results[0].error_code, 0, "DeleteGroups v{v}");
    }
    // KIP-848: a join, a describe of it (and of a classic group: not found), a leave.
    for v in versions(conn, ApiKey::ConsumerGroupHeartbeat) {
        let group = format!("kip848-{v}");
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb(&group)))
            .with_member_id(sb(if v >= 1 { "client-made-id" } else { "" }))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![name("t2")]))
            .with_topic_partitions(Some(vec![]));
        let response = call(conn, &request, v).await;
        assert_eq!(
            response.error_code, 0,
            "ConsumerGroupHeartbeat v{v}: {:?}",
            response.error_message
        );
        assert_eq!(response.member_epoch, 1, "ConsumerGroupHeartbeat v{v}");
        let assigned: usize = response
            .assignment
            .as_ref()
            .map(|a| a.topic_partitions.iter().map(|t| t.partitions.len()).sum())
            .unwrap_or(0);
        assert!(
            assigned > 0,
            "ConsumerGroupHeartbeat v{v}: nothing assigned"
        );
        let member = response.member_id.clone().expect("a member id");
        for dv in versions(conn, ApiKey::ConsumerGroupDescribe) {
            let request = ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(sb(&group)), GroupId(sb("simple"))]);
            let described = call(conn, &request, dv).await;
            assert_eq!(
                described.groups[0].error_code, 0,
                "ConsumerGroupDescribe v{dv}"
            );
            assert_eq!(described.groups[0].members.len(), 1);
            assert_eq!(&*described.groups[0].members[0].member_id, &*member);
            assert_eq!(
                described.groups[1].error_code, 69,
                "a classic group is not found"
            );
        }
        let leave = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb(&group)))
            .with_member_id(member)
            .with_member_epoch(-1);
        let left = call(conn, &leave, v).await;
        assert_eq!((left.error_code, left.member_epoch), (0, -1), "leave v{v}");
    }
}

/// Retries `ask` while it answers COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
/// NOT_COORDINATOR or CONCURRENT_TRANSACTIONS (the transaction topic is being made or its
/// partition not yet taken by the coordinator, a transition is in flight).
async fn until_settled<T>(mut ask: impl AsyncFnMut() -> (i16, T)) -> T {
    for _ in 0..200 {
        let (code, answer) = ask().await;
        if ![14, 15, 16, 51].contains(&code) {
            assert_eq!(code, 0);
            return answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the coordinator never settled");
}

/// KIP-664 at every version: an open transaction is Ongoing in DescribeTransactions and
/// ListTransactions (filtered by state, producer id and, v1+, duration) and its partition's
/// DescribeProducers shows where it started; once committed it is CompleteCommit and the
/// partition holds nothing open.
async fn transaction_tooling(conn: &mut Connection) {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    let id = "tooling";
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("txn"))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    assert_eq!(call(conn, &create, 5).await.topics[0].error_code, 0);
    let txn_id = || TransactionalId(sb(id));
    until_settled(async || {
        let request = FindCoordinatorRequest::default()
            .with_key(sb(id))
            .with_key_type(1);
        (call(conn, &request, 3).await.error_code, ())
    })
    .await;
    let (pid, epoch) = until_settled(async || {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id()))
            .with_transaction_timeout_ms(60_000);
        let r = call(conn, &request, 1).await;
        (r.error_code, (r.producer_id, r.producer_epoch))
    })
    .await;
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id())
        .with_v3_and_below_producer_id(pid)
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(name("txn"))
            .with_partitions(vec![0])]);
    let added = call(conn, &add, 1).await;
    assert_eq!(
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    let mut b = BatchBuilder::new(1_000);
    b.push(Some(b"k"), Some(b"in a transaction"), 1_000);
    let mut records = b.finish(pid.0, epoch, 0);
    records[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    let crc = weir::log::batch::compute_crc(&records);
    records[17..21].copy_from_slice(&crc.to_be_bytes());
    let produce = ProduceRequest::default()
        .with_transactional_id(Some(txn_id()))
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name("txn"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(records)))])]);
    let produced = call(conn, &produce, 9).await;
    let partition = &produced.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, 0, "transactional produce");
    let start = partition.base_offset;

    let describe = async |conn: &mut Connection, v| {
        let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id()]);
        let mut r = call(conn, &request, v).await;
        r.transaction_states.remove(0)
    };
    for v in versions(conn, ApiKey::DescribeTransactions) {
        let d = describe(conn, v).await;
        assert_eq!(d.error_code, 0, "DescribeTransactions v{v}");
        assert_eq!(d.transaction_state.as_str(), "Ongoing");
        assert_eq!((d.producer_id, d.producer_epoch), (pid, epoch));
        assert_eq!(d.transaction_timeout_ms, 60_000);
        assert!(d.transaction_start_time_ms > 0);
        assert_eq!(d.topics.len(), 1);
        assert_eq!(
            (d.topics[0].topic.as_str(), &d.topics[0].partitions[..]),
            ("txn", &[0][..])
        );
        let request = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(sb("never-seen"))]);
        // Its `__transaction_state` partition may still be loading (NOT_COORDINATOR until
        // the coordinator's timer loop takes it).
        let mut code = 16;
        for _ in 0..200 {
            code = call(conn, &request, v).await.transaction_states[0].error_code;
            if code != 16 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        assert_eq!(code, 105, "TRANSACTIONAL_ID_NOT_FOUND");
    }
    for v in versions(conn, ApiKey::ListTransactions) {
        let list = async |conn: &mut Connection, request: ListTransactionsRequest| {
            let r = call(conn, &request, v).await;
            assert_eq!(r.error_code, 0, "ListTransactions v{v}");
            let ids: Vec<String> = r
                .transaction_states
                .iter()
                .map(|t| t.transactional_id.to_string())
                .collect();
            (ids, r.unknown_state_filters)
        };
        let all = ListTransactionsRequest::default().with_duration_filter(-1);
        assert_eq!(list(conn, all.clone()).await.0, vec![id.to_string()]);
        let ongoing = all
            .clone()
            .with_state_filters(vec![sb("Ongoing"), sb("Bogus")]);
        let (ids, unknown) = list(conn, ongoing).await;
        assert_eq!((ids, unknown), (vec![id.to_string()], vec![sb("Bogus")]));
        let empty = all.clone().with_state_filters(vec![sb("CompleteCommit")]);
        assert!(list(conn, empty).await.0.is_empty());
        let other_pid = all
            .clone()
            .with_producer_id_filters(vec![ProducerId(pid.0 + 1)]);
        assert!(list(conn, other_pid).await.0.is_empty());
        if v >= 1 {
            let an_hour = all.clone().with_duration_filter(3_600_000);
            assert!(
                list(conn, an_hour).await.0.is_empty(),
                "duration filter v{v}"
            );
        }
        if v >= 2 {
            let pattern = all
                .clone()
                .with_transactional_id_pattern(Some(sb("tool.*")));
            assert_eq!(list(conn, pattern).await.0, vec![id.to_string()]);
            let other = all.clone().with_transactional_id_pattern(Some(sb("tool")));
            assert!(
                list(conn, other).await.0.is_empty(),
                "a pattern matches whole ids"
            );
        }
    }
    let producers = async |conn: &mut Connection, v| {
        let request = DescribeProducersRequest::default()
            .with_topics(vec![TopicRequest::default()
                .with_name(name("txn"))
                .with_partition_indexes(vec![0, 7])]);
        let r = call(conn, &request, v).await;
        let partitions = &r.topics[0].partitions;
        assert_eq!(partitions[1].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(partitions[0].error_code, 0);
        partitions[0]
            .active_producers
            .iter()
            .find(|p| p.producer_id == pid)
            .expect("the transactional producer is listed")
            .clone()
    };
    for v in versions(conn, ApiKey::DescribeProducers) {
        let p = producers(conn, v).await;
        assert_eq!((p.producer_epoch, p.last_sequence), (epoch as i32, 0));
        assert_eq!(p.current_txn_start_offset, start, "DescribeProducers v{v}");
    }
    let end = EndTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(pid)
        .with_producer_epoch(epoch)
        .with_committed(true);
    assert_eq!(call(conn, &end, 1).await.error_code, 0);
    // The markers are written after EndTxn answers: CompleteCommit once they are.
    until_settled(async || {
        let d = describe(conn, 0).await;
        let done = d.transaction_state.as_str() == "CompleteCommit";
        (if done { 0 } else { 51 }, ())
    })
    .await;
    assert!(describe(conn, 0).await.topics.is_empty());
    let p = producers(conn, 0).await;
    assert_eq!(p.current_txn_start_offset, -1);
    assert!(p.coordinator_epoch >= 0);
}

/// A transactional batch of one record at `seq`.
fn txn_records(pid: ProducerId, epoch: i16, seq: i32) -> Bytes {
    let mut b = BatchBuilder::new(1_000);
    b.push(Some(b"k"), Some(b"v"), 1_000);
    let mut records = b.finish(pid.0, epoch, seq);
    records[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    let crc = weir::log::batch::compute_crc(&records);
    records[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(records)
}

async fn init_txn(conn: &mut Connection, id: &str) -> (ProducerId, i16) {
    until_settled(async || {
        let request = FindCoordinatorRequest::default()
            .with_key(sb(id))
            .with_key_type(1);
        (call(conn, &request, 3).await.error_code, ())
    })
    .await;
    until_settled(async || {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(sb(id))))
            .with_transaction_timeout_ms(60_000);
        let r = call(conn, &request, 3).await;
        (r.error_code, (r.producer_id, r.producer_epoch))
    })
    .await
}

/// Produce of one transactional record to txn-ev/0 at Produce `v`: its error code.
async fn txn_produce(conn: &mut Connection, id: &str, pid: ProducerId, epoch: i16, v: i16) -> i16 {
    let produce = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(sb(id))))
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name("txn-ev"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(txn_records(pid, epoch, 0)))])]);
    call(conn, &produce, v).await.responses[0].partition_responses[0].error_code
}

/// EndTxn, TxnOffsetCommit and AddPartitionsToTxn at every version: v1's explicit adds before
/// EndTxn < 5 and TxnOffsetCommit < 5; transactions v2's implicit adds (Produce 12,
/// TxnOffsetCommit 5) and EndTxn 5's bumped epoch; the brokers' AddPartitionsToTxn 4 (verify)
/// and 5 (add).
async fn transactions_every_version(conn: &mut Connection) {
    use kafka_protocol::messages::add_partitions_to_txn_request::{
        AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
    };
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("txn-ev"))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    assert_eq!(call(conn, &create, 5).await.topics[0].error_code, 0);
    let add_v1 = |id: &str, pid, epoch| {
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(sb(id)))
            .with_v3_and_below_producer_id(pid)
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(name("txn-ev"))
                .with_partitions(vec![0])])
    };
    let add_versions = versions(conn, ApiKey::AddPartitionsToTxn);
    assert_eq!(*add_versions.end(), 5);
    for v in versions(conn, ApiKey::EndTxn) {
        let id = format!("end-v{v}");
        let (pid, epoch) = init_txn(conn, &id).await;
        if v >= 5 {
            assert_eq!(
                txn_produce(conn, &id, pid, epoch, 12).await,
                0,
                "Produce v12"
            );
        } else {
            let added = call(conn, &add_v1(&id, pid, epoch), v.min(3)).await;
            let code =
                added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
            assert_eq!(code, 0, "AddPartitionsToTxn v{}", v.min(3));
            assert_eq!(txn_produce(conn, &id, pid, epoch, 11).await, 0);
        }
        let end = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(sb(&id)))
            .with_producer_id(pid)
            .with_producer_epoch(epoch)
            .with_committed(true);
        let r = call(conn, &end, v).await;
        assert_eq!(r.error_code, 0, "EndTxn v{v}");
        if v >= 5 {
            assert_eq!(
                (r.producer_id, r.producer_epoch),
                (pid, epoch + 1),
                "EndTxn v5 bumps"
            );
        }
    }
    for v in versions(conn, ApiKey::TxnOffsetCommit) {
        let id = format!("offsets-v{v}");
        let (pid, epoch) = init_txn(conn, &id).await;
        let group = format!("g-txn-{v}");
        if v < 5 {
            let add = AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(sb(&id)))
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(sb(&group)));
            let code = until_settled(async || (call(conn, &add, 0).await.error_code, 0)).await;
            assert_eq!(code, 0);
        }
        let commit = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(sb(&id)))
            .with_group_id(GroupId(sb(&group)))
            .with_producer_id(pid)
            .with_producer_epoch(epoch)
            .with_generation_id(-1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(name("txn-ev"))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)])]);
        let code = until_settled(async || {
            let r = call(conn, &commit, v).await;
            (r.topics[0].partitions[0].error_code, 0)
        })
        .await;
        assert_eq!(code, 0, "TxnOffsetCommit v{v}");
        let end = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(sb(&id)))
            .with_producer_id(pid)
            .with_producer_epoch(epoch)
            .with_committed(true);
        let end_version = if v >= 5 { 5 } else { 3 };
        assert_eq!(call(conn, &end, end_version).await.error_code, 0);
    }
    // The brokers' form: verify-only (4) and add (5), CLUSTER_ACTION (no authorizer here).
    let id = "brokers-form";
    let (pid, epoch) = init_txn(conn, id).await;
    let batched = |verify_only: bool| {
        AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(sb(id)))
                .with_producer_id(pid)
                .with_producer_epoch(epoch)
                .with_verify_only(verify_only)
                .with_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(name("txn-ev"))
                    .with_partitions(vec![0])]),
        ])
    };
    let code = |r: &AddPartitionsToTxnResponse| {
        r.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code
    };
    let not_in = call(conn, &batched(true), 4).await;
    assert_eq!(
        code(&not_in),
        120,
        "TRANSACTION_ABORTABLE: not in the transaction"
    );
    let added = call(conn, &batched(false), 5).await;
    assert_eq!(code(&added), 0, "AddPartitionsToTxn v5 adds");
    let verified = call(conn, &batched(true), 4).await;
    assert_eq!(code(&verified), 0, "AddPartitionsToTxn v4 verifies");
}

/// UpdateFeatures at every version (validate only: the cluster keeps its levels), and
/// ApiVersions v4's supported `transaction.version` 0..=2.
async fn features_every_version(conn: &mut Connection) {
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    let v4 = ApiVersionsRequest::default()
        .with_client_software_name(sb("every-version"))
        .with_client_software_version(sb("1"));
    let r = call(conn, &v4, 4).await;
    let tv = r
        .supported_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .expect("transaction.version supported");
    assert_eq!((tv.min_version, tv.max_version), (0, 2));
    assert_eq!(
        r.supported_features.len(),
        1,
        "no other feature is advertised"
    );
    assert_eq!(
        r.finalized_features_epoch, -1,
        "nothing finalized: no epoch"
    );
    for v in versions(conn, ApiKey::UpdateFeatures) {
        let update = |feature: &str, level| {
            UpdateFeaturesRequest::default()
                .with_timeout_ms(5000)
                .with_validate_only(v >= 1)
                .with_feature_updates(vec![FeatureUpdateKey::default()
                    .with_feature(sb(feature))
                    .with_max_version_level(level)
                    .with_upgrade_type(1)])
        };
        if v >= 1 {
            let ok = call(conn, &update("transaction.version", 2), v).await;
            assert_eq!(ok.error_code, 0, "UpdateFeatures v{v}");
        }
        let refused = call(conn, &update("metadata.version", 20), v).await;
        assert_eq!(refused.error_code, 95, "INVALID_UPDATE_VERSION v{v}");
        assert_eq!(refused.results.len(), if v >= 2 { 0 } else { 1 });
    }
}
