//! The error answers of the transaction-marker, transactional-offset and cluster
//! administration APIs (the ones the authorizer refuses as a whole): the code in every
//! place the request named (a partition, a user) and at the top level where the response
//! has one, as Kafka's `getErrorResponse` of each request builds them.

use kafka_protocol::messages::{
    alter_partition_reassignments_response::{
        AlterPartitionReassignmentsResponse, ReassignablePartitionResponse,
        ReassignableTopicResponse,
    },
    alter_replica_log_dirs_response::{
        AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
        AlterReplicaLogDirsResponse,
    },
    alter_user_scram_credentials_response::{
        AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
    },
    describe_user_scram_credentials_response::{
        DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
    },
    elect_leaders_response::{ElectLeadersResponse, PartitionResult, ReplicaElectionResult},
    txn_offset_commit_response::{
        TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    },
    write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
        WriteTxnMarkersResponse,
    },
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest,
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest, ElectLeadersRequest,
    TxnOffsetCommitRequest, WriteTxnMarkersRequest,
};

use super::super::{HandlerError, Outcome, Request};

pub(super) fn txn_offset_commit(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let body: TxnOffsetCommitRequest = request.decode()?;
    let topics = body
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic.partitions.iter().map(|p| {
                TxnOffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            });
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions.collect())
        })
        .collect();
    request.respond(&TxnOffsetCommitResponse::default().with_topics(topics))
}

pub(super) fn write_txn_markers(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let body: WriteTxnMarkersRequest = request.decode()?;
    let markers = body
        .markers
        .iter()
        .map(|marker| {
            let topics = marker.topics.iter().map(|topic| {
                let partitions = topic.partition_indexes.iter().map(|p| {
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(*p)
                        .with_error_code(code)
                });
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions.collect())
            });
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(topics.collect())
        })
        .collect();
    request.respond(&WriteTxnMarkersResponse::default().with_markers(markers))
}

pub(super) fn elect_leaders(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let body: ElectLeadersRequest = request.decode()?;
    let results = body
        .topic_partitions
        .iter()
        .flatten()
        .map(|topic| {
            let partitions = topic.partitions.iter().map(|p| {
                PartitionResult::default()
                    .with_partition_id(*p)
                    .with_error_code(code)
            });
            ReplicaElectionResult::default()
                .with_topic(topic.topic.clone())
                .with_partition_result(partitions.collect())
        })
        .collect();
    // v0 has no top-level code.
    let top = if request.version() >= 1 { code } else { 0 };
    request.respond(
        &ElectLeadersResponse::default()
            .with_error_code(top)
            .with_replica_election_results(results),
    )
}

pub(super) fn alter_reassignments(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let body: AlterPartitionReassignmentsRequest = request.decode()?;
    let responses = body
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic.partitions.iter().map(|p| {
                ReassignablePartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            });
            ReassignableTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions.collect())
        })
        .collect();
    request.respond(
        &AlterPartitionReassignmentsResponse::default()
            .with_error_code(code)
            .with_responses(responses),
    )
}

pub(super) fn alter_replica_log_dirs(
    request: &Request,
    code: i16,
) -> Result<Outcome, HandlerError> {
    let body: AlterReplicaLogDirsRequest = request.decode()?;
    let results = body
        .dirs
        .iter()
        .flat_map(|dir| &dir.topics)
        .map(|topic| {
            let partitions = topic.partitions.iter().map(|p| {
                AlterReplicaLogDirPartitionResult::default()
                    .with_partition_index(*p)
                    .with_error_code(code)
            });
            AlterReplicaLogDirTopicResult::default()
                .with_topic_name(topic.name.clone())
                .with_partitions(partitions.collect())
        })
        .collect();
    request.respond(&AlterReplicaLogDirsResponse::default().with_results(results))
}

pub(super) fn describe_scram(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let body: DescribeUserScramCredentialsRequest = request.decode()?;
    let results = body
        .users
        .iter()
        .flatten()
        .map(|user| {
            DescribeUserScramCredentialsResult::default()
                .with_user(user.name.clone())
                .with_error_code(code)
        })
        .collect();
    request.respond(
        &DescribeUserScramCredentialsResponse::default()
            .with_error_code(code)
            .with_results(results),
    )
}

/// Every entity of an AlterClientQuotas, refused with `code`.
pub(super) fn alter_client_quotas(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
    let body: kafka_protocol::messages::AlterClientQuotasRequest = request.decode()?;
    let entries = body
        .entries
        .iter()
        .map(|entry| {
            let entity = entry.entity.iter().map(|e| {
                EntityData::default()
                    .with_entity_type(e.entity_type.clone())
                    .with_entity_name(e.entity_name.clone())
            });
            EntryData::default()
                .with_entity(entity.collect())
                .with_error_code(code)
        })
        .collect();
    let response = kafka_protocol::messages::AlterClientQuotasResponse::default();
    request.respond(&response.with_entries(entries))
}

pub(super) fn alter_scram(request: &Request, code: i16) -> Result<Outcome, HandlerError> {
    let body: AlterUserScramCredentialsRequest = request.decode()?;
    let users = body
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(body.upsertions.iter().map(|u| &u.name));
    let mut seen = std::collections::BTreeSet::new();
    let results = users
        .filter(|user| seen.insert(user.as_str()))
        .map(|user| {
            AlterUserScramCredentialsResult::default()
                .with_user(user.clone())
                .with_error_code(code)
        })
        .collect();
    request.respond(&AlterUserScramCredentialsResponse::default().with_results(results))
}
