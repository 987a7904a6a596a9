//! The controller listener's protocol: Raft RPCs between controllers, requests from brokers
//! to the active controller (registration, heartbeats, topic changes), and metadata
//! fetches by broker-only nodes.
//!
//! Wire format: each message is a 4-byte big-endian length followed by that many bytes of
//! JSON; a connection carries one request at a time, each answered before the next.
//! Lengths above [`FRAME_BYTES_MAX`] close the connection. Must not: decide anything; it
//! moves messages between [`RpcHandler`]s and callers.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use tokio::net::{TcpListener, TcpStream};

use super::active::{ControllerReply, ControllerRequest};
use super::error::RemoteError;
use super::raft_types::TypeConfig;
use super::state::ClusterState;
use crate::peer::Outbound;
use crate::peer::PeerStream;
use crate::tls::{client_principal, ListenerTls};

/// The largest frame accepted (snapshots of big clusters included).
pub const FRAME_BYTES_MAX: usize = 64 * 1024 * 1024;
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A request on the controller listener.
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    Controller(ControllerRequest),
    /// Long poll: answered when the metadata offset passes `after`, or after a while.
    FetchMetadata {
        after: u64,
    },
}

/// The answer to an [`RpcRequest`] of the same kind.
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcResponse {
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    Controller(Result<ControllerReply, RemoteError>),
    Metadata {
        offset: u64,
        controller_id: i32,
        state: Box<ClusterState>,
    },
}

/// Serves requests that arrive on the controller listener.
pub trait RpcHandler: Send + Sync + 'static {
    /// Answers one request.
    fn handle(&self, request: RpcRequest) -> impl std::future::Future<Output = RpcResponse> + Send;
}

pub(crate) async fn write_message<T: Serialize, S: AsyncWrite + Unpin>(
    stream: &mut S,
    message: &T,
) -> std::io::Result<()> {
    let payload = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    let mut frame = Vec::with_capacity(payload.len() + 4);
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    stream.write_all(&frame).await
}

/// Reads one message; `Ok(None)` at a clean end of stream.
pub(crate) async fn read_message<T: DeserializeOwned, S: AsyncRead + Unpin>(
    stream: &mut S,
) -> std::io::Result<Option<T>> {
    let mut length = [0u8; 4];
    match stream.read_exact(&mut length).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let length = u32::from_be_bytes(length) as usize;
    if length > FRAME_BYTES_MAX {
        return Err(std::io::Error::other(format!(
            "frame of {length} bytes exceeds {FRAME_BYTES_MAX}"
        )));
    }
    let mut payload = vec![0u8; length];
    stream.read_exact(&mut payload).await?;
    serde_json::from_slice(&payload)
        .map(Some)
        .map_err(std::io::Error::other)
}

/// The reading half of a connection on the controller listener (its first bytes, read to
/// tell its protocol, in front again).
pub type ConnectionReader = Box<dyn AsyncRead + Send + Unpin>;
/// The writing half of a connection on the controller listener.
pub type ConnectionWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// A Kafka client on the controller listener (an admin tool run with
/// `--bootstrap-controller`).
pub struct KafkaClient {
    pub reader: ConnectionReader,
    pub writer: ConnectionWriter,
    pub address: SocketAddr,
    /// `User:` and the subject of its TLS client certificate, if it gave one.
    pub principal: Option<String>,
}

impl std::fmt::Debug for KafkaClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaClient")
            .field("address", &self.address)
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

/// Where connections on the controller listener that speak Kafka's protocol go: set once
/// the node can serve them.
pub type KafkaConnections = std::sync::OnceLock<Box<dyn Fn(KafkaClient) + Send + Sync>>;

/// How long a new connection may take for its TLS handshake and the first bytes that tell
/// its protocol.
const FIRST_BYTES_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections on `listener` (over TLS when the controller listener is SSL) and
/// answers their requests with `handler`, or hands a Kafka client's connection to `kafka`,
/// until the task is dropped.
pub async fn serve<H: RpcHandler>(
    listener: TcpListener,
    handler: Arc<H>,
    kafka: Arc<KafkaConnections>,
    tls: Option<ListenerTls>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "controller listener accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handler = Arc::clone(&handler);
        let kafka = Arc::clone(&kafka);
        let tls = tls.clone();
        tokio::spawn(async move {
            let opened = tokio::time::timeout(FIRST_BYTES_TIMEOUT, open(stream, peer, tls)).await;
            let Ok(Some((reader, writer, principal, speaks_kafka))) = opened else {
                return;
            };
            if !speaks_kafka {
                return serve_connection(reader, writer, peer, handler).await;
            }
            match kafka.get() {
                Some(serve_kafka) => serve_kafka(KafkaClient {
                    reader,
                    writer,
                    address: peer,
                    principal,
                }),
                None => tracing::info!(%peer,
                    "Kafka client on the controller listener before the node serves; closed"),
            }
        });
    }
}

