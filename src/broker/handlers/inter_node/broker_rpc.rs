//! The active controller's side of broker sessions (KIP-631): BrokerRegistration and
//! BrokerHeartbeat arriving on the controller listener (or from this node itself) are decided
//! by the pure `BrokerSessions` against the committed image, committed through the quorum,
//! and answered after the commit. A node that is not the active controller answers
//! NOT_CONTROLLER; a registration for another cluster, INCONSISTENT_CLUSTER_ID.
//!
//! AlterPartition (KIP-497, v2–v3: topic ids, and from v3 each ISR member's broker epoch) is
//! decided here the same way: validated by [`alter_partition::alter_partitions`] against the
//! committed image in Kafka's order, committed serially with every other controller write, and
//! answered after the commit with each partition's new state.
//!
//! The sessions themselves (one leadership term's, in memory) are the active controller's own
//! state: the core `controller::active`, fed by `drivers::active_controller`.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_response::{
    PartitionData as AlterPartitionData, TopicData as AlterTopicData,
};
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse, BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerId,
    BrokerRegistrationRequest, BrokerRegistrationResponse, RequestKind, ResponseKind,
};

use crate::broker::{errors, errors::CommitError, shared::Broker};
use crate::controller::alter_partition::{self, Alteration, PartitionAnswer};
use crate::controller::brokers::{HeartbeatRequest, RegistrationRequest, DURABLE_FEATURE};
use crate::controller::{log_dirs, BrokerEndpoint};

/// Answers one session RPC on the controller listener; `Err` (no answer: not a session
/// request) closes the connection.
pub(crate) async fn answer_rpc(
    broker: &Broker,
    request: RequestKind,
) -> Result<Option<ResponseKind>, String> {
    answer(broker, &request)
        .await
        .map(Some)
        .ok_or_else(|| "no answer to a session request".to_string())
}

/// The answer to a session request, decided here (this node must be the active controller).
pub(crate) async fn answer(broker: &Broker, request: &RequestKind) -> Option<ResponseKind> {
    match request {
        RequestKind::BrokerRegistration(req) => Some(ResponseKind::BrokerRegistration(
            register(broker, req).await,
        )),
        RequestKind::BrokerHeartbeat(req) => {
            Some(ResponseKind::BrokerHeartbeat(heartbeat(broker, req).await))
        }
        RequestKind::AlterPartition(req) => Some(ResponseKind::AlterPartition(
            alter_partitions(broker, req).await,
        )),
        RequestKind::AssignReplicasToDirs(req) => Some(ResponseKind::AssignReplicasToDirs(
            assign_replicas_to_dirs(broker, req).await,
        )),
        _ => None,
    }
}

fn code(e: &CommitError) -> i16 {
    errors::commit(e).code()
}

async fn register(broker: &Broker, req: &BrokerRegistrationRequest) -> BrokerRegistrationResponse {
    let refuse = |code: i16| {
        BrokerRegistrationResponse::default()
            .with_error_code(code)
            .with_broker_epoch(-1)
    };
    if req.cluster_id.as_str() != broker.cluster_id {
        tracing::warn!(broker = req.broker_id.0, cluster = %req.cluster_id.as_str(),
            "registration from another cluster refused");
        return refuse(ResponseError::InconsistentClusterId.code());
    }
    let request = RegistrationRequest {
        id: req.broker_id.0,
        incarnation: req.incarnation_id,
        listeners: req
            .listeners
            .iter()
            .map(|l| BrokerEndpoint {
                name: l.name.to_string(),
                host: l.host.to_string(),
                port: l.port,
            })
            .collect(),
        rack: req.rack.as_ref().map(|r| r.to_string()),
        previous_epoch: req.previous_broker_epoch,
        durable: req
            .features
            .iter()
            .any(|f| f.name.as_str() == DURABLE_FEATURE && f.max_supported_version >= 1),
        log_dirs: req.log_dirs.clone(),
    };
    match broker.register_broker(&request).await {
        Ok(epoch) => BrokerRegistrationResponse::default().with_broker_epoch(epoch),
        Err(e) => refuse(code(&e)),
    }
}

async fn heartbeat(broker: &Broker, req: &BrokerHeartbeatRequest) -> BrokerHeartbeatResponse {
    let request = HeartbeatRequest {
        id: req.broker_id.0,
        epoch: req.broker_epoch,
        metadata_offset: req.current_metadata_offset,
        want_fence: req.want_fence,
        want_shutdown: req.want_shut_down,
        replica_logs: req
            .unknown_tagged_fields
            .get(&super::replica_logs::REPLICA_LOGS_TAG)
            .map(|field| super::replica_logs::decode(field))
            .unwrap_or_default(),
        offline_dirs: req.offline_log_dirs.clone(),
        cordoned_dirs: req
            .unknown_tagged_fields
            .get(&super::cordoned_dirs::CORDONED_LOG_DIRS_TAG)
            .and_then(|field| super::cordoned_dirs::decode(field)),
    };
    let caught_up = req.current_metadata_offset >= broker.image().applied() - 1;
    match broker.broker_heartbeat(&request).await {
        Ok(reply) => BrokerHeartbeatResponse::default()
            .with_is_caught_up(caught_up)
            .with_is_fenced(reply.is_fenced)
            .with_should_shut_down(reply.should_shut_down),
        Err(e) => BrokerHeartbeatResponse::default()
            .with_error_code(code(&e))
            .with_is_fenced(true),
    }
}

