//! The SASL authentication of one connection, as Kafka's SaslServerAuthenticator runs it
//! (KIP-43, KIP-152): on a SASL listener a client may send ApiVersions, then SaslHandshake
//! naming a mechanism the listener offers, then its tokens — in SaslAuthenticate requests
//! (handshake v1), or as bare length-prefixed frames (handshake v0, the older clients) —
//! until it is authenticated or refused. Any other request before that closes the
//! connection, as does a refused handshake or authentication (after its answer, and after
//! `connection.failed.authentication.delay.ms`, so a client cannot guess passwords at full
//! speed). On a listener without SASL, SaslHandshake and SaslAuthenticate are answered
//! ILLEGAL_SASL_STATE, as Kafka answers them.
//!
//! Re-authentication (KIP-368) is not offered: `connections.max.reauth.ms` is refused at
//! start unless 0, so the session lifetime told to clients is 0.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::api::{Broker, HandlerError, Outcome, Request};
use crate::config::sasl::SaslSettings;
use crate::metadata::MetadataImage;
use crate::sasl::{Credentials, Exchange, Mechanism, ScramCredential, ScramMechanism, Step};

/// Kafka's error codes in these two answers.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// Where a connection is in its authentication.
#[derive(Debug)]
enum State {
    /// SASL listener: waiting for SaslHandshake.
    Handshake,
    /// Exchanging tokens in SaslAuthenticate requests (`raw`: as bare frames, handshake v0).
    Exchanging { exchange: Exchange, raw: bool },
    /// Authenticated as this principal (or a listener without SASL: `User:ANONYMOUS`, or a
    /// TLS client's).
    Authenticated(Arc<str>),
}

/// What the connection does with a frame, given its authentication.
#[derive(Debug)]
pub enum Gate {
    /// An ordinary request: handle it.
    Request,
    /// A bare token of a v0 exchange: give it to [`Authentication::raw_token`].
    RawToken,
}

/// What to send after an authentication step, and whether the connection then closes.
#[derive(Debug)]
pub struct Answer {
    pub outcome: Outcome,
    pub close: Option<String>,
}

/// The largest frame a client may send before it is authenticated (Kafka's
/// `sasl.server.max.receive.size` default): a SASL token is small, and an unauthenticated
/// client must not make the broker hold a large buffer.
pub const UNAUTHENTICATED_FRAME_BYTES_MAX: usize = 512 * 1024;

/// One connection's authentication.
#[derive(Debug)]
pub struct Authentication {
    settings: Option<Arc<SaslSettings>>,
    state: State,
    /// The frame bound the connection's reader applies, raised to `frame_bytes_max` once
    /// the client is authenticated.
    frame_max: Arc<AtomicUsize>,
    frame_bytes_max: usize,
}

/// A listener's PLAIN users and the metadata log's SCRAM credentials.
struct ListenerCredentials<'a> {
    plain_users: &'a BTreeMap<String, String>,
    image: &'a MetadataImage,
}

impl Credentials for ListenerCredentials<'_> {
    fn plain_users(&self) -> &BTreeMap<String, String> {
        self.plain_users
    }

    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.image.scram_credential(user, mechanism).cloned()
    }
}

impl Authentication {
    /// The authentication of a new connection on a listener with `settings` (`None`: no
    /// SASL), whose client is `principal` until a SASL exchange names another.
    /// `frame_bytes_max` is `socket.request.max.bytes`, the bound once authenticated.
    pub fn new(
        settings: Option<Arc<SaslSettings>>,
        principal: Arc<str>,
        frame_bytes_max: usize,
    ) -> Self {
        let (state, bound) = match settings {
            Some(_) => (
                State::Handshake,
                UNAUTHENTICATED_FRAME_BYTES_MAX.min(frame_bytes_max),
            ),
            None => (State::Authenticated(principal), frame_bytes_max),
        };
        Authentication {
            settings,
            state,
            frame_max: Arc::new(AtomicUsize::new(bound)),
            frame_bytes_max,
        }
    }

