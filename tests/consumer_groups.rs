//! KIP-848 consumer groups over the raw protocol: members join with
//! ConsumerGroupHeartbeat, the coordinator assigns and reconciles, leaves and timeouts move
//! partitions, and OffsetCommit checks member epochs.

mod common;

use std::time::Duration;

use common::consumer_groups::*;
use common::groups::*;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;

const TOPIC: &str = "orders";

async fn setup(broker: &TestBroker, group: &str, partitions: i32) -> Client {
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, TOPIC, partitions).await, 0);
    find_coordinator(&mut client, group).await;
    client
}

async fn start() -> TestBroker {
    TestBroker::start(&[("group.initial.rebalance.delay.ms", "0")]).await
}

#[tokio::test]
async fn two_members_share_six_partitions_disjointly_and_completely() {
    // Goal: two members split a 6-partition topic 3/3, never owning a partition twice on
    // the way. Method: A joins and settles alone, B joins; both heartbeat until Stable.
    let broker = start().await;
    let mut client = setup(&broker, "g-share", 6).await;
    let mut a = Member::new("g-share");
    a.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a]).await;
    assert_eq!(a.count(), 6);
    let mut b = Member::new("g-share");
    b.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a, &mut b]).await;
    assert_eq!((a.count(), b.count()), (3, 3));
    assert_eq!(overlap(&[&a, &b]), None);
    let group = describe(&mut client, "g-share").await;
    assert_eq!(group.error_code, 0);
    assert_eq!(group.group_state.as_str(), "Stable");
    assert_eq!(group.assignor_name.as_str(), "uniform");
    assert_eq!(group.group_epoch, group.assignment_epoch);
    assert_eq!(group.members.len(), 2);
    for member in &group.members {
        let assigned: usize = member
            .assignment
            .topic_partitions
            .iter()
            .map(|t| t.partitions.len())
            .sum();
        assert_eq!(assigned, 3);
        assert_eq!(
            member.assignment.topic_partitions[0].topic_name.0.as_str(),
            TOPIC
        );
        assert_eq!(member.member_type, 1);
    }
}

#[tokio::test]
async fn the_remaining_member_gets_everything_when_the_other_leaves() {
    // Goal: after one member leaves (epoch -1), the other is assigned all 6 partitions.
    // Method: settle two members, B leaves, A heartbeats until Stable.
    let broker = start().await;
    let mut client = setup(&broker, "g-leave", 6).await;
    let (mut a, mut b) = (Member::new("g-leave"), Member::new("g-leave"));
    a.join(&mut client, &[TOPIC]).await;
    b.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a, &mut b]).await;
    let left = b.leave(&mut client, -1).await;
    assert_eq!(left.error_code, 0);
    assert_eq!(left.member_epoch, -1);
    settle(&mut client, &mut [&mut a]).await;
    assert_eq!(a.count(), 6);
    assert_eq!(describe(&mut client, "g-leave").await.members.len(), 1);
    let again = b.beat(&mut client).await;
    assert_eq!(again.error_code, ResponseError::UnknownMemberId.code());
}

#[tokio::test]
async fn commits_are_checked_against_the_member_epoch() {
    // Goal: Kafka's OffsetCommit rule for consumer groups: a member commits at its current
    // epoch only (STALE_MEMBER_EPOCH otherwise) and with v9+, unknown members and outsiders
    // are refused while the group has members. Method: commit at old and current epochs.
    let broker = start().await;
    let mut client = setup(&broker, "g-commit", 6).await;
    let mut a = Member::new("g-commit");
    a.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a]).await;
    let old_epoch = a.epoch;
    let mut b = Member::new("g-commit");
    b.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a, &mut b]).await;
    assert!(a.epoch > old_epoch);
    let stale = commit(&mut client, "g-commit", &a.member_id, old_epoch, TOPIC, 5).await;
    assert_eq!(stale, ResponseError::StaleMemberEpoch.code());
    assert_eq!(
        commit(&mut client, "g-commit", &a.member_id, a.epoch, TOPIC, 5).await,
        0
    );
    assert_eq!(committed(&mut client, "g-commit", TOPIC).await, 5);
    let old_version = OffsetCommitRequest::default()
        .with_group_id(gid("g-commit"))
        .with_member_id(s(&a.member_id))
        .with_generation_id_or_member_epoch(a.epoch)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(name(TOPIC))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_committed_offset(6),
                ]),
        ]);
    let v8 = client.call(&old_version, 8).await.topics[0].partitions[0].error_code;
    assert_eq!(
        v8,
        ResponseError::UnsupportedVersion.code(),
        "members commit with v9+"
    );
    let unknown = commit(&mut client, "g-commit", "nobody", a.epoch, TOPIC, 6).await;
    assert_eq!(unknown, ResponseError::UnknownMemberId.code());
    let outsider = commit(&mut client, "g-commit", "", -1, TOPIC, 6).await;
    assert_eq!(outsider, ResponseError::UnknownMemberId.code());
    let fetch = |member: &str, epoch: i32| {
        OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(gid("g-commit"))
                .with_member_id(Some(s(member)))
                .with_member_epoch(epoch)
                .with_topics(None),
        ])
    };
    let stale_fetch = client.call(&fetch(&a.member_id, old_epoch), 9).await;
    assert_eq!(
        stale_fetch.groups[0].error_code,
        ResponseError::StaleMemberEpoch.code()
    );
    let fresh_fetch = client.call(&fetch(&a.member_id, a.epoch), 9).await;
    assert_eq!(fresh_fetch.groups[0].error_code, 0);
    assert_eq!(
        fresh_fetch.groups[0].topics[0].partitions[0].committed_offset,
        5
    );
}

