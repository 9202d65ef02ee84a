//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on TOPIC, BROKER and GROUP
//! resources. All three kinds of config are dynamic: the controller validates a change and
//! commits it as a metadata record (`TopicConfig`, or `ResourceConfig` for brokers and groups);
//! every node reads them from its image. A broker resource names a broker id (per-broker
//! configs) or is empty (the cluster-wide default); its `server.properties` keys are the static
//! layer underneath (`config::dynamic_broker`). A group resource holds KIP-848 group configs
//! (`config::group_configs`), which the consumer coordinator applies at each heartbeat.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};
use crate::config::dynamic_broker::{self, ListKey};
use crate::config::TopicConfig;
use crate::controller::{ConfigResource, Controller, ControllerError, MetadataImage};

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_GROUP: i8 = 32;

// Kafka's DescribeConfigs ConfigSource ids.
pub(crate) const SOURCE_TOPIC: i8 = 1;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
const SOURCE_STATIC_BROKER: i8 = 4;
pub(crate) const SOURCE_DEFAULT: i8 = 5;
const SOURCE_GROUP: i8 = 8;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Topic keys of Kafka's LIST type: the only ones APPEND and SUBTRACT apply to.
const LIST_KEYS: &[&str] = &["cleanup.policy"];

type Refusal = (ResponseError, String);

fn not_a_list(op: i8, key: &str) -> Refusal {
    let verb = if op == OP_APPEND {
        "append"
    } else {
        "subtract"
    };
    (
        ResponseError::InvalidConfig,
        format!("Config value {verb} is not allowed for config key: {key}"),
    )
}

/// APPEND or SUBTRACT on a list value, as Kafka computes it: appended items not already there
/// go at the end; subtracted items are removed.
fn list_change(current: &str, op: i8, value: Option<&str>) -> String {
    let split = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut items = split(current);
    let given = split(value.unwrap_or(""));
    if op == OP_APPEND {
        for item in given {
            if !items.contains(&item) {
                items.push(item);
            }
        }
    } else {
        items.retain(|item| !given.contains(item));
    }
    items.join(",")
}

/// Every topic-level key with its effective value and whether the topic overrides it.
pub(crate) fn config_entries(
    effective: &TopicConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<(String, String, bool)> {
    effective
        .entries()
        .into_iter()
        .map(|(key, value)| (key.to_string(), value, overrides.contains_key(key)))
        .collect()
}

/// (key, value, source, read-only) for one described resource, or the refusal.
type Described = Result<Vec<(String, String, i8, bool)>, Refusal>;

fn describe_topic(broker: &Broker, name: &str) -> Described {
    let image = broker.image();
    let Some(topic) = image.topic(name) else {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("unknown topic '{name}'"),
        ));
    };
    let effective = broker
        .topic_config(name)
        .unwrap_or_else(|| broker.topic_defaults());
    Ok(config_entries(&effective, &topic.configs)
        .into_iter()
        .map(|(k, v, o)| (k, v, if o { SOURCE_TOPIC } else { SOURCE_DEFAULT }, false))
        .collect())
}

