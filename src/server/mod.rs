//! The network layer: a tokio listener that accepts connections and serves each one in
//! its own task until shutdown. Knows nothing of partitions.
//!
//! Bounds on what clients can make the broker hold: `max.connections` (the accept loop
//! waits for a free slot), `max.connections.per.ip` (a connection past it is closed at
//! once), and per-connection and broker-wide budgets of request bytes read but not
//! answered (see `connection` and `memory_pool`).

pub mod connection;
pub mod connection_quotas;
pub mod memory_pool;
pub mod sasl;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::api::Broker;
use crate::tls;
pub use connection::Limits;
use connection_quotas::{ConnectionQuotas, ListenerSlot};
use memory_pool::MemoryPool;

/// Pause after a failed accept (e.g. out of file descriptors) before the next one.
const ACCEPT_RETRY_MS: u64 = 10;
/// How long a client of an SSL listener has for its TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What every connection of every listener shares.
struct Shared {
    broker: Arc<Broker>,
    limits: Limits,
    pool: Arc<MemoryPool>,
    quotas: Arc<ConnectionQuotas>,
}

/// A bound listener with the name its clients' requests carry, and its TLS for SSL.
struct Bound {
    name: Arc<str>,
    socket: TcpListener,
    tls: Option<tls::ListenerTls>,
    sasl: Option<Arc<crate::config::sasl::SaslSettings>>,
}

/// A listener's socket, bound beforehand, with its TLS acceptor for an SSL listener (see
/// [`tls::acceptors`]).
pub type Socket = (TcpListener, Option<tls::ListenerTls>);

/// Where the listeners are in a shutdown: accepting, draining (no new connection, the open
/// ones still served while leaderships move away), or closing every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Accepting,
    Draining,
    Closing,
}

/// Accepts connections on every listener (`sockets`, in the order of the config's
/// `listeners`) until `shutdown` completes, then asks the controller for a controlled
/// shutdown (leaderships move away), stops every connection task, closes the broker's logs
/// cleanly and stops the metadata quorum.
pub async fn run(broker: Arc<Broker>, sockets: Vec<Socket>, shutdown: impl Future<Output = ()>) {
    let shared = Arc::new(Shared {
        limits: Limits {
            frame_bytes_max: broker.config.socket_request_max_bytes,
            queued_requests_max: broker.config.queued_max_requests,
        },
        pool: MemoryPool::new(broker.config.queued_max_request_bytes),
        quotas: ConnectionQuotas::new(broker.config.connection_limits.clone()),
        broker: Arc::clone(&broker),
    });
    let (phase, phases) = watch::channel(Phase::Accepting);
    let mut loops = JoinSet::new();
    let limits = tokio::spawn(follow_connection_limits(Arc::clone(&shared)));
    for (config, (socket, tls)) in broker.config.listeners.iter().zip(sockets) {
        let bound = Bound {
            name: config.name.as_str().into(),
            socket,
            tls,
            sasl: config.sasl.clone().map(Arc::new),
        };
        loops.spawn(accept_loop(Arc::clone(&shared), bound, phases.clone()));
    }
    shutdown.await;
    let _ = phase.send(Phase::Draining);
    tracing::info!(
        connections = broker.metrics.connections.get(),
        "shutting down"
    );
    broker.controller.controlled_shutdown().await;
    let _ = phase.send(Phase::Closing);
    while loops.join_next().await.is_some() {}
    limits.abort();
    match broker.replicas.shutdown(broker.controller.broker_epoch()) {
        Ok(()) => tracing::info!("logs closed cleanly"),
        Err(error) => tracing::error!(%error, "logs not closed cleanly; next start recovers"),
    }
    broker.controller.shutdown().await;
}

/// Serves Kafka clients that connect to the controller listener (admin tools run with
/// `--bootstrap-controller`), each with the controller's APIs only (`api::versions`), from
/// now on. The controller holds the broker weakly: a node that stops is not kept alive by
/// its own listener.
pub fn serve_controller_clients(broker: &Arc<Broker>) {
    let Some(name) = broker.config.controller_listener_name.clone() else {
        return;
    };
    let weak = Arc::downgrade(broker);
    let listener: Arc<str> = name.as_str().into();
    let limits = Limits {
        frame_bytes_max: broker.config.socket_request_max_bytes,
        queued_requests_max: broker.config.queued_max_requests,
    };
    let pool = MemoryPool::new(broker.config.queued_max_request_bytes);
    broker.controller.serve_kafka_clients(move |kafka| {
        let Some(broker) = weak.upgrade() else {
            return;
        };
        let client = kafka.address;
        tracing::debug!(%client, listener = %listener, "Kafka client on the controller listener");
        let peer = connection::Peer {
            client,
            listener: Arc::clone(&listener),
            sasl: None,
            principal: kafka
                .principal
                .as_deref()
                .unwrap_or(connection::ANONYMOUS)
                .into(),
        };
        let pool = Arc::clone(&pool);
        tokio::spawn(connection::serve_halves(
            broker,
            kafka.reader,
            kafka.writer,
            peer,
            limits,
            pool,
        ));
    });
}

