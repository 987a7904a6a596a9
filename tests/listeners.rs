//! Listeners (issue 15): several named ones (`listeners`, `advertised.listeners`,
//! `listener.security.protocol.map`, `inter.broker.listener.name`), each telling its
//! clients the brokers' addresses on that listener, as Kafka answers Metadata,
//! DescribeCluster and FindCoordinator; and SSL listeners: TLS with PEM key material as
//! Kafka configures it (`ssl.keystore.location`, `ssl.truststore.location`,
//! `ssl.client.auth`), next to a PLAINTEXT listener; keystores renewed on disk are served,
//! and presented to other brokers, without a restart. Certificates are made here with
//! rcgen; clients are rustls.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::pki::Pki;
use common::{serve_on, Client};
use highwater::api::Broker;
use kafka_protocol::messages::{
    ApiVersionsRequest, DescribeClusterRequest, FindCoordinatorRequest, MetadataRequest,
};
use kafka_protocol::protocol::StrBytes;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;

/// A broker with a PLAINTEXT listener and an SSL one (advertised as `localhost`)
/// configured by `ssl`.
async fn broker_with_ssl(
    dir: &std::path::Path,
    ssl: &[(&str, &str)],
) -> (
    Arc<Broker>,
    [SocketAddr; 2],
    tokio::sync::oneshot::Sender<()>,
) {
    two_listeners(dir, ["PLAINTEXT", "SSL"], ["127.0.0.1", "localhost"], ssl).await
}

/// A broker whose SSL listener requires a client certificate issued by `pki`, with `extra`
/// keys; files and data under `dir`.
async fn broker_with_mtls(
    dir: &std::path::Path,
    pki: &Pki,
    extra: &[(&str, &str)],
) -> (
    Arc<Broker>,
    [SocketAddr; 2],
    tokio::sync::oneshot::Sender<()>,
) {
    let chain = keystore(dir, pki);
    let trust = write(dir, "ca.pem", &pki.ca_pem());
    let mut ssl = vec![
        ("listener.name.ssl.ssl.keystore.location", chain.as_str()),
        ("ssl.truststore.location", trust.as_str()),
        ("ssl.client.auth", "required"),
    ];
    ssl.extend_from_slice(extra);
    broker_with_ssl(&dir.join("data"), &ssl).await
}

/// A broker with two listeners named `names`, advertised as `hosts` on their ports, with
/// `extra` keys; returns the broker, both bound addresses and the stop.
async fn two_listeners(
    dir: &std::path::Path,
    names: [&str; 2],
    hosts: [&str; 2],
    extra: &[(&str, &str)],
) -> (
    Arc<Broker>,
    [SocketAddr; 2],
    tokio::sync::oneshot::Sender<()>,
) {
    let first = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let second = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addrs = [
        first.local_addr().expect("addr"),
        second.local_addr().expect("addr"),
    ];
    let listeners = format!("{}://{},{}://{}", names[0], addrs[0], names[1], addrs[1]);
    let advertised = format!(
        "{}://{}:{},{}://{}:{}",
        names[0],
        hosts[0],
        addrs[0].port(),
        names[1],
        hosts[1],
        addrs[1].port()
    );
    let mut keys = vec![
        ("listeners", listeners.as_str()),
        ("advertised.listeners", advertised.as_str()),
    ];
    keys.extend_from_slice(extra);
    let (broker, stop) = serve_on(dir, &keys, vec![first, second]).await;
    (broker, addrs, stop)
}

fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|c| c.expect("cert"))
        .collect()
}

/// A rustls client trusting `ca`, with `identity` (certificate and key PEM) if given.
fn connector(ca: &str, identity: Option<&(String, String)>) -> TlsConnector {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs(ca) {
        roots.add(cert).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                certs(cert),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key"),
            )
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    TlsConnector::from(Arc::new(config))
}

