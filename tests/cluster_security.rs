//! Traffic between nodes secured with Kafka's keys (issue 15). Brokers replicating over a
//! secured inter-broker listener: three processes whose `INTERNAL` listener is the
//! inter-broker one — SASL_SSL with SCRAM-SHA-512 and client certificates required, or
//! SASL_SSL with PLAIN and host names not checked — replicate acks=all records that a new
//! leader serves after a kill -9 of the old one; a broker logging in with a wrong password
//! drops out of the ISR instead of replicating. The metadata quorum and broker
//! registrations over an SSL controller listener with client certificates required, which
//! a plaintext client is not served on. Certificates are made here with rcgen.

mod common;

use std::time::{Duration, Instant};

use common::cluster_processes::*;
use common::pki::Pki;
use common::*;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;

const MAP: &str =
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT";
const SCRAM_LOGIN: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                           username=\"broker\" password=\"broker-secret\";";

/// Writes a CA and a broker keystore naming `names` into `dir`: (keystore, CA) paths.
fn key_material(dir: &std::path::Path, names: &[&str]) -> (String, String) {
    let pki = Pki::new();
    let (cert, key) = pki.issue(names, "broker");
    let keystore = dir.join("broker.pem");
    std::fs::write(&keystore, format!("{cert}{key}")).expect("keystore");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, pki.ca_pem()).expect("ca");
    (keystore.display().to_string(), ca.display().to_string())
}

/// The settings of an `INTERNAL` SASL_SSL inter-broker listener with `keystore` and `ca`.
fn secured(keystore: &str, ca: &str, extra: &[&str]) -> Vec<String> {
    let mut settings = vec![
        MAP.to_string(),
        "inter.broker.listener.name=INTERNAL".to_string(),
        format!("listener.name.internal.ssl.keystore.location={keystore}"),
        format!("listener.name.internal.ssl.truststore.location={ca}"),
        "replica.lag.time.max.ms=2000".to_string(),
    ];
    settings.extend(extra.iter().map(|s| s.to_string()));
    settings
}

