//! The two failures of the seed documents (KIP-101), step by step in a simulated cluster:
//! (1) a restarted follower truncating to a stale high watermark while the leader dies
//! loses an acknowledged record; (2) after both replicas crash and the shorter log leads,
//! the other replica keeps a record the new leader never had and the logs diverge.
//! With leader epochs neither happens. With the test-only pre-KIP-101 rule switched on,
//! the same steps lose the record and diverge: the tests catch the bug they guard against.

mod common;

use bytes::Bytes;
use common::sim::SimCluster;
use highwater::ids::{BrokerId, LeaderEpoch, Offset};
use highwater::metadata::PartitionImage;
use highwater::replica::roles::broker_ids;
use kafka_protocol::records::RecordBatchDecoder;

const A: i32 = 1;
const B: i32 = 2;

fn record_batch(value: &str) -> Bytes {
    common::batch_of_values(&[value.to_string()], common::now_ms())
}

fn produce(cluster: &SimCluster, leader: i32, value: &str) -> i64 {
    let info = cluster
        .partition(leader)
        .append_as_leader(&record_batch(value))
        .expect("append");
    info.base_offset.0
}

/// The values in broker `id`'s log, in offset order.
fn values(cluster: &SimCluster, id: i32) -> Vec<String> {
    let partition = cluster.partition(id);
    let log = partition.log();
    let mut bytes = log
        .read(Offset(0), log.log_end_offset(), 1 << 20, true)
        .expect("read");
    let sets = RecordBatchDecoder::decode_all(&mut bytes).expect("decode");
    sets.into_iter()
        .flat_map(|s| s.records)
        .map(|r| String::from_utf8_lossy(&r.value.unwrap_or_default()).into_owned())
        .collect()
}

fn replicate_between(cluster: &SimCluster, leader: i32, follower: i32, epoch: i32) {
    let both = broker_ids(&[leader, follower]);
    cluster
        .partition(leader)
        .make_leader(BrokerId(leader), LeaderEpoch(epoch), 0, both.clone(), both)
        .expect("leader");
    cluster
        .partition(follower)
        .make_follower(BrokerId(leader), LeaderEpoch(epoch), 0)
        .expect("follower");
}

/// A leads B at epoch 0 and both hold `first`.
async fn in_sync_with(first: &str) -> SimCluster {
    let cluster = SimCluster::new(&[A, B]).await;
    replicate_between(&cluster, A, B, 0);
    produce(&cluster, A, first);
    cluster.catch_up(B, A).await;
    cluster
}

/// Scenario 1; returns the new leader's values.
async fn follower_restarts_then_leader_dies(pre_kip_101: bool) -> Vec<String> {
    let mut cluster = in_sync_with("m1").await;
    produce(&cluster, A, "m2");
    cluster.fetch(B, A).await.expect("B gets m2");
    // B's next fetch tells A that B has m2: A's high watermark passes m2, so an acks=all
    // produce of m2 is answered. The response (with the new high watermark) never reaches B.
    cluster.lose_next_response(B);
    assert!(cluster.fetch(B, A).await.is_err());
    assert_eq!(
        cluster.partition(A).high_watermark(),
        Offset(2),
        "m2 is acknowledged"
    );
    assert_eq!(
        cluster.partition(B).high_watermark(),
        Offset(1),
        "B has not heard"
    );
    cluster.checkpoint(B);
    cluster.crash(B);
    cluster.start(B, A).await;
    cluster
        .partition(B)
        .set_truncate_to_high_watermark(pre_kip_101);
    cluster
        .partition(B)
        .make_follower(BrokerId(A), LeaderEpoch(0), 0)
        .expect("follower");
    // A dies before B fetches again; B is elected with a new epoch.
    cluster.crash(A);
    cluster
        .partition(B)
        .make_leader(
            BrokerId(B),
            LeaderEpoch(1),
            1,
            vec![BrokerId(A), BrokerId(B)],
            vec![BrokerId(B)],
        )
        .expect("leader");
    values(&cluster, B)
}

