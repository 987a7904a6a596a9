//! The answer to a request a test asked to fail (`crate::faults`, `Injected::Error`), or
//! one the authorizer refuses as a whole (`authorization`): the request's own API, at its
//! version, with the error code in every place a client reads one — each partition of a
//! Produce, Fetch, ListOffsets or OffsetCommit, each key of a batched FindCoordinator, the
//! top-level code of the group and transaction APIs; the cluster administration APIs in
//! `admin`. Other APIs can only be dropped ([`supports`] says which).

mod admin;

use kafka_protocol::messages::{
    add_offsets_to_txn_response::AddOffsetsToTxnResponse,
    consumer_group_heartbeat_response::ConsumerGroupHeartbeatResponse,
    end_txn_response::EndTxnResponse,
    fetch_response::{FetchResponse, FetchableTopicResponse, PartitionData},
    find_coordinator_response::{Coordinator, FindCoordinatorResponse},
    heartbeat_response::HeartbeatResponse,
    init_producer_id_response::InitProducerIdResponse,
    join_group_response::JoinGroupResponse,
    leave_group_response::LeaveGroupResponse,
    list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
    },
    offset_commit_response::{
        OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    },
    produce_response::{PartitionProduceResponse, ProduceResponse, TopicProduceResponse},
    sync_group_response::SyncGroupResponse,
    AddPartitionsToTxnResponse, ApiKey, DescribeClientQuotasResponse, DescribeLogDirsResponse,
    DescribeQuorumResponse, FetchRequest, FindCoordinatorRequest, ListConfigResourcesResponse,
    ListOffsetsRequest, ListPartitionReassignmentsResponse, OffsetCommitRequest, ProduceRequest,
    UpdateFeaturesResponse,
};

use super::{HandlerError, Outcome, Request};

/// The APIs whose requests can be answered with an injected error code.
pub const ERROR_APIS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::FindCoordinator,
    ApiKey::OffsetCommit,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::InitProducerId,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::ConsumerGroupHeartbeat,
    ApiKey::TxnOffsetCommit,
    ApiKey::WriteTxnMarkers,
    ApiKey::AddPartitionsToTxn,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::UpdateFeatures,
    ApiKey::DescribeQuorum,
    ApiKey::DescribeLogDirs,
    ApiKey::AlterReplicaLogDirs,
    ApiKey::DescribeUserScramCredentials,
    ApiKey::AlterUserScramCredentials,
    ApiKey::DescribeClientQuotas,
    ApiKey::AlterClientQuotas,
    ApiKey::ListConfigResources,
];

/// Whether [`answer`] can answer `api_key` with an error code.
pub fn supports(api_key: ApiKey) -> bool {
    ERROR_APIS.contains(&api_key)
}

/// `request` answered with `code` (an API [`supports`] refuses is an error: the
/// connection is closed, as for a dropped request).
pub fn answer(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    match request.api_key {
        ApiKey::Produce => produce(request, code),
        ApiKey::Fetch => fetch(request, code),
        ApiKey::ListOffsets => list_offsets(request, code),
        ApiKey::FindCoordinator => find_coordinator(request, code),
        ApiKey::OffsetCommit => offset_commit(request, code),
        ApiKey::JoinGroup => request.respond(&JoinGroupResponse::default().with_error_code(code)),
        ApiKey::SyncGroup => request.respond(&SyncGroupResponse::default().with_error_code(code)),
        ApiKey::Heartbeat => request.respond(&HeartbeatResponse::default().with_error_code(code)),
        ApiKey::LeaveGroup => request.respond(&LeaveGroupResponse::default().with_error_code(code)),
        ApiKey::InitProducerId => {
            request.respond(&InitProducerIdResponse::default().with_error_code(code))
        }
        ApiKey::AddOffsetsToTxn => {
            request.respond(&AddOffsetsToTxnResponse::default().with_error_code(code))
        }
        ApiKey::EndTxn => request.respond(&EndTxnResponse::default().with_error_code(code)),
        ApiKey::ConsumerGroupHeartbeat => {
            request.respond(&ConsumerGroupHeartbeatResponse::default().with_error_code(code))
        }
        ApiKey::TxnOffsetCommit => admin::txn_offset_commit(request, code),
        ApiKey::WriteTxnMarkers => admin::write_txn_markers(request, code),
        // Only the batched versions (v4+, from brokers) are refused as a whole.
        ApiKey::AddPartitionsToTxn => {
            request.respond(&AddPartitionsToTxnResponse::default().with_error_code(code))
        }
        ApiKey::ElectLeaders => admin::elect_leaders(request, code),
        ApiKey::AlterPartitionReassignments => admin::alter_reassignments(request, code),
        ApiKey::ListPartitionReassignments => {
            request.respond(&ListPartitionReassignmentsResponse::default().with_error_code(code))
        }
        ApiKey::UpdateFeatures => {
            request.respond(&UpdateFeaturesResponse::default().with_error_code(code))
        }
        ApiKey::DescribeQuorum => {
            request.respond(&DescribeQuorumResponse::default().with_error_code(code))
        }
        // v0-2 have no code: no log directory is described.
        ApiKey::DescribeLogDirs => {
            let top = if request.version() >= 3 { code } else { 0 };
            request.respond(&DescribeLogDirsResponse::default().with_error_code(top))
        }
        ApiKey::AlterReplicaLogDirs => admin::alter_replica_log_dirs(request, code),
        ApiKey::DescribeUserScramCredentials => admin::describe_scram(request, code),
        ApiKey::AlterUserScramCredentials => admin::alter_scram(request, code),
        ApiKey::AlterClientQuotas => admin::alter_client_quotas(request, code),
        ApiKey::DescribeClientQuotas => {
            request.respond(&DescribeClientQuotasResponse::default().with_error_code(code))
        }
        ApiKey::ListConfigResources => {
            request.respond(&ListConfigResourcesResponse::default().with_error_code(code))
        }
        api_key => Err(HandlerError::Decode(format!(
            "{api_key:?} cannot be answered with an injected error code"
        ))),
    }
}

