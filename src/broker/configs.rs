//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs. Topic configs are dynamic (stored
//! as metadata records); broker configs are static (server.properties) and read-only here.

use std::collections::BTreeMap;

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

use super::server::RequestContext;
use super::{errors, Broker};
use crate::acl::Operation;
use crate::config::TopicConfig;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

pub(super) const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
pub(super) const SOURCE_DEFAULT: i8 = 5;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Topic keys of Kafka's LIST type: the only ones APPEND and SUBTRACT apply to.
const LIST_KEYS: &[&str] = &["cleanup.policy"];

/// APPEND or SUBTRACT on a list key, against the topic's current value (its override, or the
/// default), as Kafka computes it: appended items not already there go at the end; subtracted
/// items are removed.
fn list_change(current: &str, op: i8, key: &str, value: Option<&str>) -> Result<String, String> {
    if !LIST_KEYS.contains(&key) {
        let verb = if op == OP_APPEND {
            "append"
        } else {
            "subtract"
        };
        return Err(format!(
            "Config value {verb} is not allowed for config key: {key}"
        ));
    }
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
    Ok(items.join(","))
}

/// Every topic-level key with its effective value and whether the topic overrides it.
pub(super) fn config_entries(
    effective: &TopicConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<(String, String, bool)> {
    effective
        .entries()
        .into_iter()
        .map(|(key, value)| (key.to_string(), value, overrides.contains_key(key)))
        .collect()
}

pub(super) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let authz = broker.authz(ctx);
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
            let entries: Vec<(String, String, i8)> = match resource.resource_type {
                RESOURCE_TOPIC => match broker.image().topic(&name) {
                    Some(topic) => {
                        config_entries(&broker.controller.topic_config(topic), &topic.configs)
                            .into_iter()
                            .map(|(k, v, o)| (k, v, if o { SOURCE_TOPIC } else { SOURCE_DEFAULT }))
                            .collect()
                    }
                    None => {
                        result.error_code = ResponseError::UnknownTopicOrPartition.code();
                        result.error_message =
                            Some(StrBytes::from_string(format!("unknown topic '{name}'")));
                        return result;
                    }
                },
                RESOURCE_BROKER if name.is_empty() || name == broker.config.node_id.to_string() => {
                    broker
                        .config
                        .broker_config_entries()
                        .into_iter()
                        .map(|(k, v)| (k, v, SOURCE_STATIC_BROKER))
                        .collect()
                }
                RESOURCE_BROKER => {
                    result.error_code = ResponseError::InvalidRequest.code();
                    result.error_message =
                        Some(StrBytes::from_string(format!("unknown broker '{name}'")));
                    return result;
                }
                other => {
                    result.error_code = ResponseError::InvalidRequest.code();
                    result.error_message = Some(StrBytes::from_string(format!(
                        "unsupported resource type {other}"
                    )));
                    return result;
                }
            };
            let wanted = resource
                .configuration_keys
                .map(|keys| keys.into_iter().map(|k| k.to_string()).collect::<Vec<_>>());
            result.configs = entries
                .into_iter()
                .filter(|(k, _, _)| wanted.as_ref().is_none_or(|w| w.contains(k)))
                .map(|(key, value, source)| {
                    let mut entry = DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_string(key))
                        .with_value(Some(StrBytes::from_string(value)))
                        .with_config_source(source)
                        .with_read_only(resource.resource_type == RESOURCE_BROKER);
                    // Kafka sends null documentation unless asked, and Weir has none to give.
                    entry.documentation = None;
                    entry
                })
                .collect();
            result
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Applies topic config changes (or only validates them). `Err` carries the answer to give.
async fn change_topic(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    changes: Result<BTreeMap<String, Option<String>>, String>,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    if resource_type == RESOURCE_BROKER {
        return Err((
            ResponseError::InvalidRequest,
            "broker configs are static in Weir: change server.properties and restart".into(),
        ));
    }
    if resource_type != RESOURCE_TOPIC {
        return Err((
            ResponseError::InvalidRequest,
            format!("unsupported resource type {resource_type}"),
        ));
    }
    let changes = changes.map_err(|why| (ResponseError::InvalidConfig, why))?;
    broker
        .change_metadata(validate_only, |controller, image| {
            Ok((
                vec![controller.alter_topic_config(image, name, changes)?],
                (),
            ))
        })
        .await
        .map_err(|e| (errors::commit(&e), e.to_string()))
}

