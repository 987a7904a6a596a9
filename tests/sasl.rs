//! SASL (issue 15) over the raw protocol: a SASL_PLAINTEXT listener serves PLAIN (JAAS
//! users) and SCRAM-SHA-256/512 (credentials set with AlterUserScramCredentials, or given in
//! `scram.bootstrap.credentials`); before authentication only ApiVersions and the SASL
//! requests are served, any other request closes the connection; a refused handshake or
//! password is answered, then the connection closed; handshake v0's bare tokens work; and
//! the credential APIs refuse what Kafka refuses. Real clients (kcat, confluent-kafka,
//! Kafka's console tools) are in compat/tls/run.sh, against Kafka too.

mod common;

use std::net::SocketAddr;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use common::{plain_and_sasl, Client};
use highwater::sasl::ScramMechanism;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_alice=\"alice-secret\" user_bob=\"bob-secret\";";

/// A broker with a PLAINTEXT and a SASL_PLAINTEXT listener; their addresses.
async fn broker(dir: &std::path::Path, extra: &[(&str, &str)]) -> (SocketAddr, SocketAddr) {
    let mut keys = vec![
        (
            "sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        ),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
    ];
    keys.extend_from_slice(extra);
    plain_and_sasl(dir, &keys).await
}

fn handshake(mechanism: &str) -> SaslHandshakeRequest {
    SaslHandshakeRequest::default().with_mechanism(StrBytes::from(mechanism.to_string()))
}

fn token(bytes: Vec<u8>) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default().with_auth_bytes(bytes.into())
}

