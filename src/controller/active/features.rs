//! UpdateFeatures on the active controller: each update checked against the level now
//! finalized, then all of them finalized by one record (or none, with the first
//! refusal), as Kafka's FeatureControlManager does.

use super::{conflict, ActiveController, ControllerReply};
use crate::controller::error::ControllerError;
use crate::controller::state::Record;
use crate::metadata::features::{self, UpgradeType};

impl ActiveController {
    pub(super) async fn update_features(
        &self,
        updates: &[(String, i16, UpgradeType)],
        validate_only: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let current = self.state(|s| features::finalized(&s.features));
        for (name, level, upgrade) in updates {
            let now = current.get(name).copied().unwrap_or(0);
            features::check_update(self.config.node_id, name, *level, *upgrade, now)
                .map_err(|reason| ControllerError::InvalidFeatureUpdate { reason })?;
        }
        if validate_only || updates.is_empty() {
            return Ok(ControllerReply::Done);
        }
        let levels: Vec<(String, i16)> = updates
            .iter()
            .map(|(name, level, _)| (name.clone(), *level))
            .collect();
        tracing::info!(?levels, "finalizing feature levels");
        conflict(self.propose(Record::FinalizeFeatures { levels }).await?)?;
        Ok(ControllerReply::Done)
    }
}
