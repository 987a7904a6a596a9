//! Issue #3's multi-process crash test: the real binary is killed with SIGKILL 20 times at
//! random moments (each while a produce request is in flight) while a producer writes with
//! acks=1, and restarted on the same data dir and port each time. After every restart (and
//! a final clean stop) `dump --verify` passes on every segment and index file, and every
//! acknowledged record is stored exactly once, at its acknowledged offset, in order; a
//! record that was sent but not acknowledged may be missing, but never duplicated,
//! reordered or split from its batch.
//!
//! A failing run prints its seed; `HIGHWATER_CRASH_SEED=<seed>` replays the same choices
//! (the kill moments relative to the producer still depend on timing).
//! `HIGHWATER_CRASH_LOG=1` shows the broker's log.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::counter_log::{check_log, SentBatch};
use common::seeded_rng::{seed_from_env, Rng};
use common::*;
use highwater::dump::{self, FileReport};
use highwater::testkit::ports::free_port;
use kafka_protocol::messages::ApiVersionsRequest;

/// How many times the broker is killed.
const KILLS: usize = 20;
/// How long the broker runs before each kill: a uniform draw in this range.
const LIFE_MS_MIN: u64 = 200;
const LIFE_MS_MAX: u64 = 600;
/// Records per produced batch: 1 to this many.
const RECORDS_PER_BATCH_MAX: u64 = 10;
/// A pause between batches (about a millisecond with tokio's timer), so that the log,
/// and with it the restart and check after each kill, stays small.
const PRODUCE_PAUSE: Duration = Duration::from_micros(500);
/// How long a kill waits for a produce request to be in flight.
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(100);
/// Once a request is in flight, the kill waits up to this many microseconds.
const KILL_DELAY_US_MAX: u64 = 400;
/// How long a (re)start may take before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(20);
const TOPIC: &str = "crash";

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.expect("clock after 1970").as_millis() as i64
}

