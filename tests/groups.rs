//! The classic group protocol through raw requests: rebalances, generation fencing, static
//! membership, session expiry, the group size limit and offsets that survive a restart.

mod common;

use common::groups::*;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;

/// Short session timeouts allowed, no initial delay.
const FAST: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("group.min.session.timeout.ms", "100"),
];

fn code(error: ResponseError) -> i16 {
    error.code()
}

async fn broker_with_topic(extra: &[(&str, &str)]) -> (TestBroker, Client) {
    let broker = TestBroker::start(extra).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    (broker, client)
}

#[tokio::test]
async fn a_second_member_rebalances_the_group_into_a_new_generation() {
    let (broker, mut a) = broker_with_topic(FAST).await;
    find_coordinator(&mut a, "g").await;
    let first = join(&mut a, "g").await;
    assert_eq!((first.error_code, first.generation_id), (0, 1));
    let me = first.member_id.clone();
    assert_eq!(
        sync(&mut a, "g", &me, 1, &[(&me, b"all")]).await.error_code,
        0
    );

    // B's join parks until A rejoins; meanwhile A is told to rejoin.
    let mut b = broker.client().await;
    let second = tokio::spawn(async move { join(&mut b, "g").await });
    let mut told = false;
    for _ in 0..100 {
        if heartbeat(&mut a, "g", &me, 1).await == code(ResponseError::RebalanceInProgress) {
            told = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(told, "the first member must hear of the rebalance");
    let rejoined = a.call(&join_request("g", &me, b"meta"), 9).await;
    let second = second.await.expect("join task");
    assert_eq!((rejoined.error_code, second.error_code), (0, 0));
    assert_eq!((rejoined.generation_id, second.generation_id), (2, 2));
    assert_eq!(rejoined.leader, me, "the old leader stays leader");
    assert_eq!(rejoined.members.len(), 2, "the leader sees every member");
    assert!(second.members.is_empty(), "followers see no members");
}

#[tokio::test]
async fn commits_from_a_stale_generation_or_an_unknown_member_are_refused() {
    let (_broker, mut client) = broker_with_topic(FAST).await;
    find_coordinator(&mut client, "g").await;
    let joined = join(&mut client, "g").await;
    let me = joined.member_id.clone();
    assert_eq!(
        sync(&mut client, "g", &me, 1, &[(&me, b"a")])
            .await
            .error_code,
        0
    );
    assert_eq!(commit(&mut client, "g", &me, 1, "t", 3).await, 0);
    assert_eq!(
        commit(&mut client, "g", &me, 0, "t", 4).await,
        code(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        commit(&mut client, "g", "stranger", 1, "t", 5).await,
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        commit(&mut client, "g", "", -1, "t", 6).await,
        code(ResponseError::UnknownMemberId),
        "an outside commit into a group with members"
    );
    assert_eq!(
        committed(&mut client, "g", "t").await,
        3,
        "refused commits change nothing"
    );
    assert_eq!(
        heartbeat(&mut client, "g", &me, 7).await,
        code(ResponseError::IllegalGeneration)
    );
}

#[tokio::test]
async fn a_member_that_stops_heartbeating_is_removed_after_its_session_timeout() {
    let (_broker, mut client) = broker_with_topic(FAST).await;
    find_coordinator(&mut client, "g").await;
    let request = join_request("g", "", b"m").with_session_timeout_ms(300);
    let joined = join_at(&mut client, request, 9).await;
    let me = joined.member_id.clone();
    assert_eq!(
        sync(&mut client, "g", &me, 1, &[(&me, b"a")])
            .await
            .error_code,
        0
    );
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let describe = DescribeGroupsRequest::default().with_groups(vec![gid("g")]);
    let group = &client.call(&describe, 5).await.groups[0];
    assert_eq!(group.group_state.as_str(), "Empty");
    assert_eq!(
        heartbeat(&mut client, "g", &me, 1).await,
        code(ResponseError::UnknownMemberId)
    );
}

#[tokio::test]
async fn a_group_is_empty_as_soon_as_its_last_member_has_left() {
    // Kafka answers the LeaveGroup with the group already Empty; before the fix it was
    // PreparingRebalance until the next timer tick (sarama and kafka-consumer-groups
    // --describe --state saw the difference).
    let (_broker, mut client) = broker_with_topic(FAST).await;
    find_coordinator(&mut client, "g").await;
    let joined = join(&mut client, "g").await;
    let me = joined.member_id.clone();
    let synced = sync(&mut client, "g", &me, 1, &[(&me, b"a")]).await;
    assert_eq!(synced.error_code, 0);
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid("g"))
        .with_member_id(me);
    assert_eq!(client.call(&leave, 2).await.error_code, 0);
    let describe = DescribeGroupsRequest::default().with_groups(vec![gid("g")]);
    let group = &client.call(&describe, 5).await.groups[0];
    assert_eq!(group.group_state.as_str(), "Empty");
    assert!(group.members.is_empty());
}

#[tokio::test]
async fn joins_beyond_group_max_size_are_refused() {
    let mut keys = FAST.to_vec();
    keys.push(("group.max.size", "2"));
    let (broker, mut client) = broker_with_topic(&keys).await;
    find_coordinator(&mut client, "g").await;
    // Two members fill the group (joining together so neither waits for the other).
    let mut other = broker.client().await;
    let first = tokio::spawn(async move { join(&mut other, "g").await });
    let second = join(&mut client, "g").await;
    assert_eq!(
        (first.await.expect("task").error_code, second.error_code),
        (0, 0)
    );
    // A flood of new members: each gets an id, none gets in.
    let mut flood = broker.client().await;
    for _ in 0..50 {
        let response = join_at(&mut flood, join_request("g", "", b"m"), 9).await;
        assert_eq!(
            response.error_code,
            code(ResponseError::GroupMaxSizeReached)
        );
    }
}

#[tokio::test]
async fn a_static_member_rejoins_without_a_rebalance_and_fences_its_old_id() {
    let (_broker, mut client) = broker_with_topic(FAST).await;
    find_coordinator(&mut client, "g").await;
    let request = join_request("g", "", b"m").with_group_instance_id(Some(s("instance-1")));
    let joined = join_at(&mut client, request.clone(), 9).await;
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let old = joined.member_id.clone();
    assert_eq!(
        sync(&mut client, "g", &old, 1, &[(&old, b"mine")])
            .await
            .error_code,
        0
    );
    // Restarted without leaving: a new member id, the same generation, same assignment.
    let again = join_at(&mut client, request, 9).await;
    assert_eq!((again.error_code, again.generation_id), (0, 1));
    assert_ne!(again.member_id, old);
    let synced = sync(&mut client, "g", &again.member_id, 1, &[]).await;
    assert_eq!(&synced.assignment[..], b"mine");
    let hb = HeartbeatRequest::default()
        .with_group_id(gid("g"))
        .with_member_id(old)
        .with_generation_id(1)
        .with_group_instance_id(Some(s("instance-1")));
    assert_eq!(
        client.call(&hb, 4).await.error_code,
        code(ResponseError::FencedInstanceId)
    );
}

/// A static leader of a stable group rejoins at JoinGroup `version`: the answer it gets.
async fn static_leader_rejoins_at(
    version: i16,
) -> (kafka_protocol::protocol::StrBytes, JoinGroupResponse) {
    let (_broker, mut client) = broker_with_topic(FAST).await;
    find_coordinator(&mut client, "g").await;
    let request = join_request("g", "", b"m").with_group_instance_id(Some(s("instance-1")));
    let joined = join_at(&mut client, request.clone(), version).await;
    let old = joined.member_id.clone();
    let synced = sync(&mut client, "g", &old, 1, &[(&old, b"mine")]).await;
    assert_eq!(synced.error_code, 0);
    let again = join_at(&mut client, request, version).await;
    assert_eq!(
        (again.error_code, again.generation_id),
        (0, 1),
        "v{version}"
    );
    let synced = sync(&mut client, "g", &again.member_id, 1, &[]).await;
    assert_eq!(
        &synced.assignment[..],
        b"mine",
        "v{version}: no new assignment"
    );
    (old, again)
}

#[tokio::test]
async fn a_static_leader_rejoining_a_stable_group_is_told_to_skip_the_assignment_at_v9() {
    let (_, again) = static_leader_rejoins_at(9).await;
    assert!(again.skip_assignment);
    assert_eq!(
        again.leader, again.member_id,
        "the leader, under its new id"
    );
    assert_eq!(again.members.len(), 1, "the leader sees the members");
}

#[tokio::test]
async fn a_static_leader_rejoining_a_stable_group_before_v9_gets_the_old_leader_id() {
    // Before the fix the broker set skip_assignment (a v9 field) at v5 too, could not
    // encode the answer and dropped the connection (found by librdkafka's suite).
    let (old, again) = static_leader_rejoins_at(5).await;
    assert!(!again.skip_assignment);
    assert_eq!(
        again.leader, old,
        "the old leader id: the member does not assign"
    );
    assert!(again.members.is_empty());
}

#[tokio::test]
async fn committed_offsets_and_the_group_survive_a_restart() {
    let (broker, mut client) = broker_with_topic(FAST).await;
    find_coordinator(&mut client, "g").await;
    let joined = join(&mut client, "g").await;
    let me = joined.member_id.clone();
    assert_eq!(
        sync(&mut client, "g", &me, 1, &[(&me, b"a")])
            .await
            .error_code,
        0
    );
    assert_eq!(commit(&mut client, "g", &me, 1, "t", 42).await, 0);
    // The other group's coordinator partition may still be loading (a client retries
    // COORDINATOR_LOAD_IN_PROGRESS; the test waits for the load first).
    find_coordinator(&mut client, "outside").await;
    assert_eq!(commit(&mut client, "outside", "", -1, "t", 7).await, 0);
    drop(client);
    let dir = broker.stop().await;
    let broker = TestBroker::start_in(dir, FAST).await;
    let mut client = broker.client().await;
    find_coordinator(&mut client, "g").await;
    find_coordinator(&mut client, "outside").await;
    assert_eq!(committed(&mut client, "g", "t").await, 42);
    assert_eq!(committed(&mut client, "outside", "t").await, 7);
    // The member restored from the group's record keeps its generation.
    assert_eq!(heartbeat(&mut client, "g", &me, 1).await, 0);
}

#[tokio::test]
async fn a_group_with_members_cannot_be_deleted_and_an_empty_one_can() {
    let (_broker, mut client) = broker_with_topic(FAST).await;
    find_coordinator(&mut client, "g").await;
    let joined = join(&mut client, "g").await;
    let me = joined.member_id.clone();
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![gid("g")]);
    let refused = client.call(&delete, 2).await.results[0].error_code;
    assert_eq!(refused, code(ResponseError::NonEmptyGroup));
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid("g"))
        .with_member_id(me);
    assert_eq!(client.call(&leave, 2).await.error_code, 0);
    assert_eq!(client.call(&delete, 2).await.results[0].error_code, 0);
    let again = client.call(&delete, 2).await.results[0].error_code;
    assert_eq!(again, code(ResponseError::GroupIdNotFound));
}

#[tokio::test]
async fn the_offsets_topic_is_internal_and_closed_to_producers() {
    let (_broker, mut client) = broker_with_topic(FAST).await;
    find_coordinator(&mut client, "g").await;
    let request = produce_request("__consumer_offsets", 0, batch(1, -1, -1, 0), -1);
    let response = client.call(&request, 9).await;
    let code = response.responses[0].partition_responses[0].error_code;
    assert_eq!(code, ResponseError::InvalidTopicException.code());
    let metadata = client
        .call(&MetadataRequest::default().with_topics(None), 12)
        .await;
    let offsets = metadata
        .topics
        .iter()
        .find(|t| {
            t.name
                .as_ref()
                .is_some_and(|n| n.0.as_str() == "__consumer_offsets")
        })
        .expect("listed");
    assert!(offsets.is_internal);
    assert_eq!(offsets.partitions.len(), 50);
}