fn answer(
    resource_type: i8,
    name: StrBytes,
    outcome: Result<(), (ResponseError, String)>,
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

/// Legacy AlterConfigs: the given set replaces all of the topic's overrides.
pub(super) async fn alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let authz = broker.authz(ctx);
    let mut responses = Vec::with_capacity(req.resources.len());
    for resource in req.resources {
        let name = resource.resource_name.to_string();
        let mut changes: BTreeMap<String, Option<String>> = broker
            .image()
            .topic(&name)
            .map(|t| t.configs.keys().map(|k| (k.clone(), None)).collect())
            .unwrap_or_default();
        for c in resource.configs {
            changes.insert(c.name.to_string(), c.value.map(|v| v.to_string()));
        }
        let outcome =
            match authz.config_resource(resource.resource_type, &name, Operation::AlterConfigs) {
                Err(e) => Err(e),
                Ok(()) => {
                    change_topic(
                        broker,
                        resource.resource_type,
                        &name,
                        Ok(changes),
                        req.validate_only,
                    )
                    .await
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

pub(super) async fn incremental_alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let authz = broker.authz(ctx);
    let mut responses = Vec::with_capacity(req.resources.len());
    for resource in req.resources {
        let name = resource.resource_name.to_string();
        let current: BTreeMap<String, String> = broker
            .image()
            .topic(&name)
            .map(|t| {
                broker
                    .controller
                    .topic_config(t)
                    .entries()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect()
            })
            .unwrap_or_default();
        let changes = resource
            .configs
            .into_iter()
            .map(|c| {
                let key = c.name.to_string();
                match c.config_operation {
                    OP_SET => Ok((key, c.value.map(|v| v.to_string()))),
                    OP_DELETE => Ok((key, None)),
                    op @ (OP_APPEND | OP_SUBTRACT) => {
                        let now = current.get(&key).map(String::as_str).unwrap_or("");
                        let value = list_change(now, op, &key, c.value.as_deref())?;
                        Ok((key, Some(value)))
                    }
                    op => Err(format!("unknown config operation {op} for '{key}'")),
                }
            })
            .collect::<Result<BTreeMap<_, _>, _>>();
        let outcome =
            match authz.config_resource(resource.resource_type, &name, Operation::AlterConfigs) {
                Err(e) => Err(e),
                Ok(()) => {
                    change_topic(
                        broker,
                        resource.resource_type,
                        &name,
                        changes,
                        req.validate_only,
                    )
                    .await
                }
            };
        // Same fields as AlterConfigs' answer, but a distinct generated type.
        let a = answer(resource.resource_type, resource.resource_name, outcome);
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
    fn append_and_subtract_on_list_keys_only() {
        let key = "cleanup.policy";
        assert_eq!(
            list_change("delete", OP_APPEND, key, Some("compact")).unwrap(),
            "delete,compact"
        );
        assert_eq!(
            list_change("delete", OP_APPEND, key, Some("delete")).unwrap(),
            "delete"
        );
        assert_eq!(
            list_change("compact,delete", OP_SUBTRACT, key, Some("compact")).unwrap(),
            "delete"
        );
        // An empty result is left to config validation to refuse.
        assert_eq!(
            list_change("delete", OP_SUBTRACT, key, Some("delete")).unwrap(),
            ""
        );
        let err = list_change("1000", OP_APPEND, "retention.ms", Some("5")).unwrap_err();
        assert_eq!(
            err,
            "Config value append is not allowed for config key: retention.ms"
        );
    }
}
