//! `*_authorized_operations` (KIP-430) with no authorizer configured: every operation of the
//! resource type when asked, `i32::MIN` when not, in the fields and versions Apache Kafka
//! 4.1.1 fills (the numbers below are what it answered here to the same requests).

mod common;

use common::*;
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC_OPS: i32 = 3576;
const CLUSTER_OPS: i32 = 8096;
const GROUP_OPS: i32 = 3400;
const NOT_ASKED: i32 = i32::MIN;

#[tokio::test]
async fn every_operation_is_authorized_when_asked_as_kafka_answers_without_an_authorizer() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "authz", 1).await, 0);
    for version in [8i16, 10, 12] {
        let asked = MetadataRequest::default()
            .with_topics(None)
            .with_include_cluster_authorized_operations(version <= 10)
            .with_include_topic_authorized_operations(true);
        let answer = client.call(&asked, version).await;
        let cluster = if version <= 10 {
            CLUSTER_OPS
        } else {
            NOT_ASKED
        };
        assert_eq!(answer.cluster_authorized_operations, cluster, "v{version}");
        assert_eq!(
            answer.topics[0].topic_authorized_operations, TOPIC_OPS,
            "v{version}"
        );
        let plain = client
            .call(&MetadataRequest::default().with_topics(None), version)
            .await;
        assert_eq!(plain.cluster_authorized_operations, NOT_ASKED);
        assert_eq!(plain.topics[0].topic_authorized_operations, NOT_ASKED);
    }
    let asked = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    assert_eq!(
        client.call(&asked, 1).await.cluster_authorized_operations,
        CLUSTER_OPS
    );
    let plain = client.call(&DescribeClusterRequest::default(), 1).await;
    assert_eq!(plain.cluster_authorized_operations, NOT_ASKED);

    common::groups::find_coordinator(&mut client, "g").await;
    assert_eq!(
        common::groups::commit(&mut client, "g", "", -1, "authz", 1).await,
        0
    );
    let group = || vec![GroupId(StrBytes::from_static_str("g"))];
    let asked = DescribeGroupsRequest::default()
        .with_groups(group())
        .with_include_authorized_operations(true);
    assert_eq!(
        client.call(&asked, 5).await.groups[0].authorized_operations,
        GROUP_OPS
    );
    let plain = DescribeGroupsRequest::default().with_groups(group());
    assert_eq!(
        client.call(&plain, 5).await.groups[0].authorized_operations,
        NOT_ASKED
    );

    let described = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(name("authz"))]);
    let answer = client.call(&described, 0).await;
    assert_eq!(answer.topics[0].topic_authorized_operations, TOPIC_OPS);
}