/// A Kafka client over TLS to `addr`, checking the broker's certificate for `localhost`;
/// `Err` when the handshake fails.
async fn tls_client(addr: SocketAddr, connector: &TlsConnector) -> std::io::Result<Client> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").expect("name");
    let stream = connector.connect(name, tcp).await?;
    Ok(Client::over(Box::new(stream), addr))
}

/// Whether a request on `client` is answered (a TLS 1.3 server refuses a client
/// certificate after the client's side of the handshake is done: the first read fails).
async fn answers(client: &mut Client) -> bool {
    let frame = client.frame(&ApiVersionsRequest::default(), 3);
    if tokio::io::AsyncWriteExt::write_all(&mut client.stream, &frame)
        .await
        .is_err()
    {
        return false;
    }
    client.read_frame().await.is_some()
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.display().to_string()
}

/// The (host, port) of every broker in a Metadata answer.
async fn advertised_brokers(client: &mut Client) -> Vec<(String, i32)> {
    let metadata = client.call(&MetadataRequest::default(), 12).await;
    metadata
        .brokers
        .iter()
        .map(|b| (b.host.to_string(), b.port))
        .collect()
}

/// A keystore file (certificate then key) for `localhost`, issued by `pki`.
fn keystore(dir: &std::path::Path, pki: &Pki) -> String {
    let (cert, key) = pki.issue(&["localhost"], "broker");
    write(dir, "broker.pem", &format!("{cert}{key}"))
}

#[tokio::test]
async fn an_ssl_listener_serves_kafka_over_tls_beside_a_plaintext_one() {
    // Goal: an SSL listener with a PEM keystore answers Kafka requests only over TLS, with
    // the certificate a client verifies for the advertised host; Metadata on it names the
    // SSL addresses, on the PLAINTEXT listener the plaintext ones.
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let (cert, key) = pki.issue(&["localhost", "127.0.0.1"], "broker");
    let keystore = write(dir.path(), "broker.pem", &format!("{key}{cert}"));
    let data = dir.path().join("data");
    let ssl = [("ssl.keystore.location", keystore.as_str())];
    let (_broker, [plain, secure], stop) = broker_with_ssl(&data, &ssl).await;

    let mut client = tls_client(secure, &connector(&pki.ca_pem(), None))
        .await
        .expect("TLS handshake");
    assert_eq!(
        advertised_brokers(&mut client).await,
        vec![("localhost".into(), i32::from(secure.port()))]
    );

    let mut plaintext = Client::connect(plain).await;
    let metadata = plaintext.call(&MetadataRequest::default(), 12).await;
    assert_eq!(metadata.brokers[0].port, i32::from(plain.port()));

    // A plaintext Kafka request on the SSL port is not served: the connection closes.
    let mut wrong = Client::connect(secure).await;
    let frame = wrong.frame(&ApiVersionsRequest::default(), 3);
    wrong.send_raw(&frame).await;
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), wrong.stream.read_exact(&mut byte));
    if read.await.expect("answered or closed in time").is_ok() {
        assert_eq!(byte[0], 0x15, "a TLS alert record, not a Kafka response");
    }

    // A client that does not trust the broker's CA fails the handshake.
    let other = Pki::new();
    assert!(tls_client(secure, &connector(&other.ca_pem(), None))
        .await
        .is_err());
    let _ = stop.send(());
}

#[tokio::test]
async fn ssl_client_auth_required_admits_only_clients_with_a_trusted_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let (_broker, [_, secure], stop) = broker_with_mtls(dir.path(), &pki, &[]).await;

    let identity = pki.issue(&["client"], "client");
    let mut trusted = tls_client(secure, &connector(&pki.ca_pem(), Some(&identity)))
        .await
        .expect("handshake");
    assert!(answers(&mut trusted).await, "a trusted client is served");

    let anonymous = tls_client(secure, &connector(&pki.ca_pem(), None)).await;
    if let Ok(mut anonymous) = anonymous {
        assert!(!answers(&mut anonymous).await, "no certificate, no service");
    }
    let stranger = Pki::new().issue(&["client"], "stranger");
    let untrusted = tls_client(secure, &connector(&pki.ca_pem(), Some(&stranger))).await;
    if let Ok(mut untrusted) = untrusted {
        assert!(
            !answers(&mut untrusted).await,
            "an untrusted certificate is refused"
        );
    }
    let _ = stop.send(());
}

