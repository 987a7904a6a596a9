//! One client connection: length-prefixed frames are read by a reader task into a bounded
//! queue (at most `queued.max.requests` read but unanswered), handled one at a time in
//! arrival order, and answered in that same order; responses are flushed when the queue
//! is empty, so pipelined requests share socket writes.
//!
//! A frame that cannot be a request (negative or oversized length, truncated body, unknown
//! API key, unsupported version, undecodable header or body) closes this connection with
//! the reason logged; other connections are not affected.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::api::{self, Broker, Outcome, Request};

/// Bytes of socket write buffering per connection.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;
/// Bytes a frame needs before its header can be read (key, version, correlation id).
const HEADER_BYTES_MIN: usize = 8;

/// Limits applied to every connection.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `socket.request.max.bytes`.
    pub frame_bytes_max: usize,
    /// `queued.max.requests`, per connection.
    pub queued_requests_max: usize,
}

/// Why a connection was closed by the broker.
#[derive(Debug, thiserror::Error)]
pub enum CloseReason {
    #[error("frame length {length} is outside [0, {max}]")]
    FrameLength { length: i64, max: usize },
    #[error("frame truncated: {got} of {expected} bytes")]
    Truncated { got: usize, expected: usize },
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("cannot decode request header of {api_key:?} v{version}: {reason}")]
    Header {
        api_key: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("{api_key:?} v{version}: {source}")]
    Handler {
        api_key: ApiKey,
        version: i16,
        #[source]
        source: api::HandlerError,
    },
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Option<Bytes>, CloseReason> {
    let mut length = [0u8; 4];
    match reader.read_exact(&mut length).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let length = i32::from_be_bytes(length);
    if length < 0 || length as usize > max {
        return Err(CloseReason::FrameLength {
            length: i64::from(length),
            max,
        });
    }
    let expected = length as usize;
    let mut body = Vec::with_capacity(expected.min(WRITE_BUFFER_BYTES));
    reader.take(expected as u64).read_to_end(&mut body).await?;
    if body.len() != expected {
        return Err(CloseReason::Truncated {
            got: body.len(),
            expected,
        });
    }
    Ok(Some(Bytes::from(body)))
}

/// Splits a frame into its decoded header and body.
pub fn parse_request(mut frame: Bytes, client: SocketAddr) -> Result<Request, CloseReason> {
    if frame.len() < HEADER_BYTES_MIN {
        return Err(CloseReason::Truncated {
            got: frame.len(),
            expected: HEADER_BYTES_MIN,
        });
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(key).map_err(|()| CloseReason::UnknownApiKey(key))?;
    let header_version = api_key.request_header_version(version);
    let header =
        RequestHeader::decode(&mut frame, header_version).map_err(|e| CloseReason::Header {
            api_key,
            version,
            reason: e.to_string(),
        })?;
    Ok(Request {
        api_key,
        header,
        body: frame,
        client,
    })
}

/// Serves one connection until the client closes it or a frame is refused.
pub async fn serve(broker: Arc<Broker>, stream: TcpStream, client: SocketAddr, limits: Limits) {
    let _ = stream.set_nodelay(true);
    let (mut read_half, write_half) = stream.into_split();
    let (frames, mut queue) =
        mpsc::channel::<Result<Bytes, CloseReason>>(limits.queued_requests_max);
    let reader = tokio::spawn(async move {
        loop {
            let frame = read_frame(&mut read_half, limits.frame_bytes_max).await;
            let stop = !matches!(frame, Ok(Some(_)));
            let item = match frame {
                Ok(Some(frame)) => Ok(frame),
                Ok(None) => break,
                Err(reason) => Err(reason),
            };
            if frames.send(item).await.is_err() || stop {
                break;
            }
        }
    });
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, write_half);
    let result = answer_all(&broker, &mut queue, &mut writer, client).await;
    reader.abort();
    match result {
        Ok(()) => tracing::debug!(%client, "connection closed by client"),
        Err(CloseReason::Io(error)) => tracing::debug!(%client, %error, "connection lost"),
        Err(reason) => tracing::warn!(%client, %reason, "closing connection"),
    }
    let _ = writer.shutdown().await;
}

async fn answer_all<W: tokio::io::AsyncWrite + Unpin>(
    broker: &Broker,
    queue: &mut mpsc::Receiver<Result<Bytes, CloseReason>>,
    writer: &mut W,
    client: SocketAddr,
) -> Result<(), CloseReason> {
    while let Some(frame) = queue.recv().await {
        let request = parse_request(frame?, client)?;
        let outcome =
            api::handle(broker, &request)
                .await
                .map_err(|source| CloseReason::Handler {
                    api_key: request.api_key,
                    version: request.version(),
                    source,
                })?;
        if let Outcome::Respond(frame) = outcome {
            for chunk in &frame.chunks {
                writer.write_all(chunk).await?;
            }
        }
        if queue.is_empty() {
            writer.flush().await?;
        }
    }
    writer.flush().await?;
    Ok(())
}
