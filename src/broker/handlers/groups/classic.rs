//! Consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups and DeleteGroups. Each
//! handler turns the wire message into a core request (`crate::group`), hands it to the driver
//! (`coordinator.rs`), and turns the core's answer back into the version-appropriate message.
//! Fields a version lacks are left at their defaults (the encoder refuses anything else).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator as WireCoordinator;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use crate::acl::{Operation, ResourceType};
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};
use crate::group::{self, GroupError, GroupState, Response};

const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;

fn s(value: impl Into<String>) -> StrBytes {
    StrBytes::from_string(value.into())
}

fn opt(value: &Option<StrBytes>) -> Option<String> {
    value.as_ref().map(|v| v.to_string())
}

fn code(e: Option<GroupError>) -> i16 {
    errors::group_code(e)
}

// ------------------------------------------------------------------ FindCoordinator

pub(crate) async fn find_coordinator(
    broker: &Broker,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let keys: Vec<StrBytes> = if ctx.version >= 4 {
        req.coordinator_keys.clone()
    } else {
        vec![req.key.clone()]
    };
    // One answer per key: Ok(()) = this broker, else the error and why.
    let answer: Result<(), (ResponseError, String)> = match req.key_type {
        0 => match broker.ensure_offsets_topic().await {
            Ok(()) => Ok(()),
            Err(e) => Err((ResponseError::CoordinatorNotAvailable, e)),
        },
        1 => match broker.ensure_transaction_topic().await {
            Ok(()) => Ok(()),
            Err(e) => Err((ResponseError::CoordinatorNotAvailable, e)),
        },
        other => Err((
            ResponseError::InvalidRequest,
            format!("unsupported coordinator key type {other}"),
        )),
    };
    let authz = broker.authz(ctx);
    let per_key = |key: &StrBytes| -> Result<(i32, String, u16), (ResponseError, String)> {
        if req.key_type == 0 && !authz.group(Operation::Describe, key) {
            return Err((GROUP_DENIED, "Group authorization failed.".into()));
        }
        answer.clone()?;
        let endpoint = if req.key_type == 1 {
            broker.txn_coordinator_endpoint(key)
        } else {
            broker.coordinator_endpoint(key)
        };
        let (node, host, port) =
            endpoint.map_err(|why| (ResponseError::CoordinatorNotAvailable, why))?;
        // The coordinator's endpoint on the listener this request came in on, as Kafka
        // answers (a client of an SSL listener cannot use the SASL one's port).
        match broker.endpoint_on(node, &ctx.listener_name) {
            Some((host, port)) => Ok((node, host, port)),
            None if ctx.listener_name.is_empty() => Ok((node, host, port)),
            None => Err((
                ResponseError::CoordinatorNotAvailable,
                format!("the coordinator has no '{}' listener", ctx.listener_name),
            )),
        }
    };
    let mut response = FindCoordinatorResponse::default();
    if ctx.version >= 4 {
        response.coordinators = keys
            .iter()
            .map(|key| {
                let c = WireCoordinator::default().with_key(key.clone());
                match per_key(key) {
                    Ok((node, host, port)) => c
                        .with_node_id(BrokerId(node))
                        .with_host(s(host))
                        .with_port(port as i32),
                    Err((e, message)) => c
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(e.code())
                        .with_error_message(Some(s(message))),
                }
            })
            .collect();
    } else {
        match per_key(&keys[0]) {
            Ok((node, host, port)) => {
                response.node_id = BrokerId(node);
                response.host = s(host);
                response.port = port as i32;
            }
            Err((e, message)) => {
                response.error_code = e.code();
                response.node_id = BrokerId(-1);
                response.port = -1;
                if ctx.version >= 1 {
                    response.error_message = Some(s(message));
                }
            }
        }
    }
    response
}

// ------------------------------------------------------------------ JoinGroup, SyncGroup

