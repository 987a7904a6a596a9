//! DescribeAcls, CreateAcls and DeleteAcls (`kafka-acls`, the AdminClient's ACL calls)
//! while no authorizer is configured: Kafka answers each with SECURITY_DISABLED and "No
//! Authorizer is configured.", so a client fails at once instead of retrying. (A config
//! naming an authorizer does not start: security settings that are not enforced stop the
//! start, issue 15.)

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{HandlerError, Outcome, Request};

/// Kafka's message when no authorizer is configured.
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

fn refused(request: &Request) -> (i16, Option<StrBytes>) {
    tracing::debug!(client = %request.client, api = ?request.api_key,
        "ACL request refused: no authorizer is configured");
    (
        refusal_error(Refusal::SecurityDisabled).code(),
        Some(StrBytes::from_static_str(NO_AUTHORIZER)),
    )
}

/// Answers DescribeAcls: SECURITY_DISABLED.
pub fn describe(request: &Request) -> Result<Outcome, HandlerError> {
    let _: DescribeAclsRequest = request.decode()?;
    let (code, message) = refused(request);
    request.respond(
        &DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(message),
    )
}

/// Answers CreateAcls: SECURITY_DISABLED for every creation.
pub fn create(request: &Request) -> Result<Outcome, HandlerError> {
    let body: CreateAclsRequest = request.decode()?;
    let (code, message) = refused(request);
    let results = body
        .creations
        .iter()
        .map(|_| {
            AclCreationResult::default()
                .with_error_code(code)
                .with_error_message(message.clone())
        })
        .collect();
    request.respond(&CreateAclsResponse::default().with_results(results))
}

/// Answers DeleteAcls: SECURITY_DISABLED for every filter.
pub fn delete(request: &Request) -> Result<Outcome, HandlerError> {
    let body: DeleteAclsRequest = request.decode()?;
    let (code, message) = refused(request);
    let results = body
        .filters
        .iter()
        .map(|_| {
            DeleteAclsFilterResult::default()
                .with_error_code(code)
                .with_error_message(message.clone())
        })
        .collect();
    request.respond(&DeleteAclsResponse::default().with_filter_results(results))
}
