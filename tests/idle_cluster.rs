//! An idle replicated cluster stays idle: its controllers exchange heartbeats, not a stream
//! of RPCs. (Each confirmation of the leader's lease moved openraft's metrics, which woke
//! the confirming loop at once: a new round, new connections to every follower, about
//! 4,000 a second per follower and close to two cores of CPU for three idle nodes.)
//!
//! The only test of this binary, so that the process's CPU time is the cluster's own.

use std::time::Duration;

use highwater::testkit::Cluster;

/// User plus system CPU time of this process, in clock ticks (`/proc/self/stat`).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields[n - 3].parse::<u64>().expect("a tick count");
    field(14) + field(15)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn three_idle_nodes_use_a_small_part_of_one_core() {
    let cluster = Cluster::start(3).await.expect("cluster");
    // Past the election, registrations and the first lease confirmations.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = Duration::from_secs(3);
    let before = cpu_ticks();
    tokio::time::sleep(window).await;
    let used = cpu_ticks() - before;
    println!("three idle nodes: {used} ticks of CPU in {window:?}");
    // Ticks are hundredths of a second; a third of one core leaves a debug build on a busy
    // machine room for its heartbeats, and is far below the spin this guards against.
    let limit = window.as_secs() * 100 / 3;
    assert!(
        used < limit,
        "three idle nodes used {used} ticks of CPU in {window:?} (limit {limit})"
    );
    cluster.shutdown().await.expect("clean shutdown");
}