#[tokio::test]
async fn a_silent_member_is_removed_after_the_session_timeout() {
    // Goal: a member that stops heartbeating is removed after
    // group.consumer.session.timeout.ms and its partitions go to the others. Method: a
    // 600 ms session; B goes silent; A heartbeats until it owns all 6.
    let broker = TestBroker::start(&[("group.consumer.session.timeout.ms", "600")]).await;
    let mut client = setup(&broker, "g-session", 6).await;
    let (mut a, mut b) = (Member::new("g-session"), Member::new("g-session"));
    a.join(&mut client, &[TOPIC]).await;
    b.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a, &mut b]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while a.count() < 6 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "B was never removed"
        );
        let response = a.beat(&mut client).await;
        assert_eq!(response.error_code, 0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let group = describe(&mut client, "g-session").await;
    assert_eq!(group.members.len(), 1);
    let late = b.beat(&mut client).await;
    assert_eq!(late.error_code, ResponseError::UnknownMemberId.code());
}

#[tokio::test]
async fn a_member_that_does_not_revoke_in_time_is_fenced() {
    // Goal: a member that keeps partitions it must revoke past its rebalance timeout is
    // removed, and the partitions go to the member waiting for them. Method: A (500 ms
    // rebalance timeout) never acknowledges the revocation; B keeps heartbeating.
    let broker = start().await;
    let mut client = setup(&broker, "g-revoke", 6).await;
    let mut a = Member::new("g-revoke");
    a.rebalance_timeout_ms = 500;
    a.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a]).await;
    let everything = a.owned.clone();
    let mut b = Member::new("g-revoke");
    b.join(&mut client, &[TOPIC]).await;
    let revoking = a.beat(&mut client).await;
    assert_eq!(revoking.error_code, 0);
    assert_eq!(a.count(), 3, "A is asked to revoke half");
    a.owned = everything.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        assert!(tokio::time::Instant::now() < deadline, "A was never fenced");
        b.beat(&mut client).await;
        if overlap(&[&a, &b]).is_some() {
            let members = describe(&mut client, "g-revoke").await.members;
            assert_eq!(members.len(), 1, "B got a partition A still holds");
        }
        let response = a.beat(&mut client).await;
        if response.error_code != 0 {
            let fenced = [
                ResponseError::UnknownMemberId.code(),
                ResponseError::FencedMemberEpoch.code(),
            ];
            assert!(fenced.contains(&response.error_code), "{response:?}");
            break;
        }
        a.owned = everything.clone();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    settle(&mut client, &mut [&mut b]).await;
    assert_eq!(b.count(), 6);
}

#[tokio::test]
async fn a_new_partition_count_bumps_the_epoch_and_is_assigned() {
    // Goal: when a subscribed topic grows, the next heartbeat assigns the new partitions.
    // Method: settle on 2 partitions, CreatePartitions to 4, heartbeat until Stable.
    let broker = start().await;
    let mut client = setup(&broker, "g-grow", 2).await;
    let mut a = Member::new("g-grow");
    a.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a]).await;
    let before = describe(&mut client, "g-grow").await.group_epoch;
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(name(TOPIC))
                .with_count(4),
        ])
        .with_timeout_ms(5000);
    assert_eq!(client.call(&request, 3).await.results[0].error_code, 0);
    settle(&mut client, &mut [&mut a]).await;
    assert_eq!(a.count(), 4);
    assert!(describe(&mut client, "g-grow").await.group_epoch > before);
}

