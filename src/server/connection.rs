//! One client connection: length-prefixed frames are read by a reader task into a bounded
//! queue, handled one at a time in arrival order, and answered in that same order;
//! responses are flushed when the queue is empty, so pipelined requests share socket
//! writes.
//!
//! Read-ahead is bounded three ways: at most `queued.max.requests` frames, at most
//! [`QUEUED_BYTES_PER_CONNECTION_MAX`] bytes (or one larger frame alone), and the
//! broker-wide [`MemoryPool`] (`queued.max.request.bytes`). A frame's bytes are taken from
//! both budgets after its 4-byte length is read and before its body is, and given back when
//! it has been answered; while they cannot be, the socket is not read (Kafka mutes it).
//!
//! A frame that cannot be a request (negative or oversized length, truncated body, unknown
//! API key, unsupported version, undecodable header or body) closes this connection with
//! the reason logged; other connections are not affected.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;
use prometheus::IntGauge;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::memory_pool::{MemoryPool, PoolPermit};
use super::sasl::{Authentication, Gate};
use crate::api::throttle::PollTimed;
use crate::api::{self, Broker, Outcome, Request};
use crate::config::sasl::SaslSettings;
use crate::faults::{is_broker_client_id, Injected};

/// The principal of a client that did not authenticate (Kafka's KafkaPrincipal.ANONYMOUS).
pub const ANONYMOUS: &str = "User:ANONYMOUS";
/// Bytes of socket write buffering per connection.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;
/// Bytes a frame needs before its header can be read (key, version, correlation id).
const HEADER_BYTES_MIN: usize = 8;
/// Request bytes one connection may have read but not answered; a single frame larger
/// than this (up to `socket.request.max.bytes`) is admitted when it is the only one, so
/// one client cannot take the broker-wide budget with a pipeline of large frames.
pub const QUEUED_BYTES_PER_CONNECTION_MAX: usize = 16 * 1024 * 1024;

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
    #[error("{0}")]
    Fault(String),
    #[error("{0}")]
    Authentication(String),
    #[error("no request for {0:?} (connections.max.idle.ms)")]
    Idle(std::time::Duration),
}

/// Reads a frame's length; `Ok(None)` at a clean end of stream. The bound is read once the
/// length has arrived: a SASL login raises it while the reader already waits for the next
/// frame (read ahead), and that frame must meet the raised bound.
async fn read_length<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: &AtomicUsize,
) -> Result<Option<usize>, CloseReason> {
    let mut length = [0u8; 4];
    match reader.read_exact(&mut length).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let max = max.load(Ordering::Relaxed);
    let length = i32::from_be_bytes(length);
    match usize::try_from(length) {
        Ok(length) if length <= max => Ok(Some(length)),
        _ => Err(CloseReason::FrameLength {
            length: i64::from(length),
            max,
        }),
    }
}

/// Reads a body of `expected` bytes, whose memory the caller has already reserved.
async fn read_body<R: AsyncRead + Unpin>(
    reader: &mut R,
    expected: usize,
) -> Result<Bytes, CloseReason> {
    let mut body = BytesMut::with_capacity(expected);
    let mut limited = reader.take(expected as u64);
    while body.len() < expected {
        if limited.read_buf(&mut body).await? == 0 {
            return Err(CloseReason::Truncated {
                got: body.len(),
                expected,
            });
        }
    }
    Ok(body.freeze())
}

/// The two budgets a connection's read-ahead draws on.
struct Budgets {
    connection: Arc<MemoryPool>,
    broker: Arc<MemoryPool>,
}

/// A frame read but not yet answered, with the budget it holds until then.
struct QueuedFrame {
    frame: Bytes,
    held: (PoolPermit, PoolPermit),
    /// When its last byte was read (a request's time is measured from here).
    read_at: Instant,
}

impl Budgets {
    /// Waits until `length` bytes fit in this connection's budget and then the broker's.
    /// The connection's share is capped at its capacity: one larger frame goes alone.
    async fn reserve(&self, length: usize, client: SocketAddr) -> (PoolPermit, PoolPermit) {
        let own = length.min(QUEUED_BYTES_PER_CONNECTION_MAX);
        let connection = self.connection.acquire(own).await;
        let broker = match self.broker.try_acquire(length) {
            Some(permit) => permit,
            None => {
                tracing::debug!(
                    %client,
                    frame_bytes = length,
                    available_bytes = ?self.broker.available(),
                    "queued.max.request.bytes reached; not reading from this client until \
                     queued requests are answered"
                );
                self.broker.acquire(length).await
            }
        };
        (connection, broker)
    }
}