fn produce(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let produce: ProduceRequest = request.decode()?;
    if produce.acks == 0 {
        return Ok(Outcome::NoResponse);
    }
    let responses = produce
        .topic_data
        .iter()
        .map(|topic| {
            let partitions = topic.partition_data.iter().map(|p| {
                PartitionProduceResponse::default()
                    .with_index(p.index)
                    .with_error_code(code)
                    .with_base_offset(-1)
            });
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions.collect())
        })
        .collect();
    request.respond(&ProduceResponse::default().with_responses(responses))
}

fn fetch(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let fetch: FetchRequest = request.decode()?;
    let responses = fetch
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic.partitions.iter().map(|p| {
                PartitionData::default()
                    .with_partition_index(p.partition)
                    .with_error_code(code)
                    .with_high_watermark(-1)
                    .with_last_stable_offset(-1)
            });
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions.collect())
        })
        .collect();
    request.respond(&FetchResponse::default().with_responses(responses))
}

fn list_offsets(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let list: ListOffsetsRequest = request.decode()?;
    let topics = list
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic.partitions.iter().map(|p| {
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            });
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions.collect())
        })
        .collect();
    request.respond(&ListOffsetsResponse::default().with_topics(topics))
}

fn find_coordinator(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let find: FindCoordinatorRequest = request.decode()?;
    let response = FindCoordinatorResponse::default();
    let response = match request.version() {
        // v4+ batches keys, each with its own answer.
        4.. => response.with_coordinators(
            find.coordinator_keys
                .iter()
                .map(|key| {
                    Coordinator::default()
                        .with_key(key.clone())
                        .with_node_id((-1).into())
                        .with_port(-1)
                        .with_error_code(code)
                })
                .collect(),
        ),
        _ => response
            .with_error_code(code)
            .with_node_id((-1).into())
            .with_port(-1),
    };
    request.respond(&response)
}

fn offset_commit(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let commit: OffsetCommitRequest = request.decode()?;
    let topics = commit
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic.partitions.iter().map(|p| {
                OffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            });
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions.collect())
        })
        .collect();
    request.respond(&OffsetCommitResponse::default().with_topics(topics))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::versions;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::protocol::Encodable;

    /// An empty request of `api_key` at `version` (a default body encodes at every version).
    fn request_of(api_key: ApiKey, version: i16) -> Request {
        let mut body = BytesMut::new();
        macro_rules! encode {
            ($($key:ident => $request:ty),* $(,)?) => {
                match api_key {
                    $(ApiKey::$key => <$request>::default().encode(&mut body, version),)*
                    other => panic!("no request for {other:?}"),
                }
            };
        }
        use kafka_protocol::messages::*;
        encode!(
            Produce => ProduceRequest, Fetch => FetchRequest, ListOffsets => ListOffsetsRequest,
            FindCoordinator => FindCoordinatorRequest, OffsetCommit => OffsetCommitRequest,
            JoinGroup => JoinGroupRequest, SyncGroup => SyncGroupRequest,
            Heartbeat => HeartbeatRequest, LeaveGroup => LeaveGroupRequest,
            InitProducerId => InitProducerIdRequest, AddOffsetsToTxn => AddOffsetsToTxnRequest,
            EndTxn => EndTxnRequest, ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest,
            TxnOffsetCommit => TxnOffsetCommitRequest, WriteTxnMarkers => WriteTxnMarkersRequest,
            AddPartitionsToTxn => AddPartitionsToTxnRequest, ElectLeaders => ElectLeadersRequest,
            AlterPartitionReassignments => AlterPartitionReassignmentsRequest,
            ListPartitionReassignments => ListPartitionReassignmentsRequest,
            UpdateFeatures => UpdateFeaturesRequest, DescribeQuorum => DescribeQuorumRequest,
            DescribeLogDirs => DescribeLogDirsRequest,
            AlterReplicaLogDirs => AlterReplicaLogDirsRequest,
            DescribeUserScramCredentials => DescribeUserScramCredentialsRequest,
            AlterUserScramCredentials => AlterUserScramCredentialsRequest,
            DescribeClientQuotas => DescribeClientQuotasRequest,
            AlterClientQuotas => AlterClientQuotasRequest,
            ListConfigResources => ListConfigResourcesRequest,
        )
        .expect("a default request encodes");
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version);
        Request {
            api_key,
            header,
            body: Bytes::from(body),
            client: "127.0.0.1:1".parse().expect("addr"),
            listener: "PLAINTEXT".into(),
            principal: "User:ANONYMOUS".into(),
            credential: Default::default(),
            throttle: Default::default(),
        }
    }

    #[test]
    fn every_api_that_can_fail_answers_at_every_version_served() {
        for &api_key in ERROR_APIS {
            let api = versions::supported(api_key).expect("served");
            for version in api.min_served..=api.max_version {
                let outcome = answer(&request_of(api_key, version), 6);
                assert!(outcome.is_ok(), "{api_key:?} v{version}: {outcome:?}");
            }
        }
    }
}
