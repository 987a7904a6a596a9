//! ApiVersions: the APIs and versions served, from [`super::versions::SUPPORTED_APIS`].
//!
//! Optional tagged fields are left at their defaults so that the codec omits them: old
//! librdkafka (before 2.2, e.g. Debian's 2.0.2) mis-parses tagged fields sent at their
//! defaults (librdkafka issue 4278). A version newer than served gets a v0 response with
//! UNSUPPORTED_VERSION and the ApiVersions range, as Apache Kafka answers, so the client
//! retries at a version both know.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

use super::response::ResponseFrame;
use super::versions::{supported, SUPPORTED_APIS};
use super::{HandlerError, Outcome, Request};

fn api_version(key: ApiKey, min: i16, max: i16) -> ApiVersion {
    ApiVersion::default()
        .with_api_key(key as i16)
        .with_min_version(min)
        .with_max_version(max)
}

/// Answers ApiVersions.
pub fn handle(request: &Request) -> Result<Outcome, HandlerError> {
    let api_keys = SUPPORTED_APIS
        .iter()
        .map(|api| api_version(api.key, api.min_version, api.max_version))
        .collect();
    let response = ApiVersionsResponse::default().with_api_keys(api_keys);
    request.respond(&response)
}

/// Answers an ApiVersions request of a version newer than served: v0, UNSUPPORTED_VERSION.
pub fn unsupported_version(request: &Request) -> Result<Outcome, HandlerError> {
    let range = supported(ApiKey::ApiVersions)
        .map(|api| api_version(ApiKey::ApiVersions, api.min_version, api.max_version))
        .into_iter()
        .collect();
    let response = ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(range);
    let v0 = Request {
        api_key: request.api_key,
        header: request.header.clone().with_request_api_version(0),
        body: request.body.clone(),
        client: request.client,
    };
    let frame: ResponseFrame = super::response::encode(&v0, &response, 0)?;
    Ok(Outcome::Respond(frame))
}