/// Reads frames into `frames` until the stream ends, a frame is refused, or the answering
/// side is gone.
async fn read_ahead<R: AsyncRead + Unpin>(
    mut reader: R,
    frame_bytes_max: Arc<AtomicUsize>,
    budgets: Budgets,
    frames: mpsc::Sender<Result<QueuedFrame, CloseReason>>,
    client: SocketAddr,
    queued: IntGauge,
) {
    loop {
        let item = match read_length(&mut reader, &frame_bytes_max).await {
            Ok(None) => return,
            Ok(Some(length)) => {
                let held = budgets.reserve(length, client).await;
                read_body(&mut reader, length)
                    .await
                    .map(|frame| QueuedFrame {
                        frame,
                        held,
                        read_at: Instant::now(),
                    })
            }
            Err(reason) => Err(reason),
        };
        let stop = item.is_err();
        let frame = item.is_ok();
        if frames.send(item).await.is_err() || stop {
            return;
        }
        if frame {
            queued.inc();
        }
    }
}

/// Splits a frame into its decoded header and body.
pub fn parse_request(
    mut frame: Bytes,
    client: SocketAddr,
    listener: &Arc<str>,
) -> Result<Request, CloseReason> {
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
        listener: Arc::clone(listener),
        principal: ANONYMOUS.into(),
        credential: Default::default(),
        throttle: Default::default(),
    })
}

/// Serves one connection until the client closes it or a frame is refused. `pool` is the
/// broker-wide budget of request bytes (`queued.max.request.bytes`).
pub async fn serve(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: Peer,
    limits: Limits,
    pool: Arc<MemoryPool>,
) {
    let _ = stream.set_nodelay(true);
    let (read_half, write_half) = stream.into_split();
    serve_halves(broker, read_half, write_half, peer, limits, pool).await;
}

/// Who is at the other end of a connection, and where it connected.
#[derive(Debug, Clone)]
pub struct Peer {
    pub client: SocketAddr,
    pub listener: Arc<str>,
    /// The listener's SASL settings, when clients must authenticate with SASL first.
    pub sasl: Option<Arc<SaslSettings>>,
    /// Who the client is before any SASL exchange: `User:ANONYMOUS`, or on an SSL
    /// listener `User:` and the subject of the certificate the client presented.
    pub principal: Arc<str>,
}

/// Serves a connection given as its two halves (a TCP stream's, or a TLS session's).
pub async fn serve_halves<R, W>(
    broker: Arc<Broker>,
    read_half: R,
    write_half: W,
    peer: Peer,
    limits: Limits,
    pool: Arc<MemoryPool>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin,
{
    let Peer {
        client,
        listener,
        sasl,
        principal,
    } = peer;
    let auth = Authentication::new(sasl, principal, limits.frame_bytes_max);
    let metrics = Arc::clone(&broker.metrics);
    metrics.connections_accepted.inc();
    metrics.connections.inc();
    let (frames, mut queue) = mpsc::channel(limits.queued_requests_max);
    let budgets = Budgets {
        connection: MemoryPool::per_connection(QUEUED_BYTES_PER_CONNECTION_MAX),
        broker: pool,
    };
    let reader = tokio::spawn(read_ahead(
        read_half,
        auth.frame_max(),
        budgets,
        frames,
        client,
        metrics.request_queue_size.clone(),
    ));
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, write_half);
    let result = answer_all(&broker, &mut queue, &mut writer, (client, &listener), auth).await;
    reader.abort();
    queue.close();
    while let Ok(Ok(_)) = queue.try_recv() {
        metrics.request_queue_size.dec();
    }
    metrics.connections.dec();
    match result {
        Ok(()) => tracing::debug!(%client, "connection closed by client"),
        Err(CloseReason::Io(error)) => tracing::debug!(%client, %error, "connection lost"),
        Err(reason @ CloseReason::Idle(_)) => {
            tracing::debug!(%client, %reason, "closing idle connection");
        }
        Err(reason) => tracing::warn!(%client, %reason, "closing connection"),
    }
    let _ = writer.shutdown().await;
}

/// Writes the response of `outcome`, if it has one.
async fn write_outcome<W: tokio::io::AsyncWrite + Unpin>(
    writer: &mut W,
    outcome: &Outcome,
) -> std::io::Result<()> {
    if let Outcome::Respond(frame) = outcome {
        for chunk in &frame.chunks {
            writer.write_all(chunk).await?;
        }
    }
    Ok(())
}

/// Answers a bare SASL token (handshake v0) with the server's, length-prefixed.
async fn answer_raw_token<W: tokio::io::AsyncWrite + Unpin>(
    broker: &Broker,
    auth: &mut Authentication,
    frame: &[u8],
    writer: &mut W,
) -> Result<(), CloseReason> {
    let token = auth
        .raw_token(broker, frame)
        .await
        .map_err(CloseReason::Authentication)?;
    writer
        .write_all(&(token.len() as u32).to_be_bytes())
        .await?;
    writer.write_all(&token).await?;
    writer.flush().await?;
    Ok(())
}

