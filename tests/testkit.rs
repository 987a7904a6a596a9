//! `highwater::testkit` (issue 14): a real cluster in the test process and its fault hooks,
//! driven through Kafka requests: a killed leader loses no acknowledged record and comes
//! back into the ISR; a cut link takes a follower out of the ISR and healing brings it
//! back; injected errors and drops reach the client, then requests pass again.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::cluster_processes::{describe_cluster, eventually, metadata};
use common::{batch_of_values, fetch_all, name, now_ms, produce, Client};
use highwater::testkit::{Cluster, Endpoint, Options};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, MetadataRequest};

/// Creates `topic` (one partition, the cluster's default replication factor) via `addr`.
async fn create(addr: SocketAddr, topic: &str) {
    let mut client = Client::connect(addr).await;
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(-1)])
        .with_timeout_ms(15_000);
    assert_eq!(client.call(&request, 7).await.topics[0].error_code, 0);
}

/// `topic`-0's leader and ISR as `addr` reports them, once `accept` holds.
async fn partition_state(
    addr: SocketAddr,
    topic: &str,
    accept: impl Fn(i32, &[i32]) -> bool,
) -> (i32, Vec<i32>) {
    eventually(&format!("{topic} in the wanted state"), || async {
        let metadata = metadata(addr).await?;
        let found = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
        let p = found.partitions.first()?;
        let isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
        let leader = p.leader_id.0;
        (leader >= 0 && accept(leader, &isr)).then_some((leader, isr))
    })
    .await
}

/// Produces `values` with acks=all to whichever node leads `topic`-0 now (retrying while
/// leadership moves), asking the metadata of `via`.
async fn produce_all(cluster: &Cluster, via: i32, topic: &str, values: &[String]) {
    let addr = cluster.address(via).expect("node");
    let batch = batch_of_values(values, now_ms());
    eventually("an acknowledged produce", || async {
        let (leader, _) = partition_state(addr, topic, |_, _| true).await;
        let mut client = Client::try_connect(cluster.address(leader).ok()?).await?;
        let request = common::produce_request(topic, 0, batch.clone(), -1);
        let response = client.try_call(&request, 9).await?;
        (response.responses[0].partition_responses[0].error_code == 0).then_some(())
    })
    .await;
}

fn values(from: usize, count: usize) -> Vec<String> {
    (from..from + count).map(|i| format!("v{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_loses_no_acknowledged_record_and_rejoins_the_isr() {
    let cluster = Cluster::start(3).await.expect("cluster");
    assert_eq!(cluster.bootstrap().split(',').count(), 3);
    let addr1 = cluster.address(1).expect("node 1");
    create(addr1, "t").await;
    let (leader, _) = partition_state(addr1, "t", |_, isr| isr.len() == 3).await;
    produce_all(&cluster, 1, "t", &values(0, 20)).await;

    cluster.kill(leader).await.expect("kill");
    assert_eq!(
        cluster
            .nodes()
            .iter()
            .filter(|(_, running)| *running)
            .count(),
        2
    );
    let survivor = if leader == 1 { 2 } else { 1 };
    let survivor_addr = cluster.address(survivor).expect("survivor");
    let (new_leader, _) = partition_state(survivor_addr, "t", |l, _| l != leader).await;
    produce_all(&cluster, survivor, "t", &values(20, 20)).await;

    cluster.restart(leader).await.expect("restart");
    partition_state(survivor_addr, "t", |_, isr| isr.len() == 3).await;
    let mut client = Client::connect(cluster.address(new_leader).expect("leader")).await;
    let got: Vec<String> = fetch_all(&mut client, "t", 0)
        .await
        .into_iter()
        .map(|(_, _, value)| value)
        .collect();
    assert_eq!(
        got,
        values(0, 40),
        "every acknowledged record, once, in order"
    );
    cluster.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_link_takes_a_follower_out_of_the_isr_and_healing_brings_it_back() {
    let options = Options {
        nodes: 3,
        settings: vec![("replica.lag.time.max.ms".into(), "1500".into())],
        ..Options::default()
    };
    let cluster = Cluster::start_with(options).await.expect("cluster");
    let addr1 = cluster.address(1).expect("node 1");
    create(addr1, "cut").await;
    let (leader, isr) = partition_state(addr1, "cut", |_, isr| isr.len() == 3).await;
    // Not the active controller: a leader cut off from the controller cannot shrink its
    // ISR at all (as in Kafka), which is another test.
    let controller = describe_cluster(addr1)
        .await
        .expect("cluster")
        .controller_id
        .0;
    let follower = *isr
        .iter()
        .find(|id| **id != leader && **id != controller)
        .expect("a follower that is not the controller");
    let leader_addr = cluster.address(leader).expect("leader");

    cluster.cut(Endpoint::Node(leader), Endpoint::Node(follower));
    produce_all(&cluster, leader, "cut", &values(0, 5)).await;
    let (_, shrunk) = partition_state(leader_addr, "cut", |l, isr| {
        l == leader && !isr.contains(&follower)
    })
    .await;
    assert_eq!(shrunk.len(), 2, "only the cut follower left the ISR");

    cluster.heal(Endpoint::Node(leader), Endpoint::Node(follower));
    partition_state(leader_addr, "cut", |_, isr| isr.contains(&follower)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_errors_and_drops_reach_the_client_then_requests_pass_again() {
    let cluster = Cluster::start(1).await.expect("node");
    let addr = cluster.address(1).expect("node 1");
    create(addr, "inj").await;
    let mut client = Client::connect(addr).await;

    // NOT_LEADER_OR_FOLLOWER twice, then the real answer.
    cluster
        .fail_next(1, ApiKey::Produce, 2, 6)
        .expect("Produce can fail");
    let mut codes = Vec::new();
    for i in 0..3 {
        let batch = batch_of_values(&values(i, 1), now_ms());
        codes.push(produce(&mut client, "inj", 0, batch).await.error_code);
    }
    assert_eq!(codes, vec![6, 6, 0]);

    // A dropped request closes the connection unanswered; the next one is served.
    cluster
        .drop_next(1, ApiKey::Metadata, 1)
        .expect("anything can be dropped");
    let request = MetadataRequest::default().with_topics(None);
    assert!(client.try_call(&request, 12).await.is_none(), "dropped");
    assert!(metadata(addr).await.is_some(), "served again");

    // Clients cut off from the node get no answer until healed.
    cluster.cut(Endpoint::Clients, Endpoint::Node(1));
    assert!(metadata(addr).await.is_none(), "cut off");
    cluster.heal(Endpoint::Clients, Endpoint::Node(1));
    assert!(metadata(addr).await.is_some(), "healed");

    // A delayed link answers, later.
    cluster.delay(
        Endpoint::Clients,
        Endpoint::Node(1),
        Duration::from_millis(300),
    );
    let started = std::time::Instant::now();
    assert!(metadata(addr).await.is_some());
    assert!(started.elapsed() >= Duration::from_millis(300), "delayed");

    // An API whose answer carries no error code a client reads cannot be failed.
    let refused = cluster.fail_next(1, ApiKey::Metadata, 1, 3);
    assert!(refused.is_err_and(|e| e.to_string().contains("cannot be answered")));
    assert!(
        cluster.fail_next(9, ApiKey::Produce, 1, 6).is_err(),
        "no node 9"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_cluster_removes_its_data() {
    let cluster = Cluster::start(1).await.expect("node");
    let dir = cluster.data_dir().to_path_buf();
    assert!(dir.exists());
    create(cluster.address(1).expect("node 1"), "gone").await;
    drop(cluster);
    assert!(!dir.exists(), "{} removed", dir.display());
}
