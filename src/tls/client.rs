//! The client side of TLS to another node's listener (a broker's inter-broker one, a
//! controller's): its certificate checked against the
//! inter-broker listener's truststore (and, with `ssl.endpoint.identification.algorithm`
//! `https`, for the host connected to), this broker's own keystore offered as the client
//! certificate (read again when its files change, as the listener's), the listener's TLS
//! versions and cipher suites.

use std::io;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{protocol_versions, provider, roots, Keystore, TlsError};
use crate::config::tls::TlsSettings;

/// A TLS client configuration for connections to other brokers.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Reads the truststore and keystore `settings` name.
    pub fn new(settings: &TlsSettings) -> Result<Self, TlsError> {
        let listener = &settings.listener;
        let rustls_error = |source| TlsError::Rustls {
            listener: listener.clone(),
            source,
        };
        let provider = Arc::new(provider(settings)?);
        let trust = settings.trust.as_ref().ok_or_else(|| TlsError::Missing {
            listener: listener.clone(),
            what: "ssl.truststore.location".into(),
            item: "certificate",
        })?;
        let verifier =
            WebPkiServerVerifier::builder_with_provider(roots(listener, trust)?, provider.clone())
                .build()
                .map_err(|e| TlsError::Verifier {
                    listener: listener.clone(),
                    reason: e.to_string(),
                })?;
        let verifier: Arc<dyn ServerCertVerifier> = match settings.verify_host {
            true => verifier,
            false => Arc::new(AnyHost(verifier)),
        };
        let keystore = Arc::new(Keystore::load(settings, &provider)?);
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&protocol_versions(settings))
            .map_err(rustls_error)?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_cert_resolver(keystore);
        Ok(ClientTls {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// The TLS handshake on `tcp`, connected to `address` (whose host the certificate
    /// must name when host names are checked).
    pub async fn handshake(
        &self,
        address: &str,
        tcp: TcpStream,
    ) -> io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let host = address
            .rsplit_once(':')
            .map_or(address, |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.connector.connect(name, tcp).await
    }
}

/// Checks a certificate as `WebPkiServerVerifier` does, except the host it names
/// (`ssl.endpoint.identification.algorithm` empty).
#[derive(Debug)]
struct AnyHost(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHost {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let checked =
            self.0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match checked {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
