//! Every advertised version of every API is answered with a well-formed response: each
//! request is sent at each version and the response decoded with the same codec the
//! clients use. An advertised version that fails here would break a client outright.

mod common;

use common::consumer_groups::heartbeat_join;
use common::groups::*;
use common::*;
use highwater::api::versions::SUPPORTED_APIS;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

async fn topic_id(client: &mut Client, topic: &str) -> Uuid {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic))),
    ]));
    client.call(&request, 12).await.topics[0].topic_id
}

async fn exercise(client: &mut Client, key: ApiKey, version: i16, id: Uuid) {
    match key {
        ApiKey::Produce | ApiKey::Fetch | ApiKey::ListOffsets | ApiKey::OffsetForLeaderEpoch => {
            exercise_data(client, key, version, id).await
        }
        ApiKey::Metadata
        | ApiKey::ApiVersions
        | ApiKey::DescribeCluster
        | ApiKey::InitProducerId
        | ApiKey::FindCoordinator => exercise_cluster(client, key, version).await,
        ApiKey::JoinGroup
        | ApiKey::SyncGroup
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::DescribeGroups
        | ApiKey::ListGroups => exercise_members(client, key, version).await,
        ApiKey::OffsetCommit
        | ApiKey::OffsetFetch
        | ApiKey::DeleteGroups
        | ApiKey::OffsetDelete => exercise_offsets(client, key, version).await,
        ApiKey::ConsumerGroupHeartbeat | ApiKey::ConsumerGroupDescribe => {
            exercise_consumer_groups(client, key, version).await
        }
        ApiKey::IncrementalAlterConfigs => exercise_configs(client, version).await,
        ApiKey::AddPartitionsToTxn
        | ApiKey::AddOffsetsToTxn
        | ApiKey::EndTxn
        | ApiKey::WriteTxnMarkers
        | ApiKey::TxnOffsetCommit
        | ApiKey::DescribeTransactions
        | ApiKey::ListTransactions
        | ApiKey::DescribeProducers => exercise_transactions(client, key, version).await,
        ApiKey::DescribeTopicPartitions => exercise_describe_partitions(client, version).await,
        ApiKey::ElectLeaders => {
            let request = elect_leaders(0, "t", 0);
            let response = client.call(&request, version).await;
            let result = &response.replica_election_results[0].partition_result[0];
            let expected = ResponseError::ElectionNotNeeded.code();
            assert_eq!(result.error_code, expected, "v{version}");
        }
        _ => exercise_admin(client, key, version).await,
    }
}

/// A transactional producer for `id` (FindCoordinator creates `__transaction_state`).
async fn transactional_producer(client: &mut Client, id: &str) -> (i64, i16) {
    let key = StrBytes::from_string(id.to_string());
    let find = FindCoordinatorRequest::default()
        .with_key(key.clone())
        .with_key_type(1);
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(key)))
        .with_transaction_timeout_ms(60_000);
    for _ in 0..100 {
        if client.call(&find, 3).await.error_code == 0 {
            let response = client.call(&init, 4).await;
            if response.error_code == 0 {
                return (response.producer_id.0, response.producer_epoch);
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no transactional producer id for {id}");
}

async fn exercise_add_partitions(client: &mut Client, id: &str, version: i16) {
    let txn = TransactionalId(StrBytes::from_string(id.to_string()));
    let (pid, epoch) = transactional_producer(client, id).await;
    let topic = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
        .with_name(name("t"))
        .with_partitions(vec![0]);
    let request = match version < 4 {
        true => AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn)
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![topic]),
        false => AddPartitionsToTxnRequest::default().with_transactions(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                .with_transactional_id(txn)
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_topics(vec![topic]),
        ]),
    };
    let response = client.call(&request, version).await;
    let results = match version < 4 {
        true => response.results_by_topic_v3_and_below,
        false => response.results_by_transaction[0].topic_results.clone(),
    };
    assert_eq!(
        results[0].results_by_partition[0].partition_error_code, 0,
        "v{version}"
    );
}

async fn exercise_txn_offset_commit(client: &mut Client, id: &str, version: i16) {
    let txn = TransactionalId(StrBytes::from_string(id.to_string()));
    let (pid, epoch) = transactional_producer(client, id).await;
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn)
        .with_group_id(GroupId(StrBytes::from_string(format!("g-{id}"))))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ]);
    let mut response = client.call(&request, version).await;
    for _ in 0..100 {
        let code = response.topics[0].partitions[0].error_code;
        if code != ResponseError::CoordinatorLoadInProgress.code()
            && code != ResponseError::NotCoordinator.code()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        response = client.call(&request, version).await;
    }
    assert_eq!(response.topics[0].partitions[0].error_code, 0, "v{version}");
}

