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

use crate::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::broker::api::RequestContext;
use crate::broker::shared::Broker;
use crate::controller::{validate_topic_name, MetadataImage, TopicMeta, NO_LEADER};

/// The first client listener (`listeners` order): the one internal uses that have no request
/// to take a listener from go by.
pub(crate) fn client_listener(broker: &Broker) -> String {
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

pub(crate) async fn handle(
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
    let authz = broker.authz(ctx);
    // Kafka's order: a named topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED
    // whether it exists or not; a missing one is auto-created only with CREATE on the cluster
    // or the topic, else TOPIC_AUTHORIZATION_FAILED too.
    let may_create =
        |name: &str| authz.cluster(Operation::Create) || authz.topic(Operation::Create, name);
    let described = |name: &Option<String>| {
        name.as_deref()
            .is_none_or(|n| authz.topic(Operation::Describe, n))
    };
    // Topics this request asked the controller to create: until the image shows them they are
    // LEADER_NOT_AVAILABLE, as Kafka answers for a topic its auto-creation forwarded. An
    // UNKNOWN_TOPIC_OR_PARTITION there makes librdkafka mark the topic unknown and queue
    // produces that Kafka would refuse or route (0048_partitioner on a cluster).
    let mut attempted = std::collections::BTreeSet::new();
    let mut create_denied = std::collections::BTreeSet::new();
    if let (true, Some(wanted)) = (auto_create, &wanted) {
        let image = broker.image();
        let missing: Vec<String> = wanted
            .iter()
            .filter(|(name, _)| described(name))
            .filter_map(|(name, _)| name.clone())
            .filter(|n| image.topic(n).is_none() && validate_topic_name(n).is_ok())
            // The offsets topic is made by the coordinator, with its own partition count.
            .filter(|n| n != crate::group::OFFSETS_TOPIC)
            .collect();
        let (missing, refused): (Vec<String>, Vec<String>) =
            missing.into_iter().partition(|n| may_create(n));
        create_denied.extend(refused);
        for (name, result) in broker.auto_create(&missing).await {
            attempted.insert(name.clone());
            match result {
                Ok(()) => tracing::info!(topic = %name, "auto-created topic"),
                Err(e) => tracing::debug!(topic = %name, error = %e, "auto-create failed"),
            }
        }
    }
    let image = broker.image();
    let denied = |name: Option<String>| {
        MetadataResponseTopic::default()
            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
            .with_name(name.map(|n| TopicName(StrBytes::from_string(n))))
    };
    let topics = match wanted {
        // Every topic the caller may describe.
        None => image
            .topics()
            .filter(|t| authz.topic(Operation::Describe, &t.name))
            .map(|t| topic_entry(&image, ctx, t))
            .collect(),
        Some(wanted) => wanted
            .into_iter()
            .map(|(name, id)| {
                let found = match &name {
                    Some(n) => image.topic(n),
                    None => image.topic_by_id(id),
                };
                let shown = found.map(|t| Some(t.name.clone())).unwrap_or(name.clone());
                if !described(&shown) {
                    return denied(name);
                }
                match found {
                    Some(t) => topic_entry(&image, ctx, t),
                    None => {
                        let error = match &name {
                            Some(n) if validate_topic_name(n).is_err() => {
                                ResponseError::InvalidTopicException
                            }
                            Some(n) if create_denied.contains(n) => {
                                ResponseError::TopicAuthorizationFailed
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
    let listed = brokers(&image, &ctx.listener_name, false)
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
    // Reported only when asked (else the schema's "not requested" default): without an
    // authorizer everything a resource type supports, with one what the caller may do.
    if (8..=10).contains(&ctx.version) && req.include_cluster_authorized_operations {
        response.cluster_authorized_operations =
            authz.operations(ResourceType::Cluster, CLUSTER_NAME);
    }
    if ctx.version >= 8 && req.include_topic_authorized_operations {
        for topic in &mut response.topics {
            // Kafka leaves topics asked for by an unknown id out (they have no name), and
            // those the caller may not describe.
            if topic.error_code == ResponseError::TopicAuthorizationFailed.code() {
                continue;
            }
            if let Some(name) = &topic.name {
                topic.topic_authorized_operations = authz.operations(ResourceType::Topic, name);
            }
        }
    }
    response
}

/// The schema default of authorized-operations fields: "not requested".
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Kafka's `EndpointType`: DescribeCluster asks which kind of listener it talks to.
const ENDPOINT_BROKER: i8 = 1;
const ENDPOINT_CONTROLLER: i8 = 2;

/// DescribeCluster (KIP-700): this broker, the controller (itself) and the cluster id. Weir
/// serves only a broker listener, so a request meant for a controller endpoint is refused as
/// Kafka refuses it.
pub(crate) fn describe_cluster(
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
    response.brokers = brokers(&broker.image(), &ctx.listener_name, include_fenced)
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
        broker
            .authz(ctx)
            .operations(ResourceType::Cluster, CLUSTER_NAME)
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