/// A broker requiring client certificates of `pki`, with Kafka's authorizer and `extra`
/// keys, where `principal` alone may describe the topic `certs`; the SSL listener's
/// address and the stop.
async fn broker_allowing(
    dir: &std::path::Path,
    pki: &Pki,
    principal: &'static str,
    extra: &[(&str, &str)],
) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let mut keys = vec![
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("super.users", "User:ANONYMOUS"),
    ];
    keys.extend_from_slice(extra);
    let (_broker, [plain, secure], stop) = broker_with_mtls(dir, pki, &keys).await;
    let mut admin = Client::connect(plain).await;
    assert_eq!(common::create_topic(&mut admin, "certs", 1).await, 0);
    let allow = kafka_protocol::messages::create_acls_request::AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_static_str("certs"))
        .with_resource_pattern_type(3)
        .with_principal(StrBytes::from_static_str(principal))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(8)
        .with_permission_type(3);
    let created = admin
        .call(
            &kafka_protocol::messages::CreateAclsRequest::default().with_creations(vec![allow]),
            3,
        )
        .await;
    assert_eq!(created.results[0].error_code, 0);
    (secure, stop)
}

/// The topics a client with `identity` sees on `secure`; `None` if the broker closed the
/// connection.
async fn topics_seen_by(
    pki: &Pki,
    secure: SocketAddr,
    identity: (String, String),
) -> Option<Vec<String>> {
    let connector = connector(&pki.ca_pem(), Some(&identity));
    let mut client = tls_client(secure, &connector).await.ok()?;
    let all = MetadataRequest::default().with_topics(None);
    let answer = client.try_call(&all, 12).await?;
    let names = answer
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()));
    Some(names.collect())
}

/// Waits until the ACL allowing `identity` reached the broker's metadata.
async fn until_seen(pki: &Pki, secure: SocketAddr, identity: &(String, String)) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while topics_seen_by(pki, secure, identity.clone()).await != Some(vec!["certs".to_string()]) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{identity:?} is allowed to describe certs"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_client_certificate_subject_is_the_principal_acls_name() {
    // As Kafka's default principal builder: `User:` and the subject in RFC 2253 form.
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let (secure, stop) = broker_allowing(dir.path(), &pki, "User:CN=alice,O=highwater", &[]).await;
    until_seen(&pki, secure, &pki.issue_person("highwater", "alice")).await;
    let bob = pki.issue_person("highwater", "bob");
    let seen = topics_seen_by(&pki, secure, bob).await;
    assert_eq!(seen, Some(vec![]), "no ACL names bob");
    let _ = stop.send(());
}

