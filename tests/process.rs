//! The real binary as users run it: `highwater serve` in its own process, stopped with
//! SIGTERM (clean: marker written, exit 0) and with SIGKILL (recovery on restart); the
//! data is there after each restart.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use highwater::testkit::ports::free_port;

fn spawn(dir: &Path, port: u16) -> Child {
    spawn_with(dir, port, &[])
}

/// Starts the binary with `sets` as `--set key=value` overrides.
fn spawn_with(dir: &Path, port: u16, sets: &[&str]) -> Child {
    serve_command(
        Command::new(env!("CARGO_BIN_EXE_highwater")),
        dir,
        port,
        sets,
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("spawn highwater")
}

/// `command` (the binary, or a shell that execs it) given `serve`'s arguments.
fn serve_command(mut command: Command, dir: &Path, port: u16, sets: &[&str]) -> Command {
    command
        .args([
            "serve",
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/config/server.toml"),
        ])
        .args(["--listeners", &format!("127.0.0.1:{port}")])
        .args(["--log-dirs", &dir.display().to_string()])
        .args(["--set", "http.listeners="]);
    for set in sets {
        command.args(["--set", set]);
    }
    command
}

async fn connect(port: u16) -> Client {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(stream) = tokio::net::TcpStream::connect(addr).await {
            drop(stream);
            return Client::connect(addr).await;
        }
        assert!(Instant::now() < deadline, "broker did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([name, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

#[tokio::test]
async fn the_binary_keeps_data_across_sigterm_and_sigkill() {
    // Goal: a clean stop exits 0 and leaves the clean-shutdown marker; a kill -9 does not,
    // and both restarts serve every acknowledged record. Method: real process, raw client.
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut child = spawn(dir.path(), port);
    let mut client = connect(port).await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    assert_eq!(
        produce(&mut client, "t", 0, batch(3, -1, -1, 0))
            .await
            .error_code,
        0
    );
    signal(&child, "-TERM");
    assert!(child.wait().expect("wait").success(), "SIGTERM exits 0");
    assert!(
        dir.path().join(".kafka_cleanshutdown").exists(),
        "clean-shutdown marker"
    );

    let mut child = spawn(dir.path(), port);
    let mut client = connect(port).await;
    assert_eq!(
        produce(&mut client, "t", 0, batch(2, -1, -1, 0))
            .await
            .base_offset,
        3
    );
    signal(&child, "-KILL");
    let _ = child.wait();
    assert!(!dir.path().join(".kafka_cleanshutdown").exists());

    let mut child = spawn(dir.path(), port);
    let mut client = connect(port).await;
    let offsets: Vec<i64> = fetch_all(&mut client, "t", 0)
        .await
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(offsets, (0..5).collect::<Vec<i64>>());
    assert_eq!(
        produce(&mut client, "t", 0, batch(1, -1, -1, 0))
            .await
            .base_offset,
        5
    );
    signal(&child, "-TERM");
    assert!(child.wait().expect("wait").success());
}

#[test]
fn security_settings_that_are_not_enforced_stop_the_start_with_the_key_named() {
    // Goal (issue 15, fail closed): a SASL listener offering a mechanism highwater does not
    // serve (Kafka's default GSSAPI), a SASL key or authorizer it does not enforce (the
    // ZooKeeper-era AclAuthorizer; Kafka's StandardAuthorizer is served), or a TLS
    // setting it cannot honour (a JKS keystore) is never served with less protection: the
    // process exits non-zero at once with one line naming the key, and nothing listens.
    // Method: the real binary with a Kafka-style config file.
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let cases = [
        (
            format!("listeners = \"SASL_PLAINTEXT://127.0.0.1:{port}\"\n"),
            "sasl.enabled.mechanisms",
        ),
        (
            format!(
                "listeners = \"PLAINTEXT://127.0.0.1:{port}\"\n\
                 sasl.kerberos.service.name = \"kafka\"\n"
            ),
            "sasl.kerberos.service.name",
        ),
        (
            format!(
                "listeners = \"PLAINTEXT://127.0.0.1:{port}\"\n\
                 authorizer.class.name = \"kafka.security.authorizer.AclAuthorizer\"\n\
                 super.users = \"User:admin\"\n"
            ),
            "authorizer.class.name",
        ),
        (
            format!(
                "listeners = \"SSL://127.0.0.1:{port}\"\n\
                 ssl.keystore.type = \"JKS\"\n\
                 ssl.keystore.location = \"/etc/kafka/server.keystore.jks\"\n"
            ),
            "ssl.keystore.type",
        ),
    ];
    for (config, key) in cases {
        let file = dir.path().join("server.toml");
        std::fs::write(
            &file,
            format!("{config}log.dirs = \"{}\"\n", dir.path().display()),
        )
        .expect("config");
        let output = Command::new(env!("CARGO_BIN_EXE_highwater"))
            .args(["serve", "--config", &file.display().to_string()])
            .stdin(Stdio::null())
            .output()
            .expect("run highwater");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{key}: refused, not served");
        let refusal: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("refusing to start"))
            .collect();
        assert_eq!(refusal.len(), 1, "{key}: one clear line in {stderr}");
        assert!(refusal[0].contains(key), "{key} named in {}", refusal[0]);
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "nothing listens"
        );
    }
}

#[test]
fn strict_config_refuses_an_unknown_key_and_suggests_the_one_meant() {
    // Goal (issue 13): `--strict-config` makes an unknown key fatal, with one line naming
    // it and the near miss; without the flag the key is ignored with that same warning.
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let file = dir.path().join("server.toml");
    std::fs::write(
        &file,
        format!(
            "listeners = \"PLAINTEXT://127.0.0.1:{port}\"\nlog.dirs = \"{}\"\n\
             log.segment.byte = 1048576\n",
            dir.path().display()
        ),
    )
    .expect("config");
    let output = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["serve", "--strict-config", "--config"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .expect("run highwater");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let refusal: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("refusing to start"))
        .collect();
    assert_eq!(
        refusal,
        [
            "highwater: refusing to start (--strict-config): unknown configuration key \
          log.segment.byte (did you mean log.segment.bytes?)"
        ],
        "{stderr}"
    );
}

#[tokio::test]
async fn a_fresh_start_says_what_it_serves_in_plain_words_and_recovers_nothing() {
    // Goal (issue 13): the start line names the version, roles, listeners and log dirs in
    // words (it was Rust debug output: `roles=Roles { broker: true, … }`), and a new empty
    // directory is not said to be "recovering logs"; a state change is said once.
    let tmp = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let data = tmp.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["serve", "--set", "http.listeners=", "--config"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/config/server.toml"))
        .arg(format!("--listeners=PLAINTEXT://127.0.0.1:{port}"))
        .arg(format!("--log-dirs={}", data.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // The log goes to stderr; read it until the start line, then stop the process.
    let stderr = child.stderr.take().expect("stderr");
    let mut seen = lines_of(stderr);
    let mut log = String::new();
    read_until(&mut seen, &mut log, " started: ", "the start line").await;
    signal(&child, "-TERM");
    while let Some(line) = seen.recv().await {
        log.push_str(&line);
        log.push('\n');
    }
    let status = tokio::task::spawn_blocking(move || child.wait());
    assert!(status.await.expect("join").expect("wait").success());
    let want = format!(
        "highwater {} started: node 1 as broker,controller, Kafka clients on 127.0.0.1:{port} (PLAINTEXT), \
         controllers on none, log.dirs {}, 0 partitions",
        env!("CARGO_PKG_VERSION"),
        data.display()
    );
    assert!(log.contains(&want), "{want} in {log}");
    assert!(!log.contains("recovering logs"), "{log}");
    assert_eq!(log.matches("broker unfenced").count(), 1, "{log}");
}

/// The lines `stderr` gives, read on a thread of their own.
fn lines_of(stderr: std::process::ChildStderr) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (lines, seen) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    seen
}

/// A `/proc/<pid>/status` field in KiB (`VmRSS`, `VmHWM`).
#[tokio::test]
async fn a_partition_holds_one_descriptor_and_a_low_soft_open_file_limit_is_raised() {
    // Goal: a shell's soft limit on open files does not fail the log directory at a few
    // hundred partitions, as it did (three descriptors a partition, the soft limit kept).
    // Method: the binary started under a soft limit of 256, 300 partitions created and
    // written to; the process's limit and its open descriptors read from /proc.
    const PARTITIONS: i32 = 300;
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let shell = {
        let mut shell = Command::new("sh");
        shell.args([
            "-c",
            "ulimit -Sn 256 && exec \"$0\" \"$@\"",
            env!("CARGO_BIN_EXE_highwater"),
        ]);
        shell
    };
    let mut child = serve_command(shell, dir.path(), port, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn highwater");
    let mut client = connect(port).await;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).expect("limits");
    let open_files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files")
        .split_whitespace()
        .skip(3)
        .take(2)
        .collect();
    assert_eq!(
        open_files[0], open_files[1],
        "soft limit raised to the hard one: {limits}"
    );
    let descriptors = || {
        std::fs::read_dir(format!("/proc/{}/fd", child.id()))
            .expect("fd")
            .count()
    };
    let before = descriptors();
    assert_eq!(create_topic(&mut client, "many", PARTITIONS).await, 0);
    for partition in 0..PARTITIONS {
        let response = produce(&mut client, "many", partition, batch(1, -1, -1, 0)).await;
        assert_eq!(response.error_code, 0, "many-{partition}");
    }
    let grown = descriptors() - before;
    assert!(
        grown <= PARTITIONS as usize + 20,
        "{grown} descriptors for {PARTITIONS} partitions"
    );
    signal(&child, "-TERM");
    assert!(child.wait().expect("wait").success());
}

fn status_kib(child: &Child, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .expect("field present");
    line.split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .expect("a number of kB")
}

const MIB: usize = 1024 * 1024;
/// Large frames in flight, each from its own connection.
const HEAVY_CLIENTS: usize = 50;
/// Body bytes each heavy client announces; it sends all but the last one and stalls.
const HEAVY_FRAME_BYTES: usize = 16 * MIB;
/// The broker-wide budget the test configures (`queued.max.request.bytes`).
const BUDGET_BYTES: usize = 64 * MIB;

/// Opens a connection that announces a frame of `HEAVY_FRAME_BYTES` and writes its body,
/// but the last byte, in small chunks, counting the bytes the kernel took into `written`.
async fn heavy_client(addr: SocketAddr, body: bytes::Bytes, written: Arc<AtomicUsize>) {
    use tokio::io::AsyncWriteExt;
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return;
    };
    let length = (HEAVY_FRAME_BYTES as i32).to_be_bytes();
    if stream.write_all(&length).await.is_err() {
        return;
    }
    for chunk in body.chunks(64 * 1024) {
        if stream.write_all(chunk).await.is_err() {
            return;
        }
        written.fetch_add(chunk.len(), Ordering::Relaxed);
    }
    // Hold the connection open with the frame unfinished until the test aborts us.
    std::future::pending::<()>().await;
}

/// Polls until the heavy clients make no progress for a while (the broker stopped reading
/// and the kernel buffers are full) or have sent everything; returns the bytes sent.
async fn wait_until_stalled(written: &AtomicUsize) -> usize {
    let everything = HEAVY_CLIENTS * (HEAVY_FRAME_BYTES - 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = (usize::MAX, Instant::now());
    loop {
        let now = written.load(Ordering::Relaxed);
        if now >= everything / 100 * 99 {
            return now;
        }
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > Duration::from_millis(700) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "heavy clients neither stall nor finish"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn many_stalled_large_frames_keep_memory_bounded_and_other_clients_served() {
    // Goal (issue 11, item 7): 50 connections each holding an unfinished 16 MiB frame make
    // the broker hold about queued.max.request.bytes (64 MiB), not 800 MiB, and a fresh
    // client still gets ApiVersions, CreateTopics, Produce and Metadata answered. Method:
    // the real binary; its peak RSS (VmHWM) is read from /proc once the heavy clients
    // stall (the broker stops reading them; their bytes wait in kernel socket buffers).
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let socket_max = format!("socket.request.max.bytes={}", HEAVY_FRAME_BYTES + MIB);
    let budget = format!("queued.max.request.bytes={BUDGET_BYTES}");
    let mut child = spawn_with(dir.path(), port, &[&socket_max, &budget]);
    let mut client = connect(port).await;
    assert_eq!(create_topic(&mut client, "before", 1).await, 0);
    let baseline_kib = status_kib(&child, "VmRSS:");

    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let body = bytes::Bytes::from(vec![7u8; HEAVY_FRAME_BYTES - 1]);
    let written = Arc::new(AtomicUsize::new(0));
    let heavy: Vec<_> = (0..HEAVY_CLIENTS)
        .map(|_| tokio::spawn(heavy_client(addr, body.clone(), Arc::clone(&written))))
        .collect();
    let sent = wait_until_stalled(&written).await;

    let mut fresh = Client::connect(addr).await;
    let versions = fresh
        .try_call(&kafka_protocol::messages::ApiVersionsRequest::default(), 3)
        .await
        .expect("ApiVersions answered while the heavy clients stall");
    assert_eq!(versions.error_code, 0);
    assert_eq!(create_topic(&mut fresh, "t", 1).await, 0);
    let produced = produce(&mut fresh, "t", 0, batch(3, -1, -1, 0)).await;
    assert_eq!((produced.error_code, produced.base_offset), (0, 0));
    let metadata = fresh
        .call(
            &kafka_protocol::messages::MetadataRequest::default().with_topics(None),
            12,
        )
        .await;
    assert_eq!(metadata.topics.len(), 2, "both topics listed");

    let growth_mib = (status_kib(&child, "VmHWM:").saturating_sub(baseline_kib)) / 1024;
    for task in &heavy {
        task.abort();
    }
    signal(&child, "-TERM");
    assert!(child.wait().expect("wait").success());
    assert!(
        growth_mib < 2 * (BUDGET_BYTES / MIB) as u64,
        "peak RSS grew {growth_mib} MiB (budget {} MiB; clients sent {} MiB)",
        BUDGET_BYTES / MIB,
        sent / MIB
    );
}

/// Starts `highwater dev ARGS` with its temporary directory under `tmp`; returns it and
/// its first stdout line (written once it serves).
async fn spawn_dev(args: &[&str], tmp: &Path) -> (Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .arg("dev")
        .args(args)
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn highwater dev");
    let stdout = child.stdout.take().expect("stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .map(|_| line)
    })
    .await
    .expect("join")
    .expect("first line");
    (child, line)
}

/// Appends the child's log lines to `log` until one contains `needle` (20 s at most).
async fn read_until(
    seen: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    log: &mut String,
    needle: &str,
    what: &str,
) {
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = seen.recv().await {
            log.push_str(&line);
            log.push('\n');
            if line.contains(needle) {
                break;
            }
        }
    });
    read.await
        .unwrap_or_else(|_| panic!("{what} within 20 s:\n{log}"));
}

/// Stops `highwater dev` with SIGTERM: it must exit with status 0 and leave nothing in `tmp`.
async fn stop_dev(mut child: Child, tmp: &Path) {
    signal(&child, "-TERM");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join");
    assert!(status.expect("wait").success());
    assert_eq!(
        std::fs::read_dir(tmp).expect("list").count(),
        0,
        "its data is removed"
    );
}

#[tokio::test]
async fn highwater_dev_prints_its_address_serves_and_removes_its_data_on_sigterm() {
    // Goal (issue 14, test-broker mode): `highwater dev` takes a free port and a temporary
    // directory, prints host:port as its first stdout line only once it serves, and
    // leaves nothing behind when stopped.
    let tmp = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let (mut child, line) = spawn_dev(&[], tmp.path()).await;
    println!("highwater dev: first line after {:?}", started.elapsed());
    let addr: SocketAddr = line.trim().parse().expect("host:port");
    let dirs = || std::fs::read_dir(tmp.path()).expect("list").count();
    assert_eq!(dirs(), 1, "its data directory");
    let mut client = Client::connect(addr).await;
    assert_eq!(
        create_topic(&mut client, "t", 1).await,
        0,
        "serving at once"
    );
    assert_eq!(
        produce(&mut client, "t", 0, batch(3, -1, -1, now_ms()))
            .await
            .error_code,
        0
    );
    signal(&child, "-TERM");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join");
    assert!(status.expect("wait").success());
    assert_eq!(dirs(), 0, "the data directory is removed");
}

#[tokio::test]
async fn highwater_dev_nodes_3_is_a_replicated_cluster_in_one_process() {
    // Goal (issue 14): `highwater dev --nodes 3` prints three bootstrap addresses once all
    // three serve; they form one cluster whose topics are replicated three ways with
    // acks=all writes acknowledged, and a SIGTERM stops it all and removes its data.
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::CreateTopicsRequest;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (child, line) = spawn_dev(&["--nodes", "3"], tmp.path()).await;
    let addrs: Vec<SocketAddr> = line
        .trim()
        .split(',')
        .map(|a| a.parse().expect("host:port"))
        .collect();
    assert_eq!(addrs.len(), 3, "{line}");
    let seen = common::cluster_processes::metadata(addrs[2])
        .await
        .expect("metadata");
    assert_eq!(seen.brokers.len(), 3, "one cluster of three");
    let mut client = Client::connect(addrs[0]).await;
    let create = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name("r3"))
            .with_num_partitions(1)
            .with_replication_factor(-1)])
        .with_timeout_ms(5000);
    assert_eq!(client.call(&create, 7).await.topics[0].error_code, 0);
    let replicas = common::cluster_processes::eventually("r3 led, ISR of three", || async {
        let m = common::cluster_processes::metadata(addrs[0]).await?;
        let p = m
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == "r3"))?
            .partitions
            .first()?
            .clone();
        (p.isr_nodes.len() == 3).then_some(p)
    })
    .await;
    assert_eq!(
        replicas.replica_nodes.len(),
        3,
        "default.replication.factor 3"
    );
    let leader = addrs[replicas.leader_id.0 as usize - 1];
    let mut client = Client::connect(leader).await;
    // The leader may learn of its leadership a moment after the broker that answered the
    // metadata did; a client retries NOT_LEADER_OR_FOLLOWER, so does this test.
    let mut answer = produce(&mut client, "r3", 0, batch(5, -1, -1, now_ms())).await;
    for _ in 0..100 {
        if answer.error_code != 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        answer = produce(&mut client, "r3", 0, batch(5, -1, -1, now_ms())).await;
    }
    assert_eq!(answer.error_code, 0, "acks=all acknowledged by the ISR");
    stop_dev(child, tmp.path()).await;
}

