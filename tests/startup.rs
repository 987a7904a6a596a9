//! Start-up time with many partitions and much data (issue #3's measurement), after a
//! clean and after an unclean shutdown. Not part of `make test` (ignored): it writes
//! gigabytes. Run it with
//! `HW_PARTITIONS=1000 HW_MB_PER_PARTITION=10 cargo test --release --test startup -- --ignored --nocapture`.

mod common;

use std::sync::Arc;
use std::time::Instant;

use highwater::api::Broker;
use highwater::controller::NewTopic;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore]
fn start_up_time_with_many_partitions_clean_and_unclean() {
    // Goal: report open times; assert every partition comes back with all its data.
    let partitions = env("HW_PARTITIONS", 1000) as i32;
    let megabytes = env("HW_MB_PER_PARTITION", 10);
    let dir = tempfile::tempdir_in(std::env::var("HW_DATA_DIR").unwrap_or_else(|_| "/tmp".into()))
        .expect("tempdir");
    let config = common::config(dir.path(), &[]);
    let batch = common::batch(160, -1, -1, common::now_ms());
    let batches = megabytes * 1024 * 1024 / batch.len();
    let started = Instant::now();
    let broker = Broker::open(Arc::clone(&config)).expect("open");
    let topic = NewTopic {
        name: "load".into(),
        partitions,
        replication_factor: 1,
        assignments: vec![],
        configs: Default::default(),
    };
    broker
        .controller
        .create_topic(&topic, false)
        .expect("topic");
    broker.publish().expect("publish");
    for p in 0..partitions {
        let partition = broker.replicas.partition("load", p).expect("partition");
        for _ in 0..batches {
            partition.append_as_leader(&batch).expect("append");
        }
    }
    let expected_end = (batches * 160) as i64;
    broker.replicas.shutdown().expect("clean shutdown");
    drop(broker);
    let total_gb = (partitions as usize * batches * batch.len()) as f64 / 1e9;
    println!(
        "wrote {total_gb:.2} GB in {partitions} partitions in {:?}",
        started.elapsed()
    );

    // Let writeback finish so that it does not slow the measured opens.
    let _ = std::process::Command::new("sync").status();
    let started = Instant::now();
    let broker = Broker::open(Arc::clone(&config)).expect("clean open");
    println!("clean start: {:?}", started.elapsed());
    let check = |broker: &Broker| {
        for p in 0..partitions {
            let partition = broker.replicas.partition("load", p).expect("partition");
            assert_eq!(
                partition.offsets().log_end_offset,
                expected_end,
                "partition {p}"
            );
        }
    };
    check(&broker);
    drop(broker);

    std::fs::remove_file(dir.path().join(".kafka_cleanshutdown")).ok();
    let started = Instant::now();
    let broker = Broker::open(Arc::clone(&config)).expect("unclean open");
    let elapsed = started.elapsed();
    println!(
        "unclean start (every active segment re-scanned): {elapsed:?} = {:.2} s/GB",
        elapsed.as_secs_f64() / total_gb
    );
    check(&broker);
}
