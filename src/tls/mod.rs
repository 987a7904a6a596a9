//! TLS for SSL listeners (rustls with the ring provider): the server's certificate chain
//! and key from PEM, client certificates (`ssl.client.auth` requested or required) checked
//! against the PEM truststore, TLS 1.2 and 1.3, cipher suites by their IANA names; and the
//! client side a node uses to reach another one's listener ([`client`]).
//!
//! A keystore file that changes on disk is read again at the next handshake after it
//! changed (at most once per [`RELOAD_CHECK`]), so a renewed certificate is served without
//! a restart; a file that no longer parses keeps the previous certificate, with an error
//! logged.

pub mod client;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::config::tls::{ClientAuth, Pem, TlsSettings, TlsVersion};
use crate::x500::principal_rules::PrincipalRules;

/// How often a handshake may look at the keystore files' modification times.
pub const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// Why a listener's TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("listener {listener}: cannot read {path}: {source}")]
    Read {
        listener: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("listener {listener}: {what} holds no PEM {item}")]
    Missing {
        listener: String,
        what: String,
        item: &'static str,
    },
    #[error(
        "listener {listener}: the private key in {what} is encrypted; highwater reads \
         unencrypted PKCS#8, PKCS#1 or SEC1 keys (openssl pkcs8 -topk8 -nocrypt)"
    )]
    EncryptedKey { listener: String, what: String },
    #[error(
        "listener {listener}: ssl.cipher.suites names {name}, which is not a suite served here"
    )]
    UnknownCipherSuite { listener: String, name: String },
    #[error("listener {listener}: {source}")]
    Rustls {
        listener: String,
        #[source]
        source: rustls::Error,
    },
    #[error("listener {listener}: the truststore cannot verify client certificates: {reason}")]
    Verifier { listener: String, reason: String },
    #[error("listener {listener}: ssl.principal.mapping.rules: {reason}")]
    PrincipalRules { listener: String, reason: String },
}

/// An SSL listener's TLS: its acceptor, and how a client certificate names its principal.
#[derive(Clone)]
pub struct ListenerTls {
    pub acceptor: TlsAcceptor,
    pub principal_rules: Arc<PrincipalRules>,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls")
            .field("principal_rules", &self.principal_rules.text())
            .finish_non_exhaustive()
    }
}

/// The TLS of every listener (by position in the config's `listeners`), `None` for a
/// listener without TLS.
pub fn acceptors(
    listeners: &[crate::config::Listener],
) -> Result<Vec<Option<ListenerTls>>, TlsError> {
    listeners
        .iter()
        .map(|l| l.tls.as_ref().map(listener_tls).transpose())
        .collect()
}

/// The TLS of the listener `settings` configure.
pub fn listener_tls(settings: &TlsSettings) -> Result<ListenerTls, TlsError> {
    let rules = PrincipalRules::parse(&settings.principal_mapping_rules).map_err(|reason| {
        TlsError::PrincipalRules {
            listener: settings.listener.clone(),
            reason,
        }
    })?;
    Ok(ListenerTls {
        acceptor: acceptor(settings)?,
        principal_rules: Arc::new(rules),
    })
}

