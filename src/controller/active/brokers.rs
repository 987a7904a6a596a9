//! Broker changes as the active controller makes them: registrations, heartbeats (with
//! unfencing and controlled shutdown), fencing, ISR changes from partition leaders, and
//! leader elections.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{conflict, ActiveController, ControllerReply};
use crate::controller::error::{ControllerError, RemoteError};
use crate::controller::placement::{
    elect_leaders, elect_requested, move_away_from, move_replicas_away, Election, ElectionOutcome,
};
use crate::controller::state::{PartitionChange, Record, RecordResult};
use crate::metadata::{Endpoint, PartitionImage};

impl ActiveController {
    pub(super) async fn register(
        &self,
        node_id: i32,
        incarnation_id: Uuid,
        (host, port, endpoints, rack): (String, u16, Vec<Endpoint>, Option<String>),
        previous_broker_epoch: i64,
    ) -> Result<ControllerReply, ControllerError> {
        let (existing, stale) = self.state(|s| {
            let stale = s
                .past_incarnations
                .get(&node_id)
                .is_some_and(|past| past.contains(&incarnation_id));
            (s.brokers.get(&node_id).cloned(), stale)
        });
        if stale {
            return Err(ControllerError::StaleBroker {
                node_id,
                reason: format!("incarnation {incarnation_id} was replaced by a newer one"),
            });
        }
        if let Some(old) = &existing {
            if old.incarnation_id != incarnation_id && !old.fenced && self.session_alive(node_id) {
                return Err(ControllerError::DuplicateBrokerRegistration {
                    node_id,
                    incarnation_id: old.incarnation_id,
                });
            }
        }
        if existing.is_some_and(|old| old.incarnation_id != incarnation_id) {
            self.end_old_incarnation(node_id).await?;
        }
        let record = Record::RegisterBroker {
            node_id,
            incarnation_id,
            host,
            port,
            endpoints,
            rack,
            previous_broker_epoch,
        };
        match self.propose(record).await? {
            RecordResult::Registered { broker_epoch } => {
                self.touch(node_id);
                // The broker side of a combined node says it too ("registered with the
                // controller"): a state change is logged once per process.
                if node_id == self.config.node_id {
                    tracing::debug!(node_id, broker_epoch, %incarnation_id, "broker registered");
                } else {
                    tracing::info!(node_id, broker_epoch, %incarnation_id, "broker registered");
                }
                Ok(ControllerReply::Registered { broker_epoch })
            }
            other => Err(ControllerError::StaleBroker {
                node_id,
                reason: format!("registration refused: {other:?}"),
            }),
        }
    }

    /// A new process registering with a node id is the failure of the old one (Kafka's
    /// controller handles a re-registration after an unclean shutdown so): its leaderships
    /// move to other ISR members, or go offline at a new epoch where it was the last one,
    /// and it leaves the ISRs it shared, so that it leads nothing at an old epoch and
    /// rejoins every ISR only by catching up.
    async fn end_old_incarnation(&self, node_id: i32) -> Result<(), ControllerError> {
        tracing::info!(
            node_id,
            "broker restarted: its old incarnation's leaderships end"
        );
        self.move_away(node_id).await
    }

    /// Moves leadership and ISR membership away from `node_id` (see `move_away_from`).
    async fn move_away(&self, node_id: i32) -> Result<(), ControllerError> {
        let unclean = self.unclean_default();
        let changes = self.state(|s| {
            let usable = |b: i32| {
                b != node_id
                    && s.brokers
                        .get(&b)
                        .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
            };
            move_away_from(s, node_id, &usable, unclean)
        });
        self.propose_changes(changes).await
    }

    pub(super) fn check_epoch(
        &self,
        node_id: i32,
        broker_epoch: i64,
    ) -> Result<bool, ControllerError> {
        let broker = self.state(|s| s.brokers.get(&node_id).cloned());
        match broker {
            None => Err(ControllerError::StaleBroker {
                node_id,
                reason: "not registered".into(),
            }),
            Some(b) if b.broker_epoch != broker_epoch => Err(ControllerError::StaleBroker {
                node_id,
                reason: format!("epoch {broker_epoch} is not the current {}", b.broker_epoch),
            }),
            Some(b) => Ok(b.fenced),
        }
    }

