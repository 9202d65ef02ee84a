//! Client quotas: DescribeClientQuotas and AlterClientQuotas, for `weir configs
//! --entity-type users|clients` (as `kafka-configs.sh`).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;

use super::{check, Client, ClientError, Result};

const VERSION: i16 = 1;

/// An entity as Kafka lists it: (entity type, name or `None` for the default), e.g.
/// `[("user", Some("alice")), ("client-id", None)]`.
pub type QuotaEntityParts = Vec<(String, Option<String>)>;

/// How a describe filter matches one entity type (Kafka's `ClientQuotaFilterComponent`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuotaMatch {
    Exact(String),
    Default,
    Any,
}

impl Client {
    /// The entities matching every component (and, with `strict`, no other entity type),
    /// with their quota values.
    pub async fn describe_client_quotas(
        &mut self,
        components: &[(String, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<(QuotaEntityParts, BTreeMap<String, f64>)>> {
        let components = components
            .iter()
            .map(|(t, m)| {
                let (match_type, name) = match m {
                    QuotaMatch::Exact(n) => (0, Some(StrBytes::from_string(n.clone()))),
                    QuotaMatch::Default => (1, None),
                    QuotaMatch::Any => (2, None),
                };
                ComponentData::default()
                    .with_entity_type(StrBytes::from_string(t.clone()))
                    .with_match_type(match_type)
                    .with_match(name)
            })
            .collect();
        let request = DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict);
        let response = self.call(&request, VERSION).await?;
        check(response.error_code, response.error_message.as_ref())?;
        Ok(response
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|e| {
                let entity = e
                    .entity
                    .into_iter()
                    .map(|p| {
                        (
                            p.entity_type.to_string(),
                            p.entity_name.map(|n| n.to_string()),
                        )
                    })
                    .collect();
                let values = e
                    .values
                    .into_iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect();
                (entity, values)
            })
            .collect())
    }

    /// Sets (`Some`) or removes (`None`) quota keys of one entity.
    pub async fn alter_client_quotas(
        &mut self,
        entity: &QuotaEntityParts,
        ops: &BTreeMap<String, Option<f64>>,
    ) -> Result<()> {
        let entry = EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(t, n)| {
                        EntityData::default()
                            .with_entity_type(StrBytes::from_string(t.clone()))
                            .with_entity_name(n.clone().map(StrBytes::from_string))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(k, v)| {
                        OpData::default()
                            .with_key(StrBytes::from_string(k.clone()))
                            .with_value(v.unwrap_or(0.0))
                            .with_remove(v.is_none())
                    })
                    .collect(),
            );
        let request = AlterClientQuotasRequest::default()
            .with_entries(vec![entry])
            .with_validate_only(false);
        let response = self.call(&request, VERSION).await?;
        let result = response
            .entries
            .first()
            .ok_or_else(|| ClientError::Protocol("empty AlterClientQuotas response".into()))?;
        check(result.error_code, result.error_message.as_ref())
    }
}
