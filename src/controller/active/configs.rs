//! Configs of resources other than topics, as the active controller changes them: dynamic
//! broker configs (one broker's, or the cluster-wide default) and group configs, each
//! checked whole after the change and committed as one record (Kafka's
//! ConfigurationControlManager, KIP-500).

use super::{conflict, ActiveController, ControllerReply};
use crate::config::{dynamic, group, ConfigMap};
use crate::controller::error::ControllerError;
use crate::controller::state::{ConfigResource, Record};

/// `configs` with `changes` made (`None` removes a key).
fn changed(mut configs: ConfigMap, changes: &[(String, Option<String>)]) -> ConfigMap {
    for (key, value) in changes {
        match value {
            Some(value) => configs.insert(key.clone(), value.clone()),
            None => configs.remove(key),
        };
    }
    configs
}

impl ActiveController {
    pub(super) async fn alter_resource_configs(
        &self,
        resource: ConfigResource,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let current = self.state(|s| match &resource {
            ConfigResource::Broker(id) => s
                .broker_configs
                .get(&id.map(|id| id.to_string()).unwrap_or_default())
                .cloned(),
            ConfigResource::Group(name) => s.group_configs.get(name).cloned(),
        });
        match &resource {
            ConfigResource::Broker(_) => {
                for (key, value) in changes {
                    // Kafka refuses a static key and a bad value as an invalid request.
                    dynamic::check(key, value.as_deref()).map_err(|e| match e {
                        dynamic::DynamicConfigError::Unknown { .. } => {
                            ControllerError::InvalidResourceConfig {
                                reason: e.to_string(),
                            }
                        }
                        _ => ControllerError::InvalidConfigRequest {
                            reason: e.to_string(),
                        },
                    })?;
                }
            }
            ConfigResource::Group(_) => {
                let after = changed(current.clone().unwrap_or_default(), changes);
                group::validate(&after, &self.config)
                    .map_err(|reason| ControllerError::InvalidResourceConfig { reason })?;
            }
        }
        if validate_only {
            return Ok(ControllerReply::Done);
        }
        let configs = changed(current.unwrap_or_default(), changes);
        tracing::info!(?resource, ?changes, "altering configs");
        let record = Record::AlterConfigs { resource, configs };
        conflict(self.propose(record).await?)?;
        Ok(ControllerReply::Done)
    }
}
