//! Fuzzes one request frame (the bytes after the 4-byte length prefix) through the path a
//! connection takes: `parse_request`, then `api::handle` against a real broker whose log
//! directory is a temporary directory under /tmp. The broker is shared by the inputs of one
//! process, so topics created or records produced by one input are seen by the next; it is
//! replaced by a fresh one (new directory) once it hosts more than `PARTITIONS_MAX`
//! partitions. A crash may therefore depend on earlier inputs: rerun the crashing input
//! alone first, then with the corpus.
//!
//! Besides panics and aborts, these are reported as crashes:
//! - `HandlerError::Encode`: the broker built a response it cannot encode;
//! - a response frame whose length prefix is wrong, or whose header and body do not decode
//!   back (fully) as the response type of the request's API and version.
//!
//! Inputs that would create more than `PARTITIONS_CREATED_MAX` partitions are skipped (each
//! costs several fsyncs).
//!
//! To get past the record batch CRC check, a Produce request whose correlation id is odd
//! has the CRC32C of every batch in its records recomputed before it is handled (the
//! request is decoded, patched and re-encoded); even correlation ids are handled as sent.

#![no_main]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use highwater::api::{self, Broker, HandlerError, Outcome, Request};
use highwater::config::{BrokerConfig, ConfigMap};
use highwater::controller::PARTITIONS_PER_TOPIC_MAX;
use highwater::server::connection::parse_request;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use libfuzzer_sys::fuzz_target;

/// Prefix of the per-process data directories under the system temp dir.
const DIR_PREFIX: &str = "highwater-fuzz-";
/// Past this many partitions (Metadata auto-creates a topic per fuzzed name, and each
/// change rewrites the whole metadata snapshot) the broker is replaced by a fresh one on a
/// new directory, to keep executions fast.
const PARTITIONS_MAX: usize = 2_000;

struct Harness {
    runtime: tokio::runtime::Runtime,
    client: SocketAddr,
    /// The current broker and its data directory.
    broker: Mutex<Option<(Broker, PathBuf)>>,
}

static HARNESS: OnceLock<Harness> = OnceLock::new();
/// The data directory in use, for the `atexit` clean-up.
static DATA_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);

extern "C" {
    fn atexit(callback: extern "C" fn()) -> std::os::raw::c_int;
}

