//! Delegation tokens (issue 15; KIP-48) over the raw protocol: a user logged in with SCRAM
//! creates a token; the token logs in with SCRAM and `tokenauth=true` as its owner, until it
//! expires or is expired; a token-authenticated connection, a PLAINTEXT one, or a broker
//! without `delegation.token.secret.key` gets Kafka's errors; renewers renew, others are
//! refused; DescribeDelegationToken filters by owner. Kafka's own tool
//! (kafka-delegation-tokens) and a Java client logging in with a token are in
//! compat/tls/run.sh, against Kafka too.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use common::{plain_and_sasl, Client};
use highwater::sasl::scram::ScramClient;
use highwater::sasl::ScramMechanism;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_delegation_token_request::CreatableRenewers;
use kafka_protocol::messages::describe_delegation_token_request::DescribeDelegationTokenOwner;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const M: ScramMechanism = ScramMechanism::Sha512;

/// A broker with a PLAINTEXT and a SASL_PLAINTEXT listener (SCRAM-SHA-512), users alice,
/// bob and carol, and `extra` keys; its two addresses.
async fn broker(dir: &std::path::Path, extra: &[(&str, &str)]) -> (SocketAddr, SocketAddr) {
    let mut keys = vec![("sasl.enabled.mechanisms", "SCRAM-SHA-512")];
    keys.extend_from_slice(extra);
    let (p, s) = plain_and_sasl(dir, &keys).await;
    let mut admin = Client::connect(p).await;
    for user in ["alice", "bob", "carol"] {
        let salt = b"a salt of sixteen".to_vec();
        let salted = M.salted_password(format!("{user}-secret").as_bytes(), &salt, 4096);
        let upsertion = ScramCredentialUpsertion::default()
            .with_name(StrBytes::from(user.to_string()))
            .with_mechanism(M.wire_type())
            .with_iterations(4096)
            .with_salt(salt.into())
            .with_salted_password(salted.into());
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
        let response = admin.call(&request, 0).await;
        assert_eq!(response.results[0].error_code, 0);
    }
    (p, s)
}

/// Logs in over SCRAM-SHA-512, with a password or (`token`) a token's id and base64 HMAC:
/// the final SaslAuthenticate answer.
async fn login(
    client: &mut Client,
    user: &str,
    password: &str,
    token: bool,
) -> SaslAuthenticateResponse {
    let handshake = SaslHandshakeRequest::default().with_mechanism(StrBytes::from(M.name()));
    assert_eq!(client.call(&handshake, 1).await.error_code, 0);
    let (scram, first) = match token {
        true => ScramClient::start_with_token(M, user, password),
        false => ScramClient::start(M, user, password),
    }
    .expect("client first");
    let authenticate =
        |bytes: Vec<u8>| SaslAuthenticateRequest::default().with_auth_bytes(bytes.into());
    let server_first = client.call(&authenticate(first), 2).await;
    if server_first.error_code != 0 {
        return server_first;
    }
    let (last, expected) = scram
        .answer(&server_first.auth_bytes)
        .expect("client final");
    let done = client.call(&authenticate(last), 2).await;
    if done.error_code == 0 {
        ScramClient::verify(&done.auth_bytes, &expected).expect("the server's signature");
    }
    done
}

/// A connection logged in as `user` with its password.
async fn logged_in(address: SocketAddr, user: &str) -> Client {
    let mut client = Client::connect(address).await;
    let done = login(&mut client, user, &format!("{user}-secret"), false).await;
    assert_eq!(done.error_code, 0, "{user}: {:?}", done.error_message);
    client
}

fn renewer(name: &str) -> CreatableRenewers {
    CreatableRenewers::default()
        .with_principal_type(StrBytes::from_static_str("User"))
        .with_principal_name(StrBytes::from(name.to_string()))
}

