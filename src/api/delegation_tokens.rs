//! CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
//! DescribeDelegationToken (KIP-48, KIP-373; `kafka-delegation-tokens`), as Kafka's
//! KafkaApis answers them: only a client that logged in with SASL (not with a token) or a
//! TLS certificate may ask; creating a token for another owner takes CREATE_TOKENS on that
//! user; the active controller makes every change; a token is described to its owner,
//! requester and renewers, and to whoever may DESCRIBE it or DESCRIBE_TOKENS of its owner.

use kafka_protocol::messages::create_delegation_token_request::CreatableRenewers;
use kafka_protocol::messages::describe_delegation_token_response::{
    DescribedDelegationToken, DescribedDelegationTokenRenewer,
};
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};

use super::errors::controller_error;
use super::{str_bytes, Broker, Credential, HandlerError, Outcome, Request};
use crate::acl::{Operation, ResourceType};
use crate::controller::{ControllerRequest, TokenOutcome, TokenRequest};
use crate::sasl::delegation_token::{DelegationToken, TokenChange, TokenError, TokenSettings};

/// The timestamps of an answer that carries no token (Kafka's ErrorTimestamp).
const NO_TIME: i64 = -1;

/// The first version of CreateDelegationToken and DescribeDelegationToken answers that
/// name a token's requester.
const REQUESTER_VERSION: i16 = 3;

/// A principal's type and name (`User:alice` is `User` and `alice`).
fn split(principal: &str) -> (&str, &str) {
    principal.split_once(':').unwrap_or(("User", principal))
}

/// Why this connection may not ask for token changes, if it may not (Kafka's
/// allowTokenRequests): PLAINTEXT, TLS without a client certificate, and a login with a
/// token itself are refused.
fn not_allowed(request: &Request) -> Option<TokenError> {
    match request.credential {
        Credential::Sasl | Credential::Certificate => None,
        Credential::None | Credential::DelegationToken => Some(TokenError::RequestNotAllowed),
    }
}

/// The broker's token settings, if tokens are enabled here.
fn enabled(broker: &Broker) -> Result<TokenSettings, TokenError> {
    let settings = TokenSettings::from_config(&broker.config.values);
    match settings.enabled() {
        true => Ok(settings),
        false => Err(TokenError::AuthDisabled),
    }
}

/// Logs a refused token request.
fn log_refusal(request: &Request, api: &str, error: &TokenError) {
    tracing::info!(client = %request.client, principal = %request.principal, api, %error,
        "delegation token request refused");
}

/// The active controller's answer to a token change: its error code when it failed.
async fn ask(
    broker: &Broker,
    request: &Request,
    change: TokenRequest,
) -> Result<DelegationToken, i16> {
    let api = ControllerRequest::DelegationToken(change.clone()).name();
    match broker
        .controller
        .ask::<TokenOutcome>(ControllerRequest::DelegationToken(change))
        .await
    {
        Ok(Ok(token)) => Ok(token),
        Ok(Err(error)) => {
            log_refusal(request, api, &error);
            Err(error.code())
        }
        Err(error) => {
            tracing::warn!(client = %request.client, api, %error, "controller request failed");
            Err(controller_error(&error).code())
        }
    }
}

/// Answers CreateDelegationToken.
pub async fn create(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: CreateDelegationTokenRequest = request.decode()?;
    let requester = request.principal.to_string();
    let owner = match body
        .owner_principal_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        Some(name) => {
            let kind = body.owner_principal_type.as_deref().unwrap_or("User");
            format!("{kind}:{name}")
        }
        None => requester.clone(),
    };
    let renewers: Vec<String> = body
        .renewers
        .iter()
        .map(|r: &CreatableRenewers| format!("{}:{}", r.principal_type, r.principal_name))
        .collect();
    let refusal = not_allowed(request)
        .or_else(|| {
            let foreign = owner != requester
                && !broker.authorize(
                    request,
                    Operation::CreateTokens,
                    (ResourceType::User, &owner),
                );
            foreign.then_some(TokenError::AuthorizationFailed)
        })
        .or_else(|| {
            let bad = renewers.iter().any(|r| !r.starts_with("User:"));
            bad.then_some(TokenError::InvalidPrincipalType)
        });
    let made = match refusal.map_or_else(|| enabled(broker).err(), Some) {
        Some(error) => {
            log_refusal(request, "CreateDelegationToken", &error);
            Err(error.code())
        }
        None => {
            let change = TokenRequest::Create {
                owner: owner.clone(),
                requester: requester.clone(),
                renewers,
                max_lifetime_ms: body.max_lifetime_ms,
            };
            ask(broker, request, change).await
        }
    };
    request.respond(&created(broker, request, (&owner, &requester), made))
}

/// The answer to CreateDelegationToken: the token made, or the error; the requester is
/// named from v3 (the versions that have it).
fn created(
    broker: &Broker,
    request: &Request,
    (owner, requester): (&str, &str),
    made: Result<DelegationToken, i16>,
) -> CreateDelegationTokenResponse {
    let (owner_type, owner_name) = split(owner);
    let mut response = CreateDelegationTokenResponse::default()
        .with_principal_type(str_bytes(owner_type))
        .with_principal_name(str_bytes(owner_name));
    if request.version() >= REQUESTER_VERSION {
        let (requester_type, requester_name) = split(requester);
        response = response
            .with_token_requester_principal_type(str_bytes(requester_type))
            .with_token_requester_principal_name(str_bytes(requester_name));
    }
    match made {
        Ok(token) => {
            let hmac = enabled(broker)
                .ok()
                .and_then(|s| s.hmac(&token.token_id))
                .unwrap_or_default();
            tracing::info!(client = %request.client, principal = %request.principal,
                token_id = %token.token_id, owner = %token.owner, "delegation token created");
            response
                .with_issue_timestamp_ms(token.issue_ms)
                .with_expiry_timestamp_ms(token.expiry_ms)
                .with_max_timestamp_ms(token.max_ms)
                .with_token_id(str_bytes(&token.token_id))
                .with_hmac(hmac.into())
        }
        Err(code) => response
            .with_error_code(code)
            .with_issue_timestamp_ms(NO_TIME)
            .with_expiry_timestamp_ms(NO_TIME)
            .with_max_timestamp_ms(NO_TIME),
    }
}

