//! DescribeCluster: cluster id, controller and brokers from the metadata image; on the
//! controller listener, with endpoint type CONTROLLER (KIP-919, what admin tools run with
//! `--bootstrap-controller` ask), the controllers themselves and the active one. An
//! endpoint type the listener does not serve is MISMATCHED_ENDPOINT_TYPE, as Kafka answers.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::errors::refusal_error;
use super::refusal::Refusal;
use super::{authorized_operations, str_bytes, Broker, HandlerError, Outcome, Request};

/// DescribeCluster's endpoint types.
const BROKERS: i8 = 1;
const CONTROLLERS: i8 = 2;

/// The controllers (the quorum's voters) at their controller listeners, and the active one.
fn controllers(broker: &Broker) -> (Vec<DescribeClusterBroker>, i32) {
    let voters = broker
        .config
        .voters
        .iter()
        .map(|v| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(v.node_id))
                .with_host(str_bytes(&v.host))
                .with_port(i32::from(v.port))
        })
        .collect();
    (voters, broker.image().controller_id)
}

/// Answers DescribeCluster.
pub fn handle(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeClusterRequest = request.decode()?;
    let wanted = match request.version() >= 1 {
        true => body.endpoint_type,
        false => BROKERS,
    };
    let on_controller = broker.is_controller_listener(&request.listener);
    let served = if on_controller { CONTROLLERS } else { BROKERS };
    if wanted != served {
        let (sent, asked) = match served {
            CONTROLLERS => ("CONTROLLER", "BROKER"),
            _ => ("BROKER", "CONTROLLER"),
        };
        let (code, message) = match wanted {
            BROKERS | CONTROLLERS => (
                refusal_error(Refusal::MismatchedEndpointType),
                format!("The request was sent to an endpoint of type {sent}, but we wanted an endpoint of type {asked}"),
            ),
            other => (
                refusal_error(Refusal::UnsupportedEndpointType),
                format!("Unsupported endpoint type {other}"),
            ),
        };
        tracing::debug!(client = %request.client, listener = %request.listener, wanted,
            "DescribeCluster refused: {message}");
        let response = DescribeClusterResponse::default()
            .with_endpoint_type(wanted)
            .with_error_code(code.code())
            .with_error_message(Some(str_bytes(&message)));
        return request.respond(&response);
    }
    let image = broker.image();
    let cluster_operations = cluster_operations(broker, request, &body);
    if on_controller {
        let (voters, active) = controllers(broker);
        let response = DescribeClusterResponse::default()
            .with_endpoint_type(CONTROLLERS)
            .with_cluster_id(str_bytes(&image.cluster_id))
            .with_controller_id(BrokerId(active))
            .with_brokers(voters)
            .with_cluster_authorized_operations(cluster_operations);
        return request.respond(&response);
    }
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
                    .with_rack(b.rack.as_deref().map(str_bytes))
                    .with_is_fenced(b.fenced),
            )
        })
        .collect();
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(BROKERS)
        .with_cluster_id(str_bytes(&image.cluster_id))
        .with_controller_id(BrokerId(image.controller_for_clients()))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(cluster_operations);
    request.respond(&response)
}

/// The cluster's authorized operations for the principal, if asked for.
fn cluster_operations(broker: &Broker, request: &Request, body: &DescribeClusterRequest) -> i32 {
    match body.include_cluster_authorized_operations {
        true => broker.authorized_operations(
            request,
            crate::acl::CLUSTER,
            authorized_operations::CLUSTER,
        ),
        false => authorized_operations::NOT_ASKED,
    }
}
