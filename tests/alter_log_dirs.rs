//! AlterReplicaLogDirs and DescribeLogDirs (issue 13): a replica moves between two of a
//! broker's `log.dirs` while producers keep writing to it, with every acknowledged record,
//! its producer state and its offsets intact, and the move survives a restart.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, DescribeLogDirsRequest, InitProducerIdRequest,
};
use kafka_protocol::protocol::StrBytes;

/// Two log directories, `a` (first: the metadata log and the first replica) and `b`, with
/// small segments so that the replica spans several.
fn dirs_config(root: &Path) -> (PathBuf, PathBuf, String) {
    let (a, b) = (root.join("a"), root.join("b"));
    (
        a.clone(),
        b.clone(),
        format!("{},{}", a.display(), b.display()),
    )
}

const EXTRA: &[(&str, &str)] = &[("log.segment.bytes", "16384")];

/// AlterReplicaLogDirs of one partition to `path`: its error code.
async fn alter(client: &mut Client, topic: &str, partition: i32, path: &Path) -> i16 {
    let request =
        AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
            .with_path(StrBytes::from(path.display().to_string()))
            .with_topics(vec![AlterReplicaLogDirTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![partition])])]);
    let response = client.call(&request, 2).await;
    response.results[0].partitions[0].error_code
}

/// Each directory with the replicas DescribeLogDirs lists in it: (`topic-partition`,
/// whether it is a future replica).
async fn placement(client: &mut Client) -> Vec<(String, Vec<(String, bool)>)> {
    let response = client
        .call(&DescribeLogDirsRequest::default().with_topics(None), 4)
        .await;
    response
        .results
        .iter()
        .map(|dir| {
            let held = dir.topics.iter().flat_map(|t| {
                let topic = t.name.0.to_string();
                let held = t.partitions.iter();
                held.map(move |p| (format!("{topic}-{}", p.partition_index), p.is_future_key))
            });
            (dir.log_dir.to_string(), held.collect())
        })
        .collect()
}

/// Keeps producing 20-record batches to `moved`-0 until `stop`; returns how many were
/// acknowledged (every one must be).
async fn produce_until(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) -> i64 {
    let mut client = Client::connect(addr).await;
    let mut acked = 0;
    while !stop.load(Ordering::Acquire) {
        let answer = produce(&mut client, "moved", 0, batch(20, -1, -1, now_ms())).await;
        assert_eq!(
            answer.error_code, 0,
            "every produce during the move is acknowledged"
        );
        acked += 20;
    }
    acked
}

/// Waits until DescribeLogDirs lists `replica` in the second directory only, not future.
async fn wait_until_in_second_dir(client: &mut Client, replica: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = placement(client).await;
        if now[0].1.is_empty() && now[1].1 == [(replica.to_string(), false)] {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the move did not complete: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Future or replaced logs left in `dir`.
fn leftovers(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("-future") || n.ends_with("-delete"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_moves_to_another_log_dir_under_load_with_every_record_and_its_producers() {
    let root = tempfile::tempdir().expect("tempdir");
    let (a, b, dirs) = dirs_config(root.path());
    let mut extra = EXTRA.to_vec();
    extra.push(("log.dirs", dirs.as_str()));
    let broker = TestBroker::start_in(tempfile::tempdir().expect("tempdir"), &extra).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "moved", 1).await, 0);
    let init = InitProducerIdRequest::default().with_transactional_id(None);
    let producer = client.call(&init, 4).await;
    let pid = producer.producer_id.0;
    // 100 idempotent batches of 10 (several segments), before the move.
    for n in 0..100 {
        let answer = produce(&mut client, "moved", 0, batch(10, pid, n * 10, now_ms())).await;
        assert_eq!(answer.error_code, 0);
    }
    let before = placement(&mut client).await;
    assert_eq!(before[0].1, [("moved-0".to_string(), false)], "{before:?}");
    assert!(before[1].1.is_empty(), "{before:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(produce_until(broker.addr, Arc::clone(&stop)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(alter(&mut client, "moved", 0, &b).await, 0);
    wait_until_in_second_dir(&mut client, "moved-0").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Release);
    let acked_during = load.await.expect("producer");
    assert!(acked_during > 0, "records were written during the move");
    let total = 1000 + acked_during;

    assert!(b.join("moved-0").is_dir() && !a.join("moved-0").exists());
    assert_eq!(
        leftovers(&a) + leftovers(&b),
        0,
        "no future or replaced log left"
    );
    let all = fetch_all(&mut client, "moved", 0).await;
    let offsets: Vec<i64> = all.iter().map(|r| r.0).collect();
    assert_eq!(
        offsets,
        (0..total).collect::<Vec<_>>(),
        "every acknowledged record, in order"
    );
    // The producer state moved with the log: a retry of the last batch is a duplicate.
    let retry = produce(&mut client, "moved", 0, batch(10, pid, 990, now_ms())).await;
    assert_eq!(
        (retry.error_code, retry.base_offset),
        (0, 990),
        "de-duplicated"
    );
    let next = produce(&mut client, "moved", 0, batch(10, pid, 1000, now_ms())).await;
    assert_eq!((next.error_code, next.base_offset), (0, total));

    drop(client);
    let dir = broker.stop().await;
    let broker = TestBroker::start_in(dir, &extra).await;
    let mut client = broker.client().await;
    let after = placement(&mut client).await;
    assert_eq!(
        after[1].1,
        [("moved-0".to_string(), false)],
        "still in b after a restart"
    );
    assert_eq!(
        fetch_all(&mut client, "moved", 0).await.len() as i64,
        total + 10
    );
    // Stopped before `root` (its log.dirs) is deleted: a checkpoint written into a
    // vanished directory fails the metadata log directory, and the process exits.
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn refusals_name_the_missing_dir_or_replica_and_the_current_dir_is_a_no_op() {
    let root = tempfile::tempdir().expect("tempdir");
    let (a, _b, dirs) = dirs_config(root.path());
    let broker = TestBroker::start_in(
        tempfile::tempdir().expect("tempdir"),
        &[("log.dirs", dirs.as_str())],
    )
    .await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "stays", 1).await, 0);
    let elsewhere = root.path().join("not-configured");
    assert_eq!(
        alter(&mut client, "stays", 0, &elsewhere).await,
        ResponseError::LogDirNotFound.code()
    );
    assert_eq!(
        alter(&mut client, "stays", 7, &a).await,
        ResponseError::ReplicaNotAvailable.code()
    );
    assert_eq!(alter(&mut client, "stays", 0, &a).await, 0, "already there");
    let now = placement(&mut client).await;
    assert_eq!(now[0].1, [("stays-0".to_string(), false)], "{now:?}");
    assert!(now[1].1.is_empty(), "{now:?}");
    drop(client);
    broker.stop().await;
}
