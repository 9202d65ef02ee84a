//! CreateAcls, DescribeAcls, DeleteAcls. Without an authorizer (`authorizer.class.name` empty)
//! they are answered as Kafka answers them then: `SECURITY_DISABLED`, for the request
//! (DescribeAcls) or for each creation and filter. With one, DescribeAcls (DESCRIBE on the
//! cluster) reads the local image; CreateAcls and DeleteAcls (ALTER on the cluster) are
//! decided by the active controller (`controller::acls`) and committed as metadata records,
//! which every node applies to its image.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::acl::{AclBinding, AclFilter, Operation, RawBinding};
use crate::broker::api::RequestContext;
use crate::broker::{errors, shared::Broker};
use crate::controller::acls as decide;

const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";
const CLUSTER_DENIED: &str = "Cluster authorization failed.";

fn text(s: &str) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.to_string()))
}

fn string(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeAclsRequest,
) -> DescribeAclsResponse {
    let refuse = |code: ResponseError, message: &str| {
        DescribeAclsResponse::default()
            .with_error_code(code.code())
            .with_error_message(text(message))
    };
    if !broker.has_authorizer() {
        return refuse(ResponseError::SecurityDisabled, NO_AUTHORIZER);
    }
    if !broker.authz(ctx).cluster(Operation::Describe) {
        return refuse(ResponseError::ClusterAuthorizationFailed, CLUSTER_DENIED);
    }
    let filter = match AclFilter::from_codes(
        req.resource_type_filter,
        string(&req.resource_name_filter),
        req.pattern_type_filter,
        string(&req.principal_filter),
        string(&req.host_filter),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(e) => return refuse(ResponseError::InvalidRequest, e.0),
    };
    let image = broker.image();
    // One resource entry per (type, name, pattern), in that order.
    let mut resources: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for (_, b) in image.acls().matching(&filter) {
        resources
            .entry((
                b.resource_type.code(),
                b.resource_name.clone(),
                b.pattern_type.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(StrBytes::from_string(b.principal.clone()))
                    .with_host(StrBytes::from_string(b.host.clone()))
                    .with_operation(b.operation.code())
                    .with_permission_type(b.permission.code()),
            );
    }
    DescribeAclsResponse::default().with_resources(
        resources
            .into_iter()
            .map(|((resource_type, name, pattern_type), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(StrBytes::from_string(name))
                    .with_pattern_type(pattern_type)
                    .with_acls(acls)
            })
            .collect(),
    )
}

/// Why CreateAcls or DeleteAcls is refused before it is looked at: no authorizer (as Kafka
/// without one), or no ALTER on the cluster.
fn change_refused(broker: &Broker, ctx: &RequestContext) -> Option<(ResponseError, &'static str)> {
    if !broker.has_authorizer() {
        Some((ResponseError::SecurityDisabled, NO_AUTHORIZER))
    } else if !broker.authz(ctx).cluster(Operation::Alter) {
        Some((ResponseError::ClusterAuthorizationFailed, CLUSTER_DENIED))
    } else {
        None
    }
}

pub(crate) async fn create(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreateAclsRequest,
) -> CreateAclsResponse {
    let all = |code: ResponseError, message: Option<StrBytes>| {
        let results = req
            .creations
            .iter()
            .map(|_| {
                AclCreationResult::default()
                    .with_error_code(code.code())
                    .with_error_message(message.clone())
            })
            .collect();
        CreateAclsResponse::default().with_results(results)
    };
    if let Some((code, why)) = change_refused(broker, ctx) {
        return all(code, text(why));
    }
    let creations: Vec<_> = req
        .creations
        .iter()
        .map(|c| {
            AclBinding::from_raw(&RawBinding {
                resource_type: c.resource_type,
                resource_name: &c.resource_name,
                pattern_type: c.resource_pattern_type,
                principal: &c.principal,
                host: &c.host,
                operation: c.operation,
                permission: c.permission_type,
            })
        })
        .collect();
    let rng = broker.io.rng.clone();
    let decided = broker
        .change_metadata_until(Some(ctx.deadline), false, move |_, image| {
            let ids = || Uuid::from_u64_pair(rng.next_u64(), rng.next_u64());
            decide::create_acls(image, creations, ids)
        })
        .await;
    match decided {
        Ok(results) => CreateAclsResponse::default().with_results(
            results
                .into_iter()
                .map(|r| match r {
                    Ok(()) => AclCreationResult::default(),
                    Err(e) => AclCreationResult::default()
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(text(&e.0)),
                })
                .collect(),
        ),
        Err(e) => all(errors::commit(&e), text(&e.to_string())),
    }
}

pub(crate) async fn delete(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let all = |code: ResponseError, message: Option<StrBytes>| {
        let results = req
            .filters
            .iter()
            .map(|_| {
                DeleteAclsFilterResult::default()
                    .with_error_code(code.code())
                    .with_error_message(message.clone())
            })
            .collect();
        DeleteAclsResponse::default().with_filter_results(results)
    };
    if let Some((code, why)) = change_refused(broker, ctx) {
        return all(code, text(why));
    }
    let filters: Vec<_> = req
        .filters
        .iter()
        .map(|f| {
            AclFilter::from_codes(
                f.resource_type_filter,
                string(&f.resource_name_filter),
                f.pattern_type_filter,
                string(&f.principal_filter),
                string(&f.host_filter),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let decided = broker
        .change_metadata_until(Some(ctx.deadline), false, move |_, image| {
            decide::delete_acls(image, filters)
        })
        .await;
    match decided {
        Ok(results) => DeleteAclsResponse::default().with_filter_results(
            results
                .into_iter()
                .map(|r| match r {
                    Ok(matched) => DeleteAclsFilterResult::default()
                        .with_matching_acls(matched.iter().map(matching).collect()),
                    Err(e) => DeleteAclsFilterResult::default()
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(text(e.0)),
                })
                .collect(),
        ),
        Err(e) => all(errors::commit(&e), text(&e.to_string())),
    }
}

fn matching(b: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(b.resource_type.code())
        .with_resource_name(StrBytes::from_string(b.resource_name.clone()))
        .with_pattern_type(b.pattern_type.code())
        .with_principal(StrBytes::from_string(b.principal.clone()))
        .with_host(StrBytes::from_string(b.host.clone()))
        .with_operation(b.operation.code())
        .with_permission_type(b.permission.code())
}
