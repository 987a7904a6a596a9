//! The `sasl` target's broker configuration and seeds: a client's side of whole
//! connections on its SASL_PLAINTEXT listener, logging in with each mechanism.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, DescribeDelegationTokenRequest, MetadataRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Encodable, Request, StrBytes};

use crate::frame;

/// The target's broker: one SASL_PLAINTEXT listener with every mechanism, a PLAIN user
/// (alice), a SCRAM user of each mechanism (bob), unsecured OAUTHBEARER tokens, delegation
/// tokens, sessions of a second, and no delay before refusals.
pub const BROKER_CONFIG: &[(&str, &str)] = &[
    ("listeners", "SASL_PLAINTEXT://127.0.0.1:9092"),
    (
        "sasl.enabled.mechanisms",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    ),
    (
        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        "org.apache.kafka.common.security.plain.PlainLoginModule required \
         user_alice=\"alice-secret\";",
    ),
    (
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
    ),
    (
        "scram.bootstrap.credentials",
        "SCRAM-SHA-256=[name=bob,password=bob-secret,iterations=4096];\
         SCRAM-SHA-512=[name=bob,password=bob-secret,iterations=4096]",
    ),
    ("delegation.token.secret.key", "fuzz-token-secret"),
    ("connections.max.reauth.ms", "1000"),
    ("connection.failed.authentication.delay.ms", "0"),
    ("http.listeners", ""),
];

/// `body` as a length-prefixed frame.
fn framed<R: Request + Encodable>(out: &mut BytesMut, body: &R, version: i16, id: i32) {
    let frame = frame(body, version, id).expect("encodable");
    out.put_i32(frame.len() as i32);
    out.put_slice(&frame);
}

fn handshake(out: &mut BytesMut, mechanism: &str, version: i16, id: i32) {
    let body = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_string(mechanism.to_string()));
    framed(out, &body, version, id);
}

fn authenticate(out: &mut BytesMut, token: &[u8], version: i16, id: i32) {
    let body = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    framed(out, &body, version, id);
}

fn metadata(out: &mut BytesMut, id: i32) {
    framed(out, &MetadataRequest::default().with_topics(None), 12, id);
}

/// An unsecured JWT (`alg` none) for `alice`, as OAUTHBEARER's client message carries it.
fn oauth_message() -> Vec<u8> {
    let b64 = |text: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
    };
    let jwt = format!(
        "{}.{}.",
        b64(r#"{"alg":"none"}"#),
        b64(r#"{"sub":"alice","iat":1700000000,"exp":4102444800}"#)
    );
    format!("n,,\u{1}auth=Bearer {jwt}\u{1}\u{1}").into_bytes()
}

/// Named seeds: whole client streams.
pub fn seeds() -> Vec<(String, Bytes)> {
    let mut seeds = Vec::new();
    let mut add = |name: &str, build: &dyn Fn(&mut BytesMut)| {
        let mut out = BytesMut::new();
        build(&mut out);
        seeds.push((format!("sasl-{name}"), out.freeze()));
    };
    add("plain-reauth", &|out| {
        framed(out, &ApiVersionsRequest::default(), 3, 1);
        handshake(out, "PLAIN", 1, 2);
        authenticate(out, b"\0alice\0alice-secret", 2, 3);
        metadata(out, 4);
        handshake(out, "PLAIN", 1, 5);
        authenticate(out, b"\0alice\0alice-secret", 2, 6);
        handshake(out, "PLAIN", 1, 7);
    });
    add("plain-wrong", &|out| {
        handshake(out, "PLAIN", 1, 1);
        authenticate(out, b"\0alice\0wrong", 2, 2);
    });
    add("plain-v0-raw", &|out| {
        handshake(out, "PLAIN", 0, 1);
        let token = b"\0alice\0alice-secret";
        out.put_i32(token.len() as i32);
        out.put_slice(token);
        metadata(out, 2);
    });
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        add(&mechanism.to_lowercase(), &|out| {
            handshake(out, mechanism, 1, 1);
            authenticate(out, b"n,,n=bob,r=fuzznonce", 2, 2);
            authenticate(out, b"c=biws,r=fuzznonce,p=AAAA", 2, 3);
        });
    }
    add("scram-token", &|out| {
        handshake(out, "SCRAM-SHA-512", 1, 1);
        authenticate(
            out,
            b"n,,n=AAAAAAAAAAAAAAAAAAAAAA,r=fuzznonce,tokenauth=true",
            2,
            2,
        );
        authenticate(out, b"c=biws,r=fuzznonce,p=AAAA", 2, 3);
    });
    add("plain-describe-tokens", &|out| {
        handshake(out, "PLAIN", 1, 1);
        authenticate(out, b"\0alice\0alice-secret", 2, 2);
        let describe = DescribeDelegationTokenRequest::default().with_owners(None);
        framed(out, &describe, 3, 3);
    });
    add("oauthbearer", &|out| {
        handshake(out, "OAUTHBEARER", 1, 1);
        authenticate(out, &oauth_message(), 2, 2);
        metadata(out, 3);
    });
    add("before-login", &|out| metadata(out, 1));
    seeds
}
