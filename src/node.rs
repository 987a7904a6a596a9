//! One node from open to stop: opens the broker, serves its Kafka and HTTP listeners and
//! its background work until a shutdown is requested, then stops it cleanly. Shared by
//! `highwater serve`, `highwater dev` and the [`crate::testkit`].

use std::sync::Arc;

use anyhow::Context;

use crate::api::Broker;
use crate::clock::Clock;
use crate::config::BrokerConfig;
use crate::faults::Faults;

/// When a node is to stop: a signal (SIGTERM, ctrl-c) or a [`ShutdownTrigger`].
#[derive(Clone, Debug)]
pub struct Shutdown(tokio::sync::watch::Receiver<bool>);

/// Requests the [`Shutdown`] it was made with.
#[derive(Debug)]
pub struct ShutdownTrigger(tokio::sync::watch::Sender<bool>);

impl ShutdownTrigger {
    /// Requests the shutdown (once is enough; later calls do nothing more).
    pub fn request(&self) {
        let _ = self.0.send(true);
    }
}

impl Shutdown {
    /// A shutdown requested only by its trigger.
    pub fn manual() -> (ShutdownTrigger, Shutdown) {
        let (requested, shutdown) = tokio::sync::watch::channel(false);
        (ShutdownTrigger(requested), Shutdown(shutdown))
    }

    /// A shutdown requested by SIGTERM or ctrl-c, listened for from now on (call it first
    /// thing in the runtime: a signal that arrives while the node opens then stops it
    /// cleanly instead of killing it with the signal's default action).
    pub fn on_signals() -> anyhow::Result<Self> {
        let (trigger, shutdown) = Shutdown::manual();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
            let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
                tracing::info!("shutdown requested");
                trigger.request();
            });
        }
        #[cfg(not(unix))]
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            trigger.request();
        });
        Ok(shutdown)
    }

    /// Completes once the shutdown is requested (at once if it already is).
    pub async fn requested(mut self) {
        let _ = self.0.wait_for(|requested| *requested).await;
    }
}

/// What a node runs with.
#[derive(Debug)]
pub struct Node {
    pub config: Arc<BrokerConfig>,
    /// The Kafka listeners, bound beforehand in the order of the config's `listeners`
    /// (none for a controller-only node).
    pub listeners: Vec<tokio::net::TcpListener>,
    /// The faults a test sets (none in production).
    pub faults: Faults,
}

/// Opens the node's broker, calls `ready` with it once it serves, and runs it until
/// `shutdown`.
/// A shutdown requested while the broker opens ends the start there (what was done so
/// far is recovered at the next start, as after a crash).
pub async fn run(
    node: Node,
    shutdown: Shutdown,
    ready: impl FnOnce(&Broker),
) -> anyhow::Result<()> {
    let Node {
        config,
        listeners,
        faults,
    } = node;
    let http = crate::http::bind(&config.http_listeners)
        .await
        .context("cannot start")?;
    let tls = crate::tls::acceptors(&config.listeners).context("cannot start")?;
    let sockets: Vec<_> = listeners.into_iter().zip(tls).collect();
    let open = Broker::open_with(Arc::clone(&config), Clock::system(), faults);
    let broker = tokio::select! {
        broker = open => Arc::new(broker.context("cannot start")?),
        () = shutdown.clone().requested() => {
            tracing::info!(node_id = config.node_id, "stopped while starting");
            return Ok(());
        }
    };
    log_started(&broker);
    crate::server::serve_controller_clients(&broker);
    let background = Arc::clone(&broker);
    let background = tokio::spawn(async move { background.run_background().await });
    let http: Vec<_> = http
        .into_iter()
        .map(|listener| tokio::spawn(crate::http::serve(Arc::clone(&broker), listener)))
        .collect();
    ready(&broker);
    if config.roles.broker {
        crate::server::run(Arc::clone(&broker), sockets, shutdown.requested()).await;
    } else {
        shutdown.requested().await;
        broker.controller.shutdown().await;
    }
    background.abort();
    for task in http {
        task.abort();
    }
    Ok(())
}

/// The one line that says what the node serves.
fn log_started(broker: &Broker) {
    let config = &broker.config;
    let dirs: Vec<String> = config
        .log_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    let clients: Vec<String> = config
        .listeners
        .iter()
        .map(|l| format!("{} ({})", l.address, l.protocol.name()))
        .collect();
    let controller = config
        .controller_listener
        .map_or_else(|| "none".to_string(), |l| l.to_string());
    tracing::info!(
        "highwater {} started: node {} as {}, Kafka clients on {}, controllers on {}, \
         log.dirs {}, {} partitions",
        env!("CARGO_PKG_VERSION"),
        config.node_id,
        config.roles,
        if clients.is_empty() {
            "none".to_string()
        } else {
            clients.join(", ")
        },
        controller,
        dirs.join(","),
        broker.replicas.len(),
    );
}
