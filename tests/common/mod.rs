//! Test support: an in-process broker on 127.0.0.1:0 with a temporary log directory, and a
//! raw Kafka client that sends one encoded request at a time.
#![allow(dead_code)]

pub mod cluster_processes;
pub mod consumer_groups;
pub mod counter_log;
pub mod groups;
pub mod netns;
pub mod pki;
pub mod seeded_rng;
pub mod sim;
pub mod small_disk;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use highwater::api::Broker;
use highwater::config::{BrokerConfig, ConfigMap};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Aborts a task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A running in-process broker.
pub struct TestBroker {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    pub broker: Arc<Broker>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// Config for a broker with its data in `dir`, plus `extra` keys.
pub fn config(dir: &Path, extra: &[(&str, &str)]) -> Arc<BrokerConfig> {
    let mut map = ConfigMap::new();
    map.insert("log.dirs".into(), dir.display().to_string());
    map.insert("listeners".into(), "127.0.0.1:0".into());
    for (k, v) in extra {
        map.insert((*k).into(), (*v).into());
    }
    Arc::new(BrokerConfig::from_map(map).expect("config"))
}

impl TestBroker {
    /// Starts a broker on a fresh temporary directory.
    pub async fn start(extra: &[(&str, &str)]) -> TestBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        Self::start_in(dir, extra).await
    }

    /// Starts a broker on an existing directory (for restarts).
    pub async fn start_in(dir: tempfile::TempDir, extra: &[(&str, &str)]) -> TestBroker {
        if std::env::var_os("HIGHWATER_TEST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter("info,openraft=warn")
                .with_test_writer()
                .try_init();
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let port = addr.port().to_string();
        let advertised = format!("127.0.0.1:{port}");
        let mut keys: Vec<(&str, &str)> = vec![("advertised.listeners", advertised.as_str())];
        keys.extend_from_slice(extra);
        let broker = Arc::new(
            Broker::open(config(dir.path(), &keys))
                .await
                .expect("broker"),
        );
        let (stop, stopped) = oneshot::channel::<()>();
        let background = Arc::clone(&broker);
        let served = Arc::clone(&broker);
        let task = tokio::spawn(async move {
            // Aborted when this task ends or is aborted (a kill), like the process's tasks.
            let _background =
                AbortOnDrop(tokio::spawn(
                    async move { background.run_background().await },
                ));
            highwater::server::run(served, vec![(listener, None)], async {
                let _ = stopped.await;
            })
            .await;
        });
        TestBroker {
            addr,
            dir,
            broker,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the broker cleanly and returns its directory.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::mem::replace(&mut self.dir, dir)
    }

    /// Kills the broker without a clean shutdown (no log close, no marker).
    pub async fn kill(mut self) -> tempfile::TempDir {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        // The process is gone: its metadata quorum stops too (without any clean step).
        self.broker.controller.shutdown().await;
        let dir = tempfile::tempdir().expect("tempdir");
        std::mem::replace(&mut self.dir, dir)
    }

    /// A connected raw client.
    pub async fn client(&self) -> Client {
        Client::connect(self.addr).await
    }
}

/// Opens a broker on `dir` with `keys` and serves it on `sockets`, bound in the order of
/// its `listeners` (each SSL one with its TLS); the sender stops it.
pub async fn serve_on(
    dir: &Path,
    keys: &[(&str, &str)],
    sockets: Vec<tokio::net::TcpListener>,
) -> (Arc<Broker>, oneshot::Sender<()>) {
    let config = config(dir, keys);
    let tls = highwater::tls::acceptors(&config.listeners).expect("tls");
    let broker = Arc::new(Broker::open(config).await.expect("broker"));
    let (stop, stopped) = oneshot::channel::<()>();
    let sockets = sockets.into_iter().zip(tls).collect();
    tokio::spawn(highwater::server::run(
        Arc::clone(&broker),
        sockets,
        async {
            let _ = stopped.await;
        },
    ));
    (broker, stop)
}

/// A broker on `dir` with a PLAINTEXT and a SASL_PLAINTEXT listener on loopback and
/// `keys` (the SASL mechanisms and users); their addresses. It serves until the test ends.
pub async fn plain_and_sasl(dir: &Path, keys: &[(&str, &str)]) -> (SocketAddr, SocketAddr) {
    let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let (plain, sasl) = (bind().await.expect("bind"), bind().await.expect("bind"));
    let p = plain.local_addr().expect("addr");
    let s = sasl.local_addr().expect("addr");
    let listeners = format!("PLAINTEXT://{p},SASL_PLAINTEXT://{s}");
    let mut all = vec![
        ("listeners", listeners.as_str()),
        ("advertised.listeners", listeners.as_str()),
        ("connection.failed.authentication.delay.ms", "0"),
    ];
    all.extend_from_slice(keys);
    let (_broker, stop) = serve_on(dir, &all, vec![plain, sasl]).await;
    std::mem::forget(stop);
    (p, s)
}

/// A byte stream a [`Client`] talks over: TCP, or TLS over TCP.
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

/// A raw Kafka client: one request, one response.
pub struct Client {
    pub stream: Box<dyn Stream>,
    /// The broker's address.
    pub peer: SocketAddr,
    correlation_id: i32,
    /// The client id every request carries.
    client_id: StrBytes,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.expect("connect");
        Client::over(Box::new(stream), addr)
    }

    /// A client over an established `stream` to the broker at `peer`.
    pub fn over(stream: Box<dyn Stream>, peer: SocketAddr) -> Client {
        Client {
            stream,
            peer,
            correlation_id: 0,
            client_id: StrBytes::from_static_str("highwater-test"),
        }
    }

    /// The same client, naming itself `client_id` from now on.
    pub fn with_client_id(mut self, client_id: &str) -> Client {
        self.client_id = StrBytes::from_string(client_id.to_string());
        self
    }

    /// Encodes a request frame.
    pub fn frame<R: Request>(&mut self, body: &R, version: i16) -> Bytes {
        self.correlation_id += 1;
        let key = ApiKey::try_from(R::KEY).expect("key");
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, key.request_header_version(version))
            .expect("header");
        body.encode(&mut buf, version).expect("body");
        let mut out = BytesMut::new();
        out.put_i32(buf.len() as i32);
        out.extend_from_slice(&buf);
        out.freeze()
    }

