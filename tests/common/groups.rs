//! Raw group-protocol helpers: find the coordinator, join (answering MEMBER_ID_REQUIRED),
//! sync, heartbeat, commit and fetch offsets, one request at a time.

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::{name, Client};

/// A wire string.
pub fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

/// A wire group id.
pub fn gid(group: &str) -> GroupId {
    GroupId(s(group))
}

/// FindCoordinator for `group` (creating `__consumer_offsets`), then waits until the
/// coordinator has loaded the group's partition.
pub async fn find_coordinator(client: &mut Client, group: &str) {
    let request = FindCoordinatorRequest::default().with_key(s(group));
    let response = client.call(&request, 3).await;
    assert_eq!(response.error_code, 0, "FindCoordinator {group}");
    for _ in 0..100 {
        let describe = DescribeGroupsRequest::default().with_groups(vec![gid(group)]);
        let code = client.call(&describe, 5).await.groups[0].error_code;
        if code == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("coordinator of {group} never loaded");
}

/// A JoinGroup of protocol type "consumer" with one protocol, "range", whose metadata is
/// `metadata`.
pub fn join_request(group: &str, member_id: &str, metadata: &'static [u8]) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(gid(group))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(metadata))])
}

/// Joins `group` as a new member at JoinGroup `version`, answering MEMBER_ID_REQUIRED.
pub async fn join_at(
    client: &mut Client,
    request: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    let first = client.call(&request, version).await;
    if first.error_code != kafka_protocol::error::ResponseError::MemberIdRequired.code() {
        return first;
    }
    let rejoin = request.with_member_id(first.member_id);
    client.call(&rejoin, version).await
}

/// Joins `group` as a new member (JoinGroup v9).
pub async fn join(client: &mut Client, group: &str) -> JoinGroupResponse {
    join_at(client, join_request(group, "", b"meta"), 9).await
}

/// SyncGroup v5 with the given assignments (only the leader sends any).
pub async fn sync(
    client: &mut Client,
    group: &str,
    member_id: &StrBytes,
    generation_id: i32,
    assignments: &[(&StrBytes, &'static [u8])],
) -> SyncGroupResponse {
    let request = SyncGroupRequest::default()
        .with_group_id(gid(group))
        .with_member_id(member_id.clone())
        .with_generation_id(generation_id)
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(member, bytes)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id((*member).clone())
                        .with_assignment(Bytes::from_static(bytes))
                })
                .collect(),
        );
    client.call(&request, 5).await
}

/// Heartbeat v4; returns the error code.
pub async fn heartbeat(
    client: &mut Client,
    group: &str,
    member_id: &StrBytes,
    generation_id: i32,
) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(member_id.clone())
        .with_generation_id(generation_id);
    client.call(&request, 4).await.error_code
}

/// OffsetCommit v9 of one partition; returns the partition's error code.
pub async fn commit(
    client: &mut Client,
    group: &str,
    member_id: &str,
    generation_id: i32,
    topic: &str,
    offset: i64,
) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s(member_id))
        .with_generation_id_or_member_epoch(generation_id)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_metadata(Some(s("meta")))])]);
    client.call(&request, 9).await.topics[0].partitions[0].error_code
}

/// The committed offset of `topic`-0 for `group` (OffsetFetch v7), -1 when none.
pub async fn committed(client: &mut Client, group: &str, topic: &str) -> i64 {
    let request = OffsetFetchRequest::default()
        .with_group_id(gid(group))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(topic))
            .with_partition_indexes(vec![0])]));
    let response = client.call(&request, 7).await;
    assert_eq!(response.error_code, 0, "OffsetFetch {group}");
    response.topics[0].partitions[0].committed_offset
}