/// The client side of a SCRAM exchange over SaslAuthenticate: the final answer's error
/// code (0: authenticated) and, when authenticated, whether the server's signature checks.
async fn scram_login(client: &mut Client, m: ScramMechanism, user: &str, password: &str) -> i16 {
    let shaken = client.call(&handshake(m.name()), 1).await;
    assert_eq!(shaken.error_code, 0);
    let first_bare = format!("n={user},r=clientnonce");
    let first = client
        .call(&token(format!("n,,{first_bare}").into_bytes()), 2)
        .await;
    if first.error_code != 0 {
        return first.error_code;
    }
    let server_first = String::from_utf8(first.auth_bytes.to_vec()).expect("utf8");
    let field = |k: &str| {
        server_first
            .split(',')
            .find_map(|p| p.strip_prefix(k))
            .expect("field")
            .to_string()
    };
    let (nonce, salt, iterations) = (field("r="), field("s="), field("i="));
    let salt = B64.decode(salt).expect("salt");
    let iterations: u32 = iterations.parse().expect("iterations");
    let salted = m.salted_password(password.as_bytes(), &salt, iterations);
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let algorithm = match m {
        ScramMechanism::Sha256 => (ring::hmac::HMAC_SHA256, &ring::digest::SHA256),
        ScramMechanism::Sha512 => (ring::hmac::HMAC_SHA512, &ring::digest::SHA512),
    };
    let hmac = |key: &[u8], data: &[u8]| {
        ring::hmac::sign(&ring::hmac::Key::new(algorithm.0, key), data)
            .as_ref()
            .to_vec()
    };
    let client_key = hmac(&salted, b"Client Key");
    let stored_key = ring::digest::digest(algorithm.1, &client_key);
    let signature = hmac(stored_key.as_ref(), auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    let final_message = format!("{without_proof},p={}", B64.encode(proof));
    let last = client.call(&token(final_message.into_bytes()), 2).await;
    if last.error_code == 0 {
        let server_key = hmac(&salted, b"Server Key");
        let expected = format!(
            "v={}",
            B64.encode(hmac(&server_key, auth_message.as_bytes()))
        );
        assert_eq!(
            last.auth_bytes.as_ref(),
            expected.as_bytes(),
            "the server's signature"
        );
    }
    last.error_code
}

/// AlterUserScramCredentials setting `user`'s `m` credential for `password`.
fn upsert(
    user: &str,
    m: ScramMechanism,
    password: &str,
    iterations: i32,
) -> ScramCredentialUpsertion {
    let salt = b"a salt of sixteen".to_vec();
    let salted = m.salted_password(password.as_bytes(), &salt, iterations.max(1) as u32);
    ScramCredentialUpsertion::default()
        .with_name(StrBytes::from(user.to_string()))
        .with_mechanism(m.wire_type())
        .with_iterations(iterations)
        .with_salt(salt.into())
        .with_salted_password(salted.into())
}

async fn alter(
    client: &mut Client,
    request: AlterUserScramCredentialsRequest,
) -> Vec<(String, i16)> {
    let response = client.call(&request, 0).await;
    response
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect()
}

#[tokio::test]
async fn plain_logs_in_and_only_then_serves_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, sasl) = broker(dir.path(), &[]).await;
    let mut client = Client::connect(sasl).await;
    let versions = client.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(versions.error_code, 0, "ApiVersions before authentication");
    let shaken = client.call(&handshake("PLAIN"), 1).await;
    assert_eq!(shaken.error_code, 0);
    let mechanisms: Vec<String> = shaken.mechanisms.iter().map(ToString::to_string).collect();
    assert_eq!(mechanisms, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    let done = client
        .call(&token(b"\0alice\0alice-secret".to_vec()), 2)
        .await;
    assert_eq!(done.error_code, 0, "{:?}", done.error_message);
    let metadata = client
        .call(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert!(!metadata.brokers.is_empty(), "served once authenticated");
    let again = client.call(&handshake("PLAIN"), 0).await;
    assert_eq!(
        again.error_code,
        ResponseError::IllegalSaslState.code(),
        "re-authentication takes SaslHandshake v1"
    );

    // Before authentication, a request other than ApiVersions and SASL closes the connection.
    let mut early = Client::connect(sasl).await;
    let request = MetadataRequest::default().with_topics(None);
    assert!(early.try_call(&request, 12).await.is_none(), "closed");
    // So does a frame longer than a SASL token could be (512 KiB), before its body is read.
    let mut large = Client::connect(sasl).await;
    large.send_raw(&(1_000_000u32).to_be_bytes()).await;
    assert!(
        large.is_closed().await,
        "a 1 MB frame before authentication"
    );
}

#[tokio::test]
async fn a_connection_re_authenticates_at_most_once_a_second_as_in_kafka() {
    // Kafka's KafkaChannel begins a re-authentication at most once a second; a handshake
    // sooner is answered as on an authenticated connection (kafkajs, re-authenticating
    // before every request when its threshold exceeds the session, gets the same answer
    // from both brokers).
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, sasl) = broker(dir.path(), &[("connections.max.reauth.ms", "60000")]).await;
    let mut client = Client::connect(sasl).await;
    assert_eq!(plain_login(&mut client, "alice").await.error_code, 0);
    let renewed = plain_login(&mut client, "alice").await;
    assert_eq!(renewed.error_code, 0, "the first re-authentication at once");
    let soon = client.call(&handshake("PLAIN"), 1).await;
    assert_eq!(
        soon.error_code,
        ResponseError::IllegalSaslState.code(),
        "another within the second"
    );
    let metadata = client
        .call(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert!(!metadata.brokers.is_empty(), "still authenticated");
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let later = plain_login(&mut client, "alice").await;
    assert_eq!(later.error_code, 0, "a second later");
}

#[tokio::test]
async fn the_first_request_after_login_may_be_larger_than_a_sasl_token() {
    // Only frames before authentication are bounded at 512 KiB; the request that follows
    // the login right away, a 600 KiB produce, is read (the reader waited for it with the
    // bound of before the login, and the connection was closed).
    let dir = tempfile::tempdir().expect("tempdir");
    let (plain, sasl) = broker(dir.path(), &[]).await;
    let mut admin = Client::connect(plain).await;
    assert_eq!(common::create_topic(&mut admin, "large", 1).await, 0);
    let mut client = Client::connect(sasl).await;
    let done = plain_login(&mut client, "alice").await;
    assert_eq!(done.error_code, 0, "{:?}", done.error_message);
    let value = "x".repeat(600 * 1024);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis();
    let batch = common::batch_of_values(&[value], i64::try_from(now).expect("ms"));
    let produced = common::produce(&mut client, "large", 0, batch).await;
    assert_eq!(produced.error_code, 0);
}

/// Logs in with PLAIN over SaslAuthenticate v2; the answer.
async fn plain_login(client: &mut Client, user: &str) -> SaslAuthenticateResponse {
    let shaken = client.call(&handshake("PLAIN"), 1).await;
    assert_eq!(shaken.error_code, 0);
    let message = format!("\0{user}\0{user}-secret").into_bytes();
    client.call(&token(message), 2).await
}

#[tokio::test]
async fn sessions_last_connections_max_reauth_ms_unless_the_client_re_authenticates() {
    // KIP-368: the session's lifetime is told in SaslAuthenticate; the client may
    // re-authenticate as the same principal; a request after the session ended closes the
    // connection.
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, sasl) = broker(dir.path(), &[("connections.max.reauth.ms", "1500")]).await;
    let metadata = MetadataRequest::default().with_topics(None);
    let mut client = Client::connect(sasl).await;
    let first = plain_login(&mut client, "alice").await;
    assert_eq!((first.error_code, first.session_lifetime_ms), (0, 1500));
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let renewed = plain_login(&mut client, "alice").await;
    assert_eq!((renewed.error_code, renewed.session_lifetime_ms), (0, 1500));
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert!(
        client.try_call(&metadata, 12).await.is_some(),
        "served 1.8 s after the first login: the session was renewed"
    );
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    assert!(
        client.try_call(&metadata, 12).await.is_none(),
        "closed once the renewed session ended"
    );

    // Re-authenticating as someone else is refused, and the connection closed.
    let mut client = Client::connect(sasl).await;
    assert_eq!(plain_login(&mut client, "alice").await.error_code, 0);
    let other = plain_login(&mut client, "bob").await;
    assert_eq!(
        other.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    let message = other.error_message.as_deref().unwrap_or_default();
    assert!(
        message.contains("Cannot change principals during re-authentication from User.alice"),
        "{message}"
    );
    assert!(client.is_closed().await);
}

/// An unsecured JWT (`alg` none) with `claims`.
fn unsecured_jwt(claims: &str) -> String {
    let encode = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!("{}.{}.", encode(r#"{"alg":"none"}"#), encode(claims))
}

fn oauth_message(jwt: &str) -> Vec<u8> {
    format!("n,,\u{1}auth=Bearer {jwt}\u{1}\u{1}").into_bytes()
}

fn now_s() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.expect("clock").as_secs()
}

#[tokio::test]
async fn oauthbearer_unsecured_tokens_authenticate_until_they_expire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mechanisms = ("sasl.enabled.mechanisms", "PLAIN,OAUTHBEARER");
    let (_, sasl) = broker(dir.path(), &[mechanisms]).await;
    let metadata = MetadataRequest::default().with_topics(None);
    let mut client = Client::connect(sasl).await;
    assert_eq!(
        client.call(&handshake("OAUTHBEARER"), 1).await.error_code,
        0
    );
    let claims = format!(
        r#"{{"sub":"alice","iat":{},"exp":{}}}"#,
        now_s(),
        now_s() + 3
    );
    let done = client
        .call(&token(oauth_message(&unsecured_jwt(&claims))), 2)
        .await;
    assert_eq!(done.error_code, 0, "{:?}", done.error_message);
    assert!(
        (1_000..=3_000).contains(&done.session_lifetime_ms),
        "the session lasts until the token expires: {}",
        done.session_lifetime_ms
    );
    assert!(client.try_call(&metadata, 12).await.is_some());
    tokio::time::sleep(std::time::Duration::from_millis(
        done.session_lifetime_ms as u64 + 100,
    ))
    .await;
    assert!(
        client.try_call(&metadata, 12).await.is_none(),
        "closed once the token expired"
    );

    // An expired token is answered with RFC 7628's error as a challenge; once the client
    // acknowledges it, it is refused with that error.
    let mut client = Client::connect(sasl).await;
    assert_eq!(
        client.call(&handshake("OAUTHBEARER"), 1).await.error_code,
        0
    );
    let stale = format!(r#"{{"sub":"alice","exp":{}}}"#, now_s() - 10);
    let challenged = client
        .call(&token(oauth_message(&unsecured_jwt(&stale))), 2)
        .await;
    assert_eq!(challenged.error_code, 0);
    assert_eq!(
        challenged.auth_bytes.as_ref(),
        br#"{"status":"invalid_token"}"#
    );
    let refused = client.call(&token(vec![1]), 2).await;
    assert_eq!(
        refused.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    assert_eq!(
        refused.error_message.as_deref(),
        Some(r#"{"status":"invalid_token"}"#)
    );
    assert!(client.is_closed().await);
}

#[tokio::test]
async fn refused_mechanisms_and_passwords_are_answered_then_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (plaintext, sasl) = broker(dir.path(), &[]).await;
    let mut client = Client::connect(sasl).await;
    let refused = client.call(&handshake("GSSAPI"), 1).await;
    assert_eq!(
        refused.error_code,
        ResponseError::UnsupportedSaslMechanism.code()
    );
    assert_eq!(
        refused.mechanisms.len(),
        3,
        "the mechanisms offered are listed"
    );
    assert!(client.is_closed().await, "closed after a refused handshake");

    let mut client = Client::connect(sasl).await;
    client.call(&handshake("PLAIN"), 1).await;
    let wrong = client.call(&token(b"\0alice\0wrong".to_vec()), 2).await;
    assert_eq!(
        wrong.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    let message = wrong.error_message.as_deref().unwrap_or_default();
    assert_eq!(
        message,
        "Authentication failed: Invalid username or password"
    );
    assert!(client.is_closed().await, "closed after a refused password");

    // Out of turn: SaslAuthenticate before the handshake.
    let mut client = Client::connect(sasl).await;
    let early = client
        .call(&token(b"\0alice\0alice-secret".to_vec()), 2)
        .await;
    assert_eq!(early.error_code, ResponseError::IllegalSaslState.code());
    // On a listener without SASL the SASL requests are out of turn, and change nothing.
    let mut client = Client::connect(plaintext).await;
    let shaken = client.call(&handshake("PLAIN"), 1).await;
    assert_eq!(shaken.error_code, ResponseError::IllegalSaslState.code());
    let served = client
        .call(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert!(!served.brokers.is_empty());
}

#[tokio::test]
async fn handshake_v0_exchanges_bare_tokens() {
    // Goal: older clients' KIP-43 framing: after SaslHandshake v0 the tokens travel as bare
    // length-prefixed frames, answered the same way; a wrong password closes the connection.
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, sasl) = broker(dir.path(), &[]).await;
    for (password, accepted) in [("alice-secret", true), ("wrong", false)] {
        let mut client = Client::connect(sasl).await;
        assert_eq!(client.call(&handshake("PLAIN"), 0).await.error_code, 0);
        let token = format!("\0alice\0{password}");
        let mut frame = (token.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(token.as_bytes());
        client.stream.write_all(&frame).await.expect("write");
        let mut length = [0u8; 4];
        let answered = client.stream.read_exact(&mut length).await;
        assert_eq!(answered.is_ok(), accepted, "{password}");
        if accepted {
            assert_eq!(u32::from_be_bytes(length), 0, "PLAIN's empty server token");
            let request = MetadataRequest::default().with_topics(None);
            assert!(!client.call(&request, 12).await.brokers.is_empty());
        }
    }
}

#[tokio::test]
async fn scram_credentials_are_set_described_used_and_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (plaintext, sasl) = broker(dir.path(), &[]).await;
    let mut admin = Client::connect(plaintext).await;
    let set = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert(
        "bob",
        ScramMechanism::Sha512,
        "bob-secret",
        8192,
    )]);
    assert_eq!(alter(&mut admin, set).await, [("bob".to_string(), 0)]);
    let mut client = Client::connect(sasl).await;
    assert_eq!(
        scram_login(&mut client, ScramMechanism::Sha512, "bob", "bob-secret").await,
        0
    );
    let mut client = Client::connect(sasl).await;
    let code = scram_login(&mut client, ScramMechanism::Sha512, "bob", "wrong").await;
    assert_eq!(code, ResponseError::SaslAuthenticationFailed.code());
    let mut client = Client::connect(sasl).await;
    let code = scram_login(&mut client, ScramMechanism::Sha256, "bob", "bob-secret").await;
    assert_eq!(
        code,
        ResponseError::SaslAuthenticationFailed.code(),
        "no SHA-256 credential"
    );

    let describe = DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
        UserName::default().with_name(StrBytes::from_static_str("bob")),
        UserName::default().with_name(StrBytes::from_static_str("nobody")),
    ]));
    let described = admin.call(&describe, 0).await;
    let bob = &described.results[0];
    assert_eq!((bob.error_code, bob.credential_infos.len()), (0, 1));
    assert_eq!(bob.credential_infos[0].iterations, 8192);
    assert_eq!(
        described.results[1].error_code,
        ResponseError::ResourceNotFound.code()
    );

    let delete = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_static_str("bob"))
            .with_mechanism(ScramMechanism::Sha512.wire_type()),
    ]);
    assert_eq!(alter(&mut admin, delete).await, [("bob".to_string(), 0)]);
    let mut client = Client::connect(sasl).await;
    let code = scram_login(&mut client, ScramMechanism::Sha512, "bob", "bob-secret").await;
    assert_eq!(
        code,
        ResponseError::SaslAuthenticationFailed.code(),
        "deleted"
    );
}

