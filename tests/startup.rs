//! Start-up time with many partitions and much data (issue #3's measurement), after a
//! clean and after an unclean shutdown. Not part of `make test` (ignored): it writes
//! gigabytes. Run it with
//! `HW_PARTITIONS=1000 HW_MB_PER_PARTITION=10 cargo test --release --test startup -- --ignored --nocapture`.

mod common;

use std::sync::Arc;
use std::time::Instant;

use highwater::api::Broker;
use highwater::controller::NewTopic;
use highwater::ids::Offset;

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
    let broker = open_with_load_topic(&runtime, &config, partitions);
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
                partition.offsets().log_end_offset.0,
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

/// Opens a broker on `config` and creates the topic "load" of `partitions` partitions.
fn open_with_load_topic(
    runtime: &tokio::runtime::Runtime,
    config: &Arc<highwater::config::BrokerConfig>,
    partitions: i32,
) -> Broker {
    let broker = runtime
        .block_on(Broker::open(Arc::clone(config)))
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
    broker
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
            .read(Offset(offset), Offset(end), 1 << 20, true)
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

/// Producers per partition in [`start_up_with_producers_in_the_log`].
const PRODUCERS: usize = 10;

/// Batch `n` of a partition: producer `n % PRODUCERS`'s `(n / PRODUCERS)`-th, 160 records.
fn producer_batch(n: usize) -> bytes::Bytes {
    let sequence = (n / PRODUCERS * 160) as i32;
    common::batch(160, (n % PRODUCERS) as i64 + 1, sequence, common::now_ms())
}

/// Goal: report what producer state costs a restart (issue 12's benchmark): the open time
/// and the time until every partition has taken one more idempotent batch (which needs
/// each producer's last sequence), after a clean and after an unclean stop. Asserts the
/// batch is accepted in sequence everywhere. Run it with
/// `HW_PARTITIONS=1000 HW_MB_PER_PARTITION=2 cargo test --release --test startup
/// start_up_with_producers -- --ignored --nocapture` (`HW_DROP_CACHES=1`, as root: every
/// restart starts with a cold page cache).
#[test]
#[ignore]
fn start_up_with_producers_in_the_log() {
    let partitions = env("HW_PARTITIONS", 1000) as i32;
    let megabytes = env("HW_MB_PER_PARTITION", 2);
    let dir = tempfile::tempdir_in(std::env::var("HW_DATA_DIR").unwrap_or_else(|_| "/tmp".into()))
        .expect("tempdir");
    let config = common::config(dir.path(), &[]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let size = common::batch(160, 1, 0, common::now_ms()).len();
    let count = megabytes * 1024 * 1024 / size;
    let batches: Vec<bytes::Bytes> = (0..count).map(producer_batch).collect();
    let broker = open_with_load_topic(&runtime, &config, partitions);
    for p in 0..partitions {
        let partition = broker.replicas.partition("load", p).expect("partition");
        for batch in &batches {
            partition.append_as_leader(batch).expect("append");
        }
    }
    let total_gb = (partitions as usize * count * size) as f64 / 1e9;
    println!("{total_gb:.2} GB, {count} batches of {PRODUCERS} producers per partition");
    let mut next_batch = count;
    let mut restart = |clean: bool, broker: Broker| {
        let epoch = broker.controller.broker_epoch();
        broker.replicas.shutdown(epoch).expect("clean shutdown");
        stop(&runtime, broker);
        if !clean {
            std::fs::remove_file(dir.path().join(".kafka_cleanshutdown")).expect("marker");
        }
        let _ = std::process::Command::new("sync").status();
        if std::env::var_os("HW_DROP_CACHES").is_some() {
            // A cold start, as after a reboot (root only).
            std::fs::write("/proc/sys/vm/drop_caches", "3").expect("drop caches");
        }
        let started = Instant::now();
        let broker = runtime
            .block_on(Broker::open(Arc::clone(&config)))
            .expect("reopen");
        let opened = started.elapsed();
        let batch = producer_batch(next_batch);
        next_batch += 1;
        for p in 0..partitions {
            let partition = broker.replicas.partition("load", p).expect("partition");
            let appended = partition.append_as_leader(&batch).expect("in sequence");
            assert!(!appended.duplicate, "partition {p}");
        }
        let kind = if clean { "clean" } else { "unclean" };
        println!(
            "{kind} restart: open {opened:?}, every partition took its next batch after {:?}",
            started.elapsed()
        );
        broker
    };
    let broker = restart(true, broker);
    let broker = restart(false, broker);
    let broker = restart(true, broker);
    stop(&runtime, broker);
}
