//! A full log directory on a follower (issue 11, failure 2; KIP-112): the directory goes
//! offline at the first failed write, its replicas leave their ISRs at once so the high
//! watermark moves again and acks=all produces complete, the broker answers
//! KAFKA_STORAGE_ERROR for them and keeps serving its other directory, and after a restart
//! with room on the disk the replica comes back. Three real processes; node 2's first log
//! directory is a small tmpfs the test mounts (root only, as CI runs).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::cluster_processes::*;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest};

/// A tmpfs mounted for the test's life.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(path: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(path).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status()
            .expect("mount");
        assert!(
            status.success(),
            "mounting a tmpfs needs root (CI runs as root)"
        );
        SmallDisk(path.to_path_buf())
    }

    /// Fills the disk to the last byte.
    fn fill(&self) {
        use std::io::Write;
        let mut file = std::fs::File::create(self.0.join("filler")).expect("filler");
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        while file.write_all(&[0]).is_ok() {}
    }

    fn free(&self) {
        std::fs::remove_file(self.0.join("filler")).expect("remove filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Creates `topic` with one partition on replicas `replicas` (the first leads).
async fn create_assigned(cluster: &Cluster, topic: &str, replicas: &[i32]) {
    let mut client = Client::connect(cluster.addr(1)).await;
    let assignment = CreatableReplicaAssignment::default()
        .with_partition_index(0)
        .with_broker_ids(replicas.iter().copied().map(BrokerId).collect());
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![assignment])])
        .with_timeout_ms(15_000);
    assert_eq!(client.call(&request, 7).await.topics[0].error_code, 0);
}

/// The ISR of `topic`-0 as `node` reports it, once it has a leader.
async fn isr(cluster: &Cluster, node: usize, topic: &str) -> (Vec<i32>, Vec<i32>) {
    let addr = cluster.addr(node);
    eventually(&format!("{topic} led"), || async move {
        let metadata = metadata(addr).await?;
        let found = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
        let p = found.partitions.first().filter(|p| p.leader_id.0 >= 0)?;
        let ids = |v: &Vec<BrokerId>| v.iter().map(|b| b.0).collect::<Vec<i32>>();
        Some((ids(&p.isr_nodes), ids(&p.offline_replicas)))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_whose_disk_fills_up_leaves_the_isr_at_once_and_serves_its_other_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = SmallDisk::mount(&dir.path().join("small"), "2m");
    let node2 = dir.path().join("node-2");
    let node2_dirs = format!("log.dirs={},{}", small.0.display(), node2.display());
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
    // Node 2 places its first replica on the small disk and its second on the other dir.
    create_assigned(&cluster, "full", &[1, 2, 3]).await;
    eventually("full-0 on the small disk", || async {
        small.0.join("full-0").is_dir().then_some(())
    })
    .await;
    create_assigned(&cluster, "other", &[1, 2, 3]).await;
    eventually("other-0 on node 2's other dir", || async {
        node2.join("other-0").is_dir().then_some(())
    })
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
    drop(node2_client);

    // A restart with room on the disk brings the replica back into the ISR.
    let mut cluster = cluster;
    cluster.kill(2);
    small.free();
    cluster.spawn(2);
    eventually("node 2 back in the ISR of full", || async {
        let (isr, offline) = isr(&cluster, 1, "full").await;
        (isr.contains(&2) && offline.is_empty()).then_some(())
    })
    .await;
    let end = produce(&mut leader, "full", 0, batch(1, -1, -1, now_ms())).await;
    assert_eq!(end.error_code, 0);
    assert_eq!(end.base_offset, 210, "every acknowledged record is there");
}