/// A TLS acceptor for `settings`.
pub fn acceptor(settings: &TlsSettings) -> Result<TlsAcceptor, TlsError> {
    let provider = Arc::new(provider(settings)?);
    let listener = &settings.listener;
    let rustls_error = |source| TlsError::Rustls {
        listener: listener.clone(),
        source,
    };
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&protocol_versions(settings))
        .map_err(rustls_error)?;
    let builder = match (&settings.trust, settings.client_auth) {
        (Some(trust), auth) if auth != ClientAuth::None => {
            let roots = roots(listener, trust)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
            let verifier = match auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier.build().map_err(|e| TlsError::Verifier {
                listener: listener.clone(),
                reason: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let keystore = Keystore::load(settings, &provider)?;
    let mut config = builder.with_cert_resolver(Arc::new(keystore));
    // Kafka speaks no ALPN; clients that offer some still get a session.
    config.alpn_protocols = Vec::new();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The TLS versions of `ssl.enabled.protocols`.
pub(crate) fn protocol_versions(
    settings: &TlsSettings,
) -> Vec<&'static rustls::SupportedProtocolVersion> {
    settings
        .versions
        .iter()
        .map(|v| match v {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        })
        .collect()
}

/// The principal of a client that presented a certificate (verified against the
/// truststore during the handshake): `User:` and its subject as `rules` map it, as Kafka's
/// default principal builder names it. `Ok(None)` without a client certificate (the client
/// is `User:ANONYMOUS`); `Err` with the subject when no rule maps it (Kafka fails the
/// authentication).
pub fn client_principal<S>(
    session: &tokio_rustls::server::TlsStream<S>,
    rules: &PrincipalRules,
) -> Result<Option<String>, String> {
    let certificate = session
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first());
    let Some(certificate) = certificate else {
        return Ok(None);
    };
    let Some(subject) = crate::x500::subject_name(certificate) else {
        tracing::warn!("a client certificate's subject cannot be read: the client is anonymous");
        return Ok(None);
    };
    match rules.name(&subject) {
        Some(name) => Ok(Some(format!("User:{name}"))),
        None => Err(subject),
    }
}

/// The ring provider with only the suites of `ssl.cipher.suites` when it names some.
pub(crate) fn provider(settings: &TlsSettings) -> Result<CryptoProvider, TlsError> {
    let mut provider = rustls::crypto::ring::default_provider();
    if settings.cipher_suites.is_empty() {
        return Ok(provider);
    }
    let mut chosen = Vec::with_capacity(settings.cipher_suites.len());
    for name in &settings.cipher_suites {
        let found = provider
            .cipher_suites
            .iter()
            .find(|s| iana_name(s.suite()) == *name)
            .ok_or_else(|| TlsError::UnknownCipherSuite {
                listener: settings.listener.clone(),
                name: name.clone(),
            })?;
        chosen.push(*found);
    }
    provider.cipher_suites = chosen;
    Ok(provider)
}

/// A suite's IANA name, as Java and Kafka write it (rustls says `TLS13_` for TLS 1.3's).
fn iana_name(suite: rustls::CipherSuite) -> String {
    let name = format!("{suite:?}");
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

fn pem_bytes(listener: &str, pem: &Pem) -> Result<(String, Vec<u8>), TlsError> {
    match pem {
        Pem::Inline(text) => Ok(("the inline PEM".to_string(), text.as_bytes().to_vec())),
        Pem::File(path) => std::fs::read(path)
            .map(|bytes| (path.clone(), bytes))
            .map_err(|source| TlsError::Read {
                listener: listener.to_string(),
                path: path.into(),
                source,
            }),
    }
}

pub(crate) fn certificates(
    listener: &str,
    pem: &Pem,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let (what, bytes) = pem_bytes(listener, pem)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(TlsError::Missing {
            listener: listener.to_string(),
            what,
            item: "certificate",
        });
    }
    Ok(certs)
}

pub(crate) fn private_key(listener: &str, pem: &Pem) -> Result<PrivateKeyDer<'static>, TlsError> {
    let (what, bytes) = pem_bytes(listener, pem)?;
    if String::from_utf8_lossy(&bytes).contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        return Err(TlsError::EncryptedKey {
            listener: listener.to_string(),
            what,
        });
    }
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|_| TlsError::Missing {
        listener: listener.to_string(),
        what,
        item: "private key",
    })
}

pub(crate) fn roots(listener: &str, pem: &Pem) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(listener, pem)? {
        roots.add(cert).map_err(|source| TlsError::Rustls {
            listener: listener.to_string(),
            source,
        })?;
    }
    Ok(Arc::new(roots))
}

/// The listener's certificate and key, read again when a keystore file changes.
#[derive(Debug)]
pub(crate) struct Keystore {
    settings: TlsSettings,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// When the files were last looked at, and their modification times then.
    checked: Mutex<(Instant, Vec<Option<SystemTime>>)>,
}

impl Keystore {
    pub(crate) fn load(
        settings: &TlsSettings,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Self, TlsError> {
        let key = certified_key(settings, provider)?;
        Ok(Keystore {
            settings: settings.clone(),
            provider: Arc::clone(provider),
            current: RwLock::new(Arc::new(key)),
            checked: Mutex::new((Instant::now(), modified(settings))),
        })
    }

    /// Reads the files again if their modification times moved since the last look.
    fn reload_if_changed(&self) {
        let Ok(mut checked) = self.checked.lock() else {
            return;
        };
        if checked.0.elapsed() < RELOAD_CHECK {
            return;
        }
        let now = modified(&self.settings);
        let changed = now != checked.1;
        *checked = (Instant::now(), now);
        if !changed {
            return;
        }
        let listener = &self.settings.listener;
        match certified_key(&self.settings, &self.provider) {
            Ok(key) => {
                if let Ok(mut current) = self.current.write() {
                    *current = Arc::new(key);
                }
                tracing::info!(%listener, "TLS keystore changed on disk: reloaded");
            }
            Err(error) => {
                tracing::error!(%listener, %error,
                    "TLS keystore changed on disk but cannot be used; serving the previous one");
            }
        }
    }
}

impl Keystore {
    /// The certificate and key to present, read again first if the files changed.
    fn present(&self) -> Option<Arc<CertifiedKey>> {
        self.reload_if_changed();
        self.current.read().ok().map(|key| Arc::clone(&key))
    }
}

impl ResolvesServerCert for Keystore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.present()
    }
}

/// A broker connecting to another one's listener presents its keystore the same way.
impl ResolvesClientCert for Keystore {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _schemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.present()
    }

    fn has_certs(&self) -> bool {
        true
    }
}

fn certified_key(
    settings: &TlsSettings,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let listener = &settings.listener;
    let chain = certificates(listener, &settings.certificates)?;
    let key = private_key(listener, &settings.key)?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|source| TlsError::Rustls {
        listener: listener.clone(),
        source,
    })?;
    Ok(key)
}

/// The modification times of the keystore's files (none for inline PEM).
fn modified(settings: &TlsSettings) -> Vec<Option<SystemTime>> {
    [&settings.certificates, &settings.key]
        .into_iter()
        .map(|pem| match pem {
            Pem::File(path) => std::fs::metadata(path).and_then(|m| m.modified()).ok(),
            Pem::Inline(_) => None,
        })
        .collect()
}