/// A new connection's halves (after its TLS handshake, if any), its certificate's
/// principal, and whether it speaks Kafka's protocol rather than this one: both frame
/// messages with a 4-byte length, but a Kafka request begins with its API key (a high byte
/// of 0) where a message here begins with JSON (`{`). `None`: its handshake failed, or it
/// closed before five bytes.
async fn open(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<ListenerTls>,
) -> Option<(ConnectionReader, ConnectionWriter, Option<String>, bool)> {
    let (reader, writer, principal): (ConnectionReader, ConnectionWriter, _) = match tls {
        None => {
            let (reader, writer) = stream.into_split();
            (Box::new(reader), Box::new(writer), None)
        }
        Some(tls) => {
            let session = match tls.acceptor.accept(stream).await {
                Ok(session) => session,
                Err(error) => {
                    tracing::info!(%peer, %error, "TLS handshake on the controller listener failed");
                    return None;
                }
            };
            let principal = match client_principal(&session, &tls.principal_rules) {
                Ok(principal) => principal,
                Err(subject) => {
                    tracing::warn!(%peer, %subject,
                        "no ssl.principal.mapping.rules rule maps the client certificate's subject; closing");
                    return None;
                }
            };
            let (reader, writer) = tokio::io::split(session);
            (Box::new(reader), Box::new(writer), principal)
        }
    };
    let mut reader = reader;
    let mut head = [0u8; 5];
    reader.read_exact(&mut head).await.ok()?;
    let speaks_kafka = head[4] == 0;
    let reader: ConnectionReader = Box::new(std::io::Cursor::new(head).chain(reader));
    Some((reader, writer, principal, speaks_kafka))
}

/// Answers the requests of one connection, one at a time, until it closes.
async fn serve_connection<H: RpcHandler>(
    mut reader: ConnectionReader,
    mut writer: ConnectionWriter,
    peer: SocketAddr,
    handler: Arc<H>,
) {
    loop {
        let request = match read_message::<RpcRequest, _>(&mut reader).await {
            Ok(Some(request)) => request,
            Ok(None) => break,
            Err(error) => {
                tracing::debug!(%peer, %error, "controller connection closed");
                break;
            }
        };
        // Served on its own task: a peer that gave up (its call timed out) and closed the
        // connection frees it now, not when a slow request completes.
        let serving = tokio::spawn({
            let handler = Arc::clone(&handler);
            async move { handler.handle(request).await }
        });
        let response = tokio::select! {
            served = serving => match served {
                Ok(response) => response,
                Err(error) => {
                    tracing::error!(%peer, %error, "controller request handler failed");
                    break;
                }
            },
            () = peer_gone(&mut reader) => {
                tracing::debug!(%peer,
                    "controller connection closed by its peer while its request was served");
                break;
            }
        };
        if let Err(error) = write_message(&mut writer, &response).await {
            tracing::debug!(%peer, %error, "controller connection lost");
            break;
        }
    }
}

/// Resolves once the peer closed the connection (or it failed), or sent more before its
/// answer: a connection carries one request at a time, so a byte read here ends it too.
/// Cancel-safe: nothing is read while the peer sends nothing.
async fn peer_gone(reader: &mut ConnectionReader) {
    let mut byte = [0u8; 1];
    if reader.read_exact(&mut byte).await.is_ok() {
        tracing::debug!("a request before the previous one was answered; closing");
    }
}

/// A connection to one controller, opened on first use and again after any failure.
#[derive(Debug)]
pub struct RpcClient {
    pub addr: String,
    stream: Option<PeerStream>,
    outbound: Outbound,
}