pub(crate) async fn join_group(
    broker: &Broker,
    ctx: &RequestContext,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    let v = ctx.version;
    if !broker.authz(ctx).group(Operation::Read, &req.group_id) {
        return JoinGroupResponse::default()
            .with_error_code(GROUP_DENIED.code())
            .with_generation_id(-1);
    }
    let fresh = ((broker.io.rng.next_u64() as u128) << 64) | broker.io.rng.next_u64() as u128;
    let core_req = group::JoinRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        instance_id: if v >= 5 {
            opt(&req.group_instance_id)
        } else {
            None
        },
        client_id: ctx.client_id.to_string(),
        client_host: format!("/{}", ctx.peer.ip()),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout stands in (KAFKA-8653).
        rebalance_timeout_ms: if v == 0 {
            req.session_timeout_ms
        } else {
            req.rebalance_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member: v >= 4,
        supports_skip_assignment: v >= 9,
        fresh_id: fresh,
    };
    let member_id = core_req.member_id.clone();
    let r = match broker
        .group_call(|c, id, now| c.join(id, core_req, now))
        .await
    {
        Ok(Response::Join(r)) => r,
        Ok(other) => unreachable!("join answered with {other:?}"),
        Err(e) => group::JoinResponse {
            error: Some(e),
            generation: -1,
            member_id,
            ..Default::default()
        },
    };
    let mut response = JoinGroupResponse::default()
        .with_error_code(code(r.error))
        .with_generation_id(r.generation)
        .with_leader(s(r.leader))
        .with_member_id(s(r.member_id))
        .with_members(
            r.members
                .into_iter()
                .map(|m| {
                    let mut wire = join_group_response::JoinGroupResponseMember::default()
                        .with_member_id(s(m.member_id))
                        .with_metadata(m.metadata);
                    if v >= 5 {
                        wire.group_instance_id = m.instance_id.map(s);
                    }
                    wire
                })
                .collect(),
        );
    if v >= 7 {
        response.protocol_type = r.protocol_type.map(s);
        response.protocol_name = r.protocol_name.map(s);
    } else {
        response.protocol_name = Some(s(r.protocol_name.unwrap_or_default()));
    }
    if v >= 9 {
        response.skip_assignment = r.skip_assignment;
    }
    response
}

pub(crate) async fn sync_group(
    broker: &Broker,
    ctx: &RequestContext,
    req: SyncGroupRequest,
) -> SyncGroupResponse {
    let v = ctx.version;
    if !broker.authz(ctx).group(Operation::Read, &req.group_id) {
        return SyncGroupResponse::default().with_error_code(GROUP_DENIED.code());
    }
    let core_req = group::SyncRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        instance_id: if v >= 3 {
            opt(&req.group_instance_id)
        } else {
            None
        },
        generation: req.generation_id,
        protocol_type: if v >= 5 {
            opt(&req.protocol_type)
        } else {
            None
        },
        protocol_name: if v >= 5 {
            opt(&req.protocol_name)
        } else {
            None
        },
        assignments: req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    let r = match broker
        .group_call(|c, id, now| c.sync(id, core_req, now))
        .await
    {
        Ok(Response::Sync(r)) => r,
        Ok(other) => unreachable!("sync answered with {other:?}"),
        Err(e) => group::SyncResponse {
            error: Some(e),
            ..Default::default()
        },
    };
    let mut response = SyncGroupResponse::default()
        .with_error_code(code(r.error))
        .with_assignment(r.assignment);
    if v >= 5 {
        response.protocol_type = r.protocol_type.map(s);
        response.protocol_name = r.protocol_name.map(s);
    }
    response
}

// ------------------------------------------------------------------ Heartbeat, LeaveGroup

pub(crate) async fn heartbeat(
    broker: &Broker,
    ctx: &RequestContext,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    if !broker.authz(ctx).group(Operation::Read, &req.group_id) {
        return HeartbeatResponse::default().with_error_code(GROUP_DENIED.code());
    }
    let core_req = group::HeartbeatRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        instance_id: if ctx.version >= 3 {
            opt(&req.group_instance_id)
        } else {
            None
        },
        generation: req.generation_id,
    };
    let error = match broker
        .group_call(|c, id, now| c.heartbeat(id, core_req, now))
        .await
    {
        Ok(Response::Heartbeat(e)) => e,
        Ok(other) => unreachable!("heartbeat answered with {other:?}"),
        Err(e) => Some(e),
    };
    HeartbeatResponse::default().with_error_code(code(error))
}

