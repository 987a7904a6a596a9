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
//! Sessions end (KIP-368) when the credential expires (an OAUTHBEARER token) or after
//! `connections.max.reauth.ms`, whichever comes first: SaslAuthenticate v1+ tells the
//! client the session's lifetime, a client that authenticated with it may re-authenticate
//! (SaslHandshake and SaslAuthenticate again, same mechanism, same principal) at any time,
//! and any other request after the session expired closes the connection, as in Kafka.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::api::{Broker, Credential, HandlerError, Outcome, Request};
use crate::config::sasl::SaslSettings;
use crate::metadata::MetadataImage;
use crate::sasl::delegation_token::TokenSettings;
use crate::sasl::oauthbearer::{TokenValidator, UnsecuredValidator};
use crate::sasl::{Credentials, Exchange, Mechanism, ScramCredential, ScramMechanism, Step};
use crate::server::connection::ANONYMOUS;

/// Kafka's error codes in these two answers.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// An authenticated client's session.
#[derive(Debug, Clone)]
struct Session {
    principal: Arc<str>,
    /// How the client proved it is `principal`.
    credential: Credential,
    /// The SASL mechanism it authenticated with (none: not SASL).
    mechanism: Option<Mechanism>,
    /// When it ends, if it does.
    expires: Option<Instant>,
    /// Whether the client may re-authenticate (it used SaslAuthenticate v1 or later).
    reauthenticable: bool,
}

impl Session {
    fn expired(&self) -> bool {
        self.expires.is_some_and(|at| Instant::now() >= at)
    }
}

/// Where a connection is in its authentication.
#[derive(Debug)]
enum State {
    /// SASL listener: waiting for SaslHandshake.
    Handshake,
    /// Exchanging tokens in SaslAuthenticate requests (`raw`: as bare frames, handshake
    /// v0); `previous` is the session being re-authenticated.
    Exchanging {
        exchange: Exchange,
        mechanism: Mechanism,
        raw: bool,
        previous: Option<Session>,
    },
    /// Authenticated (or a listener without SASL: `User:ANONYMOUS`, or a TLS client's).
    Authenticated(Session),
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
    /// When the last re-authentication began: Kafka begins at most one a second
    /// ([`REAUTH_INTERVAL_MIN`]).
    last_reauth: Option<Instant>,
}

/// A connection may begin a re-authentication at most once a second, as in Kafka
/// (`KafkaChannel`): a SaslHandshake sooner is answered ILLEGAL_SASL_STATE, as one on an
/// authenticated connection that does not re-authenticate.
const REAUTH_INTERVAL_MIN: Duration = Duration::from_secs(1);

/// A listener's PLAIN users, the metadata log's SCRAM credentials and the listener's
/// OAUTHBEARER validator.
struct ListenerCredentials<'a> {
    plain_users: &'a BTreeMap<String, String>,
    image: &'a MetadataImage,
    oauth: TokenValidator,
    tokens: TokenSettings,
}

impl Credentials for ListenerCredentials<'_> {
    fn plain_users(&self) -> &BTreeMap<String, String> {
        self.plain_users
    }

    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.image.scram_credential(user, mechanism).cloned()
    }

    fn delegation_token(
        &self,
        token_id: &str,
        mechanism: ScramMechanism,
    ) -> Option<(ScramCredential, String, i64)> {
        let token = self.image.delegation_tokens.get(token_id)?;
        if token.expired(epoch_ms()) {
            tracing::debug!(%token_id, owner = %token.owner, "expired delegation token refused");
            return None;
        }
        let credential = self.tokens.credential(token, mechanism)?;
        let owner = token.owner.split_once(':').map_or("", |(_, name)| name);
        Some((credential, owner.to_string(), token.expiry_ms))
    }

    fn oauth_validator(&self) -> &TokenValidator {
        &self.oauth
    }

    fn now_ms(&self) -> i64 {
        epoch_ms()
    }
}

