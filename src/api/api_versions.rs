//! ApiVersions: the APIs and versions served, from [`super::versions::SUPPORTED_APIS`].
//!
//! Optional tagged fields are left at their defaults so that the codec omits them: old
//! librdkafka (before 2.2, e.g. Debian's 2.0.2) mis-parses tagged fields sent at their
//! defaults (librdkafka issue 4278). A version newer than served gets a v0 response with
//! UNSUPPORTED_VERSION and the ApiVersions range, as Apache Kafka answers, so the client
//! retries at a version both know.
//!
//! From v3 the answer carries the features served and the levels finalized
//! ([`crate::metadata::features`]), with the image's metadata offset as their epoch (a
//! client keeps the levels of the highest epoch it saw). With `group.version` 0,
//! ConsumerGroupHeartbeat is not advertised (KIP-848 groups are off). On the controller
//! listener only the controller's APIs are advertised.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

use super::errors::refusal_error;
use super::refusal::Refusal;
use super::response::ResponseFrame;
use super::versions::{on_listener, supported, SUPPORTED_APIS};
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::metadata::features::{FEATURES, GROUP_VERSION};
use crate::metadata::MetadataImage;
use std::sync::Arc;

/// The first version that carries features (as tagged fields).
const FEATURES_VERSION: i16 = 3;

fn api_version(key: ApiKey, min: i16, max: i16) -> ApiVersion {
    ApiVersion::default()
        .with_api_key(key as i16)
        .with_min_version(min)
        .with_max_version(max)
}

/// Whether `key` is served under the finalized feature levels of `image`.
pub fn enabled(image: &MetadataImage, key: ApiKey) -> bool {
    key != ApiKey::ConsumerGroupHeartbeat || image.feature_level(GROUP_VERSION) >= 1
}

/// Answers ApiVersions.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let image = broker.image();
    let controller = broker.is_controller_listener(&request.listener);
    let api_keys = SUPPORTED_APIS
        .iter()
        .filter(|api| enabled(&image, api.key) && on_listener(api.key, controller))
        .map(|api| api_version(api.key, api.min_version, api.max_version))
        .collect();
    let mut response = ApiVersionsResponse::default().with_api_keys(api_keys);
    if request.version() >= FEATURES_VERSION {
        response = with_features(response, &image);
    }
    request.respond(&response)
}

/// The features served and, once the metadata is loaded, the levels finalized (those at
/// 0 are left out, as Kafka leaves them).
fn with_features(response: ApiVersionsResponse, image: &MetadataImage) -> ApiVersionsResponse {
    let supported = FEATURES
        .iter()
        .map(|f| {
            SupportedFeatureKey::default()
                .with_name(str_bytes(f.name))
                .with_min_version(f.min_level)
                .with_max_version(f.max_level)
        })
        .collect();
    let response = response.with_supported_features(supported);
    if image.cluster_id.is_empty() {
        return response;
    }
    let finalized = image
        .features
        .iter()
        .filter(|(_, level)| **level > 0)
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(str_bytes(name))
                .with_min_version_level(*level)
                .with_max_version_level(*level)
        })
        .collect();
    response
        .with_finalized_features_epoch(image.offset as i64)
        .with_finalized_features(finalized)
}

/// Answers an ApiVersions request of a version newer than served: v0, UNSUPPORTED_VERSION.
pub fn unsupported_version(request: &Request) -> Result<Outcome, HandlerError> {
    let range = supported(ApiKey::ApiVersions)
        .map(|api| api_version(ApiKey::ApiVersions, api.min_version, api.max_version))
        .into_iter()
        .collect();
    let response = ApiVersionsResponse::default()
        .with_error_code(refusal_error(Refusal::UnsupportedVersion).code())
        .with_api_keys(range);
    let v0 = Request {
        api_key: request.api_key,
        header: request.header.clone().with_request_api_version(0),
        body: request.body.clone(),
        client: request.client,
        listener: Arc::clone(&request.listener),
        principal: Arc::clone(&request.principal),
        credential: request.credential,
        throttle: Default::default(),
    };
    let frame: ResponseFrame = super::response::encode(&v0, &response, 0)?;
    Ok(Outcome::Respond(frame))
}
