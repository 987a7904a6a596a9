//! Fuzzes what a client sends on a SASL listener before and while it authenticates: the
//! input is the client's side of one connection (length-prefixed frames, or raw tokens
//! after a SaslHandshake v0), served by `server::connection::serve_halves` — the path a TCP
//! or TLS connection takes — on a SASL_PLAINTEXT listener offering PLAIN (JAAS users),
//! SCRAM-SHA-256/512 (bootstrap credentials) and OAUTHBEARER (unsecured tokens), with
//! re-authentication every second. The broker is shared by every input of one process.
//!
//! Besides panics and aborts, these are reported as crashes: an answer whose frames do not
//! add up (a length prefix past the end of what was written), and a connection that is
//! neither closed nor done once the input has ended (a hang).
//!
//! Seeds (`gen_seeds`, fuzz/seeds/sasl) are whole logins with each mechanism.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use highwater::api::Broker;
use highwater::config::{BrokerConfig, ConfigMap};
use highwater::server::connection::{self, Limits, Peer};
use highwater::server::memory_pool::MemoryPool;
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long one connection may take once its input has ended (paused time: only the
/// broker's own timers count).
const CONNECTION_WAIT: Duration = Duration::from_secs(60);

struct Harness {
    runtime: tokio::runtime::Runtime,
    broker: Arc<Broker>,
    _dir: tempfile::TempDir,
}

static HARNESS: OnceLock<Harness> = OnceLock::new();

fn harness() -> &'static Harness {
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let dir = tempfile::Builder::new()
            .prefix("highwater-fuzz-sasl-")
            .tempdir()
            .expect("temp dir");
        let mut map = ConfigMap::new();
        for (key, value) in highwater_fuzz::sasl::BROKER_CONFIG {
            map.insert((*key).into(), (*value).into());
        }
        map.insert("log.dirs".into(), dir.path().display().to_string());
        let config = Arc::new(BrokerConfig::from_map(map).expect("config"));
        let broker = runtime.block_on(Broker::open(config)).expect("broker");
        Harness {
            runtime,
            broker: Arc::new(broker),
            _dir: dir,
        }
    })
}

/// Whether `answer` is a whole number of length-prefixed frames (the last one may be
/// cut short only by the connection closing mid-write, which this harness never does).
fn frames_add_up(answer: &[u8]) -> bool {
    let mut rest = answer;
    while rest.len() >= 4 {
        let length = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let Ok(length) = usize::try_from(length) else {
            return false;
        };
        if rest.len() < 4 + length {
            return false;
        }
        rest = &rest[4 + length..];
    }
    rest.is_empty()
}

fuzz_target!(|input: &[u8]| {
    let harness = harness();
    let broker = Arc::clone(&harness.broker);
    let listener = &broker.config.listeners[0];
    let peer = Peer {
        client: "127.0.0.1:1".parse().expect("address"),
        listener: listener.name.as_str().into(),
        sasl: listener.sasl.clone().map(Arc::new),
        principal: connection::ANONYMOUS.into(),
    };
    let limits = Limits {
        frame_bytes_max: broker.config.socket_request_max_bytes,
        queued_requests_max: broker.config.queued_max_requests,
    };
    let input = input.to_vec();
    harness.runtime.block_on(async move {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let (read_half, write_half) = tokio::io::split(server);
        let served = tokio::spawn(connection::serve_halves(
            broker,
            read_half,
            write_half,
            peer,
            limits,
            MemoryPool::new(None),
        ));
        let talk = async {
            // The broker may close before it has read everything: a refused write is fine.
            let _ = client.write_all(&input).await;
            let _ = client.shutdown().await;
            let mut answer = Vec::new();
            let _ = client.read_to_end(&mut answer).await;
            answer
        };
        let answer = tokio::time::timeout(CONNECTION_WAIT, talk)
            .await
            .expect("the connection ends once the client's input has");
        tokio::time::timeout(CONNECTION_WAIT, served)
            .await
            .expect("the connection's task ends")
            .expect("the connection's task does not panic");
        assert!(frames_add_up(&answer), "answer frames do not add up");
    });
});
