//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka's KIP-84): the credential a
//! broker keeps per user and mechanism, and the server side of the exchange. The broker
//! never sees or keeps a password: it keeps the salt, the iteration count, and two keys
//! derived from the salted password (StoredKey to check a client's proof, ServerKey to prove
//! itself), as Kafka's ScramCredential.
//!
//! Exchange: client-first `n,,n=user,r=cnonce` → server-first `r=cnonce+snonce,s=salt,i=n`
//! → client-final `c=biws,r=nonce,p=proof` → server-final `v=signature`. No channel
//! binding (`y` or `n` GS2 flags only), as Kafka.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2};
use serde::{Deserialize, Serialize};

/// The two SCRAM mechanisms Kafka offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScramMechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

/// Kafka's bounds on a credential's iteration count (ScramMechanism.minIterations and
/// maxIterations in AlterUserScramCredentials).
pub const ITERATIONS_MIN: u32 = 4096;
pub const ITERATIONS_MAX: u32 = 16384;

impl ScramMechanism {
    /// The mechanism's name in SaslHandshake and configs.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// The mechanism's type in DescribeUserScramCredentials and AlterUserScramCredentials.
    pub fn wire_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism of a wire type.
    pub fn from_wire_type(value: i8) -> Option<Self> {
        match value {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest_algorithm(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let key = hmac::Key::new(self.hmac_algorithm(), key);
        hmac::sign(&key, data).as_ref().to_vec()
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest_algorithm(), data)
            .as_ref()
            .to_vec()
    }

    /// SaltedPassword = Hi(password, salt, iterations) (PBKDF2 with the mechanism's HMAC).
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let algorithm = match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        };
        let mut out = vec![0u8; self.digest_algorithm().output_len()];
        let rounds =
            std::num::NonZeroU32::new(iterations.max(1)).unwrap_or(std::num::NonZeroU32::MIN);
        pbkdf2::derive(algorithm, rounds, salt, password, &mut out);
        out
    }
}

/// What a broker keeps of one user's SCRAM password (Kafka's ScramCredential).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl ScramCredential {
    /// The credential of a salted password (what AlterUserScramCredentials carries).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: u32,
    ) -> Self {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// The credential of `password` with a fresh random salt (bootstrap users in config).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> Result<Self, ScramError> {
        let mut salt = vec![0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut salt)
            .map_err(|_| ScramError::Random)?;
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        Ok(Self::from_salted_password(
            mechanism, &salt, &salted, iterations,
        ))
    }
}

/// Why a SCRAM exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("Authentication failed: invalid SCRAM message ({0})")]
    Malformed(&'static str),
    #[error("Authentication failed: Invalid user credentials")]
    InvalidCredentials,
    #[error("Authentication failed: channel binding is not supported")]
    ChannelBinding,
    #[error("Token Authentication failed: Invalid tokenId : {0}")]
    InvalidToken(String),
    #[error(
        "Authentication failed: Client requested an authorization id that is different from \
         username"
    )]
    AuthorizationId,
    #[error("the system's random source failed")]
    Random,
}

/// The attributes (`k=value`) of a SCRAM message, in order.
fn attributes(message: &str) -> Vec<(char, &str)> {
    message
        .split(',')
        .filter_map(|part| {
            let mut chars = part.chars();
            let key = chars.next()?;
            (chars.next() == Some('=')).then(|| (key, &part[2..]))
        })
        .collect()
}

fn attribute<'a>(attributes: &[(char, &'a str)], key: char) -> Result<&'a str, ScramError> {
    attributes
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .ok_or(ScramError::Malformed("a required attribute is missing"))
}

/// A SCRAM saslname decoded (`=2C` is `,`, `=3D` is `=`).
fn decode_name(name: &str) -> Result<String, ScramError> {
    let mut decoded = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        decoded.push_str(&rest[..at]);
        let escaped = match rest.get(at..at + 3) {
            Some("=2C") => ',',
            Some("=3D") => '=',
            _ => return Err(ScramError::Malformed("a user name with a bare '='")),
        };
        decoded.push(escaped);
        rest = &rest[at + 3..];
    }
    decoded.push_str(rest);
    Ok(decoded)
}