#[tokio::test]
async fn highwater_dev_http_serves_the_fault_api_to_other_languages_test_suites() {
    // Goal (issue 14): `highwater dev --http ADDR` lets a pytest or a Java test kill and
    // restart a node and make a client's next request fail, over plain HTTP.
    let tmp = tempfile::tempdir().expect("tempdir");
    let web: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let web_arg = web.to_string();
    let (child, line) = spawn_dev(&["--nodes", "3", "--http", &web_arg], tmp.path()).await;
    let addrs: Vec<SocketAddr> = line
        .trim()
        .split(',')
        .map(|a| a.parse().expect("host:port"))
        .collect();
    let call = |method: &'static str, path: String| async move {
        // A restart answers once the node serves again (registered, unfenced).
        let wait = Duration::from_secs(60);
        let started = Instant::now();
        let answer = tokio::task::spawn_blocking(move || {
            let answer = http_within(web, method, &path, wait);
            println!("{method} {path}: {:?}", started.elapsed());
            answer
        })
        .await;
        answer.expect("join").expect("an HTTP answer")
    };
    let running = |body: &str, node: usize| -> bool {
        let state: serde_json::Value = serde_json::from_str(body).expect("JSON");
        state["nodes"][node - 1]["running"]
            .as_bool()
            .expect("running")
    };
    let (status, body) = call("GET", "/faults".into()).await;
    assert_eq!(status, 200, "{body}");
    assert!((1..=3).all(|n| running(&body, n)), "{body}");

    let (status, body) = call("POST", "/faults/nodes/3/kill".into()).await;
    assert_eq!(status, 200, "{body}");
    assert!(!running(&body, 3), "{body}");
    assert!(
        Client::try_connect(addrs[2]).await.is_none(),
        "node 3 is gone"
    );
    let (status, body) = call("POST", "/faults/nodes/3/restart".into()).await;
    assert_eq!(status, 200, "{body}");
    assert!(running(&body, 3), "{body}");
    assert!(
        common::cluster_processes::metadata(addrs[2])
            .await
            .is_some(),
        "node 3 serves again"
    );

    let path = "/faults/requests?node=1&api=Produce&count=1&error_code=6";
    assert_eq!(call("POST", path.into()).await.0, 200);
    let mut client = Client::connect(addrs[0]).await;
    create_topic(&mut client, "f", 1).await;
    let first = produce(&mut client, "f", 0, batch(1, -1, -1, now_ms())).await;
    assert_eq!(first.error_code, 6, "the injected NOT_LEADER_OR_FOLLOWER");

    // Refusals say what is wrong.
    let (status, body) = call(
        "POST",
        "/faults/requests?node=1&api=Metadata&count=1&error_code=3".into(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("cannot be answered"), "{body}");
    assert_eq!(call("POST", "/faults/links/cut?a=1".into()).await.0, 400);
    assert_eq!(call("POST", "/faults/nodes/7/kill".into()).await.0, 400);
    assert_eq!(call("POST", "/faults/nowhere".into()).await.0, 404);

    stop_dev(child, tmp.path()).await;
}