/// DescribeTopicPartitions of "t" whole, then of every topic one partition per page.
async fn exercise_describe_partitions(client: &mut Client, version: i16) {
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![
            describe_topic_partitions_request::TopicRequest::default().with_name(name("t")),
        ])
        .with_response_partition_limit(2000);
    let response = client.call(&request, version).await;
    let partition = &response.topics[0].partitions[0];
    assert_eq!(
        (response.topics[0].error_code, partition.leader_id.0),
        (0, 1),
        "v{version}"
    );
    assert_eq!(
        partition.eligible_leader_replicas,
        Some(vec![]),
        "no ELR while in sync"
    );
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let page = DescribeTopicPartitionsRequest::default()
            .with_response_partition_limit(1)
            .with_cursor(cursor);
        let response = client.call(&page, version).await;
        let listed: usize = response.topics.iter().map(|t| t.partitions.len()).sum();
        assert!(listed <= 1, "one partition per page, v{version}");
        pages += 1;
        cursor = response.next_cursor.map(|c| {
            describe_topic_partitions_request::Cursor::default()
                .with_topic_name(c.topic_name)
                .with_partition_index(c.partition_index)
        });
        if cursor.is_none() {
            break;
        }
        assert!(pages < 10_000, "the cursor moves on");
    }
    assert!(pages > 1, "several partitions, several pages (v{version})");
}

async fn exercise_write_markers(client: &mut Client, version: i16) {
    let marker = write_txn_markers_request::WritableTxnMarker::default()
        .with_producer_id(ProducerId(4242))
        .with_producer_epoch(0)
        .with_transaction_result(false)
        .with_topics(vec![
            write_txn_markers_request::WritableTxnMarkerTopic::default()
                .with_name(name("t"))
                .with_partition_indexes(vec![0]),
        ]);
    let request = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
    let response = client.call(&request, version).await;
    assert_eq!(
        response.markers[0].topics[0].partitions[0].error_code, 0,
        "v{version}"
    );
}

async fn exercise_transactions(client: &mut Client, key: ApiKey, version: i16) {
    let id = format!("txn-{key:?}-v{version}");
    let txn = TransactionalId(StrBytes::from_string(id.clone()));
    match key {
        ApiKey::AddPartitionsToTxn => exercise_add_partitions(client, &id, version).await,
        ApiKey::AddOffsetsToTxn => {
            let (pid, epoch) = transactional_producer(client, &id).await;
            let request = AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn)
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(StrBytes::from_static_str("g")));
            assert_eq!(
                client.call(&request, version).await.error_code,
                0,
                "v{version}"
            );
        }
        ApiKey::EndTxn => {
            let (pid, epoch) = transactional_producer(client, &id).await;
            let request = EndTxnRequest::default()
                .with_transactional_id(txn)
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(true);
            let expected = ResponseError::InvalidTxnState.code();
            assert_eq!(
                client.call(&request, version).await.error_code,
                expected,
                "v{version}"
            );
        }
        ApiKey::WriteTxnMarkers => exercise_write_markers(client, version).await,
        ApiKey::TxnOffsetCommit => exercise_txn_offset_commit(client, &id, version).await,
        ApiKey::DescribeTransactions => {
            transactional_producer(client, &id).await;
            let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn]);
            let response = client.call(&request, version).await;
            let state = &response.transaction_states[0];
            assert_eq!(
                (state.error_code, state.transaction_state.as_str()),
                (0, "Empty"),
                "v{version}"
            );
        }
        ApiKey::DescribeProducers => {
            let request = DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(name("t"))
                    .with_partition_indexes(vec![0]),
            ]);
            let response = client.call(&request, version).await;
            let partition = &response.topics[0].partitions[0];
            assert_eq!(partition.error_code, 0, "v{version}");
            assert!(
                !partition.active_producers.is_empty(),
                "the marker's producer, v{version}"
            );
        }
        ApiKey::ListTransactions => {
            let response = client
                .call(&ListTransactionsRequest::default(), version)
                .await;
            assert_eq!(response.error_code, 0, "v{version}");
            assert!(!response.transaction_states.is_empty(), "v{version}");
        }
        other => panic!("no exercise for {other:?}"),
    }
}

async fn exercise_configs(client: &mut Client, version: i16) {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("t"))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(StrBytes::from(format!("{}", 1000 + version)))),
            ]),
    ]);
    let response = client.call(&request, version).await;
    assert_eq!(response.responses[0].error_code, 0, "v{version}");
}

