//! ACL bindings as the active controller changes them (CreateAcls, DeleteAcls; Kafka's
//! AclControlManager): each creation is checked on its own, each deletion filter removes
//! every binding it matches, and all of a request's changes go into one record.

use super::{conflict, ActiveController, ControllerReply};
use crate::acl::{AclBinding, AclFilter};
use crate::controller::error::{ControllerError, RemoteError};
use crate::controller::state::Record;

/// One creation's answer: done, or the error in its wire form.
pub type AclOutcome = Result<(), RemoteError>;

impl ActiveController {
    /// Adds `bindings`; each answered on its own (an invalid one is INVALID_REQUEST with
    /// Kafka's reason; one already there is accepted and changes nothing).
    pub(super) async fn create_acls(
        &self,
        bindings: Vec<AclBinding>,
    ) -> Result<ControllerReply, ControllerError> {
        let mut outcomes = Vec::with_capacity(bindings.len());
        let mut added = Vec::new();
        for binding in bindings {
            match binding.invalid() {
                Some(reason) => outcomes.push(Err(ControllerError::InvalidConfigRequest {
                    reason: reason.to_string(),
                }
                .to_remote())),
                None => {
                    outcomes.push(Ok(()));
                    added.push(binding);
                }
            }
        }
        if !added.is_empty() {
            tracing::info!(bindings = ?added, "creating ACLs");
            conflict(self.propose(Record::CreateAcls { bindings: added }).await?)?;
        }
        Ok(ControllerReply::AclsCreated(outcomes))
    }

    /// Removes every binding each filter matches; per filter, the bindings it removed.
    pub(super) async fn delete_acls(
        &self,
        filters: Vec<AclFilter>,
    ) -> Result<ControllerReply, ControllerError> {
        let current = self.state(|s| s.acls.clone());
        let matched: Vec<Vec<AclBinding>> = filters
            .iter()
            .map(|f| current.iter().filter(|b| f.matches(b)).cloned().collect())
            .collect();
        let mut removed: Vec<AclBinding> = matched.iter().flatten().cloned().collect();
        removed.sort();
        removed.dedup();
        if !removed.is_empty() {
            tracing::info!(bindings = ?removed, "deleting ACLs");
            conflict(
                self.propose(Record::DeleteAcls { bindings: removed })
                    .await?,
            )?;
        }
        Ok(ControllerReply::AclsDeleted(matched))
    }
}
