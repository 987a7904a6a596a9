//! Transactions through the wire protocol as a client drives them (InitProducerId,
//! AddPartitionsToTxn, transactional Produce, EndTxn) and what readers see: the last stable
//! offset holds read_committed readers at an open transaction, aborted transactions are
//! listed for them, and both survive a kill -9 (rebuilt from the log and from
//! `__transaction_state`). Real clients (librdkafka, Java) are in compat/.

mod common;

use std::time::Duration;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// Evaluates `$attempt` (which may `.await`) until `$done(&value)` holds, at most 100
/// times 50 ms apart, and yields the last value.
macro_rules! poll {
    ($attempt:expr, $done:expr) => {{
        let mut value = $attempt;
        for _ in 0..100 {
            if $done(&value) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            value = $attempt;
        }
        value
    }};
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

/// FindCoordinator for `id` (which creates `__transaction_state`), as clients start.
async fn find_coordinator(client: &mut Client, id: &str) {
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(id.to_string()))
        .with_key_type(1);
    for _ in 0..100 {
        if client.call(&request, 3).await.error_code == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no transaction coordinator for {id}");
}

/// InitProducerId for `id`, retried while the coordinator loads or finishes an abort.
async fn init(client: &mut Client, id: &str, timeout_ms: i32) -> (i64, i16) {
    find_coordinator(client, id).await;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(timeout_ms);
    for _ in 0..100 {
        let response = client.call(&request, 4).await;
        let retriable = [
            ResponseError::CoordinatorLoadInProgress.code(),
            ResponseError::ConcurrentTransactions.code(),
            ResponseError::NotCoordinator.code(),
        ];
        if retriable.contains(&response.error_code) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(response.error_code, 0, "InitProducerId");
        return (response.producer_id.0, response.producer_epoch);
    }
    panic!("InitProducerId kept being refused");
}

async fn add_partition(client: &mut Client, id: &str, producer: (i64, i16), topic: &str) -> i16 {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(id))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![0])]);
    let response = client.call(&request, 3).await;
    response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

async fn end(client: &mut Client, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    client.call(&request, 3).await.error_code
}

/// A read_committed fetch (Fetch v12, isolation level 1) from `offset`.
async fn fetch_committed(
    client: &mut Client,
    topic: &str,
    offset: i64,
) -> fetch_response::PartitionData {
    let request = fetch_request(topic, 0, offset, 0, 1).with_isolation_level(1);
    client.call(&request, 12).await.responses[0].partitions[0].clone()
}

async fn latest(client: &mut Client, topic: &str, isolation_level: i8) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    client.call(&request, 7).await.topics[0].partitions[0].offset
}