/// Produces ten records with acks=all to `topic`-0 on node 1, its leader.
async fn produce_ten(cluster: &Cluster, topic: &str) {
    let mut producer = Client::connect(cluster.addr(1)).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let request = produce_request(topic, 0, batch(10, -1, -1, now_ms()), -1);
        let response = producer.call(&request, 9).await;
        let code = response.responses[0].partition_responses[0].error_code;
        if code == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "acks=all never succeeded: {code}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `topic` as `node` reports it once its leader is not `gone`.
async fn led_without(cluster: &Cluster, node: usize, topic: &str, gone: i32) -> i32 {
    let addr = cluster.addr(node);
    eventually("a new leader", || async move {
        let metadata = metadata(addr).await?;
        let found: &MetadataResponseTopic = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
        let leader = found.partitions.first()?.leader_id.0;
        (leader > 0 && leader != gone).then_some(leader)
    })
    .await
}

/// Checks that the records acknowledged by node 1 were replicated: kill -9 of node 1,
/// then the new leader serves all ten.
async fn replicated_to_a_new_leader(mut cluster: Cluster, topic: &str) {
    produce_ten(&cluster, topic).await;
    // Longer than replica.lag.time.max.ms: followers that could not fetch are out by now.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let (isr, _) = isr(&cluster, 1, topic).await;
    assert_eq!(
        isr,
        vec![1, 2, 3],
        "every follower fetches over the listener"
    );
    cluster.kill(1);
    let leader = led_without(&cluster, 2, topic, 1).await as usize;
    let mut consumer = Client::connect(cluster.addr(leader)).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let data = fetch(&mut consumer, topic, 0, 0).await;
        if data.error_code == 0 && data.high_watermark == 10 {
            let served = records(data.records.as_ref().expect("records"));
            assert_eq!(served.len(), 10, "every acknowledged record is on {leader}");
            return;
        }
        assert!(Instant::now() < deadline, "node {leader} never served them");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_replicate_over_sasl_ssl_with_scram_and_client_certificates() {
    // Goal: a cluster whose inter-broker listener is SASL_SSL (SCRAM-SHA-512 users from the
    // metadata log, client certificates required) replicates: followers connect over TLS
    // with the broker's keystore, log in with the JAAS config's username and password, and
    // fetch. Method: acks=all, the ISR after the lag time, and a new leader after kill -9.
    let dir = tempfile::tempdir().expect("tempdir");
    let (keystore, ca) = key_material(dir.path(), &["127.0.0.1", "localhost"]);
    let jaas = format!("listener.name.internal.scram-sha-512.sasl.jaas.config={SCRAM_LOGIN}");
    let settings = secured(
        &keystore,
        &ca,
        &[
            "listener.name.internal.ssl.client.auth=required",
            "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            "scram.bootstrap.credentials=SCRAM-SHA-512=[name=broker,password=broker-secret]",
            &jaas,
        ],
    );
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let cluster = Cluster::start_with_internal(dir, &settings, &[]);
    with_brokers(&cluster, 1, 3).await;
    create_assigned(&cluster, "secured", &[1, 2, 3]).await;
    replicated_to_a_new_leader(cluster, "secured").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_host_name_checks_a_trusted_certificate_for_another_name_is_accepted() {
    // Goal: `ssl.endpoint.identification.algorithm=` (empty) lets brokers accept a trusted
    // certificate that does not name the address they connect to, as Kafka does; PLAIN
    // logs them in. Method: a certificate for another name only; replication as above.
    let dir = tempfile::tempdir().expect("tempdir");
    let (keystore, ca) = key_material(dir.path(), &["broker.example"]);
    let plain = "listener.name.internal.plain.sasl.jaas.config=\
                 org.apache.kafka.common.security.plain.PlainLoginModule required \
                 username=\"broker\" password=\"pw\" user_broker=\"pw\";";
    let settings = secured(
        &keystore,
        &ca,
        &[
            "listener.name.internal.ssl.endpoint.identification.algorithm=",
            "listener.name.internal.sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            plain,
        ],
    );
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let cluster = Cluster::start_with_internal(dir, &settings, &[]);
    with_brokers(&cluster, 1, 3).await;
    create_assigned(&cluster, "unnamed", &[1, 2, 3]).await;
    replicated_to_a_new_leader(cluster, "unnamed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_with_a_wrong_inter_broker_password_falls_out_of_the_isr() {
    // Goal: a broker that cannot log in to the leader is refused, not served: it never
    // replicates and leaves the ISR after replica.lag.time.max.ms while the others stay.
    let dir = tempfile::tempdir().expect("tempdir");
    let (keystore, ca) = key_material(dir.path(), &["127.0.0.1"]);
    let login = |password: &str| {
        format!(
            "listener.name.internal.scram-sha-256.sasl.jaas.config=\
             org.apache.kafka.common.security.scram.ScramLoginModule required \
             username=\"broker\" password=\"{password}\";"
        )
    };
    let right = login("broker-secret");
    let settings = secured(
        &keystore,
        &ca,
        &[
            "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
            "scram.bootstrap.credentials=SCRAM-SHA-256=[name=broker,password=broker-secret]",
            &right,
        ],
    );
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let cluster = Cluster::start_with_internal(dir, &settings, &[(3, login("wrong"))]);
    with_brokers(&cluster, 1, 3).await;
    create_assigned(&cluster, "refused", &[1, 2, 3]).await;
    produce_ten(&cluster, "refused").await;
    let addr = cluster.addr(1);
    let isr = eventually("node 3 out of the ISR", || async move {
        let metadata = metadata(addr).await?;
        let topic = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "refused"))?;
        let isr: Vec<i32> = topic
            .partitions
            .first()?
            .isr_nodes
            .iter()
            .map(|b| b.0)
            .collect();
        (!isr.contains(&3)).then_some(isr)
    })
    .await;
    assert_eq!(isr, vec![1, 2], "node 2 logs in and stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quorum_and_brokers_reach_controllers_over_mutual_tls() {
    // Goal: with the controller listener mapped to SSL and client certificates required,
    // the controllers elect a leader, brokers register and heartbeat, and leadership moves
    // after a kill -9, all over TLS; the listener serves no plaintext client. Method: three
    // brokers registered, replication and a new leader as above, and a plaintext request
    // to the controller port unanswered.
    let dir = tempfile::tempdir().expect("tempdir");
    let (keystore, ca) = key_material(dir.path(), &["127.0.0.1", "localhost"]);
    let settings = [
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL".to_string(),
        format!("listener.name.controller.ssl.keystore.location={keystore}"),
        format!("listener.name.controller.ssl.truststore.location={ca}"),
        "listener.name.controller.ssl.client.auth=required".to_string(),
        "replica.lag.time.max.ms=2000".to_string(),
    ];
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let cluster = Cluster::start_with_nodes(dir, &settings, &[]);
    with_brokers(&cluster, 1, 3).await;
    let controller: std::net::SocketAddr = format!("127.0.0.1:{}", cluster.controller_ports[0])
        .parse()
        .expect("address");
    let mut plaintext = Client::connect(controller).await;
    let request = kafka_protocol::messages::ApiVersionsRequest::default();
    assert!(
        plaintext.try_call(&request, 3).await.is_none(),
        "a plaintext client is not served on an SSL controller listener"
    );
    create_assigned(&cluster, "quorum-tls", &[1, 2, 3]).await;
    replicated_to_a_new_leader(cluster, "quorum-tls").await;
}