async fn exercise_data(client: &mut Client, key: ApiKey, version: i16, id: Uuid) {
    match key {
        ApiKey::Produce => {
            let mut request = produce_request("t", 0, batch(1, -1, -1, 0), -1);
            if version >= 13 {
                request.topic_data[0].topic_id = id;
                request.topic_data[0].name = name("");
            }
            let response = client.call(&request, version).await;
            assert_eq!(
                response.responses[0].partition_responses[0].error_code, 0,
                "v{version}"
            );
        }
        ApiKey::Fetch => {
            let mut request = fetch_request("t", 0, 0, 0, 1);
            if version >= 13 {
                request.topics[0].topic_id = id;
                request.topics[0].topic = name("");
            }
            if version >= 15 {
                request.replica_id = BrokerId(-1);
            }
            let response = client.call(&request, version).await;
            assert_eq!(
                response.responses[0].partitions[0].error_code, 0,
                "v{version}"
            );
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1)])]);
            let response = client.call(&request, version).await;
            assert_eq!(response.topics[0].partitions[0].error_code, 0, "v{version}");
        }
        ApiKey::OffsetForLeaderEpoch => {
            let request = OffsetForLeaderEpochRequest::default().with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_leader_epoch(0)]),
            ]);
            let response = client.call(&request, version).await;
            let partition = &response.topics[0].partitions[0];
            assert_eq!(
                (partition.error_code, partition.leader_epoch),
                (0, 0),
                "v{version}"
            );
        }
        other => panic!("no exercise for {other:?}"),
    }
}

async fn exercise_cluster(client: &mut Client, key: ApiKey, version: i16) {
    match key {
        ApiKey::Metadata => {
            let topics = vec![MetadataRequestTopic::default().with_name(Some(name("t")))];
            let response = client
                .call(
                    &MetadataRequest::default().with_topics(Some(topics)),
                    version,
                )
                .await;
            assert_eq!(response.topics[0].error_code, 0, "v{version}");
            assert_eq!(response.brokers.len(), 1);
        }
        ApiKey::ApiVersions => {
            let mut request = ApiVersionsRequest::default();
            if version >= 3 {
                request = request
                    .with_client_software_name(StrBytes::from_static_str("test"))
                    .with_client_software_version(StrBytes::from_static_str("1"));
            }
            check_api_versions(&client.call(&request, version).await, version);
        }
        ApiKey::FindCoordinator => {
            let key = StrBytes::from_static_str("g");
            let request = match version >= 4 {
                true => FindCoordinatorRequest::default().with_coordinator_keys(vec![key]),
                false => FindCoordinatorRequest::default().with_key(key),
            };
            let response = client.call(&request, version).await;
            let (code, port) = match version >= 4 {
                true => (
                    response.coordinators[0].error_code,
                    response.coordinators[0].port,
                ),
                false => (response.error_code, response.port),
            };
            assert_eq!(code, 0, "v{version}");
            assert_eq!(port, i32::from(client.peer.port()));
        }
        ApiKey::DescribeCluster => {
            let response = client
                .call(&DescribeClusterRequest::default(), version)
                .await;
            assert_eq!(response.error_code, 0);
            assert_eq!(response.brokers.len(), 1);
        }
        ApiKey::InitProducerId => {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60000);
            let response = client.call(&request, version).await;
            assert_eq!(response.error_code, 0);
            assert!(response.producer_id.0 >= 0);
        }
        other => panic!("no exercise for {other:?}"),
    }
}

/// ApiVersions lists every API and, from v3, the finalized feature levels.
fn check_api_versions(response: &ApiVersionsResponse, version: i16) {
    assert_eq!(response.error_code, 0);
    assert_eq!(response.api_keys.len(), SUPPORTED_APIS.len());
    let finalized = response
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| f.max_version_level);
    match version >= 3 {
        true => assert_eq!(finalized, Some(2), "v{version}"),
        false => assert!(response.supported_features.is_empty(), "v{version}"),
    }
}

/// DescribeQuorum of the one-voter quorum: this node leads, at least at term 1.
async fn exercise_describe_quorum(client: &mut Client, version: i16) {
    let request = DescribeQuorumRequest::default().with_topics(vec![
        describe_quorum_request::TopicData::default()
            .with_topic_name(name("__cluster_metadata"))
            .with_partitions(vec![describe_quorum_request::PartitionData::default()]),
    ]);
    let response = client.call(&request, version).await;
    assert_eq!(response.error_code, 0, "v{version}");
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0, "v{version}");
    assert_eq!(partition.leader_id.0, 1, "v{version}");
    assert_eq!(partition.current_voters.len(), 1, "v{version}");
    assert!(partition.high_watermark > 0, "v{version}");
    assert_eq!(response.nodes.len(), if version >= 2 { 1 } else { 0 });
}