/// Waits until the partition answers fetches again (after a restart).
async fn wait_led(client: &mut Client, topic: &str) {
    for _ in 0..100 {
        if fetch(client, topic, 0, 0).await.error_code == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{topic}-0 not led after the restart");
}

#[tokio::test]
async fn an_open_transaction_holds_read_committed_readers_across_a_kill_9_until_committed() {
    let broker = TestBroker::start(&[("transaction.state.log.replication.factor", "1")]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let producer = init(&mut client, "app-1", 60_000).await;
    assert_eq!(add_partition(&mut client, "app-1", producer, "t").await, 0);
    let written = produce(&mut client, "t", 0, txn_batch(3, producer, 0)).await;
    assert_eq!((written.error_code, written.base_offset), (0, 0));
    // A plain producer writes after the open transaction.
    assert_eq!(
        produce(&mut client, "t", 0, batch(2, -1, -1, now_ms()))
            .await
            .error_code,
        0
    );

    let held = fetch_committed(&mut client, "t", 0).await;
    assert_eq!((held.high_watermark, held.last_stable_offset), (5, 0));
    assert!(
        held.records.as_ref().is_none_or(|r| r.is_empty()),
        "nothing below the LSO"
    );
    assert_eq!(
        latest(&mut client, "t", 1).await,
        0,
        "read_committed latest is the LSO"
    );
    assert_eq!(
        latest(&mut client, "t", 0).await,
        5,
        "read_uncommitted latest is the HW"
    );

    // kill -9: the LSO is rebuilt from the log, the transaction from __transaction_state.
    let broker = TestBroker::start_in(
        broker.kill().await,
        &[("transaction.state.log.replication.factor", "1")],
    )
    .await;
    let mut client = broker.client().await;
    wait_led(&mut client, "t").await;
    assert_eq!(
        fetch_committed(&mut client, "t", 0)
            .await
            .last_stable_offset,
        0
    );
    let loading = [
        ResponseError::CoordinatorLoadInProgress.code(),
        ResponseError::NotCoordinator.code(),
    ];
    let code = poll!(
        end(&mut client, "app-1", producer, true).await,
        |c: &i16| { !loading.contains(c) }
    );
    assert_eq!(code, 0, "the restarted coordinator commits the transaction");
    let committed = fetch_committed(&mut client, "t", 0).await;
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (6, 6),
        "marker at 5"
    );
    // The marker at 5 is a control record, which consumers skip.
    let values: Vec<String> = records(committed.records.as_ref().expect("records"))
        .into_iter()
        .filter(|r| r.0 != 5)
        .map(|r| r.2)
        .collect();
    assert_eq!(values, ["txn0", "txn1", "txn2", "v0", "v1"]);
    assert!(committed
        .aborted_transactions
        .unwrap_or_default()
        .is_empty());
}

#[tokio::test]
async fn a_transaction_open_past_its_timeout_is_aborted_and_listed_for_readers_after_a_restart() {
    let keys = [
        ("transaction.state.log.replication.factor", "1"),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "100",
        ),
    ];
    let broker = TestBroker::start(&keys).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let producer = init(&mut client, "lapsed", 500).await;
    assert_eq!(add_partition(&mut client, "lapsed", producer, "t").await, 0);
    assert_eq!(
        produce(&mut client, "t", 0, txn_batch(4, producer, 0))
            .await
            .error_code,
        0
    );
    let aborted = poll!(
        fetch_committed(&mut client, "t", 0).await,
        |a: &fetch_response::PartitionData| { a.last_stable_offset == 5 }
    );
    assert_eq!(
        aborted.last_stable_offset, 5,
        "aborted by the coordinator: marker at 4"
    );
    let list = aborted.aborted_transactions.clone().unwrap_or_default();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (list[0].producer_id.0, list[0].first_offset),
        (producer.0, 0)
    );
    // The producer that let it lapse is fenced: its epoch was bumped.
    assert_eq!(
        end(&mut client, "lapsed", producer, true).await,
        ResponseError::ProducerFenced.code()
    );

    let broker = TestBroker::start_in(broker.kill().await, &keys).await;
    let mut client = broker.client().await;
    wait_led(&mut client, "t").await;
    let again = fetch_committed(&mut client, "t", 0).await;
    assert_eq!(again.last_stable_offset, 5);
    assert_eq!(
        again.aborted_transactions.unwrap_or_default().len(),
        1,
        "rebuilt from the log"
    );
}

