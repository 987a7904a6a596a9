//! The fault API of `highwater dev --http ADDR`, for test suites in any language: the
//! [`Cluster`] hooks as HTTP requests, answered in JSON.
//!
//! | Request | Does |
//! |---|---|
//! | `GET /faults` | the nodes (id, address, running) and the faults in force |
//! | `POST /faults/nodes/N/stop`, `…/kill`, `…/restart` | [`Cluster::stop`], [`Cluster::kill`], [`Cluster::restart`] |
//! | `POST /faults/links/cut?a=A&b=B` | cut the link between A and B (a node id, or `clients`) |
//! | `POST /faults/links/heal?a=A&b=B` | restore it |
//! | `POST /faults/links/delay?a=A&b=B&ms=M` | delay every exchange over it by M ms |
//! | `POST /faults/requests?node=N&api=API&count=C&error_code=E` | answer the next C client requests of API (name, e.g. `Produce`, or key) to node N with error E |
//! | `POST /faults/requests?node=N&api=API&count=C&drop` | drop them (no answer; the connection is closed) |
//! | `POST /faults/clear` | remove every link fault and injected answer |
//!
//! A refused request is answered 400 (404 for an unknown path) with `{"error": "…"}`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use serde_json::{json, Value};

use super::{Cluster, Endpoint};
use crate::http::StatusCode;

/// [`crate::http::Control`] over a cluster.
#[derive(Debug, Clone)]
pub struct Control {
    cluster: Cluster,
}

impl Control {
    pub(super) fn new(cluster: Cluster) -> Self {
        Control { cluster }
    }

    async fn answer(&self, post: bool, path: &str, query: &str) -> Result<Value, Refusal> {
        let params = parse_query(query);
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let cluster = &self.cluster;
        match (post, parts.as_slice()) {
            (false, ["faults"]) => Ok(self.describe()),
            (true, ["faults", "nodes", node, action]) => {
                let node: i32 = node
                    .parse()
                    .map_err(|_| Refusal::bad(format!("node {node:?} is not a node id")))?;
                match *action {
                    "stop" => cluster.stop(node).await,
                    "kill" => cluster.kill(node).await,
                    "restart" => cluster.restart(node).await,
                    other => return Err(Refusal::not_found(format!("no node action {other:?}"))),
                }
                .map_err(|e| Refusal::bad(format!("{e:#}")))?;
                Ok(self.describe())
            }
            (true, ["faults", "links", action]) => {
                let a = endpoint(&params, "a")?;
                let b = endpoint(&params, "b")?;
                match *action {
                    "cut" => cluster.cut(a, b),
                    "heal" => cluster.heal(a, b),
                    "delay" => {
                        let ms: u64 = number(&params, "ms")?;
                        cluster.delay(a, b, Duration::from_millis(ms));
                    }
                    other => return Err(Refusal::not_found(format!("no link action {other:?}"))),
                }
                Ok(self.describe())
            }
            (true, ["faults", "requests"]) => {
                let node: i32 = number(&params, "node")?;
                let api = api_key(&params)?;
                let count: u32 = number(&params, "count")?;
                let injected = match (params.get("error_code"), params.contains_key("drop")) {
                    (Some(_), false) => {
                        cluster.fail_next(node, api, count, number(&params, "error_code")?)
                    }
                    (None, true) => cluster.drop_next(node, api, count),
                    _ => {
                        return Err(Refusal::bad(
                            "give exactly one of error_code=E and drop".into(),
                        ))
                    }
                };
                injected.map_err(|e| Refusal::bad(format!("{e:#}")))?;
                Ok(self.describe())
            }
            (true, ["faults", "clear"]) => {
                cluster.faults().clear();
                Ok(self.describe())
            }
            _ => Err(Refusal::not_found(format!(
                "no {} {path} (see GET /faults and the docs of highwater dev)",
                if post { "POST" } else { "GET" }
            ))),
        }
    }

    fn describe(&self) -> Value {
        let nodes: Vec<Value> = self
            .cluster
            .nodes()
            .into_iter()
            .map(|(id, running)| {
                let address = self.cluster.address(id).map(|a| a.to_string()).ok();
                json!({"id": id, "address": address, "running": running})
            })
            .collect();
        json!({"bootstrap": self.cluster.bootstrap(), "nodes": nodes, "faults": self.cluster.faults().describe()})
    }
}

impl crate::http::Control for Control {
    fn handle(
        &self,
        post: bool,
        path: &str,
        query: &str,
    ) -> Pin<Box<dyn Future<Output = (StatusCode, String)> + Send + '_>> {
        let (path, query) = (path.to_string(), query.to_string());
        Box::pin(async move {
            match self.answer(post, &path, &query).await {
                Ok(value) => (StatusCode::OK, format!("{value}\n")),
                Err(refusal) => {
                    tracing::info!(%path, %query, reason = %refusal.reason, "fault API request refused");
                    (
                        refusal.status,
                        format!("{}\n", json!({"error": refusal.reason})),
                    )
                }
            }
        })
    }
}

/// Why a request was refused.
struct Refusal {
    status: StatusCode,
    reason: String,
}

impl Refusal {
    fn bad(reason: String) -> Self {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            reason,
        }
    }

    fn not_found(reason: String) -> Self {
        Refusal {
            status: StatusCode::NOT_FOUND,
            reason,
        }
    }
}

/// `a=1&b=clients&drop` → its pairs (a key alone maps to "").
fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) => (key.to_string(), value.to_string()),
            None => (pair.to_string(), String::new()),
        })
        .collect()
}

fn param<'a>(params: &'a HashMap<String, String>, key: &str) -> Result<&'a str, Refusal> {
    params
        .get(key)
        .map(String::as_str)
        .ok_or_else(|| Refusal::bad(format!("missing {key}=")))
}

fn number<T: std::str::FromStr>(params: &HashMap<String, String>, key: &str) -> Result<T, Refusal> {
    let value = param(params, key)?;
    value
        .parse()
        .map_err(|_| Refusal::bad(format!("{key}={value} is not a number in range")))
}

/// A link end: a node id, or `clients`.
fn endpoint(params: &HashMap<String, String>, key: &str) -> Result<Endpoint, Refusal> {
    match param(params, key)? {
        "clients" => Ok(Endpoint::Clients),
        id => id
            .parse()
            .map(Endpoint::Node)
            .map_err(|_| Refusal::bad(format!("{key}={id}: a node id or \"clients\""))),
    }
}

/// Above every API key Kafka has assigned.
const API_KEY_MAX: i16 = 200;

/// `api=` as Kafka's API name (`Produce`, `FindCoordinator`) or its numeric key.
fn api_key(params: &HashMap<String, String>) -> Result<ApiKey, Refusal> {
    let value = param(params, "api")?;
    if let Ok(key) = value.parse::<i16>() {
        return ApiKey::try_from(key).map_err(|()| Refusal::bad(format!("no API key {key}")));
    }
    (0..=API_KEY_MAX)
        .filter_map(|key| ApiKey::try_from(key).ok())
        .find(|api| format!("{api:?}").eq_ignore_ascii_case(value))
        .ok_or_else(|| Refusal::bad(format!("no API named {value:?}")))
}
