//! The leaders' side of AlterPartition (KIP-497), as Kafka's AlterPartitionManager does
//! it: ISR changes proposed by the partitions led here (a follower caught up, or fell
//! behind) wait in one queue, and one request at a time carries every change waiting to
//! the active controller, which commits them together. A broker whose followers all come
//! back after a restart proposes thousands of expansions at once; they cost a few requests
//! and commits, not one connection and one commit each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::Broker;
use crate::controller::{AlterPartition, ControllerRequest, IsrOutcome, PartitionIsr};
use crate::ids::{BrokerId, LeaderEpoch};
use crate::replica::{IsrChange, Partition, TopicPartition};

/// ISR changes waiting for the next AlterPartition, one per partition (a partition has at
/// most one proposal pending: its leader waits for the answer before the next).
#[derive(Debug, Default)]
pub struct IsrQueue {
    waiting: Mutex<HashMap<TopicPartition, IsrChange>>,
    wake: Notify,
}

impl IsrQueue {
    fn push(&self, changes: &[IsrChange]) {
        if changes.is_empty() {
            return;
        }
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        for change in changes {
            waiting.insert(change.topic_partition.clone(), change.clone());
        }
        drop(waiting);
        self.wake.notify_one();
    }

    /// Every change waiting (none left behind), once there is at least one.
    async fn take(&self) -> Vec<IsrChange> {
        loop {
            let taken: Vec<IsrChange> = {
                let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
                waiting.drain().map(|(_, change)| change).collect()
            };
            if !taken.is_empty() {
                return taken;
            }
            self.wake.notified().await;
        }
    }
}

impl Broker {
    /// Queues ISR changes proposed by the leaders here for the active controller; each
    /// partition records the outcome, and the next metadata image confirms it.
    pub fn propose_isr_changes(&self, changes: &[IsrChange]) {
        self.isr_queue.push(changes);
    }

    /// Sends the queued ISR changes, one AlterPartition at a time, until the task is dropped.
    pub(super) async fn send_isr_changes(&self) {
        loop {
            let changes = self.isr_queue.take().await;
            self.alter_partition(changes).await;
        }
    }

    /// One AlterPartition for `changes`; every partition in it hears the outcome.
    async fn alter_partition(&self, changes: Vec<IsrChange>) {
        let sent = self.sendable(changes);
        if sent.is_empty() {
            return;
        }
        let node_id = self.config.node_id;
        let request = ControllerRequest::AlterPartition(AlterPartition {
            node_id,
            broker_epoch: self.image().broker(node_id).map_or(-1, |b| b.broker_epoch),
            partitions: sent.iter().map(|s| s.change.to_request()).collect(),
        });
        let outcomes = match self.controller.ask::<Vec<IsrOutcome>>(request).await {
            Ok(outcomes) if outcomes.len() == sent.len() => {
                outcomes.into_iter().map(Some).collect()
            }
            Ok(outcomes) => {
                tracing::error!(
                    sent = sent.len(),
                    answered = outcomes.len(),
                    "AlterPartition answered for another number of partitions"
                );
                vec![None; sent.len()]
            }
            Err(error) => {
                tracing::warn!(partitions = sent.len(), %error, "AlterPartition failed");
                vec![None; sent.len()]
            }
        };
        self.complete(sent, outcomes);
    }

    /// The changes still worth sending. As Kafka's leader does (KIP-841), an ISR naming a
    /// fenced broker is not proposed; it is proposed again once the metadata shows it
    /// unfenced.
    fn sendable(&self, changes: Vec<IsrChange>) -> Vec<Sent> {
        let image = self.image();
        let fenced = |r: &BrokerId| image.broker(r.0).is_none_or(|b| b.fenced);
        let mut sent = Vec::with_capacity(changes.len());
        for change in changes {
            let tp = &change.topic_partition;
            let Ok(partition) = self.replicas.partition(&tp.topic, tp.partition) else {
                continue;
            };
            if change.isr.iter().any(fenced) {
                partition.complete_isr_change(change.proposed(), None);
                continue;
            }
            let isr_before = image
                .topics
                .get(&tp.topic)
                .and_then(|t| t.partition(tp.partition))
                .map_or(0, |p| p.isr.len());
            sent.push(Sent {
                partition,
                change,
                isr_before,
            });
        }
        sent
    }

    /// Gives each partition sent its outcome (`None`: no answer).
    fn complete(&self, sent: Vec<Sent>, outcomes: Vec<Option<IsrOutcome>>) {
        let mut refused = 0;
        for (sent, outcome) in sent.into_iter().zip(outcomes) {
            let Sent {
                partition,
                change,
                isr_before,
            } = sent;
            match outcome {
                Some(Ok(answer)) => {
                    let counter = match change.isr.len() < isr_before {
                        true => &self.metrics.isr_shrinks,
                        false => &self.metrics.isr_expands,
                    };
                    counter.inc();
                    tracing::info!(partition = %change.topic_partition, isr = ?answer.isr,
                        "ISR changed");
                    partition.complete_isr_change(change.proposed(), Some(&answer));
                }
                Some(Err(error)) => {
                    refused += 1;
                    tracing::debug!(partition = %change.topic_partition, error = %error.message,
                        "ISR change refused");
                    partition.complete_isr_change(change.proposed(), None);
                }
                None => partition.complete_isr_change(change.proposed(), None),
            }
        }
        // Usually a race with a newer image (a stale partition or leader epoch): the
        // leader proposes again from it, as Kafka's does; one line, not one per partition.
        if refused > 0 {
            tracing::info!(
                refused,
                "ISR changes refused by the controller (each at debug)"
            );
        }
    }

    /// Proposes ISRs without followers that fell `replica.lag.time.max.ms` behind, every
    /// half of it.
    pub(super) async fn shrink_isrs(&self) {
        let period =
            std::time::Duration::from_millis((self.lag_max_ms() / 2).clamp(100, 5_000) as u64);
        let mut ticks = tokio::time::interval(period);
        loop {
            ticks.tick().await;
            self.propose_isr_changes(&self.isr_shrinks());
        }
    }

    fn lag_max_ms(&self) -> i64 {
        self.config
            .parse("replica.lag.time.max.ms")
            .unwrap_or(30_000)
    }

    /// The ISRs this broker's leaders want without the followers that have not caught up
    /// for `replica.lag.time.max.ms`, by the replicas' clock (each marked pending until the
    /// controller answers).
    pub fn isr_shrinks(&self) -> Vec<IsrChange> {
        let (now, lag_max_ms) = (self.replicas.clock().now_ms(), self.lag_max_ms());
        self.replicas
            .hosted()
            .iter()
            .filter_map(|p| p.maybe_shrink_isr(now, lag_max_ms))
            .collect()
    }
}

/// A change in an AlterPartition, with its partition and the ISR's size before it.
struct Sent {
    partition: Arc<Partition>,
    change: IsrChange,
    isr_before: usize,
}

impl IsrChange {
    /// The epochs this change was proposed at, which its answer must still match.
    fn proposed(&self) -> (LeaderEpoch, i32) {
        (self.leader_epoch, self.partition_epoch)
    }

    fn to_request(&self) -> PartitionIsr {
        PartitionIsr {
            topic: self.topic_partition.topic.clone(),
            partition: self.topic_partition.partition,
            leader_epoch: self.leader_epoch.0,
            partition_epoch: self.partition_epoch,
            isr: self.isr.iter().map(|r| r.0).collect(),
        }
    }
}