/// The server's side of one exchange, between its two client messages.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    user: String,
    credential: ScramCredential,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

/// Who a client-first message logs in as, before the credential is looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The user name (a token's id when `token`).
    pub user: String,
    /// Whether it logs in with a delegation token (the `tokenauth=true` extension).
    pub token: bool,
}

impl ScramServer {
    /// Who a client-first message logs in as; an authorization id other than the user is
    /// refused, as Kafka refuses it.
    pub fn first_of(client_first: &[u8]) -> Result<ClientFirst, ScramError> {
        let text =
            std::str::from_utf8(client_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (gs2_header, bare) = split_gs2(text)?;
        let user = decode_name(attribute(&attributes(bare), 'n')?)?;
        let authzid = gs2_header[2..gs2_header.len() - 1]
            .strip_prefix("a=")
            .map(decode_name)
            .transpose()?;
        if authzid.is_some_and(|a| !a.is_empty() && a != user) {
            return Err(ScramError::AuthorizationId);
        }
        // Extensions follow the nonce as `key=value` (RFC 5802's reserved space; Kafka's
        // ScramExtensions): only `tokenauth` means anything.
        let token = bare
            .split(',')
            .filter_map(|part| part.split_once('='))
            .any(|(key, value)| key == "tokenauth" && value.eq_ignore_ascii_case("true"));
        Ok(ClientFirst { user, token })
    }

    /// Answers a client-first message with the user's `credential` (found by
    /// [`ScramServer::first_of`]): the server-first message to send.
    pub fn start(
        mechanism: ScramMechanism,
        client_first: &[u8],
        credential: ScramCredential,
    ) -> Result<(Self, Vec<u8>), ScramError> {
        let text =
            std::str::from_utf8(client_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (gs2_header, bare) = split_gs2(text)?;
        let attrs = attributes(bare);
        let user = decode_name(attribute(&attrs, 'n')?)?;
        let client_nonce = attribute(&attrs, 'r')?;
        if client_nonce.is_empty() {
            return Err(ScramError::Malformed("an empty nonce"));
        }
        let mut random = [0u8; 24];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random)
            .map_err(|_| ScramError::Random)?;
        let nonce = format!("{client_nonce}{}", B64.encode(random));
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let server = ScramServer {
            mechanism,
            user,
            credential,
            gs2_header: gs2_header.to_string(),
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        };
        Ok((server, server_first.into_bytes()))
    }

    /// Checks the client-final message: the user authenticated, and the server-final
    /// message proving the server knows the credential too.
    pub fn finish(self, client_final: &[u8]) -> Result<(String, Vec<u8>), ScramError> {
        let text =
            std::str::from_utf8(client_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no proof"))?;
        let attrs = attributes(without_proof);
        let binding = B64
            .decode(attribute(&attrs, 'c')?)
            .map_err(|_| ScramError::Malformed("channel binding is not base64"))?;
        if binding != self.gs2_header.as_bytes() {
            return Err(ScramError::Malformed("the channel binding does not match"));
        }
        if attribute(&attrs, 'r')? != self.nonce {
            return Err(ScramError::Malformed("the nonce does not match"));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("the proof is not base64"))?;
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let m = self.mechanism;
        let signature = m.hmac(&self.credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(ScramError::InvalidCredentials);
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let stored = m.hash(&client_key);
        if !super::equal_in_constant_time(&stored, &self.credential.stored_key) {
            return Err(ScramError::InvalidCredentials);
        }
        let server_signature = m.hmac(&self.credential.server_key, auth_message.as_bytes());
        let server_final = format!("v={}", B64.encode(server_signature));
        Ok((self.user, server_final.into_bytes()))
    }
}

/// The client's side of one exchange (a broker authenticating to another one's
/// inter-broker listener), between its two messages.
#[derive(Debug)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
}

impl ScramClient {
    /// Starts an exchange as `user`: the client and its client-first message.
    pub fn start(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
    ) -> Result<(Self, Vec<u8>), ScramError> {
        Self::start_with(mechanism, user, password, "")
    }

    /// Starts an exchange with a delegation token: its id as the user, its base64 HMAC as
    /// the password, and the `tokenauth` extension.
    pub fn start_with_token(
        mechanism: ScramMechanism,
        token_id: &str,
        hmac_base64: &str,
    ) -> Result<(Self, Vec<u8>), ScramError> {
        Self::start_with(mechanism, token_id, hmac_base64, ",tokenauth=true")
    }

    fn start_with(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        extensions: &str,
    ) -> Result<(Self, Vec<u8>), ScramError> {
        let mut random = [0u8; 24];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random)
            .map_err(|_| ScramError::Random)?;
        let nonce = B64.encode(random);
        let name = user.replace('=', "=3D").replace(',', "=2C");
        let client_first_bare = format!("n={name},r={nonce}{extensions}");
        let first = format!("n,,{client_first_bare}").into_bytes();
        let client = ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare,
            nonce,
        };
        Ok((client, first))
    }

