//! The real binary as users run it: `highwater serve` in its own process, stopped with
//! SIGTERM (clean: marker written, exit 0) and with SIGKILL (recovery on restart); the
//! data is there after each restart.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

fn spawn(dir: &Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args([
            "serve",
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/config/server.toml"),
        ])
        .args(["--listeners", &format!("127.0.0.1:{port}")])
        .args(["--log-dirs", &dir.display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn highwater")
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
    // Goal (issue 15, fail closed): a SASL_SSL listener or a TLS/SASL/authorizer key is
    // never served as plaintext: the process exits non-zero at once with one line naming
    // the key, and nothing listens. Method: the real binary with a Kafka-style config file.
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let cases = [
        (
            format!("listeners = \"SASL_SSL://127.0.0.1:{port}\"\n"),
            "listeners",
        ),
        (
            format!(
                "listeners = \"PLAINTEXT://127.0.0.1:{port}\"\n\
                 sasl.enabled.mechanisms = \"PLAIN\"\n"
            ),
            "sasl.enabled.mechanisms",
        ),
        (
            format!(
                "listeners = \"PLAINTEXT://127.0.0.1:{port}\"\n\
                 authorizer.class.name = \
                 \"org.apache.kafka.metadata.authorizer.StandardAuthorizer\"\n\
                 super.users = \"User:admin\"\n"
            ),
            "authorizer.class.name",
        ),
        (
            format!(
                "listeners = \"PLAINTEXT://127.0.0.1:{port}\"\n\
                 ssl.keystore.location = \"/etc/kafka/server.keystore.jks\"\n"
            ),
            "ssl.keystore.location",
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