/// As Kafka: the cluster default (empty name) shows only its dynamic keys; this broker's id
/// shows every key, each from the highest layer that sets it (per-broker, cluster default,
/// `server.properties`). Another broker's id is INVALID_REQUEST: ask that broker.
fn describe_broker(broker: &Broker, name: &str) -> Described {
    let image = broker.image();
    let cluster = image.resource_configs(&ConfigResource::Broker(String::new()));
    let read_only = |k: &str| !dynamic_broker::is_dynamic(k);
    if name.is_empty() {
        return Ok(cluster
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.clone(),
                    SOURCE_DYNAMIC_DEFAULT_BROKER,
                    read_only(k),
                )
            })
            .collect());
    }
    let node = broker.config.node_id;
    if name != node.to_string() {
        return Err((
            ResponseError::InvalidRequest,
            format!("Unexpected broker id, expected {node} or empty string, but received {name}"),
        ));
    }
    let own = image.resource_configs(&ConfigResource::Broker(name.to_string()));
    let layered = |k: &str, fallback: Option<String>| {
        if let Some(v) = own.get(k) {
            Some((v.clone(), SOURCE_DYNAMIC_BROKER))
        } else if let Some(v) = cluster.get(k) {
            Some((v.clone(), SOURCE_DYNAMIC_DEFAULT_BROKER))
        } else {
            fallback.map(|v| (v, SOURCE_STATIC_BROKER))
        }
    };
    let statics = broker.config.broker_config_entries();
    let known: BTreeSet<&str> = statics.iter().map(|(k, _)| k.as_str()).collect();
    let mut entries: Vec<(String, String, i8, bool)> = statics
        .iter()
        .filter_map(|(k, v)| {
            layered(k, Some(v.clone())).map(|(v, s)| (k.clone(), v, s, read_only(k)))
        })
        .collect();
    // Dynamic keys Weir does not read from server.properties (SASL, SSL, custom keys).
    let extra: BTreeSet<&String> = own
        .keys()
        .chain(cluster.keys())
        .filter(|k| !known.contains(k.as_str()))
        .collect();
    for k in extra {
        if let Some((v, s)) = layered(k, None) {
            entries.push((k.clone(), v, s, read_only(k)));
        }
    }
    entries.sort();
    Ok(entries)
}

/// Every group config key with its effective value: the group's override (GROUP_CONFIG) or the
/// broker's default (DEFAULT_CONFIG), as Kafka reports them. The group need not exist.
fn describe_group(broker: &Broker, name: &str) -> Described {
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "Group name must not be empty".into(),
        ));
    }
    let image = broker.image();
    let overrides = image.resource_configs(&ConfigResource::Group(name.to_string()));
    Ok(broker
        .controller
        .group_bounds()
        .effective(overrides)
        .entries()
        .into_iter()
        .map(|(k, v)| {
            let source = if overrides.contains_key(k) {
                SOURCE_GROUP
            } else {
                SOURCE_DEFAULT
            };
            (k.to_string(), v, source, false)
        })
        .collect())
}

pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let authz = broker.authz(ctx);
    let include_documentation = req.include_documentation;
    let results = req
        .resources
        .into_iter()
        .map(|resource| {
            let mut result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let name = resource.resource_name.to_string();
            let checked =
                authz.config_resource(resource.resource_type, &name, Operation::DescribeConfigs);
            if let Err((code, why)) = checked {
                result.error_code = code.code();
                result.error_message = Some(StrBytes::from_string(why));
                return result;
            }
            let described = match resource.resource_type {
                RESOURCE_TOPIC => describe_topic(broker, &name),
                RESOURCE_BROKER => describe_broker(broker, &name),
                RESOURCE_GROUP => describe_group(broker, &name),
                other => Err((
                    ResponseError::InvalidRequest,
                    format!("Unsupported resource type: {other}"),
                )),
            };
            let entries = match described {
                Ok(entries) => entries,
                Err((code, why)) => {
                    result.error_code = code.code();
                    result.error_message = Some(StrBytes::from_string(why));
                    return result;
                }
            };
            // Kafka: a null or empty key list means every key.
            let wanted = resource
                .configuration_keys
                .filter(|keys| !keys.is_empty())
                .map(|keys| keys.into_iter().map(|k| k.to_string()).collect::<Vec<_>>());
            result.configs = entries
                .into_iter()
                .filter(|(k, _, _, _)| wanted.as_ref().is_none_or(|w| w.contains(k)))
                .map(|(key, value, source, read_only)| {
                    let broker = resource.resource_type == RESOURCE_BROKER;
                    // As Kafka: a password's value is never sent back.
                    let sensitive = broker && dynamic_broker::is_sensitive(&key);
                    let value = (!sensitive).then(|| StrBytes::from_string(value));
                    // Kafka sends null documentation unless asked; broker keys have theirs in
                    // the key table.
                    let documentation = (broker && include_documentation)
                        .then(|| dynamic_broker::documentation(&key))
                        .flatten()
                        .map(StrBytes::from_static_str);
                    let config_type = if broker {
                        dynamic_broker::config_type(&key)
                    } else {
                        0
                    };
                    let mut entry = DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_string(key))
                        .with_value(value)
                        .with_config_source(source)
                        .with_read_only(read_only)
                        .with_is_sensitive(sensitive)
                        .with_config_type(config_type);
                    entry.documentation = documentation;
                    entry
                })
                .collect();
            result
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Applies config changes of one resource (or only validates them) through the controller.
async fn change(
    broker: &Broker,
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
    changes: BTreeMap<String, Option<String>>,
    validate_only: bool,
) -> Result<(), Refusal> {
    change_from(broker, ctx, resource_type, name, validate_only, |_, _| {
        Ok(changes)
    })
    .await
}

/// [`change`] with the changes worked out from the image the controller decides on, under the
/// metadata writers' lock: an APPEND or SUBTRACT reads the list it changes there, so two at
/// once each see the other's result (read before the lock, one would be lost).
async fn change_from(
    broker: &Broker,
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    changes: impl FnOnce(
        &Controller,
        &MetadataImage,
    ) -> Result<BTreeMap<String, Option<String>>, ControllerError>,
) -> Result<(), Refusal> {
    if !matches!(
        resource_type,
        RESOURCE_TOPIC | RESOURCE_BROKER | RESOURCE_GROUP
    ) {
        return Err((
            ResponseError::InvalidRequest,
            format!("Unknown resource type {resource_type}"),
        ));
    }
    broker
        .change_metadata_until(Some(ctx.deadline), validate_only, |controller, image| {
            let changes = changes(controller, image)?;
            let record = match resource_type {
                RESOURCE_TOPIC => controller.alter_topic_config(image, name, changes)?,
                RESOURCE_BROKER => controller.alter_broker_config(image, name, changes)?,
                _ => controller.alter_group_config(image, name, changes)?,
            };
            Ok((vec![record], ()))
        })
        .await
        .map_err(|e| (errors::commit(&e), e.to_string()))
}

/// The stored keys of a resource (what legacy AlterConfigs replaces).
fn stored_keys(broker: &Broker, resource_type: i8, name: &str) -> Vec<String> {
    let image = broker.image();
    let configs = match resource_type {
        RESOURCE_TOPIC => {
            return image
                .topic(name)
                .map(|t| t.configs.keys().cloned().collect())
                .unwrap_or_default()
        }
        RESOURCE_BROKER => image.resource_configs(&ConfigResource::Broker(name.to_string())),
        RESOURCE_GROUP => image.resource_configs(&ConfigResource::Group(name.to_string())),
        _ => return Vec::new(),
    };
    configs.keys().cloned().collect()
}

/// Kafka's checks before anything else: a resource named twice in one request is refused
/// (both times); so are repeated keys and null values.
fn duplicated(resources: &[(i8, String)]) -> BTreeSet<(i8, String)> {
    let mut seen = BTreeSet::new();
    let mut twice = BTreeSet::new();
    for r in resources {
        if !seen.insert(r.clone()) {
            twice.insert(r.clone());
        }
    }
    twice
}

fn check_keys<'a>(keys: impl Iterator<Item = (&'a str, bool)>) -> Result<(), Refusal> {
    let mut seen = BTreeSet::new();
    let mut nulls = Vec::new();
    for (key, null) in keys {
        if !seen.insert(key) {
            return Err((
                ResponseError::InvalidRequest,
                "Error due to duplicate config keys".into(),
            ));
        }
        if null {
            nulls.push(key);
        }
    }
    if !nulls.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            format!("Null value not supported for : {}", nulls.join(", ")),
        ));
    }
    Ok(())
}

const TWICE: &str = "Each resource must appear at most once.";

