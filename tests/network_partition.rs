//! Network partitions of one node (issue 11, item 8), with three real processes each in its
//! own network namespace (root only, as CI runs): the node is cut off from the other two
//! while clients still reach it, for several broker sessions, then reconnected.
//! - A follower that is also the active controller: the majority elects a new controller,
//!   which fences the cut broker, so the leader's ISR shrinks and acks=all completes again
//!   before the partition heals.
//! - The partition's leader: a client still talking to it gets no acknowledgement, the
//!   majority elects a new leader that acknowledges, and after the heal the deposed
//!   leader's unacknowledged record is gone from every replica.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::cluster_processes::*;
use common::*;

/// How long the partition lasts: several sessions, so that the majority must act.
const CUT: Duration = Duration::from_millis(5 * SESSION_MS);

/// Three nodes in namespaces and the topic on `[leader, …]` with `min.insync.replicas=2`,
/// its whole ISR in sync, where `leader` is chosen from the active controller's id.
async fn cluster_with_topic(topic: &str, leader: impl Fn(i32) -> i32) -> (Cluster, i32) {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = ["min.insync.replicas=2"];
    let cluster = Cluster::start_in_namespaces(dir, &settings, &[]);
    let cluster = cluster.expect("network namespaces (root and iproute2)");
    eventually("three brokers", || async {
        metadata(cluster.addr(1))
            .await
            .filter(|m| m.brokers.len() == 3)
    })
    .await;
    let controller = active_controller(&cluster, 1).await;
    let leader = leader(controller);
    let followers: Vec<i32> = (1..=3).filter(|n| *n != leader).collect();
    create_assigned(&cluster, topic, &[leader, followers[0], followers[1]]).await;
    let addr = cluster.addr(leader as usize);
    let until = Instant::now() + WAIT;
    let acked = produce_until(addr, topic, "first", until).await;
    assert!(acked.is_some(), "acks=all with the whole ISR");
    (cluster, controller)
}