/// UpdateFeatures to the level already finalized: accepted, nothing changes.
async fn exercise_update_features(client: &mut Client, version: i16) {
    let update = update_features_request::FeatureUpdateKey::default()
        .with_feature(StrBytes::from_static_str("transaction.version"))
        .with_max_version_level(2);
    let request = UpdateFeaturesRequest::default().with_feature_updates(vec![update]);
    let response = client.call(&request, version).await;
    assert_eq!(response.error_code, 0, "v{version}");
    let results = if version <= 1 { 1 } else { 0 };
    assert_eq!(response.results.len(), results, "v{version}");
}

/// DescribeLogDirs of one partition: the broker's one log directory holds it; v4 adds the
/// file system's space.
async fn exercise_describe_log_dirs(client: &mut Client, version: i16) {
    let topic = format!("dirs-v{version}");
    create_topic(client, &topic, 2).await;
    let request = DescribeLogDirsRequest::default().with_topics(Some(vec![
        describe_log_dirs_request::DescribableLogDirTopic::default()
            .with_topic(name(&topic))
            .with_partitions(vec![1]),
    ]));
    let response = client.call(&request, version).await;
    assert_eq!(response.error_code, 0, "v{version}");
    assert_eq!(response.results.len(), 1, "v{version}");
    let dir = &response.results[0];
    assert_eq!(dir.error_code, 0, "v{version}");
    assert!(dir.log_dir.starts_with('/'), "absolute: {}", dir.log_dir);
    let named: Vec<_> = dir.topics.iter().map(|t| t.name.0.as_str()).collect();
    assert_eq!(named, [topic.as_str()], "v{version}");
    let indexes: Vec<i32> = dir.topics[0]
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(indexes, [1], "only the partition asked for");
    assert_eq!(dir.total_bytes > 0, version >= 4, "v{version}");
}

/// AlterReplicaLogDirs of a replica to the directory it is in: nothing to move.
async fn exercise_alter_replica_log_dirs(client: &mut Client, version: i16) {
    let topic = format!("kept-v{version}");
    create_topic(client, &topic, 1).await;
    let dirs = client
        .call(&DescribeLogDirsRequest::default().with_topics(None), 4)
        .await;
    let request = AlterReplicaLogDirsRequest::default().with_dirs(vec![
        alter_replica_log_dirs_request::AlterReplicaLogDir::default()
            .with_path(dirs.results[0].log_dir.clone())
            .with_topics(vec![
                alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                    .with_name(name(&topic))
                    .with_partitions(vec![0]),
            ]),
    ]);
    let response = client.call(&request, version).await;
    assert_eq!(response.results[0].topic_name.0.as_str(), topic);
    assert_eq!(
        response.results[0].partitions[0].error_code, 0,
        "v{version}"
    );
}

/// The ACL APIs without an authorizer: SECURITY_DISABLED with Kafka's message.
async fn exercise_acls(client: &mut Client, key: ApiKey, version: i16) {
    let disabled = ResponseError::SecurityDisabled.code();
    let (code, message) = match key {
        ApiKey::DescribeAcls => {
            let response = client.call(&DescribeAclsRequest::default(), version).await;
            (response.error_code, response.error_message)
        }
        ApiKey::CreateAcls => {
            let creation = create_acls_request::AclCreation::default();
            let request = CreateAclsRequest::default().with_creations(vec![creation]);
            let response = client.call(&request, version).await;
            let result = &response.results[0];
            (result.error_code, result.error_message.clone())
        }
        _ => {
            let filter = delete_acls_request::DeleteAclsFilter::default();
            let request = DeleteAclsRequest::default().with_filters(vec![filter]);
            let response = client.call(&request, version).await;
            let result = &response.filter_results[0];
            (result.error_code, result.error_message.clone())
        }
    };
    assert_eq!(code, disabled, "{key:?} v{version}");
    assert_eq!(message.as_deref(), Some("No Authorizer is configured."));
}

/// ListConfigResources: v0 knows client metrics only (none here); v1 lists topics too.
async fn exercise_list_config_resources(client: &mut Client, version: i16) {
    let topic = format!("listed-v{version}");
    create_topic(client, &topic, 1).await;
    let response = client
        .call(&ListConfigResourcesRequest::default(), version)
        .await;
    assert_eq!(response.error_code, 0, "v{version}");
    let topics: Vec<&str> = response
        .config_resources
        .iter()
        .filter(|r| r.resource_type == 2)
        .map(|r| r.resource_name.as_str())
        .collect();
    assert_eq!(topics.contains(&topic.as_str()), version >= 1, "v{version}");
    if version >= 1 {
        let unknown = ListConfigResourcesRequest::default().with_resource_types(vec![64]);
        let refused = client.call(&unknown, version).await;
        assert_eq!(refused.error_code, ResponseError::UnsupportedVersion.code());
    }
}

