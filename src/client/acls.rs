//! ACLs: CreateAcls, DescribeAcls and DeleteAcls over the `acl` module's bindings and filters,
//! for `weir acls` (as `kafka-acls.sh`).

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use super::{check, Client, ClientError, Result};
use crate::acl::{
    AclBinding, AclFilter, Operation, PatternFilter, Permission, RawBinding, ResourceType,
};

const ACLS_VERSION: i16 = 3;
/// ANY, in every ACL enum of the wire.
const ANY: i8 = 1;
const MATCH: i8 = 2;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A filter's wire codes: (resource type, pattern type, operation, permission).
fn codes(f: &AclFilter) -> (i8, i8, i8, i8) {
    (
        f.resource_type.map_or(ANY, ResourceType::code),
        match f.pattern {
            PatternFilter::Any => ANY,
            PatternFilter::Match => MATCH,
            PatternFilter::Exactly(p) => p.code(),
        },
        f.operation.map_or(ANY, Operation::code),
        f.permission.map_or(ANY, Permission::code),
    )
}

/// A binding from an answer's codes; a code this client does not know is a protocol error.
fn binding(
    resource_type: i8,
    resource_name: &str,
    pattern_type: i8,
    principal: &str,
    host: &str,
    operation: i8,
    permission: i8,
) -> Result<AclBinding> {
    AclBinding::from_raw(&RawBinding {
        resource_type,
        resource_name,
        pattern_type,
        principal,
        host,
        operation,
        permission,
    })
    .map_err(|e| ClientError::Protocol(format!("an ACL in the answer: {}", e.0)))
}

impl Client {
    /// Creates `bindings`, all or each with its own error (the first is returned).
    pub async fn create_acls(&mut self, bindings: &[AclBinding]) -> Result<()> {
        let creations = bindings
            .iter()
            .map(|b| {
                AclCreation::default()
                    .with_resource_type(b.resource_type.code())
                    .with_resource_name(text(&b.resource_name))
                    .with_resource_pattern_type(b.pattern_type.code())
                    .with_principal(text(&b.principal))
                    .with_host(text(&b.host))
                    .with_operation(b.operation.code())
                    .with_permission_type(b.permission.code())
            })
            .collect();
        let request = CreateAclsRequest::default().with_creations(creations);
        let response = self.call(&request, ACLS_VERSION).await?;
        for r in &response.results {
            check(r.error_code, r.error_message.as_ref())?;
        }
        Ok(())
    }

    /// Every binding `filter` matches, sorted.
    pub async fn describe_acls(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        let (resource_type, pattern, operation, permission) = codes(filter);
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(resource_type)
            .with_resource_name_filter(filter.resource_name.as_deref().map(text))
            .with_pattern_type_filter(pattern)
            .with_principal_filter(filter.principal.as_deref().map(text))
            .with_host_filter(filter.host.as_deref().map(text))
            .with_operation(operation)
            .with_permission_type(permission);
        let response = self.call(&request, ACLS_VERSION).await?;
        check(response.error_code, response.error_message.as_ref())?;
        let mut out = Vec::new();
        for r in &response.resources {
            for a in &r.acls {
                out.push(binding(
                    r.resource_type,
                    &r.resource_name,
                    r.pattern_type,
                    &a.principal,
                    &a.host,
                    a.operation,
                    a.permission_type,
                )?);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Deletes every binding `filter` matches; the deleted bindings, sorted.
    pub async fn delete_acls(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        let (resource_type, pattern, operation, permission) = codes(filter);
        let request = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(resource_type)
            .with_resource_name_filter(filter.resource_name.as_deref().map(text))
            .with_pattern_type_filter(pattern)
            .with_principal_filter(filter.principal.as_deref().map(text))
            .with_host_filter(filter.host.as_deref().map(text))
            .with_operation(operation)
            .with_permission_type(permission)]);
        let response = self.call(&request, ACLS_VERSION).await?;
        let result = response
            .filter_results
            .first()
            .ok_or_else(|| ClientError::Protocol("empty DeleteAcls response".into()))?;
        check(result.error_code, result.error_message.as_ref())?;
        let mut out = Vec::new();
        for m in &result.matching_acls {
            check(m.error_code, m.error_message.as_ref())?;
            out.push(binding(
                m.resource_type,
                &m.resource_name,
                m.pattern_type,
                &m.principal,
                &m.host,
                m.operation,
                m.permission_type,
            )?);
        }
        out.sort();
        Ok(out)
    }
}
