//! The metadata quorum of a single combined node, in-process: the controller's checks on
//! AlterPartition (KIP-497) and broker epochs, and the import of a pre-Raft metadata
//! snapshot. Multi-node behaviour is in tests/cluster.rs.

mod common;

use common::*;
use highwater::api::errors::controller_error;
use highwater::controller::{
    AlterPartition, Controller, ControllerReply, ControllerRequest, PartitionIsr,
};
use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;

fn isr(leader_epoch: i32, partition_epoch: i32, isr: &[i32]) -> PartitionIsr {
    PartitionIsr {
        topic: "t".into(),
        partition: 0,
        leader_epoch,
        partition_epoch,
        isr: isr.to_vec(),
    }
}

fn alter(broker_epoch: i64, partitions: Vec<PartitionIsr>) -> ControllerRequest {
    ControllerRequest::AlterPartition(AlterPartition {
        node_id: 1,
        broker_epoch,
        partitions,
    })
}

/// The outcome of each partition of an AlterPartition, or the request's own refusal.
async fn outcomes(
    controller: &Controller,
    request: ControllerRequest,
) -> Result<Vec<Result<(i32, i32), ResponseError>>, ResponseError> {
    let answer = controller.request(request).await;
    match answer {
        Ok(ControllerReply::Partitions(outcomes)) => Ok(outcomes
            .into_iter()
            .map(|o| {
                o.map(|p| (p.leader_epoch, p.partition_epoch))
                    .map_err(|e| controller_error(&e.into()))
            })
            .collect()),
        Ok(other) => panic!("expected per-partition outcomes, got {other:?}"),
        Err(error) => Err(controller_error(&error)),
    }
}

#[tokio::test]
async fn alter_partition_is_checked_against_the_leader_and_partition_epochs() {
    // Goal: the active controller accepts an ISR change only from the current leader at the
    // current epochs, bumps the partition epoch, and refuses stale or invalid changes with
    // Kafka's codes, each partition of a request alone. Method: one node, requests through
    // the broker's controller handle.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    assert_eq!(create_topic(&mut client, "u", 1).await, 0);
    let controller = &broker.broker.controller;
    let epoch = controller
        .image()
        .broker(1)
        .expect("registered")
        .broker_epoch;

    let accepted = outcomes(controller, alter(epoch, vec![isr(0, 0, &[1])])).await;
    assert_eq!(accepted, Ok(vec![Ok((0, 1))]));
    let refusals = [
        (isr(0, 0, &[1]), ResponseError::InvalidUpdateVersion),
        (isr(1, 1, &[1]), ResponseError::NotLeaderOrFollower),
        (isr(0, 1, &[2]), ResponseError::IneligibleReplica),
    ];
    for (refused, expected) in refusals {
        let answer = outcomes(controller, alter(epoch, vec![refused.clone()])).await;
        assert_eq!(answer, Ok(vec![Err(expected)]), "{refused:?}");
    }
    let stale = outcomes(controller, alter(epoch - 1, vec![isr(0, 1, &[1])])).await;
    assert_eq!(stale, Err(ResponseError::StaleBrokerEpoch));
    let image = controller.image();
    let partition = image.topic("t").and_then(|t| t.partition(0)).expect("t-0");
    assert_eq!(partition.partition_epoch, 1, "refusals changed nothing");

    // One request for several partitions: a refused one does not hold back the others.
    let mut stale_other = isr(0, 5, &[1]);
    stale_other.topic = "u".into();
    let mixed = vec![isr(0, 1, &[1]), stale_other, isr(0, 1, &[1])];
    let answer = outcomes(controller, alter(epoch, mixed)).await;
    let expected = vec![
        Ok((0, 2)),
        Err(ResponseError::InvalidUpdateVersion),
        Err(ResponseError::IneligibleReplica),
    ];
    assert_eq!(answer, Ok(expected), "accepted, stale, named twice");
}

#[tokio::test]
async fn a_pre_raft_metadata_snapshot_is_imported_on_first_start() {
    // Goal: a data directory written before the quorum keeps its topics, topic ids, epochs
    // and producer ids. Method: write the old snapshot file, start a broker on it.
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = r#"{"cluster_id":"AAAAAAAAAAAAAAAAAAAAAA","topics":{"old":{"name":"old",
        "topic_id":"00000000-0000-0000-0000-000000000007","partitions":2,"replicas":[1,1],
        "leader_epoch":3,"configs":{"retention.ms":"1000"}}},"producer_id_block_end":5000}"#;
    std::fs::write(dir.path().join("highwater-metadata.json"), snapshot).expect("write");
    let broker = TestBroker::start_in(dir, &[]).await;
    let image = broker.broker.controller.image();
    assert_eq!(image.cluster_id, "AAAAAAAAAAAAAAAAAAAAAA");
    let topic = image.topic("old").expect("imported");
    assert_eq!(topic.topic_id, uuid::Uuid::from_u128(7));
    assert_eq!(topic.partitions.len(), 2);
    assert_eq!(topic.partitions[1].leader_epoch, 3);
    assert_eq!(topic.configs["retention.ms"], "1000");
    let mut client = broker.client().await;
    assert_eq!(fetch(&mut client, "old", 1, 0).await.error_code, 0);
    let id = broker
        .broker
        .controller
        .allocate_producer_id()
        .await
        .expect("id");
    assert!(
        id >= 5000,
        "producer ids continue after the old block: {id}"
    );
}