pub(crate) async fn leave_group(
    broker: &Broker,
    ctx: &RequestContext,
    req: LeaveGroupRequest,
) -> LeaveGroupResponse {
    let v = ctx.version;
    if !broker.authz(ctx).group(Operation::Read, &req.group_id) {
        return LeaveGroupResponse::default().with_error_code(GROUP_DENIED.code());
    }
    let leaving: Vec<group::LeavingMember> = if v >= 3 {
        req.members
            .iter()
            .map(|m| group::LeavingMember {
                member_id: m.member_id.to_string(),
                instance_id: opt(&m.group_instance_id),
            })
            .collect()
    } else {
        vec![group::LeavingMember {
            member_id: req.member_id.to_string(),
            instance_id: None,
        }]
    };
    let group_id = req.group_id.to_string();
    let count = leaving.len();
    let r = match broker
        .group_call(|c, id, now| c.leave(id, &group_id, leaving, now))
        .await
    {
        Ok(Response::Leave(r)) => r,
        Ok(other) => unreachable!("leave answered with {other:?}"),
        Err(e) => group::LeaveResponse {
            error: Some(e),
            members: vec![Some(e); count],
        },
    };
    if v < 3 {
        // One member: its error is the top-level error.
        let error = r.error.or(r.members.first().copied().flatten());
        return LeaveGroupResponse::default().with_error_code(code(error));
    }
    let members = req
        .members
        .iter()
        .zip(r.members)
        .map(|(m, e)| {
            leave_group_response::MemberResponse::default()
                .with_member_id(m.member_id.clone())
                .with_group_instance_id(m.group_instance_id.clone())
                .with_error_code(code(e))
        })
        .collect();
    LeaveGroupResponse::default()
        .with_error_code(code(r.error))
        .with_members(members)
}

// ------------------------------------------------------------------ offsets

pub(crate) async fn offset_commit(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let v = ctx.version;
    let image = broker.image();
    let authz = broker.authz(ctx);
    let group_allowed = authz.group(Operation::Read, &req.group_id);
    // Partitions of unknown topics are refused here, as Kafka does; the rest go to the core.
    // Without READ on the group every partition fails, without READ on a topic its partitions.
    let mut unknown: Vec<(String, i32)> = Vec::new();
    let mut refused: Vec<((String, i32), ResponseError)> = Vec::new();
    let mut offsets = Vec::new();
    for topic in &req.topics {
        let name = topic.name.to_string();
        let partitions = image.topic(&name).map(|t| t.partitions).unwrap_or(0);
        let topic_allowed = authz.topic(Operation::Read, &name);
        for p in &topic.partitions {
            let key = (name.clone(), p.partition_index);
            if !group_allowed {
                refused.push((key, GROUP_DENIED));
                continue;
            }
            if !topic_allowed {
                refused.push((key, ResponseError::TopicAuthorizationFailed));
                continue;
            }
            if p.partition_index < 0 || p.partition_index >= partitions {
                unknown.push((name.clone(), p.partition_index));
                continue;
            }
            offsets.push(group::OffsetToCommit {
                topic: name.clone(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: if v >= 6 { p.committed_leader_epoch } else { -1 },
                metadata: opt(&p.committed_metadata),
            });
        }
    }
    let core_req = group::CommitRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        instance_id: if v >= 7 {
            opt(&req.group_instance_id)
        } else {
            None
        },
        generation: req.generation_id_or_member_epoch,
        retention_ms: if v <= 4 { req.retention_time_ms } else { -1 },
        // Kafka's OffsetMetadataManager: v9 reports a missing group as such, for both protocols.
        unknown_group: if v >= 9 {
            GroupError::GroupIdNotFound
        } else {
            GroupError::IllegalGeneration
        },
        offsets,
    };
    let mut errors_by_partition: std::collections::BTreeMap<(String, i32), i16> = unknown
        .into_iter()
        .map(|k| (k, ResponseError::UnknownTopicOrPartition.code()))
        .chain(refused.into_iter().map(|(k, e)| (k, e.code())))
        .collect();
    let all = |e: GroupError, offsets: &[group::OffsetToCommit]| group::CommitResponse {
        partitions: offsets
            .iter()
            .map(|o| (o.topic.clone(), o.partition, Some(e)))
            .collect(),
    };
    let committed = if core_req.offsets.is_empty() {
        group::CommitResponse::default()
    } else {
        let fallback = core_req.offsets.clone();
        broker.hold_while_loading(&core_req.group_id).await;
        match broker
            .group_call(|c, id, now| c.commit(id, core_req, now))
            .await
        {
            Ok(Response::Commit(r)) => r,
            Ok(other) => unreachable!("commit answered with {other:?}"),
            Err(e) => all(e, &fallback),
        }
    };
    for (topic, partition, e) in committed.partitions {
        errors_by_partition.insert((topic, partition), code(e));
    }
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let name = t.name.to_string();
            offset_commit_response::OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let error = errors_by_partition
                                .get(&(name.clone(), p.partition_index))
                                .copied()
                                .unwrap_or(0);
                            offset_commit_response::OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// The committed offsets of one group, as (topic, partitions) in request order (or all).
type Fetched = Result<Vec<(String, Vec<group::CommittedOffset>)>, GroupError>;

fn fetch_group(
    broker: &Broker,
    group_id: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Fetched {
    let wanted: Option<Vec<(String, i32)>> = topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect()
    });
    let offsets = broker
        .groups
        .read(|c| c.fetch_offsets(group_id, wanted.as_deref()))?;
    let mut grouped: Vec<(String, Vec<group::CommittedOffset>)> = Vec::new();
    for o in offsets {
        match grouped.last_mut() {
            Some((t, list)) if *t == o.topic => list.push(o),
            _ => grouped.push((o.topic.clone(), vec![o])),
        }
    }
    Ok(grouped)
}

