//! Transactions across three real processes: a transaction version 2 producer (KIP-890
//! part 2) writes to partitions led by brokers other than its coordinator, which add them
//! to its transaction through the coordinator (AddPartitionsToTxn v5 between brokers); its
//! EndTxn v5 commits them all at a new epoch. Real clients are in compat/ (Java and
//! franz-go run the same protocol there on one node).
//!
//! `HIGHWATER_CLUSTER_LOG=1` shows the nodes' logs.

mod common;

use common::cluster_processes::*;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const ID: &str = "cluster-app";

fn txn_id() -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(ID))
}

/// The transaction coordinator's node, once FindCoordinator (which creates
/// `__transaction_state`) names one.
async fn coordinator(cluster: &Cluster) -> usize {
    let addr = cluster.addr(1);
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str(ID))
        .with_key_type(1);
    let node = eventually("a transaction coordinator", || {
        let request = request.clone();
        async move {
            let mut client = Client::connect(addr).await;
            let response = client.try_call(&request, 3).await?;
            (response.error_code == 0).then_some(response.node_id.0)
        }
    })
    .await;
    usize::try_from(node).expect("a node id")
}

/// InitProducerId on the coordinator, retried while it loads its partition.
async fn init(cluster: &Cluster, node: usize) -> (i64, i16) {
    let addr = cluster.addr(node);
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id()))
        .with_transaction_timeout_ms(60_000);
    eventually("InitProducerId", || {
        let request = request.clone();
        async move {
            let mut client = Client::connect(addr).await;
            let response = client.try_call(&request, 4).await?;
            (response.error_code == 0).then_some((response.producer_id.0, response.producer_epoch))
        }
    })
    .await
}

/// A transactional Produce v12 (no AddPartitionsToTxn before it) to `topic`-0 on `node`,
/// retried while the partition or the coordinator is not ready.
async fn produce_v12(cluster: &Cluster, node: usize, topic: &str, producer: (i64, i16)) {
    let addr = cluster.addr(node);
    eventually(
        &format!("a transactional write to {topic}"),
        || async move {
            let request = produce_request(topic, 0, txn_batch(1, producer, 0), -1)
                .with_transactional_id(Some(txn_id()));
            let mut client = Client::connect(addr).await;
            let response = client.try_call(&request, 12).await?;
            let code = response.responses[0].partition_responses[0].error_code;
            let retriable = [
                ResponseError::NotEnoughReplicas.code(),
                ResponseError::NotLeaderOrFollower.code(),
            ];
            assert!(
                code == 0 || retriable.contains(&code),
                "{topic}: error {code}"
            );
            (code == 0).then_some(())
        },
    )
    .await
}

/// The last stable offset of `topic`-0 on its leader `node`.
async fn last_stable_offset(cluster: &Cluster, node: usize, topic: &str) -> i64 {
    let mut client = Client::connect(cluster.addr(node)).await;
    let request = fetch_request(topic, 0, 0, 0, 1).with_isolation_level(1);
    client.call(&request, 12).await.responses[0].partitions[0].last_stable_offset
}

#[tokio::test]
async fn partitions_led_away_from_the_coordinator_join_a_transaction_version_2_commit() {
    let cluster = Cluster::start();
    let addr = cluster.addr(1);
    eventually("three brokers", || async move {
        metadata(addr).await.filter(|m| m.brokers.len() == 3)
    })
    .await;
    // One partition led by each node.
    let topics = [
        ("led-by-1", [1, 2, 3]),
        ("led-by-2", [2, 3, 1]),
        ("led-by-3", [3, 1, 2]),
    ];
    for (topic, replicas) in &topics {
        create_assigned(&cluster, topic, replicas).await;
    }
    let coordinator = coordinator(&cluster).await;
    let producer = init(&cluster, coordinator).await;
    for (topic, replicas) in &topics {
        produce_v12(&cluster, replicas[0] as usize, topic, producer).await;
        assert_eq!(
            last_stable_offset(&cluster, replicas[0] as usize, topic).await,
            0,
            "{topic}: the open transaction holds the LSO"
        );
    }

    let mut client = Client::connect(cluster.addr(coordinator)).await;
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(true);
    let response = client.call(&request, 5).await;
    assert_eq!(response.error_code, 0, "EndTxn");
    assert_eq!(response.producer_epoch, producer.1 + 1, "a new epoch");

    for (topic, replicas) in &topics {
        let leader = replicas[0] as usize;
        let addr = cluster.addr(leader);
        eventually(&format!("{topic} committed"), || async move {
            let mut client = Client::connect(addr).await;
            let request = fetch_request(topic, 0, 0, 0, 1).with_isolation_level(1);
            let response = client.try_call(&request, 12).await?;
            // The record at 0, the commit marker at 1.
            (response.responses[0].partitions[0].last_stable_offset == 2).then_some(())
        })
        .await;
    }
}
