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

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::api::Broker;
pub use connection::Limits;
use connection_quotas::{ConnectionQuotas, ListenerSlot};
use memory_pool::MemoryPool;

/// Pause after a failed accept (e.g. out of file descriptors) before the next one.
const ACCEPT_RETRY_MS: u64 = 10;

/// What every connection of every listener shares.
struct Shared {
    broker: Arc<Broker>,
    limits: Limits,
    pool: Arc<MemoryPool>,
    quotas: Arc<ConnectionQuotas>,
}

/// A bound listener with the name its clients' requests carry.
struct Bound {
    name: Arc<str>,
    socket: TcpListener,
}

/// Where the listeners are in a shutdown: accepting, draining (no new connection, the open
/// ones still served while leaderships move away), or closing every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Accepting,
    Draining,
    Closing,
}

/// Accepts connections on every listener (`sockets`, bound in the order of the config's
/// `listeners`) until `shutdown` completes, then asks the controller for a controlled
/// shutdown (leaderships move away), stops every connection task, closes the broker's logs
/// cleanly and stops the metadata quorum.
pub async fn run(
    broker: Arc<Broker>,
    sockets: Vec<TcpListener>,
    shutdown: impl Future<Output = ()>,
) {
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
    for (config, socket) in broker.config.listeners.iter().zip(sockets) {
        let bound = Bound {
            name: config.name.as_str().into(),
            socket,
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
    match broker.replicas.shutdown(broker.controller.broker_epoch()) {
        Ok(()) => tracing::info!("logs closed cleanly"),
        Err(error) => tracing::error!(%error, "logs not closed cleanly; next start recovers"),
    }
    broker.controller.shutdown().await;
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
                        admit(&shared, &bound.name, &mut connections, slot, stream, client);
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
/// listener is full). Cancel-safe: a slot taken before a cancelled accept is given back.
async fn accept_within_quota(
    listener: &TcpListener,
    quotas: &ConnectionQuotas,
) -> (ListenerSlot, std::io::Result<(TcpStream, SocketAddr)>) {
    if quotas.listener_full() {
        tracing::warn!("max.connections reached; new connections wait until one closes");
    }
    let slot = quotas.listener_slot().await;
    (slot, listener.accept().await)
}

/// Starts serving an accepted connection, or closes it when its address is over
/// `max.connections.per.ip`.
fn admit(
    shared: &Shared,
    listener: &Arc<str>,
    connections: &mut JoinSet<()>,
    slot: ListenerSlot,
    stream: TcpStream,
    client: SocketAddr,
) {
    let ip_slot = match shared.quotas.ip_slot(client.ip()) {
        Ok(ip_slot) => ip_slot,
        Err(refused) => {
            tracing::info!(%client, %listener, %refused, "rejected connection (max.connections.per.ip)");
            drop(stream);
            return;
        }
    };
    tracing::debug!(%client, %listener, "accepted connection");
    let serve = connection::serve(
        Arc::clone(&shared.broker),
        stream,
        client,
        Arc::clone(listener),
        shared.limits,
        Arc::clone(&shared.pool),
    );
    connections.spawn(async move {
        let _held = (slot, ip_slot);
        serve.await;
    });
}