/// Sends a heartbeat and returns its error code.
async fn refused(client: &mut Client, request: ConsumerGroupHeartbeatRequest, version: i16) -> i16 {
    client.call(&request, version).await.error_code
}

#[tokio::test]
async fn invalid_heartbeats_are_refused_with_kafkas_codes() {
    // Goal: the request checks of Kafka's coordinator: missing join fields, a regular
    // expression that does not compile, an unknown assignor, an empty member id at v1, an
    // unknown member, an epoch from the future. Method: one bad request each.
    let broker = start().await;
    let mut client = setup(&broker, "g-bad", 2).await;
    let join = || heartbeat_join("g-bad", &uuid::Uuid::new_v4().to_string(), &[TOPIC]);
    let invalid = ResponseError::InvalidRequest.code();
    let no_topics = join().with_subscribed_topic_names(None);
    assert_eq!(refused(&mut client, no_topics, 1).await, invalid);
    let no_timeout = join().with_rebalance_timeout_ms(-1);
    assert_eq!(refused(&mut client, no_timeout, 1).await, invalid);
    let owning = join().with_topic_partitions(None);
    assert_eq!(refused(&mut client, owning, 1).await, invalid);
    let regex = join().with_subscribed_topic_regex(Some(s("ord(")));
    let bad_regex = ResponseError::InvalidRegularExpression.code();
    assert_eq!(refused(&mut client, regex, 1).await, bad_regex);
    let no_id = join().with_member_id(s(""));
    assert_eq!(refused(&mut client, no_id, 1).await, invalid);
    let assignor = join().with_server_assignor(Some(s("sticky")));
    let unsupported = ResponseError::UnsupportedAssignor.code();
    assert_eq!(refused(&mut client, assignor, 1).await, unsupported);
    let stranger = join().with_member_epoch(5).with_topic_partitions(None);
    let unknown = ResponseError::UnknownMemberId.code();
    assert_eq!(refused(&mut client, stranger, 1).await, unknown);
    let mut a = Member::new("g-bad");
    a.join(&mut client, &[TOPIC]).await;
    a.epoch += 1;
    let fenced = ResponseError::FencedMemberEpoch.code();
    assert_eq!(a.beat(&mut client).await.error_code, fenced);
}

#[tokio::test]
async fn v0_assigns_the_member_id() {
    // Goal: at v0 the coordinator generates the member id of a member that sends none.
    // Method: join with an empty member id at v0.
    let broker = start().await;
    let mut client = setup(&broker, "g-v0", 2).await;
    let request = heartbeat_join("g-v0", "", &[TOPIC]);
    let response = client.call(&request, 0).await;
    assert_eq!(response.error_code, 0);
    let member_id = response.member_id.expect("member id");
    assert!(!member_id.is_empty());
    assert_eq!(response.member_epoch, 1);
    let assigned: usize = response
        .assignment
        .expect("assignment")
        .topic_partitions
        .iter()
        .map(|t| t.partitions.len())
        .sum();
    assert_eq!(assigned, 2);
}

