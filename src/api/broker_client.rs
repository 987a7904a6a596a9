//! Requests this broker sends to another one (a transaction coordinator's WriteTxnMarkers
//! to a partition leader): Kafka's wire format over a short-lived TCP connection, with a
//! deadline for the whole exchange.

use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::faults::{broker_client_id, Outbound};

/// Longest response accepted from another broker.
const RESPONSE_BYTES_MAX: usize = 16 << 20;

/// Sends `request` at `version` to the broker at `address` and decodes its answer.
pub async fn call<R>(
    address: &str,
    outbound: &Outbound,
    request: &R,
    version: i16,
    timeout: Duration,
) -> Result<R::Response, String>
where
    R: Request + Encodable + HeaderVersion,
    R::Response: Decodable + HeaderVersion,
{
    let exchange = async {
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .with_client_id(Some(StrBytes::from_string(broker_client_id(outbound.from))));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .map_err(|e| format!("encoding the header: {e}"))?;
        request
            .encode(&mut body, version)
            .map_err(|e| format!("encoding the request: {e}"))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        outbound
            .check(address)
            .await
            .map_err(|cut| cut.to_string())?;
        let mut stream = TcpStream::connect(address)
            .await
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
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
            tracing::debug!(address, api = ?ApiKey::try_from(R::KEY).ok(), "trailing bytes in a broker's response");
        }
        Ok(decoded)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "no answer from {address} within {} ms",
            timeout.as_millis()
        )),
    }
}
