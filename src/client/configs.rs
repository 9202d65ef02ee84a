//! Configs of topics and brokers: DescribeConfigs and IncrementalAlterConfigs, for
//! `weir configs` (as `kafka-configs.sh`), `weir topics describe` and the simulator's admin
//! workload.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::{check, Client, ClientError, Result};

const INCREMENTAL_ALTER_CONFIGS_VERSION: i16 = 1;
const DESCRIBE_CONFIGS_VERSION: i16 = 4;

/// What a config belongs to, as Kafka's `ConfigResource` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigResource {
    Topic(String),
    /// One broker's own (per-broker) configs.
    Broker(i32),
    /// The cluster-wide default of every broker (resource name "").
    BrokerDefault,
    /// A consumer group's configs (KIP-848: `consumer.session.timeout.ms`,
    /// `consumer.heartbeat.interval.ms`); the group need not exist.
    Group(String),
}

impl ConfigResource {
    /// Kafka's resource type code (2: topic, 4: broker, 32: group).
    fn kind(&self) -> i8 {
        match self {
            ConfigResource::Topic(_) => 2,
            ConfigResource::Broker(_) | ConfigResource::BrokerDefault => 4,
            ConfigResource::Group(_) => 32,
        }
    }

    fn name(&self) -> String {
        match self {
            ConfigResource::Topic(t) => t.clone(),
            ConfigResource::Broker(id) => id.to_string(),
            ConfigResource::BrokerDefault => String::new(),
            ConfigResource::Group(g) => g.clone(),
        }
    }

    /// The source of the values set on this resource itself (what `kafka-configs.sh
    /// --describe` lists as its dynamic configs).
    pub fn own_source(&self) -> ConfigSource {
        match self {
            ConfigResource::Topic(_) => ConfigSource::DynamicTopic,
            ConfigResource::Broker(_) => ConfigSource::DynamicBroker,
            ConfigResource::BrokerDefault => ConfigSource::DynamicDefaultBroker,
            ConfigResource::Group(_) => ConfigSource::Group,
        }
    }
}

/// Kafka's `ConfigSource`: where a described value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum ConfigSource {
    #[serde(rename = "UNKNOWN")]
    Unknown,
    #[serde(rename = "DYNAMIC_TOPIC_CONFIG")]
    DynamicTopic,
    #[serde(rename = "DYNAMIC_BROKER_CONFIG")]
    DynamicBroker,
    #[serde(rename = "DYNAMIC_DEFAULT_BROKER_CONFIG")]
    DynamicDefaultBroker,
    #[serde(rename = "STATIC_BROKER_CONFIG")]
    StaticBroker,
    #[serde(rename = "DEFAULT_CONFIG")]
    Default,
    #[serde(rename = "DYNAMIC_BROKER_LOGGER_CONFIG")]
    DynamicBrokerLogger,
    #[serde(rename = "CLIENT_METRICS_CONFIG")]
    ClientMetrics,
    #[serde(rename = "GROUP_CONFIG")]
    Group,
}

impl ConfigSource {
    pub fn from_code(code: i8) -> ConfigSource {
        match code {
            1 => ConfigSource::DynamicTopic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            6 => ConfigSource::DynamicBrokerLogger,
            7 => ConfigSource::ClientMetrics,
            8 => ConfigSource::Group,
            _ => ConfigSource::Unknown,
        }
    }

    /// As Kafka's tools print it (`DYNAMIC_TOPIC_CONFIG`, `DEFAULT_CONFIG`, ...).
    pub fn label(self) -> &'static str {
        match self {
            ConfigSource::Unknown => "UNKNOWN",
            ConfigSource::DynamicTopic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
            ConfigSource::DynamicBrokerLogger => "DYNAMIC_BROKER_LOGGER_CONFIG",
            ConfigSource::ClientMetrics => "CLIENT_METRICS_CONFIG",
            ConfigSource::Group => "GROUP_CONFIG",
        }
    }
}

/// One entry of a DescribeConfigs answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    /// `None` for a sensitive value (never sent) or one with no value.
    pub value: Option<String>,
    /// Kafka's `ConfigSource` code (1: a topic override, 5: the broker's default, ...).
    pub source: i8,
    pub sensitive: bool,
    pub read_only: bool,
}

impl Client {
    /// Every config of `resource` with its value and source (DescribeConfigs), by name.
    pub async fn describe_configs(
        &mut self,
        resource: &ConfigResource,
    ) -> Result<BTreeMap<String, ConfigEntry>> {
        let request = DescribeConfigsRequest::default()
            .with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(resource.kind())
                .with_resource_name(StrBytes::from_string(resource.name()))
                .with_configuration_keys(None)])
            .with_include_synonyms(false)
            .with_include_documentation(false);
        let response = self.call(&request, DESCRIBE_CONFIGS_VERSION).await?;
        let result = response
            .results
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Protocol("empty DescribeConfigs response".into()))?;
        check(result.error_code, result.error_message.as_ref())?;
        Ok(result
            .configs
            .into_iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    ConfigEntry {
                        value: c.value.map(|v| v.to_string()),
                        source: c.config_source,
                        sensitive: c.is_sensitive,
                        read_only: c.read_only,
                    },
                )
            })
            .collect())
    }

    /// Sets configs of `resource` (IncrementalAlterConfigs, operation SET); `None` deletes
    /// one (operation DELETE). All of them or none, as one metadata change.
    pub async fn alter_configs(
        &mut self,
        resource: &ConfigResource,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<()> {
        const SET: i8 = 0;
        const DELETE: i8 = 1;
        let configs = changes
            .iter()
            .map(|(k, v)| {
                AlterableConfig::default()
                    .with_name(StrBytes::from_string(k.clone()))
                    .with_config_operation(if v.is_some() { SET } else { DELETE })
                    .with_value(v.clone().map(StrBytes::from_string))
            })
            .collect();
        let request = IncrementalAlterConfigsRequest::default()
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(resource.kind())
                .with_resource_name(StrBytes::from_string(resource.name()))
                .with_configs(configs)])
            .with_validate_only(false);
        let response = self
            .call(&request, INCREMENTAL_ALTER_CONFIGS_VERSION)
            .await?;
        let result = response.responses.first().ok_or_else(|| {
            ClientError::Protocol("empty IncrementalAlterConfigs response".into())
        })?;
        check(result.error_code, result.error_message.as_ref())
    }

    /// Sets topic config overrides; `None` deletes an override ([`Client::alter_configs`]).
    pub async fn alter_topic_configs(
        &mut self,
        topic: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<()> {
        self.alter_configs(&ConfigResource::Topic(topic.to_string()), changes)
            .await
    }

    /// Every config of `topic` with its value and source ([`Client::describe_configs`]).
    pub async fn describe_topic_configs(
        &mut self,
        topic: &str,
    ) -> Result<BTreeMap<String, ConfigEntry>> {
        self.describe_configs(&ConfigResource::Topic(topic.to_string()))
            .await
    }
}
