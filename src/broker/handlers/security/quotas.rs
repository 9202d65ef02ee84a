//! DescribeClientQuotas and AlterClientQuotas (KIP-546). Describe reads the local image;
//! Alter is decided by the active controller (`controller::quotas`, forwarded like other
//! metadata writes) and committed as `ClientQuota` records, which every broker's quota
//! enforcement reads (`crate::quota`). With an authorizer they need DESCRIBE_CONFIGS and
//! ALTER_CONFIGS on the cluster, as Kafka's.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::describe_client_quotas_response as describe_response;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::acl::Operation;
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};
use crate::controller::quotas::{self as decide, FilterComponent, QuotaAlteration, QuotaOp};

fn text(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

const DENIED: &str = "Cluster authorization failed.";

pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    if !broker.authz(ctx).cluster(Operation::DescribeConfigs) {
        return DescribeClientQuotasResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(text(DENIED));
    }
    let components: Vec<FilterComponent> = req
        .components
        .iter()
        .map(|c| FilterComponent {
            entity_type: c.entity_type.to_string(),
            match_type: c.match_type,
            name: c._match.as_ref().map(|m| m.to_string()),
        })
        .collect();
    match decide::describe(&broker.image(), &components, req.strict) {
        Err(why) => DescribeClientQuotasResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(text(why)),
        Ok(found) => DescribeClientQuotasResponse::default().with_entries(Some(
            found
                .into_iter()
                .map(|(entity, values)| {
                    describe_response::EntryData::default()
                        .with_entity(
                            entity
                                .parts()
                                .into_iter()
                                .map(|(t, n)| {
                                    describe_response::EntityData::default()
                                        .with_entity_type(StrBytes::from_static_str(t))
                                        .with_entity_name(
                                            n.map(|n| StrBytes::from_string(n.into())),
                                        )
                                })
                                .collect(),
                        )
                        .with_values(
                            values
                                .into_iter()
                                .map(|(k, v)| {
                                    describe_response::ValueData::default()
                                        .with_key(StrBytes::from_string(k))
                                        .with_value(v)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )),
    }
}

pub(crate) async fn alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    // Each answer entry names its entity as the request did.
    let entities: Vec<Vec<EntityData>> = req
        .entries
        .iter()
        .map(|e| {
            e.entity
                .iter()
                .map(|p| {
                    EntityData::default()
                        .with_entity_type(p.entity_type.clone())
                        .with_entity_name(p.entity_name.clone())
                })
                .collect()
        })
        .collect();
    let answer = |results: Vec<(ResponseError, Option<String>)>| {
        AlterClientQuotasResponse::default().with_entries(
            entities
                .iter()
                .zip(results)
                .map(|(entity, (code, message))| {
                    EntryData::default()
                        .with_entity(entity.clone())
                        .with_error_code(if message.is_some() { code.code() } else { 0 })
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect(),
        )
    };
    if !broker.authz(ctx).cluster(Operation::AlterConfigs) {
        let denied = (
            ResponseError::ClusterAuthorizationFailed,
            Some(DENIED.into()),
        );
        return answer(vec![denied; entities.len()]);
    }
    let alterations: Vec<QuotaAlteration> = req
        .entries
        .iter()
        .map(|e| QuotaAlteration {
            entity: e
                .entity
                .iter()
                .map(|p| {
                    let name = p.entity_name.as_ref().map(|n| n.to_string());
                    (p.entity_type.to_string(), name)
                })
                .collect(),
            ops: e
                .ops
                .iter()
                .map(|o| QuotaOp {
                    key: o.key.to_string(),
                    value: o.value,
                    remove: o.remove,
                })
                .collect(),
        })
        .collect();
    let validate_only = req.validate_only;
    let decided = broker
        .change_metadata_until(Some(ctx.deadline), validate_only, move |_, image| {
            Ok(decide::alter(image, alterations, validate_only))
        })
        .await;
    match decided {
        Ok(results) => answer(
            results
                .into_iter()
                .map(|r| (ResponseError::InvalidRequest, r.err()))
                .collect(),
        ),
        Err(e) => {
            let failed = (errors::commit(&e), Some(e.to_string()));
            answer(vec![failed; entities.len()])
        }
    }
}