    /// Answers the server-first message: the client-final message, and the server
    /// signature the server-final message must carry.
    pub fn answer(self, server_first: &[u8]) -> Result<(Vec<u8>, Vec<u8>), ScramError> {
        let text =
            std::str::from_utf8(server_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let attrs = attributes(text);
        let nonce = attribute(&attrs, 'r')?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramError::Malformed(
                "the server's nonce does not extend ours",
            ));
        }
        let salt = B64
            .decode(attribute(&attrs, 's')?)
            .map_err(|_| ScramError::Malformed("the salt is not base64"))?;
        let iterations: u32 = attribute(&attrs, 'i')?
            .parse()
            .map_err(|_| ScramError::Malformed("the iteration count is not a number"))?;
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return Err(ScramError::Malformed("an iteration count out of bounds"));
        }
        let m = self.mechanism;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let credential = ScramCredential::from_salted_password(m, &salt, &salted, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_key = m.hmac(&salted, b"Client Key");
        let signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        let client_final = format!("{without_proof},p={}", B64.encode(proof));
        Ok((client_final.into_bytes(), server_signature))
    }

    /// Checks the server-final message against the signature [`ScramClient::answer`]
    /// expects: the server knew the credential.
    pub fn verify(server_final: &[u8], server_signature: &[u8]) -> Result<(), ScramError> {
        let text =
            std::str::from_utf8(server_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let attrs = attributes(text);
        if let Ok(error) = attribute(&attrs, 'e') {
            tracing::debug!(error, "the SCRAM server refused the exchange");
            return Err(ScramError::InvalidCredentials);
        }
        let signature = B64
            .decode(attribute(&attrs, 'v')?)
            .map_err(|_| ScramError::Malformed("the server signature is not base64"))?;
        match super::equal_in_constant_time(&signature, server_signature) {
            true => Ok(()),
            false => Err(ScramError::Malformed("the server signature does not match")),
        }
    }
}

