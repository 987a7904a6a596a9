//! The client side of a SASL login to another broker (KIP-152: SaslHandshake v1, then the
//! mechanism's tokens in SaslAuthenticate v2): PLAIN, or SCRAM-SHA-256/512 with the server
//! proving it knows the credential too.

use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncRead, AsyncWrite};

use super::exchange;
use crate::config::inter_broker::SaslLogin;
use crate::faults::broker_client_id;
use crate::sasl::scram::ScramClient;
use crate::sasl::ScramMechanism;

const HANDSHAKE_VERSION: i16 = 1;
const AUTHENTICATE_VERSION: i16 = 2;

/// Logs in on `stream` as node `from` with `login`: when the session ends (`None`: when
/// the connection does), or why the login failed.
pub(super) async fn login<S>(
    stream: &mut S,
    login: &SaslLogin,
    from: i32,
) -> Result<Option<Instant>, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let client_id = broker_client_id(from);
    let mut round = Round {
        stream,
        client_id: &client_id,
        correlation_id: 0,
    };
    let handshake = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_string(login.mechanism.clone()));
    let shaken = round.call(&handshake, HANDSHAKE_VERSION).await?;
    if shaken.error_code != 0 {
        let offered: Vec<&str> = shaken.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(format!(
            "the broker refused mechanism {} (error {}; it offers {})",
            login.mechanism,
            shaken.error_code,
            offered.join(", ")
        ));
    }
    let last = match ScramMechanism::from_name(&login.mechanism) {
        Some(mechanism) => scram(&mut round, mechanism, login).await?,
        None => {
            let token = format!("\0{}\0{}", login.username, login.password);
            round.authenticate(token.into_bytes()).await?
        }
    };
    // Ended early, as Kafka's clients re-authenticate (at 85-95 % of the lifetime): the
    // broker counted the lifetime from before its answer travelled here.
    let ends = (last.session_lifetime_ms > 0).then(|| {
        Instant::now() + Duration::from_millis(last.session_lifetime_ms as u64 * 85 / 100)
    });
    Ok(ends)
}

/// The two SCRAM rounds; the last answer.
async fn scram<S>(
    round: &mut Round<'_, S>,
    mechanism: ScramMechanism,
    login: &SaslLogin,
) -> Result<SaslAuthenticateResponse, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (client, first) = ScramClient::start(mechanism, &login.username, &login.password)
        .map_err(|e| e.to_string())?;
    let server_first = round.authenticate(first).await?;
    let (client_final, expected) = client
        .answer(&server_first.auth_bytes)
        .map_err(|e| e.to_string())?;
    let server_final = round.authenticate(client_final).await?;
    ScramClient::verify(&server_final.auth_bytes, &expected).map_err(|e| e.to_string())?;
    Ok(server_final)
}

/// Requests on one connection, numbered.
struct Round<'a, S> {
    stream: &'a mut S,
    client_id: &'a str,
    correlation_id: i32,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Round<'_, S> {
    async fn call<R>(&mut self, request: &R, version: i16) -> Result<R::Response, String>
    where
        R: kafka_protocol::protocol::Request
            + kafka_protocol::protocol::Encodable
            + kafka_protocol::protocol::HeaderVersion,
        R::Response: kafka_protocol::protocol::Decodable + kafka_protocol::protocol::HeaderVersion,
    {
        self.correlation_id += 1;
        exchange(
            self.stream,
            request,
            version,
            (self.correlation_id, self.client_id),
        )
        .await
    }

    /// One SaslAuthenticate with `token`; its answer when accepted.
    async fn authenticate(&mut self, token: Vec<u8>) -> Result<SaslAuthenticateResponse, String> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(token.into());
        let answer = self.call(&request, AUTHENTICATE_VERSION).await?;
        match answer.error_code {
            0 => Ok(answer),
            code => Err(format!(
                "authentication failed (error {code}: {})",
                answer.error_message.as_deref().unwrap_or("no message")
            )),
        }
    }
}
