//! Several named listeners (`listeners`, `advertised.listeners`,
//! `listener.security.protocol.map`, `inter.broker.listener.name`): each serves Kafka
//! clients, and a client is told the brokers' addresses on the listener it connected to,
//! as Kafka answers Metadata, DescribeCluster and FindCoordinator.

mod common;

use std::sync::Arc;

use common::{config, Client};
use highwater::api::Broker;
use kafka_protocol::messages::{DescribeClusterRequest, FindCoordinatorRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpListener;

/// A broker serving `INTERNAL` (its inter-broker listener) and `EXTERNAL`, the latter
/// advertised as `localhost`; returns the broker, the two bound addresses and the stop.
async fn two_listener_broker(
    dir: &std::path::Path,
) -> (
    Arc<Broker>,
    [std::net::SocketAddr; 2],
    tokio::sync::oneshot::Sender<()>,
) {
    let internal = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let external = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addrs = [
        internal.local_addr().expect("addr"),
        external.local_addr().expect("addr"),
    ];
    let listeners = format!("INTERNAL://{},EXTERNAL://{}", addrs[0], addrs[1]);
    let advertised = format!("EXTERNAL://localhost:{}", addrs[1].port());
    let config = config(
        dir,
        &[
            ("listeners", &listeners),
            ("advertised.listeners", &advertised),
            (
                "listener.security.protocol.map",
                "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            ),
            ("inter.broker.listener.name", "INTERNAL"),
        ],
    );
    assert_eq!(config.inter_broker_listener, "INTERNAL");
    assert_eq!(config.listener, addrs[0]);
    let broker = Arc::new(Broker::open(config).await.expect("broker"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = Arc::clone(&broker);
    tokio::spawn(highwater::server::run(
        served,
        vec![internal, external],
        async {
            let _ = stopped.await;
        },
    ));
    (broker, addrs, stop)
}

#[tokio::test]
async fn each_listener_tells_its_clients_the_addresses_of_that_listener() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_broker, [internal, external], stop) = two_listener_broker(dir.path()).await;
    for (addr, host, port) in [
        (internal, "127.0.0.1", internal.port()),
        (external, "localhost", external.port()),
    ] {
        let mut client = Client::connect(addr).await;
        let metadata = client.call(&MetadataRequest::default(), 12).await;
        let brokers: Vec<(String, i32)> = metadata
            .brokers
            .iter()
            .map(|b| (b.host.to_string(), b.port))
            .collect();
        assert_eq!(
            brokers,
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
