//! CreateAcls, DescribeAcls, DeleteAcls. Weir has no authorizer, and answers these as Kafka does
//! when none is configured: `SECURITY_DISABLED`, for the request (DescribeAcls) or for each
//! creation and filter, so admin clients get a clear error instead of a closed connection.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

fn message() -> Option<StrBytes> {
    Some(StrBytes::from_static_str(NO_AUTHORIZER))
}

pub(super) fn describe(_req: DescribeAclsRequest) -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_error_code(ResponseError::SecurityDisabled.code())
        .with_error_message(message())
}

pub(super) fn create(req: CreateAclsRequest) -> CreateAclsResponse {
    let results = req
        .creations
        .iter()
        .map(|_| {
            AclCreationResult::default()
                .with_error_code(ResponseError::SecurityDisabled.code())
                .with_error_message(message())
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

pub(super) fn delete(req: DeleteAclsRequest) -> DeleteAclsResponse {
    let results = req
        .filters
        .iter()
        .map(|_| {
            DeleteAclsFilterResult::default()
                .with_error_code(ResponseError::SecurityDisabled.code())
                .with_error_message(message())
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