/// A renewal or an expiry, asked with the token's HMAC: the token's new expiry, or the
/// error code.
async fn change_expiry(broker: &Broker, request: &Request, change: TokenRequest) -> (i16, i64) {
    let api = ControllerRequest::DelegationToken(change.clone()).name();
    let refusal = not_allowed(request).or_else(|| enabled(broker).err());
    let outcome = match refusal {
        Some(error) => {
            log_refusal(request, api, &error);
            Err(error.code())
        }
        None => ask(broker, request, change).await,
    };
    match outcome {
        Ok(token) => {
            tracing::info!(client = %request.client, principal = %request.principal, api,
                token_id = %token.token_id, expiry_ms = token.expiry_ms, "delegation token changed");
            (0, token.expiry_ms)
        }
        Err(code) => (code, NO_TIME),
    }
}

/// Answers RenewDelegationToken.
pub async fn renew(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: RenewDelegationTokenRequest = request.decode()?;
    let change = TokenRequest::Change {
        change: TokenChange::Renew,
        principal: request.principal.to_string(),
        hmac: body.hmac.to_vec(),
        period_ms: body.renew_period_ms,
    };
    let (code, expiry) = change_expiry(broker, request, change).await;
    request.respond(
        &RenewDelegationTokenResponse::default()
            .with_error_code(code)
            .with_expiry_timestamp_ms(expiry),
    )
}

/// Answers ExpireDelegationToken.
pub async fn expire(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: ExpireDelegationTokenRequest = request.decode()?;
    let change = TokenRequest::Change {
        change: TokenChange::Expire,
        principal: request.principal.to_string(),
        hmac: body.hmac.to_vec(),
        period_ms: body.expiry_time_period_ms,
    };
    let (code, expiry) = change_expiry(broker, request, change).await;
    request.respond(
        &ExpireDelegationTokenResponse::default()
            .with_error_code(code)
            .with_expiry_timestamp_ms(expiry),
    )
}

/// Whether the request's principal may see `token` (Kafka's filterToken): `owners` (all
/// when `None`) must name its owner, requester or a renewer; then its owner, requester
/// and renewers see it, and others with DESCRIBE on it or DESCRIBE_TOKENS on its owner.
fn shown(
    broker: &Broker,
    request: &Request,
    owners: Option<&[String]>,
    t: &DelegationToken,
) -> bool {
    if owners.is_some_and(|owners| !owners.iter().any(|o| t.describable_by(o))) {
        return false;
    }
    t.describable_by(&request.principal)
        || broker.permits(
            request,
            Operation::Describe,
            (ResourceType::DelegationToken, &t.token_id),
        )
        || broker.permits(
            request,
            Operation::DescribeTokens,
            (ResourceType::User, &t.owner),
        )
}

fn described(
    settings: &TokenSettings,
    t: &DelegationToken,
    version: i16,
) -> DescribedDelegationToken {
    let (owner_type, owner_name) = split(&t.owner);
    let (requester_type, requester_name) = match version >= REQUESTER_VERSION {
        true => split(&t.requester),
        false => ("", ""),
    };
    let renewers = t
        .renewers
        .iter()
        .map(|r| {
            let (kind, name) = split(r);
            DescribedDelegationTokenRenewer::default()
                .with_principal_type(str_bytes(kind))
                .with_principal_name(str_bytes(name))
        })
        .collect();
    DescribedDelegationToken::default()
        .with_principal_type(str_bytes(owner_type))
        .with_principal_name(str_bytes(owner_name))
        .with_token_requester_principal_type(str_bytes(requester_type))
        .with_token_requester_principal_name(str_bytes(requester_name))
        .with_issue_timestamp(t.issue_ms)
        .with_expiry_timestamp(t.expiry_ms)
        .with_max_timestamp(t.max_ms)
        .with_token_id(str_bytes(&t.token_id))
        .with_hmac(settings.hmac(&t.token_id).unwrap_or_default().into())
        .with_renewers(renewers)
}

/// Answers DescribeDelegationToken: the tokens of the owners asked (all when none are
/// named, none for an empty list) that the principal may see.
pub fn describe(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: DescribeDelegationTokenRequest = request.decode()?;
    let settings = match not_allowed(request).map_or_else(|| enabled(broker), Err) {
        Ok(settings) => settings,
        Err(error) => {
            log_refusal(request, "DescribeDelegationToken", &error);
            let response = DescribeDelegationTokenResponse::default().with_error_code(error.code());
            return request.respond(&response);
        }
    };
    let owners: Option<Vec<String>> = body.owners.as_ref().map(|owners| {
        owners
            .iter()
            .map(|o| format!("{}:{}", o.principal_type, o.principal_name))
            .collect()
    });
    let image = broker.image();
    let tokens = image
        .delegation_tokens
        .values()
        .filter(|t| shown(broker, request, owners.as_deref(), t))
        .map(|t| described(&settings, t, request.version()))
        .collect();
    request.respond(&DescribeDelegationTokenResponse::default().with_tokens(tokens))
}