/// Splits a client-first message into its GS2 header (with its trailing comma) and the
/// client-first-bare part; channel binding (`p=`) is refused, as Kafka refuses it.
fn split_gs2(message: &str) -> Result<(&str, &str), ScramError> {
    let flag = message.get(..2).ok_or(ScramError::Malformed("too short"))?;
    match flag {
        "n," | "y," => {}
        _ if message.starts_with("p=") => return Err(ScramError::ChannelBinding),
        _ => return Err(ScramError::Malformed("no GS2 header")),
    }
    let authzid_end = message[2..]
        .find(',')
        .map(|i| i + 2)
        .ok_or(ScramError::Malformed("no GS2 header"))?;
    Ok((&message[..=authzid_end], &message[authzid_end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SCRAM-SHA-256 exchange of RFC 7677, section 3, with the server's nonce as
    /// the RFC has it.
    #[test]
    fn the_rfc_7677_exchange_authenticates_and_signs() {
        let m = ScramMechanism::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let credential = ScramCredential::from_salted_password(m, &salt, &salted, 4096);
        let client_first = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
        let first = ScramServer::first_of(client_first).map(|f| f.user);
        assert_eq!(first, Ok("user".into()));
        let (mut server, _) = ScramServer::start(m, client_first, credential).expect("first");
        // The RFC's server nonce instead of a random one, so its proof applies.
        let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        server.nonce = nonce.into();
        server.server_first = format!("r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
        let client_final =
            format!("c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
        let (user, server_final) = server.finish(client_final.as_bytes()).expect("final");
        assert_eq!(user, "user");
        assert_eq!(
            String::from_utf8(server_final).expect("utf8"),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn a_wrong_proof_a_wrong_nonce_and_channel_binding_are_refused() {
        let m = ScramMechanism::Sha512;
        let credential = ScramCredential::from_password(m, "secret", 4096).expect("credential");
        let (server, first) =
            ScramServer::start(m, b"n,,n=alice,r=abc", credential.clone()).expect("first");
        let nonce = String::from_utf8(first).expect("utf8")[2..]
            .split(',')
            .next()
            .map(String::from);
        let nonce = nonce.expect("nonce");
        let bad = format!("c=biws,r={nonce},p={}", B64.encode([0u8; 64]));
        assert_eq!(
            server.finish(bad.as_bytes()),
            Err(ScramError::InvalidCredentials)
        );
        let (server, _) = ScramServer::start(m, b"n,,n=alice,r=abc", credential).expect("first");
        let wrong_nonce = format!("c=biws,r=abcX,p={}", B64.encode([0u8; 64]));
        assert!(matches!(
            server.finish(wrong_nonce.as_bytes()),
            Err(ScramError::Malformed(_))
        ));
        let user_of = |first: &[u8]| ScramServer::first_of(first).map(|f| f.user);
        assert_eq!(
            user_of(b"p=tls-unique,,n=alice,r=abc"),
            Err(ScramError::ChannelBinding)
        );
        assert_eq!(user_of(b"n,,n=a=2Cb,r=x"), Ok("a,b".into()));
        assert_eq!(user_of(b"n,,n=a=3D2C,r=x"), Ok("a=2C".into()));
        assert!(user_of(b"n,,n=a=b,r=x").is_err(), "a bare '='");
        assert!(user_of(b"garbage").is_err());
        assert_eq!(user_of(b"n,a=alice,n=alice,r=x"), Ok("alice".into()));
        assert_eq!(
            user_of(b"n,a=bob,n=alice,r=x"),
            Err(ScramError::AuthorizationId)
        );
        let token = ScramServer::first_of(b"n,,n=id,r=x,tokenauth=true").expect("first");
        assert_eq!((token.user.as_str(), token.token), ("id", true));
        let plain = ScramServer::first_of(b"n,,n=id,r=x,tokenauth=false").expect("first");
        assert!(!plain.token);
    }

    #[test]
    fn the_client_and_the_server_agree_and_a_wrong_password_is_refused() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let credential = ScramCredential::from_password(m, "s3cret", 4096).expect("cred");
            let (client, first) = ScramClient::start(m, "a,b=c", "s3cret").expect("start");
            let user = ScramServer::first_of(&first).map(|f| f.user);
            assert_eq!(user, Ok("a,b=c".into()));
            let (server, server_first) =
                ScramServer::start(m, &first, credential.clone()).expect("server first");
            let (client_final, expected) = client.answer(&server_first).expect("answer");
            let (user, server_final) = server.finish(&client_final).expect("finish");
            assert_eq!(user, "a,b=c");
            assert_eq!(ScramClient::verify(&server_final, &expected), Ok(()));
            assert!(ScramClient::verify(b"v=AAAA", &expected).is_err());
            let (client, first) = ScramClient::start(m, "alice", "wrong").expect("start");
            let (server, server_first) =
                ScramServer::start(m, &first, credential).expect("server first");
            let (client_final, _) = client.answer(&server_first).expect("answer");
            assert_eq!(
                server.finish(&client_final),
                Err(ScramError::InvalidCredentials)
            );
        }
    }
}
