//! Partition reassignment (issue 13, KIP-455) on a real three-node cluster
//! (`highwater::testkit`): a partition moved from brokers {1,2} to {2,3} while a producer
//! writes with acks=all loses no acknowledged record, the new replica holds them all, and
//! the old one's log is deleted; a reassignment whose new replica cannot catch up is listed
//! as under way and can be cancelled back to the original replicas.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster_processes::{eventually, metadata};
use common::{batch_of_values, fetch_all, name, now_ms, Client};
use highwater::testkit::{Cluster, Endpoint};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::list_partition_reassignments_response::OngoingPartitionReassignment;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, CreateTopicsRequest,
    ListPartitionReassignmentsRequest,
};

/// Creates `topic` with one partition on `replicas` via `addr`.
async fn create_on(addr: SocketAddr, topic: &str, replicas: &[i32]) {
    let mut client = Client::connect(addr).await;
    let assignment = CreatableReplicaAssignment::default()
        .with_partition_index(0)
        .with_broker_ids(replicas.iter().map(|b| BrokerId(*b)).collect());
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![assignment])])
        .with_timeout_ms(15_000);
    let response = client.call(&request, 7).await;
    assert_eq!(
        response.topics[0].error_code, 0,
        "{:?}",
        response.topics[0].error_message
    );
}

/// `topic`-0's (leader, replicas, ISR) as `addr` reports them, once `accept` holds.
async fn partition_state(
    addr: SocketAddr,
    topic: &str,
    accept: impl Fn(i32, &[i32], &[i32]) -> bool,
) -> (i32, Vec<i32>, Vec<i32>) {
    eventually(&format!("{topic} in the wanted state"), || async {
        let metadata = metadata(addr).await?;
        let found = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
        let p = found.partitions.first()?;
        let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<i32>>();
        let (replicas, isr) = (ids(&p.replica_nodes), ids(&p.isr_nodes));
        let leader = p.leader_id.0;
        (leader >= 0 && accept(leader, &replicas, &isr)).then_some((leader, replicas, isr))
    })
    .await
}

/// AlterPartitionReassignments of `topic`-0 to `target` (`None`: cancel) via `addr`: the
/// partition's error code.
async fn reassign(addr: SocketAddr, topic: &str, target: Option<&[i32]>) -> i16 {
    let mut client = Client::connect(addr).await;
    let partition = ReassignablePartition::default()
        .with_partition_index(0)
        .with_replicas(target.map(|t| t.iter().map(|b| BrokerId(*b)).collect()));
    let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
        ReassignableTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![partition]),
    ]);
    let response = client.call(&request, 1).await;
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    response.responses[0].partitions[0].error_code
}

/// The reassignments under way, as `addr` lists them.
async fn under_way(addr: SocketAddr) -> Vec<OngoingPartitionReassignment> {
    let mut client = Client::connect(addr).await;
    let response = client
        .call(&ListPartitionReassignmentsRequest::default(), 0)
        .await;
    assert_eq!(response.error_code, 0);
    response
        .topics
        .into_iter()
        .flat_map(|t| t.partitions)
        .collect()
}

/// Produces one record with acks=all to whichever node leads `topic`-0 now; `Some` once
/// acknowledged.
async fn produce_once(cluster: &Cluster, topic: &str, value: &str) -> Option<()> {
    for node in [1, 2, 3] {
        let Ok(addr) = cluster.address(node) else {
            continue;
        };
        let Some(metadata) = metadata(addr).await else {
            continue;
        };
        // A node whose metadata does not name the leader yet leaves it to the next.
        let named = metadata.topics.first().and_then(|t| t.partitions.first());
        let Some(Ok(leader)) = named.map(|p| cluster.address(p.leader_id.0)) else {
            continue;
        };
        let mut client = Client::try_connect(leader).await?;
        let batch = batch_of_values(&[value.to_string()], now_ms());
        let request = common::produce_request(topic, 0, batch, -1);
        let response = client.try_call(&request, 9).await?;
        return (response.responses[0].partition_responses[0].error_code == 0).then_some(());
    }
    None
}

/// Every value fetched from `topic`-0 at its leader `node`.
async fn values_at(cluster: &Cluster, node: i32, topic: &str) -> Vec<String> {
    let mut client = Client::connect(cluster.address(node).expect("node")).await;
    let fetched = fetch_all(&mut client, topic, 0).await;
    fetched.into_iter().map(|(_, _, value)| value).collect()
}

