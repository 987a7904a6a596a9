//! DescribeQuorum (`kafka-metadata-quorum describe --status / --replication`): the metadata
//! quorum (`__cluster_metadata`-0) as its leader sees it, forwarded there by any broker as
//! Kafka's brokers forward it to the active controller. Voters' fetch and caught-up times
//! are not tracked (Raft's leader pushes entries here rather than serving fetches): -1,
//! which Kafka's tool prints as unknown; the leader's own are now. Observers (broker-only
//! nodes of a split cluster follow the metadata outside Raft) are not listed.

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};

use super::errors::controller_error;
use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{str_bytes, topic_name, Broker, HandlerError, Outcome, Request};
use crate::controller::{ControllerRequest, QuorumDescription};

/// The metadata log's topic.
const METADATA_TOPIC: &str = "__cluster_metadata";

/// Answers DescribeQuorum.
pub async fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeQuorumRequest = request.decode()?;
    let asked = body.topics.first().filter(|_| body.topics.len() == 1);
    let valid = asked.is_some_and(|t| {
        t.topic_name.0.as_str() == METADATA_TOPIC
            && t.partitions.len() == 1
            && t.partitions[0].partition_index == 0
    });
    if !valid {
        let code = refusal_error(Refusal::UnknownTopic).code();
        return request.respond(&DescribeQuorumResponse::default().with_error_code(code));
    }
    let topic = TopicData::default()
        .with_topic_name(topic_name(METADATA_TOPIC))
        .with_partitions(vec![partition(broker, request).await]);
    let mut response = DescribeQuorumResponse::default().with_topics(vec![topic]);
    if request.version() >= 2 {
        response = response.with_nodes(voter_nodes(broker));
    }
    request.respond(&response)
}

/// `__cluster_metadata`-0 as the active controller describes it, or its error.
async fn partition(broker: &Broker, request: &Request) -> PartitionData {
    match broker
        .controller
        .ask::<QuorumDescription>(ControllerRequest::DescribeQuorum)
        .await
    {
        Ok(quorum) => {
            let now = crate::clock::system_now_ms();
            let voters = quorum
                .voters
                .iter()
                .map(|(id, end)| {
                    let seen = if *id == quorum.leader_id { now } else { -1 };
                    ReplicaState::default()
                        .with_replica_id(BrokerId(*id))
                        .with_log_end_offset(*end)
                        .with_last_fetch_timestamp(seen)
                        .with_last_caught_up_timestamp(seen)
                })
                .collect();
            PartitionData::default()
                .with_leader_id(BrokerId(quorum.leader_id))
                .with_leader_epoch(quorum.leader_epoch)
                .with_high_watermark(quorum.high_watermark)
                .with_current_voters(voters)
        }
        Err(error) => {
            tracing::debug!(client = %request.client, %error, "DescribeQuorum refused");
            PartitionData::default()
                .with_error_code(controller_error(&error).code())
                .with_error_message(Some(str_bytes(&error.to_string())))
                .with_leader_id(BrokerId(-1))
                .with_leader_epoch(-1)
                .with_high_watermark(-1)
        }
    }
}

/// The voters' controller endpoints (v2's `nodes`; a single node without a controller
/// listener has none).
fn voter_nodes(broker: &Broker) -> Vec<Node> {
    broker
        .config
        .voters
        .iter()
        .map(|v| {
            let listeners = (v.port != 0).then(|| {
                Listener::default()
                    .with_name(str_bytes("CONTROLLER"))
                    .with_host(str_bytes(&v.host))
                    .with_port(v.port)
            });
            Node::default()
                .with_node_id(BrokerId(v.node_id))
                .with_listeners(listeners.into_iter().collect())
        })
        .collect()
}
