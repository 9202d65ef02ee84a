//! The consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe. Each turns the wire message into the core's terms
//! (`crate::group::consumer`), with the metadata image's topics (names, ids, partition counts)
//! for the server-side assignor, and the answer back.

use std::collections::BTreeMap;

use kafka_protocol::messages::consumer_group_describe_response as describe_wire;
use kafka_protocol::messages::consumer_group_heartbeat_response as heartbeat_wire;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::acl::{Operation, ResourceType};
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};
use crate::group::consumer::{self, Assignment, TopicView, Topics};
use crate::group::{GroupError, Response};
use kafka_protocol::error::ResponseError;

fn s(value: impl Into<String>) -> StrBytes {
    StrBytes::from_string(value.into())
}

fn opt(value: &Option<StrBytes>) -> Option<String> {
    value.as_ref().map(|v| v.to_string())
}

/// The topics of the metadata image, as the assignors see them.
fn topics(image: &crate::controller::MetadataImage) -> Topics {
    image
        .topics()
        .map(|t| {
            (
                t.name.clone(),
                TopicView {
                    id: t.id,
                    partitions: t.partitions,
                },
            )
        })
        .collect()
}

pub(crate) async fn heartbeat(
    broker: &Broker,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    if !broker.authz(ctx).group(Operation::Read, &req.group_id) {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let fresh = ((broker.io.rng.next_u64() as u128) << 64) | broker.io.rng.next_u64() as u128;
    let owned = req.topic_partitions.as_ref().map(|list| {
        let mut a = Assignment::new();
        for tp in list.iter().filter(|tp| !tp.partitions.is_empty()) {
            a.entry(tp.topic_id)
                .or_default()
                .extend(tp.partitions.iter().copied());
        }
        a
    });
    let core_req = consumer::HeartbeatRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: opt(&req.instance_id),
        rack_id: opt(&req.rack_id),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: if ctx.version >= 1 {
            opt(&req.subscribed_topic_regex)
        } else {
            None
        },
        server_assignor: opt(&req.server_assignor),
        owned,
        client_id: ctx.client_id.to_string(),
        client_host: format!("/{}", ctx.peer.ip()),
        version: ctx.version,
        fresh_id: fresh,
    };
    // The ensure also answers "no offsets topic yet" on a first heartbeat without FindCoordinator.
    if let Err(e) = broker.ensure_offsets_topic().await {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(errors::group_code(Some(
                GroupError::CoordinatorNotAvailable,
            )))
            .with_error_message(Some(s(e)));
    }
    let image = broker.image();
    let mut topics = topics(&image);
    let overrides = group_overrides(broker, &core_req.group_id);
    let r = match broker
        .group_call(|c, id, now| {
            // Built before the coordinator's lock, built again under it if a newer image came
            // meanwhile: heartbeats on two threads could otherwise hand the core an older
            // image's topics after a newer one's (the group's epoch bumped back and forth).
            let current = broker.image();
            if current.applied() != image.applied() {
                topics = self::topics(&current);
            }
            c.consumer_heartbeat(id, core_req, &topics, &overrides, now)
        })
        .await
    {
        Ok(Response::ConsumerHeartbeat(r)) => r,
        Ok(other) => unreachable!("consumer heartbeat answered with {other:?}"),
        Err(e) => consumer::HeartbeatResponse::error(e, ""),
    };
    let mut response = ConsumerGroupHeartbeatResponse::default()
        .with_error_code(errors::group_code(r.error))
        .with_error_message(r.error_message.filter(|m| !m.is_empty()).map(s))
        .with_member_epoch(r.member_epoch)
        .with_heartbeat_interval_ms(r.heartbeat_interval_ms);
    if r.error.is_none() {
        response.member_id = Some(s(r.member_id));
    }
    response.assignment = r.assignment.map(|a| {
        heartbeat_wire::Assignment::default().with_topic_partitions(
            a.into_iter()
                .map(|(t, ps)| {
                    heartbeat_wire::TopicPartitions::default()
                        .with_topic_id(t)
                        .with_partitions(ps.into_iter().collect())
                })
                .collect(),
        )
    });
    response
}

