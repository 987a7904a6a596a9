//! Kafka clients on the controller listener (issue 13): admin tools run with
//! `--bootstrap-controller` (kafka-metadata-quorum, kafka-features, kafka-configs) speak
//! Kafka's protocol to the controllers, on the same port the controllers replicate the
//! metadata log over. They are served the controller's APIs only: ApiVersions lists them,
//! DescribeCluster with endpoint type CONTROLLER lists the controllers and the active one,
//! DescribeQuorum answers; data APIs close the connection, and an endpoint type the
//! listener does not serve is MISMATCHED_ENDPOINT_TYPE, as Kafka answers.

mod common;

use common::cluster_processes::eventually;
use common::Client;
use highwater::testkit::Cluster;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    describe_quorum_request, ApiKey, ApiVersionsRequest, DescribeClusterRequest,
    DescribeQuorumRequest, MetadataRequest,
};

/// A three-node cluster and node 2's controller listener.
async fn cluster() -> (Cluster, std::net::SocketAddr) {
    let cluster = Cluster::start(3).await.expect("cluster");
    let controller = cluster
        .controller_address(2)
        .expect("node 2")
        .expect("a controller listener");
    (cluster, controller)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_listener_serves_admin_apis_and_closes_on_data_apis() {
    let (cluster, controller) = cluster().await;
    let mut client = Client::connect(controller).await;
    let versions = client.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(versions.error_code, 0);
    let keys: Vec<i16> = versions.api_keys.iter().map(|k| k.api_key).collect();
    for served in [
        ApiKey::DescribeQuorum,
        ApiKey::DescribeCluster,
        ApiKey::UpdateFeatures,
    ] {
        assert!(keys.contains(&(served as i16)), "{served:?} advertised");
    }
    for absent in [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::Metadata,
        ApiKey::JoinGroup,
    ] {
        assert!(
            !keys.contains(&(absent as i16)),
            "{absent:?} not advertised"
        );
    }
    let brokers = DescribeClusterRequest::default().with_endpoint_type(1);
    let mismatched = client.call(&brokers, 1).await;
    assert_eq!(
        mismatched.error_code,
        ResponseError::MismatchedEndpointType.code()
    );
    // A data API is not served there: the connection is closed, as for an unknown API.
    let metadata = MetadataRequest::default().with_topics(None);
    assert!(client.try_call(&metadata, 12).await.is_none(), "closed");
    // The broker listener does not serve the controllers' endpoint type.
    let mut on_broker = Client::connect(cluster.address(2).expect("node 2")).await;
    let controllers = DescribeClusterRequest::default().with_endpoint_type(2);
    let refused = on_broker.call(&controllers, 1).await;
    assert_eq!(
        refused.error_code,
        ResponseError::MismatchedEndpointType.code()
    );
    cluster.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_are_described_with_the_active_one_and_the_quorum() {
    let (cluster, controller) = cluster().await;
    let controllers = DescribeClusterRequest::default().with_endpoint_type(2);
    let described = eventually("an active controller known", || async {
        let mut client = Client::try_connect(controller).await?;
        let described = client.try_call(&controllers, 1).await?;
        (described.controller_id.0 > 0).then_some(described)
    })
    .await;
    assert_eq!(described.error_code, 0);
    assert_eq!(described.endpoint_type, 2);
    let mut ids: Vec<i32> = described.brokers.iter().map(|b| b.broker_id.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3]);
    let two = described
        .brokers
        .iter()
        .find(|b| b.broker_id.0 == 2)
        .expect("2");
    assert_eq!(
        i32::from(controller.port()),
        two.port,
        "controller addresses"
    );

    let metadata_partition = describe_quorum_request::TopicData::default()
        .with_topic_name(common::name("__cluster_metadata"))
        .with_partitions(vec![describe_quorum_request::PartitionData::default()]);
    let request = DescribeQuorumRequest::default().with_topics(vec![metadata_partition]);
    let mut client = Client::connect(controller).await;
    let quorum = client.call(&request, 2).await;
    assert_eq!(quorum.error_code, 0);
    let partition = &quorum.topics[0].partitions[0];
    assert_eq!(partition.leader_id, described.controller_id);
    assert_eq!(partition.current_voters.len(), 3);
    cluster.shutdown().await.expect("clean shutdown");
}