#[tokio::test]
async fn a_new_instance_fences_the_old_one_and_aborts_its_open_transaction() {
    let broker = TestBroker::start(&[("transaction.state.log.replication.factor", "1")]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let zombie = init(&mut client, "app", 60_000).await;
    assert_eq!(add_partition(&mut client, "app", zombie, "t").await, 0);
    assert_eq!(
        produce(&mut client, "t", 0, txn_batch(2, zombie, 0))
            .await
            .error_code,
        0
    );
    let successor = init(&mut client, "app", 60_000).await;
    assert_eq!(successor.0, zombie.0, "same producer id");
    assert!(successor.1 > zombie.1, "a higher epoch");
    let fenced = ResponseError::ProducerFenced.code();
    assert_eq!(add_partition(&mut client, "app", zombie, "t").await, fenced);
    assert_eq!(end(&mut client, "app", zombie, true).await, fenced);
    // The zombie's late write names its transactional id (as clients do), so the leader
    // verifies it with the coordinator (KIP-890) before the log sees it.
    let late = produce_request("t", 0, txn_batch(1, zombie, 2), -1)
        .with_transactional_id(Some(txn_id("app")));
    let zombie_write = client.call(&late, 9).await.responses[0].partition_responses[0].clone();
    assert_eq!(
        zombie_write.error_code,
        ResponseError::InvalidProducerEpoch.code()
    );
    // A producer that never added the partition is refused by the verification too.
    let stranger = init(&mut client, "stranger", 60_000).await;
    let stray = produce_request("t", 0, txn_batch(1, stranger, 0), -1)
        .with_transactional_id(Some(txn_id("stranger")));
    let refused = client.call(&stray, 9).await.responses[0].partition_responses[0].clone();
    assert_eq!(refused.error_code, ResponseError::InvalidTxnState.code());
    let read = fetch_committed(&mut client, "t", 0).await;
    assert_eq!(
        read.last_stable_offset, 3,
        "the zombie's transaction was aborted (marker at 2)"
    );
    assert_eq!(read.aborted_transactions.unwrap_or_default().len(), 1);
}

#[tokio::test]
async fn an_idle_transactional_id_expires_and_comes_back_with_a_new_producer_id() {
    let keys = [
        ("transaction.state.log.replication.factor", "1"),
        ("transactional.id.expiration.ms", "300"),
        (
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "100",
        ),
    ];
    let broker = TestBroker::start(&keys).await;
    let mut client = broker.client().await;
    let first = init(&mut client, "idle", 60_000).await;
    let describe =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id("idle")]);
    let states = poll!(
        client.call(&describe, 0).await,
        |d: &DescribeTransactionsResponse| { d.transaction_states[0].error_code != 0 }
    );
    let code = states.transaction_states[0].error_code;
    assert_eq!(
        code,
        ResponseError::TransactionalIdNotFound.code(),
        "expired"
    );
    let again = init(&mut client, "idle", 60_000).await;
    assert_ne!(again.0, first.0, "a forgotten id gets a new producer id");
    assert_eq!(again.1, 0);
}

/// AddPartitionsToTxn with "t" and a topic that does not exist: nothing is added.
async fn add_a_missing_partition(client: &mut Client, producer: (i64, i16)) {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id("bad"))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![
            AddPartitionsToTxnTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![0]),
            AddPartitionsToTxnTopic::default()
                .with_name(name("missing"))
                .with_partitions(vec![0]),
        ]);
    let response = client.call(&request, 3).await;
    let code_of = |topic: &str| {
        response
            .results_by_topic_v3_and_below
            .iter()
            .find(|t| t.name.0.as_str() == topic)
            .map(|t| t.results_by_partition[0].partition_error_code)
    };
    assert_eq!(
        code_of("t"),
        Some(ResponseError::OperationNotAttempted.code())
    );
    assert_eq!(
        code_of("missing"),
        Some(ResponseError::UnknownTopicOrPartition.code())
    );
}

#[tokio::test]
async fn malformed_transactional_requests_get_kafkas_errors_and_nothing_changes() {
    let broker = TestBroker::start(&[("transaction.state.log.replication.factor", "1")]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    find_coordinator(&mut client, "bad").await;
    // A timeout of 0 or above transaction.max.timeout.ms.
    for timeout in [0, 900_001] {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id("bad")))
            .with_transaction_timeout_ms(timeout);
        let loading = ResponseError::CoordinatorLoadInProgress.code();
        let code = poll!(client.call(&request, 4).await.error_code, |c: &i16| *c
            != loading);
        assert_eq!(
            code,
            ResponseError::InvalidTransactionTimeout.code(),
            "{timeout} ms"
        );
    }
    // A producer id the transactional id does not belong to.
    let producer = init(&mut client, "bad", 60_000).await;
    let stranger = (producer.0 + 4242, 0);
    assert_eq!(
        end(&mut client, "bad", stranger, true).await,
        ResponseError::InvalidProducerIdMapping.code()
    );
    // A partition that does not exist spoils the whole request, as in Kafka.
    add_a_missing_partition(&mut client, producer).await;
    assert_eq!(
        end(&mut client, "bad", producer, true).await,
        ResponseError::InvalidTxnState.code(),
        "nothing was added: no transaction to end"
    );
    // A client may not write a transaction marker itself.
    let marker = highwater::log::control::encode(
        producer.0,
        producer.1,
        highwater::log::control::Marker {
            commit: true,
            coordinator_epoch: 0,
        },
        now_ms(),
    );
    let written = produce(&mut client, "t", 0, marker).await;
    assert_eq!(written.error_code, ResponseError::InvalidRecord.code());
    assert_eq!(
        fetch(&mut client, "t", 0, 0).await.high_watermark,
        0,
        "nothing appended"
    );
}

