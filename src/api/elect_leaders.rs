//! ElectLeaders (KIP-183, KIP-460): preferred or unclean leader election for the given
//! partitions (all when none are named), decided by the active controller. With all
//! partitions asked for, only those that got a new leader are listed, as in Kafka.

use std::collections::BTreeMap;

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};

use super::errors::{controller_error, election_error};
use super::{str_bytes, topic_name, Broker, HandlerError, Outcome, Request};
use crate::controller::{ControllerRequest, ElectionResults};

/// `election_type` of an unclean election (0 is preferred; v0 requests are preferred).
const UNCLEAN: i8 = 1;
/// v1 added the top-level error code.
const TOP_LEVEL_ERROR_VERSION: i16 = 1;

/// Answers ElectLeaders.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ElectLeadersRequest = request.decode()?;
    let unclean = request.version() >= 1 && body.election_type == UNCLEAN;
    let partitions = body.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
            .collect::<Vec<_>>()
    });
    let asked = ControllerRequest::ElectLeaders {
        unclean,
        partitions: partitions.clone(),
    };
    let outcomes = match broker.controller.ask::<ElectionResults>(asked).await {
        Ok(outcomes) => outcomes
            .into_iter()
            .map(|(topic, partition, outcome)| (topic, partition, election_error(outcome)))
            .collect(),
        Err(error) => {
            tracing::warn!(client = %request.client, api = "ElectLeaders", %error, "refused");
            let code = controller_error(&error);
            if request.version() >= TOP_LEVEL_ERROR_VERSION {
                let response = ElectLeadersResponse::default().with_error_code(code.code());
                return request.respond(&response);
            }
            let each = partitions.unwrap_or_default().into_iter();
            each.map(|(topic, partition)| (topic, partition, Some(code)))
                .collect::<Vec<_>>()
        }
    };
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for (topic, partition, error) in outcomes {
        let result = PartitionResult::default().with_partition_id(partition);
        let result = match error {
            None => result,
            Some(code) => result
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(&format!("{code:?}")))),
        };
        by_topic.entry(topic).or_default().push(result);
    }
    let results = by_topic
        .into_iter()
        .map(|(topic, partition_result)| {
            ReplicaElectionResult::default()
                .with_topic(topic_name(&topic))
                .with_partition_result(partition_result)
        })
        .collect();
    request.respond(&ElectLeadersResponse::default().with_replica_election_results(results))
}
