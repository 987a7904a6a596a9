//! Partition reassignments as the active controller starts and cancels them
//! (AlterPartitionReassignments, KIP-455 and KIP-860): each partition is checked on its own
//! and answered on its own, and every accepted one goes into one record. The reassignment
//! then proceeds through ordinary ISR changes, completed where every change passes
//! (`propose_changes`, `controller::reassignment::settle`).

use serde::{Deserialize, Serialize};

use super::{ActiveController, ControllerReply};
use crate::controller::error::{ControllerError, RemoteError};
use crate::controller::reassignment;
use crate::controller::state::{ClusterState, PartitionChange};
use crate::metadata::PartitionImage;

/// One partition's reassignment as asked: a target, or `None` to cancel the one under way.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    pub target: Option<Vec<i32>>,
}

/// Checks a target as Kafka's validateManualPartitionAssignment does, in broker id order.
fn check_target(state: &ClusterState, target: &[i32]) -> Result<(), ControllerError> {
    let invalid = |reason: String| ControllerError::InvalidReassignment { reason };
    if target.is_empty() {
        return Err(invalid(
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let mut sorted = target.to_vec();
    sorted.sort_unstable();
    for (i, id) in sorted.iter().enumerate() {
        if !state.brokers.contains_key(id) {
            return Err(invalid(format!(
                "The manual partition assignment includes broker {id}, but no such broker is \
                 registered."
            )));
        }
        if i > 0 && sorted[i - 1] == *id {
            return Err(invalid(format!(
                "The manual partition assignment includes the broker {id} more than once."
            )));
        }
    }
    Ok(())
}

/// The replication factor a partition is headed for: its replicas without those a
/// reassignment under way removes.
fn headed_for(p: &PartitionImage) -> usize {
    p.replicas
        .iter()
        .filter(|r| !p.removing_replicas.contains(r))
        .count()
}

impl ActiveController {
    /// The change one reassignment asks of the current state, or why it is refused.
    fn reassignment_change(
        &self,
        state: &ClusterState,
        wanted: &Reassignment,
        allow_replication_factor_change: bool,
    ) -> Result<PartitionChange, ControllerError> {
        let (name, index) = (&wanted.topic, wanted.partition);
        let topic = state
            .topics
            .get(name)
            .ok_or_else(|| ControllerError::UnknownPartition {
                reason: format!("Unable to find a topic named {name}."),
            })?;
        let current = topic
            .partition(index)
            .ok_or_else(|| ControllerError::UnknownPartition {
                reason: format!("Unable to find partition {name}:{index}."),
            })?;
        let mut change = PartitionChange::new(name, index, current.leader, current.isr.clone());
        match &wanted.target {
            None => {
                if !current.is_reassigning() {
                    return Err(ControllerError::NoReassignmentInProgress);
                }
                let (assignment, isr, unclean) =
                    reassignment::revert(current).ok_or_else(|| {
                        ControllerError::InvalidReassignment {
                            reason:
                                "Invalid replica assignment: addingReplicas contains all replicas."
                                    .into(),
                        }
                    })?;
                let unclean_allowed = topic
                    .configs
                    .get("unclean.leader.election.enable")
                    .cloned()
                    .or_else(|| self.broker_default(state, "unclean.leader.election.enable"))
                    .is_some_and(|v| v.trim() == "true");
                if unclean && !unclean_allowed {
                    return Err(ControllerError::InvalidReassignment {
                        reason: format!(
                            "Unable to revert partition assignment for {name}:{index} because it \
                             would require an unclean leader election."
                        ),
                    });
                }
                change.isr = isr;
                change.assignment = Some(assignment);
            }
            Some(target) => {
                check_target(state, target)?;
                let from = headed_for(current);
                if !allow_replication_factor_change && from != target.len() {
                    return Err(ControllerError::ReplicationFactorChange {
                        reason: format!(
                            "The replication factor is changed from {from} to {}",
                            target.len()
                        ),
                    });
                }
                let mut assignment = reassignment::start(current, target);
                // As Kafka: an empty difference keeps the reassignment under way.
                if assignment.adding.is_empty() && assignment.removing.is_empty() {
                    assignment.adding = current.adding_replicas.clone();
                    assignment.removing = current.removing_replicas.clone();
                }
                change.assignment = Some(assignment);
            }
        }
        Ok(change)
    }

    /// Starts or cancels `wanted` reassignments: every accepted one in one record, each
    /// answered with its own outcome.
    pub(super) async fn alter_reassignments(
        &self,
        wanted: Vec<Reassignment>,
        allow_replication_factor_change: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let (outcomes, changes) = self.state(|s| {
            let mut outcomes = Vec::with_capacity(wanted.len());
            let mut changes = Vec::new();
            for w in &wanted {
                let outcome = self.reassignment_change(s, w, allow_replication_factor_change);
                outcomes.push(match outcome {
                    Ok(change) => {
                        changes.push(change);
                        Ok(())
                    }
                    Err(error) => {
                        tracing::info!(topic = %w.topic, partition = w.partition, %error,
                            "reassignment refused");
                        Err(error.to_remote())
                    }
                });
            }
            (outcomes, changes)
        });
        for change in &changes {
            tracing::info!(topic = %change.topic, partition = change.partition,
                assignment = ?change.assignment, "reassignment");
        }
        self.propose_changes(changes).await?;
        let answered = wanted
            .into_iter()
            .zip(outcomes)
            .map(|(w, outcome)| (w.topic, w.partition, outcome))
            .collect();
        Ok(ControllerReply::Reassignments(answered))
    }
}

/// One partition's answer: done, or the error in its wire form.
pub type ReassignmentOutcome = (String, i32, Result<(), RemoteError>);
