//! Faults a test asks for (`testkit`, `highwater dev`'s `POST /faults`): links cut or
//! delayed between two nodes or between the clients and a node, and the next requests of
//! an API answered with an error code or dropped. A production node has none: every check
//! is then one branch on an empty handle.
//!
//! Where they act: a node's outbound connections to another node (replica fetches,
//! controller RPCs, transaction markers) check the link before every exchange, so a cut
//! link fails at once and an open connection is dropped; a node's Kafka listener checks
//! the clients' link and the injected answers before handling a client's request (a
//! request from another node, told by its client id, is never affected there).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The client id this broker's own requests to another broker carry.
pub fn broker_client_id(node_id: i32) -> String {
    format!("{BROKER_CLIENT_ID_PREFIX}{node_id}")
}

/// Whether a request comes from another node of the cluster (by its client id).
pub fn is_broker_client_id(client_id: Option<&str>) -> bool {
    client_id.is_some_and(|id| id.starts_with(BROKER_CLIENT_ID_PREFIX))
}

const BROKER_CLIENT_ID_PREFIX: &str = "highwater-broker-";

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// A node, by `node.id`.
    Node(i32),
    /// Every Kafka client (anything that is not a node of the cluster).
    Clients,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Node(id) => write!(f, "node {id}"),
            Endpoint::Clients => f.write_str("clients"),
        }
    }
}

/// What an injected fault does to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injected {
    /// Answer with this Kafka error code.
    Error(i16),
    /// Do not answer: the connection is closed, as if the broker had died mid-request.
    Drop,
}

/// A link refused by a cut.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the link between {0} and {1} is cut (injected fault)")]
pub struct LinkCut(pub Endpoint, pub Endpoint);

impl From<LinkCut> for std::io::Error {
    fn from(cut: LinkCut) -> Self {
        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, cut.to_string())
    }
}

/// The faults of one cluster; cheap to clone (all clones share them).
#[derive(Clone, Debug, Default)]
pub struct Faults(Option<Arc<Mutex<Rules>>>);

#[derive(Debug, Default)]
struct Rules {
    /// Which node listens where (client and controller listeners).
    addresses: HashMap<SocketAddr, i32>,
    /// Cut links, as ordered pairs (a link is cut both ways).
    cut: HashSet<(Endpoint, Endpoint)>,
    /// Delay added to every exchange over a link.
    delays: HashMap<(Endpoint, Endpoint), Duration>,
    /// Injected answers, first match first.
    requests: Vec<RequestRule>,
}

#[derive(Debug, Clone, Copy)]
struct RequestRule {
    node: i32,
    api_key: i16,
    remaining: u32,
    action: Injected,
}

fn pair(a: Endpoint, b: Endpoint) -> (Endpoint, Endpoint) {
    (a.min(b), a.max(b))
}

impl Faults {
    /// Faults that can be set (a production node uses `Faults::default()`: none, ever).
    pub fn settable() -> Self {
        Faults(Some(Arc::default()))
    }

    fn with<T>(&self, change: impl FnOnce(&mut Rules) -> T) -> Option<T> {
        let rules = self.0.as_ref()?;
        Some(change(
            &mut rules.lock().unwrap_or_else(PoisonError::into_inner),
        ))
    }

    /// Records that `node` listens on `address`, so that connections to it are known.
    pub fn register(&self, node: i32, address: SocketAddr) {
        self.with(|rules| rules.addresses.insert(address, node));
    }

    /// Cuts the link between `a` and `b` (both ways) until [`Faults::heal`].
    pub fn cut(&self, a: Endpoint, b: Endpoint) {
        tracing::warn!(%a, %b, "injected fault: link cut");
        self.with(|rules| rules.cut.insert(pair(a, b)));
    }

    /// Restores the link between `a` and `b` and removes its delay.
    pub fn heal(&self, a: Endpoint, b: Endpoint) {
        tracing::warn!(%a, %b, "injected fault: link healed");
        self.with(|rules| {
            rules.cut.remove(&pair(a, b));
            rules.delays.remove(&pair(a, b));
        });
    }

    /// Delays every exchange over the link between `a` and `b` by `delay` (zero: none).
    pub fn delay(&self, a: Endpoint, b: Endpoint, delay: Duration) {
        tracing::warn!(%a, %b, ?delay, "injected fault: link delayed");
        self.with(|rules| match delay.is_zero() {
            true => rules.delays.remove(&pair(a, b)),
            false => rules.delays.insert(pair(a, b), delay),
        });
    }

    /// Makes the next `count` client requests of `api_key` to `node` get `action`.
    pub fn inject(&self, node: i32, api_key: i16, count: u32, action: Injected) {
        tracing::warn!(node, api_key, count, ?action, "injected fault: requests");
        self.with(|rules| {
            rules.requests.push(RequestRule {
                node,
                api_key,
                remaining: count,
                action,
            })
        });
    }

