//! The follower's connection to a leader broker: Kafka's wire format over a connection to
//! its inter-broker listener (`crate::peer`: TCP, TLS and SASL as that listener is), one
//! request in flight, reconnecting on the next round after any failure and before its
//! SASL session ends.

use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::fetcher::{decode_fetch_response, encode_fetch, LeaderLink, LinkError};
use crate::ids::BrokerId;
use crate::peer::Outbound;
use crate::peer::PeerConnection;

/// Longest response frame a follower accepts (a fetch asks for at most 10 MiB).
const RESPONSE_BYTES_MAX: usize = 64 << 20;
/// How long a connection attempt or a round may take beyond the fetch's own wait.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to one leader.
#[derive(Debug)]
pub struct TcpLink {
    /// This node (`from`) and the test faults on its links.
    outbound: Outbound,
    address: String,
    connection: Option<PeerConnection>,
    correlation_id: i32,
}

impl TcpLink {
    /// A link to the broker at `address` (host:port), connected on first use.
    pub fn new(outbound: Outbound, address: String) -> Self {
        TcpLink {
            outbound,
            address,
            connection: None,
            correlation_id: 0,
        }
    }

    async fn round_trip(&mut self, request: &FetchRequest) -> std::io::Result<bytes::Bytes> {
        let ended = |c: &PeerConnection| c.session_ends.is_some_and(|t| t <= Instant::now());
        if self.connection.as_ref().is_some_and(ended) {
            self.connection = None;
        }
        if self.connection.is_none() {
            self.connection = Some(self.outbound.connect_broker(&self.address).await?);
        } else {
            self.outbound.check(&self.address).await?;
        }
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let body = encode_fetch(request, BrokerId(self.outbound.from), self.correlation_id);
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        let stream = &mut self
            .connection
            .as_mut()
            .ok_or(std::io::ErrorKind::NotConnected)?
            .stream;
        stream.write_all(&frame).await?;
        let length = stream.read_i32().await?;
        let length = usize::try_from(length)
            .ok()
            .filter(|l| *l <= RESPONSE_BYTES_MAX)
            .ok_or(std::io::ErrorKind::InvalidData)?;
        let mut response = vec![0u8; length];
        stream.read_exact(&mut response).await?;
        Ok(bytes::Bytes::from(response))
    }
}

impl LeaderLink for TcpLink {
    async fn fetch(
        &mut self,
        leader: BrokerId,
        request: FetchRequest,
    ) -> Result<FetchResponse, LinkError> {
        let wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
        let result = tokio::time::timeout(wait + IO_TIMEOUT, self.round_trip(&request)).await;
        let failure = |reason: String| LinkError::Unreachable { leader, reason };
        match result {
            Ok(Ok(frame)) => decode_fetch_response(frame, leader),
            Ok(Err(error)) => {
                self.connection = None;
                Err(failure(error.to_string()))
            }
            Err(_) => {
                self.connection = None;
                Err(failure("timed out".into()))
            }
        }
    }
}