    pub(super) async fn heartbeat(
        &self,
        node_id: i32,
        broker_epoch: i64,
        metadata_offset: u64,
        want_shut_down: bool,
    ) -> Result<ControllerReply, ControllerError> {
        let fenced = self.check_epoch(node_id, broker_epoch)?;
        self.touch(node_id);
        if want_shut_down {
            if !fenced {
                tracing::info!(node_id, "controlled shutdown: moving leaderships away");
                self.fence(node_id, broker_epoch).await?;
            }
            return Ok(ControllerReply::Heartbeat {
                fenced: true,
                should_shut_down: true,
            });
        }
        if fenced && metadata_offset >= broker_epoch as u64 {
            // The partitions this broker is now the one to lead are elected before it is
            // unfenced, so that the first image showing it unfenced (on which it opens its
            // listener) already has them led, at a new epoch.
            let election = Election {
                preferred: false,
                unclean_default: self.unclean_default(),
            };
            let changes = self.state(|s| {
                let usable = |b: i32| b == node_id || s.brokers.get(&b).is_some_and(|b| !b.fenced);
                elect_leaders(s, &usable, election)
            });
            self.propose_changes(changes).await?;
            let record = Record::UnfenceBroker {
                node_id,
                broker_epoch,
            };
            conflict(self.propose(record).await?)?;
            if node_id == self.config.node_id {
                tracing::debug!(node_id, broker_epoch, "broker unfenced");
            } else {
                tracing::info!(node_id, broker_epoch, "broker unfenced");
            }
            return Ok(ControllerReply::Heartbeat {
                fenced: false,
                should_shut_down: false,
            });
        }
        Ok(ControllerReply::Heartbeat {
            fenced,
            should_shut_down: false,
        })
    }

    /// Moves leadership and ISR membership away from `node_id`, then fences it.
    pub(super) async fn fence(
        &self,
        node_id: i32,
        broker_epoch: i64,
    ) -> Result<(), ControllerError> {
        self.move_away(node_id).await?;
        let record = Record::FenceBroker {
            node_id,
            broker_epoch,
        };
        conflict(self.propose(record).await?)?;
        tracing::info!(node_id, broker_epoch, "broker fenced");
        Ok(())
    }

    /// Records that `node_id`'s replicas of `partitions` are on a failed log directory,
    /// then moves their leaderships to other ISR members (or takes the partition offline
    /// at a new epoch) and takes the broker out of their ISRs, at once rather than after
    /// `replica.lag.time.max.ms`.
    pub(super) async fn replicas_offline(
        &self,
        node_id: i32,
        broker_epoch: i64,
        partitions: Vec<(String, i32)>,
    ) -> Result<ControllerReply, ControllerError> {
        self.check_epoch(node_id, broker_epoch)?;
        tracing::warn!(
            node_id,
            partitions = partitions.len(),
            "replicas offline on a failed log dir"
        );
        let record = Record::ReplicasOffline {
            node_id,
            broker_epoch,
            partitions: partitions.clone(),
        };
        conflict(self.propose(record).await?)?;
        let unclean = self.unclean_default();
        let changes = self.state(|s| {
            let usable = |b: i32| {
                s.brokers
                    .get(&b)
                    .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
            };
            move_replicas_away(s, node_id, &partitions, &usable, unclean)
        });
        self.propose_changes(changes).await?;
        Ok(ControllerReply::Done)
    }

    /// Applies a leader's ISR changes (KIP-497's AlterPartition): each partition is checked
    /// alone, and the accepted ones are committed together in one record, as Kafka's
    /// controller writes one batch per request — a broker that leads thousands of
    /// partitions rejoining followers costs one commit, not one per partition.
    pub(super) async fn alter_partition(
        &self,
        wanted: AlterPartition,
    ) -> Result<ControllerReply, ControllerError> {
        self.check_epoch(wanted.node_id, wanted.broker_epoch)?;
        let checked: Vec<Result<PartitionChange, ControllerError>> = self.state(|s| {
            let mut named = std::collections::HashSet::new();
            wanted
                .partitions
                .iter()
                .map(|isr| {
                    if !named.insert((&isr.topic, isr.partition)) {
                        return Err(isr.invalid("the partition is named twice in one request"));
                    }
                    let current = s
                        .topics
                        .get(&isr.topic)
                        .and_then(|t| t.partition(isr.partition))
                        .ok_or_else(|| ControllerError::UnknownTopic {
                            topic: isr.topic.clone(),
                        })?;
                    let fenced = isr.isr.iter().any(|r| {
                        s.brokers.get(r).is_none_or(|b| b.fenced)
                            || s.replica_offline(*r, &isr.topic, isr.partition)
                    });
                    isr.check(wanted.node_id, current, fenced)?;
                    Ok(PartitionChange::new(
                        &isr.topic,
                        isr.partition,
                        current.leader,
                        isr.isr.clone(),
                    ))
                })
                .collect()
        });
        let accepted = checked.iter().filter_map(|c| c.as_ref().ok().cloned());
        self.propose_changes(accepted.collect()).await?;
        let outcomes = self.state(|s| {
            wanted
                .partitions
                .iter()
                .zip(checked)
                .map(|(isr, checked)| {
                    checked.map_err(|e| e.to_remote())?;
                    s.topics
                        .get(&isr.topic)
                        .and_then(|t| t.partition(isr.partition))
                        .cloned()
                        .ok_or_else(|| {
                            ControllerError::UnknownTopic {
                                topic: isr.topic.clone(),
                            }
                            .to_remote()
                        })
                })
                .collect()
        });
        Ok(ControllerReply::Partitions(outcomes))
    }

