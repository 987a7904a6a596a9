//! The broker's lifecycle towards the controller (Kafka's BrokerLifecycleManager, KIP-631):
//! register with a fresh incarnation id, heartbeat every `broker.heartbeat.interval.ms`
//! (often while fenced, so that unfencing follows catching up quickly), register again if
//! the controller forgot us, and on shutdown ask for a controlled shutdown. Also the
//! metadata follower of broker-only nodes.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::publisher::Publisher;
use super::rpc::{RpcClient, RpcRequest, RpcResponse};
use super::{
    Controller, ControllerError, ControllerReply, ControllerRequest, ErrorKind, Registration,
};
use crate::metadata::Endpoint;
use crate::peer::Outbound;

/// Heartbeat interval while fenced, waiting to be unfenced.
const FENCED_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(50);
/// How long a controlled shutdown may wait for the controller.
const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a metadata fetch may take (it long-polls on the controller for less).
const FETCH_METADATA_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause after a failed metadata fetch before trying the next controller.
const FETCH_RETRY_PAUSE: Duration = Duration::from_millis(100);

fn is_duplicate(error: &ControllerError) -> bool {
    error.kind() == ErrorKind::DuplicateBrokerRegistration
}

impl Controller {
    /// Registers this broker, starts its heartbeats and waits until it is unfenced. As
    /// Kafka's BrokerLifecycleManager does, a failed registration is retried (a quorum
    /// electing, a controller that just lost leadership), except two refusals: a stale
    /// incarnation at once, and another live process holding this node id once two
    /// session timeouts have passed (a restart after a crash waits for the old session to
    /// expire).
    /// `previous_broker_epoch` is the epoch the clean-shutdown markers name (-1 after a
    /// crash), sent with the registration.
    pub async fn start_broker(
        self: &Arc<Self>,
        previous_broker_epoch: i64,
    ) -> Result<(), ControllerError> {
        self.previous_broker_epoch
            .store(previous_broker_epoch, Ordering::Relaxed);
        let session = Duration::from_millis(self.config.broker_session_timeout_ms);
        let give_up = Instant::now() + session * 2;
        let pause = Duration::from_millis(self.config.broker_heartbeat_interval_ms);
        loop {
            match self.register().await {
                Ok(()) => break,
                Err(error) if is_duplicate(&error) && Instant::now() < give_up => {
                    tracing::warn!(%error, "registration refused; retrying until the other session expires");
                }
                Err(error) if is_duplicate(&error) || error.kind() == ErrorKind::StaleBroker => {
                    tracing::error!(%error, "broker registration refused");
                    return Err(error);
                }
                Err(error) => {
                    tracing::warn!(%error, "registration failed; retrying");
                }
            }
            tokio::time::sleep(pause).await;
        }
        let weak = Arc::downgrade(self);
        let task = tokio::spawn(heartbeat_loop(weak));
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(task);
        let node_id = self.config.node_id;
        let mut images = self.subscribe();
        // This process's own registration, not an older one the local metadata may still
        // show unfenced after a restart.
        let incarnation_id = self.incarnation_id;
        let _ = images
            .wait_for(|image| {
                image
                    .broker(node_id)
                    .is_some_and(|b| b.incarnation_id == incarnation_id && !b.fenced)
            })
            .await;
        tracing::info!(node_id, "broker unfenced");
        Ok(())
    }