#[tokio::test]
async fn an_offsets_only_group_becomes_a_consumer_group_and_keeps_its_offsets() {
    // Goal: Kafka's online upgrade of an empty classic group: the first heartbeat turns a
    // group holding only offsets into a consumer group, the offsets stay, and ListGroups
    // and DescribeGroups report it as Kafka does. Method: commit from outside, join, list.
    let broker = start().await;
    let mut client = setup(&broker, "g-upgrade", 2).await;
    assert_eq!(commit(&mut client, "g-upgrade", "", -1, TOPIC, 42).await, 0);
    let mut a = Member::new("g-upgrade");
    a.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a]).await;
    assert_eq!(committed(&mut client, "g-upgrade", TOPIC).await, 42);
    let listed = client.call(&ListGroupsRequest::default(), 5).await;
    let group = listed
        .groups
        .iter()
        .find(|g| g.group_id.0.as_str() == "g-upgrade")
        .expect("listed");
    assert_eq!(group.group_type.as_str(), "consumer");
    assert_eq!(group.protocol_type.as_str(), "consumer");
    assert_eq!(group.group_state.as_str(), "Stable");
    let request = DescribeGroupsRequest::default().with_groups(vec![gid("g-upgrade")]);
    let old = client.call(&request, 5).await;
    assert_eq!(old.groups[0].group_state.as_str(), "Dead");
    let new = client.call(&request, 6).await;
    assert_eq!(
        new.groups[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
}

#[tokio::test]
async fn classic_and_consumer_members_do_not_mix() {
    // Goal: without mixed groups, a classic group with members refuses
    // ConsumerGroupHeartbeat (GROUP_ID_NOT_FOUND), a consumer group with members refuses
    // JoinGroup (INCONSISTENT_GROUP_PROTOCOL), and an emptied consumer group takes classic
    // members again. Method: one group of each kind.
    let broker = start().await;
    let mut client = setup(&broker, "g-classic", 2).await;
    assert_eq!(join(&mut client, "g-classic").await.error_code, 0);
    let request = heartbeat_join("g-classic", &uuid::Uuid::new_v4().to_string(), &[TOPIC]);
    let not_found = ResponseError::GroupIdNotFound.code();
    assert_eq!(refused(&mut client, request, 1).await, not_found);
    find_coordinator(&mut client, "g-modern").await;
    let mut a = Member::new("g-modern");
    a.join(&mut client, &[TOPIC]).await;
    let inconsistent = ResponseError::InconsistentGroupProtocol.code();
    assert_eq!(join(&mut client, "g-modern").await.error_code, inconsistent);
    assert_eq!(a.leave(&mut client, -1).await.error_code, 0);
    assert_eq!(join(&mut client, "g-modern").await.error_code, 0);
}

#[tokio::test]
async fn a_static_member_gets_its_partitions_back_after_a_temporary_leave() {
    // Goal: a static member that leaves with epoch -2 keeps its partitions for the member
    // that rejoins with its instance id; while it holds them, another instance is refused
    // (UNRELEASED_INSTANCE_ID). Method: two static members, one bounces.
    let broker = start().await;
    let mut client = setup(&broker, "g-static", 6).await;
    let (mut a, mut b) = (Member::new("g-static"), Member::new("g-static"));
    a.instance_id = Some("instance-a".into());
    b.instance_id = Some("instance-b".into());
    a.join(&mut client, &[TOPIC]).await;
    b.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a, &mut b]).await;
    let before = describe(&mut client, "g-static").await.group_epoch;
    let mut twin = Member::new("g-static");
    twin.instance_id = Some("instance-a".into());
    let request = heartbeat_join("g-static", &twin.member_id, &[TOPIC])
        .with_instance_id(Some(s("instance-a")));
    let unreleased = ResponseError::UnreleasedInstanceId.code();
    assert_eq!(refused(&mut client, request, 1).await, unreleased);
    let left = a.leave(&mut client, -2).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -2));
    let owned_before = a.owned.clone();
    twin.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut twin, &mut b]).await;
    assert_eq!(twin.owned, owned_before);
    assert_eq!(describe(&mut client, "g-static").await.group_epoch, before);
}

#[tokio::test]
async fn the_range_assignor_is_used_when_members_ask_for_it() {
    // Goal: members naming `range` get Kafka's contiguous ranges. Method: two members with
    // server assignor "range" on 6 partitions; each owns 3 consecutive ones.
    let broker = start().await;
    let mut client = setup(&broker, "g-range", 6).await;
    let mut members = [Member::new("g-range"), Member::new("g-range")];
    for member in &mut members {
        let request = heartbeat_join("g-range", &member.member_id, &[TOPIC])
            .with_server_assignor(Some(s("range")));
        let response = client.call(&request, 1).await;
        assert_eq!(response.error_code, 0);
        member.apply(&response);
    }
    let [a, b] = &mut members;
    settle(&mut client, &mut [a, b]).await;
    for member in &members {
        let partitions: Vec<i32> = member.owned.values().flatten().copied().collect();
        assert_eq!(partitions.len(), 3);
        assert_eq!(partitions[2] - partitions[0], 2, "{partitions:?}");
    }
    assert_eq!(
        describe(&mut client, "g-range")
            .await
            .assignor_name
            .as_str(),
        "range"
    );
}

