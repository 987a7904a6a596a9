//! Connections a node opens to another one ([`Outbound`]): to a broker's inter-broker
//! listener (a follower's fetches, a transaction coordinator's markers and verifications),
//! secured as that listener is (`config::inter_broker`): TCP, then a TLS handshake for SSL
//! and SASL_SSL, then a SASL login (SaslHandshake and SaslAuthenticate, KIP-152) for
//! SASL_PLAINTEXT and SASL_SSL, before the first request; and to a controller's listener,
//! over TLS when it is SSL.
//!
//! Must not: know what is sent on a connection once it is open.

mod sasl;

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::config::inter_broker::{InterBrokerClient, SaslLogin};
use crate::config::tls::TlsSettings;
use crate::faults::{Faults, LinkCut};
use crate::tls::client::ClientTls;
use crate::tls::TlsError;

/// Longest response accepted to a request made by [`exchange`].
const RESPONSE_BYTES_MAX: usize = 16 << 20;

/// How often a failed TLS handshake or login is logged as an error (the others at debug):
/// a follower retries every 200 ms.
const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Idle connections kept per address for the next request ([`PeerConnector::keep`]).
const IDLE_PER_ADDRESS_MAX: usize = 4;

/// How this broker opens connections to the others (plaintext by default), and the idle
/// ones it keeps for the next request to the same address (its clones share them).
#[derive(Clone, Default)]
pub struct PeerConnector {
    tls: Option<ClientTls>,
    sasl: Option<Arc<SaslLogin>>,
    /// When a failure was last logged as an error.
    last_error: Arc<Mutex<Option<Instant>>>,
    idle: Arc<Mutex<HashMap<String, Vec<PeerConnection>>>>,
}

impl std::fmt::Debug for PeerConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerConnector")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

/// A node's outbound side: which node it is, how it secures connections to other
/// brokers and to controllers, and the cluster's test [`Faults`].
#[derive(Clone, Debug, Default)]
pub struct Outbound {
    pub from: i32,
    pub faults: Faults,
    /// To other brokers' inter-broker listener.
    pub peers: PeerConnector,
    /// To controllers' controller listener (TLS when it is SSL).
    pub controllers: PeerConnector,
}

impl Outbound {
    /// [`Faults::outbound`] from this node.
    pub async fn check(&self, to: &str) -> Result<(), LinkCut> {
        self.faults.outbound(self.from, to).await
    }

    /// A connection to another broker's inter-broker listener at `address`, secured as
    /// that listener is, unless a test cut the link.
    pub async fn connect_broker(&self, address: &str) -> io::Result<PeerConnection> {
        self.check(address).await?;
        self.peers.connect(address, self.from).await
    }
}

/// An open connection to another broker.
#[derive(Debug)]
pub struct PeerConnection {
    pub stream: PeerStream,
    /// When the other broker ends the SASL session (`connections.max.reauth.ms`): a
    /// connection kept past it must be opened again, which logs in again.
    pub session_ends: Option<Instant>,
}

impl PeerConnector {
    /// The connector `client` configures; its key material is read now.
    pub fn new(client: &InterBrokerClient) -> Result<Self, TlsError> {
        Ok(PeerConnector {
            tls: client.tls.as_ref().map(ClientTls::new).transpose()?,
            sasl: client.sasl.clone().map(Arc::new),
            ..PeerConnector::default()
        })
    }

    /// A connector with TLS as `settings` configure it, if any, and no SASL (the
    /// controller listener's).
    pub fn tls(settings: Option<&TlsSettings>) -> Result<Self, TlsError> {
        Ok(PeerConnector {
            tls: settings.map(ClientTls::new).transpose()?,
            ..PeerConnector::default()
        })
    }

