//! One of the two places with `unsafe` (the other is `api::response`'s `BufMut`): a file mapped
//! into memory with a fixed capacity, written by one writer and read by many.
//!
//! A segment's log ([`MappedFile`]) is written through the file (pwrite) and read through
//! the map: both see the same page cache. Writing through the map instead would fault in each fresh page of the sparse
//! file first, which the kernel zero-fills (with read-ahead, in large folios) before the
//! copy overwrites it: that zeroing was most of the broker's CPU under produce load.
//!
//! An index ([`WritableMap`]) takes an entry every `index.interval.bytes` of log, so its
//! page faults cost nothing worth a file descriptor: it is written through a shared map and
//! holds no descriptor open (as Kafka's indexes), which leaves a partition one descriptor,
//! its active segment's log. Its blocks are allocated (fallocate) a chunk ahead of the
//! writes, so that a full disk is an error from that call, never a SIGBUS in a page fault.
//!
//! Thread safety: the owner of a segment or index (under the partition's write lock) is
//! the only writer and writes only past the length it has published; readers only read
//! below a published length. Published bytes are never rewritten while readers may hold
//! them, so a `&[u8]` handed out below the published length never aliases a write.
#![allow(unsafe_code)]

use memmap2::{MmapOptions, MmapRaw};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::LogError;

/// A file of `capacity` bytes, mapped read-only into memory and written through the file.
#[derive(Debug)]
pub struct MappedFile {
    path: PathBuf,
    file: File,
    /// `None` for a zero-length file (a mapping cannot be empty).
    map: Option<MmapRaw>,
    capacity: usize,
}

impl MappedFile {
    /// Opens (creating if needed) `path`, grows it to at least `capacity` bytes and maps it
    /// for reading.
    pub fn open(path: &Path, capacity: usize) -> Result<MappedFile, LogError> {
        let (file, map, capacity) = open_mapped(path, capacity, false)?;
        let path = path.to_path_buf();
        Ok(MappedFile {
            path,
            file,
            map,
            capacity,
        })
    }

    /// The path of the mapped file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mapped size in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Writes `parts`, one after the other, at `position` (pwrite; the map sees them).
    ///
    /// The caller must be the single writer and `position` must be at or past every length
    /// it has published to readers (no reader holds a slice of the bytes written).
    pub fn write_at(&self, position: usize, parts: &[&[u8]]) -> Result<(), LogError> {
        let length: usize = parts.iter().map(|p| p.len()).sum();
        assert!(
            position + length <= self.capacity,
            "write past the mapped capacity"
        );
        let mut at = position as u64;
        for part in parts {
            self.file
                .write_all_at(part, at)
                .map_err(|e| LogError::io(&self.path, e))?;
            at += part.len() as u64;
        }
        Ok(())
    }

    /// The bytes in `[start, end)`, which the caller has published (or is the writer).
    pub fn slice(&self, start: usize, end: usize) -> &[u8] {
        // Published bytes are never written again while a reader may hold them (see the
        // type's thread-safety note).
        slice_of(self.map.as_ref(), self.capacity, start, end)
    }

    /// Writes the file's dirty pages to disk (fdatasync; nothing is written through the
    /// map, so there is nothing to msync).
    pub fn flush(&self) -> Result<(), LogError> {
        super::fsync::sync_data(&self.file).map_err(|e| LogError::io(&self.path, e))
    }

    /// Cuts the file to `length` bytes and grows it back to its capacity, so that everything
    /// after `length` reads as zeros (the tail's blocks are freed, nothing is written).
    /// Used only while opening, before any reader exists.
    pub fn truncate_and_regrow(&self, length: usize) -> Result<(), LogError> {
        let io = |e| LogError::io(&self.path, e);
        self.file.set_len(length as u64).map_err(io)?;
        self.file.set_len(self.capacity as u64).map_err(io)
    }

    /// Shrinks the file on disk to `length` bytes. The mapping keeps its size; bytes past
    /// `length` must never be read again.
    pub fn trim(&self, length: usize) -> Result<(), LogError> {
        self.flush()?;
        self.shrink(length)
    }

    /// [`MappedFile::trim`] without the flush: the caller syncs the file later (through
    /// [`MappedFile::sync_handle`]) before counting on its contents.
    pub fn shrink(&self, length: usize) -> Result<(), LogError> {
        self.file
            .set_len(length as u64)
            .map_err(|e| LogError::io(&self.path, e))
    }

    /// A second handle on the file (the same open file), to sync it without the mapping.
    pub fn sync_handle(&self) -> Result<(PathBuf, File), LogError> {
        let file = self
            .file
            .try_clone()
            .map_err(|e| LogError::io(&self.path, e))?;
        Ok((self.path.clone(), file))
    }
}

/// Opens (creating if needed) `path` for reading and writing, grows it to at least
/// `capacity` bytes and maps it (for writing too when `writable`); returns the file, its map
/// (`None` when empty: a mapping cannot be) and its size.
fn open_mapped(
    path: &Path,
    capacity: usize,
    writable: bool,
) -> Result<(File, Option<MmapRaw>, usize), LogError> {
    let io = |e| LogError::io(path, e);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io)?;
    let length = file.metadata().map_err(io)?.len() as usize;
    let capacity = capacity.max(length);
    if length < capacity {
        file.set_len(capacity as u64).map_err(io)?;
    }
    let mut options = MmapOptions::new();
    options.len(capacity);
    let map = match (capacity, writable) {
        (0, _) => None,
        (_, false) => Some(options.map_raw_read_only(&file).map_err(io)?),
        (_, true) => Some(options.map_raw(&file).map_err(io)?),
    };
    Ok((file, map, capacity))
}

