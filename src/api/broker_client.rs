//! Requests this broker sends to another one (a transaction coordinator's WriteTxnMarkers
//! to a partition leader): Kafka's wire format over a short-lived connection to its
//! inter-broker listener (`crate::peer`), with a deadline for the whole exchange.

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
        let mut connection = outbound
            .connect_broker(address)
            .await
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        let client_id = broker_client_id(outbound.from);
        crate::peer::exchange(&mut connection.stream, request, version, (1, &client_id)).await
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "no answer from {address} within {} ms",
            timeout.as_millis()
        )),
    }
}