/// DescribeConfigs of a topic: its retention among its configs.
async fn exercise_describe_configs(client: &mut Client, version: i16) {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("t"))]);
    let response = client.call(&request, version).await;
    assert_eq!(response.results[0].error_code, 0);
    assert!(response.results[0]
        .configs
        .iter()
        .any(|c| c.name.as_str() == "retention.ms"));
}

/// The legacy AlterConfigs of a topic's retention.
async fn exercise_alter_configs(client: &mut Client, version: i16) {
    let topic = format!("altered-v{version}");
    create_topic(client, &topic, 1).await;
    let request = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from(topic.clone()))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("60000")))]),
    ]);
    let response = client.call(&request, version).await;
    assert_eq!(response.responses[0].error_code, 0, "v{version}");
}

async fn exercise_admin(client: &mut Client, key: ApiKey, version: i16) {
    match key {
        ApiKey::AlterConfigs => exercise_alter_configs(client, version).await,
        ApiKey::ListConfigResources => exercise_list_config_resources(client, version).await,
        ApiKey::DescribeAcls | ApiKey::CreateAcls | ApiKey::DeleteAcls => {
            exercise_acls(client, key, version).await
        }
        ApiKey::DescribeLogDirs => exercise_describe_log_dirs(client, version).await,
        ApiKey::AlterReplicaLogDirs => exercise_alter_replica_log_dirs(client, version).await,
        ApiKey::UpdateFeatures => exercise_update_features(client, version).await,
        ApiKey::DescribeQuorum => exercise_describe_quorum(client, version).await,
        ApiKey::DeleteRecords => {
            let topic = format!("trimmed-v{version}");
            create_topic(client, &topic, 1).await;
            let request = DeleteRecordsRequest::default().with_topics(vec![
                delete_records_request::DeleteRecordsTopic::default()
                    .with_name(name(&topic))
                    .with_partitions(vec![
                        delete_records_request::DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(-1),
                    ]),
            ]);
            let response = client.call(&request, version).await;
            assert_eq!(response.topics[0].partitions[0].error_code, 0, "v{version}");
        }
        ApiKey::CreateTopics => {
            assert_eq!(
                create_topic_at(client, &format!("created-v{version}"), version).await,
                0
            );
        }
        ApiKey::DeleteTopics => exercise_delete_topics(client, version).await,
        ApiKey::DescribeConfigs => exercise_describe_configs(client, version).await,
        ApiKey::AlterPartitionReassignments | ApiKey::ListPartitionReassignments => {
            exercise_reassignments(client, key, version).await
        }
        ApiKey::SaslHandshake
        | ApiKey::SaslAuthenticate
        | ApiKey::DescribeClientQuotas
        | ApiKey::AlterClientQuotas
        | ApiKey::DescribeUserScramCredentials
        | ApiKey::AlterUserScramCredentials
        | ApiKey::CreateDelegationToken
        | ApiKey::RenewDelegationToken
        | ApiKey::ExpireDelegationToken
        | ApiKey::DescribeDelegationToken => exercise_security(client, key, version).await,
        ApiKey::CreatePartitions => {
            let topic = format!("grown-v{version}");
            create_topic(client, &topic, 1).await;
            let request = CreatePartitionsRequest::default().with_topics(vec![
                CreatePartitionsTopic::default()
                    .with_name(name(&topic))
                    .with_count(2),
            ]);
            let response = client.call(&request, version).await;
            assert_eq!(response.results[0].error_code, 0, "v{version}");
        }
        other => panic!("no exercise for {other:?}"),
    }
}

/// A topic made and deleted, by name (by topic state from v6).
async fn exercise_delete_topics(client: &mut Client, version: i16) {
    let topic = format!("deleted-v{version}");
    create_topic(client, &topic, 1).await;
    let request = if version >= 6 {
        DeleteTopicsRequest::default().with_topics(vec![
            delete_topics_request::DeleteTopicState::default().with_name(Some(name(&topic))),
        ])
    } else {
        DeleteTopicsRequest::default().with_topic_names(vec![name(&topic)])
    };
    let response = client.call(&request, version).await;
    assert_eq!(response.responses[0].error_code, 0, "v{version}");
}

