//! Metadata (brokers, topics, partitions, leaders) and DescribeCluster, answered from the
//! image: the live (unfenced) brokers with their endpoint for the listener the client uses,
//! and each partition's registration (leader, replicas, ISR, leader epoch, offline replicas).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::server::RequestContext;
use super::Broker;
use crate::controller::{validate_topic_name, MetadataImage, TopicMeta, NO_LEADER};

/// The listener clients reach this broker on (Weir binds one client listener).
pub(super) fn client_listener(broker: &Broker) -> String {
    broker
        .config
        .broker_endpoints()
        .first()
        .map(|e| e.listener_name.clone())
        .unwrap_or_default()
}

/// Live brokers with an endpoint on `listener`: (id, host, port, rack, fenced), by id. With
/// `fenced`, fenced brokers too (DescribeCluster's `include_fenced_brokers`).
fn brokers(
    image: &MetadataImage,
    listener: &str,
    fenced: bool,
) -> Vec<(i32, String, u16, Option<String>, bool)> {
    image
        .brokers()
        .filter(|b| fenced || !b.fenced)
        .filter_map(|b| {
            let e = b.endpoint(listener)?;
            Some((b.id, e.host.clone(), e.port, b.rack.clone(), b.fenced))
        })
        .collect()
}

pub(super) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: MetadataRequest,
) -> MetadataResponse {
    let node = BrokerId(broker.config.node_id);
    // v0 asks for all topics with an empty list; later versions with null.
    let wanted: Option<Vec<(Option<String>, Uuid)>> = match req.topics {
        None => None,
        Some(list) if list.is_empty() && ctx.version == 0 => None,
        Some(list) => Some(
            list.into_iter()
                .map(|t| (t.name.map(|n| n.to_string()), t.topic_id))
                .collect(),
        ),
    };
    let auto_create = broker.config.auto_create_topics_enable
        && (ctx.version < 4 || req.allow_auto_topic_creation);
    // Topics this request asked the controller to create: until the image shows them they are
    // LEADER_NOT_AVAILABLE, as Kafka answers for a topic its auto-creation forwarded. An
    // UNKNOWN_TOPIC_OR_PARTITION there makes librdkafka mark the topic unknown and queue
    // produces that Kafka would refuse or route (0048_partitioner on a cluster).
    let mut attempted = std::collections::BTreeSet::new();
    if let (true, Some(wanted)) = (auto_create, &wanted) {
        let image = broker.image();
        let missing: Vec<String> = wanted
            .iter()
            .filter_map(|(name, _)| name.clone())
            .filter(|n| image.topic(n).is_none() && validate_topic_name(n).is_ok())
            // The offsets topic is made by the coordinator, with its own partition count.
            .filter(|n| n != crate::group::OFFSETS_TOPIC)
            .collect();
        for (name, result) in broker.auto_create(&missing).await {
            attempted.insert(name.clone());
            match result {
                Ok(()) => tracing::info!(topic = %name, "auto-created topic"),
                Err(e) => tracing::debug!(topic = %name, error = %e, "auto-create failed"),
            }
        }
    }
    let image = broker.image();
    let topics = match wanted {
        None => image
            .topics()
            .map(|t| topic_entry(&image, ctx, t))
            .collect(),
        Some(wanted) => wanted
            .into_iter()
            .map(|(name, id)| {
                let found = match &name {
                    Some(n) => image.topic(n),
                    None => image.topic_by_id(id),
                };
                match found {
                    Some(t) => topic_entry(&image, ctx, t),
                    None => {
                        let error = match &name {
                            Some(n) if validate_topic_name(n).is_err() => {
                                ResponseError::InvalidTopicException
                            }
                            Some(n) if attempted.contains(n) => ResponseError::LeaderNotAvailable,
                            Some(_) => ResponseError::UnknownTopicOrPartition,
                            None => ResponseError::UnknownTopicId,
                        };
                        MetadataResponseTopic::default()
                            .with_error_code(error.code())
                            .with_name(name.map(|n| TopicName(StrBytes::from_string(n))))
                            .with_topic_id(if ctx.version >= 10 { id } else { Uuid::nil() })
                    }
                }
            })
            .collect(),
    };
    let listed = brokers(&image, &client_listener(broker), false)
        .into_iter()
        .map(|(id, host, port, rack, _)| {
            let mut b = MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_string(host))
                .with_port(port as i32);
            if ctx.version >= 1 {
                b.rack = rack.map(StrBytes::from_string);
            }
            b
        })
        .collect();
    let mut response = MetadataResponse::default()
        .with_brokers(listed)
        .with_topics(topics);
    if ctx.version >= 1 {
        response.controller_id = node;
    }
    if ctx.version >= 2 {
        response.cluster_id = Some(StrBytes::from_string(broker.cluster_id.clone()));
    }
    // Without an authorizer Kafka grants everything a resource type supports, and reports it
    // only when asked; otherwise the field keeps the schema's "not requested" default.
    if (8..=10).contains(&ctx.version) && req.include_cluster_authorized_operations {
        response.cluster_authorized_operations = CLUSTER_OPERATIONS;
    }
    if ctx.version >= 8 && req.include_topic_authorized_operations {
        for topic in &mut response.topics {
            // Kafka leaves topics asked for by an unknown id out (they have no name).
            if topic.name.is_some() {
                topic.topic_authorized_operations = TOPIC_OPERATIONS;
            }
        }
    }
    response
}