    /// Sends raw bytes.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// Reads one response frame; `None` if the broker closed the connection.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        let read = async {
            let mut len = [0u8; 4];
            self.stream.read_exact(&mut len).await.ok()?;
            let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
            self.stream.read_exact(&mut body).await.ok()?;
            Some(Bytes::from(body))
        };
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .expect("response in time")
    }

    /// Sends `body` at `version` and decodes the response.
    pub async fn call<R: Request>(&mut self, body: &R, version: i16) -> R::Response {
        let frame = self.frame(body, version);
        self.send_raw(&frame).await;
        let mut response = self.read_frame().await.expect("response");
        let header = ResponseHeader::decode(&mut response, R::Response::header_version(version))
            .expect("response header");
        assert_eq!(header.correlation_id, self.correlation_id, "correlation id");
        let decoded = R::Response::decode(&mut response, version).expect("response body");
        assert_eq!(response.remaining(), 0, "response fully consumed");
        decoded
    }

    /// Whether the broker closed the connection (EOF) within a few seconds.
    pub async fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), self.stream.read_exact(&mut byte));
        matches!(read.await, Ok(Err(_)))
    }
}

/// Encodes `count` records as one batch (keys `k{i}`, values `v{i}`), optionally idempotent.
pub fn batch(count: i32, producer_id: i64, base_sequence: i32, timestamp: i64) -> Bytes {
    let epoch = if producer_id >= 0 { 0 } else { -1 };
    encode_records(
        count,
        (producer_id, epoch, false),
        base_sequence,
        timestamp,
        "v",
    )
}

/// A transactional batch of `count` records (values `txn{i}`) from `producer` (id, epoch)
/// at `sequence`.
pub fn txn_batch(count: i32, (producer_id, epoch): (i64, i16), sequence: i32) -> Bytes {
    encode_records(count, (producer_id, epoch, true), sequence, now_ms(), "txn")
}

/// `count` records (keys `k{i}`, values `{prefix}{i}`) of a producer (id, epoch,
/// transactional) as one uncompressed batch.
fn encode_records(
    count: i32,
    (producer_id, producer_epoch, transactional): (i64, i16, bool),
    base_sequence: i32,
    timestamp: i64,
    prefix: &str,
) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional,
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: base_sequence.max(0) + i,
            timestamp: timestamp + i64::from(i),
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("{prefix}{i}"))),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
    buf.freeze()
}

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{CreateTopicsRequest, FetchRequest, ProduceRequest, TopicName};

/// A wire topic name.
pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Creates a topic and returns its error code.
pub async fn create_topic(client: &mut Client, topic: &str, partitions: i32) -> i16 {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)])
        .with_timeout_ms(5000);
    client.call(&request, 7).await.topics[0].error_code
}

/// A Produce request for one partition.
pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

/// Produces one batch (Produce v9) and returns the partition's response.
pub async fn produce(
    client: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> PartitionProduceResponse {
    let response = client
        .call(&produce_request(topic, partition, records, -1), 9)
        .await;
    response.responses[0].partition_responses[0].clone()
}

/// A Fetch v12 request for one partition.
pub fn fetch_request(
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    min_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(50 * 1024 * 1024)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1024 * 1024)])])
}

/// Fetches one partition (Fetch v12) and returns its data.
pub async fn fetch(client: &mut Client, topic: &str, partition: i32, offset: i64) -> PartitionData {
    let response = client
        .call(&fetch_request(topic, partition, offset, 0, 1), 12)
        .await;
    response.responses[0].partitions[0].clone()
}