/// OffsetFetch's authorization (as Kafka's): DESCRIBE on the group, else
/// GROUP_AUTHORIZATION_FAILED; then DESCRIBE on each topic. A topic the caller may not describe
/// is left out of a fetch of every offset; a named one answers TOPIC_AUTHORIZATION_FAILED for
/// each of its partitions.
enum Fetch {
    Denied,
    Fetched(Fetched, Vec<(String, Vec<i32>)>),
}

fn fetch_authorized(
    broker: &Broker,
    authz: &crate::broker::handlers::security::authz::Authz,
    group_id: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    validate: impl FnOnce() -> Result<(), GroupError>,
) -> Fetch {
    if !authz.group(Operation::Describe, group_id) {
        return Fetch::Denied;
    }
    let named = topics.is_some();
    let (allowed, denied): (Vec<_>, Vec<_>) = topics
        .unwrap_or_default()
        .into_iter()
        .partition(|(t, _)| authz.topic(Operation::Describe, t));
    let fetched = validate()
        .and_then(|()| fetch_group(broker, group_id, named.then_some(allowed)))
        .map(|list| {
            list.into_iter()
                .filter(|(t, _)| named || authz.topic(Operation::Describe, t))
                .collect()
        });
    Fetch::Fetched(fetched, denied)
}