/// ACL operation codes (Kafka's `AclOperation`), as bits of an authorized-operations field.
const READ: i32 = 3;
const WRITE: i32 = 4;
const CREATE: i32 = 5;
const DELETE: i32 = 6;
const ALTER: i32 = 7;
const DESCRIBE: i32 = 8;
const CLUSTER_ACTION: i32 = 9;
const DESCRIBE_CONFIGS: i32 = 10;
const ALTER_CONFIGS: i32 = 11;
const IDEMPOTENT_WRITE: i32 = 12;

/// Every operation Kafka supports on a topic, all allowed (there is no authorizer).
pub(super) const TOPIC_OPERATIONS: i32 = 1 << READ
    | 1 << WRITE
    | 1 << CREATE
    | 1 << DELETE
    | 1 << ALTER
    | 1 << DESCRIBE
    | 1 << DESCRIBE_CONFIGS
    | 1 << ALTER_CONFIGS;

/// Every operation Kafka supports on the cluster, all allowed.
pub(super) const CLUSTER_OPERATIONS: i32 = 1 << CREATE
    | 1 << ALTER
    | 1 << DESCRIBE
    | 1 << CLUSTER_ACTION
    | 1 << DESCRIBE_CONFIGS
    | 1 << ALTER_CONFIGS
    | 1 << IDEMPOTENT_WRITE;

/// The schema default of authorized-operations fields: "not requested".
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Kafka's `EndpointType`: DescribeCluster asks which kind of listener it talks to.
const ENDPOINT_BROKER: i8 = 1;
const ENDPOINT_CONTROLLER: i8 = 2;

/// DescribeCluster (KIP-700): this broker, the controller (itself) and the cluster id. Weir
/// serves only a broker listener, so a request meant for a controller endpoint is refused as
/// Kafka refuses it.
pub(super) fn describe_cluster(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    // v0 has no endpoint type: it is a broker request.
    let endpoint = if ctx.version >= 1 {
        req.endpoint_type
    } else {
        ENDPOINT_BROKER
    };
    if ctx.version >= 1 {
        response.endpoint_type = ENDPOINT_BROKER;
    }
    if endpoint != ENDPOINT_BROKER {
        let (error, why) = if endpoint == ENDPOINT_CONTROLLER {
            (
                ResponseError::MismatchedEndpointType,
                "this is a broker endpoint, but the request wants a controller endpoint"
                    .to_string(),
            )
        } else {
            (
                ResponseError::UnsupportedEndpointType,
                format!("unsupported endpoint type {endpoint}"),
            )
        };
        response.error_code = error.code();
        response.error_message = Some(StrBytes::from_string(why));
        return response;
    }
    let node = BrokerId(broker.config.node_id);
    response.cluster_id = StrBytes::from_string(broker.cluster_id.clone());
    response.controller_id = node;
    let include_fenced = ctx.version >= 2 && req.include_fenced_brokers;
    response.brokers = brokers(&broker.image(), &client_listener(broker), include_fenced)
        .into_iter()
        .map(|(id, host, port, rack, fenced)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(id))
                .with_host(StrBytes::from_string(host))
                .with_port(port as i32)
                .with_rack(rack.map(StrBytes::from_string))
                .with_is_fenced(fenced)
        })
        .collect();
    response.cluster_authorized_operations = if req.include_cluster_authorized_operations {
        CLUSTER_OPERATIONS
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    response
}

fn topic_entry(
    image: &MetadataImage,
    ctx: &RequestContext,
    topic: &TopicMeta,
) -> MetadataResponseTopic {
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let partitions = image
        .topic_partitions(topic.id)
        .map(|(index, reg)| {
            let offline: Vec<i32> = reg
                .replicas
                .iter()
                .copied()
                .filter(|r| image.broker(*r).is_none_or(|b| b.fenced))
                .collect();
            let mut p = MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_id(BrokerId(reg.leader))
                .with_replica_nodes(ids(&reg.replicas))
                .with_isr_nodes(ids(&reg.isr));
            if reg.leader == NO_LEADER {
                p.error_code = ResponseError::LeaderNotAvailable.code();
            }
            if ctx.version >= 5 {
                p.offline_replicas = ids(&offline);
            }
            if ctx.version >= 7 {
                p.leader_epoch = reg.leader_epoch;
            }
            p
        })
        .collect();
    let mut entry = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_partitions(partitions);
    if ctx.version >= 10 {
        entry.topic_id = topic.id;
    }
    if ctx.version >= 1 {
        entry.is_internal = topic.name == crate::group::OFFSETS_TOPIC;
    }
    entry
}