/// Security APIs on a PLAINTEXT listener: the SASL requests are out of turn there
/// (ILLEGAL_SASL_STATE, as Kafka answers), no quota is set (a quota change is only
/// validated), a SCRAM credential is set and described, and token requests are refused.
async fn exercise_security(client: &mut Client, key: ApiKey, version: i16) {
    let illegal = ResponseError::IllegalSaslState.code();
    match key {
        ApiKey::SaslHandshake => {
            let request =
                SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
            assert_eq!(
                client.call(&request, version).await.error_code,
                illegal,
                "v{version}"
            );
        }
        ApiKey::SaslAuthenticate => {
            let response = client
                .call(&SaslAuthenticateRequest::default(), version)
                .await;
            assert_eq!(response.error_code, illegal, "v{version}");
        }
        ApiKey::DescribeClientQuotas => {
            let response = client
                .call(&DescribeClientQuotasRequest::default(), version)
                .await;
            assert_eq!(response.error_code, 0, "v{version}");
            assert_eq!(response.entries.map(|e| e.len()), Some(0));
        }
        ApiKey::AlterClientQuotas => {
            use alter_client_quotas_request::{EntityData, EntryData, OpData};
            let entity = EntityData::default()
                .with_entity_type(StrBytes::from_static_str("client-id"))
                .with_entity_name(Some(StrBytes::from(format!("quota-v{version}"))));
            let op = OpData::default()
                .with_key(StrBytes::from_static_str("producer_byte_rate"))
                .with_value(1024.0);
            let entry = EntryData::default()
                .with_entity(vec![entity])
                .with_ops(vec![op]);
            let request = AlterClientQuotasRequest::default()
                .with_entries(vec![entry])
                .with_validate_only(true);
            let response = client.call(&request, version).await;
            assert_eq!(response.entries.len(), 1, "v{version}");
            assert_eq!(response.entries[0].error_code, 0, "v{version}");
        }
        ApiKey::CreateDelegationToken
        | ApiKey::RenewDelegationToken
        | ApiKey::ExpireDelegationToken
        | ApiKey::DescribeDelegationToken => exercise_tokens(client, key, version).await,
        ApiKey::AlterUserScramCredentials => {
            let upsertion =
                alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                    .with_name(StrBytes::from(format!("user-v{version}")))
                    .with_mechanism(1)
                    .with_iterations(4096)
                    .with_salt(bytes::Bytes::from_static(b"salt"))
                    .with_salted_password(bytes::Bytes::from_static(&[7; 32]));
            let request =
                AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
            let response = client.call(&request, version).await;
            assert_eq!(response.results[0].error_code, 0, "v{version}");
        }
        _ => {
            let response = client
                .call(&DescribeUserScramCredentialsRequest::default(), version)
                .await;
            assert_eq!(response.error_code, 0, "v{version}");
        }
    }
}

/// The delegation-token APIs on a PLAINTEXT listener: refused with
/// DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, as Kafka refuses them there (tests/delegation_tokens.rs
/// makes, uses and describes tokens over SASL).
async fn exercise_tokens(client: &mut Client, key: ApiKey, version: i16) {
    let refused = ResponseError::DelegationTokenRequestNotAllowed.code();
    let code = match key {
        ApiKey::CreateDelegationToken => {
            let response = client
                .call(&CreateDelegationTokenRequest::default(), version)
                .await;
            assert_eq!(response.principal_name.as_str(), "ANONYMOUS");
            response.error_code
        }
        ApiKey::RenewDelegationToken => {
            let request = RenewDelegationTokenRequest::default();
            client.call(&request, version).await.error_code
        }
        ApiKey::ExpireDelegationToken => {
            let request = ExpireDelegationTokenRequest::default();
            client.call(&request, version).await.error_code
        }
        _ => {
            let request = DescribeDelegationTokenRequest::default();
            client.call(&request, version).await.error_code
        }
    };
    assert_eq!(code, refused, "{key:?} v{version}");
}