/// The next frame read ahead (`None` once the client closed), waited for at most
/// `idle_max` (`connections.max.idle.ms`).
async fn next_frame(
    queue: &mut mpsc::Receiver<Result<QueuedFrame, CloseReason>>,
    idle_max: Option<std::time::Duration>,
) -> Result<Option<Result<QueuedFrame, CloseReason>>, CloseReason> {
    match idle_max {
        Some(limit) => tokio::time::timeout(limit, queue.recv())
            .await
            .map_err(|_| CloseReason::Idle(limit)),
        None => Ok(queue.recv().await),
    }
}

async fn answer_all<W: tokio::io::AsyncWrite + Unpin>(
    broker: &Broker,
    queue: &mut mpsc::Receiver<Result<QueuedFrame, CloseReason>>,
    writer: &mut W,
    (client, listener): (SocketAddr, &Arc<str>),
    mut auth: Authentication,
) -> Result<(), CloseReason> {
    loop {
        let Some(queued) = next_frame(queue, broker.config.connections_max_idle).await? else {
            writer.flush().await?;
            return Ok(());
        };
        let QueuedFrame {
            frame,
            held,
            read_at,
        } = queued?;
        broker.metrics.request_queue_size.dec();
        if let Gate::RawToken = auth.gate() {
            answer_raw_token(broker, &mut auth, &frame, writer).await?;
            continue;
        }
        let mut request = parse_request(frame, client, listener)?;
        let intercepted =
            auth.intercept(broker, &request)
                .await
                .map_err(|source| CloseReason::Handler {
                    api_key: request.api_key,
                    version: request.version(),
                    source,
                })?;
        if let Some(answer) = intercepted {
            write_outcome(writer, &answer.outcome).await?;
            writer.flush().await?;
            if let Some(reason) = answer.close {
                return Err(CloseReason::Authentication(reason));
            }
            continue;
        }
        if let Some(principal) = auth.principal() {
            request.principal = Arc::clone(principal);
            request.credential = auth.credential();
        }
        let outcome = handle_within_quota(broker, &request)
            .await
            .map_err(|source| CloseReason::Handler {
                api_key: request.api_key,
                version: request.version(),
                source,
            })?;
        let Some(outcome) = outcome else {
            return Err(CloseReason::Fault(format!(
                "{:?} dropped (injected fault)",
                request.api_key
            )));
        };
        write_outcome(writer, &outcome).await?;
        let api = format!("{:?}", request.api_key);
        broker.metrics.answered(&api, request.version(), read_at);
        // Answered: its bytes go back to both budgets.
        drop(held);
        let throttle = request.throttle.ms();
        if throttle > 0 {
            // Kafka mutes the channel: nothing more is read from this client for as long.
            writer.flush().await?;
            tracing::debug!(%client, api, client_id = ?request.header.client_id, throttle_ms = throttle, "quota exceeded; throttling the client");
            tokio::time::sleep(std::time::Duration::from_millis(u64::from(throttle))).await;
        } else if queue.is_empty() {
            writer.flush().await?;
        }
    }
}

/// Handles `request` ([`handle`]) under the request quota (`request_percentage`): a
/// client over it is throttled before its request is handled, and the time handling takes
/// counts against it. Inter-broker requests, the controller listener, ApiVersions and the
/// SASL exchange are exempt, as in Kafka.
async fn handle_within_quota(
    broker: &Broker,
    request: &Request,
) -> Result<Option<Outcome>, api::HandlerError> {
    let exempt = matches!(
        request.api_key,
        ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
    ) || is_broker_client_id(request.header.client_id.as_deref())
        || broker.is_controller_listener(&request.listener);
    let quotas = Arc::clone(&broker.image().client_quotas);
    if exempt || !broker.quotas.request.enabled(&quotas) {
        return handle(broker, request).await;
    }
    let client = request.quota_client();
    request
        .throttle
        .raise(broker.quotas.request.record(&quotas, client, 0.0));
    let (outcome, spent) = PollTimed::new(handle(broker, request)).await;
    let used = crate::quota::request_percentage(spent);
    broker.quotas.request.record(&quotas, client, used);
    outcome
}

/// Handles `request`, or applies the fault a test injected for it (a client's request
/// only, never another node's): `None` when it is to be dropped, or its link is cut.
async fn handle(broker: &Broker, request: &Request) -> Result<Option<Outcome>, api::HandlerError> {
    let client_id = request.header.client_id.as_deref();
    if is_broker_client_id(client_id) {
        return api::handle(broker, request).await.map(Some);
    }
    let node = broker.config.node_id;
    match broker
        .faults
        .client_request(node, request.api_key as i16)
        .await
    {
        Ok(None) => api::handle(broker, request).await.map(Some),
        Ok(Some(Injected::Error(code))) => api::injected::answer(request, code).map(Some),
        Ok(Some(Injected::Drop)) => Ok(None),
        Err(cut) => {
            tracing::info!(node, client = %request.client, ?client_id, %cut, "request refused");
            Ok(None)
        }
    }
}
