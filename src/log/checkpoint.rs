//! Kafka's text checkpoint files (CheckpointFile in Apache Kafka): a version line (`0`),
//! a count line, then one entry per line. Written atomically: a `.tmp` file is written
//! and fsynced, renamed over the old file, and the directory fsynced.

use std::io::Write;
use std::path::Path;

use super::error::LogError;

/// The only checkpoint format version Kafka writes.
pub const VERSION: u32 = 0;

/// Writes `lines` as a checkpoint at `path`, atomically.
pub fn write(path: &Path, lines: &[String]) -> Result<(), LogError> {
    let mut text = format!("{VERSION}\n{}\n", lines.len());
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    write_atomically(path, text.as_bytes())
}

/// Writes `bytes` to `path` through a fsynced temporary file and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    write_replacing(path, bytes, true)
}

/// [`write_atomically`] without its fsyncs, for a caller that syncs the file and its
/// directory later (a roll's sync): after a crash before then, the file may hold nothing
/// or part of `bytes`, so its reader must detect that (a CRC) and fall back.
pub fn write_unsynced(path: &Path, bytes: &[u8]) -> Result<(), LogError> {
    write_replacing(path, bytes, false)
}

fn write_replacing(path: &Path, bytes: &[u8], durable: bool) -> Result<(), LogError> {
    let tmp = path.with_extension("tmp");
    let io = |e| LogError::io(path, e);
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    if durable {
        super::fsync::sync_all(&file).map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)?;
    match path.parent() {
        Some(dir) if durable => sync_dir(dir),
        _ => Ok(()),
    }
}

/// Removes `path`; a file already gone is no error.
pub fn remove_if_exists(path: &Path) -> Result<(), LogError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io(path, e)),
    }
}

/// Fsyncs a directory so that a created or renamed entry survives a crash.
pub fn sync_dir(dir: &Path) -> Result<(), LogError> {
    std::fs::File::open(dir)
        .and_then(|d| super::fsync::sync_all(&d))
        .map_err(|e| LogError::io(dir, e))
}

/// Reads a checkpoint's entry lines; `Ok(None)` when the file does not exist.
pub fn read(path: &Path) -> Result<Option<Vec<String>>, LogError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(path, e)),
    };
    let corrupt = |reason: &str| LogError::CorruptFile {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return Err(corrupt("unknown checkpoint version"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| corrupt("missing entry count"))?;
    let entries: Vec<String> = lines.map(str::to_string).take(count).collect();
    if entries.len() != count {
        return Err(corrupt("fewer entries than the count says"));
    }
    Ok(Some(entries))
}

/// Reads a Java properties file of `key=value` lines (Kafka's `meta.properties`), skipping
/// comments; `None` if the file does not exist.
pub fn read_properties(
    path: &Path,
) -> Result<Option<std::collections::BTreeMap<String, String>>, LogError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(
            text.lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect(),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LogError::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("leader-epoch-checkpoint");
        write(&path, &["0 0".into(), "3 120".into()]).expect("write");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "0\n2\n0 0\n3 120\n"
        );
        assert_eq!(
            read(&path).expect("read"),
            Some(vec!["0 0".into(), "3 120".into()])
        );
    }

    #[test]
    fn refuses_a_short_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        std::fs::write(&path, "0\n3\n1 1\n").expect("write");
        assert!(read(&path).is_err());
    }
}
