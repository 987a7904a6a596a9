//! The network layer: a tokio listener that accepts connections and serves each one in
//! its own task until shutdown. Knows nothing of partitions.

pub mod connection;

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::api::Broker;
pub use connection::Limits;

/// Accepts connections on `listener` until `shutdown` completes, then asks the controller
/// for a controlled shutdown (leaderships move away), stops every connection task, closes
/// the broker's logs cleanly and stops the metadata quorum.
pub async fn run(broker: Arc<Broker>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    let limits = Limits {
        frame_bytes_max: broker.config.socket_request_max_bytes,
        queued_requests_max: broker.config.queued_max_requests,
    };
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, client)) => {
                    tracing::debug!(%client, "accepted connection");
                    connections.spawn(connection::serve(Arc::clone(&broker), stream, client, limits));
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    tracing::info!(connections = connections.len(), "shutting down");
    broker.controller.controlled_shutdown().await;
    connections.shutdown().await;
    match broker.replicas.shutdown() {
        Ok(()) => tracing::info!("logs closed cleanly"),
        Err(error) => tracing::error!(%error, "logs not closed cleanly; next start recovers"),
    }
    broker.controller.shutdown().await;
}
