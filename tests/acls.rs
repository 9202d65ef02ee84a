//! The ACL authorizer end to end on a single broker over `MemDisk`: ACLs created through
//! CreateAcls are enforced on Produce, Fetch and Metadata (`allow.everyone.if.no.acl.found`
//! off, so only what an ACL allows passes), removed by DeleteAcls, and survive restarts
//! (they are metadata records). Also SCRAM credentials through a restart, and the
//! SECURITY_DISABLED answer without an authorizer.

mod common;

use common::memdisk_io as io;
use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
    DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use weir::broker::{Broker, RunningBroker};
use weir::client::{Client, ClientError};
use weir::config::ServerConfig;
use weir::io::memdisk::MemDisk;
use weir::io::Io;
use weir::log::batch::BatchBuilder;

const STANDARD: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
const ANONYMOUS: &str = "User:ANONYMOUS";

// Kafka's codes.
const TOPIC: i8 = 2;
const CLUSTER: i8 = 4;
const ANY: i8 = 1;
const LITERAL: i8 = 3;
const ALL: i8 = 2;
const WRITE: i8 = 4;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

async fn start(io: &Io, authorizer: &str, allow_everyone: bool) -> RunningBroker {
    let props = BTreeMap::from([
        (
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        ),
        ("log.dirs".to_string(), "/data".to_string()),
        ("authorizer.class.name".to_string(), authorizer.to_string()),
        (
            "allow.everyone.if.no.acl.found".to_string(),
            allow_everyone.to_string(),
        ),
        ("super.users".to_string(), "User:admin".to_string()),
    ]);
    let config = ServerConfig::from_properties(&props).unwrap().0;
    Broker::start(config, io.clone()).await.unwrap()
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn acl(resource_type: i8, name: &str, operation: i8, permission: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_resource_pattern_type(LITERAL)
        .with_principal(s(ANONYMOUS))
        .with_host(s("*"))
        .with_operation(operation)
        .with_permission_type(permission)
}

fn batch(value: &str) -> Bytes {
    let mut b = BatchBuilder::new(1_000);
    b.push(None, Some(value.as_bytes()), 1_000);
    Bytes::from(b.finish(-1, -1, -1))
}

async fn create_acls(client: &mut Client, creations: Vec<AclCreation>) -> Vec<i16> {
    let request = CreateAclsRequest::default().with_creations(creations);
    let response = client.connection().call(&request, 3).await.unwrap();
    response.results.iter().map(|r| r.error_code).collect()
}

/// (resource name, operation, permission) of every ACL, sorted.
async fn describe_acls(client: &mut Client) -> (i16, Vec<(String, i8, i8)>) {
    let request = DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(ANY)
        .with_pattern_type_filter(ANY)
        .with_operation(ANY)
        .with_permission_type(ANY);
    let response = client.connection().call(&request, 3).await.unwrap();
    let mut acls: Vec<(String, i8, i8)> = response
        .resources
        .iter()
        .flat_map(|r| {
            r.acls
                .iter()
                .map(|a| (r.resource_name.to_string(), a.operation, a.permission_type))
        })
        .collect();
    acls.sort();
    (response.error_code, acls)
}

async fn produce_error(client: &mut Client, topic: &str) -> Option<ResponseError> {
    match client.produce(topic, 0, batch("v"), -1).await {
        Ok(_) => None,
        Err(ClientError::Kafka(code, _)) => Some(code),
        Err(e) => panic!("produce failed otherwise: {e}"),
    }
}

#[tokio::test]
async fn a_deny_acl_blocks_produce_until_deleted_and_acls_survive_restarts() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    // Bootstrapping: with allow.everyone on, the first ACLs can be written by anyone.
    let running = start(&io, STANDARD, true).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client.set_timeout(Duration::from_secs(5));
    client
        .create_topic("orders", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    let codes = create_acls(
        &mut client,
        vec![
            acl(CLUSTER, "kafka-cluster", ALL, ALLOW),
            acl(TOPIC, "*", ALL, ALLOW),
            acl(TOPIC, "orders", WRITE, DENY),
            // Refused as Kafka refuses it: a CLUSTER resource has one name.
            acl(CLUSTER, "other", ALL, ALLOW),
        ],
    )
    .await;
    assert_eq!(
        codes,
        vec![0, 0, 0, ResponseError::InvalidRequest.code()],
        "the last binding is invalid"
    );
    let (_, acls) = describe_acls(&mut client).await;
    assert_eq!(acls.len(), 3, "{acls:?}");
    running.broker.shutdown().await.unwrap();

    // allow.everyone off: only what the ACLs allow passes; DENY beats the wildcard ALLOW.
    let running = start(&io, STANDARD, false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client.set_timeout(Duration::from_secs(5));
    let (code, acls) = describe_acls(&mut client).await;
    assert_eq!(code, 0);
    assert_eq!(
        acls,
        vec![
            ("*".to_string(), ALL, ALLOW),
            ("kafka-cluster".to_string(), ALL, ALLOW),
            ("orders".to_string(), WRITE, DENY),
        ],
        "the ACLs came back after a restart"
    );
    assert_eq!(
        produce_error(&mut client, "orders").await,
        Some(ResponseError::TopicAuthorizationFailed)
    );
    // READ is still allowed by the wildcard: the fetch works (an empty log).
    client
        .fetch("orders", 0, 0, 1 << 20, Duration::ZERO)
        .await
        .expect("READ is allowed");

    let request = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(TOPIC)
        .with_resource_name_filter(Some(s("orders")))
        .with_pattern_type_filter(LITERAL)
        .with_operation(ANY)
        .with_permission_type(DENY)]);
    let response = client.connection().call(&request, 3).await.unwrap();
    let result = &response.filter_results[0];
    assert_eq!(result.error_code, 0);
    assert_eq!(result.matching_acls.len(), 1);
    assert_eq!(result.matching_acls[0].operation, WRITE);
    assert_eq!(produce_error(&mut client, "orders").await, None);
    running.broker.shutdown().await.unwrap();

    // A crash (no clean close) keeps the deletion too; removing the topic wildcard leaves
    // the topic without any ACL, which allow.everyone=false denies.
    let running = start(&io, STANDARD, false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    client.set_timeout(Duration::from_secs(5));
    let (_, acls) = describe_acls(&mut client).await;
    assert_eq!(acls.len(), 2);
    let request = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(TOPIC)
        .with_resource_name_filter(Some(s("*")))
        .with_pattern_type_filter(LITERAL)
        .with_operation(ANY)
        .with_permission_type(ANY)]);
    let response = client.connection().call(&request, 3).await.unwrap();
    assert_eq!(response.filter_results[0].matching_acls.len(), 1);
    assert_eq!(
        produce_error(&mut client, "orders").await,
        Some(ResponseError::TopicAuthorizationFailed)
    );
    // Metadata of every topic leaves out what the caller may not describe.
    let topics = client.metadata(None).await.unwrap();
    assert!(topics.iter().all(|t| t.name != "orders"), "{topics:?}");
    let kafka_code = |r: Result<_, ClientError>| match r {
        Err(ClientError::Kafka(code, _)) => Some(code),
        Ok(_) => None,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        kafka_code(client.describe_topic_configs("orders").await.map(|_| ())),
        Some(ResponseError::TopicAuthorizationFailed)
    );
    // No ACL names any group: FindCoordinator (DESCRIBE on the group) is denied.
    assert_eq!(
        kafka_code(client.find_coordinator("g").await),
        Some(ResponseError::GroupAuthorizationFailed)
    );
    // CREATE on the cluster (ALL) still creates topics no ACL names.
    client
        .create_topic("fresh", 1, 1, &BTreeMap::new())
        .await
        .expect("ALL on the cluster implies CREATE");
    running.broker.halt();
    disk.process_crash();
    let running = start(&io, STANDARD, false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let (_, acls) = describe_acls(&mut client).await;
    assert_eq!(acls, vec![("kafka-cluster".to_string(), ALL, ALLOW)]);
    running.broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_an_authorizer_the_acl_apis_are_disabled() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let running = start(&io, "", false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let (code, _) = describe_acls(&mut client).await;
    assert_eq!(code, ResponseError::SecurityDisabled.code());
    let codes = create_acls(&mut client, vec![acl(TOPIC, "t", WRITE, DENY)]).await;
    assert_eq!(codes, vec![ResponseError::SecurityDisabled.code()]);
    // Nothing is enforced: allow.everyone=false means nothing without an authorizer.
    client
        .create_topic("t", 1, 1, &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(produce_error(&mut client, "t").await, None);
    running.broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn scram_credentials_are_stored_and_described_by_mechanism_and_iterations() {
    let disk = MemDisk::new(11);
    let io = io(&disk);
    let running = start(&io, "", false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let upsert = |user: &str, mechanism: i8, iterations: i32| {
        ScramCredentialUpsertion::default()
            .with_name(s(user))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(Bytes::from_static(b"salt"))
            .with_salted_password(Bytes::from(vec![7u8; 32]))
    };
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        upsert("alice", 1, 8192),
        upsert("bob", 2, 100),
        upsert("carol", 9, 8192),
    ]);
    let response = client.connection().call(&request, 0).await.unwrap();
    let code = |user: &str| {
        response
            .results
            .iter()
            .find(|r| r.user.as_str() == user)
            .map(|r| r.error_code)
    };
    assert_eq!(code("alice"), Some(0));
    assert_eq!(
        code("bob"),
        Some(ResponseError::UnacceptableCredential.code())
    );
    assert_eq!(
        code("carol"),
        Some(ResponseError::UnsupportedSaslMechanism.code())
    );
    running.broker.shutdown().await.unwrap();

    let running = start(&io, "", false).await;
    let mut client = Client::connect(&io, running.local_addr).await.unwrap();
    let request = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
        UserName::default().with_name(s("alice")),
        UserName::default().with_name(s("nobody")),
    ]));
    let response = client.connection().call(&request, 0).await.unwrap();
    assert_eq!(response.error_code, 0);
    let alice = &response.results[0];
    assert_eq!(alice.user.as_str(), "alice");
    assert_eq!(alice.error_code, 0);
    assert_eq!(alice.credential_infos.len(), 1);
    assert_eq!(alice.credential_infos[0].mechanism, 1);
    assert_eq!(alice.credential_infos[0].iterations, 8192);
    let nobody = &response.results[1];
    assert_eq!(nobody.error_code, ResponseError::ResourceNotFound.code());
    running.broker.shutdown().await.unwrap();
}