async fn describe(client: &mut Client, owners: Option<&[&str]>) -> (i16, Vec<String>) {
    let owners = owners.map(|owners| {
        owners
            .iter()
            .map(|o| {
                DescribeDelegationTokenOwner::default()
                    .with_principal_type(StrBytes::from_static_str("User"))
                    .with_principal_name(StrBytes::from(o.to_string()))
            })
            .collect()
    });
    let request = DescribeDelegationTokenRequest::default().with_owners(owners);
    let response = client.call(&request, 3).await;
    let ids = response
        .tokens
        .iter()
        .map(|t| t.token_id.to_string())
        .collect();
    (response.error_code, ids)
}

/// A broker with tokens enabled, alice logged in, and a token she made with bob as its
/// renewer: its addresses, alice's connection and the token.
async fn alices_token(
    dir: &std::path::Path,
) -> (
    SocketAddr,
    SocketAddr,
    Client,
    CreateDelegationTokenResponse,
) {
    let (plain, sasl) = broker(dir, &[("delegation.token.secret.key", "s3cret")]).await;
    let mut alice = logged_in(sasl, "alice").await;
    let request = CreateDelegationTokenRequest::default()
        .with_renewers(vec![renewer("bob")])
        .with_max_lifetime_ms(-1);
    let created = alice.call(&request, 3).await;
    assert_eq!(created.error_code, 0);
    (plain, sasl, alice, created)
}

const DAY_MS: i64 = 24 * 3600 * 1000;

#[tokio::test]
async fn a_token_logs_in_as_its_owner_and_may_not_manage_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (plain, sasl, _alice, created) = alices_token(dir.path()).await;
    assert_eq!(
        (
            created.principal_type.as_str(),
            created.principal_name.as_str()
        ),
        ("User", "alice")
    );
    assert_eq!(created.token_requester_principal_name.as_str(), "alice");
    assert_eq!(created.hmac.len(), 64, "HMAC-SHA512");
    let lives = created.expiry_timestamp_ms - created.issue_timestamp_ms;
    let max = created.max_timestamp_ms - created.issue_timestamp_ms;
    assert_eq!((lives, max), (DAY_MS, 7 * DAY_MS), "Kafka's defaults");
    let (id, password) = (created.token_id.to_string(), B64.encode(&created.hmac));

    // The token logs in as alice, its session bounded by the token's expiry.
    let mut with_token = Client::connect(sasl).await;
    let done = login(&mut with_token, &id, &password, true).await;
    assert_eq!(done.error_code, 0, "{:?}", done.error_message);
    assert!(done.session_lifetime_ms > 0 && done.session_lifetime_ms <= DAY_MS);
    let metadata = with_token
        .call(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert!(!metadata.brokers.is_empty(), "served once authenticated");
    // ...but may not make or describe tokens (Kafka's allowTokenRequests).
    let not_allowed = ResponseError::DelegationTokenRequestNotAllowed.code();
    let create = CreateDelegationTokenRequest::default();
    assert_eq!(with_token.call(&create, 3).await.error_code, not_allowed);
    assert_eq!(describe(&mut with_token, None).await.0, not_allowed);
    // A wrong HMAC is refused, and so is the token's id as a user without the extension.
    let failed = ResponseError::SaslAuthenticationFailed.code();
    let mut wrong = Client::connect(sasl).await;
    let refused = login(&mut wrong, &id, &B64.encode([0u8; 64]), true).await;
    assert_eq!(refused.error_code, failed);
    let mut no_extension = Client::connect(sasl).await;
    let refused = login(&mut no_extension, &id, &password, false).await;
    assert_eq!(refused.error_code, failed);
    // PLAINTEXT may not ask either.
    let mut anonymous = Client::connect(plain).await;
    let answer = anonymous.call(&create, 3).await;
    assert_eq!(answer.error_code, not_allowed);
    assert_eq!(answer.principal_name.as_str(), "ANONYMOUS");
}

