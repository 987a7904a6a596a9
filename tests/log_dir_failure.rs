//! A full log directory on a follower (issue 11, failure 2; KIP-112): the directory goes
//! offline at the first failed write, its replicas leave their ISRs at once so the high
//! watermark moves again and acks=all produces complete, the broker answers
//! KAFKA_STORAGE_ERROR for them and keeps serving its other directory, and after a restart
//! with room on the disk the replica comes back. Three real processes; node 2's first log
//! directory is a small tmpfs the test mounts (root only, as CI runs).

mod common;

use std::time::{Duration, Instant};

use common::cluster_processes::*;
use common::small_disk::SmallDisk;
use common::*;
use highwater::testkit::ports::free_port;
use kafka_protocol::error::ResponseError;

/// Three nodes; node 2's `log.dirs` are a 2 MiB tmpfs, then a directory of its own that
/// also holds its metadata log.
async fn start_with_a_small_disk_on_node_2() -> (Cluster, SmallDisk, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = SmallDisk::mount(&dir.path().join("small"), "2m");
    let node2 = dir.path().join("node-2");
    let node2_dirs = format!("log.dirs={},{}", small.path().display(), node2.display());
    let metadata_dir = format!("metadata.log.dir={}", node2.display());
    let cluster = Cluster::start_with_nodes(
        dir,
        &["min.insync.replicas=2"],
        &[(2, node2_dirs), (2, metadata_dir)],
    );
    eventually("three brokers", || async {
        metadata(cluster.addr(1))
            .await
            .filter(|m| m.brokers.len() == 3)
    })
    .await;
    (cluster, small, node2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_disk_fills_up_leaves_the_isr_at_once_and_serves_its_other_dir() {
    let (cluster, small, node2) = start_with_a_small_disk_on_node_2().await;
    // Node 2 places its first replica on the small disk and its second on the other dir.
    create_assigned(&cluster, "full", &[1, 2, 3]).await;
    eventually("full-0 on the small disk", || async {
        small.path().join("full-0").is_dir().then_some(())
    })
    .await;
    create_assigned(&cluster, "other", &[1, 2, 3]).await;
    let small_dir = small.path().display().to_string();
    let node2_dir = node2.display().to_string();
    let placed = |full: Vec<String>, other: Vec<String>, code: i16| {
        vec![
            (small_dir.clone(), code, full),
            (node2_dir.clone(), 0, other),
        ]
    };
    let both = placed(vec!["full-0".into()], vec!["other-0".into()], 0);
    eventually(
        "full-0 on the small disk, other-0 on node 2's other dir",
        || async {
            let dirs = describe_log_dirs(&mut Client::connect(cluster.addr(2)).await).await;
            (dirs == both).then_some(())
        },
    )
    .await;
    let mut leader = Client::connect(cluster.addr(1)).await;
    let acked = produce(&mut leader, "full", 0, batch(10, -1, -1, now_ms())).await;
    assert_eq!(acked.error_code, 0, "acks=all with the whole ISR");
    assert_eq!(isr(&cluster, 1, "full").await.0, vec![1, 2, 3]);

    small.fill();
    let started = Instant::now();
    // 200 values of 1 KiB: more than the page the log's last write left room in.
    let values: Vec<String> = (0..200).map(|i| format!("{i:01024}")).collect();
    let after = produce(&mut leader, "full", 0, batch_of_values(&values, now_ms())).await;
    let waited = started.elapsed();
    println!("acks=all answered {waited:?} after node 2's disk filled up");
    assert_eq!(after.error_code, 0, "acks=all completes without node 2");
    assert!(
        waited < Duration::from_secs(3),
        "the high watermark moved at once, not after replica.lag.time.max.ms ({waited:?})"
    );
    let (full_isr, offline) = isr(&cluster, 1, "full").await;
    assert_eq!(full_isr, vec![1, 3], "node 2 left the ISR");
    assert_eq!(offline, vec![2], "its replica is reported offline");

    let mut node2_client = Client::connect(cluster.addr(2)).await;
    let refused = produce(&mut node2_client, "full", 0, batch(1, -1, -1, now_ms())).await;
    assert_eq!(
        refused.error_code,
        ResponseError::KafkaStorageError.code(),
        "the offline replica answers KAFKA_STORAGE_ERROR"
    );
    let other = produce(&mut leader, "other", 0, batch(5, -1, -1, now_ms())).await;
    assert_eq!(other.error_code, 0, "the other directory still replicates");
    assert_eq!(isr(&cluster, 1, "other").await.0, vec![1, 2, 3]);
    // DescribeLogDirs (kafka-log-dirs): the failed directory answers KAFKA_STORAGE_ERROR
    // alone, the other one its replica.
    let dirs = describe_log_dirs(&mut node2_client).await;
    let storage_error = ResponseError::KafkaStorageError.code();
    assert_eq!(dirs, placed(vec![], vec!["other-0".into()], storage_error));
    drop(node2_client);

    restart_with_room(cluster, &small, &mut leader).await;
}

/// A restart of node 2 with room on the disk brings its replica back into the ISR, with
/// every acknowledged record.
async fn restart_with_room(mut cluster: Cluster, small: &SmallDisk, leader: &mut Client) {
    cluster.kill(2);
    small.free();
    cluster.spawn(2);
    eventually("node 2 back in the ISR of full", || async {
        let (isr, offline) = isr(&cluster, 1, "full").await;
        (isr.contains(&2) && offline.is_empty()).then_some(())
    })
    .await;
    let end = produce(leader, "full", 0, batch(1, -1, -1, now_ms())).await;
    assert_eq!(end.error_code, 0);
    assert_eq!(end.base_offset, 210, "every acknowledged record is there");
}

#[tokio::test]
async fn a_node_whose_metadata_log_directory_fills_up_exits() {
    // Goal: when the metadata log cannot be written (its directory full), the node stops
    // with an error naming the directory, as a Kafka node halts when its metadata log
    // directory fails, instead of staying up without a metadata quorum (before the fix it
    // kept running and spun two cores at 100%). Method: the real binary on a small tmpfs,
    // the disk filled, then a topic created (a metadata write).
    let dir = tempfile::tempdir().expect("tempdir");
    let small = SmallDisk::mount(&dir.path().join("small"), "4m");
    let port = free_port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["serve", "--config"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/config/server.toml"))
        .args(["--listeners", &format!("127.0.0.1:{port}")])
        .args(["--log-dirs", &small.path().display().to_string()])
        .args(["--set", "http.listeners="])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("node.log")).expect("log"))
        .spawn()
        .expect("spawn");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    eventually("the node", || async move { metadata(addr).await }).await;
    small.fill();
    let mut client = Client::connect(addr).await;
    let request = kafka_protocol::messages::CreateTopicsRequest::default()
        .with_topics(vec![
            kafka_protocol::messages::create_topics_request::CreatableTopic::default()
                .with_name(name("after-full"))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ])
        .with_timeout_ms(2000);
    let _ = client.try_call(&request, 7).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stderr = std::fs::read_to_string(dir.path().join("node.log")).expect("log");
    let Some(status) = status else {
        child.kill().expect("kill");
        let _ = child.wait();
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        panic!("the node kept running with its metadata log directory full: {tail:#?}");
    };
    assert_eq!(status.code(), Some(1));
    assert!(
        stderr.contains("metadata log directory failed"),
        "{}",
        stderr.lines().rev().take(5).collect::<Vec<_>>().join("\n")
    );
}

/// DescribeLogDirs of every partition: each directory with its error code and the replicas
/// it holds (`topic-partition`, sorted).
async fn describe_log_dirs(client: &mut Client) -> Vec<(String, i16, Vec<String>)> {
    let response = client
        .call(
            &kafka_protocol::messages::DescribeLogDirsRequest::default().with_topics(None),
            4,
        )
        .await;
    assert_eq!(response.error_code, 0);
    response
        .results
        .iter()
        .map(|dir| {
            let mut held: Vec<String> = dir
                .topics
                .iter()
                .flat_map(|t| {
                    let topic = t.name.0.to_string();
                    t.partitions
                        .iter()
                        .map(move |p| format!("{topic}-{}", p.partition_index))
                })
                .collect();
            held.sort();
            (dir.log_dir.to_string(), dir.error_code, held)
        })
        .collect()
}