pub(crate) fn offset_fetch(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let v = ctx.version;
    let authz = broker.authz(ctx);
    let topic_denied = ResponseError::TopicAuthorizationFailed.code();
    // RequireStable (v7+, librdkafka's default): a partition with a transactional commit not
    // yet settled answers UNSTABLE_OFFSET_COMMIT without an offset (as Kafka's
    // `OffsetMetadataManager`), and the client retries. The core tells it with the offset,
    // from one look at the group.
    let stable = |o: group::CommittedOffset| -> (group::CommittedOffset, i16) {
        if v >= 7 && req.require_stable && o.unstable {
            let code = ResponseError::UnstableOffsetCommit.code();
            (no_offset(&o.topic, o.partition), code)
        } else {
            (o, 0)
        }
    };
    if v >= 8 {
        let groups = req
            .groups
            .iter()
            .map(|g| {
                let topics = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                        .collect()
                });
                let group = offset_fetch_response::OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone());
                // v9 (KIP-848): a consumer-protocol member fetches at its member epoch.
                let validate = || {
                    if v >= 9 {
                        broker.groups.read(|c| {
                            c.validate_fetch(&g.group_id, g.member_id.as_deref(), g.member_epoch)
                        })
                    } else {
                        Ok(())
                    }
                };
                let wire_partition = |o: group::CommittedOffset, error: i16| {
                    offset_fetch_response::OffsetFetchResponsePartitions::default()
                        .with_partition_index(o.partition)
                        .with_committed_offset(o.offset)
                        .with_committed_leader_epoch(o.leader_epoch)
                        .with_metadata(Some(s(o.metadata)))
                        .with_error_code(error)
                };
                let wire_topic = |t: String, partitions| {
                    offset_fetch_response::OffsetFetchResponseTopics::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(partitions)
                };
                match fetch_authorized(broker, &authz, &g.group_id, topics, validate) {
                    Fetch::Denied => group.with_error_code(GROUP_DENIED.code()),
                    Fetch::Fetched(Err(e), _) => group.with_error_code(code(Some(e))),
                    Fetch::Fetched(Ok(fetched), denied) => group.with_topics(
                        fetched
                            .into_iter()
                            .map(|(t, list)| {
                                let list = list
                                    .into_iter()
                                    .map(|o| {
                                        let (o, e) = stable(o);
                                        wire_partition(o, e)
                                    })
                                    .collect();
                                wire_topic(t, list)
                            })
                            .chain(denied.into_iter().map(|(t, ps)| {
                                let list = ps
                                    .into_iter()
                                    .map(|p| wire_partition(no_offset(&t, p), topic_denied))
                                    .collect();
                                wire_topic(t, list)
                            }))
                            .collect(),
                    ),
                }
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let requested: Option<Vec<(String, Vec<i32>)>> = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let partition = |o: group::CommittedOffset, error: i16| {
        let mut p = offset_fetch_response::OffsetFetchResponsePartition::default()
            .with_partition_index(o.partition)
            .with_committed_offset(o.offset)
            .with_metadata(Some(s(o.metadata)))
            .with_error_code(error);
        if v >= 5 {
            p.committed_leader_epoch = o.leader_epoch;
        }
        p
    };
    let topic = |name: String, partitions| {
        offset_fetch_response::OffsetFetchResponseTopic::default()
            .with_name(TopicName(s(name)))
            .with_partitions(partitions)
    };
    // v0–1 have no top-level error: every requested partition carries it.
    let every_partition = |e: i16| {
        let topics = requested
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(t, ps)| {
                let list = ps
                    .into_iter()
                    .map(|p| partition(no_offset(&t, p), e))
                    .collect();
                topic(t, list)
            })
            .collect();
        OffsetFetchResponse::default().with_topics(topics)
    };
    match fetch_authorized(broker, &authz, &req.group_id, requested.clone(), || Ok(())) {
        Fetch::Denied if v >= 2 => {
            OffsetFetchResponse::default().with_error_code(GROUP_DENIED.code())
        }
        Fetch::Denied => every_partition(GROUP_DENIED.code()),
        Fetch::Fetched(Ok(fetched), denied) => OffsetFetchResponse::default().with_topics(
            fetched
                .into_iter()
                .map(|(t, list)| {
                    let list = list
                        .into_iter()
                        .map(|o| {
                            let (o, e) = stable(o);
                            partition(o, e)
                        })
                        .collect();
                    topic(t, list)
                })
                .chain(denied.into_iter().map(|(t, ps)| {
                    let list = ps
                        .into_iter()
                        .map(|p| partition(no_offset(&t, p), topic_denied))
                        .collect();
                    topic(t, list)
                }))
                .collect(),
        ),
        Fetch::Fetched(Err(e), _) if v >= 2 => {
            OffsetFetchResponse::default().with_error_code(code(Some(e)))
        }
        Fetch::Fetched(Err(e), _) => every_partition(code(Some(e))),
    }
}

/// A partition without a committed offset (an answer that carries only an error).
fn no_offset(topic: &str, partition: i32) -> group::CommittedOffset {
    group::CommittedOffset {
        topic: topic.to_string(),
        partition,
        offset: -1,
        leader_epoch: -1,
        metadata: String::new(),
        unstable: false,
    }
}

pub(crate) async fn offset_delete(
    broker: &Broker,
    ctx: &RequestContext,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group_id = req.group_id.to_string();
    // DELETE on the group; READ on each topic, else its partitions fail (Kafka's order).
    let authz = broker.authz(ctx);
    if !authz.group(Operation::Delete, &group_id) {
        return OffsetDeleteResponse::default().with_error_code(GROUP_DENIED.code());
    }
    let readable = |t: &str| authz.topic(Operation::Read, t);
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .filter(|t| readable(&t.name))
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    let result = match broker
        .group_call(|c, id, now| c.delete_offsets(id, &group_id, partitions, now))
        .await
    {
        Ok(Response::Delete(r)) => r,
        Ok(other) => unreachable!("offset delete answered with {other:?}"),
        Err(e) => Err(e),
    };
    match result {
        Err(e) => OffsetDeleteResponse::default().with_error_code(code(Some(e))),
        Ok(list) => {
            let topics = req
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let error = list
                                .iter()
                                .find(|(n, i, _)| **n == *t.name.0 && *i == p.partition_index)
                                .and_then(|(_, _, e)| *e);
                            let error = match readable(&t.name) {
                                true => code(error),
                                false => ResponseError::TopicAuthorizationFailed.code(),
                            };
                            offset_delete_response::OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error)
                        })
                        .collect();
                    offset_delete_response::OffsetDeleteResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            OffsetDeleteResponse::default().with_topics(topics)
        }
    }
}