impl RpcClient {
    /// A client for the controller at `addr` (nothing is connected yet).
    pub fn new(addr: String, outbound: Outbound) -> Self {
        RpcClient {
            addr,
            stream: None,
            outbound,
        }
    }

    /// Sends `request` and waits up to `timeout` for the answer.
    ///
    /// Cancel-safe: the connection leaves the client for the exchange and comes back only
    /// with its answer, so a call dropped midway (openraft drops an RPC at its own timeout,
    /// which is the same as this one) cannot leave a request in flight whose answer the
    /// next call would read as its own; the next call connects afresh.
    pub async fn call(
        &mut self,
        request: &RpcRequest,
        timeout: Duration,
    ) -> std::io::Result<RpcResponse> {
        let stream = self.stream.take();
        match tokio::time::timeout(timeout, self.exchange(stream, request)).await {
            Ok(Ok((stream, response))) => {
                self.stream = Some(stream);
                Ok(response)
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer from {} in {timeout:?}", self.addr),
            )),
        }
    }

    async fn exchange(
        &self,
        stream: Option<PeerStream>,
        request: &RpcRequest,
    ) -> std::io::Result<(PeerStream, RpcResponse)> {
        self.outbound.check(&self.addr).await?;
        let mut stream = match stream {
            Some(stream) => stream,
            None => {
                let connect = self
                    .outbound
                    .controllers
                    .connect(&self.addr, self.outbound.from);
                tokio::time::timeout(CONNECT_TIMEOUT, connect)
                    .await
                    .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??
                    .stream
            }
        };
        write_message(&mut stream, request).await?;
        let response = read_message(&mut stream)
            .await?
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        Ok((stream, response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::error::ErrorKind;

    /// Answers each FetchMetadata with its `after` as the message, the one for `after: 1`
    /// only after 300 ms.
    async fn echo_server() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address").to_string();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    while let Ok(Some(RpcRequest::FetchMetadata { after })) =
                        read_message(&mut stream).await
                    {
                        if after == 1 {
                            tokio::time::sleep(Duration::from_millis(300)).await;
                        }
                        let message = after.to_string();
                        let answer = RpcResponse::Controller(Err(RemoteError {
                            kind: ErrorKind::Conflict,
                            message,
                            leader: None,
                        }));
                        if write_message(&mut stream, &answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn answered_after(response: RpcResponse) -> String {
        match response {
            RpcResponse::Controller(Err(error)) => error.message,
            other => panic!("unexpected answer {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_call_dropped_midway_leaves_no_answer_for_the_next() {
        let mut client = RpcClient::new(echo_server().await, Outbound::default());
        let second = Duration::from_secs(5);
        let first = RpcRequest::FetchMetadata { after: 0 };
        assert_eq!(
            answered_after(client.call(&first, second).await.expect("answer")),
            "0"
        );
        // Dropped by an outer timeout, as openraft drops its RPCs, before the answer.
        let slow = RpcRequest::FetchMetadata { after: 1 };
        let dropped = tokio::time::timeout(Duration::from_millis(50), client.call(&slow, second));
        assert!(dropped.await.is_err(), "the slow call was not dropped");
        let next = RpcRequest::FetchMetadata { after: 2 };
        assert_eq!(
            answered_after(client.call(&next, second).await.expect("answer")),
            "2"
        );
    }

    /// Never answers.
    struct Stuck;

    impl RpcHandler for Stuck {
        async fn handle(&self, _request: RpcRequest) -> RpcResponse {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn a_connection_whose_peer_gave_up_is_closed_while_its_request_is_served() {
        // Goal: a caller that timed out and closed its connection does not leave it open
        // on the server until the request completes (thousands of such connections ran a
        // controller out of file descriptors). Method: a handler that never answers; the
        // client half-closes after its request and must see the server close too.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(serve(listener, Arc::new(Stuck), Arc::default(), None));
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        write_message(&mut stream, &RpcRequest::FetchMetadata { after: 0 })
            .await
            .expect("sent");
        // Let the server read the request before the end of stream follows it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        stream.shutdown().await.expect("half-closed");
        let closed = tokio::time::timeout(
            Duration::from_secs(5),
            read_message::<RpcResponse, _>(&mut stream),
        );
        let answer = closed.await.expect("the server closed the connection");
        assert!(
            matches!(answer, Ok(None)),
            "closed without an answer: {answer:?}"
        );
    }
}