#[tokio::test]
async fn members_rejoin_after_a_restart_and_offsets_survive() {
    // Goal: only the group epoch is persisted, so after a restart the group is an empty
    // consumer group at its epoch, a member's heartbeat gets UNKNOWN_MEMBER_ID (Java
    // consumers rejoin on it), the rejoin gets a newer epoch than before (a commit at the
    // old one is stale), and the offsets are still there. Method: commit, stop, restart.
    let broker = start().await;
    let mut client = setup(&broker, "g-restart", 2).await;
    let mut a = Member::new("g-restart");
    a.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a]).await;
    assert_eq!(
        commit(&mut client, "g-restart", &a.member_id, a.epoch, TOPIC, 9).await,
        0
    );
    let epoch_before = describe(&mut client, "g-restart").await.group_epoch;
    let dir = broker.stop().await;
    let broker = TestBroker::start_in(dir, &[("group.initial.rebalance.delay.ms", "0")]).await;
    let mut client = broker.client().await;
    find_coordinator(&mut client, "g-restart").await;
    let restored = describe(&mut client, "g-restart").await;
    assert_eq!(restored.group_state.as_str(), "Empty");
    assert_eq!(restored.group_epoch, epoch_before);
    let old_epoch = a.epoch;
    let unknown = a.beat(&mut client).await;
    assert_eq!(unknown.error_code, ResponseError::UnknownMemberId.code());
    a.join(&mut client, &[TOPIC]).await;
    settle(&mut client, &mut [&mut a]).await;
    assert_eq!(a.count(), 2);
    assert!(a.epoch > old_epoch, "epochs keep growing across a restart");
    let stale = commit(&mut client, "g-restart", &a.member_id, old_epoch, TOPIC, 10).await;
    assert_eq!(stale, ResponseError::StaleMemberEpoch.code());
    assert_eq!(committed(&mut client, "g-restart", TOPIC).await, 9);
}

#[tokio::test]
async fn a_regex_subscription_follows_the_topics_it_matches() {
    // Goal: a member subscribed by regular expression gets the partitions of every topic
    // whose whole name matches, including topics created later. Method: subscribe to
    // "orders.*" with "orders" (6) and "other" present, then create "orders-eu" (2).
    let broker = start().await;
    let mut client = setup(&broker, "g-regex", 6).await;
    assert_eq!(create_topic(&mut client, "other", 3).await, 0);
    let mut a = Member::new("g-regex");
    let request = heartbeat_join("g-regex", &a.member_id, &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s("orders.*")));
    let joined = client.call(&request, 1).await;
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    a.apply(&joined);
    settle(&mut client, &mut [&mut a]).await;
    assert_eq!(a.count(), 6);
    assert_eq!(create_topic(&mut client, "orders-eu", 2).await, 0);
    settle(&mut client, &mut [&mut a]).await;
    assert_eq!(a.count(), 8);
    assert_eq!(a.owned.len(), 2, "orders and orders-eu, not other");
    let described = describe(&mut client, "g-regex").await;
    let regex = described.members[0].subscribed_topic_regex.clone();
    assert_eq!(regex.as_ref().map(|r| r.as_str()), Some("orders.*"));
}

#[tokio::test]
async fn metadata_by_topic_id_ignores_the_empty_name_java_sends() {
    // Goal: a consumer subscribed by regular expression learns its topics' names from
    // Metadata by topic id, with the name left empty (not null) as Java's client sends it;
    // Kafka answers by id. Method: Metadata v12 with an id and an empty name.
    let broker = start().await;
    let mut client = setup(&broker, "g-meta", 2).await;
    let by_name = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(name(TOPIC))),
    ]));
    let id = client.call(&by_name, 12).await.topics[0].topic_id;
    let by_id = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default()
            .with_name(Some(name("")))
            .with_topic_id(id),
    ]));
    let response = client.call(&by_id, 12).await;
    assert_eq!(response.topics[0].error_code, 0);
    let topic = response.topics[0].name.as_ref().map(|n| n.0.to_string());
    assert_eq!(topic.as_deref(), Some(TOPIC));
}

#[tokio::test]
async fn a_deleted_consumer_group_stays_deleted_after_a_restart() {
    // Goal: DeleteGroups of an empty consumer group writes the tombstone of its epoch
    // record, so a restart does not bring it back. Method: join, leave, delete, restart.
    let broker = start().await;
    let mut client = setup(&broker, "g-gone", 2).await;
    let mut a = Member::new("g-gone");
    a.join(&mut client, &[TOPIC]).await;
    assert_eq!(a.leave(&mut client, -1).await.error_code, 0);
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![gid("g-gone")]);
    assert_eq!(client.call(&delete, 2).await.results[0].error_code, 0);
    let dir = broker.stop().await;
    let broker = TestBroker::start_in(dir, &[("group.initial.rebalance.delay.ms", "0")]).await;
    let mut client = broker.client().await;
    find_coordinator(&mut client, "g-gone").await;
    let described = describe(&mut client, "g-gone").await;
    assert_eq!(described.error_code, ResponseError::GroupIdNotFound.code());
}