#[tokio::test]
async fn scram_credential_changes_are_refused_as_kafka_refuses_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (plaintext, _) = broker(dir.path(), &[]).await;
    let mut admin = Client::connect(plaintext).await;
    let refusals = AlterUserScramCredentialsRequest::default()
        .with_upsertions(vec![
            upsert("few", ScramMechanism::Sha256, "x", 1000),
            upsert("twice", ScramMechanism::Sha256, "x", 4096),
            upsert("twice", ScramMechanism::Sha512, "x", 4096),
            upsert("", ScramMechanism::Sha256, "x", 4096),
        ])
        .with_deletions(vec![ScramCredentialDeletion::default()
            .with_name(StrBytes::from_static_str("ghost"))
            .with_mechanism(1)]);
    let results = alter(&mut admin, refusals).await;
    let code_of = |user: &str| results.iter().find(|(u, _)| u == user).map(|(_, c)| *c);
    assert_eq!(
        code_of("ghost"),
        Some(ResponseError::ResourceNotFound.code())
    );
    assert_eq!(
        code_of("few"),
        Some(ResponseError::UnacceptableCredential.code())
    );
    assert_eq!(
        code_of("twice"),
        Some(ResponseError::DuplicateResource.code())
    );
    assert_eq!(
        code_of(""),
        Some(ResponseError::UnacceptableCredential.code())
    );
}