fn answer(
    resource_type: i8,
    name: StrBytes,
    outcome: Result<(), Refusal>,
) -> AlterConfigsResourceResponse {
    // As Kafka: a null message on success (the schema default is "").
    let mut r = AlterConfigsResourceResponse::default()
        .with_resource_type(resource_type)
        .with_resource_name(name)
        .with_error_message(None);
    if let Err((code, why)) = outcome {
        r.error_code = code.code();
        r.error_message = Some(StrBytes::from_string(why));
    }
    r
}

/// Legacy AlterConfigs: the given set replaces all of the resource's stored configs.
pub(crate) async fn alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let authz = broker.authz(ctx);
    let ids: Vec<(i8, String)> = req
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.to_string()))
        .collect();
    let twice = duplicated(&ids);
    let mut responses = Vec::with_capacity(req.resources.len());
    for (resource, id) in req.resources.into_iter().zip(ids) {
        let name = id.1.clone();
        let allowed = authz.config_resource(resource.resource_type, &name, Operation::AlterConfigs);
        let outcome = if twice.contains(&id) {
            Err((ResponseError::InvalidRequest, TWICE.to_string()))
        } else if let Err(refusal) = allowed {
            Err(refusal)
        } else {
            match check_keys(
                resource
                    .configs
                    .iter()
                    .map(|c| (c.name.as_str(), c.value.is_none())),
            ) {
                Err(refusal) => Err(refusal),
                Ok(()) => {
                    let mut changes: BTreeMap<String, Option<String>> =
                        stored_keys(broker, resource.resource_type, &name)
                            .into_iter()
                            .map(|k| (k, None))
                            .collect();
                    for c in resource.configs {
                        changes.insert(c.name.to_string(), c.value.map(|v| v.to_string()));
                    }
                    change(
                        broker,
                        ctx,
                        resource.resource_type,
                        &name,
                        changes,
                        req.validate_only,
                    )
                    .await
                }
            }
        };
        responses.push(answer(
            resource.resource_type,
            resource.resource_name,
            outcome,
        ));
    }
    AlterConfigsResponse::default().with_responses(responses)
}