/// Produces one record with `value` (acks=all) to `addr` until acknowledged or `until`;
/// returns the offset.
async fn produce_until(addr: SocketAddr, topic: &str, value: &str, until: Instant) -> Option<i64> {
    while Instant::now() < until {
        let records = batch_of_values(&[value.to_string()], now_ms());
        if let Some(mut client) = Client::try_connect(addr).await {
            let request = produce_request(topic, 0, records, -1);
            if let Some(response) = client.try_call(&request, 9).await {
                let partition = &response.responses[0].partition_responses[0];
                if partition.error_code == 0 {
                    return Some(partition.base_offset);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// The leader of `topic`-0 according to `node`, once it is not `old`.
async fn new_leader(cluster: &Cluster, node: usize, topic: &str, old: i32) -> i32 {
    let addr = cluster.addr(node);
    eventually("a new leader", || async move {
        let metadata = metadata(addr).await?;
        let found = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
        let leader = found.partitions.first()?.leader_id.0;
        (leader > 0 && leader != old).then_some(leader)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_active_controller_that_follows_is_fenced_and_acks_resume_before_the_heal() {
    // Goal: the cut controller cannot keep a silent follower in the ISR: the majority's
    // new controller fences it and acks=all completes while the partition lasts. Method:
    // leader on a node other than the active controller, controller cut from its peers.
    let (cluster, controller) = cluster_with_topic("cut-controller", |c| c % 3 + 1).await;
    let cut = controller as usize;
    let leader = (cut % 3 + 1) as i32;
    let network = cluster.network.as_ref().expect("namespaces");
    network.cut_from_peers(cut);
    let started = Instant::now();
    let acked = produce_until(
        cluster.addr(leader as usize),
        "cut-controller",
        "during",
        started + CUT,
    )
    .await;
    let waited = started.elapsed();
    println!("acks=all answered {waited:?} after the active controller {cut} was cut off");
    assert!(
        acked.is_some(),
        "acks=all completed within the partition ({CUT:?})"
    );
    let (in_sync, _) = isr(&cluster, leader as usize, "cut-controller").await;
    assert!(!in_sync.contains(&(cut as i32)), "ISR {in_sync:?}");
    network.heal(cut);
    eventually("the cut node back in the ISR", || async {
        (isr(&cluster, leader as usize, "cut-controller")
            .await
            .0
            .len()
            == 3)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_its_peers_acknowledges_nothing_and_loses_its_record() {
    // Goal: a deposed leader that clients still reach never acknowledges acks=all, and
    // what it appended alone is truncated after the heal. Method: the leader cut from its
    // peers, one client writing to it and one to whoever the others elect.
    let (cluster, _) = cluster_with_topic("cut-leader", |_| 2).await;
    let network = cluster.network.as_ref().expect("namespaces");
    network.cut_from_peers(2);
    let started = Instant::now();
    let deposed = produce_until(cluster.addr(2), "cut-leader", "deposed", started + CUT);
    let elected = async {
        let leader = new_leader(&cluster, 1, "cut-leader", 2).await;
        let addr = cluster.addr(leader as usize);
        produce_until(addr, "cut-leader", "elected", started + CUT).await
    };
    let (deposed, elected) = tokio::join!(deposed, elected);
    assert_eq!(deposed, None, "the cut-off leader acknowledged acks=all");
    assert!(elected.is_some(), "the majority's leader acknowledges");
    network.heal(2);
    eventually("node 2 back in the ISR", || async {
        (isr(&cluster, 1, "cut-leader").await.0.len() == 3).then_some(())
    })
    .await;
    for node in 1..=3 {
        let mut client = Client::connect(cluster.addr(node)).await;
        let leader = new_leader(&cluster, node, "cut-leader", -1).await;
        if leader as usize != node {
            continue;
        }
        let values: Vec<String> = fetch_all(&mut client, "cut-leader", 0)
            .await
            .into_iter()
            .map(|r| r.2)
            .collect();
        assert!(values.contains(&"elected".to_string()), "{values:?}");
        assert!(!values.contains(&"deposed".to_string()), "{values:?}");
    }
    eventually("the deposed record gone from node 2's files", || async {
        (!files_contain(&cluster.data_dir(2).join("cut-leader-0"), b"deposed")).then_some(())
    })
    .await;
}

/// Whether any `.log` file in `dir` contains `needle` (record values are not compressed).
fn files_contain(dir: &std::path::Path, needle: &[u8]) -> bool {
    let entries = std::fs::read_dir(dir).expect("partition dir");
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .any(|p| {
            let bytes = std::fs::read(p).unwrap_or_default();
            bytes.windows(needle.len()).any(|w| w == needle)
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_cut_off_from_the_majority_resigns_and_stays_unfenced_after_the_heal() {
    // Goal: a controller that lost the majority stops acting as active (Kafka's check
    // quorum), instead of naming itself the controller and serving its own broker's
    // heartbeats until it hears of the next term; after a partition shorter than a session
    // no broker is fenced. Method: the active controller cut from its peers until its own
    // node names another controller (or none) and the majority's has been elected, then
    // healed and the brokers watched for two sessions. Before the lease, the cut node
    // named itself for as long as the partition lasted.
    let (cluster, controller) = cluster_with_topic("short-cut", |c| c).await;
    let cut = controller as usize;
    let other = cut % 3 + 1;
    let network = cluster.network.as_ref().expect("namespaces");
    network.cut_from_peers(cut);
    eventually("another active controller", || async {
        let id = describe_cluster(cluster.addr(other)).await?.controller_id.0;
        (id > 0 && id != controller).then_some(())
    })
    .await;
    eventually("the cut node no longer names itself", || async {
        let id = describe_cluster(cluster.addr(cut)).await?.controller_id.0;
        (id != controller).then_some(())
    })
    .await;
    network.heal(cut);
    let watch_until = Instant::now() + Duration::from_millis(2 * SESSION_MS);
    while Instant::now() < watch_until {
        let described = describe_cluster(cluster.addr(other)).await;
        let fenced: Vec<i32> = described
            .iter()
            .flat_map(|d| &d.brokers)
            .filter(|b| b.is_fenced)
            .map(|b| b.broker_id.0)
            .collect();
        assert!(fenced.is_empty(), "fenced after the heal: {fenced:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