#[tokio::test]
async fn bootstrap_credentials_log_in_from_the_first_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let users = "SCRAM-SHA-256=[name=admin,password=admin-secret]";
    let (_, sasl) = broker(dir.path(), &[("scram.bootstrap.credentials", users)]).await;
    let mut client = Client::connect(sasl).await;
    let code = scram_login(&mut client, ScramMechanism::Sha256, "admin", "admin-secret").await;
    assert_eq!(code, 0);
}

#[test]
fn a_sasl_listener_without_served_mechanisms_or_users_does_not_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = |extra: &[(&str, &str)]| {
        let mut map = highwater::config::ConfigMap::new();
        map.insert("log.dirs".into(), dir.path().display().to_string());
        map.insert("listeners".into(), "SASL_PLAINTEXT://127.0.0.1:0".into());
        for (k, v) in extra {
            map.insert((*k).into(), (*v).into());
        }
        match highwater::config::BrokerConfig::from_map(map) {
            Err(highwater::config::ConfigError::Unenforced { key, .. }) => key,
            other => panic!("expected a refusal, got {other:?}"),
        }
    };
    assert_eq!(
        refused(&[]),
        "sasl.enabled.mechanisms",
        "Kafka's default GSSAPI"
    );
    assert_eq!(
        refused(&[("sasl.enabled.mechanisms", "PLAIN")]),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    );
    assert_eq!(
        refused(&[
            ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
            ("sasl.kerberos.service.name", "kafka")
        ]),
        "sasl.kerberos.service.name"
    );
    let handler = (
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class",
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    );
    let oauth = ("sasl.enabled.mechanisms", "OAUTHBEARER");
    let https = ("sasl.oauthbearer.jwks.endpoint.url", "https://idp/jwks");
    assert_eq!(
        refused(&[oauth, handler, https]),
        "sasl.oauthbearer.jwks.endpoint.url",
        "a key set is read from a file: URL only"
    );
    let missing = (
        "sasl.oauthbearer.jwks.endpoint.url",
        "file:/no/such/jwks.json",
    );
    assert_eq!(
        refused(&[oauth, handler, missing]),
        "sasl.oauthbearer.jwks.endpoint.url"
    );
    assert_eq!(
        refused(&[oauth, missing]),
        "sasl.oauthbearer.jwks.endpoint.url",
        "a key set without Kafka's validator class is not silently ignored"
    );
}

