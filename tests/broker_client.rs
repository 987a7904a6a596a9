//! Requests a broker sends to another (a transaction coordinator's markers to a leader, a
//! leader's verification to a coordinator: `highwater::api::broker_client`) share a
//! connection kept per broker instead of opening one each — over TLS and SASL each new one
//! costs a handshake and a login — and a kept connection the other broker has closed since
//! is replaced without failing the request.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::serve_on;
use highwater::api::broker_client::call;
use highwater::peer::Outbound;
use kafka_protocol::messages::ApiVersionsRequest;

async fn api_versions(address: SocketAddr, outbound: &Outbound) -> i16 {
    let request = ApiVersionsRequest::default();
    call(
        &address.to_string(),
        outbound,
        &request,
        3,
        Duration::from_secs(10),
    )
    .await
    .expect("answered")
    .error_code
}

#[tokio::test]
async fn requests_to_a_broker_share_a_kept_connection_replaced_once_it_is_closed() {
    let first_dir = tempfile::tempdir().expect("tempdir");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("addr");
    let (first, stop) = serve_on(first_dir.path(), &[], vec![listener]).await;
    let outbound = Outbound::default();
    for _ in 0..5 {
        assert_eq!(api_versions(address, &outbound).await, 0);
    }
    assert_eq!(
        first.metrics.connections_accepted.get(),
        1,
        "five requests, one connection"
    );

    // Another broker takes the address: the kept connection to the first is closed.
    let _ = stop.send(());
    let second_dir = tempfile::tempdir().expect("tempdir");
    let listener = common::cluster_processes::eventually("the port free again", || async move {
        tokio::net::TcpListener::bind(address).await.ok()
    })
    .await;
    let (second, _stop) = serve_on(second_dir.path(), &[], vec![listener]).await;
    assert_eq!(
        api_versions(address, &outbound).await,
        0,
        "answered all the same"
    );
    assert_eq!(api_versions(address, &outbound).await, 0);
    assert_eq!(second.metrics.connections_accepted.get(), 1);
}