/// Starts the binary with small segments and dense, small indexes, so that the run rolls
/// many segments and kills land during rolls too.
fn spawn(dir: &Path, port: u16) -> Child {
    let log = match std::env::var_os("HIGHWATER_CRASH_LOG") {
        Some(_) => Stdio::inherit(),
        None => Stdio::null(),
    };
    Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args([
            "serve",
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/config/server.toml"),
        ])
        .args(["--listeners", &format!("127.0.0.1:{port}")])
        .args(["--log-dirs", &dir.display().to_string()])
        .args(["--set", "http.listeners="])
        .args(["--set", "log.segment.bytes=32768"])
        .args(["--set", "log.index.interval.bytes=512"])
        .args(["--set", "log.index.size.max.bytes=4096"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn highwater")
}

/// A client of a broker that has finished opening its logs: requests are answered only
/// once every partition is open (and recovered).
async fn wait_ready(port: u16) -> Client {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(mut client) = Client::try_connect(addr).await {
            if client
                .try_call(&ApiVersionsRequest::default(), 0)
                .await
                .is_some()
            {
                return client;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the broker did not answer in time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (briefly) until a produce request is on its way or being served, so that the kill
/// lands while the broker may be appending.
async fn wait_for_request_in_flight(in_flight: &AtomicBool) {
    let deadline = Instant::now() + IN_FLIGHT_WAIT;
    while !in_flight.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
}

/// What a producer did during one life of the broker.
struct Life {
    sent: Vec<SentBatch>,
    next: u64,
    errors: usize,
}

/// Produces batches (acks=1) of counters `next, next + 1, ...` until the connection dies.
/// `in_flight` is set while a request awaits its response, so that kills can aim at it.
async fn produce_until_killed(
    mut client: Client,
    mut next: u64,
    mut rng: Rng,
    in_flight: Arc<AtomicBool>,
) -> Life {
    let (mut sent, mut errors) = (Vec::new(), 0);
    loop {
        let count = rng.between(1, RECORDS_PER_BATCH_MAX);
        let values: Vec<String> = (next..next + count).map(|c| format!("{c:012}")).collect();
        let request = produce_request(TOPIC, 0, batch_of_values(&values, now_ms()), 1);
        let mut batch = SentBatch {
            first: next,
            count,
            acked_at: None,
        };
        next += count;
        in_flight.store(true, Ordering::SeqCst);
        let response = client.try_call(&request, 9).await;
        in_flight.store(false, Ordering::SeqCst);
        let Some(response) = response else {
            sent.push(batch);
            return Life { sent, next, errors };
        };
        let partition = &response.responses[0].partition_responses[0];
        if partition.error_code == 0 {
            batch.acked_at = Some(partition.base_offset);
        } else {
            errors += 1;
        }
        sent.push(batch);
        tokio::time::sleep(PRODUCE_PAUSE).await;
    }
}

fn failures<'a>(reports: impl IntoIterator<Item = &'a FileReport>) -> Vec<String> {
    reports
        .into_iter()
        .filter(|r| !r.passed())
        .map(|r| format!("{}: {:?}", r.path.display(), r.problems))
        .collect()
}

/// `dump --verify` of every file of the partition must pass.
fn assert_files_verify(dir: &Path, when: &str, seed: u64) {
    let reports = dump::verify_partition_dir(dir).expect("dump reads every file");
    let failed = failures(&reports);
    assert!(
        failed.is_empty(),
        "dump --verify {when} (seed {seed}):\n{}",
        failed.join("\n")
    );
}

/// The files as the kill left them, before recovery: the dump must read them, and only the
/// newest segment (the one being written) may be damaged. Returns whether it was.
fn check_crash_image(dir: &Path, kill: usize, seed: u64) -> bool {
    let reports = dump::verify_partition_dir(dir).expect("dump reads a crash image");
    let newest = reports.iter().map(|r| r.base_offset).max();
    let older_failed = failures(reports.iter().filter(|r| Some(r.base_offset) != newest));
    assert!(
        older_failed.is_empty(),
        "kill {kill} damaged a sealed segment (seed {seed}):\n{}",
        older_failed.join("\n")
    );
    reports.iter().any(|r| !r.passed())
}

#[tokio::test]
async fn acknowledged_records_survive_twenty_kill_9s() {
    // Goal: acks=1 data is never lost, duplicated or reordered by kill -9 and recovery,
    // and the files stay consistent. Method: real process, random kills, full check of the
    // log and of every file after each restart.
    let seed = seed_from_env("HIGHWATER_CRASH_SEED");
    println!("crash loop seed {seed} (replay: HIGHWATER_CRASH_SEED={seed})");
    let mut rng = Rng(seed);
    let data = tempfile::tempdir().expect("tempdir");
    let partition_dir = data.path().join(format!("{TOPIC}-0"));
    let port = free_port();
    let started = Instant::now();
    let mut child = spawn(data.path(), port);
    let mut client = wait_ready(port).await;
    assert_eq!(create_topic(&mut client, TOPIC, 1).await, 0);
    let (mut sent, mut next, mut errors, mut damaged_images) = (Vec::new(), 0, 0, 0);
    let mut unacked_stored = 0;
    for kill in 1..=KILLS {
        let in_flight = Arc::new(AtomicBool::new(false));
        let producer = tokio::spawn(produce_until_killed(
            client,
            next,
            Rng(rng.next()),
            Arc::clone(&in_flight),
        ));
        let life_ms = rng.between(LIFE_MS_MIN, LIFE_MS_MAX);
        tokio::time::sleep(Duration::from_millis(life_ms)).await;
        wait_for_request_in_flight(&in_flight).await;
        // A blocking pause: the producer only awaits the response, the broker is another
        // process. Spread over a produce's round trip, it lands before, during or after the
        // append.
        std::thread::sleep(Duration::from_micros(rng.between(0, KILL_DELAY_US_MAX)));
        child.kill().expect("kill -9");
        child.wait().expect("reap");
        let life = tokio::time::timeout(Duration::from_secs(15), producer)
            .await
            .expect("the producer notices the kill")
            .expect("producer task");
        (next, errors) = (life.next, errors + life.errors);
        sent.extend(life.sent);
        damaged_images += usize::from(check_crash_image(&partition_dir, kill, seed));

        child = spawn(data.path(), port);
        client = wait_ready(port).await;
        assert_files_verify(&partition_dir, &format!("after restart {kill}"), seed);
        let log = fetch_all(&mut client, TOPIC, 0).await;
        unacked_stored = check_log(&sent, &log)
            .unwrap_or_else(|e| panic!("after restart {kill} (seed {seed}): {e}"));
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(status.success());
    assert!(child.wait().expect("wait").success(), "SIGTERM exits 0");
    assert_files_verify(&partition_dir, "after the final clean stop", seed);

    let acked = sent.iter().filter(|b| b.acked_at.is_some()).count();
    println!(
        "{KILLS} kills in {:.1}s: {} batches sent, {acked} acknowledged, {unacked_stored} \
         stored without acknowledgement, {errors} error responses, {damaged_images} crash \
         images with a damaged active segment",
        started.elapsed().as_secs_f64(),
        sent.len(),
    );
    assert!(acked > KILLS, "the producer made progress between kills");
}

#[test]
fn check_log_catches_lost_moved_duplicated_and_split_batches() {
    // Goal: the checker itself can fail. Method: hand-made logs against one sent history.
    let sent = [
        SentBatch {
            first: 0,
            count: 2,
            acked_at: Some(0),
        },
        SentBatch {
            first: 2,
            count: 2,
            acked_at: None,
        },
        SentBatch {
            first: 4,
            count: 1,
            acked_at: Some(2),
        },
    ];
    let log = |entries: &[(i64, u64)]| -> Vec<(i64, String, String)> {
        entries
            .iter()
            .map(|(o, c)| (*o, String::new(), format!("{c:012}")))
            .collect()
    };
    assert_eq!(check_log(&sent, &log(&[(0, 0), (1, 1), (2, 4)])), Ok(0));
    assert_eq!(
        check_log(&sent[..2], &log(&[(0, 0), (1, 1), (2, 2), (3, 3)])),
        Ok(1)
    );
    let bad = [
        log(&[(0, 0), (1, 1)]),                         // acknowledged batch lost
        log(&[(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]), // acknowledged at 2, stored at 4
        log(&[(0, 0), (1, 1), (2, 1), (3, 4)]),         // duplicate
        log(&[(0, 0), (1, 1), (2, 2), (3, 4)]),         // unacknowledged batch split
        log(&[(0, 0), (1, 1), (3, 4)]),                 // offset gap
    ];
    for (n, entries) in bad.iter().enumerate() {
        assert!(check_log(&sent, entries).is_err(), "case {n} must fail");
    }
}
