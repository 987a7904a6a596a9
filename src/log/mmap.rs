//! One of the two places with `unsafe` (the other is `api::response`'s `BufMut`): a file mapped
//! into memory with a fixed capacity, written by one writer and read by many.
//!
//! Writes go through the file (pwrite), reads through the map: both see the same page
//! cache. Writing through the map instead would fault in each fresh page of the sparse
//! file first, which the kernel zero-fills (with read-ahead, in large folios) before the
//! copy overwrites it: that zeroing was most of the broker's CPU under produce load.
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
        let map = match capacity {
            0 => None,
            _ => Some(
                MmapOptions::new()
                    .len(capacity)
                    .map_raw_read_only(&file)
                    .map_err(io)?,
            ),
        };
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
        assert!(
            start <= end && end <= self.capacity,
            "read outside the mapping"
        );
        let Some(map) = &self.map else { return &[] };
        // SAFETY: in range (asserted); published bytes are never written again while a
        // reader may hold them (see the type's thread-safety note).
        unsafe { std::slice::from_raw_parts(map.as_ptr().add(start), end - start) }
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
