//! AlterPartitionReassignments and ListPartitionReassignments (KIP-455, KIP-860;
//! `kafka-reassign-partitions`): reassignments are started and cancelled by the active
//! controller, each partition answered on its own; the ones under way are read from the
//! metadata image (a partition's adding and removing replicas).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::errors::controller_error;
use super::{str_bytes, topic_name, Broker, HandlerError, Outcome, Request};
use crate::controller::{ControllerError, ControllerRequest, Reassignment, ReassignmentOutcome};

/// Answers AlterPartitionReassignments: every partition's outcome, or one top-level error
/// when the controller could not be asked.
pub async fn alter(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: AlterPartitionReassignmentsRequest = request.decode()?;
    // v0 has no field for it: a reassignment may always change the replication factor.
    let allow = request.version() == 0 || body.allow_replication_factor_change;
    let reassignments = body
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Reassignment {
                topic: t.name.to_string(),
                partition: p.partition_index,
                target: p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect()),
            })
        })
        .collect();
    let asked = ControllerRequest::AlterReassignments {
        reassignments,
        allow_replication_factor_change: allow,
    };
    let outcomes = match broker
        .controller
        .ask::<Vec<ReassignmentOutcome>>(asked)
        .await
    {
        Ok(outcomes) => outcomes,
        Err(error) => {
            tracing::warn!(client = %request.client, api = "AlterPartitionReassignments",
                %error, "refused");
            let (code, message) = (controller_error(&error), error.to_string());
            let response = AlterPartitionReassignmentsResponse::default()
                .with_allow_replication_factor_change(allow)
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(&message)));
            return request.respond(&response);
        }
    };
    let mut by_topic: BTreeMap<String, Vec<ReassignablePartitionResponse>> = BTreeMap::new();
    for (topic, partition, outcome) in outcomes {
        let answer = ReassignablePartitionResponse::default().with_partition_index(partition);
        let answer = match outcome {
            Ok(()) => answer.with_error_message(None),
            Err(remote) => {
                let error = ControllerError::from(remote);
                answer
                    .with_error_code(controller_error(&error).code())
                    .with_error_message(Some(str_bytes(&error.to_string())))
            }
        };
        by_topic.entry(topic).or_default().push(answer);
    }
    let responses = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            ReassignableTopicResponse::default()
                .with_name(topic_name(&topic))
                .with_partitions(partitions)
        })
        .collect();
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow)
        .with_error_message(None)
        .with_responses(responses);
    request.respond(&response)
}

/// Answers ListPartitionReassignments: the reassignments under way, of the topics and
/// partitions asked (all when none are named).
pub fn list(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ListPartitionReassignmentsRequest = request.decode()?;
    let image = broker.image();
    let asked: Vec<(String, Option<Vec<i32>>)> = match &body.topics {
        None => image.topics.keys().map(|t| (t.clone(), None)).collect(),
        Some(topics) => topics
            .iter()
            .map(|t| (t.name.to_string(), Some(t.partition_indexes.clone())))
            .collect(),
    };
    let brokers = |ids: &[i32]| ids.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let mut topics = Vec::new();
    for (name, indexes) in asked {
        let Some(topic) = image.topic(&name) else {
            continue;
        };
        let indexes = indexes.unwrap_or_else(|| (0..topic.partition_count()).collect());
        let ongoing: Vec<OngoingPartitionReassignment> = indexes
            .into_iter()
            .filter_map(|i| topic.partition(i).map(|p| (i, p)))
            .filter(|(_, p)| p.is_reassigning())
            .map(|(i, p)| {
                OngoingPartitionReassignment::default()
                    .with_partition_index(i)
                    .with_replicas(brokers(&p.replicas))
                    .with_adding_replicas(brokers(&p.adding_replicas))
                    .with_removing_replicas(brokers(&p.removing_replicas))
            })
            .collect();
        if !ongoing.is_empty() {
            topics.push(
                OngoingTopicReassignment::default()
                    .with_name(topic_name(&name))
                    .with_partitions(ongoing),
            );
        }
    }
    let response = ListPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_topics(topics);
    request.respond(&response)
}
