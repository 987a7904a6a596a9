//! Encoding responses into frames without copying record data.
//!
//! A [`ResponseBuf`] is the codec's output buffer. When the codec writes a slice that lies
//! inside one of the record `Bytes` a handler registered (the batches read from a segment
//! map), the buffer keeps a reference to that memory instead of copying it: a fetch
//! response goes out as a list of chunks, small encoded headers between large zero-copy
//! views of the segment files.
#![allow(unsafe_code)]

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use super::{HandlerError, Request};

/// Slices at least this long are looked up among the registered record bytes.
const ZERO_COPY_BYTES_MIN: usize = 512;

/// A length-prefixed response frame, as chunks to write in order.
#[derive(Debug, Default)]
pub struct ResponseFrame {
    pub chunks: Vec<Bytes>,
}

impl ResponseFrame {
    /// Total bytes of the frame, length prefix included.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }

    /// Whether the frame is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The codec's output buffer: encoded bytes plus zero-copy references to record bytes.
#[derive(Debug)]
pub struct ResponseBuf {
    chunks: Vec<Bytes>,
    current: BytesMut,
    /// Bytes written into earlier chunks.
    sealed: usize,
    sources: Vec<Bytes>,
}

fn contains(source: &Bytes, slice: &[u8]) -> bool {
    let start = source.as_ptr() as usize;
    let at = slice.as_ptr() as usize;
    at >= start && at + slice.len() <= start + source.len()
}

impl ResponseBuf {
    /// A buffer that will not copy slices of `sources`.
    pub fn new(sources: Vec<Bytes>) -> Self {
        ResponseBuf {
            chunks: Vec::new(),
            current: BytesMut::with_capacity(256),
            sealed: 0,
            sources,
        }
    }

    fn seal_current(&mut self) {
        if !self.current.is_empty() {
            self.sealed += self.current.len();
            self.chunks.push(self.current.split().freeze());
        }
    }

    /// Finishes the buffer into a frame's chunks.
    pub fn finish(mut self) -> Vec<Bytes> {
        self.seal_current();
        self.chunks
    }
}

// SAFETY: every method delegates to the inner `BytesMut`, whose `BufMut` implementation
// upholds the trait's contract; `put_slice` only adds whole initialised chunks.
unsafe impl BufMut for ResponseBuf {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller guarantees `cnt` bytes of `chunk_mut` were initialised, and
        // `chunk_mut` is the inner buffer's.
        unsafe { self.current.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= ZERO_COPY_BYTES_MIN {
            if let Some(source) = self.sources.iter().find(|s| contains(s, src)) {
                let view = source.slice_ref(src);
                self.seal_current();
                self.sealed += view.len();
                self.chunks.push(view);
                return;
            }
        }
        self.current.extend_from_slice(src);
    }
}

impl ByteBufMut for ResponseBuf {
    fn offset(&self) -> usize {
        self.sealed + self.current.len()
    }

    fn seek(&mut self, offset: usize) {
        assert!(offset >= self.sealed, "cannot seek into a sealed chunk");
        self.current.resize(offset - self.sealed, 0);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        assert!(r.start >= self.sealed, "cannot rewrite a sealed chunk");
        &mut self.current[r.start - self.sealed..r.end - self.sealed]
    }
}

/// Encodes a response frame: length prefix, response header, body.
pub fn encode<R: Encodable>(
    request: &Request,
    body: &R,
    header_version: i16,
) -> Result<ResponseFrame, HandlerError> {
    encode_with_sources(request, body, header_version, Vec::new())
}

/// Like [`encode`], without copying any slice of `sources` (zero-copy record bytes).
pub fn encode_with_sources<R: Encodable>(
    request: &Request,
    body: &R,
    header_version: i16,
    sources: Vec<Bytes>,
) -> Result<ResponseFrame, HandlerError> {
    let fail = |e: anyhow::Error| HandlerError::Encode(e.to_string());
    let header = ResponseHeader::default().with_correlation_id(request.header.correlation_id);
    let size = header.compute_size(header_version).map_err(fail)?
        + body.compute_size(request.version()).map_err(fail)?;
    let mut buf = ResponseBuf::new(sources);
    buf.put_i32(
        i32::try_from(size).map_err(|_| HandlerError::Encode("response too large".into()))?,
    );
    header.encode(&mut buf, header_version).map_err(fail)?;
    body.encode(&mut buf, request.version()).map_err(fail)?;
    let frame = ResponseFrame {
        chunks: buf.finish(),
    };
    debug_assert_eq!(frame.len(), size + 4, "encoded size matches computed size");
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_of_sources_are_referenced_not_copied() {
        let source = Bytes::from(vec![7u8; 4096]);
        let mut buf = ResponseBuf::new(vec![source.clone()]);
        buf.put_i32(1);
        buf.put_slice(&source[100..2100]);
        buf.put_slice(&[1, 2, 3]);
        let chunks = buf.finish();
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[1].as_ptr(), source[100..].as_ptr());
        assert_eq!(chunks[1].len(), 2000);
        assert_eq!(&chunks[2][..], &[1, 2, 3]);
    }
}
