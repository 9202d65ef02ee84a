//! CreateTopics, DeleteTopics, CreatePartitions: wire requests to controller calls and back.
//! Each topic's partitions are charged to the client's controller mutation quota once the
//! controller has validated it (`throttle::MutationQuota`, Kafka's order): strict versions
//! (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+) are refused per topic over it.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::handlers::configs::{config_entries, SOURCE_DEFAULT, SOURCE_TOPIC};
use crate::broker::handlers::security::throttle::MutationQuota;
use crate::broker::{errors, errors::CommitError, shared::Broker};
use crate::controller::{ControllerError, MetadataRecord, NewTopic};

/// How many partitions `records` create.
fn partitions_in(records: &[MetadataRecord]) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, MetadataRecord::Partition(_)))
        .count()
}

fn message(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

pub(crate) async fn create_topics(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    let authz = broker.authz(ctx);
    let quota = MutationQuota::new(ctx, 6);
    for topic in req.topics {
        let name = topic.name.to_string();
        let mut result = CreatableTopicResult::default().with_name(topic.name.clone());
        if !authz.may_create_topic(&name) {
            result.error_code = ResponseError::TopicAuthorizationFailed.code();
            result.error_message = message("Authorization failed.");
            results.push(result);
            continue;
        }
        let mut new = NewTopic {
            name: name.clone(),
            partitions: topic.num_partitions,
            replication_factor: topic.replication_factor,
            configs: BTreeMap::new(),
            assignments: Vec::new(),
        };
        let mut invalid = None;
        for config in &topic.configs {
            match &config.value {
                Some(v) => {
                    new.configs.insert(config.name.to_string(), v.to_string());
                }
                None => invalid = Some(format!("config '{}' has a null value", config.name)),
            }
        }
        if !topic.assignments.is_empty() {
            // Manual assignment: partition indexes 0..n, each with its replicas.
            let mut assignments: Vec<_> = topic.assignments.iter().collect();
            assignments.sort_by_key(|a| a.partition_index);
            let consecutive = assignments
                .iter()
                .enumerate()
                .all(|(i, a)| a.partition_index == i as i32);
            if !consecutive {
                result.error_code = ResponseError::InvalidReplicaAssignment.code();
                result.error_message =
                    message("partitions should be a consecutive 0-based integer sequence");
                results.push(result);
                continue;
            }
            new.assignments = assignments
                .iter()
                .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                .collect();
        }
        if let Some(why) = invalid {
            result.error_code = ResponseError::InvalidConfig.code();
            result.error_message = message(why);
            results.push(result);
            continue;
        }
        let outcome = broker
            .create_topic_until(Some(ctx.deadline), new.clone(), req.validate_only, |r| {
                quota.charge(broker, partitions_in(r))
            })
            .await;
        match outcome {
            Ok(()) => {
                // As Kafka: a null message on success (the schema default is "").
                result.error_message = None;
                let image = broker.image();
                let created = image.topic(&name);
                if ctx.version >= 5 {
                    result.num_partitions = created.map_or(
                        if new.partitions == -1 {
                            broker.config.num_partitions
                        } else {
                            new.partitions
                        },
                        |t| t.partitions,
                    );
                    let manual_partitions = new.assignments.len() as i32;
                    if created.is_none() && manual_partitions > 0 {
                        result.num_partitions = manual_partitions;
                    }
                    result.replication_factor = created.map_or(
                        if new.replication_factor == -1 {
                            broker.config.default_replication_factor
                        } else {
                            new.replication_factor
                        },
                        |t| t.replication_factor,
                    );
                    if created.is_none() && !new.assignments.is_empty() {
                        result.replication_factor = new.assignments[0].len() as i16;
                    }
                    let defaults = broker.topic_defaults();
                    let effective = defaults.with_overrides(&new.configs).unwrap_or(defaults);
                    result.configs = Some(
                        config_entries(&effective, &new.configs)
                            .into_iter()
                            .map(|(key, value, overridden)| {
                                CreatableTopicConfigs::default()
                                    .with_name(StrBytes::from_string(key))
                                    .with_value(Some(StrBytes::from_string(value)))
                                    .with_config_source(if overridden {
                                        SOURCE_TOPIC
                                    } else {
                                        SOURCE_DEFAULT
                                    })
                            })
                            .collect(),
                    );
                }
                if ctx.version >= 7 {
                    result.topic_id = created.map(|t| t.id).unwrap_or_default();
                }
                if !req.validate_only {
                    tracing::info!(topic = %name, "created topic");
                }
            }
            Err(e) => {
                result.error_code = errors::commit(&e).code();
                result.error_message = message(e.to_string());
            }
        }
        results.push(result);
    }
    CreateTopicsResponse::default()
        .with_topics(results)
        .with_throttle_time_ms(quota.throttle_ms(broker))
}

pub(crate) async fn delete_topics(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    // v6 names topics by name or id; earlier versions by name only.
    let targets: Vec<(Option<String>, Uuid)> = if ctx.version >= 6 {
        req.topics
            .into_iter()
            .map(|t| (t.name.map(|n| n.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .into_iter()
            .map(|n| (Some(n.to_string()), Uuid::nil()))
            .collect()
    };
    let mut responses = Vec::with_capacity(targets.len());
    let authz = broker.authz(ctx);
    let quota = MutationQuota::new(ctx, 5);
    for (name, id) in targets {
        let image = broker.image();
        let resolved = match &name {
            Some(n) => Some(n.clone()),
            None => image.topic_by_id(id).map(|t| t.name.clone()),
        };
        let mut r = DeletableTopicResult::default().with_name(
            resolved
                .clone()
                .or(name.clone())
                .map(|n| TopicName(StrBytes::from_string(n))),
        );
        if ctx.version >= 6 {
            r.topic_id = resolved
                .as_deref()
                .and_then(|n| image.topic(n))
                .map(|t| t.id)
                .unwrap_or(id);
        }
        if resolved
            .as_deref()
            .is_some_and(|n| !authz.topic(Operation::Delete, n))
        {
            r.error_code = ResponseError::TopicAuthorizationFailed.code();
            if ctx.version >= 5 {
                r.error_message = message("Authorization failed.");
            }
            responses.push(r);
            continue;
        }
        let outcome = match &resolved {
            None => Err(CommitError::Rejected(ControllerError::UnknownTopic(
                id.to_string(),
            ))),
            Some(n) if n == crate::group::OFFSETS_TOPIC => {
                Err(CommitError::Rejected(ControllerError::InvalidTopic(
                    format!("the internal topic {n} holds committed offsets and cannot be deleted"),
                )))
            }
            Some(n) => {
                broker
                    .change_metadata_until(Some(ctx.deadline), false, |controller, image| {
                        // Named by id: the name was looked up before the writers' lock, and the
                        // topic may have been deleted and made again under it since.
                        if !id.is_nil() && image.topic(n).map(|t| t.id) != Some(id) {
                            return Err(ControllerError::UnknownTopic(id.to_string()));
                        }
                        let record = controller.delete_topic(image, n)?;
                        let partitions = image.topic(n).map_or(0, |t| t.partitions.max(0));
                        quota.charge(broker, partitions as usize)?;
                        Ok((vec![record], ()))
                    })
                    .await
            }
        };
        match outcome {
            Ok(()) => tracing::info!(topic = ?resolved, "deleted topic"),
            Err(e) => {
                r.error_code = match (&e, &name) {
                    (CommitError::Rejected(ControllerError::UnknownTopic(_)), None) => {
                        ResponseError::UnknownTopicId.code()
                    }
                    _ => errors::commit(&e).code(),
                };
                if ctx.version >= 5 {
                    r.error_message = message(e.to_string());
                }
            }
        }
        responses.push(r);
    }
    DeleteTopicsResponse::default()
        .with_responses(responses)
        .with_throttle_time_ms(quota.throttle_ms(broker))
}

pub(crate) async fn create_partitions(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    let authz = broker.authz(ctx);
    let quota = MutationQuota::new(ctx, 3);
    for topic in req.topics {
        let name = topic.name.to_string();
        let mut r = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        if !authz.topic(Operation::Alter, &name) {
            r.error_code = ResponseError::TopicAuthorizationFailed.code();
            r.error_message = message("Authorization failed.");
            results.push(r);
            continue;
        }
        // Null (and, leniently, empty) means "place them for me".
        let assignments: Option<Vec<Vec<i32>>> = topic
            .assignments
            .as_ref()
            .filter(|a| !a.is_empty())
            .map(|a| {
                a.iter()
                    .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                    .collect()
            });
        let entropy = broker.io.rng.next_u64();
        let outcome = if name == crate::group::OFFSETS_TOPIC {
            // Groups are placed by hashing over the partition count: changing it moves them.
            Err((
                ResponseError::InvalidTopicException,
                format!("the partition count of the internal topic {name} cannot change"),
            ))
        } else if crate::planted!(broker.config, CreatePartitionsStuckAfterFailover)
            && broker.quorum.active_epoch().is_some_and(|e| e > 1)
        {
            Err((ResponseError::RequestTimedOut, "planted".to_string()))
        } else {
            broker
                .change_metadata_until(
                    Some(ctx.deadline),
                    req.validate_only,
                    |controller, image| {
                        let records = controller.create_partitions(
                            image,
                            &name,
                            topic.count,
                            assignments.as_deref(),
                            entropy,
                        )?;
                        quota.charge(broker, partitions_in(&records))?;
                        Ok((records, ()))
                    },
                )
                .await
                .map_err(|e| (errors::commit(&e), e.to_string()))
        };
        if let Err((code, why)) = outcome {
            r.error_code = code.code();
            r.error_message = message(why);
        }
        results.push(r);
    }
    CreatePartitionsResponse::default()
        .with_results(results)
        .with_throttle_time_ms(quota.throttle_ms(broker))
}