/// Partition reassignment on one node: moving a partition to the replicas it has completes
/// at once, a cancel without one under way is NO_REASSIGNMENT_IN_PROGRESS, an unknown
/// broker is refused, and none is listed as under way.
async fn exercise_reassignments(client: &mut Client, key: ApiKey, version: i16) {
    use alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
    let topic = format!("moved-{key:?}-v{version}");
    create_topic(client, &topic, 1).await;
    if key == ApiKey::ListPartitionReassignments {
        let response = client
            .call(&ListPartitionReassignmentsRequest::default(), version)
            .await;
        assert_eq!(response.error_code, 0, "v{version}");
        assert!(response.topics.is_empty(), "v{version}: none under way");
        return;
    }
    let partitions = [Some(vec![1]), None, Some(vec![7])].map(|target| {
        ReassignablePartition::default()
            .with_partition_index(0)
            .with_replicas(target.map(|t| t.into_iter().map(BrokerId).collect()))
    });
    let codes = [
        0,
        ResponseError::NoReassignmentInProgress.code(),
        ResponseError::InvalidReplicaAssignment.code(),
    ];
    for (partition, code) in partitions.into_iter().zip(codes) {
        let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
            ReassignableTopic::default()
                .with_name(name(&topic))
                .with_partitions(vec![partition]),
        ]);
        let response = client.call(&request, version).await;
        assert_eq!(response.error_code, 0, "v{version}");
        let answer = &response.responses[0].partitions[0];
        assert_eq!(
            answer.error_code, code,
            "v{version}: {:?}",
            answer.error_message
        );
    }
}

/// A fresh group per API and version, with one member that has joined (and, for the
/// APIs after SyncGroup, synced) through the latest versions.
async fn member_of(client: &mut Client, group: &str, synced: bool) -> (StrBytes, i32) {
    find_coordinator(client, group).await;
    let joined = join(client, group).await;
    assert_eq!(joined.error_code, 0, "{group}");
    if synced {
        let me = joined.member_id.clone();
        let response = sync(client, group, &me, joined.generation_id, &[(&me, b"a")]).await;
        assert_eq!(response.error_code, 0, "{group}");
    }
    (joined.member_id, joined.generation_id)
}

async fn exercise_members(client: &mut Client, key: ApiKey, version: i16) {
    let group = format!("{key:?}-v{version}");
    match key {
        ApiKey::JoinGroup => {
            find_coordinator(client, &group).await;
            let response = join_at(client, join_request(&group, "", b"m"), version).await;
            assert_eq!(response.error_code, 0, "v{version}");
            assert_eq!(response.generation_id, 1);
            assert_eq!(response.leader, response.member_id);
            assert_eq!(response.members.len(), 1);
        }
        ApiKey::SyncGroup => {
            let (me, generation) = member_of(client, &group, false).await;
            let request = SyncGroupRequest::default()
                .with_group_id(gid(&group))
                .with_member_id(me.clone())
                .with_generation_id(generation)
                .with_assignments(vec![
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(me)
                        .with_assignment(bytes::Bytes::from_static(b"assigned")),
                ]);
            let response = client.call(&request, version).await;
            assert_eq!(response.error_code, 0, "v{version}");
            assert_eq!(&response.assignment[..], b"assigned");
        }
        ApiKey::Heartbeat => {
            let (me, generation) = member_of(client, &group, true).await;
            let request = HeartbeatRequest::default()
                .with_group_id(gid(&group))
                .with_member_id(me)
                .with_generation_id(generation);
            assert_eq!(
                client.call(&request, version).await.error_code,
                0,
                "v{version}"
            );
        }
        ApiKey::LeaveGroup => exercise_leave(client, &group, version).await,
        ApiKey::DescribeGroups => {
            member_of(client, &group, true).await;
            let request = DescribeGroupsRequest::default().with_groups(vec![gid(&group)]);
            let response = client.call(&request, version).await;
            assert_eq!(response.groups[0].error_code, 0, "v{version}");
            assert_eq!(response.groups[0].group_state.as_str(), "Stable");
            assert_eq!(response.groups[0].members.len(), 1);
        }
        ApiKey::ListGroups => {
            member_of(client, &group, true).await;
            let response = client.call(&ListGroupsRequest::default(), version).await;
            assert_eq!(response.error_code, 0, "v{version}");
            assert!(response
                .groups
                .iter()
                .any(|g| g.group_id.0.as_str() == group));
        }
        other => panic!("no exercise for {other:?}"),
    }
}

async fn exercise_leave(client: &mut Client, group: &str, version: i16) {
    let (me, _) = member_of(client, group, true).await;
    let request = match version >= 3 {
        true => LeaveGroupRequest::default()
            .with_group_id(gid(group))
            .with_members(vec![
                leave_group_request::MemberIdentity::default().with_member_id(me)
            ]),
        false => LeaveGroupRequest::default()
            .with_group_id(gid(group))
            .with_member_id(me),
    };
    let response = client.call(&request, version).await;
    assert_eq!(response.error_code, 0, "v{version}");
    if version >= 3 {
        assert_eq!(response.members[0].error_code, 0, "v{version}");
    }
}