    /// Removes every fault (cut and delayed links, injected answers).
    pub fn clear(&self) {
        tracing::warn!("injected faults cleared");
        self.with(|rules| {
            rules.cut.clear();
            rules.delays.clear();
            rules.requests.clear();
        });
    }

    /// The faults in force, as JSON (for `GET /faults`).
    pub fn describe(&self) -> serde_json::Value {
        self.with(|rules| {
            let cut: Vec<_> = rules
                .cut
                .iter()
                .map(|(a, b)| [a.to_string(), b.to_string()])
                .collect();
            let delays: Vec<_> = rules
                .delays
                .iter()
                .map(|((a, b), d)| serde_json::json!({"between": [a.to_string(), b.to_string()], "ms": d.as_millis() as u64}))
                .collect();
            let requests: Vec<_> = rules
                .requests
                .iter()
                .map(|r| {
                    let action = match r.action {
                        Injected::Error(code) => serde_json::json!({"error_code": code}),
                        Injected::Drop => serde_json::json!("drop"),
                    };
                    serde_json::json!({"node": r.node, "api_key": r.api_key, "remaining": r.remaining, "action": action})
                })
                .collect();
            serde_json::json!({"cut": cut, "delays": delays, "requests": requests})
        })
        .unwrap_or(serde_json::Value::Null)
    }

    /// Checks the link between `a` and `b`: refused when cut, else waits out its delay.
    async fn pass(&self, a: Endpoint, b: Endpoint) -> Result<(), LinkCut> {
        let delay = self.with(|rules| match rules.cut.contains(&pair(a, b)) {
            true => Err(LinkCut(a, b)),
            false => Ok(rules.delays.get(&pair(a, b)).copied()),
        });
        if let Some(delay) = delay.transpose()?.flatten() {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }

    /// What node `from` may do with its next exchange with the node at `to` (host:port):
    /// refused when the link is cut, after the link's delay otherwise. An address no
    /// node registered is never affected.
    pub async fn outbound(&self, from: i32, to: &str) -> Result<(), LinkCut> {
        let Some(Some(target)) = self.with(|rules| {
            let address: SocketAddr = to.parse().ok()?;
            rules.addresses.get(&address).copied()
        }) else {
            return Ok(());
        };
        self.pass(Endpoint::Node(from), Endpoint::Node(target))
            .await
    }

    /// What `node` does with a client's request of `api_key`: refused when the clients'
    /// link to it is cut; else, after the link's delay, the injected answer if any.
    pub async fn client_request(
        &self,
        node: i32,
        api_key: i16,
    ) -> Result<Option<Injected>, LinkCut> {
        if self.0.is_none() {
            return Ok(None);
        }
        self.pass(Endpoint::Clients, Endpoint::Node(node)).await?;
        Ok(self
            .with(|rules| {
                let index = rules
                    .requests
                    .iter()
                    .position(|r| r.node == node && r.api_key == api_key)?;
                let rule = &mut rules.requests[index];
                rule.remaining = rule.remaining.saturating_sub(1);
                let action = rule.action;
                if rule.remaining == 0 {
                    rules.requests.remove(index);
                }
                Some(action)
            })
            .flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_faults_pass_everything() {
        let faults = Faults::default();
        faults.cut(Endpoint::Node(1), Endpoint::Node(2));
        assert!(faults.outbound(1, "127.0.0.1:1").await.is_ok());
        assert_eq!(faults.client_request(1, 0).await.ok(), Some(None));
    }

    #[tokio::test]
    async fn a_cut_refuses_both_ways_until_healed() {
        let faults = Faults::settable();
        faults.register(1, "127.0.0.1:7001".parse().expect("addr"));
        faults.register(2, "127.0.0.1:7002".parse().expect("addr"));
        faults.cut(Endpoint::Node(2), Endpoint::Node(1));
        assert!(faults.outbound(1, "127.0.0.1:7002").await.is_err());
        assert!(faults.outbound(2, "127.0.0.1:7001").await.is_err());
        assert!(faults.outbound(1, "127.0.0.1:9999").await.is_ok());
        faults.heal(Endpoint::Node(1), Endpoint::Node(2));
        assert!(faults.outbound(1, "127.0.0.1:7002").await.is_ok());
    }

    #[tokio::test]
    async fn injected_answers_are_used_up_in_order() {
        let faults = Faults::settable();
        faults.inject(1, 0, 2, Injected::Error(6));
        faults.inject(1, 0, 1, Injected::Drop);
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(faults.client_request(1, 0).await.expect("open"));
        }
        let error = Some(Injected::Error(6));
        assert_eq!(seen, vec![error, error, Some(Injected::Drop), None]);
        assert_eq!(faults.client_request(2, 0).await.ok(), Some(None));
    }

    #[tokio::test]
    async fn clients_cut_from_a_node_are_refused_there_only() {
        let faults = Faults::settable();
        faults.cut(Endpoint::Clients, Endpoint::Node(3));
        assert!(faults.client_request(3, 1).await.is_err());
        assert!(faults.client_request(2, 1).await.is_ok());
    }
}