#[tokio::test]
async fn sigterm_while_waiting_for_the_quorum_stops_the_start_cleanly() {
    // Bug (stop 23's CI): the SIGTERM handler was installed only once the node served, so a
    // signal during the start killed the process with the signal's default action (no
    // clean exit). A node whose two peer controllers are down waits for the quorum for
    // ever; SIGTERM must still stop it, with exit status 0.
    let tmp = tempfile::tempdir().expect("tempdir");
    let (port, controller) = (free_port(), free_port());
    let voters = format!(
        "controller.quorum.voters=1@127.0.0.1:{controller},2@127.0.0.1:{},3@127.0.0.1:{}",
        free_port(),
        free_port()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["serve", "--config"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/cluster/node-1.toml"
        ))
        .args(["--set", "http.listeners="])
        .args(["--set", "controller.listener.names=CONTROLLER"])
        .arg("--set")
        .arg(format!(
            "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"
        ))
        .args(["--set", &voters])
        .arg(format!("--log-dirs={}", tmp.path().display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut seen = lines_of(stderr);
    let mut log = String::new();
    read_until(
        &mut seen,
        &mut log,
        "initializing the metadata quorum",
        "the quorum start",
    )
    .await;
    // Still starting a moment later: no quorum can form.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(child.try_wait().expect("try_wait").is_none(), "{log}");
    signal(&child, "-TERM");
    let status = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::task::spawn_blocking(move || child.wait()),
    )
    .await
    .expect("stopped within 10 s of SIGTERM")
    .expect("join")
    .expect("wait");
    while let Ok(line) = seen.try_recv() {
        log.push_str(&line);
        log.push('\n');
    }
    assert!(status.success(), "{status:?}: {log}");
}