#[tokio::test]
async fn ssl_principal_mapping_rules_name_the_principal_or_close_the_connection() {
    // Kafka's SslPrincipalMapper: the first rule matching the whole subject names the
    // principal; a subject no rule matches fails authentication.
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let rules = [(
        "listener.name.ssl.ssl.principal.mapping.rules",
        "RULE:^CN=([^,]+),O=highwater$/$1/U, RULE:^CN=(.*),O=partners$/partner-$1/",
    )];
    let (secure, stop) = broker_allowing(dir.path(), &pki, "User:ALICE", &rules).await;
    until_seen(&pki, secure, &pki.issue_person("highwater", "alice")).await;
    let partner = pki.issue_person("partners", "alice");
    let seen = topics_seen_by(&pki, secure, partner).await;
    assert_eq!(seen, Some(vec![]), "User:partner-alice is not User:ALICE");
    let stranger = pki.issue_person("elsewhere", "alice");
    let seen = topics_seen_by(&pki, secure, stranger).await;
    assert_eq!(
        seen, None,
        "no rule maps O=elsewhere: the connection is closed"
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn invalid_principal_mapping_rules_stop_start_up_with_the_reason() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let chain = keystore(dir.path(), &pki);
    let config = common::config(
        &dir.path().join("data"),
        &[
            ("listeners", "SSL://127.0.0.1:0"),
            ("ssl.keystore.location", chain.as_str()),
            ("ssl.principal.mapping.rules", "RULE:^CN=(.*$/$1/"),
        ],
    );
    let error = highwater::tls::acceptors(&config.listeners).expect_err("refused");
    let error = error.to_string();
    assert!(
        error.contains("ssl.principal.mapping.rules") && error.contains("does not compile"),
        "{error}"
    );
}

#[tokio::test]
async fn a_keystore_replaced_on_disk_is_served_without_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = Pki::new();
    let keystore = keystore(dir.path(), &old);
    let ssl = [("ssl.keystore.location", keystore.as_str())];
    let (_broker, [_, secure], stop) = broker_with_ssl(&dir.path().join("data"), &ssl).await;
    let mut before = tls_client(secure, &connector(&old.ca_pem(), None))
        .await
        .expect("old certificate");
    assert!(answers(&mut before).await);

    let renewed = Pki::new();
    let (cert, key) = renewed.issue(&["localhost"], "broker");
    // Written beside and renamed over, as certificate tools replace files.
    let staged = write(dir.path(), "broker.pem.new", &format!("{cert}{key}"));
    std::fs::rename(&staged, &keystore).expect("rename");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut after) = tls_client(secure, &connector(&renewed.ca_pem(), None)).await {
            assert!(answers(&mut after).await);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the renewed certificate is served within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        answers(&mut before).await,
        "an open session is not disturbed"
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn each_listener_tells_its_clients_the_addresses_of_that_listener() {
    let dir = tempfile::tempdir().expect("tempdir");
    let map = (
        "listener.security.protocol.map",
        "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
    );
    let inter = ("inter.broker.listener.name", "INTERNAL");
    let names = ["INTERNAL", "EXTERNAL"];
    let (broker, [internal, external], stop) =
        two_listeners(dir.path(), names, ["127.0.0.1", "localhost"], &[map, inter]).await;
    assert_eq!(broker.config.inter_broker_listener, "INTERNAL");
    assert_eq!(broker.config.listener, internal);
    for (addr, host, port) in [
        (internal, "127.0.0.1", internal.port()),
        (external, "localhost", external.port()),
    ] {
        let mut client = Client::connect(addr).await;
        assert_eq!(
            advertised_brokers(&mut client).await,
            vec![(host.to_string(), i32::from(port))],
            "via {addr}"
        );

        let cluster = client.call(&DescribeClusterRequest::default(), 1).await;
        assert_eq!(cluster.brokers.len(), 1);
        assert_eq!(cluster.brokers[0].host.as_str(), host);
        assert_eq!(cluster.brokers[0].port, i32::from(port));

        let group =
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("listener-group"));
        let coordinator = client.call(&group, 3).await;
        assert_eq!(coordinator.error_code, 0, "{coordinator:?}");
        assert_eq!(coordinator.host.as_str(), host);
        assert_eq!(coordinator.port, i32::from(port));
    }
    let _ = stop.send(());
}

/// The certificate a broker presents as a client of `server` (an mTLS acceptor), as the
/// server received it.
async fn presented(
    client: &highwater::tls::client::ClientTls,
    server: &tokio_rustls::TlsAcceptor,
) -> Vec<u8> {
    let socket = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = socket.local_addr().expect("addr").to_string();
    let accept = async {
        let (tcp, _) = socket.accept().await.expect("accept");
        let stream = server.accept(tcp).await.expect("server handshake");
        let chain = stream
            .get_ref()
            .1
            .peer_certificates()
            .expect("a client certificate");
        chain[0].to_vec()
    };
    let connect = async {
        let tcp = TcpStream::connect(&address).await.expect("connect");
        client
            .handshake(&address, tcp)
            .await
            .expect("client handshake")
    };
    let (certificate, _stream) = tokio::join!(accept, connect);
    certificate
}

