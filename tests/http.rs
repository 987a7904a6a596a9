//! The HTTP listener of the real binary (`http.listeners`): `/metrics` parsed with a
//! Prometheus text parser and checked against what the test did through the Kafka
//! protocol, `/healthz`, `/readyz`, the live page's state, and what is refused. One node,
//! then the 3-node cluster with a follower killed.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster_processes::{create_assigned, eventually, metadata, Cluster};
use common::*;
use highwater::testkit::ports::free_port;

/// `/metrics` parsed: every sample by name and labels (sorted `k=v` pairs joined by `,`).
fn scrape(addr: SocketAddr) -> HashMap<(String, String), f64> {
    let (status, body) = http(addr, "GET", "/metrics").expect("/metrics answers");
    assert_eq!(status, 200);
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text");
    parsed
        .samples
        .into_iter()
        .filter_map(|s| {
            let value = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => return None,
            };
            let mut labels: Vec<String> =
                s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.sort();
            Some(((s.metric, labels.join(",")), value))
        })
        .collect()
}

fn sample(samples: &HashMap<(String, String), f64>, name: &str, labels: &str) -> Option<f64> {
    samples
        .get(&(name.to_string(), labels.to_string()))
        .copied()
}

fn spawn_single(dir: &std::path::Path, port: u16, http_port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["serve", "--config"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/config/server.toml"))
        .args(["--listeners", &format!("127.0.0.1:{port}")])
        .args(["--log-dirs", &dir.display().to_string()])
        .args(["--set", &format!("http.listeners=127.0.0.1:{http_port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn highwater")
}

async fn connect(addr: SocketAddr) -> Client {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(client) = Client::try_connect(addr).await {
            return client;
        }
        assert!(Instant::now() < deadline, "broker did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_single_node_reports_what_was_produced_and_committed() {
    // Goal: /metrics counts what clients did (records and bytes in per topic, requests per
    // API), shows each partition's offsets and a group's lag, and the health checks answer.
    // Method: the real binary; produce 3 batches of 10, commit offset 12 for a group.
    let dir = tempfile::tempdir().expect("tempdir");
    let (port, http_port) = (free_port(), free_port());
    let mut child = spawn_single(dir.path(), port, http_port);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let web: SocketAddr = format!("127.0.0.1:{http_port}").parse().expect("addr");
    let mut client = connect(addr).await;
    assert_eq!(create_topic(&mut client, "m", 2).await, 0);
    let mut bytes = 0;
    for i in 0..3 {
        let records = batch(10, -1, 0, now_ms());
        bytes += records.len();
        let answer = produce(&mut client, "m", 0, records).await;
        assert_eq!((answer.error_code, answer.base_offset), (0, i * 10));
    }
    // The first commit may find the coordinator still loading its partition.
    let commit = |c| async move {
        let mut client = Client::connect(addr).await;
        common::groups::find_coordinator(&mut client, "g").await;
        let code = common::groups::commit(&mut client, "g", "", -1, "m", 12).await;
        (code == 0).then_some(c)
    };
    eventually("the offset commit", || commit(())).await;

    assert_eq!(http(web, "GET", "/healthz").map(|a| a.0), Some(200));
    let (status, body) = http(web, "GET", "/readyz").expect("/readyz");
    assert_eq!((status, body.as_str()), (200, "ready\n"));
    open_fetch_session(&mut client, web).await;
    check_counts(web, bytes);
    check_live_state(web);
    check_page_in_browser(web);
    check_refusals(web);
    assert_eq!(fetch(&mut client, "m", 0, 0).await.high_watermark, 30);
    child.kill().expect("kill");
    let _ = child.wait();
}

/// A consumer's incremental fetch session on `m`-0 and `m`-1 (a full Fetch at epoch 0), as
/// /metrics counts it.
async fn open_fetch_session(client: &mut Client, web: SocketAddr) {
    let mut full = common::fetch_request("m", 0, 0, 0, 0).with_session_epoch(0);
    let mut second = full.topics[0].partitions[0].clone();
    second.partition = 1;
    full.topics[0].partitions.push(second);
    let opened = client.call(&full, 12).await;
    assert_ne!(opened.session_id, 0, "a session opened");
    let m = scrape(web);
    let get = |name: &str| sample(&m, name, "");
    let sessions = get("kafka_server_fetchsessioncache_numincrementalfetchsessions");
    let cached = get("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached");
    assert_eq!((sessions, cached), (Some(1.0), Some(2.0)));
}

/// What the single-node test did, as /metrics counts it.
fn check_counts(web: SocketAddr, bytes: usize) {
    let m = scrape(web);
    let p0 = "partition=0,topic=m";
    let get = |name: &str, labels: &str| sample(&m, name, labels);
    assert_eq!(
        get(
            "kafka_server_brokertopicmetrics_messagesin_total",
            "topic=m"
        ),
        Some(30.0)
    );
    assert_eq!(
        get("kafka_server_brokertopicmetrics_bytesin_total", "topic=m"),
        Some(bytes as f64)
    );
    assert_eq!(get("kafka_log_log_logendoffset", p0), Some(30.0));
    assert_eq!(get("kafka_cluster_partition_highwatermark", p0), Some(30.0));
    assert_eq!(
        get("kafka_cluster_partition_laststableoffset", p0),
        Some(30.0)
    );
    assert_eq!(get("kafka_log_log_logstartoffset", p0), Some(0.0));
    assert!(get("kafka_log_log_size", p0).is_some_and(|s| s >= bytes as f64));
    assert_eq!(
        get("kafka_log_log_logendoffset", "partition=1,topic=m"),
        Some(0.0)
    );
    let lag = "consumergroup=g,partition=0,topic=m";
    assert_eq!(get("kafka_consumergroup_current_offset", lag), Some(12.0));
    assert_eq!(get("kafka_consumergroup_lag", lag), Some(18.0));
    assert_eq!(
        get(
            "kafka_network_requestmetrics_requests_total",
            "request=Produce,version=9"
        ),
        Some(3.0)
    );
    assert_eq!(
        get("kafka_server_replicamanager_underreplicatedpartitions", ""),
        Some(0.0)
    );
    assert_eq!(
        get("kafka_server_replicamanager_offlinereplicacount", ""),
        Some(0.0)
    );
    assert_eq!(
        get("kafka_controller_kafkacontroller_activecontrollercount", ""),
        Some(1.0)
    );
    // This client's connection at least (the commit's may not be closed yet).
    let open = get("kafka_server_socketservermetrics_connection_count", "");
    assert!(open.is_some_and(|n| n >= 1.0), "{open:?}");
    let accepted = get(
        "kafka_server_socketservermetrics_connection_creation_total",
        "",
    );
    assert!(accepted.is_some_and(|n| n >= 2.0), "{accepted:?}");
    let leaders = get("kafka_server_replicamanager_leadercount", "").expect("leader count");
    let hosted = get("kafka_server_replicamanager_partitioncount", "").expect("partition count");
    assert!(leaders >= 2.0 && leaders == hosted, "{leaders} of {hosted}");
}

/// The live page and its state show the same offsets and the epoch history.
fn check_live_state(web: SocketAddr) {
    let (status, state) = http(web, "GET", "/state.json").expect("/state.json");
    assert_eq!(status, 200);
    let state: serde_json::Value = serde_json::from_str(&state).expect("json");
    let row = state["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .find(|p| p["topic"] == "m" && p["partition"] == 0)
        .expect("m-0 listed")
        .clone();
    assert_eq!(row["local"]["high_watermark"], 30);
    assert_eq!(row["local"]["log_end_offset"], 30);
    assert_eq!(row["local"]["role"], "leader");
    assert_eq!(
        row["local"]["epochs"][0][1], 0,
        "epoch 0 starts at offset 0"
    );
    let (status, page) = http(web, "GET", "/").expect("/");
    assert!(status == 200 && page.contains("/state.json"));
}

/// The live page as headless Chromium renders it (its script run): the row of m-0 shows
/// the broker's log end offset, high watermark and last stable offset.
fn check_page_in_browser(web: SocketAddr) {
    let profile = tempfile::tempdir().expect("profile dir");
    let output = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", &format!("http://{web}/")])
        .stderr(Stdio::null())
        .output()
        .expect("chromium (apt-get install chromium; .ci/run installs it)");
    let dom = String::from_utf8_lossy(&output.stdout);
    let row = dom
        .split("<tr")
        .find(|r| r.contains(r#"data-partition="m-0""#))
        .unwrap_or_else(|| panic!("no row for m-0 in the rendered page: {dom}"));
    for (class, value) in [("leo", 30), ("hw", 30), ("lso", 30)] {
        let cell = format!(r#"<td class="{class}">{value}</td>"#);
        assert!(row.contains(&cell), "{cell} not in {row}");
    }
    assert!(row.contains(">leader<"), "{row}");
}

/// What is not served is refused, and the listener goes on serving.
fn check_refusals(web: SocketAddr) {
    assert_eq!(http(web, "POST", "/metrics").map(|a| a.0), Some(405));
    assert_eq!(http(web, "GET", "/nope").map(|a| a.0), Some(404));
    let mut raw = std::net::TcpStream::connect(web).expect("connect");
    raw.write_all(b"\x00\x01garbage\r\n\r\n").expect("write");
    drop(raw);
    assert_eq!(http(web, "GET", "/healthz").map(|a| a.0), Some(200));
    check_connection_limit(web);
}

/// Connections past the limit get 503 and are closed; once the idle ones go, the listener
/// serves again.
fn check_connection_limit(web: SocketAddr) {
    let mut idle: Vec<std::net::TcpStream> = (0..highwater::http::CONNECTIONS_MAX)
        .map(|_| std::net::TcpStream::connect(web).expect("connect"))
        .collect();
    let mut refused = None;
    for _ in 0..50 {
        // The listener may not have accepted every idle connection yet, and connections
        // of the checks before may still hold their slots (then some idle ones were
        // refused): a slot found free is taken by one more idle connection.
        refused = http(web, "GET", "/healthz");
        if refused.as_ref().is_some_and(|a| a.0 == 503) {
            break;
        }
        idle.push(std::net::TcpStream::connect(web).expect("connect"));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(refused.map(|a| a.0), Some(503), "one past the limit");
    drop(idle);
    let mut served = None;
    for _ in 0..100 {
        served = http(web, "GET", "/healthz").map(|a| a.0);
        if served == Some(200) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        served,
        Some(200),
        "served again once the idle connections closed"
    );
}

#[test]
fn a_taken_http_port_stops_start_up() {
    // Goal: an HTTP listener that cannot be bound is a start-up failure that names it, as a
    // Kafka listener's is, rather than a broker silently without metrics.
    let dir = tempfile::tempdir().expect("tempdir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let http_port = taken.local_addr().expect("addr").port();
    let output = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["serve", "--config"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/config/server.toml"))
        .args(["--listeners", &format!("127.0.0.1:{}", free_port())])
        .args(["--log-dirs", &dir.path().display().to_string()])
        .args(["--set", &format!("http.listeners=127.0.0.1:{http_port}")])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("http.listeners"), "{stderr}");
}

/// Three nodes, each with an HTTP listener on a free port (returned), and topic `u`
/// (one partition on nodes 1, 2, 3, led by node 1).
async fn cluster_with_http() -> (Cluster, Vec<u16>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let node_settings: Vec<(usize, String)> = (1..=3)
        .map(|n| (n, format!("http.listeners=127.0.0.1:{}", ports[n - 1])))
        .collect();
    let cluster = Cluster::start_with_nodes(dir, &[], &node_settings);
    eventually("three brokers", || async {
        let m = metadata(cluster.addr(1)).await;
        m.filter(|m| m.brokers.len() == 3).map(|_| ())
    })
    .await;
    create_assigned(&cluster, "u", &[1, 2, 3]).await;
    (cluster, ports)
}

/// Produces 4 records to `u`-0 (acks=all), retrying while node 1 does not know the topic
/// or lead it yet (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER: both retriable).
async fn acked(client: &mut Client) {
    for _ in 0..100 {
        let answer = produce(client, "u", 0, batch(4, -1, 0, now_ms())).await;
        match answer.error_code {
            0 => return,
            3 | 6 => tokio::time::sleep(Duration::from_millis(50)).await,
            code => panic!("produce to u-0 failed with {code}"),
        }
    }
    panic!("node 1 never led u-0");
}

/// Waits until every node is ready and node 1 leads `partition` with the ISR whole.
async fn ready_and_whole(web: &impl Fn(usize) -> SocketAddr, partition: &str) {
    eventually("every node ready and the ISR whole", || async {
        let ready = (1..=3).all(|n| http(web(n), "GET", "/readyz").is_some_and(|a| a.0 == 200));
        let m = scrape(web(1));
        let whole = sample(&m, "kafka_cluster_partition_insyncreplicascount", partition);
        (ready && whole == Some(3.0)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_killed_follower_shows_as_under_replicated_on_the_leader() {
    // Goal: the leader's /metrics shows the partition under-replicated and the follower's
    // lag once a follower dies, and whole again (the ISR expand counted) after its
    // restart. Method: three real processes, each with its own HTTP port.
    let (mut cluster, ports) = cluster_with_http().await;
    let web = |node: usize| -> SocketAddr {
        format!("127.0.0.1:{}", ports[node - 1])
            .parse()
            .expect("addr")
    };
    let mut client = connect(cluster.addr(1)).await;
    for _ in 0..5 {
        acked(&mut client).await;
    }
    let p0 = "partition=0,topic=u";
    ready_and_whole(&web, p0).await;
    cluster.kill(3);
    let m = eventually("the leader to count node 3 out", || async {
        let m = scrape(web(1));
        (sample(&m, "kafka_cluster_partition_underreplicated", p0) == Some(1.0)).then_some(m)
    })
    .await;
    assert_eq!(
        sample(&m, "kafka_cluster_partition_insyncreplicascount", p0),
        Some(2.0)
    );
    assert_eq!(
        sample(&m, "kafka_cluster_partition_replicascount", p0),
        Some(3.0)
    );
    assert!(sample(
        &m,
        "kafka_server_replicamanager_underreplicatedpartitions",
        ""
    )
    .is_some_and(|n| n >= 1.0));
    // Written while node 3 is down: it is 4 records behind as the leader sees it.
    acked(&mut client).await;
    let m = scrape(web(1));
    let lag = sample(
        &m,
        "kafka_cluster_partition_replicalag",
        "partition=0,replica=3,topic=u",
    );
    assert!(lag.is_some_and(|l| l >= 4.0), "{lag:?}");
    assert_eq!(sample(&m, "kafka_log_log_logendoffset", p0), Some(24.0));

    cluster.spawn(3);
    let m = eventually("node 3 back in the ISR", || async {
        let m = scrape(web(1));
        (sample(&m, "kafka_cluster_partition_underreplicated", p0) == Some(0.0)).then_some(m)
    })
    .await;
    // Node 3 left the ISR by the controller fencing it (not a shrink the leader asked
    // for, as in Kafka); it rejoined by the leader's expand.
    assert!(
        sample(&m, "kafka_server_replicamanager_isrexpands_total", "").is_some_and(|n| n >= 1.0)
    );
    eventually(
        "node 3 ready and caught up to the high watermark",
        || async {
            let ready = http(web(3), "GET", "/readyz").is_some_and(|a| a.0 == 200);
            let m = scrape(web(3));
            let end = sample(&m, "kafka_log_log_logendoffset", p0);
            let hw = sample(&m, "kafka_cluster_partition_highwatermark", p0);
            (ready && end == Some(24.0) && hw == Some(24.0)).then_some(())
        },
    )
    .await;
    caught_up_fetcher_lag(&web).await;
}

/// Caught up, node 3's own fetcher lag for `u`-0 (led by node 1) is 0; the leader shows
/// none for it.
async fn caught_up_fetcher_lag(web: &impl Fn(usize) -> SocketAddr) {
    let follower = "clientid=ReplicaFetcherThread-0-1,partition=0,topic=u";
    let lag = |node: usize| {
        let m = scrape(web(node));
        let of_u = sample(&m, "kafka_server_fetcherlagmetrics_consumerlag", follower);
        let max = sample(
            &m,
            "kafka_server_replicafetchermanager_maxlag",
            "clientid=Replica",
        );
        (of_u, max)
    };
    eventually("node 3's fetcher lag at 0", || async {
        (lag(3) == (Some(0.0), Some(0.0))).then_some(())
    })
    .await;
    assert_eq!(lag(1).0, None, "the leader fetches nothing for u-0");
}