/// A signed JWT (EdDSA, key id `k1`) with `claims`.
fn signed_jwt(pair: &ring::signature::Ed25519KeyPair, claims: &str) -> String {
    let encode = |s: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let header = encode(br#"{"alg":"EdDSA","kid":"k1","typ":"JWT"}"#);
    let message = format!("{header}.{}", encode(claims.as_bytes()));
    let signature = pair.sign(message.as_bytes());
    format!("{message}.{}", encode(signature.as_ref()))
}

fn ed25519() -> ring::signature::Ed25519KeyPair {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).expect("key");
    ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("pair")
}

#[tokio::test]
async fn oauthbearer_signed_tokens_are_checked_against_the_key_set() {
    use ring::signature::KeyPair as _;
    // Kafka's OAuthBearerValidatorCallbackHandler with a file: JWKS and an expected audience.
    let dir = tempfile::tempdir().expect("tempdir");
    let pair = ed25519();
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
    let jwks = dir.path().join("jwks.json");
    let set = format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"{x}"}}]}}"#);
    std::fs::write(&jwks, set).expect("jwks");
    let url = format!("file:{}", jwks.display());
    let (_, sasl) = broker(
        &dir.path().join("data"),
        &[
            ("sasl.enabled.mechanisms", "OAUTHBEARER"),
            (
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            ),
            ("sasl.oauthbearer.jwks.endpoint.url", url.as_str()),
            ("sasl.oauthbearer.expected.audience", "kafka"),
        ],
    )
    .await;
    let login = |jwt: String| async move {
        let mut client = Client::connect(sasl).await;
        assert_eq!(
            client.call(&handshake("OAUTHBEARER"), 1).await.error_code,
            0
        );
        let answer = client.call(&token(oauth_message(&jwt)), 2).await;
        (answer.error_code, answer.auth_bytes.to_vec())
    };
    let claims = |aud: &str| {
        format!(
            r#"{{"sub":"alice","aud":"{aud}","iat":{},"exp":{}}}"#,
            now_s(),
            now_s() + 600
        )
    };
    assert_eq!(
        login(signed_jwt(&pair, &claims("kafka"))).await,
        (0, vec![])
    );
    let invalid = br#"{"status":"invalid_token"}"#.to_vec();
    let stranger = ed25519();
    assert_eq!(
        login(signed_jwt(&stranger, &claims("kafka"))).await,
        (0, invalid.clone()),
        "signed by a key not in the set: challenged with the error"
    );
    assert_eq!(
        login(signed_jwt(&pair, &claims("elsewhere"))).await,
        (0, invalid.clone()),
        "another audience"
    );
    let unsecured = unsecured_jwt(&claims("kafka"));
    assert_eq!(login(unsecured).await, (0, invalid), "an unsigned token");
}