    /// Connects to `address` (host:port) as node `from`, secured and logged in.
    pub async fn connect(&self, address: &str, from: i32) -> io::Result<PeerConnection> {
        let tcp = TcpStream::connect(address).await?;
        tcp.set_nodelay(true)?;
        let mut stream = match &self.tls {
            Some(tls) => match tls.handshake(address, tcp).await {
                Ok(stream) => PeerStream::Tls(Box::new(stream)),
                Err(error) => {
                    self.report(address, "TLS handshake with another broker failed", &error);
                    return Err(error);
                }
            },
            None => PeerStream::Plain(tcp),
        };
        let session_ends = match &self.sasl {
            Some(login) => sasl::login(&mut stream, login, from)
                .await
                .map_err(|reason| {
                    let error = io::Error::new(io::ErrorKind::PermissionDenied, reason);
                    let what = format!(
                        "cannot log in to another broker as {} with {}",
                        login.username, login.mechanism
                    );
                    self.report(address, &what, &error);
                    error
                })?,
            None => None,
        };
        Ok(PeerConnection {
            stream,
            session_ends,
        })
    }

    /// An idle connection to `address` kept by [`PeerConnector::keep`] whose SASL session
    /// has not ended, if any: it may have been closed by the other side since.
    pub fn take_idle(&self, address: &str) -> Option<PeerConnection> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = idle.get_mut(address)?;
        let now = Instant::now();
        while let Some(connection) = kept.pop() {
            if connection.session_ends.is_none_or(|ends| ends > now) {
                return Some(connection);
            }
        }
        None
    }

    /// Keeps `connection` to `address`, with no request in flight, for the next request
    /// to it (up to `IDLE_PER_ADDRESS_MAX`; the others are closed).
    pub fn keep(&self, address: &str, connection: PeerConnection) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = idle.entry(address.to_string()).or_default();
        if kept.len() < IDLE_PER_ADDRESS_MAX {
            kept.push(connection);
        }
    }

    /// Logs a failure to secure a connection: as an error at most every
    /// [`ERROR_LOG_INTERVAL`], otherwise at debug.
    fn report(&self, address: &str, what: &str, error: &io::Error) {
        let now = Instant::now();
        let loud = match self.last_error.lock() {
            Ok(mut last) => {
                let due = last.is_none_or(|t| now.duration_since(t) >= ERROR_LOG_INTERVAL);
                if due {
                    *last = Some(now);
                }
                due
            }
            Err(_) => true,
        };
        match loud {
            true => tracing::error!(address, %error, "{what}"),
            false => tracing::debug!(address, %error, "{what}"),
        }
    }
}

/// A connection's byte stream: plain TCP or TLS over it.
#[derive(Debug)]
pub enum PeerStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Sends `request` at `version` on `stream` as `client_id` and decodes its answer.
pub async fn exchange<R, S>(
    stream: &mut S,
    request: &R,
    version: i16,
    (correlation_id, client_id): (i32, &str),
) -> Result<R::Response, String>
where
    R: Request + Encodable + HeaderVersion,
    R::Response: Decodable + HeaderVersion,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header
        .encode(&mut frame, R::header_version(version))
        .map_err(|e| format!("encoding the header: {e}"))?;
    request
        .encode(&mut frame, version)
        .map_err(|e| format!("encoding the request: {e}"))?;
    let length = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&length.to_be_bytes());
    stream.write_all(&frame).await.map_err(|e| e.to_string())?;
    let length = stream.read_i32().await.map_err(|e| e.to_string())?;
    let length = usize::try_from(length)
        .ok()
        .filter(|l| *l <= RESPONSE_BYTES_MAX)
        .ok_or_else(|| format!("response length {length} is not plausible"))?;
    let mut response = vec![0u8; length];
    stream
        .read_exact(&mut response)
        .await
        .map_err(|e| e.to_string())?;
    let mut response = bytes::Bytes::from(response);
    ResponseHeader::decode(&mut response, R::Response::header_version(version))
        .map_err(|e| format!("decoding the response header: {e}"))?;
    let decoded = R::Response::decode(&mut response, version)
        .map_err(|e| format!("decoding the response: {e}"))?;
    if response.has_remaining() {
        tracing::debug!(api = ?ApiKey::try_from(R::KEY).ok(), "trailing bytes in a broker's response");
    }
    Ok(decoded)
}