fn wire_assignment(a: &Assignment, names: &BTreeMap<Uuid, String>) -> describe_wire::Assignment {
    describe_wire::Assignment::default().with_topic_partitions(
        a.iter()
            .map(|(t, ps)| {
                describe_wire::TopicPartitions::default()
                    .with_topic_id(*t)
                    .with_topic_name(TopicName(s(names.get(t).cloned().unwrap_or_default())))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let names: BTreeMap<Uuid, String> = broker
        .image()
        .topics()
        .map(|t| (t.id, t.name.clone()))
        .collect();
    let authz = broker.authz(ctx);
    let groups = req
        .group_ids
        .iter()
        .map(|id| {
            let group = describe_wire::DescribedGroup::default().with_group_id(id.clone());
            if !authz.group(Operation::Describe, id) {
                return group.with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            let group = match req.include_authorized_operations {
                true => group.with_authorized_operations(authz.operations(ResourceType::Group, id)),
                false => group,
            };
            match broker.groups.read(|c| c.consumer_describe(id)) {
                Err(e) => {
                    let message = match e {
                        GroupError::GroupIdNotFound => {
                            format!("Group {} not found or is not a consumer group.", **id)
                        }
                        _ => String::new(),
                    };
                    group
                        .with_error_code(errors::group_code(Some(e)))
                        .with_error_message((!message.is_empty()).then(|| s(message)))
                }
                Ok(d) => group
                    .with_group_state(s(d.state.name()))
                    .with_group_epoch(d.group_epoch)
                    .with_assignment_epoch(d.assignment_epoch)
                    .with_assignor_name(s(d.assignor))
                    .with_members(
                        d.members
                            .iter()
                            .map(|m| {
                                describe_wire::Member::default()
                                    .with_member_id(s(m.member_id.clone()))
                                    .with_instance_id(m.instance_id.clone().map(s))
                                    .with_rack_id(m.rack_id.clone().map(s))
                                    .with_member_epoch(m.member_epoch)
                                    .with_client_id(s(m.client_id.clone()))
                                    .with_client_host(s(m.client_host.clone()))
                                    .with_subscribed_topic_names(
                                        m.subscribed_topic_names
                                            .iter()
                                            .map(|n| TopicName(s(n.clone())))
                                            .collect(),
                                    )
                                    .with_subscribed_topic_regex(
                                        m.subscribed_topic_regex.clone().map(s),
                                    )
                                    .with_assignment(wire_assignment(&m.assignment, &names))
                                    .with_target_assignment(wire_assignment(
                                        &m.target_assignment,
                                        &names,
                                    ))
                                    // 1 = a consumer-protocol member (v1+).
                                    .with_member_type(if ctx.version >= 1 { 1 } else { -1 })
                            })
                            .collect(),
                    ),
            }
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

/// The group's own session timeout and heartbeat interval, from its GROUP config resource in
/// the metadata image (validated against the broker's bounds when written).
fn group_overrides(broker: &Broker, group: &str) -> consumer::GroupOverrides {
    use crate::config::group_configs::{CONSUMER_HEARTBEAT_INTERVAL, CONSUMER_SESSION_TIMEOUT};
    let image = broker.image();
    let configs =
        image.resource_configs(&crate::controller::ConfigResource::Group(group.to_string()));
    let int = |key: &str| configs.get(key).and_then(|v| v.trim().parse::<i32>().ok());
    consumer::GroupOverrides {
        session_timeout_ms: int(CONSUMER_SESSION_TIMEOUT),
        heartbeat_interval_ms: int(CONSUMER_HEARTBEAT_INTERVAL),
    }
}
