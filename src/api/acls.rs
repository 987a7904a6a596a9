//! DescribeAcls, CreateAcls and DeleteAcls (`kafka-acls`, the AdminClient's ACL calls).
//! With Kafka's StandardAuthorizer configured, bindings are listed (cluster DESCRIBE),
//! created and deleted (cluster ALTER) through the metadata log, as KRaft keeps them. While
//! no authorizer is configured Kafka answers each with SECURITY_DISABLED and "No Authorizer
//! is configured.", so a client fails at once instead of retrying.

use kafka_protocol::messages::create_acls_request::AclCreation;
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

use super::errors::{controller_error, refusal_error};
use super::refusal::Refusal;
use super::{Broker, HandlerError, Outcome, Request};
use crate::acl::{AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType};
use crate::controller::{AclOutcome, ControllerError, ControllerRequest};

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

/// The filter of a DescribeAcls request or DeleteAcls filter, if its codes are valid.
fn filter(
    (resource_type, name, pattern_type): (i8, Option<&StrBytes>, i8),
    (principal, host): (Option<&StrBytes>, Option<&StrBytes>),
    (operation, permission): (i8, i8),
) -> Option<AclFilter> {
    Some(AclFilter {
        resource_type: ResourceType::from_code(resource_type)?,
        name: name.map(ToString::to_string),
        pattern_type: PatternType::from_code(pattern_type)?,
        principal: principal.map(ToString::to_string),
        host: host.map(ToString::to_string),
        operation: Operation::from_code(operation)?,
        permission: Permission::from_code(permission)?,
    })
}

/// The error of a caller not allowed to see or change ACLs (cluster DESCRIBE or ALTER).
fn cluster_refusal() -> (i16, Option<StrBytes>) {
    (
        refusal_error(Refusal::ClusterAuthorizationFailed).code(),
        Some(StrBytes::from_static_str("Cluster authorization failed.")),
    )
}

/// Answers DescribeAcls: the bindings the filter matches, grouped by resource pattern.
pub fn describe(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeAclsRequest = request.decode()?;
    if broker.has_authorizer() {
        let refused = |(code, message): (i16, Option<StrBytes>)| {
            DescribeAclsResponse::default()
                .with_error_code(code)
                .with_error_message(message)
        };
        if !broker.authorize_cluster(request, Operation::Describe) {
            return request.respond(&refused(cluster_refusal()));
        }
        let wanted = filter(
            (
                body.resource_type_filter,
                body.resource_name_filter.as_ref(),
                body.pattern_type_filter,
            ),
            (body.principal_filter.as_ref(), body.host_filter.as_ref()),
            (body.operation, body.permission_type),
        );
        let Some(wanted) = wanted else {
            let code = refusal_error(Refusal::InvalidRequest).code();
            let message = Some(StrBytes::from_static_str("Invalid ACL filter"));
            return request.respond(&refused((code, message)));
        };
        let image = broker.image();
        let mut resources: Vec<DescribeAclsResource> = Vec::new();
        for binding in image.acls.iter().filter(|b| wanted.matches(b)) {
            let description = AclDescription::default()
                .with_principal(StrBytes::from(binding.principal.clone()))
                .with_host(StrBytes::from(binding.host.clone()))
                .with_operation(binding.operation as i8)
                .with_permission_type(binding.permission as i8);
            let same = |r: &&mut DescribeAclsResource| {
                r.resource_type == binding.resource_type as i8
                    && r.resource_name.as_str() == binding.name
                    && r.pattern_type == binding.pattern_type as i8
            };
            match resources.iter_mut().find(same) {
                Some(resource) => resource.acls.push(description),
                None => resources.push(
                    DescribeAclsResource::default()
                        .with_resource_type(binding.resource_type as i8)
                        .with_resource_name(StrBytes::from(binding.name.clone()))
                        .with_pattern_type(binding.pattern_type as i8)
                        .with_acls(vec![description]),
                ),
            }
        }
        return request.respond(&DescribeAclsResponse::default().with_resources(resources));
    }
    let (code, message) = refused(request);
    request.respond(
        &DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(message),
    )
}

/// The binding a creation asks for, if its codes are valid.
fn binding(c: &AclCreation) -> Option<AclBinding> {
    Some(AclBinding {
        resource_type: ResourceType::from_code(c.resource_type)?,
        name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type)?,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation)?,
        permission: Permission::from_code(c.permission_type)?,
    })
}

