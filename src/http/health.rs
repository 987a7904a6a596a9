//! `/healthz` and `/readyz`, for orchestrators and CI scripts. Healthy: the process
//! answers. Ready: a broker is registered at its current epoch and unfenced (the active
//! controller unfences a broker once it has caught up with the metadata), it has no
//! offline replica, and a voter knows the quorum's leader.

use crate::api::Broker;

/// Why the node is not ready (empty: it is).
pub fn not_ready(broker: &Broker) -> Vec<String> {
    let mut reasons = Vec::new();
    let config = &broker.config;
    if config.roles.broker {
        let image = broker.image();
        let epoch = broker.controller.broker_epoch();
        match image.broker(config.node_id) {
            None => reasons.push("not registered with the controller".to_string()),
            Some(b) if b.broker_epoch != epoch => reasons.push(format!(
                "registration at broker epoch {} not yet in the metadata (it shows {})",
                epoch, b.broker_epoch
            )),
            Some(b) if b.fenced => reasons.push("fenced by the controller".to_string()),
            Some(_) => {}
        }
        let offline = broker.replicas.offline_count();
        if offline > 0 {
            reasons.push(format!(
                "{offline} offline replica(s): a log directory failed"
            ));
        }
    }
    if let Some(status) = broker.controller.quorum_status() {
        if status.leader.is_none() {
            reasons.push("no metadata quorum leader known".to_string());
        }
    }
    reasons
}
