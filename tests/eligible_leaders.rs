//! Eligible leader replicas across real processes (issue 11, item 6; KIP-966): three
//! controller-only and three broker-only processes, a partition on all three brokers with
//! `min.insync.replicas=2`. The ISR shrinks to one member and that broker dies; the
//! partition waits for an eligible replica (not one that missed records, nor the crashed
//! last leader while an eligible one may return), which then leads with every
//! acknowledged record. Without ELR the partition stays offline until the dead broker
//! returns (or, with unclean election, loses records).

mod common;

use std::time::{Duration, Instant};

use common::cluster_processes::*;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    describe_topic_partitions_request, ApiVersionsRequest, DescribeTopicPartitionsRequest,
};

const TOPIC: &str = "eligible";

/// Produces `values` (acks=all) to `node` until acknowledged; fails after [`WAIT`].
async fn produce_acked(cluster: &Cluster, node: usize, values: &[String]) {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(mut client) = Client::try_connect(cluster.addr(node)).await {
            let request = produce_request(TOPIC, 0, batch_of_values(values, now_ms()), -1);
            if let Some(response) = client.try_call(&request, 9).await {
                if response.responses[0].partition_responses[0].error_code == 0 {
                    return;
                }
            }
        }
        assert!(Instant::now() < deadline, "{values:?} not acknowledged");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The partition's (leader, ISR) as `node` reports it, once `wanted` holds.
async fn partition_when(
    cluster: &Cluster,
    node: usize,
    what: &str,
    wanted: impl Fn(i32, &[i32]) -> bool,
) -> (i32, Vec<i32>) {
    let addr = cluster.addr(node);
    let wanted = &wanted;
    eventually(what, || async move {
        let metadata = metadata(addr).await?;
        let topic = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))?;
        let partition = topic.partitions.first()?;
        let mut isr: Vec<i32> = partition.isr_nodes.iter().map(|b| b.0).collect();
        isr.sort_unstable();
        wanted(partition.leader_id.0, &isr).then_some((partition.leader_id.0, isr))
    })
    .await
}

/// The partition's (ELR, last known ELR) from DescribeTopicPartitions (API 75) at `node`.
async fn eligible(cluster: &Cluster, node: usize) -> (Vec<i32>, Vec<i32>) {
    let mut client = Client::connect(cluster.addr(node)).await;
    let topic = describe_topic_partitions_request::TopicRequest::default().with_name(name(TOPIC));
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![topic])
        .with_response_partition_limit(10);
    let response = client.call(&request, 0).await;
    let partition = &response.topics[0].partitions[0];
    let ids = |ids: &Option<Vec<kafka_protocol::messages::BrokerId>>| {
        let mut ids: Vec<i32> = ids.iter().flatten().map(|b| b.0).collect();
        ids.sort_unstable();
        ids
    };
    (
        ids(&partition.eligible_leader_replicas),
        ids(&partition.last_known_elr),
    )
}

fn values(prefix: &str) -> Vec<String> {
    (0..10).map(|i| format!("{prefix}{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_last_isr_member_dies_an_eligible_replica_with_every_acked_record_leads() {
    // Goal: KIP-966's promise across real processes. Method: brokers 3 and then 2 stopped
    // cleanly (SIGTERM) so that the ISR shrinks to [1] and 2 becomes eligible; broker 1
    // killed -9; broker 3 (not eligible: it missed acknowledged records) restarted first
    // and must not lead; then broker 2, which must, with every acknowledged record.
    // Before a clean restart kept the broker's eligibility, 2 lost it on registering and
    // the partition stayed offline.
    let mut cluster = Cluster::start_split(&["min.insync.replicas=2"]);
    eventually("three brokers", || async {
        metadata(cluster.addr(1))
            .await
            .filter(|m| m.brokers.len() == 3)
    })
    .await;
    create_assigned(&cluster, TOPIC, &[1, 2, 3]).await;
    produce_acked(&cluster, 1, &values("a")).await;

    cluster.signal(3, "-TERM");
    cluster.wait_exit(3);
    partition_when(&cluster, 1, "ISR [1, 2]", |_, isr| isr == [1, 2]).await;
    produce_acked(&cluster, 1, &values("b")).await;

    cluster.signal(2, "-TERM");
    cluster.wait_exit(2);
    partition_when(&cluster, 1, "ISR [1]", |_, isr| isr == [1]).await;
    let mut leader = Client::connect(cluster.addr(1)).await;
    let refused = produce(
        &mut leader,
        TOPIC,
        0,
        batch_of_values(&values("c"), now_ms()),
    )
    .await;
    assert_eq!(
        ResponseError::try_from_code(refused.error_code),
        Some(ResponseError::NotEnoughReplicas),
        "acks=all below min ISR"
    );
    drop(leader);
    cluster.kill(1);

    cluster.spawn(3);
    let (offline, _) = partition_when(&cluster, 3, "broker 3 back, partition offline", |l, _| {
        l != 1
    })
    .await;
    assert_eq!(offline, -1, "broker 3 is not eligible: it missed b0..b9");
    assert_eq!(eligible(&cluster, 3).await, (vec![1, 2], vec![1]));

    // Broker 1 comes back from a crash: no longer eligible while broker 2 may return.
    cluster.spawn(1);
    // It answers requests once it is registered and unfenced.
    eventually("broker 1 serving again", || async {
        let mut client = Client::try_connect(cluster.addr(1)).await?;
        client.try_call(&ApiVersionsRequest::default(), 0).await
    })
    .await;
    let (leader, _) = partition_when(&cluster, 3, "still offline", |_, _| true).await;
    assert_eq!(leader, -1, "a crashed replica waits for the eligible one");
    assert_eq!(eligible(&cluster, 3).await, (vec![2], vec![1]));

    cluster.spawn(2);
    let (elected, isr) = partition_when(&cluster, 3, "an eligible leader", |l, _| l > 0).await;
    // Broker 3 may already have caught up with the new leader and rejoined its ISR.
    assert_eq!(elected, 2, "broker 2 was eligible");
    assert!(
        isr.contains(&2),
        "the leader {elected} is in its ISR {isr:?}"
    );
    // Strict min ISR: the high watermark moves once another broker has caught up.
    partition_when(&cluster, 2, "ISR of 3", |_, isr| isr.len() == 3).await;
    let mut client = Client::connect(cluster.addr(2)).await;
    let stored: Vec<String> = fetch_all(&mut client, TOPIC, 0)
        .await
        .into_iter()
        .map(|r| r.2)
        .collect();
    let acked: Vec<String> = values("a").into_iter().chain(values("b")).collect();
    assert_eq!(stored, acked, "every acknowledged record, and only those");
}
