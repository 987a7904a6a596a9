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

/// Appends `batches` copies of `batch` to every partition of "load", then closes the logs
/// cleanly (the marker names this registration's epoch).
fn fill_and_close(broker: &Broker, partitions: i32, batches: usize, batch: &bytes::Bytes) {
    for p in 0..partitions {
        let partition = broker.replicas.partition("load", p).expect("partition");
        for _ in 0..batches {
            partition.append_as_leader(batch).expect("append");
        }
    }
    let epoch = broker.controller.broker_epoch();
    broker.replicas.shutdown(epoch).expect("clean shutdown");
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
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let batch = common::batch(160, -1, -1, common::now_ms());
    let batches = megabytes * 1024 * 1024 / batch.len();
    let started = Instant::now();
    let broker = runtime
        .block_on(Broker::open(Arc::clone(&config)))
        .expect("open");
    let topic = NewTopic {
        name: "load".into(),
        partitions,
        replication_factor: 1,
        assignments: vec![],
        configs: Default::default(),
    };
    let created = runtime.block_on(broker.controller.create_topic(&topic, false));
    created.expect("topic");
    broker.publish().expect("publish");
    fill_and_close(&broker, partitions, batches, &batch);
    let expected_end = (batches * 160) as i64;
    stop(&runtime, broker);
    let total_gb = (partitions as usize * batches * batch.len()) as f64 / 1e9;
    let through_log = started.elapsed();
    println!("wrote {total_gb:.2} GB in {partitions} partitions in {through_log:?}");
    let plain = plain_writes(dir.path(), partitions, batches, &batch);
    println!(
        "append through the log {:.0} MB/s; plain write(2)+fsync of the same bytes {:.0} MB/s",
        total_gb * 1e3 / through_log.as_secs_f64(),
        total_gb * 1e3 / plain.as_secs_f64()
    );

    // Let writeback finish so that it does not slow the measured opens.
    let _ = std::process::Command::new("sync").status();
    let started = Instant::now();
    let broker = runtime
        .block_on(Broker::open(Arc::clone(&config)))
        .expect("clean open");
    println!("clean start: {:?}", started.elapsed());
    random_reads(&broker, partitions, expected_end);
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
    stop(&runtime, broker);

    std::fs::remove_file(dir.path().join(".kafka_cleanshutdown")).ok();
    let started = Instant::now();
    let broker = runtime
        .block_on(Broker::open(Arc::clone(&config)))
        .expect("unclean open");
    let elapsed = started.elapsed();
    println!(
        "unclean start (every active segment re-scanned): {elapsed:?} = {:.2} s/GB",
        elapsed.as_secs_f64() / total_gb
    );
    check(&broker);
}

/// Stops the broker's metadata quorum and drops it, so the directory can be opened again.
fn stop(runtime: &tokio::runtime::Runtime, broker: Broker) {
    runtime.block_on(broker.controller.shutdown());
}

/// The same bytes written with write(2) into one file per partition, then fsynced.
fn plain_writes(
    dir: &std::path::Path,
    partitions: i32,
    batches: usize,
    batch: &[u8],
) -> std::time::Duration {
    use std::io::Write;
    let started = Instant::now();
    for p in 0..partitions {
        let path = dir.join(format!("plain-{p}"));
        let mut file = std::fs::File::create(&path).expect("create");
        for _ in 0..batches {
            file.write_all(batch).expect("write");
        }
        file.sync_all().expect("fsync");
    }
    let elapsed = started.elapsed();
    for p in 0..partitions {
        std::fs::remove_file(dir.join(format!("plain-{p}"))).ok();
    }
    elapsed
}

/// Latency of reads at random offsets of random partitions (one index lookup, a short
/// scan, zero-copy bytes), as a consumer seeking would cause.
fn random_reads(broker: &Broker, partitions: i32, end: i64) {
    const READS: usize = 20_000;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let mut micros: Vec<f64> = Vec::with_capacity(READS);
    for _ in 0..READS {
        let p = (next() % partitions as u64) as i32;
        let offset = (next() % end as u64) as i64;
        let partition = broker.replicas.partition("load", p).expect("partition");
        let started = Instant::now();
        let bytes = partition
            .log()
            .read(offset, end, 1 << 20, true)
            .expect("read");
        micros.push(started.elapsed().as_secs_f64() * 1e6);
        assert!(!bytes.is_empty());
    }
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() as f64 - 1.0) * q) as usize];
    println!(
        "random-offset read: p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs ({READS} reads)",
        at(0.5),
        at(0.99),
        at(0.999)
    );
}