/// Decodes all records of fetched bytes: (offset, key, value).
pub fn records(bytes: &Bytes) -> Vec<(i64, String, String)> {
    let mut buf = bytes.clone();
    let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut buf).expect("decode");
    sets.iter()
        .flat_map(|s| s.records.iter())
        .map(|r| {
            let text = |b: &Option<Bytes>| {
                String::from_utf8_lossy(b.as_deref().unwrap_or_default()).to_string()
            };
            (r.offset, text(&r.key), text(&r.value))
        })
        .collect()
}

impl Client {
    /// Like [`Client::call`], but `None` instead of a panic when the connection fails,
    /// closes or stays silent for 10 s (a broker that was killed or is restarting).
    pub async fn try_call<R: Request>(&mut self, body: &R, version: i16) -> Option<R::Response> {
        let frame = self.frame(body, version);
        self.stream.write_all(&frame).await.ok()?;
        let read = async {
            let mut len = [0u8; 4];
            self.stream.read_exact(&mut len).await.ok()?;
            let mut body = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
            self.stream.read_exact(&mut body).await.ok()?;
            Some(Bytes::from(body))
        };
        let mut response = tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .ok()??;
        let header = ResponseHeader::decode(&mut response, R::Response::header_version(version))
            .expect("response header");
        assert_eq!(header.correlation_id, self.correlation_id, "correlation id");
        Some(R::Response::decode(&mut response, version).expect("response body"))
    }

    /// Connects, or `None` when nothing listens at `addr` yet or it stays silent for 3 s
    /// (a partitioned node).
    pub async fn try_connect(addr: SocketAddr) -> Option<Client> {
        let connect = TcpStream::connect(addr);
        let stream = tokio::time::timeout(Duration::from_secs(3), connect)
            .await
            .ok()?
            .ok()?;
        Some(Client::over(Box::new(stream), addr))
    }
}

/// Encodes one batch whose record values are the given strings (keys null), with
/// CreateTime timestamps `timestamp`, `timestamp + 1`, ...
pub fn batch_of_values(values: &[String], timestamp: i64) -> Bytes {
    batch_of_values_from(values, None, timestamp)
}

/// Like [`batch_of_values`], from an idempotent producer: `(producer_id, producer_epoch,
/// base_sequence)`.
pub fn batch_of_values_from(
    values: &[String],
    producer: Option<(i64, i16, i32)>,
    timestamp: i64,
) -> Bytes {
    // offset - sequence must be the same for every record of one batch; without a
    // producer, base sequence -1 (no idempotence), as Kafka's producers send it.
    let (producer_id, producer_epoch, base_sequence) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, value)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: base_sequence + i as i32,
            timestamp: timestamp + i as i64,
            key: None,
            value: Some(Bytes::from(value.clone())),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode");
    buf.freeze()
}

/// Fetches every record of a partition from offset 0 to the high watermark:
/// (offset, key, value).
pub async fn fetch_all(
    client: &mut Client,
    topic: &str,
    partition: i32,
) -> Vec<(i64, String, String)> {
    let mut all: Vec<(i64, String, String)> = Vec::new();
    loop {
        let next = all.last().map_or(0, |r| r.0 + 1);
        let data = fetch(client, topic, partition, next).await;
        assert_eq!(data.error_code, 0, "fetch at {next}");
        let got = records(data.records.as_ref().expect("records"));
        let fresh: Vec<_> = got.into_iter().filter(|r| r.0 >= next).collect();
        if fresh.is_empty() {
            assert_eq!(
                next, data.high_watermark,
                "fetched up to the high watermark"
            );
            return all;
        }
        all.extend(fresh);
    }
}

/// Milliseconds since the epoch (record timestamps that no roll or retention treats as old).
pub fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.expect("clock").as_millis() as i64
}

/// IncrementalAlterConfigs setting one config of one resource (2: topic, 4: broker).
pub fn alter_config(
    resource_type: i8,
    resource: &str,
    key: &str,
    value: &str,
) -> kafka_protocol::messages::IncrementalAlterConfigsRequest {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    kafka_protocol::messages::IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from(resource.to_string()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from(key.to_string()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from(value.to_string())))]),
    ])
}

/// ElectLeaders of one partition: `election_type` 0 preferred, 1 unclean.
pub fn elect_leaders(
    election_type: i8,
    topic: &str,
    partition: i32,
) -> kafka_protocol::messages::ElectLeadersRequest {
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    kafka_protocol::messages::ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_topic_partitions(Some(vec![TopicPartitions::default()
            .with_topic(name(topic))
            .with_partitions(vec![partition])]))
        .with_timeout_ms(10_000)
}

/// Status and body of `method path` on `addr` (HTTP/1.1, one request per connection).
pub fn http(addr: SocketAddr, method: &str, path: &str) -> Option<(u16, String)> {
    http_within(addr, method, path, Duration::from_secs(5))
}

/// [`http`], waiting up to `wait` for the answer.
pub fn http_within(
    addr: SocketAddr,
    method: &str,
    path: &str,
    wait: Duration,
) -> Option<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(wait)).ok()?;
    let request = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}