/// Creates the bindings asked for through the active controller (the caller needs cluster
/// ALTER); each answered on its own.
async fn create_bindings(
    broker: &Broker,
    request: &Request,
    body: &CreateAclsRequest,
) -> Vec<AclCreationResult> {
    let error = |(code, message): (i16, Option<StrBytes>)| {
        AclCreationResult::default()
            .with_error_code(code)
            .with_error_message(message)
    };
    if !broker.authorize_cluster(request, Operation::Alter) {
        return body
            .creations
            .iter()
            .map(|_| error(cluster_refusal()))
            .collect();
    }
    let parsed: Vec<Option<AclBinding>> = body.creations.iter().map(binding).collect();
    let valid: Vec<AclBinding> = parsed.iter().flatten().cloned().collect();
    let outcomes = match broker
        .controller
        .ask::<Vec<AclOutcome>>(ControllerRequest::CreateAcls { bindings: valid })
        .await
    {
        Ok(outcomes) => outcomes,
        Err(error) => {
            tracing::warn!(client = %request.client, api = "CreateAcls", %error, "refused");
            let refused = (
                controller_error(&error).code(),
                Some(StrBytes::from(error.to_string())),
            );
            return body.creations.iter().map(|_| error_of(&refused)).collect();
        }
    };
    let mut outcomes = outcomes.into_iter();
    parsed
        .iter()
        .map(|p| match p {
            None => error((
                refusal_error(Refusal::InvalidRequest).code(),
                Some(StrBytes::from_static_str(
                    "Invalid ACL creation: an unknown code",
                )),
            )),
            Some(_) => match outcomes.next() {
                Some(Ok(())) | None => AclCreationResult::default(),
                Some(Err(remote)) => {
                    let e = ControllerError::from(remote);
                    error((
                        controller_error(&e).code(),
                        Some(StrBytes::from(e.to_string())),
                    ))
                }
            },
        })
        .collect()
}

fn error_of((code, message): &(i16, Option<StrBytes>)) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(*code)
        .with_error_message(message.clone())
}

/// Answers CreateAcls.
pub async fn create(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: CreateAclsRequest = request.decode()?;
    if broker.has_authorizer() {
        let results = create_bindings(broker, request, &body).await;
        return request.respond(&CreateAclsResponse::default().with_results(results));
    }
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

/// Deletes the bindings each filter matches through the active controller (the caller
/// needs cluster ALTER); per filter, the bindings it removed.
async fn delete_bindings(
    broker: &Broker,
    request: &Request,
    body: &DeleteAclsRequest,
) -> Vec<DeleteAclsFilterResult> {
    let refused = |(code, message): (i16, Option<StrBytes>)| {
        DeleteAclsFilterResult::default()
            .with_error_code(code)
            .with_error_message(message)
    };
    if !broker.authorize_cluster(request, Operation::Alter) {
        return body
            .filters
            .iter()
            .map(|_| refused(cluster_refusal()))
            .collect();
    }
    let parsed: Vec<Option<AclFilter>> = body
        .filters
        .iter()
        .map(|f| {
            filter(
                (
                    f.resource_type_filter,
                    f.resource_name_filter.as_ref(),
                    f.pattern_type_filter,
                ),
                (f.principal_filter.as_ref(), f.host_filter.as_ref()),
                (f.operation, f.permission_type),
            )
        })
        .collect();
    let valid: Vec<AclFilter> = parsed.iter().flatten().cloned().collect();
    let removed = match broker
        .controller
        .ask::<Vec<Vec<AclBinding>>>(ControllerRequest::DeleteAcls { filters: valid })
        .await
    {
        Ok(removed) => removed,
        Err(error) => {
            tracing::warn!(client = %request.client, api = "DeleteAcls", %error, "refused");
            let code = controller_error(&error).code();
            return body
                .filters
                .iter()
                .map(|_| refused((code, Some(StrBytes::from(error.to_string())))))
                .collect();
        }
    };
    let mut removed = removed.into_iter();
    parsed
        .iter()
        .map(|p| match p {
            None => refused((
                refusal_error(Refusal::InvalidRequest).code(),
                Some(StrBytes::from_static_str("Invalid ACL filter")),
            )),
            Some(_) => {
                let matching = removed
                    .next()
                    .unwrap_or_default()
                    .into_iter()
                    .map(matching_acl);
                DeleteAclsFilterResult::default().with_matching_acls(matching.collect())
            }
        })
        .collect()
}

/// A removed binding as DeleteAcls lists it.
fn matching_acl(b: AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(b.resource_type as i8)
        .with_resource_name(StrBytes::from(b.name))
        .with_pattern_type(b.pattern_type as i8)
        .with_principal(StrBytes::from(b.principal))
        .with_host(StrBytes::from(b.host))
        .with_operation(b.operation as i8)
        .with_permission_type(b.permission as i8)
}

/// Answers DeleteAcls.
pub async fn delete(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DeleteAclsRequest = request.decode()?;
    if broker.has_authorizer() {
        let results = delete_bindings(broker, request, &body).await;
        return request.respond(&DeleteAclsResponse::default().with_filter_results(results));
    }
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