/// How the listener validates OAUTHBEARER tokens.
fn token_validator(settings: Option<&SaslSettings>) -> TokenValidator {
    let Some(settings) = settings else {
        return TokenValidator::Unsecured(UnsecuredValidator::default());
    };
    match &settings.oauthbearer_signed {
        Some(signed) => TokenValidator::Signed(signed.clone()),
        None => TokenValidator::Unsecured(UnsecuredValidator::from_options(
            &settings.oauthbearer_options,
        )),
    }
}

fn epoch_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_millis() as i64)
}

/// A session's lifetime in ms as Kafka computes it: the credential's remaining life and
/// `connections.max.reauth.ms`, whichever is shorter; `None` when neither bounds it.
fn session_lifetime_ms(expires_ms: Option<i64>, max_reauth_ms: Option<i64>) -> Option<i64> {
    let credential = expires_ms.map(|at| (at - epoch_ms()).max(0));
    match (credential, max_reauth_ms) {
        (Some(c), Some(m)) => Some(c.min(m)),
        (c, m) => c.or(m),
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
            None => (
                State::Authenticated(Session {
                    credential: match &*principal {
                        ANONYMOUS => Credential::None,
                        _ => Credential::Certificate,
                    },
                    principal,
                    mechanism: None,
                    expires: None,
                    reauthenticable: false,
                }),
                frame_bytes_max,
            ),
        };
        Authentication {
            settings,
            state,
            frame_max: Arc::new(AtomicUsize::new(bound)),
            frame_bytes_max,
            last_reauth: None,
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
            State::Authenticated(session) => Some(&session.principal),
            _ => None,
        }
    }

    /// How the authenticated client proved who it is.
    pub fn credential(&self) -> Credential {
        match &self.state {
            State::Authenticated(session) => session.credential,
            _ => Credential::None,
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
        let session = match &self.state {
            State::Authenticated(session) => Some(session),
            _ => None,
        };
        let expired = session.is_some_and(Session::expired);
        let close = |reason: String| {
            Ok(Some(Answer {
                outcome: Outcome::NoResponse,
                close: Some(reason),
            }))
        };
        match request.api_key {
            ApiKey::SaslHandshake if self.settings.is_some() && session.is_none() => {
                self.handshake(request, None).map(Some)
            }
            ApiKey::SaslHandshake
                if session.is_some_and(|s| s.reauthenticable)
                    && request.version() >= 1
                    && self
                        .last_reauth
                        .is_none_or(|at| at.elapsed() >= REAUTH_INTERVAL_MIN) =>
            {
                let previous = session.cloned();
                self.last_reauth = Some(Instant::now());
                self.handshake(request, previous).map(Some)
            }
            ApiKey::SaslAuthenticate
                if matches!(self.state, State::Exchanging { raw: false, .. }) =>
            {
                self.authenticate(broker, request).await.map(Some)
            }
            ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => {
                illegal_state(request, &self.state).map(Some)
            }
            _ if expired => close(format!(
                "{:?} request after the SASL session expired (the client did not \
                 re-authenticate)",
                request.api_key
            )),
            ApiKey::ApiVersions => Ok(None),
            _ if session.is_some() => Ok(None),
            other => close(format!(
                "unexpected {other:?} request before SASL authentication"
            )),
        }
    }

    /// Answers SaslHandshake; `previous` is the session a re-authentication replaces.
    fn handshake(
        &mut self,
        request: &Request,
        previous: Option<Session>,
    ) -> Result<Answer, HandlerError> {
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
        if let Some(before) = previous.as_ref().and_then(|p| p.mechanism) {
            if before != mechanism {
                let response = SaslHandshakeResponse::default()
                    .with_error_code(UNSUPPORTED_SASL_MECHANISM)
                    .with_mechanisms(listed);
                return Ok(Answer {
                    outcome: request.respond(&response)?,
                    close: Some(format!(
                        "SASL mechanism '{wanted}' requested by client is not supported for \
                         re-authentication of mechanism '{}'",
                        before.name()
                    )),
                });
            }
        }
        self.state = State::Exchanging {
            exchange: Exchange::Start(mechanism),
            mechanism,
            raw: request.version() == 0,
            previous,
        };
        let response = SaslHandshakeResponse::default().with_mechanisms(listed);
        Ok(Answer {
            outcome: request.respond(&response)?,
            close: None,
        })
    }

    /// One token through the exchange (`version`: of the SaslAuthenticate carrying it,
    /// none for a bare token): the server's answer and, once authenticated, the session's
    /// lifetime in ms (0: unbounded); or why it failed.
    fn step(
        &mut self,
        broker: &Broker,
        token: &[u8],
        version: Option<i16>,
    ) -> Result<(Vec<u8>, i64), String> {
        let State::Exchanging {
            exchange,
            mechanism,
            previous,
            ..
        } = &mut self.state
        else {
            return Err("no SASL exchange under way".into());
        };
        let image = broker.image();
        let empty = BTreeMap::new();
        let credentials = ListenerCredentials {
            plain_users: self.settings.as_ref().map_or(&empty, |s| &s.plain_users),
            image: &image,
            oauth: token_validator(self.settings.as_deref()),
            tokens: TokenSettings::from_config(&broker.config.values),
        };
        let (user, response, expires_ms, token) = match exchange.step(token, &credentials) {
            Ok(Step::Challenge(challenge)) => return Ok((challenge, 0)),
            Ok(Step::Authenticated {
                user,
                response,
                expires_ms,
                token,
            }) => (user, response, expires_ms, token),
            Err(error) => {
                self.state = State::Handshake;
                return Err(error.to_string());
            }
        };
        let principal: Arc<str> = format!("User:{user}").into();
        if let Some(before) = previous.as_ref().filter(|p| p.principal != principal) {
            let change = format!(
                "Cannot change principals during re-authentication from {}: {}",
                before.principal.replacen(':', ".", 1),
                principal.replacen(':', ".", 1)
            );
            self.state = State::Handshake;
            return Err(change);
        }
        let listener = self.settings.as_ref().map_or("", |s| s.listener.as_str());
        let max_reauth_ms =
            crate::config::sasl::max_reauth_ms(&broker.config.values, listener, mechanism.name());
        let lifetime_ms = session_lifetime_ms(expires_ms, max_reauth_ms);
        self.state = State::Authenticated(Session {
            principal,
            credential: match token {
                true => Credential::DelegationToken,
                false => Credential::Sasl,
            },
            mechanism: Some(*mechanism),
            expires: lifetime_ms.map(|ms| Instant::now() + Duration::from_millis(ms as u64)),
            reauthenticable: version.is_some_and(|v| v >= 1),
        });
        self.frame_max
            .store(self.frame_bytes_max, Ordering::Relaxed);
        Ok((response, lifetime_ms.unwrap_or(0)))
    }

    async fn authenticate(
        &mut self,
        broker: &Broker,
        request: &Request,
    ) -> Result<Answer, HandlerError> {
        let body: SaslAuthenticateRequest = request.decode()?;
        let reauthenticating = matches!(
            self.state,
            State::Exchanging {
                previous: Some(_),
                ..
            }
        );
        match self.step(broker, &body.auth_bytes, Some(request.version())) {
            Ok((auth_bytes, lifetime_ms)) => {
                if let Some(principal) = self.principal() {
                    let what = match reauthenticating {
                        true => "SASL re-authentication succeeded",
                        false => "SASL authentication succeeded",
                    };
                    tracing::info!(client = %request.client, listener = %request.listener,
                        %principal, session_lifetime_ms = lifetime_ms, "{what}");
                }
                let response =
                    SaslAuthenticateResponse::default().with_auth_bytes(auth_bytes.into());
                let response = match request.version() >= 1 {
                    true => response.with_session_lifetime_ms(lifetime_ms),
                    false => response,
                };
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
        match self.step(broker, token, None) {
            Ok((answer, _)) => Ok(answer),
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
            "the connection is already authenticated (re-authentication needs SaslHandshake \
             v1 after SaslAuthenticate v1)"
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
