//! UpdateFeatures (kafka-features upgrade / downgrade): forwarded to the active
//! controller, which finalizes every level asked for or none. v0's `allow_downgrade` is
//! a safe downgrade; v2 answers the top-level error only (no per-feature results).

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::errors::controller_error;
use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{str_bytes, Broker, HandlerError, Outcome, Request};
use crate::controller::ControllerRequest;
use crate::metadata::features::UpgradeType;

/// The last version with per-feature results.
const RESULTS_VERSION_MAX: i16 = 1;

/// Answers UpdateFeatures.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: UpdateFeaturesRequest = request.decode()?;
    let mut updates = Vec::with_capacity(body.feature_updates.len());
    let mut refusal = None;
    for update in &body.feature_updates {
        let upgrade = match request.version() {
            0 if update.allow_downgrade => Some(UpgradeType::SafeDowngrade),
            0 => Some(UpgradeType::Upgrade),
            _ => UpgradeType::from_code(update.upgrade_type),
        };
        let Some(upgrade) = upgrade else {
            refusal = Some(format!(
                "The update failed for all features since the following feature had an \
                 error: Invalid update version {} for feature {}. The controller does not \
                 support the given upgrade type.",
                update.max_version_level,
                update.feature.as_str()
            ));
            break;
        };
        updates.push((
            update.feature.to_string(),
            update.max_version_level,
            upgrade,
        ));
    }
    let outcome = match refusal {
        Some(message) => Err((refusal_error(Refusal::InvalidFeatureUpdate), message)),
        None => {
            let asked = ControllerRequest::UpdateFeatures {
                updates,
                validate_only: body.validate_only,
            };
            broker
                .controller
                .request(asked)
                .await
                .map(|_| ())
                .map_err(|e| (controller_error(&e), e.to_string()))
        }
    };
    let response = match outcome {
        Ok(()) => {
            let results = match request.version() <= RESULTS_VERSION_MAX {
                true => body
                    .feature_updates
                    .iter()
                    .map(|u| UpdatableFeatureResult::default().with_feature(u.feature.clone()))
                    .collect(),
                false => Vec::new(),
            };
            UpdateFeaturesResponse::default().with_results(results)
        }
        Err((code, message)) => {
            tracing::info!(client = %request.client, api = "UpdateFeatures", error = %message, "refused");
            UpdateFeaturesResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(&message)))
        }
    };
    request.respond(&response)
}