/// Whether every acknowledged value is in `log`, in the order it was acknowledged.
fn holds_in_order(log: &[String], acknowledged: &[String]) -> bool {
    let mut rest = log.iter();
    acknowledged.iter().all(|a| rest.any(|v| v == a))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_moved_under_load_loses_no_acknowledged_record() {
    let cluster = Arc::new(Cluster::start(3).await.expect("cluster"));
    let addr2 = cluster.address(2).expect("node 2");
    create_on(addr2, "moving", &[1, 2]).await;
    partition_state(addr2, "moving", |_, _, isr| isr.len() == 2).await;

    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (cluster, acknowledged, stop) = (cluster.clone(), acknowledged.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let value = format!("m{i}");
                if produce_once(&cluster, "moving", &value).await.is_some() {
                    acknowledged.lock().expect("acks").push(value);
                    i += 1;
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        })
    };
    let acked = || acknowledged.lock().expect("acks").len();
    eventually("50 records acknowledged before the move", || async {
        (acked() >= 50).then_some(())
    })
    .await;

    assert_eq!(reassign(addr2, "moving", Some(&[2, 3])).await, 0);
    let (leader, replicas, isr) =
        partition_state(addr2, "moving", |_, replicas, _| replicas == [2, 3]).await;
    assert!([2, 3].contains(&leader), "led by a target replica");
    assert!(isr.iter().all(|r| replicas.contains(r)), "ISR {isr:?}");
    assert!(under_way(addr2).await.is_empty(), "completed");
    let moved_at = acked();
    eventually("50 more acknowledged after the move", || async {
        (acked() >= moved_at + 50).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    producer.await.expect("producer");
    let acknowledged = acknowledged.lock().expect("acks").clone();

    let (leader, _, _) = partition_state(addr2, "moving", |_, _, isr| isr.len() == 2).await;
    let log = values_at(&cluster, leader, "moving").await;
    assert!(
        holds_in_order(&log, &acknowledged),
        "every acknowledged record at {leader}"
    );
    let old_dir = cluster.data_dir().join("node-1").join("moving-0");
    eventually("broker 1 deletes its replica", || async {
        (!old_dir.exists()).then_some(())
    })
    .await;

    // The new replica holds everything too: killed, the leader hands over to it, and on
    // its return follows it (a record the new leader lacked would be gone from both).
    cluster.kill(leader).await.expect("kill");
    let other = if leader == 2 { 3 } else { 2 };
    let other_addr = cluster.address(other).expect("other");
    partition_state(other_addr, "moving", |l, _, _| l == other).await;
    cluster.restart(leader).await.expect("restart");
    partition_state(other_addr, "moving", |l, _, isr| {
        l == other && isr.len() == 2
    })
    .await;
    let log = values_at(&cluster, other, "moving").await;
    assert!(
        holds_in_order(&log, &acknowledged),
        "every acknowledged record at {other}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reassignment_that_cannot_catch_up_is_listed_and_cancelled() {
    let cluster = Cluster::start(3).await.expect("cluster");
    let addr2 = cluster.address(2).expect("node 2");
    create_on(addr2, "stuck", &[1, 2]).await;
    let (leader, _, _) = partition_state(addr2, "stuck", |_, _, isr| isr.len() == 2).await;
    // Every node's metadata may not name the leader yet: produce_once answers None then.
    eventually("a record acknowledged before the move", || {
        produce_once(&cluster, "stuck", "before")
    })
    .await;
    // Broker 3 cannot reach the leader, so it never catches up.
    cluster.cut(Endpoint::Node(3), Endpoint::Node(leader));

    assert_eq!(reassign(addr2, "stuck", Some(&[2, 3])).await, 0);
    let listed = eventually("the reassignment listed", || async {
        under_way(addr2).await.into_iter().next()
    })
    .await;
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<i32>>();
    assert_eq!(ids(&listed.replicas), [2, 3, 1]);
    assert_eq!(ids(&listed.adding_replicas), [3]);
    assert_eq!(ids(&listed.removing_replicas), [1]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        under_way(addr2).await.len(),
        1,
        "3 is cut off: still under way"
    );

    assert_eq!(reassign(addr2, "stuck", None).await, 0, "cancelled");
    let (_, replicas, isr) = partition_state(addr2, "stuck", |_, r, _| r.len() == 2).await;
    assert_eq!(
        replicas,
        [2, 1],
        "the original replicas, without the one being added"
    );
    assert!(!isr.contains(&3));
    assert!(under_way(addr2).await.is_empty());
    let again = reassign(addr2, "stuck", None).await;
    assert_eq!(again, 85, "NO_REASSIGNMENT_IN_PROGRESS");
    cluster.heal(Endpoint::Node(3), Endpoint::Node(leader));
    eventually("a record acknowledged after the cancel", || {
        produce_once(&cluster, "stuck", "after")
    })
    .await;
}

/// IncrementalAlterConfigs SET of `key` on `resource` (2: topic, 4: broker) via `addr`.
async fn set_config(addr: SocketAddr, resource: (i8, &str), key: &str, value: &str) {
    let mut client = Client::connect(addr).await;
    let request = common::alter_config(resource.0, resource.1, key, value);
    let response = client.call(&request, 1).await;
    let result = &response.responses[0];
    assert_eq!(result.error_code, 0, "{key}: {:?}", result.error_message);
}

/// DELETE of `key` on `resource` (2: topic, 4: broker) via `addr`.
async fn delete_config(addr: SocketAddr, resource: (i8, &str), key: &str) {
    let mut client = Client::connect(addr).await;
    let mut request = common::alter_config(resource.0, resource.1, key, "");
    request.resources[0].configs[0].config_operation = 1;
    request.resources[0].configs[0].value = None;
    let response = client.call(&request, 1).await;
    assert_eq!(response.responses[0].error_code, 0, "{key}");
}

/// Creates `topic`-0 on {1,2} holding 2 MB (20 records of 100 KB).
async fn two_megabytes_on_1_and_2(cluster: &Cluster, topic: &str) {
    let addr2 = cluster.address(2).expect("node 2");
    create_on(addr2, topic, &[1, 2]).await;
    partition_state(addr2, topic, |_, _, isr| isr.len() == 2).await;
    for i in 0..20 {
        let value = format!("{i}-{}", "x".repeat(100 * 1024));
        eventually("a 100 KB record acknowledged", || {
            produce_once(cluster, topic, &value)
        })
        .await;
    }
}

/// Moves `topic`-0 to {2,3} and checks that the throttle holds it back: 2 MB at 256 KB/s
/// take seconds (unthrottled, a fraction of one), so it is still under way after 2 s; then
/// `lift` removes the throttle and it completes.
async fn held_back_then_completed<F, Fut>(cluster: &Cluster, topic: &str, lift: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let addr2 = cluster.address(2).expect("node 2");
    assert_eq!(reassign(addr2, topic, Some(&[2, 3])).await, 0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(under_way(addr2).await.len(), 1, "held back by the throttle");
    lift().await;
    partition_state(addr2, topic, |_, replicas, _| replicas == [2, 3]).await;
    assert!(under_way(addr2).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_throttle_holds_a_moving_replica_to_its_rate() {
    // Goal: leader.replication.throttled.rate on the leaders with the topic's
    // leader.replication.throttled.replicas (as `kafka-reassign-partitions --throttle` sets
    // them) holds the new replica back; deleting the rate lets it finish.
    let cluster = Cluster::start(3).await.expect("cluster");
    two_megabytes_on_1_and_2(&cluster, "slow-leader").await;
    let addr2 = cluster.address(2).expect("node 2");
    let list = "leader.replication.throttled.replicas";
    set_config(addr2, (2, "slow-leader"), list, "0:1,0:2").await;
    let rate = "leader.replication.throttled.rate";
    for node in [1, 2] {
        let addr = cluster.address(node).expect("node");
        set_config(addr, (4, &node.to_string()), rate, "262144").await;
    }
    held_back_then_completed(&cluster, "slow-leader", || async {
        for node in [1, 2] {
            let addr = cluster.address(node).expect("node");
            delete_config(addr, (4, &node.to_string()), rate).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_throttle_holds_a_moving_replica_to_its_rate() {
    // Goal: follower.replication.throttled.rate on the new replica's broker with the
    // topic's follower.replication.throttled.replicas holds its own fetching back.
    let cluster = Cluster::start(3).await.expect("cluster");
    two_megabytes_on_1_and_2(&cluster, "slow-follower").await;
    let addr3 = cluster.address(3).expect("node 3");
    let list = "follower.replication.throttled.replicas";
    set_config(addr3, (2, "slow-follower"), list, "0:3").await;
    let rate = "follower.replication.throttled.rate";
    set_config(addr3, (4, "3"), rate, "262144").await;
    held_back_then_completed(&cluster, "slow-follower", || async {
        delete_config(addr3, (4, "3"), rate).await;
    })
    .await;
}