#[tokio::test]
async fn describe_configs_names_secrets_without_their_values() {
    // Kafka describes its PASSWORD configs (JAAS configs, key passwords, the delegation
    // token secret) with no value and is_sensitive set; highwater listed every static key
    // with its value, so any client could read the listener's PLAIN passwords.
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = [("ssl.key.password", "key-secret")];
    let (plain, _) = broker(dir.path(), &extra).await;
    let mut client = Client::connect(plain).await;
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(StrBytes::from_static_str("1")),
        ]);
    let response = client.call(&request, 4).await;
    let configs = &response.results[0].configs;
    for key in [
        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        "ssl.key.password",
    ] {
        let entry = configs
            .iter()
            .find(|c| c.name.as_str() == key)
            .unwrap_or_else(|| panic!("{key} is listed"));
        assert_eq!(entry.value, None, "{key} has no value shown");
        assert!(entry.is_sensitive, "{key} is sensitive");
        assert_eq!(entry.config_type, 9, "{key} is a PASSWORD config");
        assert!(entry.synonyms.iter().all(|s| s.value.is_none()));
    }
    let shown = format!("{configs:?}");
    for secret in ["alice-secret", "bob-secret", "key-secret"] {
        assert!(!shown.contains(secret), "{secret} is shown");
    }
    let port = configs.iter().find(|c| c.name.as_str() == "listeners");
    assert!(port.is_some_and(|c| c.value.is_some() && !c.is_sensitive));
}