#[tokio::test]
async fn a_brokers_own_keystore_replaced_on_disk_is_presented_to_other_brokers() {
    // A broker connecting to another one's mTLS inter-broker listener presents its keystore;
    // renewed on disk, the new certificate is presented without a restart, as the
    // listener's own is served (it was read once, at start).
    use highwater::config::tls::{ClientAuth, Pem, TlsSettings, TlsVersion};
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let (server_cert, server_key) = pki.issue(&["localhost"], "server");
    let settings = |certificates: Pem, key: Pem, client_auth| TlsSettings {
        listener: "INTERNAL".into(),
        certificates,
        key,
        trust: Some(Pem::Inline(pki.ca_pem())),
        client_auth,
        versions: vec![TlsVersion::Tls12, TlsVersion::Tls13],
        cipher_suites: Vec::new(),
        principal_mapping_rules: "DEFAULT".into(),
        verify_host: false,
    };
    let server = highwater::tls::acceptor(&settings(
        Pem::Inline(server_cert),
        Pem::Inline(server_key),
        ClientAuth::Required,
    ))
    .expect("acceptor");
    let (first, first_key) = pki.issue(&["localhost"], "broker-1");
    let keystore = write(dir.path(), "client.pem", &format!("{first}{first_key}"));
    let file = || Pem::File(keystore.clone());
    let client =
        highwater::tls::client::ClientTls::new(&settings(file(), file(), ClientAuth::None))
            .expect("client");
    let first_der = certs(&first)[0].to_vec();
    assert!(
        presented(&client, &server).await == first_der,
        "the first certificate"
    );

    let (renewed, renewed_key) = pki.issue(&["localhost"], "broker-1 renewed");
    let staged = write(
        dir.path(),
        "client.pem.new",
        &format!("{renewed}{renewed_key}"),
    );
    std::fs::rename(&staged, &keystore).expect("rename");
    tokio::time::sleep(highwater::tls::RELOAD_CHECK + Duration::from_millis(100)).await;
    let renewed_der = certs(&renewed)[0].to_vec();
    let now = presented(&client, &server).await;
    assert!(now == renewed_der, "the renewed certificate is presented");
}

#[tokio::test]
async fn a_client_certificate_may_ask_for_delegation_tokens_one_way_tls_may_not() {
    // Kafka's allowTokenRequests: an SSL client with a certificate is authenticated and may
    // make a token (owned by its certificate's principal); one without is ANONYMOUS and is
    // refused, as on PLAINTEXT.
    use kafka_protocol::error::ResponseError;
    use kafka_protocol::messages::CreateDelegationTokenRequest;
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new();
    let extra = [
        ("listener.name.ssl.ssl.client.auth", "requested"),
        ("delegation.token.secret.key", "s3cret"),
    ];
    let (_broker, [_, secure], stop) = broker_with_mtls(dir.path(), &pki, &extra).await;
    let identity = pki.issue(&["client"], "client");
    let mut with_certificate = tls_client(secure, &connector(&pki.ca_pem(), Some(&identity)))
        .await
        .expect("handshake");
    let create = CreateDelegationTokenRequest::default();
    let made = with_certificate.call(&create, 3).await;
    assert_eq!(made.error_code, 0);
    assert_eq!(
        (made.principal_type.as_str(), made.principal_name.as_str()),
        ("User", "CN=client")
    );
    let mut one_way = tls_client(secure, &connector(&pki.ca_pem(), None))
        .await
        .expect("handshake");
    let refused = one_way.call(&create, 3).await;
    assert_eq!(
        (refused.error_code, refused.principal_name.as_str()),
        (
            ResponseError::DelegationTokenRequestNotAllowed.code(),
            "ANONYMOUS"
        )
    );
    let _ = stop.send(());
}