#[tokio::test]
async fn an_acknowledged_record_survives_a_follower_restart_and_a_leader_failure() {
    let values = follower_restarts_then_leader_dies(false).await;
    assert_eq!(values, ["m1", "m2"]);
}

#[tokio::test]
async fn truncating_to_the_high_watermark_would_lose_the_acknowledged_record() {
    let values = follower_restarts_then_leader_dies(true).await;
    assert_eq!(
        values,
        ["m1"],
        "the pre-KIP-101 rule loses m2: the test above can fail"
    );
}

/// Scenario 2; returns both replicas' values after they settle.
async fn both_crash_and_the_shorter_log_leads(pre_kip_101: bool) -> (Vec<String>, Vec<String>) {
    let mut cluster = in_sync_with("m1").await;
    let m1_bytes = cluster
        .partition(B)
        .log()
        .read(Offset(0), Offset(1), 1 << 20, true)
        .expect("read")
        .len();
    produce(&cluster, A, "m2");
    cluster.catch_up(B, A).await;
    assert_eq!(cluster.partition(A).high_watermark(), Offset(2));
    assert_eq!(cluster.partition(B).high_watermark(), Offset(2));
    cluster.checkpoint(A);
    cluster.checkpoint(B);
    // A power failure: both go down and B loses m2, which it had not flushed.
    cluster.crash(A);
    cluster.crash(B);
    cluster.lose_unflushed(B, m1_bytes as u64);
    cluster.start(B, B).await;
    cluster
        .partition(B)
        .make_leader(
            BrokerId(B),
            LeaderEpoch(1),
            1,
            vec![BrokerId(A), BrokerId(B)],
            vec![BrokerId(B)],
        )
        .expect("leader");
    produce(&cluster, B, "m3");
    cluster.start(A, B).await;
    cluster
        .partition(A)
        .set_truncate_to_high_watermark(pre_kip_101);
    cluster
        .partition(A)
        .make_follower(BrokerId(B), LeaderEpoch(1), 1)
        .expect("follower");
    cluster.catch_up(A, B).await;
    (values(&cluster, A), values(&cluster, B))
}

#[tokio::test]
async fn replicas_converge_after_the_shorter_log_becomes_leader() {
    let (a, b) = both_crash_and_the_shorter_log_leads(false).await;
    assert_eq!(b, ["m1", "m3"]);
    assert_eq!(a, b, "the returning replica truncates m2 and takes m3");
}

#[tokio::test]
async fn truncating_to_the_high_watermark_would_leave_the_replicas_diverged() {
    let (a, b) = both_crash_and_the_shorter_log_leads(true).await;
    assert_eq!(b, ["m1", "m3"]);
    assert_eq!(
        a,
        ["m1", "m2"],
        "the pre-KIP-101 rule keeps m2 where the leader has m3"
    );
}

#[tokio::test]
async fn a_follower_far_behind_converges_across_several_leader_changes() {
    // KIP-279: A leads epoch 0 (m0, m1; B gets m0), B leads epoch 1 alone (b1), A leads
    // epoch 2 without having followed B (a2). B then follows A: its epoch 1 is unknown to
    // A, which answers with the end of epoch 0; B truncates b1 and takes m1 and a2.
    let mut cluster = in_sync_with("m0").await;
    produce(&cluster, A, "m1");
    cluster.crash(A);
    cluster
        .partition(B)
        .make_leader(
            BrokerId(B),
            LeaderEpoch(1),
            1,
            vec![BrokerId(A), BrokerId(B)],
            vec![BrokerId(B)],
        )
        .expect("leader");
    produce(&cluster, B, "b1");
    cluster.crash(B);
    cluster.start(A, A).await;
    cluster
        .partition(A)
        .make_leader(
            BrokerId(A),
            LeaderEpoch(2),
            2,
            vec![BrokerId(A), BrokerId(B)],
            broker_ids(&[A]),
        )
        .expect("leader");
    produce(&cluster, A, "a2");
    cluster.start(B, A).await;
    cluster
        .partition(B)
        .make_follower(BrokerId(A), LeaderEpoch(2), 2)
        .expect("follower");
    cluster.catch_up(B, A).await;
    assert_eq!(values(&cluster, A), ["m0", "m1", "a2"]);
    assert_eq!(values(&cluster, B), values(&cluster, A));
    let epochs = |id| cluster.partition(id).log().epoch_cache().entries().to_vec();
    assert_eq!(epochs(B), epochs(A), "the epoch caches agree too");
}

