//! `highwater dump` on files the broker really wrote: after a clean stop every `.log`,
//! `.index` and `.timeindex` of a partition verifies (as the library function and as the
//! binary), nothing is left preallocated, and the records add up; after a kill the
//! untrimmed files still verify; a flipped byte or a segment cut mid-batch fails verify
//! with a message naming the batch's offset.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use highwater::dump::{self, DumpOptions, FileKind, FileReport, Problem};
use highwater::log::batch::{BatchHeader, BatchIter};

/// Small segments and dense indexes, so that a few dozen batches make several segments
/// with several index entries each.
const SMALL_SEGMENTS: [(&str, &str); 2] = [
    ("log.segment.bytes", "2048"),
    ("log.index.interval.bytes", "100"),
];
/// The CreateTime of the first batch: a minute ago. Older timestamps would roll a segment
/// per batch (`segment.ms` counts from the first batch's timestamp, as in Kafka), newer
/// ones are refused (`message.timestamp.after.max.ms`).
fn base_timestamp() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.expect("clock after 1970").as_millis() as i64 - 60_000
}

/// Produces `batches` batches of 1 to 5 records with growing timestamps; returns the
/// number of records.
async fn produce_batches(broker: &TestBroker, batches: i32, base_timestamp: i64) -> usize {
    let mut client = broker.client().await;
    assert_eq!(create_topic(&mut client, "t", 1).await, 0);
    let mut records = 0;
    for n in 0..batches {
        let count = 1 + n % 5;
        let timestamp = base_timestamp + i64::from(n) * 100;
        let response = produce(&mut client, "t", 0, batch(count, -1, -1, timestamp)).await;
        assert_eq!(response.error_code, 0, "batch {n}");
        records += count as usize;
    }
    records
}

fn dump_verify(path: &Path) -> (FileReport, String) {
    let options = DumpOptions {
        verify: true,
        deep: true,
    };
    let mut out = Vec::new();
    let report = dump::dump_file(path, options, &mut out).expect("dump");
    (report, String::from_utf8(out).expect("utf-8"))
}

fn run_binary(files: &[PathBuf]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_highwater"))
        .args(["dump", "--verify", "--deep"])
        .args(files)
        .output()
        .expect("run highwater dump")
}

/// The whole batches of a `.log` file: (position, header).
fn batches_of(path: &Path) -> Vec<(usize, BatchHeader)> {
    let bytes = std::fs::read(path).expect("read log");
    BatchIter::new(&bytes).collect()
}

fn with_suffix(log: &Path, suffix: &str) -> PathBuf {
    log.with_extension(suffix)
}

fn kind(path: &Path) -> Option<FileKind> {
    FileKind::of(path).map(|(kind, _)| kind)
}

#[tokio::test]
async fn every_file_of_a_cleanly_stopped_partition_verifies() {
    // Goal: what the broker writes is consistent by the dump's checks and trimmed after a
    // clean stop. Method: produce into small segments, stop, dump every file with verify.
    let broker = TestBroker::start(&SMALL_SEGMENTS).await;
    let base_timestamp = base_timestamp();
    let produced = produce_batches(&broker, 60, base_timestamp).await;
    let dir = broker.stop().await;
    let files = dump::partition_files(&dir.path().join("t-0")).expect("list");
    let logs = files.iter().filter(|p| kind(p) == Some(FileKind::Log));
    assert!(logs.count() >= 3, "small segments roll: {files:?}");
    let (mut batches, mut records) = (0, 0);
    let mut entries = [0usize; 3];
    for path in &files {
        let (report, text) = dump_verify(path);
        assert!(
            report.passed(),
            "{}: {:?}\n{text}",
            path.display(),
            report.problems
        );
        assert!(
            report.warnings.is_empty(),
            "{}: {:?}",
            path.display(),
            report.warnings
        );
        assert_eq!(report.preallocated, 0, "{} is trimmed", path.display());
        match report.kind {
            FileKind::Log => {
                (batches, records) = (batches + report.items, records + report.records)
            }
            kind => entries[kind as usize] += report.items,
        }
    }
    assert_eq!((batches, records), (60, produced));
    assert!(
        entries[FileKind::OffsetIndex as usize] > 0,
        "index entries written"
    );
    assert!(
        entries[FileKind::TimeIndex as usize] > 0,
        "time index entries written"
    );
    for want in [FileKind::OffsetIndex, FileKind::TimeIndex] {
        let count = files.iter().filter(|p| kind(p) == Some(want)).count();
        assert_eq!(count, files.len() / 3, "every segment has its {want:?}");
    }

    let output = run_binary(&files);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("baseOffset: 0 lastOffset: 0 count: 1 position: 0"));
    let first_record = format!("| offset: 0 CreateTime: {base_timestamp} keySize: 2 valueSize: 2");
    assert!(stdout.contains(&first_record), "{first_record}");
}