    /// This process's broker epoch (-1 before it registered).
    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::Relaxed)
    }

    async fn register(&self) -> Result<(), ControllerError> {
        let request = ControllerRequest::RegisterBroker {
            node_id: self.config.node_id,
            incarnation_id: self.incarnation_id,
            host: self.config.advertised_host.clone(),
            port: self.config.advertised_port,
            endpoints: self
                .config
                .listeners
                .iter()
                .map(|l| Endpoint {
                    listener: l.name.clone(),
                    host: l.advertised_host.clone(),
                    port: l.advertised_port,
                })
                .collect(),
            rack: self.config.rack.clone(),
            previous_broker_epoch: self.previous_broker_epoch.load(Ordering::Relaxed),
        };
        let Registration { broker_epoch } = self.ask(request).await?;
        self.broker_epoch.store(broker_epoch, Ordering::Relaxed);
        tracing::info!(node_id = self.config.node_id, broker_epoch,
            incarnation_id = %self.incarnation_id, "registered with the controller");
        Ok(())
    }

    async fn heartbeat(&self, want_shut_down: bool) -> Result<ControllerReply, ControllerError> {
        let request = ControllerRequest::BrokerHeartbeat {
            node_id: self.config.node_id,
            broker_epoch: self.broker_epoch.load(Ordering::Relaxed),
            metadata_offset: self.image().offset,
            want_shut_down,
        };
        self.request(request).await
    }

    /// Asks the controller to move this broker's leaderships away and fence it (a
    /// controlled shutdown); gives up after a few seconds without a controller.
    pub async fn controlled_shutdown(&self) {
        if self.shutting_down.swap(true, Ordering::Relaxed) || !self.config.roles.broker {
            return;
        }
        if self.broker_epoch.load(Ordering::Relaxed) < 0 {
            return;
        }
        let result = tokio::time::timeout(CONTROLLED_SHUTDOWN_TIMEOUT, self.heartbeat(true)).await;
        match result {
            Ok(Ok(_)) => tracing::info!("controlled shutdown complete"),
            Ok(Err(error)) => tracing::warn!(%error, "controlled shutdown failed"),
            Err(_) => tracing::warn!("controlled shutdown timed out"),
        }
    }
}

async fn heartbeat_loop(controller: Weak<Controller>) {
    loop {
        let Some(this) = controller.upgrade() else {
            return;
        };
        if this.shutting_down.load(Ordering::Relaxed) {
            return;
        }
        let fenced = this
            .image()
            .broker(this.config.node_id)
            .is_none_or(|b| b.fenced);
        let interval = match fenced {
            true => FENCED_HEARTBEAT_INTERVAL,
            false => Duration::from_millis(this.config.broker_heartbeat_interval_ms),
        };
        match this.heartbeat(false).await {
            Ok(_) => {}
            Err(error) if error.kind() == ErrorKind::StaleBroker => {
                tracing::warn!(%error, "the controller no longer knows this registration");
                if let Err(error) = this.register().await {
                    tracing::error!(%error, "cannot register again");
                }
            }
            Err(error) => tracing::warn!(%error, "heartbeat failed"),
        }
        drop(this);
        tokio::time::sleep(interval).await;
    }
}

/// Follows the controllers' metadata on a broker-only node: long-polls one controller after
/// another for a newer state and publishes it. Runs until the task is dropped.
pub async fn follow_metadata(
    publisher: Arc<Publisher>,
    controllers: Vec<String>,
    outbound: Outbound,
) {
    if controllers.is_empty() {
        return;
    }
    let mut clients: Vec<RpcClient> = controllers
        .into_iter()
        .map(|address| RpcClient::new(address, outbound.clone()))
        .collect();
    let mut current = 0usize;
    loop {
        let after = publisher.image().offset;
        let count = clients.len();
        let client = &mut clients[current % count];
        let request = RpcRequest::FetchMetadata { after };
        match client.call(&request, FETCH_METADATA_TIMEOUT).await {
            Ok(RpcResponse::Metadata {
                offset,
                controller_id,
                state,
            }) => {
                if offset > after {
                    publisher.publish_state(&state, offset);
                }
                publisher.publish_controller(controller_id);
            }
            Ok(_) => current += 1,
            Err(error) => {
                tracing::debug!(controller = %client.addr, %error, "metadata fetch failed");
                current += 1;
                tokio::time::sleep(FETCH_RETRY_PAUSE).await;
            }
        }
    }
}
