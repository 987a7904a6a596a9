//! The metadata quorum across real processes: three combined nodes (the shipped
//! `config/cluster/node-*.toml`, on free ports and temporary directories, with a short
//! broker session), driven by kill -9, SIGTERM, SIGSTOP/SIGCONT and restarts, and observed
//! through Metadata and DescribeCluster as clients see them.
//!
//! `HIGHWATER_CLUSTER_LOG=1` shows the nodes' logs.

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster_processes::*;
use common::*;
use highwater::testkit::ports::free_port;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{CreateTopicsRequest, DescribeConfigsRequest, MetadataResponse};

/// Creates `topic` (3 partitions, `factor` replicas each) through `node`.
async fn create_topic(cluster: &Cluster, node: usize, topic: &str, factor: i16) -> i16 {
    let mut client = Client::connect(cluster.addr(node)).await;
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(3)
            .with_replication_factor(factor)])
        .with_timeout_ms(15_000);
    client.call(&request, 7).await.topics[0].error_code
}

fn topic<'a>(metadata: &'a MetadataResponse, topic: &str) -> Option<&'a MetadataResponseTopic> {
    metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
}

/// (leader, leader epoch) of every partition of `name`, by index.
fn leaders(topic: &MetadataResponseTopic) -> Vec<(i32, i32)> {
    let mut partitions: Vec<_> = topic.partitions.iter().collect();
    partitions.sort_by_key(|p| p.partition_index);
    partitions
        .iter()
        .map(|p| (p.leader_id.0, p.leader_epoch))
        .collect()
}

/// Metadata from `node` once every partition of `name` has a live leader.
async fn led_topic(cluster: &Cluster, node: usize, name: &str) -> MetadataResponseTopic {
    let addr = cluster.addr(node);
    eventually(&format!("{name} led, seen by node {node}"), || async move {
        let metadata = metadata(addr).await?;
        let found = topic(&metadata, name)?.clone();
        let led =
            found.partitions.len() == 3 && found.partitions.iter().all(|p| p.leader_id.0 >= 0);
        led.then_some(found)
    })
    .await
}