#[tokio::test]
async fn untrimmed_files_after_a_kill_verify_as_preallocated_space() {
    // Goal: a crash leaves the active segment's files at their preallocated sizes; the
    // zeros are reported as such and are not a torn tail or index entries.
    let broker = TestBroker::start(&SMALL_SEGMENTS).await;
    produce_batches(&broker, 30, base_timestamp()).await;
    let dir = broker.kill().await;
    let reports = dump::verify_partition_dir(&dir.path().join("t-0")).expect("verify");
    for report in &reports {
        assert!(
            report.passed(),
            "{}: {:?}",
            report.path.display(),
            report.problems
        );
    }
    let active = reports
        .iter()
        .rev()
        .find(|r| r.kind == FileKind::Log)
        .expect("a log");
    assert!(active.preallocated > 0, "the active .log is preallocated");
}

#[tokio::test]
async fn a_flipped_byte_fails_verify_naming_the_offset() {
    // Goal: damage in the middle of a stored batch is caught by its CRC; both the library
    // and the binary name the batch's offset. Method: flip one byte of the 3rd batch.
    let broker = TestBroker::start(&SMALL_SEGMENTS).await;
    produce_batches(&broker, 20, base_timestamp()).await;
    let dir = broker.stop().await;
    let log = dir.path().join("t-0").join("00000000000000000000.log");
    let (position, header) = batches_of(&log)[2];
    let mut bytes = std::fs::read(&log).expect("read");
    bytes[position + header.size / 2] ^= 0x20;
    std::fs::write(&log, &bytes).expect("write");

    let (report, _) = dump_verify(&log);
    let offset = header.base_offset;
    assert!(
        matches!(
            report.problems[..],
            [Problem::BadCrc { base_offset, .. }] if base_offset == offset
        ),
        "{:?}",
        report.problems
    );
    let output = run_binary(&[log]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "verify must fail");
    assert!(
        stderr.contains(&format!("(offset {offset}): stored CRC")),
        "{stderr}"
    );
    assert!(
        stderr.contains("verify failed: 1 problem(s) in 1 of 1 files"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_segment_cut_mid_batch_fails_verify_naming_the_offset() {
    // Goal: a torn tail is reported with the offset of the cut batch, and the index
    // entries that pointed into the lost bytes are reported too. Method: cut the first
    // segment inside the batch its last index entry points at.
    let broker = TestBroker::start(&SMALL_SEGMENTS).await;
    produce_batches(&broker, 20, base_timestamp()).await;
    let dir = broker.stop().await;
    let log = dir.path().join("t-0").join("00000000000000000000.log");
    let index = std::fs::read(with_suffix(&log, "index")).expect("index");
    let last_entry = index.chunks_exact(8).last().expect("an index entry");
    let position = u32::from_be_bytes(last_entry[4..].try_into().expect("4 bytes")) as usize;
    let (_, header) = batches_of(&log)
        .into_iter()
        .find(|(p, _)| *p == position)
        .expect("the entry points at a batch");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .expect("open");
    // Past the header, so the cut batch still names its offset.
    file.set_len((position + header.size - 10) as u64)
        .expect("truncate");
    drop(file);

    let (report, _) = dump_verify(&log);
    let offset = header.base_offset;
    assert!(
        matches!(
            report.problems[..],
            [Problem::CutOffBatch { base_offset, .. }] if base_offset == offset
        ),
        "{:?}",
        report.problems
    );
    assert!(report.problems[0]
        .to_string()
        .contains(&format!("offset {offset}")));
    let (report, _) = dump_verify(&with_suffix(&log, "index"));
    assert!(
        matches!(
            report.problems.last(),
            Some(Problem::IndexPastLogEnd { position: p, .. }) if *p as usize == position
        ),
        "{:?}",
        report.problems
    );
    let (report, _) = dump_verify(&with_suffix(&log, "timeindex"));
    assert!(
        matches!(report.problems.last(), Some(Problem::OffsetNotInLog { .. })),
        "the time index entry of the last batch: {:?}",
        report.problems
    );
    let output = run_binary(&[log]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "verify must fail");
    assert!(
        stderr.contains(&format!(
            "torn tail at position {position}: the batch at offset {offset}"
        )),
        "{stderr}"
    );
}