/// The value APPEND and SUBTRACT start from, per resource type as Kafka takes it: a topic's
/// effective value; a broker resource's own stored value, else the key's Kafka default (not
/// the static file's); group configs have no list keys.
fn list_base(
    (controller, node): (&Controller, i32),
    image: &MetadataImage,
    resource_type: i8,
    name: &str,
    key: &str,
    op: i8,
) -> Result<String, Refusal> {
    match resource_type {
        RESOURCE_TOPIC => {
            if !LIST_KEYS.contains(&key) {
                return Err(not_a_list(op, key));
            }
            let current = image
                .topic(name)
                .map(|t| {
                    controller
                        .topic_config_on(image, node, t)
                        .entries()
                        .into_iter()
                        .find(|(k, _)| *k == key)
                        .map(|(_, v)| v)
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            Ok(current)
        }
        RESOURCE_BROKER => {
            let stored = image
                .resource_configs(&ConfigResource::Broker(name.to_string()))
                .get(key)
                .cloned();
            match dynamic_broker::list_key(key) {
                ListKey::List(default) => Ok(stored.unwrap_or_else(|| default.to_string())),
                ListKey::NotList => Err(not_a_list(op, key)),
                ListKey::Unknown => Err((
                    ResponseError::InvalidConfig,
                    format!("Unknown config name: {key}"),
                )),
            }
        }
        _ => Err(not_a_list(op, key)),
    }
}

/// One IncrementalAlterConfigs operation on a key: SET (or DELETE, `None`), or APPEND/SUBTRACT
/// of a value, worked out on the list the decision's image holds.
enum KeyChange {
    Set(Option<String>),
    List(i8, Option<String>),
}

pub(crate) async fn incremental_alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let authz = broker.authz(ctx);
    let ids: Vec<(i8, String)> = req
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.to_string()))
        .collect();
    let here = (&broker.controller, broker.config.node_id);
    let twice = duplicated(&ids);
    let mut responses = Vec::with_capacity(req.resources.len());
    for (resource, id) in req.resources.into_iter().zip(ids) {
        let name = id.1.clone();
        let kind = resource.resource_type;
        let allowed = authz.config_resource(kind, &name, Operation::AlterConfigs);
        let prepared = if twice.contains(&id) {
            Err((ResponseError::InvalidRequest, TWICE.to_string()))
        } else if let Err(refusal) = allowed {
            Err(refusal)
        } else {
            check_keys(resource.configs.iter().map(|c| {
                (
                    c.name.as_str(),
                    c.config_operation != OP_DELETE && c.value.is_none(),
                )
            }))
            .and_then(|()| {
                resource
                    .configs
                    .iter()
                    .map(|c| {
                        let key = c.name.to_string();
                        match c.config_operation {
                            OP_SET => {
                                Ok((key, KeyChange::Set(c.value.as_ref().map(|v| v.to_string()))))
                            }
                            OP_DELETE => Ok((key, KeyChange::Set(None))),
                            op @ (OP_APPEND | OP_SUBTRACT) => {
                                // Refused now if it is no list key (the answer needs no lock).
                                list_base(here, &broker.image(), kind, &name, &key, op)?;
                                let value = c.value.as_ref().map(|v| v.to_string());
                                Ok((key, KeyChange::List(op, value)))
                            }
                            op => Err((
                                ResponseError::InvalidRequest,
                                format!("Unknown operations type {op}"),
                            )),
                        }
                    })
                    .collect::<Result<BTreeMap<_, _>, _>>()
            })
        };
        let outcome = match prepared {
            Ok(ops) => {
                let decide = |controller: &Controller, image: &MetadataImage| {
                    let node = broker.config.node_id;
                    let mut changes = BTreeMap::new();
                    for (key, op) in ops {
                        let value = match op {
                            KeyChange::Set(value) => value,
                            KeyChange::List(op, value) => {
                                let now =
                                    list_base((controller, node), image, kind, &name, &key, op)
                                        .map_err(|(_, why)| ControllerError::InvalidConfig(why))?;
                                Some(list_change(&now, op, value.as_deref()))
                            }
                        };
                        changes.insert(key, value);
                    }
                    Ok(changes)
                };
                change_from(broker, ctx, kind, &name, req.validate_only, decide).await
            }
            Err(refusal) => Err(refusal),
        };
        // Same fields as AlterConfigs' answer, but a distinct generated type.
        let a = answer(kind, resource.resource_name, outcome);
        responses.push(
            kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(a.error_code)
                .with_error_message(a.error_message)
                .with_resource_type(a.resource_type)
                .with_resource_name(a.resource_name),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_and_subtract_as_kafka_computes_them() {
        assert_eq!(
            list_change("delete", OP_APPEND, Some("compact")),
            "delete,compact"
        );
        assert_eq!(list_change("delete", OP_APPEND, Some("delete")), "delete");
        assert_eq!(
            list_change("compact,delete", OP_SUBTRACT, Some("compact")),
            "delete"
        );
        // An empty result is left to config validation to refuse.
        assert_eq!(list_change("delete", OP_SUBTRACT, Some("delete")), "");
        let (code, why) = not_a_list(OP_APPEND, "retention.ms");
        assert_eq!(code, ResponseError::InvalidConfig);
        assert_eq!(
            why,
            "Config value append is not allowed for config key: retention.ms"
        );
    }

    #[test]
    fn repeated_resources_keys_and_null_values_are_refused() {
        let ids = [
            (2, "t".to_string()),
            (4, "1".to_string()),
            (2, "t".to_string()),
        ];
        assert_eq!(duplicated(&ids), BTreeSet::from([(2, "t".to_string())]));
        assert!(check_keys([("a", false), ("b", false)].into_iter()).is_ok());
        assert_eq!(
            check_keys([("a", false), ("a", false)].into_iter())
                .unwrap_err()
                .1,
            "Error due to duplicate config keys"
        );
        assert_eq!(
            check_keys([("a", true)].into_iter()).unwrap_err(),
            (
                ResponseError::InvalidRequest,
                "Null value not supported for : a".to_string()
            )
        );
    }
}