/// The bytes in `[start, end)` of `map` (of `capacity` bytes), which no write may touch
/// while the slice is held (each caller says why none does).
fn slice_of(map: Option<&MmapRaw>, capacity: usize, start: usize, end: usize) -> &[u8] {
    assert!(start <= end && end <= capacity, "read outside the mapping");
    let Some(map) = map else { return &[] };
    // SAFETY: in range (asserted), and the map outlives the slice (borrowed for as long);
    // no write to these bytes while it is held (the caller's guarantee above).
    unsafe { std::slice::from_raw_parts(map.as_ptr().add(start), end - start) }
}

/// A file of `capacity` bytes mapped for reading and writing, with no descriptor kept open.
#[derive(Debug)]
pub struct WritableMap {
    path: PathBuf,
    /// `None` for a zero-length file (a mapping cannot be empty).
    map: Option<MmapRaw>,
    capacity: usize,
    /// The file's blocks below this offset are allocated (or hold what was there at open).
    allocated: usize,
}

/// How far ahead of the writes a [`WritableMap`]'s blocks are allocated.
const ALLOCATION_CHUNK: usize = 64 * 1024;

impl WritableMap {
    /// Opens (creating if needed) `path`, grows it to at least `capacity` bytes and maps it.
    pub fn open(path: &Path, capacity: usize) -> Result<WritableMap, LogError> {
        let (_, map, capacity) = open_mapped(path, capacity, true)?;
        Ok(WritableMap {
            path: path.to_path_buf(),
            map,
            capacity,
            allocated: 0,
        })
    }

    /// The mapped size in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The bytes in `[start, end)`.
    pub fn slice(&self, start: usize, end: usize) -> &[u8] {
        // Writes take `&mut self`, so no slice is held across one.
        slice_of(self.map.as_ref(), self.capacity, start, end)
    }

    /// Writes `bytes` at `position`, past everything read so far (an append), after making
    /// sure the file's blocks under them exist.
    pub fn write_at(&mut self, position: usize, bytes: &[u8]) -> Result<(), LogError> {
        let end = position + bytes.len();
        assert!(end <= self.capacity, "write past the mapped capacity");
        if end > self.allocated {
            let from = self.allocated.max(position);
            let to = end.next_multiple_of(ALLOCATION_CHUNK).min(self.capacity);
            self.allocate(from, to)?;
            self.allocated = to;
        }
        let Some(map) = &self.map else { return Ok(()) };
        // SAFETY: in range (asserted); `&mut self` means no slice of the map is held.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                map.as_mut_ptr().add(position),
                bytes.len(),
            )
        };
        Ok(())
    }

    /// Allocates the file's blocks in `[from, to)`, which hold nothing yet: fallocate, or
    /// zeros written where the file system has no fallocate.
    fn allocate(&self, from: usize, to: usize) -> Result<(), LogError> {
        use rustix::fs::{fallocate, FallocateFlags};
        let io = |e| LogError::io(&self.path, e);
        let file = OpenOptions::new()
            .write(true)
            .open(&self.path)
            .map_err(io)?;
        match fallocate(
            &file,
            FallocateFlags::KEEP_SIZE,
            from as u64,
            (to - from) as u64,
        ) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::OPNOTSUPP) => file
                .write_all_at(&vec![0; to - from], from as u64)
                .map_err(io),
            Err(errno) => Err(io(errno.into())),
        }
    }

    /// Writes the map's dirty pages to disk (msync).
    pub fn flush(&self) -> Result<(), LogError> {
        match &self.map {
            Some(map) => map.flush().map_err(|e| LogError::io(&self.path, e)),
            None => Ok(()),
        }
    }

    /// Shrinks the file on disk to `length` bytes. The mapping keeps its size; bytes past
    /// `length` must never be read or written again.
    pub fn shrink(&self, length: usize) -> Result<(), LogError> {
        let io = |e| LogError::io(&self.path, e);
        let file = OpenOptions::new()
            .write(true)
            .open(&self.path)
            .map_err(io)?;
        file.set_len(length as u64).map_err(io)
    }

    /// A descriptor of the file, to sync it later without the mapping (an fsync reaches the
    /// pages written through the map: they are the file's page cache).
    pub fn sync_handle(&self) -> Result<(PathBuf, File), LogError> {
        let file = File::open(&self.path).map_err(|e| LogError::io(&self.path, e))?;
        Ok((self.path.clone(), file))
    }
}

/// A view of a published region of a mapped file, owned so that a `Bytes` can point into
/// the map without copying (zero-copy fetch).
#[derive(Debug, Clone)]
pub struct MappedRegion {
    pub file: Arc<MappedFile>,
    pub start: usize,
    pub end: usize,
}

impl AsRef<[u8]> for MappedRegion {
    fn as_ref(&self) -> &[u8] {
        self.file.slice(self.start, self.end)
    }
}

impl MappedRegion {
    /// Turns the region into `Bytes` that keep the map alive without copying it.
    pub fn into_bytes(self) -> bytes::Bytes {
        bytes::Bytes::from_owner(self)
    }
}
