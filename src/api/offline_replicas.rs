//! Tells the active controller which replicas went offline with a failed log directory
//! (KIP-112), so that their leaderships move and they leave their ISRs at once instead of
//! after `replica.lag.time.max.ms`; retried until the controller has it.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use super::Broker;
use crate::controller::ControllerRequest;

/// Pause before telling the controller again after it could not be told.
const REPORT_RETRY_PAUSE: Duration = Duration::from_millis(200);

impl Broker {
    /// Reports every failed log directory's replicas once, until the task is dropped.
    pub(super) async fn report_offline_replicas(&self) {
        let mut failures = self.replicas.log_dirs().subscribe_failures();
        let mut reported: HashSet<PathBuf> = HashSet::new();
        loop {
            let mut pending = false;
            for dir in self.replicas.log_dirs().all() {
                if !dir.is_offline() || reported.contains(&dir.path) {
                    continue;
                }
                if dir.path == self.config.metadata_log_dir {
                    crate::controller::halt_on_metadata_dir_failure(
                        &dir.path,
                        "the log directory holding the metadata log went offline",
                    );
                }
                let partitions: Vec<(String, i32)> = self
                    .replicas
                    .offline_partitions_in(dir)
                    .into_iter()
                    .map(|tp| (tp.topic, tp.partition))
                    .collect();
                let node_id = self.config.node_id;
                let broker_epoch = self.image().broker(node_id).map_or(-1, |b| b.broker_epoch);
                let count = partitions.len();
                let request = ControllerRequest::ReplicasOffline {
                    node_id,
                    broker_epoch,
                    partitions,
                };
                match self.controller.request(request).await {
                    Ok(_) => {
                        tracing::warn!(log_dir = %dir.path.display(), partitions = count,
                            "controller told of the replicas on the failed log directory");
                        reported.insert(dir.path.clone());
                    }
                    Err(error) => {
                        tracing::warn!(log_dir = %dir.path.display(), %error,
                            "cannot tell the controller of the failed log directory; retrying");
                        pending = true;
                    }
                }
            }
            if pending {
                tokio::time::sleep(REPORT_RETRY_PAUSE).await;
            } else if failures.changed().await.is_err() {
                return;
            }
        }
    }
}