#[tokio::test]
async fn incremental_alter_configs_goes_through_the_controller_and_reaches_the_log() {
    // Goal: a topic config set with IncrementalAlterConfigs is committed, described, and
    // enforced by the partition's log at once; bad changes are refused with Kafka's codes.
    // Method: one node, raw IncrementalAlterConfigs v1, then Produce and DescribeConfigs.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let big = batch(200, -1, -1, now_ms());
    let set = client
        .call(&alter_config(2, "t", "max.message.bytes", "1000"), 1)
        .await;
    assert_eq!(set.responses[0].error_code, 0);
    let image = broker.broker.controller.image();
    let configs = &image.topic("t").expect("t").configs;
    assert_eq!(configs["max.message.bytes"], "1000");
    let refused = produce(&mut client, "t", 0, big).await;
    assert_eq!(refused.error_code, ResponseError::MessageTooLarge.code());

    let cases = [
        (
            alter_config(2, "t", "retention.ms", "soon"),
            ResponseError::InvalidConfig,
        ),
        (
            alter_config(2, "nope", "retention.ms", "1"),
            ResponseError::UnknownTopicOrPartition,
        ),
        (
            alter_config(4, "1", "log.dirs", "/elsewhere"),
            ResponseError::InvalidRequest,
        ),
    ];
    for (request, expected) in cases {
        let response = client.call(&request, 1).await;
        assert_eq!(
            response.responses[0].error_code,
            expected.code(),
            "{request:?}"
        );
    }
}

#[tokio::test]
async fn metadata_survives_snapshots_and_log_purges_across_a_restart() {
    // Goal: after more records than one snapshot interval, the state machine is snapshotted
    // and the log purged, and a restart rebuilds the same state from snapshot plus log.
    // Method: 1,200 producer-id blocks (one record each) on one node, kill, restart.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "kept", 2).await, 0);
    let controller = std::sync::Arc::clone(&broker.broker.controller);
    let mut last = 0;
    for _ in 0..1200 {
        let request = ControllerRequest::AllocateProducerIds { node_id: 1 };
        match controller.request(request).await {
            Ok(ControllerReply::ProducerIds { first, .. }) => last = first,
            other => panic!("unexpected {other:?}"),
        }
    }
    let metadata_dir = broker.dir.path().join("__cluster_metadata-0");
    assert!(
        metadata_dir.join("snapshot.json").exists(),
        "a snapshot was taken"
    );
    let topic_id = controller.image().topic("kept").expect("kept").topic_id;
    drop(controller);
    let broker = TestBroker::start_in(broker.kill().await, &[]).await;
    let image = broker.broker.controller.image();
    assert_eq!(image.topic("kept").expect("kept").topic_id, topic_id);
    let id = broker
        .broker
        .controller
        .allocate_producer_id()
        .await
        .expect("id");
    assert!(
        id > last,
        "no producer id block is handed out twice: {id} <= {last}"
    );
}

#[tokio::test]
async fn legacy_alter_configs_makes_a_topics_overrides_exactly_those_given() {
    // Goal: AlterConfigs (the legacy API sarama and kafka-python use on old brokers) sets
    // the given configs and reverts every other override to its default, as Kafka does;
    // validate_only changes nothing. (UnsupportedVersion before.)
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    use kafka_protocol::messages::AlterConfigsRequest;
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let set = client
        .call(&alter_config(2, "t", "cleanup.policy", "compact"), 1)
        .await;
    assert_eq!(set.responses[0].error_code, 0);
    let legacy = |validate_only: bool, value: &str| {
        AlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("t"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_value(Some(StrBytes::from(value.to_string())))])])
    };
    let checked = client.call(&legacy(true, "2000"), 2).await;
    assert_eq!(checked.responses[0].error_code, 0);
    let configs = || {
        broker
            .broker
            .controller
            .image()
            .topic("t")
            .expect("t")
            .configs
            .clone()
    };
    assert_eq!(
        configs().get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    assert!(
        !configs().contains_key("retention.ms"),
        "validate_only changes nothing"
    );
    let applied = client.call(&legacy(false, "2000"), 2).await;
    assert_eq!(applied.responses[0].error_code, 0);
    let now = configs();
    assert_eq!(now.get("retention.ms").map(String::as_str), Some("2000"));
    assert!(
        !now.contains_key("cleanup.policy"),
        "an override not given reverts: {now:?}"
    );
    let bad = client.call(&legacy(false, "soon"), 0).await;
    assert_eq!(
        bad.responses[0].error_code,
        ResponseError::InvalidConfig.code()
    );
}