async fn exercise_offsets(client: &mut Client, key: ApiKey, version: i16) {
    let group = format!("{key:?}-v{version}");
    find_coordinator(client, &group).await;
    match key {
        ApiKey::OffsetCommit => {
            let request = OffsetCommitRequest::default()
                .with_group_id(gid(&group))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_committed_offset(7),
                        ]),
                ]);
            let response = client.call(&request, version).await;
            assert_eq!(response.topics[0].partitions[0].error_code, 0, "v{version}");
            assert_eq!(committed(client, &group, "t").await, 7);
        }
        ApiKey::OffsetFetch => exercise_offset_fetch(client, &group, version).await,
        ApiKey::DeleteGroups => {
            assert_eq!(commit(client, &group, "", -1, "t", 5).await, 0);
            let request = DeleteGroupsRequest::default().with_groups_names(vec![gid(&group)]);
            let response = client.call(&request, version).await;
            assert_eq!(response.results[0].error_code, 0, "v{version}");
            assert_eq!(committed(client, &group, "t").await, -1);
        }
        ApiKey::OffsetDelete => {
            assert_eq!(commit(client, &group, "", -1, "t", 5).await, 0);
            let request = OffsetDeleteRequest::default()
                .with_group_id(gid(&group))
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default(),
                        ]),
                ]);
            let response = client.call(&request, version).await;
            assert_eq!(response.error_code, 0, "v{version}");
            assert_eq!(response.topics[0].partitions[0].error_code, 0, "v{version}");
            assert_eq!(committed(client, &group, "t").await, -1);
        }
        other => panic!("no exercise for {other:?}"),
    }
}

/// A fresh consumer group per API and version: one member joins (at `version` for
/// ConsumerGroupHeartbeat, generating its id from v1 and leaving it to the coordinator at
/// v0), heartbeats once more, and the group is described.
async fn exercise_consumer_groups(client: &mut Client, key: ApiKey, version: i16) {
    let group = format!("{key:?}-v{version}");
    find_coordinator(client, &group).await;
    let (heartbeat_version, describe_version) = match key {
        ApiKey::ConsumerGroupHeartbeat => (version, 1),
        _ => (1, version),
    };
    let member_id = match heartbeat_version {
        0 => String::new(),
        _ => Uuid::new_v4().to_string(),
    };
    let join = heartbeat_join(&group, &member_id, &["t"]);
    let joined = client.call(&join, heartbeat_version).await;
    assert_eq!(
        joined.error_code, 0,
        "v{version}: {:?}",
        joined.error_message
    );
    let member_id = joined.member_id.clone().expect("member id");
    let assignment = joined.assignment.expect("assignment on join");
    assert_eq!(
        assignment.topic_partitions[0].partitions,
        vec![0],
        "v{version}"
    );
    let again = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid(&group))
        .with_member_id(member_id.clone())
        .with_member_epoch(joined.member_epoch);
    let beat = client.call(&again, heartbeat_version).await;
    assert_eq!(beat.error_code, 0, "v{version}");
    assert_eq!(beat.member_epoch, joined.member_epoch);
    let describe = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid(&group)]);
    let described = client.call(&describe, describe_version).await;
    let described = &described.groups[0];
    assert_eq!(described.error_code, 0, "v{version}");
    assert_eq!(described.members[0].member_id, member_id);
    assert_eq!(described.group_state.as_str(), "Stable");
}

async fn exercise_offset_fetch(client: &mut Client, group: &str, version: i16) {
    assert_eq!(commit(client, group, "", -1, "t", 5).await, 0);
    let offset = match version >= 8 {
        true => {
            let request = OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(gid(group))
                    .with_topics(None),
            ]);
            let response = client.call(&request, version).await;
            response.groups[0].topics[0].partitions[0].committed_offset
        }
        false => {
            let request = OffsetFetchRequest::default()
                .with_group_id(gid(group))
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(name("t"))
                        .with_partition_indexes(vec![0]),
                ]));
            client.call(&request, version).await.topics[0].partitions[0].committed_offset
        }
    };
    assert_eq!(offset, 5, "v{version}");
}

async fn create_topic_at(client: &mut Client, topic: &str, version: i16) -> i16 {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(5000);
    client.call(&request, version).await.topics[0].error_code
}

#[tokio::test]
async fn every_served_version_of_every_api_answers() {
    // Goal: no advertised version fails to encode or decode (the crate refuses fields a
    // version cannot carry). Method: send each API at each served version.
    let broker = TestBroker::start(&[("group.initial.rebalance.delay.ms", "0")]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let id = topic_id(&mut client, "t").await;
    for api in SUPPORTED_APIS {
        for version in api.min_served..=api.max_version {
            exercise(&mut client, api.key, version, id).await;
        }
    }
}
