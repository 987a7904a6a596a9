//! A real rdkafka producer and consumer against a three-node highwater cluster started in
//! the test (`highwater::testkit`), with the partition leader killed mid-way and the
//! clients' next requests failed on purpose: nothing acknowledged is lost, nothing is
//! read twice.

use std::time::Duration;

use highwater::testkit::{ApiKey, Cluster};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

async fn produce(bootstrap: &str, topic: &str, values: std::ops::Range<usize>) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("producer");
    for i in values {
        let value = format!("v{i}");
        let record = FutureRecord::to(topic).key("k").payload(&value);
        producer
            .send(record, Duration::from_secs(60))
            .await
            .map_err(|(error, _)| error)
            .expect("acknowledged");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_reads_everything_acknowledged_across_a_leader_kill() {
    let cluster = Cluster::start(3).await.expect("cluster");
    let bootstrap = cluster.bootstrap().to_string();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .expect("admin");
    let topic = NewTopic::new("orders", 1, TopicReplication::Fixed(3));
    let created = admin
        .create_topics([&topic], &AdminOptions::new())
        .await
        .expect("create");
    assert!(created.iter().all(Result::is_ok), "{created:?}");

    produce(&bootstrap, "orders", 0..50).await;
    // Every node fails the clients' next produce as if it had lost leadership, and the
    // partition's leader is killed outright: the producer retries, the cluster re-elects.
    let metadata = admin
        .inner()
        .fetch_metadata(Some("orders"), Duration::from_secs(10))
        .expect("metadata");
    let leader = metadata.topics()[0].partitions()[0].leader();
    for node in 1..=3 {
        cluster
            .fail_next(node, ApiKey::Produce, 1, 6)
            .expect("Produce can fail");
    }
    cluster.kill(leader).await.expect("kill the leader");
    produce(&bootstrap, "orders", 50..100).await;
    cluster.restart(leader).await.expect("restart");

    let values = rdkafka_consumer_example::read_values(&bootstrap, "g", "orders", 100)
        .await
        .expect("consumed");
    let expected: Vec<String> = (0..100).map(|i| format!("v{i}")).collect();
    assert_eq!(
        values, expected,
        "every acknowledged message, once, in order"
    );
}