    /// The frame bound the connection's reader is to apply (it changes once the client is
    /// authenticated).
    pub fn frame_max(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.frame_max)
    }

    /// The authenticated principal (`User:name`), once there is one.
    pub fn principal(&self) -> Option<&Arc<str>> {
        match &self.state {
            State::Authenticated(principal) => Some(principal),
            _ => None,
        }
    }

    /// How to take the next frame.
    pub fn gate(&self) -> Gate {
        match self.state {
            State::Exchanging { raw: true, .. } => Gate::RawToken,
            _ => Gate::Request,
        }
    }

    /// Answers `request` if it belongs to the authentication (SaslHandshake,
    /// SaslAuthenticate), refuses any other before the client is authenticated, and lets
    /// the rest through (`Ok(None)`).
    pub async fn intercept(
        &mut self,
        broker: &Broker,
        request: &Request,
    ) -> Result<Option<Answer>, HandlerError> {
        let authenticated = matches!(self.state, State::Authenticated(_));
        match request.api_key {
            ApiKey::SaslHandshake if self.settings.is_some() && !authenticated => {
                self.handshake(request).map(Some)
            }
            ApiKey::SaslAuthenticate
                if matches!(self.state, State::Exchanging { raw: false, .. }) =>
            {
                self.authenticate(broker, request).await.map(Some)
            }
            ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => {
                illegal_state(request, &self.state).map(Some)
            }
            ApiKey::ApiVersions => Ok(None),
            _ if authenticated => Ok(None),
            other => Ok(Some(Answer {
                outcome: Outcome::NoResponse,
                close: Some(format!(
                    "unexpected {other:?} request before SASL authentication"
                )),
            })),
        }
    }

    fn handshake(&mut self, request: &Request) -> Result<Answer, HandlerError> {
        let body: SaslHandshakeRequest = request.decode()?;
        let settings = self.settings.as_ref().map(Arc::clone);
        let offered = settings
            .as_ref()
            .map(|s| s.mechanisms.clone())
            .unwrap_or_default();
        let listed: Vec<StrBytes> = offered.iter().map(|m| StrBytes::from(m.clone())).collect();
        let wanted = body.mechanism.to_string();
        let mechanism = offered
            .contains(&wanted)
            .then(|| Mechanism::from_name(&wanted))
            .flatten();
        let Some(mechanism) = mechanism else {
            let response = SaslHandshakeResponse::default()
                .with_error_code(UNSUPPORTED_SASL_MECHANISM)
                .with_mechanisms(listed);
            return Ok(Answer {
                outcome: request.respond(&response)?,
                close: Some(format!("SASL mechanism {wanted:?} is not offered here")),
            });
        };
        self.state = State::Exchanging {
            exchange: Exchange::Start(mechanism),
            raw: request.version() == 0,
        };
        let response = SaslHandshakeResponse::default().with_mechanisms(listed);
        Ok(Answer {
            outcome: request.respond(&response)?,
            close: None,
        })
    }

    /// One token through the exchange: the server's answer, the principal once
    /// authenticated, or why it failed.
    fn step(&mut self, broker: &Broker, token: &[u8]) -> Result<Vec<u8>, String> {
        let State::Exchanging { exchange, .. } = &mut self.state else {
            return Err("no SASL exchange under way".into());
        };
        let image = broker.image();
        let empty = BTreeMap::new();
        let credentials = ListenerCredentials {
            plain_users: self.settings.as_ref().map_or(&empty, |s| &s.plain_users),
            image: &image,
        };
        match exchange.step(token, &credentials) {
            Ok(Step::Challenge(challenge)) => Ok(challenge),
            Ok(Step::Authenticated { user, response }) => {
                self.state = State::Authenticated(format!("User:{user}").into());
                self.frame_max
                    .store(self.frame_bytes_max, Ordering::Relaxed);
                Ok(response)
            }
            Err(error) => {
                self.state = State::Handshake;
                Err(error.to_string())
            }
        }
    }

    async fn authenticate(
        &mut self,
        broker: &Broker,
        request: &Request,
    ) -> Result<Answer, HandlerError> {
        let body: SaslAuthenticateRequest = request.decode()?;
        match self.step(broker, &body.auth_bytes) {
            Ok(auth_bytes) => {
                if let Some(principal) = self.principal() {
                    tracing::info!(client = %request.client, listener = %request.listener,
                        %principal, "SASL authentication succeeded");
                }
                let response = SaslAuthenticateResponse::default()
                    .with_auth_bytes(auth_bytes.into())
                    .with_session_lifetime_ms(0);
                Ok(Answer {
                    outcome: request.respond(&response)?,
                    close: None,
                })
            }
            Err(message) => {
                failed_delay(broker).await;
                let response = SaslAuthenticateResponse::default()
                    .with_error_code(SASL_AUTHENTICATION_FAILED)
                    .with_error_message(Some(StrBytes::from(message.clone())));
                Ok(Answer {
                    outcome: request.respond(&response)?,
                    close: Some(format!("SASL authentication failed: {message}")),
                })
            }
        }
    }

    /// Takes a bare token of a v0 exchange; the token to send back (length-prefixed), or
    /// why the connection closes.
    pub async fn raw_token(&mut self, broker: &Broker, token: &[u8]) -> Result<Vec<u8>, String> {
        match self.step(broker, token) {
            Ok(answer) => Ok(answer),
            Err(message) => {
                failed_delay(broker).await;
                Err(format!("SASL authentication failed: {message}"))
            }
        }
    }
}

/// Kafka's answer to SaslHandshake or SaslAuthenticate out of turn: ILLEGAL_SASL_STATE.
fn illegal_state(request: &Request, state: &State) -> Result<Answer, HandlerError> {
    let message = match state {
        State::Authenticated(_) => {
            "the connection is already authenticated (re-authentication is not offered)"
        }
        _ => "unexpected SASL request in this state of the handshake",
    };
    let outcome = match request.api_key {
        ApiKey::SaslHandshake => request
            .respond(&SaslHandshakeResponse::default().with_error_code(ILLEGAL_SASL_STATE))?,
        _ => request.respond(
            &SaslAuthenticateResponse::default()
                .with_error_code(ILLEGAL_SASL_STATE)
                .with_error_message(Some(StrBytes::from_static_str(
                    "Unexpected SaslAuthenticate request",
                ))),
        )?,
    };
    let close = match state {
        State::Authenticated(_) => None,
        _ => Some(message.to_string()),
    };
    Ok(Answer { outcome, close })
}

/// Waits `connection.failed.authentication.delay.ms` before a refusal is sent.
async fn failed_delay(broker: &Broker) {
    let delay_ms = broker
        .config
        .get("connection.failed.authentication.delay.ms")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(100);
    tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
}
