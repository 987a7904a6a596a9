//! Requests this broker sends to another one (a transaction coordinator's WriteTxnMarkers
//! to a partition leader, a leader's AddPartitionsToTxn verification to a coordinator):
//! Kafka's wire format over a connection to its inter-broker listener (`crate::peer`),
//! kept for the next request to the same broker — a new one would cost a TLS handshake and
//! a SASL login each time — with a deadline for the whole exchange.

use std::time::Duration;

use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};

use crate::faults::broker_client_id;
use crate::peer::Outbound;

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
        outbound
            .check(address)
            .await
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        let client_id = broker_client_id(outbound.from);
        let peers = &outbound.peers;
        if let Some(mut kept) = peers.take_idle(address) {
            match crate::peer::exchange(&mut kept.stream, request, version, (1, &client_id)).await {
                Ok(response) => {
                    peers.keep(address, kept);
                    return Ok(response);
                }
                // Closed by the other broker since (it restarted, say): once more on a new
                // connection, as the caller would retry anyway.
                Err(error) => tracing::debug!(
                    address,
                    %error,
                    "a kept connection to another broker failed; opening a new one"
                ),
            }
        }
        // The link was checked above.
        let mut connection = peers
            .connect(address, outbound.from)
            .await
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        let response =
            crate::peer::exchange(&mut connection.stream, request, version, (1, &client_id))
                .await?;
        peers.keep(address, connection);
        Ok(response)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "no answer from {address} within {} ms",
            timeout.as_millis()
        )),
    }
}