#[tokio::test]
async fn tokens_are_described_renewed_by_renewers_and_expired_by_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, sasl, mut alice, created) = alices_token(dir.path()).await;
    let (id, hmac) = (created.token_id.to_string(), created.hmac.clone());
    let password = B64.encode(&hmac);

    // Described with its HMAC and renewers, filtered by owner (or renewer).
    let (code, ids) = describe(&mut alice, None).await;
    assert_eq!((code, ids), (0, vec![id.clone()]));
    let full = alice
        .call(
            &DescribeDelegationTokenRequest::default().with_owners(None),
            3,
        )
        .await;
    assert_eq!(full.tokens[0].hmac, hmac);
    assert_eq!(full.tokens[0].renewers[0].principal_name.as_str(), "bob");
    assert_eq!(
        describe(&mut alice, Some(&["bob"])).await.1,
        vec![id.clone()]
    );
    assert!(describe(&mut alice, Some(&["carol"])).await.1.is_empty());
    assert!(describe(&mut alice, Some(&[])).await.1.is_empty());

    // bob renews it; carol may not; an unknown HMAC is not found.
    let mut bob = logged_in(sasl, "bob").await;
    let renew = |hmac: &[u8], period: i64| {
        RenewDelegationTokenRequest::default()
            .with_hmac(bytes::Bytes::copy_from_slice(hmac))
            .with_renew_period_ms(period)
    };
    let renewed = bob.call(&renew(&hmac, 60_000), 2).await;
    assert_eq!(renewed.error_code, 0);
    assert!(
        renewed.expiry_timestamp_ms < created.expiry_timestamp_ms,
        "renewed for 1 min"
    );
    let mut carol = logged_in(sasl, "carol").await;
    let mismatch = carol.call(&renew(&hmac, 60_000), 2).await;
    assert_eq!(
        (mismatch.error_code, mismatch.expiry_timestamp_ms),
        (ResponseError::DelegationTokenOwnerMismatch.code(), -1)
    );
    let unknown = bob.call(&renew(&[1; 64], 60_000), 2).await;
    assert_eq!(
        unknown.error_code,
        ResponseError::DelegationTokenNotFound.code()
    );

    // Expired now by its owner: gone, and no longer logs in.
    let expire = ExpireDelegationTokenRequest::default()
        .with_hmac(hmac.clone())
        .with_expiry_time_period_ms(-1);
    assert_eq!(alice.call(&expire, 2).await.error_code, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut again = Client::connect(sasl).await;
        let answer = login(&mut again, &id, &password, true).await;
        if answer.error_code == ResponseError::SaslAuthenticationFailed.code() {
            let message = answer
                .error_message
                .map(|m| m.to_string())
                .unwrap_or_default();
            assert!(message.contains("Invalid tokenId"), "{message}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the token still logs in"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(describe(&mut alice, None).await.1.is_empty());
}

#[tokio::test]
async fn tokens_expire_by_themselves_and_need_a_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = [
        ("delegation.token.secret.key", "s3cret"),
        ("delegation.token.expiry.time.ms", "1000"),
        ("delegation.token.expiry.check.interval.ms", "200"),
    ];
    let (_, sasl) = broker(dir.path(), &keys).await;
    let mut alice = logged_in(sasl, "alice").await;
    let created = alice
        .call(
            &CreateDelegationTokenRequest::default().with_max_lifetime_ms(-1),
            3,
        )
        .await;
    assert_eq!(created.error_code, 0);
    assert_eq!(
        created.expiry_timestamp_ms - created.issue_timestamp_ms,
        1000
    );
    let password = B64.encode(&created.hmac);
    let mut early = Client::connect(sasl).await;
    let done = login(&mut early, &created.token_id, &password, true).await;
    assert_eq!(done.error_code, 0, "{:?}", done.error_message);
    assert!(
        done.session_lifetime_ms <= 1000,
        "the session ends with the token"
    );
    // Once expired the controller removes it and it no longer logs in.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !describe(&mut alice, None).await.1.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never swept");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut late = Client::connect(sasl).await;
    let refused = login(&mut late, &created.token_id, &password, true).await;
    assert_eq!(
        refused.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );

    // Without a secret, tokens are disabled.
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, sasl) = broker(dir.path(), &[]).await;
    let mut alice = logged_in(sasl, "alice").await;
    let disabled = ResponseError::DelegationTokenAuthDisabled.code();
    let answer = alice
        .call(&CreateDelegationTokenRequest::default(), 3)
        .await;
    assert_eq!(answer.error_code, disabled);
    assert_eq!(describe(&mut alice, None).await.0, disabled);
}
