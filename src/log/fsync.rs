//! Every fsync the broker makes goes through here, so that a node whose data is thrown
//! away at exit (`testkit`, `highwater dev`: a temporary directory) can skip them all:
//! nothing of such a node outlives the process, and within the process the page cache
//! already holds every write (a killed test node keeps what it wrote, as a process does
//! after `kill -9`). Only [`skip_in_this_process`] turns them off; a node started by
//! `highwater serve` always syncs.

use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};

static SKIP: AtomicBool = AtomicBool::new(false);

/// Makes every later fsync of this process a no-op (for ephemeral test nodes only).
pub fn skip_in_this_process() {
    if !SKIP.swap(true, Ordering::Relaxed) {
        tracing::info!("fsyncs off in this process: its data is temporary");
    }
}

/// Whether this process skips its fsyncs.
pub fn skipped() -> bool {
    SKIP.load(Ordering::Relaxed)
}

/// `file.sync_all()` unless skipped.
pub fn sync_all(file: &File) -> std::io::Result<()> {
    match SKIP.load(Ordering::Relaxed) {
        true => Ok(()),
        false => file.sync_all(),
    }
}

/// `file.sync_data()` unless skipped.
pub fn sync_data(file: &File) -> std::io::Result<()> {
    match SKIP.load(Ordering::Relaxed) {
        true => Ok(()),
        false => file.sync_data(),
    }
}