/// AlterPartition: each partition's answer in request order, grouped by topic as asked. A
/// partition whose leader recovery state is neither 0 nor 1 is INVALID_REQUEST on its own; a
/// stale sender epoch, a node that is not the active controller, or a commit that failed
/// answers the whole request (top-level error, no partitions).
async fn alter_partitions(broker: &Broker, req: &AlterPartitionRequest) -> AlterPartitionResponse {
    let mut alterations = Vec::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            if !matches!(p.leader_recovery_state, 0 | 1) {
                continue;
            }
            // v3 names each member with the broker epoch the leader saw; v2 only ids.
            let new_isr = if p.new_isr_with_epochs.is_empty() {
                p.new_isr.iter().map(|b| (b.0, -1)).collect()
            } else {
                p.new_isr_with_epochs
                    .iter()
                    .map(|m| (m.broker_id.0, m.broker_epoch))
                    .collect()
            };
            alterations.push(Alteration {
                topic_id: topic.topic_id,
                partition: p.partition_index,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                new_isr,
                leader_recovering: p.leader_recovery_state == 1,
            });
        }
    }
    let sender = req.broker_id.0;
    let decided = broker
        .change_metadata(false, |controller, image| {
            let decided = alter_partition::alter_partitions(
                image,
                sender,
                req.broker_epoch,
                &alterations,
                &|t| controller.election_config(image, t),
            )?;
            Ok((decided.records, decided.answers))
        })
        .await;
    let mut answers = match decided {
        Ok(answers) => answers.into_iter(),
        Err(e) => {
            tracing::debug!(broker = sender, error = %e, "AlterPartition refused");
            return AlterPartitionResponse::default().with_error_code(code(&e));
        }
    };
    let topics = req
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let answer = AlterPartitionData::default().with_partition_index(p.partition_index);
                    if !matches!(p.leader_recovery_state, 0 | 1) {
                        return answer.with_error_code(ResponseError::InvalidRequest.code());
                    }
                    let (_, outcome) = answers.next().expect("one answer per alteration");
                    match outcome {
                        PartitionAnswer::Done(r) => answer
                            .with_leader_id(BrokerId(r.leader))
                            .with_leader_epoch(r.leader_epoch)
                            .with_isr(r.isr.iter().map(|b| BrokerId(*b)).collect())
                            .with_leader_recovery_state(i8::from(r.leader_recovering))
                            .with_partition_epoch(r.partition_epoch),
                        PartitionAnswer::NewLeaderElected => {
                            answer.with_error_code(ResponseError::NewLeaderElected.code())
                        }
                        PartitionAnswer::Refused(e) => {
                            tracing::debug!(broker = sender, error = %e, "AlterPartition partition refused");
                            answer.with_error_code(errors::controller(&e).code())
                        }
                    }
                })
                .collect();
            AlterTopicData::default()
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionResponse::default().with_topics(topics)
}

/// AssignReplicasToDirs (KIP-858): where the broker placed its replicas, decided by
/// [`log_dirs::assign_dirs`] and answered per partition after the commit.
async fn assign_replicas_to_dirs(
    broker: &Broker,
    req: &AssignReplicasToDirsRequest,
) -> AssignReplicasToDirsResponse {
    use kafka_protocol::messages::assign_replicas_to_dirs_response as out;
    let assignments: Vec<((uuid::Uuid, i32), uuid::Uuid)> = req
        .directories
        .iter()
        .flat_map(|d| {
            d.topics.iter().flat_map(move |t| {
                t.partitions
                    .iter()
                    .map(move |p| ((t.topic_id, p.partition_index), d.id))
            })
        })
        .collect();
    let sender = req.broker_id.0;
    let decided = broker
        .change_metadata(false, |_, image| {
            log_dirs::assign_dirs(image, sender, req.broker_epoch, &assignments)
        })
        .await;
    let mut accepted = match decided {
        Ok(accepted) => accepted.into_iter(),
        Err(e) => {
            tracing::debug!(broker = sender, error = %e, "AssignReplicasToDirs refused");
            return AssignReplicasToDirsResponse::default().with_error_code(code(&e));
        }
    };
    let directories = req
        .directories
        .iter()
        .map(|d| {
            let topics = d
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let ok = accepted.next().expect("one answer per assignment");
                            let error = match ok {
                                true => 0,
                                false => ResponseError::NotLeaderOrFollower.code(),
                            };
                            out::PartitionData::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error)
                        })
                        .collect();
                    out::TopicData::default()
                        .with_topic_id(t.topic_id)
                        .with_partitions(partitions)
                })
                .collect();
            out::DirectoryData::default()
                .with_id(d.id)
                .with_topics(topics)
        })
        .collect();
    AssignReplicasToDirsResponse::default().with_directories(directories)
}
