//! DescribeCluster: cluster id, controller and brokers from the metadata image.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::{authorized_operations, str_bytes, Broker, HandlerError, Outcome, Request};

/// Answers DescribeCluster.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeClusterRequest = request.decode()?;
    let image = broker.image();
    // v2 (KIP-1073) can ask for fenced brokers too, marked as such.
    let include_fenced = request.version() >= 2 && body.include_fenced_brokers;
    let brokers = image
        .brokers
        .iter()
        .filter(|b| include_fenced || !b.fenced)
        .filter_map(|b| {
            let (host, port) = b.endpoint(&request.listener)?;
            Some(
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.node_id))
                    .with_host(str_bytes(host))
                    .with_port(i32::from(port))
                    .with_is_fenced(b.fenced),
            )
        })
        .collect();
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(if request.version() >= 1 {
            body.endpoint_type
        } else {
            1
        })
        .with_cluster_id(str_bytes(&image.cluster_id))
        .with_controller_id(BrokerId(image.controller_for_clients()))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(authorized_operations::when(
            body.include_cluster_authorized_operations,
            authorized_operations::CLUSTER,
        ));
    request.respond(&response)
}