/// Removes this process's data directory; libFuzzer ends a clean run with `exit()`.
extern "C" fn remove_data_dir() {
    if let Ok(dir) = DATA_DIR.lock() {
        if let Some(dir) = dir.as_ref() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Removes data directories left by earlier fuzzing processes that are gone (a crash
/// ends libFuzzer with `_Exit`, which skips `atexit`).
fn remove_stale_dirs(tmp: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(DIR_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !PathBuf::from(format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Opens a broker on a new temporary directory and replays the set-up requests.
fn open_broker(runtime: &tokio::runtime::Runtime, client: SocketAddr) -> (Broker, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{DIR_PREFIX}{}-", std::process::id()))
        .tempdir_in(std::env::temp_dir())
        .expect("temp dir")
        .keep();
    *DATA_DIR.lock().expect("data dir lock") = Some(dir.clone());
    let mut map = ConfigMap::new();
    map.insert("log.dirs".into(), dir.display().to_string());
    map.insert("listeners".into(), "PLAINTEXT://127.0.0.1:9092".into());
    let config = Arc::new(BrokerConfig::from_map(map).expect("config"));
    let broker = runtime.block_on(Broker::open(config)).expect("broker");
    for frame in highwater_fuzz::setup() {
        let request =
            parse_request(frame, client, &"PLAINTEXT".into()).expect("setup request parses");
        let outcome = runtime.block_on(api::handle(&broker, &request));
        outcome.expect("setup request is handled");
    }
    (broker, dir)
}

fn harness() -> &'static Harness {
    HARNESS.get_or_init(|| {
        remove_stale_dirs(&std::env::temp_dir());
        // SAFETY: registers a plain `extern "C" fn()` with the C runtime.
        unsafe { atexit(remove_data_dir) };
        // Paused time auto-advances when the runtime is idle: Fetch long polls end at once.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        let client = "127.0.0.1:1".parse().expect("address");
        let broker = open_broker(&runtime, client);
        Harness {
            runtime,
            client,
            broker: Mutex::new(Some(broker)),
        }
    })
}

/// Replaces the broker by a fresh one once it hosts more than [`PARTITIONS_MAX`].
fn recycle_if_large(harness: &Harness, slot: &mut Option<(Broker, PathBuf)>) {
    let partitions: usize = match slot.as_ref() {
        Some((broker, _)) => broker
            .image()
            .topics
            .values()
            .map(|t| t.partitions.len())
            .sum(),
        None => 0,
    };
    if slot.is_some() && partitions <= PARTITIONS_MAX {
        return;
    }
    if let Some((broker, dir)) = slot.take() {
        drop(broker);
        let _ = std::fs::remove_dir_all(dir);
    }
    *slot = Some(open_broker(&harness.runtime, harness.client));
}

/// Partitions one input may create. Creating one costs several fsyncs (~5 ms here), and a
/// request may create up to 10,000 per topic: such inputs are skipped, not handled, or
/// they would bring the run down to a few executions per second. Counts past the
/// per-topic limit are still handled (they are refused before any file is made).
const PARTITIONS_CREATED_MAX: usize = 64;

/// Whether `request` would create more than [`PARTITIONS_CREATED_MAX`] partitions.
fn creates_many_partitions(request: &Request) -> bool {
    let creatable = |count: i32| match count {
        1..=PARTITIONS_PER_TOPIC_MAX => count as usize,
        _ => 0,
    };
    let total: usize = match request.api_key {
        ApiKey::CreateTopics => match request.decode::<CreateTopicsRequest>() {
            Ok(body) if !body.validate_only => body
                .topics
                .iter()
                .map(|t| match t.assignments.is_empty() {
                    true => creatable(t.num_partitions),
                    false => t.assignments.len(),
                })
                .sum(),
            _ => 0,
        },
        ApiKey::CreatePartitions => match request.decode::<CreatePartitionsRequest>() {
            Ok(body) if !body.validate_only => body.topics.iter().map(|t| creatable(t.count)).sum(),
            _ => 0,
        },
        _ => 0,
    };
    total > PARTITIONS_CREATED_MAX
}

/// Recomputes the CRC32C of each complete v2 batch in `records`.
fn fix_crcs(records: &Bytes) -> Bytes {
    let mut bytes = records.to_vec();
    let mut at = 0usize;
    while bytes.len() - at >= 61 {
        let length =
            i32::from_be_bytes([bytes[at + 8], bytes[at + 9], bytes[at + 10], bytes[at + 11]]);
        let Ok(length) = usize::try_from(length) else {
            break;
        };
        let end = at + 12 + length;
        if length < 9 || end > bytes.len() {
            break;
        }
        let crc = crc32c::crc32c(&bytes[at + 21..end]);
        bytes[at + 17..at + 21].copy_from_slice(&crc.to_be_bytes());
        at = end;
    }
    Bytes::from(bytes)
}

/// For a Produce request with an odd correlation id: the same request with valid CRCs.
fn with_valid_crcs(request: Request) -> Request {
    if request.api_key != ApiKey::Produce || request.header.correlation_id & 1 == 0 {
        return request;
    }
    let version = request.version();
    let mut body = request.body.clone();
    let Ok(mut produce) = ProduceRequest::decode(&mut body, version) else {
        return request;
    };
    for topic in &mut produce.topic_data {
        for partition in &mut topic.partition_data {
            if let Some(records) = &partition.records {
                partition.records = Some(fix_crcs(records));
            }
        }
    }
    let mut encoded = BytesMut::new();
    if produce.encode(&mut encoded, version).is_err() {
        return request;
    }
    Request {
        body: encoded.freeze(),
        ..request
    }
}

/// Decodes a response header and body of type `R`, which must use every byte.
fn check_decodes<R: Decodable + HeaderVersion>(mut frame: Bytes, version: i16) {
    let header = ResponseHeader::decode(&mut frame, R::header_version(version))
        .unwrap_or_else(|e| panic!("response header does not decode: {e}"));
    let _ = header;
    R::decode(&mut frame, version)
        .unwrap_or_else(|e| panic!("response body does not decode at v{version}: {e}"));
    assert!(
        frame.is_empty(),
        "{} bytes left after the response body",
        frame.len()
    );
}

/// Checks that a response frame is what a client of that API and version can read.
fn check_response(request: &Request, chunks: &[Bytes]) {
    let mut whole = BytesMut::new();
    for chunk in chunks {
        whole.extend_from_slice(chunk);
    }
    assert!(
        whole.len() >= 4,
        "response frame shorter than its length prefix"
    );
    let length = i32::from_be_bytes([whole[0], whole[1], whole[2], whole[3]]);
    assert_eq!(
        usize::try_from(length).ok(),
        Some(whole.len() - 4),
        "response length prefix does not match the frame"
    );
    let body = whole.freeze().slice(4..);
    let served = api::versions::is_served(request.api_key, request.version());
    let version = if request.api_key == ApiKey::ApiVersions && !served {
        0
    } else {
        request.version()
    };
    match request.api_key {
        ApiKey::Produce => check_decodes::<ProduceResponse>(body, version),
        ApiKey::Fetch => check_decodes::<FetchResponse>(body, version),
        ApiKey::ListOffsets => check_decodes::<ListOffsetsResponse>(body, version),
        ApiKey::Metadata => check_decodes::<MetadataResponse>(body, version),
        ApiKey::ApiVersions => check_decodes::<ApiVersionsResponse>(body, version),
        ApiKey::CreateTopics => check_decodes::<CreateTopicsResponse>(body, version),
        ApiKey::DeleteTopics => check_decodes::<DeleteTopicsResponse>(body, version),
        ApiKey::CreatePartitions => check_decodes::<CreatePartitionsResponse>(body, version),
        ApiKey::InitProducerId => check_decodes::<InitProducerIdResponse>(body, version),
        ApiKey::OffsetForLeaderEpoch => {
            check_decodes::<OffsetForLeaderEpochResponse>(body, version)
        }
        ApiKey::DescribeConfigs => check_decodes::<DescribeConfigsResponse>(body, version),
        ApiKey::DescribeCluster => check_decodes::<DescribeClusterResponse>(body, version),
        ApiKey::FindCoordinator => check_decodes::<FindCoordinatorResponse>(body, version),
        // An API served after this target was written: its header at least must decode.
        other => {
            let mut body = body;
            ResponseHeader::decode(&mut body, other.response_header_version(version))
                .unwrap_or_else(|e| panic!("{other:?} response header does not decode: {e}"));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let harness = harness();
    let Ok(request) = parse_request(
        Bytes::copy_from_slice(data),
        harness.client,
        &"PLAINTEXT".into(),
    ) else {
        return;
    };
    if creates_many_partitions(&request) {
        return;
    }
    let request = with_valid_crcs(request);
    let mut slot = harness.broker.lock().expect("broker lock");
    let Some((broker, _)) = slot.as_ref() else {
        unreachable!("a broker is always open between inputs");
    };
    let outcome = harness.runtime.block_on(api::handle(broker, &request));
    match outcome {
        Ok(Outcome::Respond(frame)) => check_response(&request, &frame.chunks),
        Ok(Outcome::NoResponse) => {}
        Err(HandlerError::Encode(reason)) => panic!(
            "cannot encode the response to {:?} v{}: {reason}",
            request.api_key,
            request.version()
        ),
        Err(HandlerError::Decode(_) | HandlerError::UnsupportedVersion { .. }) => {}
    }
    recycle_if_large(harness, &mut slot);
});