fn produce_request(value: &str, acks: i16) -> kafka_protocol::messages::ProduceRequest {
    common::produce_request("t", 0, record_batch(value), acks).with_timeout_ms(2_000)
}

#[tokio::test]
async fn acks_all_is_answered_once_the_follower_has_the_batch() {
    let cluster = std::sync::Arc::new(SimCluster::new(&[A, B]).await);
    replicate_between(&cluster, A, B, 0);
    let producing = {
        let cluster = std::sync::Arc::clone(&cluster);
        tokio::spawn(async move { cluster.call(A, &produce_request("m0", -1), 9).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!producing.is_finished(), "acks=all waits for the follower");
    cluster.catch_up(B, A).await;
    let response = producing.await.expect("task");
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!((partition.error_code, partition.base_offset), (0, 0));
}

#[tokio::test]
async fn acks_all_times_out_without_the_follower_and_min_insync_refuses_a_lone_leader() {
    let cluster = SimCluster::with_config(&[A, B], &[("min.insync.replicas", "2")]).await;
    replicate_between(&cluster, A, B, 0);
    let response = cluster.call(A, &produce_request("m0", -1), 9).await;
    let code = response.responses[0].partition_responses[0].error_code;
    assert_eq!(
        code,
        kafka_protocol::error::ResponseError::RequestTimedOut.code()
    );
    // The ISR shrinks to the leader alone: acks=all is refused before anything is
    // written, while acks=1 still goes through.
    let leader = cluster.partition(A);
    let mut shrunk = PartitionImage::new(vec![A, B]);
    shrunk.isr = vec![A];
    let now = {
        let state = leader.state();
        (state.leader_epoch, state.partition_epoch)
    };
    (shrunk.leader_epoch, shrunk.partition_epoch) = (now.0 .0, now.1 + 1);
    leader.complete_isr_change(now, Some(&shrunk));
    let refused = cluster.call(A, &produce_request("m1", -1), 9).await;
    let code = refused.responses[0].partition_responses[0].error_code;
    assert_eq!(
        code,
        kafka_protocol::error::ResponseError::NotEnoughReplicas.code()
    );
    let one = cluster.call(A, &produce_request("m2", 1), 9).await;
    assert_eq!(one.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(values(&cluster, A), ["m0", "m2"]);
}

/// Appends 200 values `{prefix}{i}` in batches of 50 on `leader`.
fn append_values(cluster: &SimCluster, leader: i32, prefix: &str) {
    let values: Vec<String> = (0..200).map(|i| format!("{prefix}{i}")).collect();
    for chunk in values.chunks(50) {
        cluster
            .partition(leader)
            .append_as_leader(&common::batch_of_values(chunk, common::now_ms()))
            .expect("append");
    }
}

/// Makes `id` the leader at `epoch` (also its partition epoch) of `replicas` with `isr`.
fn lead(cluster: &SimCluster, id: i32, epoch: i32, (replicas, isr): (&[i32], &[i32])) {
    cluster
        .partition(id)
        .make_leader(
            BrokerId(id),
            LeaderEpoch(epoch),
            epoch,
            broker_ids(replicas),
            broker_ids(isr),
        )
        .expect("leader");
}

/// Makes `id` a follower of `leader` at `epoch` (also its partition epoch).
fn follow(cluster: &SimCluster, id: i32, leader: i32, epoch: i32) {
    cluster
        .partition(id)
        .make_follower(BrokerId(leader), LeaderEpoch(epoch), epoch)
        .expect("follower");
}

#[tokio::test]
async fn a_follower_rejoins_after_an_epoch_it_led_without_appending() {
    // Issue 11, failure 1: L leads epoch 0 (200 records); L dies and B leads epoch 1
    // without appending; L returns and leads epoch 2 (B cut off, then following L) with
    // `1 200` at B's log end. B must forget that empty epoch and catch up instead of
    // truncating to its own log end for ever (catch_up panics if it does not settle).
    const L: i32 = 1;
    const C: i32 = 3;
    let all = vec![L, B, C];
    let mut cluster = SimCluster::new(&all).await;
    lead(&cluster, L, 0, (&all, &all));
    for id in [B, C] {
        follow(&cluster, id, L, 0);
    }
    append_values(&cluster, L, "a");
    cluster.catch_up(B, L).await;
    cluster.catch_up(C, L).await;
    cluster.crash(L);
    lead(&cluster, B, 1, (&all, &[B, C]));
    follow(&cluster, C, B, 1);
    cluster.start(L, B).await;
    lead(&cluster, L, 2, (&all, &[L, C]));
    follow(&cluster, C, L, 2);
    follow(&cluster, B, L, 2);
    assert_eq!(
        cluster.partition(B).log().epoch_cache().latest_epoch(),
        Some(LeaderEpoch(1)),
        "B's empty epoch is still at its log end"
    );
    append_values(&cluster, L, "b");
    cluster.catch_up(B, L).await;
    cluster.catch_up(C, L).await;
    assert_eq!(cluster.partition(B).log().log_end_offset(), Offset(400));
    assert_eq!(values(&cluster, B), values(&cluster, L));
    let epochs = |id| cluster.partition(id).log().epoch_cache().entries().to_vec();
    assert_eq!(
        epochs(B),
        epochs(L),
        "B forgot the epoch it led without records"
    );
}

#[tokio::test]
async fn a_deposed_leader_never_appends_after_the_role_change() {
    // Issue 11, item 3: appends race a leader change. Method: two threads append as fast
    // as they can while the main thread makes the leader a follower; the log end offset
    // seen right after the change must be the final one (no append at the old epoch lands
    // later), over many rounds.
    let cluster = SimCluster::new(&[A, B]).await;
    let partition = cluster.partition(A);
    let both = broker_ids(&[A, B]);
    for round in 0..200 {
        let epoch = 2 * round;
        partition
            .make_leader(
                BrokerId(A),
                LeaderEpoch(epoch),
                epoch,
                both.clone(),
                broker_ids(&[A]),
            )
            .expect("leader");
        let appenders: Vec<_> = (0..2)
            .map(|_| {
                let partition = std::sync::Arc::clone(&partition);
                std::thread::spawn(move || {
                    let batch = record_batch("x");
                    while partition.append_as_leader(&batch).is_ok() {}
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_micros(200));
        partition
            .make_follower(BrokerId(B), LeaderEpoch(epoch + 1), epoch + 1)
            .expect("follower");
        let at_change = partition.log().log_end_offset();
        for appender in appenders {
            appender.join().expect("appender");
        }
        assert_eq!(
            partition.log().log_end_offset(),
            at_change,
            "round {round}: an append landed after the leader was deposed"
        );
    }
}

#[tokio::test]
async fn an_acks_all_produce_waiting_across_a_leader_change_is_never_acknowledged() {
    // Found by the simulator (seed 42): an acks=all produce parked on leader A must not be
    // answered by a high watermark A reaches at a later epoch, after its record was
    // truncated and another took its offset. Method: the produce waits on A; B leads and
    // writes its own record; A follows (truncating), then leads again and the high
    // watermark passes the offset: the parked produce gets NOT_LEADER_OR_FOLLOWER.
    let cluster = std::sync::Arc::new(SimCluster::new(&[A, B]).await);
    replicate_between(&cluster, A, B, 0);
    let broker = cluster.broker(A).expect("up");
    let parked = tokio::spawn(async move {
        common::sim::call_on(&broker, &produce_request("lost", -1), 9).await
    });
    tokio::task::yield_now().await;
    assert_eq!(
        cluster.partition(A).log().log_end_offset(),
        Offset(1),
        "A appended"
    );
    let both = broker_ids(&[A, B]);
    cluster
        .partition(B)
        .make_leader(BrokerId(B), LeaderEpoch(1), 1, both.clone(), both.clone())
        .expect("B leads");
    produce(&cluster, B, "kept");
    cluster
        .partition(A)
        .make_follower(BrokerId(B), LeaderEpoch(1), 1)
        .expect("A follows");
    cluster.catch_up(A, B).await;
    assert_eq!(values(&cluster, A), ["kept"], "A truncated its record");
    cluster
        .partition(A)
        .make_leader(BrokerId(A), LeaderEpoch(2), 2, both.clone(), both)
        .expect("A leads again");
    cluster
        .partition(B)
        .make_follower(BrokerId(A), LeaderEpoch(2), 2)
        .expect("B follows");
    produce(&cluster, A, "later");
    cluster.catch_up(B, A).await;
    assert!(
        cluster.partition(A).high_watermark() >= Offset(1),
        "the high watermark passed offset 0"
    );
    let response = tokio::time::timeout(std::time::Duration::from_secs(5), parked)
        .await
        .expect("answered")
        .expect("task");
    let code = response.responses[0].partition_responses[0].error_code;
    assert_eq!(
        code,
        kafka_protocol::error::ResponseError::NotLeaderOrFollower.code(),
        "the parked produce is refused, never acknowledged"
    );
}

#[tokio::test]
async fn a_follower_takes_the_leaders_log_start_so_deleted_records_stay_deleted() {
    // Goal: DeleteRecords on the leader moves every follower's log start with the next
    // fetch (Kafka's fetcher does so), so that a follower that becomes leader never hands
    // out the deleted records. Before, the follower ignored the leader's log start: after
    // the leader died, records 0-2 were readable again from the new leader.
    let cluster = SimCluster::new(&[A, B]).await;
    replicate_between(&cluster, A, B, 0);
    for value in ["r0", "r1", "r2", "r3", "r4"] {
        produce(&cluster, A, value);
    }
    cluster.catch_up(B, A).await;
    cluster.catch_up(B, A).await;
    assert_eq!(cluster.partition(A).high_watermark(), Offset(5));
    let start = cluster
        .partition(A)
        .delete_records(Offset(3))
        .expect("delete records");
    assert_eq!(start, Offset(3));
    cluster.catch_up(B, A).await;
    assert_eq!(
        cluster.partition(B).offsets().log_start_offset,
        Offset(3),
        "the follower follows"
    );
    cluster
        .partition(B)
        .make_leader(
            BrokerId(B),
            LeaderEpoch(1),
            1,
            vec![BrokerId(A), BrokerId(B)],
            vec![BrokerId(B)],
        )
        .expect("leader");
    let log = cluster.partition(B);
    let log = log.log();
    assert_eq!(log.log_start_offset(), Offset(3));
    assert!(
        log.read(Offset(0), Offset(5), 1 << 20, true).is_err(),
        "offset 0 is out of range"
    );
}

#[tokio::test]
async fn a_follower_fetches_in_a_session_and_opens_another_when_the_leader_restarts() {
    // Goal: followers fetch in a fetch session (KIP-227), so an idle round names no
    // partition, and a leader that lost its sessions (restarted) costs one refused request,
    // not a stalled follower. Method: in-process brokers through the real Fetch handler.
    let mut cluster = in_sync_with("m1").await;
    let sessions = |cluster: &SimCluster| cluster.broker(A).expect("up").fetch_sessions.counts();
    assert_eq!(
        sessions(&cluster),
        (1, 1),
        "the follower's session at the leader"
    );
    produce(&cluster, A, "m2");
    let round = cluster.fetch(B, A).await.expect("fetch");
    assert!(
        round.appended_bytes > 0,
        "an incremental round brings the new batch"
    );

    cluster.crash(A);
    cluster.start(A, A).await;
    replicate_between(&cluster, A, B, 1);
    produce(&cluster, A, "m3");
    let round = cluster.fetch(B, A).await.expect("fetch");
    assert_eq!(
        round.errors, 0,
        "the unknown session is replaced within the round"
    );
    cluster.catch_up(B, A).await;
    assert_eq!(values(&cluster, B), ["m1", "m2", "m3"]);
    assert_eq!(
        sessions(&cluster),
        (1, 1),
        "one new session, none left behind"
    );
}

/// Partitions broker `id` has read for follower fetches so far.
fn partitions_read(cluster: &SimCluster, id: i32) -> u64 {
    let broker = cluster.broker(id).expect("up");
    broker.metrics.replica_fetch_partitions_read.get()
}

/// The followers broker `id`'s leaders would drop from their ISRs now (none proposed).
fn lagging(cluster: &SimCluster, id: i32) -> Vec<Vec<BrokerId>> {
    let broker = cluster.broker(id).expect("up");
    let shrinks = broker.isr_shrinks();
    for change in &shrinks {
        // Withdrawn at once: the test only looks.
        let proposed = (change.leader_epoch, change.partition_epoch);
        cluster.partition(id).complete_isr_change(proposed, None);
    }
    shrinks.into_iter().map(|c| c.isr).collect()
}

/// Default `replica.lag.time.max.ms`.
const LAG_MAX_MS: i64 = 30_000;

#[tokio::test]
async fn an_idle_followers_fetches_read_nothing_and_its_rest_counts_as_caught_up() {
    // Issue 16: while nothing changes on the leader, a caught-up follower's incremental
    // fetches are answered without reading its partitions; the time it rested counts as
    // caught up, so the first append after a rest longer than replica.lag.time.max.ms
    // drops nobody from the ISR (the rounds were not read, so without that credit the
    // follower's last catch-up would be the last round read, long past).
    let cluster = in_sync_with("a").await;
    // Until a read finds B caught up with nothing to send, at the high watermark it moved.
    for _ in 0..3 {
        cluster.fetch(B, A).await.expect("fetch");
    }
    let before = partitions_read(&cluster, A);
    for _ in 0..40 {
        cluster.clock.advance(LAG_MAX_MS / 20);
        cluster.fetch(B, A).await.expect("fetch");
    }
    assert_eq!(
        partitions_read(&cluster, A),
        before,
        "idle rounds read nothing"
    );
    assert!(
        lagging(&cluster, A).is_empty(),
        "{:?}",
        lagging(&cluster, A)
    );

    produce(&cluster, A, "b");
    let round = cluster.fetch(B, A).await.expect("fetch");
    assert!(
        round.appended_bytes > 0,
        "the append woke the session: {round:?}"
    );
    assert!(partitions_read(&cluster, A) > before);
    assert!(
        lagging(&cluster, A).is_empty(),
        "the rest counted as caught up"
    );
    cluster.catch_up(B, A).await;
    assert_eq!(values(&cluster, B), ["a", "b"]);
    assert_eq!(cluster.partition(A).high_watermark(), Offset(2));
}

#[tokio::test]
async fn a_follower_at_the_leaders_log_end_stays_in_sync_until_the_leader_appends() {
    // Kafka's isCaughtUp: a follower whose log ends where the leader's does is in sync
    // however long ago it fetched; once the leader appends, one that has not caught up
    // within replica.lag.time.max.ms leaves the ISR.
    let cluster = in_sync_with("a").await;
    cluster.clock.advance(2 * LAG_MAX_MS);
    assert!(lagging(&cluster, A).is_empty(), "B holds everything A has");
    produce(&cluster, A, "b");
    assert_eq!(
        lagging(&cluster, A),
        [broker_ids(&[A])],
        "B stopped fetching"
    );
}