// ------------------------------------------------------------------ admin

pub(crate) fn list_groups(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let v = ctx.version;
    let (error, groups) = broker.groups.read(|c| c.list_groups());
    // DESCRIBE on the cluster lists every group; otherwise those the caller may describe.
    let authz = broker.authz(ctx);
    let all_groups = authz.cluster(Operation::Describe);
    let states: Vec<String> = if v >= 4 {
        req.states_filter.iter().map(|s| s.to_lowercase()).collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if v >= 5 {
        req.types_filter.iter().map(|s| s.to_lowercase()).collect()
    } else {
        Vec::new()
    };
    let groups = groups
        .into_iter()
        .filter(|g| g.state != GroupState::Dead)
        .filter(|g| all_groups || authz.group(Operation::Describe, &g.group_id))
        .filter(|g| states.is_empty() || states.contains(&g.state_name.to_lowercase()))
        .filter(|g| types.is_empty() || types.iter().any(|t| t == g.group_type))
        .map(|g| {
            let mut listed = list_groups_response::ListedGroup::default()
                .with_group_id(GroupId(s(g.group_id)))
                .with_protocol_type(s(g.protocol_type));
            if v >= 4 {
                listed.group_state = s(g.state_name);
            }
            if v >= 5 {
                listed.group_type = s(g.group_type);
            }
            listed
        })
        .collect();
    ListGroupsResponse::default()
        .with_error_code(code(error))
        .with_groups(groups)
}

pub(crate) fn describe_groups(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let v = ctx.version;
    let authz = broker.authz(ctx);
    let groups = req
        .groups
        .iter()
        .map(|id| {
            if !authz.group(Operation::Describe, id) {
                return describe_groups_response::DescribedGroup::default()
                    .with_error_code(GROUP_DENIED.code())
                    .with_group_id(id.clone());
            }
            let d = broker.groups.read(|c| c.describe_group(id));
            let members = d
                .members
                .into_iter()
                .map(|m| {
                    let mut wire = describe_groups_response::DescribedGroupMember::default()
                        .with_member_id(s(m.member_id))
                        .with_client_id(s(m.client_id))
                        .with_client_host(s(m.client_host))
                        .with_member_metadata(m.metadata)
                        .with_member_assignment(m.assignment);
                    if v >= 4 {
                        wire.group_instance_id = m.instance_id.map(s);
                    }
                    wire
                })
                .collect();
            // A group that does not exist is described as Dead; v6 (KIP-1043) also says so
            // with GROUP_ID_NOT_FOUND and a message, as Kafka's GroupMetadataManager does.
            if v >= 6 && d.error.is_none() && d.state == GroupState::Dead {
                return describe_groups_response::DescribedGroup::default()
                    .with_error_code(code(Some(GroupError::GroupIdNotFound)))
                    .with_error_message(Some(s(format!("Group {} not found.", **id))))
                    .with_group_id(id.clone())
                    .with_group_state(s(GroupState::Dead.name()));
            }
            let mut described = describe_groups_response::DescribedGroup::default()
                .with_error_code(code(d.error))
                .with_group_id(id.clone())
                .with_group_state(s(d.state.name()))
                .with_protocol_type(s(d.protocol_type))
                .with_protocol_data(s(d.protocol))
                .with_members(members);
            if v >= 3 && req.include_authorized_operations {
                described.authorized_operations = authz.operations(ResourceType::Group, id);
            }
            described
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

pub(crate) async fn delete_groups(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    let authz = broker.authz(ctx);
    for name in &req.groups_names {
        let group_id = name.to_string();
        if !authz.group(Operation::Delete, &group_id) {
            results.push(
                delete_groups_response::DeletableGroupResult::default()
                    .with_group_id(name.clone())
                    .with_error_code(GROUP_DENIED.code()),
            );
            continue;
        }
        let result = match broker
            .group_call(|c, id, now| c.delete_group(id, &group_id, now))
            .await
        {
            Ok(Response::Delete(r)) => r.err(),
            Ok(other) => unreachable!("delete answered with {other:?}"),
            Err(e) => Some(e),
        };
        results.push(
            delete_groups_response::DeletableGroupResult::default()
                .with_group_id(name.clone())
                .with_error_code(code(result)),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