    pub(super) async fn elect_preferred(&self) -> Result<(), ControllerError> {
        let election = Election {
            preferred: true,
            unclean_default: self.unclean_default(),
        };
        let changes = self.state(|s| {
            let usable = |b: i32| {
                s.brokers
                    .get(&b)
                    .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
            };
            elect_leaders(s, &usable, election)
        });
        self.propose_changes(changes).await
    }

    pub(super) async fn elect_requested(
        &self,
        unclean: bool,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<ControllerReply, ControllerError> {
        let all = partitions.is_none();
        let (outcomes, changes) = self.state(|s| {
            let usable = |b: i32| {
                s.brokers
                    .get(&b)
                    .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
            };
            let wanted = partitions.unwrap_or_else(|| {
                let each = s
                    .topics
                    .values()
                    .flat_map(|t| (0..t.partition_count()).map(|i| (t.name.clone(), i)));
                each.collect()
            });
            let mut outcomes = Vec::with_capacity(wanted.len());
            let mut changes = Vec::new();
            for (topic, partition) in wanted {
                let found = s.topics.get(&topic).and_then(|t| t.partition(partition));
                let here = |b: i32| usable(b) && !s.replica_offline(b, &topic, partition);
                let (outcome, change) = match found {
                    Some(p) => elect_requested(p, &here, unclean),
                    None => (ElectionOutcome::UnknownPartition, None),
                };
                if let Some((leader, isr)) = change {
                    changes.push(PartitionChange::new(&topic, partition, leader, isr));
                }
                if !all || outcome == ElectionOutcome::Elected {
                    outcomes.push((topic, partition, outcome));
                }
            }
            (outcomes, changes)
        });
        self.propose_changes(changes).await?;
        Ok(ControllerReply::Elections(outcomes))
    }
}

/// An AlterPartition request: ISR changes proposed by broker `node_id` for partitions it
/// leads, answered per partition in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlterPartition {
    pub node_id: i32,
    pub broker_epoch: i64,
    pub partitions: Vec<PartitionIsr>,
}

/// One partition's new ISR, checked as Kafka's controller does: the sender must lead it at
/// `leader_epoch`, and `partition_epoch` must be the current one (a stale one is
/// INVALID_UPDATE_VERSION).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartitionIsr {
    pub topic: String,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
}

/// The answer for one partition of an [`AlterPartition`]: its state after the change, or
/// why the change was refused.
pub type IsrOutcome = Result<PartitionImage, RemoteError>;

impl PartitionIsr {
    fn check(
        &self,
        node_id: i32,
        current: &PartitionImage,
        fenced_members: bool,
    ) -> Result<(), ControllerError> {
        let (topic, partition) = (self.topic.clone(), self.partition);
        if current.leader != node_id || current.leader_epoch != self.leader_epoch {
            return Err(ControllerError::NotPartitionLeader {
                topic,
                partition,
                node_id,
                leader_epoch: self.leader_epoch,
            });
        }
        if current.partition_epoch != self.partition_epoch {
            return Err(ControllerError::StalePartitionEpoch {
                topic,
                partition,
                requested: self.partition_epoch,
                current: current.partition_epoch,
            });
        }
        if !self.isr.contains(&node_id) {
            return Err(self.invalid("the ISR must hold the leader"));
        }
        if self.isr.iter().any(|r| !current.replicas.contains(r)) {
            return Err(self.invalid("the ISR must be a subset of the replicas"));
        }
        if fenced_members {
            return Err(self.invalid("a fenced broker or offline replica cannot join the ISR"));
        }
        Ok(())
    }

    fn invalid(&self, reason: &'static str) -> ControllerError {
        ControllerError::InvalidIsr {
            topic: self.topic.clone(),
            partition: self.partition,
            reason,
        }
    }
}