/// Applies `max.connections` and its per-address keys as dynamic broker configs change
/// them, until the shutdown ends the listeners.
async fn follow_connection_limits(shared: Arc<Shared>) {
    let mut configs = shared.broker.replicas.subscribe_config();
    while configs.changed().await.is_ok() {
        let limits = configs.borrow_and_update().connection_limits.clone();
        shared.quotas.set_limits(limits);
    }
}

/// Serves one listener: accepts until the shutdown drains it, then stops its connections
/// once they are to close.
async fn accept_loop(shared: Arc<Shared>, bound: Bound, mut phase: watch::Receiver<Phase>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = reached(&mut phase, Phase::Draining) => break,
            (slot, accepted) = accept_within_quota(&bound.socket, &shared.quotas) => {
                match accepted {
                    Ok((stream, client)) => {
                        admit(&shared, &bound, &mut connections, slot, (stream, client));
                    }
                    Err(error) => {
                        tracing::warn!(listener = %bound.name, %error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
                    }
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(bound.socket);
    loop {
        tokio::select! {
            () = reached(&mut phase, Phase::Closing) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

/// Completes once the shutdown is at `wanted` or past it (or its sender is gone).
async fn reached(phase: &mut watch::Receiver<Phase>, wanted: Phase) {
    let _ = phase.wait_for(|p| *p >= wanted).await;
}

/// Waits for a `max.connections` slot, then accepts (Kafka's acceptor also blocks while the
/// listener is full). A slot held while waiting for a client is given back when the
/// maximum is lowered below the connections open. Cancel-safe: a slot taken before a
/// cancelled accept is given back.
async fn accept_within_quota(
    listener: &TcpListener,
    quotas: &ConnectionQuotas,
) -> (ListenerSlot, std::io::Result<(TcpStream, SocketAddr)>) {
    loop {
        if quotas.listener_full() {
            tracing::warn!("max.connections reached; new connections wait until one closes");
        }
        let slot = quotas.listener_slot().await;
        tokio::select! {
            accepted = listener.accept() => return (slot, accepted),
            () = quotas.over_limit() => drop(slot),
        }
    }
}

/// Starts serving an accepted connection, or closes it when its address is over
/// `max.connections.per.ip`.
fn admit(
    shared: &Shared,
    bound: &Bound,
    connections: &mut JoinSet<()>,
    slot: ListenerSlot,
    (stream, client): (TcpStream, SocketAddr),
) {
    let listener = &bound.name;
    let ip_slot = match shared.quotas.ip_slot(client.ip()) {
        Ok(ip_slot) => ip_slot,
        Err(refused) => {
            tracing::info!(%client, %listener, %refused, "rejected connection (max.connections.per.ip)");
            drop(stream);
            return;
        }
    };
    tracing::debug!(%client, %listener, "accepted connection");
    let broker = Arc::clone(&shared.broker);
    let (limits, pool) = (shared.limits, Arc::clone(&shared.pool));
    let peer = connection::Peer {
        client,
        listener: Arc::clone(listener),
        sasl: bound.sasl.clone(),
        principal: connection::ANONYMOUS.into(),
    };
    let Some(tls) = bound.tls.clone() else {
        connections.spawn(async move {
            let _held = (slot, ip_slot);
            connection::serve(broker, stream, peer, limits, pool).await;
        });
        return;
    };
    connections.spawn(async move {
        let _held = (slot, ip_slot);
        let _ = stream.set_nodelay(true);
        let session = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream)).await {
            Ok(Ok(session)) => session,
            Ok(Err(error)) => {
                tracing::info!(%client, listener = %peer.listener, %error, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::info!(%client, listener = %peer.listener,
                    "TLS handshake not done within {TLS_HANDSHAKE_TIMEOUT:?}; closing");
                return;
            }
        };
        let mut peer = peer;
        match tls::client_principal(&session, &tls.principal_rules) {
            Ok(Some(principal)) => {
                tracing::debug!(%client, %principal, "TLS client authenticated by certificate");
                peer.principal = principal.into();
            }
            Ok(None) => {}
            Err(subject) => {
                tracing::warn!(%client, listener = %peer.listener, %subject,
                    rules = tls.principal_rules.text(),
                    "no ssl.principal.mapping.rules rule maps the client certificate's subject; closing");
                return;
            }
        }
        let (read_half, write_half) = tokio::io::split(session);
        connection::serve_halves(broker, read_half, write_half, peer, limits, pool).await;
    });
}