/// A transactional Produce of `records` to `topic`-0 at `version` (v12+: a transaction
/// version 2 client, which sends no AddPartitionsToTxn).
async fn produce_in(
    client: &mut Client,
    id: &str,
    topic: &str,
    records: bytes::Bytes,
    version: i16,
) -> i16 {
    let request = produce_request(topic, 0, records, -1).with_transactional_id(Some(txn_id(id)));
    let response = client.call(&request, version).await;
    response.responses[0].partition_responses[0].error_code
}

/// EndTxn v5 (transaction version 2): the error and the producer id and epoch answered.
async fn end_v5(
    client: &mut Client,
    id: &str,
    producer: (i64, i16),
    commit: bool,
) -> (i16, (i64, i16)) {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    let response = client.call(&request, 5).await;
    let producer = (response.producer_id.0, response.producer_epoch);
    (response.error_code, producer)
}

#[tokio::test]
async fn a_transaction_version_2_client_adds_no_partition_and_ends_every_transaction_at_a_new_epoch(
) {
    let broker = TestBroker::start(&[("transaction.state.log.replication.factor", "1")]).await;
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let (pid, epoch) = init(&mut client, "app-2", 60_000).await;

    // Before v12 a partition not added to the transaction is refused (KIP-890 part 1).
    let unadded = produce_in(&mut client, "app-2", "t", txn_batch(1, (pid, epoch), 0), 11).await;
    assert_eq!(unadded, ResponseError::InvalidTxnState.code());
    // From v12 the leader adds it (part 2).
    let added = produce_in(&mut client, "app-2", "t", txn_batch(2, (pid, epoch), 0), 12).await;
    assert_eq!(added, 0, "Produce v12 without AddPartitionsToTxn");
    assert_eq!(
        fetch_committed(&mut client, "t", 0)
            .await
            .last_stable_offset,
        0
    );

    let (code, bumped) = end_v5(&mut client, "app-2", (pid, epoch), true).await;
    assert_eq!(
        (code, bumped),
        (0, (pid, epoch + 1)),
        "a new epoch for the commit"
    );
    let (code, retried) = end_v5(&mut client, "app-2", (pid, epoch), true).await;
    assert_eq!((code, retried), (0, bumped), "a retry at the old epoch");
    let (code, _) = end_v5(&mut client, "app-2", (pid, epoch), false).await;
    assert_eq!(
        code,
        ResponseError::InvalidTxnState.code(),
        "abort after commit"
    );
    let committed = fetch_committed(&mut client, "t", 0).await;
    assert_eq!(
        committed.last_stable_offset, 3,
        "records 0-1, the marker at 2"
    );

    // A late write of the committed transaction is fenced by the marker's epoch.
    let late = produce_in(&mut client, "app-2", "t", txn_batch(1, (pid, epoch), 2), 12).await;
    assert_eq!(late, ResponseError::InvalidProducerEpoch.code());
    // The next transaction runs at the new epoch from sequence 0, and aborts.
    let next = produce_in(&mut client, "app-2", "t", txn_batch(1, bumped, 0), 12).await;
    assert_eq!(next, 0, "the next transaction at the new epoch");
    let (code, after_abort) = end_v5(&mut client, "app-2", bumped, false).await;
    assert_eq!((code, after_abort), (0, (pid, epoch + 2)));
    let aborted = fetch_committed(&mut client, "t", 0).await;
    assert_eq!(
        aborted.last_stable_offset, 5,
        "the record at 3, the marker at 4"
    );
    let listed = aborted.aborted_transactions.unwrap_or_default();
    assert_eq!(listed.len(), 1, "one aborted transaction");
    assert_eq!((listed[0].producer_id.0, listed[0].first_offset), (pid, 3));
}