/// Metadata of `name` from `addr` once every partition is led by a live broker other than
/// `gone`.
async fn led_away_from(addr: SocketAddr, name: &str, gone: usize) -> MetadataResponseTopic {
    eventually(
        &format!("{name} led away from node {gone}"),
        || async move {
            let metadata = metadata(addr).await?;
            let found = topic(&metadata, name)?.clone();
            let moved = found
                .partitions
                .iter()
                .all(|p| p.leader_id.0 >= 0 && p.leader_id.0 as usize != gone);
            moved.then_some(found)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_keep_their_metadata_when_the_active_controller_dies() {
    // Goal: the quorum forms, assigns replicas over all brokers, and a kill -9 of the active
    // controller leaves a new one with the metadata intact and still able to change it;
    // losing a second controller stops changes but not reads. Method: 3 real processes.
    let mut cluster = Cluster::start();
    let formed = with_brokers(&cluster, 1, 3).await;
    assert_eq!(formed.brokers.len(), 3);
    assert_eq!(create_topic(&cluster, 1, "orders", 3).await, 0);
    let before = led_topic(&cluster, 2, "orders").await;
    let replicas: Vec<usize> = before
        .partitions
        .iter()
        .map(|p| p.replica_nodes.len())
        .collect();
    assert_eq!(
        replicas,
        vec![3, 3, 3],
        "replication factor 3 over three brokers"
    );

    let active = active_controller(&cluster, 1).await as usize;
    cluster.kill(active);
    let survivor = (1..=3).find(|n| *n != active).expect("a survivor");
    let addr = cluster.addr(survivor);
    let new_active = eventually("a new active controller", || async move {
        let described = describe_cluster(addr).await?;
        let id = described.controller_id.0;
        (id > 0 && id as usize != active).then_some(id as usize)
    })
    .await;
    assert_ne!(new_active, active);
    let after = led_away_from(addr, "orders", active).await;
    assert_eq!(
        after.topic_id, before.topic_id,
        "topic id survives the failover"
    );
    for ((_, epoch), (old_leader, old_epoch)) in leaders(&after).iter().zip(leaders(&before)) {
        if old_leader as usize == active {
            assert!(*epoch > old_epoch, "a moved leadership has a higher epoch");
        }
    }
    assert_eq!(
        create_topic(&cluster, survivor, "after-failover", 2).await,
        0
    );

    let last = (1..=3)
        .find(|n| *n != active && *n != new_active)
        .expect("last node");
    cluster.kill(new_active);
    let started = Instant::now();
    let refused = create_topic(&cluster, last, "without-quorum", 2).await;
    assert_eq!(
        refused,
        ResponseError::RequestTimedOut.code(),
        "no quorum, no change"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let metadata = metadata(cluster.addr(last))
        .await
        .expect("metadata without quorum");
    assert!(
        topic(&metadata, "orders").is_some(),
        "reads go on without a quorum"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_broker_is_fenced_within_its_session_and_rejoins_after_a_restart() {
    // Goal: kill -9 of a broker that is not the active controller moves its leaderships to
    // other ISR members with higher epochs within broker.session.timeout.ms + 1 s; after a
    // restart it comes back, fenced first and then unfenced. Method: 3 real processes.
    let mut cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    assert_eq!(create_topic(&cluster, 1, "events", 3).await, 0);
    let active = active_controller(&cluster, 1).await as usize;
    let before = led_topic(&cluster, active, "events").await;
    let victim = (1..=3).find(|n| *n != active).expect("a non-controller");
    cluster.kill(victim);
    let killed_at = Instant::now();
    let addr = cluster.addr(active);
    let after = led_away_from(addr, "events", victim).await;
    let elapsed = killed_at.elapsed();
    assert!(
        elapsed < Duration::from_millis(SESSION_MS + 1000),
        "moved after {elapsed:?}"
    );
    for ((_, epoch), (old_leader, old_epoch)) in leaders(&after).iter().zip(leaders(&before)) {
        if old_leader as usize == victim {
            assert!(*epoch > old_epoch, "the new leader has a higher epoch");
        }
    }
    eventually("the killed broker fenced", || async move {
        let described = describe_cluster(addr).await?;
        let entry = described
            .brokers
            .iter()
            .find(|b| b.broker_id.0 as usize == victim);
        entry.is_some_and(|b| b.is_fenced).then_some(())
    })
    .await;

    cluster.spawn(victim);
    let rejoined = with_brokers(&cluster, victim, 3).await;
    assert!(rejoined
        .brokers
        .iter()
        .any(|b| b.node_id.0 as usize == victim));
    eventually("every broker unfenced again", || async move {
        let described = describe_cluster(addr).await?;
        let unfenced =
            described.brokers.len() == 3 && described.brokers.iter().all(|b| !b.is_fenced);
        unfenced.then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_by_sigstop_is_fenced_and_heals_on_sigcont() {
    // Goal: a node that stops answering (SIGSTOP, as a network cut) is fenced and loses its
    // leaderships; when it answers again (SIGCONT) it is unfenced without a restart.
    // Method: 3 real processes, signals.
    let cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    assert_eq!(create_topic(&cluster, 1, "cut", 3).await, 0);
    let active = active_controller(&cluster, 1).await as usize;
    let cut = (1..=3).find(|n| *n != active).expect("a non-controller");
    cluster.signal(cut, "-STOP");
    let seen = with_brokers(&cluster, active, 2).await;
    assert!(seen.brokers.iter().all(|b| b.node_id.0 as usize != cut));
    let moved = led_topic(&cluster, active, "cut").await;
    assert!(moved
        .partitions
        .iter()
        .all(|p| p.leader_id.0 as usize != cut));
    cluster.signal(cut, "-CONT");
    let healed = with_brokers(&cluster, active, 3).await;
    assert!(healed.brokers.iter().any(|b| b.node_id.0 as usize == cut));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_with_a_live_node_id_is_refused() {
    // Goal: a process that starts with the node id of a live broker is refused by the
    // controller and exits with an error that says so. Method: 3 real processes, then a
    // broker-only node 7 started twice.
    let cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    let broker_only = |port: u16| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_highwater"));
        command
            .args(["serve", "--node-id", "7", "--set", "process.roles=broker"])
            .args(["--listeners", &format!("127.0.0.1:{port}")])
            .args([
                "--set",
                &format!("controller.quorum.voters={}", cluster.voters()),
            ])
            .args(["--set", &format!("broker.session.timeout.ms={SESSION_MS}")])
            .args(["--set", "broker.heartbeat.interval.ms=200"])
            .stdout(Stdio::null());
        command
    };
    let first_dir = cluster.dir.path().join("broker-7a");
    let mut first = broker_only(free_port())
        .args(["--log-dirs", &first_dir.display().to_string()])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    with_brokers(&cluster, 1, 4).await;
    let second_dir = cluster.dir.path().join("broker-7b");
    let second = broker_only(free_port())
        .args(["--log-dirs", &second_dir.display().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let output = second.wait_with_output().expect("wait");
    let _ = first.kill();
    let _ = first.wait();
    assert!(
        !output.status.success(),
        "the duplicate exits with an error"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("already registered by another live process"),
        "says why: {stderr}"
    );
}

#[test]
fn an_inconsistent_quorum_config_is_refused_at_start() {
    // Goal: a node whose own controller address disagrees with controller.quorum.voters
    // does not start, and says why. Method: the real binary, no cluster needed.
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["serve", "--config"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/cluster/node-1.toml"
        ))
        .args(["--set", "http.listeners="])
        .args([
            "--listeners",
            &format!(
                "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
                free_port(),
                free_port()
            ),
        ])
        .args(["--log-dirs", &dir.path().display().to_string()])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("inconsistent quorum configuration"),
        "{stderr}"
    );
}

/// Fetches partition 0 of `topic` from offset 0 until it is served.
async fn until_served(client: &mut Client, topic: &str, topic_id: uuid::Uuid) {
    let mut fetch = fetch_request(topic, 0, 0, 0, 1);
    fetch.topics[0].topic_id = topic_id;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let served = client.call(&fetch, 16).await;
        let code = served.responses[0].partitions[0].error_code;
        if code == 0 {
            return;
        }
        assert_eq!(code, ResponseError::NotLeaderOrFollower.code());
        assert!(
            tokio::time::Instant::now() < deadline,
            "{topic} never served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_to_a_follower_names_the_leader() {
    // Goal: a produce sent to a replica that does not lead the partition, and a fetch sent
    // to a broker without a replica, get NOT_LEADER_OR_FOLLOWER with the current leader, its
    // epoch and its endpoint (KIP-951), and the leader serves them; a consumer's fetch to a
    // follower is served there (KIP-392). Method: 3 real processes, raw Produce v11 and
    // Fetch v16.
    let cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    assert_eq!(create_topic(&cluster, 1, "hints", 3).await, 0);
    let led = led_topic(&cluster, 1, "hints").await;
    let (leader, epoch) = leaders(&led)[0];
    let follower = (1..=3).find(|n| *n as i32 != leader).expect("a follower");
    let mut client = Client::connect(cluster.addr(follower)).await;
    let produced = client
        .call(
            &produce_request("hints", 0, batch(1, -1, -1, now_ms()), 1),
            11,
        )
        .await;
    let refused = &produced.responses[0].partition_responses[0];
    assert_eq!(
        refused.error_code,
        ResponseError::NotLeaderOrFollower.code()
    );
    assert_eq!(
        (
            refused.current_leader.leader_id.0,
            refused.current_leader.leader_epoch
        ),
        (leader, epoch)
    );
    let endpoint = produced
        .node_endpoints
        .first()
        .expect("the leader's endpoint");
    assert_eq!(
        endpoint.port,
        i32::from(cluster.client_ports[leader as usize - 1])
    );
    // A consumer's Fetch v11+ may read from a follower (KIP-392): the follower serves it,
    // once it has its replica (until then it answers NOT_LEADER_OR_FOLLOWER, as Kafka's
    // does: the topic was made a moment ago).
    until_served(&mut client, "hints", led.topic_id).await;
    // A broker with no replica of the partition names its leader.
    assert_eq!(create_topic(&cluster, 1, "elsewhere", 1).await, 0);
    let elsewhere = led_topic(&cluster, 1, "elsewhere").await;
    let (only_replica, _) = leaders(&elsewhere)[0];
    let stranger = (1..=3)
        .find(|n| *n as i32 != only_replica)
        .expect("a stranger");
    let mut client = Client::connect(cluster.addr(stranger)).await;
    let mut fetch = fetch_request("elsewhere", 0, 0, 0, 1);
    fetch.topics[0].topic_id = elsewhere.topic_id;
    let fetched = client.call(&fetch, 16).await;
    let refused = &fetched.responses[0].partitions[0];
    assert_eq!(
        refused.error_code,
        ResponseError::NotLeaderOrFollower.code()
    );
    assert_eq!(refused.current_leader.leader_id.0, only_replica);
    assert_eq!(fetched.node_endpoints.len(), 1);

    let addr = cluster.addr(leader as usize);
    eventually("the leader accepts the batch", || async move {
        let mut client = Client::connect(addr).await;
        let request = produce_request("hints", 0, batch(1, -1, -1, now_ms()), 1);
        let produced = client.call(&request, 11).await;
        (produced.responses[0].partition_responses[0].error_code == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_moves_leaderships_away_before_the_process_exits() {
    // Goal: a controlled shutdown hands the broker's leaderships to other ISR members (with
    // higher epochs) before the process exits 0, without waiting for its session to expire.
    // Method: 3 real processes, SIGTERM to a broker that is not the active controller.
    let mut cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    assert_eq!(create_topic(&cluster, 1, "graceful", 3).await, 0);
    let active = active_controller(&cluster, 1).await as usize;
    let before = led_topic(&cluster, active, "graceful").await;
    let victim = (1..=3).find(|n| *n != active).expect("a non-controller");
    assert!(leaders(&before).iter().any(|(l, _)| *l as usize == victim));
    cluster.signal(victim, "-TERM");
    let mut child = cluster.children[victim - 1].take().expect("running");
    assert!(child.wait().expect("wait").success(), "SIGTERM exits 0");
    let after = metadata(cluster.addr(active)).await.expect("metadata");
    assert_eq!(
        after.brokers.len(),
        2,
        "the stopped broker is fenced at once"
    );
    let after = topic(&after, "graceful").expect("topic");
    for ((leader, epoch), (old_leader, old_epoch)) in leaders(after).iter().zip(leaders(&before)) {
        assert_ne!(
            *leader as usize, victim,
            "no leadership left on the stopped broker"
        );
        if old_leader as usize == victim {
            assert!(*epoch > old_epoch, "the new leader has a higher epoch");
        }
    }
}

/// The leader epoch of each partition of `name` as `node` reports it, once every one is
/// led at an epoch above `above`'s (by index) with all 3 replicas in its ISR.
async fn fully_in_sync(
    cluster: &Cluster,
    node: usize,
    name: &str,
    above: &[(i32, i32)],
) -> Option<Vec<(i32, i32)>> {
    let metadata = metadata(cluster.addr(node)).await?;
    let found = topic(&metadata, name)?;
    let led = leaders(found);
    let newer = led.len() == above.len() && led.iter().zip(above).all(|(l, a)| l.1 > a.1);
    let in_sync = found.partitions.iter().all(|p| p.isr_nodes.len() == 3);
    (newer && in_sync && led.iter().all(|(l, _)| *l >= 0)).then_some(led)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_is_back_in_its_isr_after_the_whole_cluster_restarts() {
    // Goal: after all three nodes stop and start again together, every replica follows its
    // leader and is back in the ISR. Each broker applies the image current when it starts
    // following the metadata: an image published between the end of its start and its
    // subscription counted as seen, its partitions kept their old roles, and with every
    // follower so stuck nothing changed the metadata again (found with 10,000 partitions:
    // all led by one node with an ISR of one, for good). Method: 3 real processes, a topic
    // of 60 partitions RF=3, kill -9 of all three, all started again, then each node's
    // Metadata.
    let mut cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    let mut client = Client::connect(cluster.addr(1)).await;
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name("restarted"))
            .with_num_partitions(60)
            .with_replication_factor(3)])
        .with_timeout_ms(15_000);
    assert_eq!(client.call(&request, 7).await.topics[0].error_code, 0);
    let never = vec![(-1, -1); 60];
    let (cluster_ref, never) = (&cluster, &never);
    let before = eventually("every replica in sync", || async move {
        fully_in_sync(cluster_ref, 1, "restarted", never).await
    })
    .await;
    for node in 1..=3 {
        cluster.kill(node);
    }
    for node in 1..=3 {
        cluster.spawn(node);
    }
    for node in 1..=3 {
        let (cluster, before) = (&cluster, &before);
        eventually(
            &format!("every replica in sync again, seen by node {node}"),
            || async move { fully_in_sync(cluster, node, "restarted", before).await },
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_missed_a_purged_log_catches_up_from_a_snapshot() {
    // Goal: a controller that was away while the others snapshotted and purged the log it
    // missed is brought up to date by a snapshot, and is unfenced again. Method: 3 real
    // processes; SIGSTOP one, commit 1,200 config changes, SIGCONT it, read its view.
    let cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    assert_eq!(create_topic(&cluster, 1, "busy", 3).await, 0);
    let active = active_controller(&cluster, 1).await as usize;
    let away = (1..=3).find(|n| *n != active).expect("a follower");
    cluster.signal(away, "-STOP");
    let mut client = Client::connect(cluster.addr(active)).await;
    for i in 0..1200 {
        let request = alter_config(2, "busy", "retention.ms", &format!("{}", 60_000 + i));
        let response = client.call(&request, 1).await;
        assert_eq!(response.responses[0].error_code, 0, "change {i}");
    }
    cluster.signal(away, "-CONT");
    let addr = cluster.addr(away);
    eventually("the returning node has the last change", || async move {
        let mut client = Client::try_connect(addr).await?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(name("busy").0)
                .with_configuration_keys(Some(vec![name("retention.ms").0])),
        ]);
        let response = client.try_call(&request, 4).await?;
        let value = response.results.first()?.configs.first()?.value.clone()?;
        (value.as_str() == "61199").then_some(())
    })
    .await;
    with_brokers(&cluster, active, 3).await;
    let snapshot = cluster
        .dir
        .path()
        .join(format!("node-{away}/__cluster_metadata-0/snapshot.json"));
    assert!(snapshot.exists(), "the returning node holds a snapshot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_brokers_follow_three_separate_controllers() {
    // Goal: the split-role example works: broker-only nodes register with a quorum of
    // controller-only nodes, forward topic changes to it, follow its metadata, and survive
    // the loss of one controller; a killed broker's leaderships move. Method: the shipped
    // config/cluster/split/ files on free ports, 6 real processes.
    let mut cluster = Cluster::start_split(&[]);
    let brokers: Vec<SocketAddr> = (1..=3).map(|n| cluster.addr(n)).collect();
    let broker = |i: usize| brokers[i - 1];
    let seen = eventually("three brokers", || async move {
        metadata(broker(1)).await.filter(|m| m.brokers.len() == 3)
    })
    .await;
    let mut ids: Vec<i32> = seen.brokers.iter().map(|b| b.node_id.0).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        vec![1, 2, 3],
        "only brokers are listed, not controllers"
    );

    let mut client = Client::connect(broker(2)).await;
    let create = |topic: &str| {
        CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(name(topic))
                .with_num_partitions(3)
                .with_replication_factor(3)])
            .with_timeout_ms(15_000)
    };
    assert_eq!(
        client.call(&create("split"), 7).await.topics[0].error_code,
        0
    );
    let led = led_away_from(broker(3), "split", 0).await;
    assert_eq!(led.partitions.len(), 3, "broker 3 follows the new topic");

    cluster.kill_controller(1);
    let created = eventually("a change with two controllers left", || async move {
        let mut client = Client::try_connect(broker(1)).await?;
        let response = client.try_call(&create("after-controller-loss"), 7).await?;
        (response.topics[0].error_code == 0).then_some(())
    });
    created.await;

    cluster.kill(1);
    led_away_from(broker(2), "split", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_with_other_voters_than_its_log_is_refused() {
    // Goal: a data directory whose metadata log was made by one quorum does not start
    // under another controller.quorum.voters, and says why. Method: the real binary, as a
    // single node first, then as node 1 of three on the same directory.
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut single = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args([
            "serve",
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/config/server.toml"),
        ])
        .args(["--listeners", &format!("127.0.0.1:{port}")])
        .args(["--log-dirs", &dir.path().display().to_string()])
        .args(["--set", "http.listeners="])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    eventually("the single node", || async move { metadata(addr).await }).await;
    let _ = Command::new("kill")
        .args(["-TERM", &single.id().to_string()])
        .status();
    assert!(single.wait().expect("wait").success());

    let controller_port = free_port();
    let voters = format!(
        "1@127.0.0.1:{controller_port},2@127.0.0.1:{},3@127.0.0.1:{}",
        free_port(),
        free_port()
    );
    let listeners =
        format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}");
    let mut refused = serve("node-1.toml", &voters)
        .args(["--listeners", &listeners])
        .args(["--log-dirs", &dir.path().display().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + WAIT;
    while refused.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = refused.kill();
            panic!("a node with other voters than its log kept running");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let output = refused.wait_with_output().expect("output");
    assert!(!output.status.success(), "refused");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the metadata log's quorum is [1]"),
        "{stderr}"
    );
}

/// FindCoordinator of `group` asked of `node`: the coordinator's node id once known.
async fn coordinator_of(cluster: &Cluster, node: usize, group: &str) -> Option<i32> {
    let mut client =
        tokio::time::timeout(Duration::from_secs(2), Client::connect(cluster.addr(node)))
            .await
            .ok()?;
    let request = kafka_protocol::messages::FindCoordinatorRequest::default()
        .with_key(common::groups::s(group));
    let response = client.call(&request, 3).await;
    (response.error_code == 0).then_some(response.node_id.0)
}

/// The committed offset of `topic`-0 for `group`, asked of `node`, once the coordinator
/// answers without error.
async fn committed_at(cluster: &Cluster, node: usize, group: &str, topic: &str) -> Option<i64> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let mut client = Client::connect(cluster.addr(node)).await;
    let request = kafka_protocol::messages::OffsetFetchRequest::default()
        .with_group_id(common::groups::gid(group))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(topic))
            .with_partition_indexes(vec![0])]));
    let response = client.call(&request, 7).await;
    (response.error_code == 0).then(|| response.topics[0].partitions[0].committed_offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_and_acknowledged_records_survive_the_loss_of_their_leader() {
    // Goal: with replication, the group coordinator's offsets (in __consumer_offsets, RF=3)
    // and acks=all records survive a kill -9 of the broker that led them. Method: commit an
    // offset and produce with acks=all, kill the coordinator, ask the survivors.
    let mut cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    assert_eq!(create_topic(&cluster, 1, "events", 3).await, 0);
    let coordinator = eventually("a coordinator", || coordinator_of(&cluster, 1, "g")).await;
    let coordinator = coordinator as usize;
    let mut client = Client::connect(cluster.addr(coordinator)).await;
    let deadline = Instant::now() + WAIT;
    while common::groups::commit(&mut client, "g", "", -1, "events", 42).await != 0 {
        assert!(Instant::now() < deadline, "the commit never succeeded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The partition of "events" that the coordinator's broker leads (one per broker).
    let led = led_topic(&cluster, coordinator, "events").await;
    let index = led
        .partitions
        .iter()
        .find(|p| p.leader_id.0 as usize == coordinator)
        .map_or(0, |p| p.partition_index);
    let mut producer = Client::connect(cluster.addr(coordinator)).await;
    let produced = produce_request("events", index, batch(10, -1, -1, now_ms()), -1);
    let response = producer.call(&produced, 9).await;
    assert_eq!(
        response.responses[0].partition_responses[0].error_code, 0,
        "acks=all"
    );

    cluster.kill(coordinator);
    let survivor = (1..=3).find(|n| *n != coordinator).expect("a survivor");
    let moved = eventually("a new coordinator", || async {
        coordinator_of(&cluster, survivor, "g")
            .await
            .filter(|c| *c as usize != coordinator)
    })
    .await;
    let offset = eventually("the offset from the new coordinator", || {
        committed_at(&cluster, moved as usize, "g", "events")
    })
    .await;
    assert_eq!(
        offset, 42,
        "the commit was replicated before it was acknowledged"
    );
    let led = led_away_from(cluster.addr(survivor), "events", coordinator).await;
    let new_leader = led.partitions[index as usize].leader_id.0 as usize;
    let mut consumer = Client::connect(cluster.addr(new_leader)).await;
    let deadline = Instant::now() + WAIT;
    let records = loop {
        let data = fetch(&mut consumer, "events", index, 0).await;
        if data.error_code == 0 && data.high_watermark == 10 {
            break records(data.records.as_ref().expect("records"));
        }
        assert!(
            Instant::now() < deadline,
            "the new leader never served the records"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        records.len(),
        10,
        "every acknowledged record is on the new leader"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_active_controller_fences_no_broker_that_kept_running() {
    // Goal (issue 11, 2b): when the active controller is paused beyond the election
    // timeout, only the paused node is fenced; the brokers that kept running stay unfenced
    // throughout, and the paused one fences nobody when it resumes. Method: 3 real
    // processes, SIGSTOP of the active controller for three sessions, DescribeCluster
    // polled on the survivors, then every node's log searched for a fencing of a survivor.
    let cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    assert_eq!(create_topic(&cluster, 1, "failover", 3).await, 0);
    let active = active_controller(&cluster, 1).await as usize;
    let survivors: Vec<usize> = (1..=3).filter(|n| *n != active).collect();
    cluster.signal(active, "-STOP");
    let paused_at = Instant::now();
    let mut paused_fenced = false;
    while paused_at.elapsed() < Duration::from_millis(3 * SESSION_MS) {
        for &node in &survivors {
            let Some(described) = describe_cluster(cluster.addr(node)).await else {
                continue;
            };
            for broker in described.brokers.iter().filter(|b| b.is_fenced) {
                let id = broker.broker_id.0 as usize;
                assert_eq!(id, active, "broker {id} fenced while it kept running");
                paused_fenced = true;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        paused_fenced,
        "the paused node is fenced by the new controller"
    );
    cluster.signal(active, "-CONT");
    eventually("every broker unfenced again", || async {
        let described = describe_cluster(cluster.addr(survivors[0])).await?;
        let unfenced =
            described.brokers.len() == 3 && described.brokers.iter().all(|b| !b.is_fenced);
        unfenced.then_some(())
    })
    .await;
    for node in 1..=3 {
        let path = cluster.dir.path().join(format!("node-{node}.log"));
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        for survivor in &survivors {
            let fenced = format!("broker fenced node_id={survivor} ");
            let expired = format!("fencing it node_id={survivor}");
            assert!(
                !log.contains(&fenced) && !log.contains(&expired),
                "node {node}'s log shows survivor {survivor} fenced"
            );
        }
    }
}

/// Produces acks=all batches to every partition of `topics` through its leader, as seen by
/// `seen_from`, until `stop` is set; errors (leaders moving) are expected and ignored.
async fn produce_load(
    cluster_addrs: Vec<SocketAddr>,
    seen_from: SocketAddr,
    topics: Vec<&'static str>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> usize {
    let mut acknowledged = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let Some(seen) = metadata(seen_from).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        for name in &topics {
            let Some(found) = topic(&seen, name) else {
                continue;
            };
            for p in &found.partitions {
                let Some(addr) = cluster_addrs.get(p.leader_id.0 as usize - 1) else {
                    continue;
                };
                let Some(mut client) = Client::try_connect(*addr).await else {
                    continue;
                };
                let records = batch_of_values(&["v".to_string()], now_ms());
                let request = produce_request(name, p.partition_index, records, -1);
                let answer =
                    tokio::time::timeout(Duration::from_secs(3), client.try_call(&request, 9))
                        .await;
                if let Ok(Some(response)) = answer {
                    let code = response.responses[0].partition_responses[0].error_code;
                    acknowledged += usize::from(code == 0);
                }
            }
        }
    }
    acknowledged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_restarted_after_kill_9_leads_again_only_at_a_new_epoch() {
    // Goal (issue 11, 2c): after kill -9 and a restart under acks=all load, every partition
    // the node led (replicated, and one where it is the only replica) has a higher leader
    // epoch, and the restarted node never answers Metadata without itself while it
    // serves. Method: 3 real processes, a produce loop, the restarted node's Metadata
    // polled from the first moment it accepts connections.
    let mut cluster = Cluster::start();
    with_brokers(&cluster, 1, 3).await;
    assert_eq!(create_topic(&cluster, 1, "replicated", 3).await, 0);
    assert_eq!(create_topic(&cluster, 1, "single", 1).await, 0);
    let active = active_controller(&cluster, 1).await as usize;
    let victim = (1..=3).find(|n| *n != active).expect("a non-controller");
    let before: Vec<(&str, Vec<(i32, i32)>)> = vec![
        (
            "replicated",
            leaders(&led_topic(&cluster, active, "replicated").await),
        ),
        (
            "single",
            leaders(&led_topic(&cluster, active, "single").await),
        ),
    ];
    let led_by_victim =
        |l: &Vec<(i32, i32)>| l.iter().any(|(leader, _)| *leader as usize == victim);
    assert!(
        before.iter().all(|(_, l)| led_by_victim(l)),
        "the victim leads in both topics"
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let addrs: Vec<SocketAddr> = (1..=3).map(|n| cluster.addr(n)).collect();
    let load = tokio::spawn(produce_load(
        addrs,
        cluster.addr(active),
        vec!["replicated", "single"],
        std::sync::Arc::clone(&stop),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.kill(victim);
    cluster.spawn(victim);
    let victim_addr = cluster.addr(victim);
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(
            Instant::now() < deadline,
            "the restarted node never led again"
        );
        let Some(seen) = metadata(victim_addr).await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        assert!(
            seen.brokers.iter().any(|b| b.node_id.0 as usize == victim),
            "the restarted node answered Metadata without itself: {:?}",
            seen.brokers
        );
        let grown = before.iter().all(|(name, old)| {
            let Some(now) = topic(&seen, name).map(leaders) else {
                return false;
            };
            old.iter()
                .zip(&now)
                .all(|((old_leader, old_epoch), (leader, epoch))| {
                    *old_leader as usize != victim || (*leader >= 0 && epoch > old_epoch)
                })
        });
        if grown {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acknowledged = load.await.expect("load");
    assert!(acknowledged > 0, "the load was acknowledged");
}
