//! Broker and topic configuration, with Apache Kafka's own key names (`log.dirs`,
//! `log.segment.bytes`, `min.insync.replicas`, …). A TOML file under `config/` is read,
//! its tables flattened into dotted keys, then overridden by command-line flags.
//!
//! Must not: know about the network or the log's internals.

pub mod connections;
pub mod dynamic;
pub mod error;
pub mod group;
pub mod inter_broker;
pub mod listeners;
mod read_replicas;
pub mod sasl;
pub mod security;
pub mod tls;
pub mod topic;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use connections::ConnectionLimits;
pub use dynamic::LiveConfig;
pub use error::ConfigError;
pub use listeners::{Listener, SecurityProtocol};

/// A flat map of Kafka config keys to their string values.
pub type ConfigMap = BTreeMap<String, String>;

/// Broker-level keys highwater reads, with their defaults (as Apache Kafka 4.x ships them,
/// except `listeners` and `log.dirs`, which default to a local single node, and
/// `queued.max.request.bytes`, which Kafka leaves unbounded (-1) and highwater bounds).
pub const BROKER_DEFAULTS: &[(&str, &str)] = &[
    ("node.id", "1"),
    ("process.roles", "broker,controller"),
    ("listeners", "PLAINTEXT://127.0.0.1:9092"),
    ("advertised.listeners", ""),
    // The HTTP listener(s) of /metrics, /healthz, /readyz and the live page (not a Kafka
    // key): `host:port`, comma-separated; none when empty.
    ("http.listeners", ""),
    (
        "listener.security.protocol.map",
        listeners::DEFAULT_PROTOCOL_MAP,
    ),
    ("controller.listener.names", "CONTROLLER"),
    ("inter.broker.listener.name", ""),
    ("controller.quorum.voters", ""),
    // The broker's rack, and how a partition's leader picks a replica for a consumer to
    // read from (KIP-392): empty, or Kafka's RackAwareReplicaSelector (`read_replicas`).
    ("broker.rack", ""),
    ("replica.selector.class", ""),
    ("controller.quorum.election.timeout.ms", "1000"),
    ("broker.session.timeout.ms", "9000"),
    ("broker.heartbeat.interval.ms", "2000"),
    ("auto.leader.rebalance.enable", "true"),
    ("leader.imbalance.check.interval.seconds", "300"),
    ("log.dirs", "./data"),
    ("metadata.log.dir", ""),
    ("num.partitions", "1"),
    ("default.replication.factor", "1"),
    ("auto.create.topics.enable", "true"),
    // An ACL authorizer (`config::security` accepts Kafka's StandardAuthorizer only).
    ("authorizer.class.name", ""),
    ("delete.topic.enable", "true"),
    ("socket.request.max.bytes", "104857600"),
    ("queued.max.requests", "500"),
    ("queued.max.request.bytes", "268435456"),
    ("max.connections", "2147483647"),
    ("max.connections.per.ip", "2147483647"),
    ("max.connections.per.ip.overrides", ""),
    ("connection.failed.authentication.delay.ms", "100"),
    // A connection with no request for this long is closed (negative: never), as Kafka's.
    ("connections.max.idle.ms", "600000"),
    ("message.max.bytes", "1048588"),
    ("log.segment.bytes", "1073741824"),
    ("log.index.size.max.bytes", "10485760"),
    ("log.index.interval.bytes", "4096"),
    ("log.retention.ms", "604800000"),
    ("log.retention.bytes", "-1"),
    ("log.roll.ms", "604800000"),
    ("log.retention.hours", "168"),
    ("log.roll.hours", "168"),
    ("log.roll.jitter.hours", "0"),
    ("log.cleanup.policy", "delete"),
    ("log.flush.interval.messages", "9223372036854775807"),
    ("log.flush.interval.ms", "9223372036854775807"),
    ("min.insync.replicas", "1"),
    ("replica.lag.time.max.ms", "30000"),
    ("compression.type", "producer"),
    ("log.message.timestamp.type", "CreateTime"),
    ("unclean.leader.election.enable", "false"),
    ("log.preallocate", "false"),
    ("log.cleaner.enable", "true"),
    ("log.cleaner.backoff.ms", "15000"),
    ("log.cleaner.threads", "1"),
    ("log.cleaner.dedupe.buffer.size", "134217728"),
    ("log.cleaner.delete.retention.ms", "86400000"),
    ("log.cleaner.min.compaction.lag.ms", "0"),
    ("log.cleaner.max.compaction.lag.ms", "9223372036854775807"),
    ("log.cleaner.min.cleanable.ratio", "0.5"),
    ("log.segment.delete.delay.ms", "60000"),
    ("log.roll.jitter.ms", "0"),
    ("log.message.timestamp.before.max.ms", "9223372036854775807"),
    ("log.message.timestamp.after.max.ms", "3600000"),
    ("log.local.retention.ms", "-2"),
    ("log.local.retention.bytes", "-2"),
    ("log.retention.check.interval.ms", "300000"),
    ("log.flush.offset.checkpoint.interval.ms", "60000"),
    ("replica.high.watermark.checkpoint.interval.ms", "5000"),
    ("compression.gzip.level", "-1"),
    ("compression.lz4.level", "9"),
    ("compression.zstd.level", "3"),
    ("offsets.topic.num.partitions", "50"),
    ("offsets.topic.replication.factor", "3"),
    ("offsets.topic.segment.bytes", "104857600"),
    ("group.min.session.timeout.ms", "6000"),
    ("group.max.session.timeout.ms", "1800000"),
    ("group.initial.rebalance.delay.ms", "3000"),
    ("group.max.size", "2147483647"),
    ("offset.metadata.max.bytes", "4096"),
    ("offsets.retention.minutes", "10080"),
    ("offsets.retention.check.interval.ms", "600000"),
    ("offsets.commit.timeout.ms", "5000"),
    ("group.consumer.session.timeout.ms", "45000"),
    ("group.consumer.heartbeat.interval.ms", "5000"),
    ("group.consumer.min.session.timeout.ms", "45000"),
    ("group.consumer.max.session.timeout.ms", "60000"),
    ("group.consumer.min.heartbeat.interval.ms", "5000"),
    ("group.consumer.max.heartbeat.interval.ms", "15000"),
    ("group.consumer.max.size", "2147483647"),
    ("group.consumer.assignors", "uniform,range"),
    ("max.request.partition.size.limit", "2000"),
    ("max.incremental.fetch.session.cache.slots", "1000"),
    ("transaction.state.log.num.partitions", "50"),
    ("transaction.state.log.replication.factor", "3"),
    ("transaction.state.log.min.isr", "2"),
    ("transaction.state.log.segment.bytes", "104857600"),
    ("transaction.max.timeout.ms", "900000"),
    ("transaction.partition.verification.enable", "true"),
    ("transactional.id.expiration.ms", "604800000"),
    (
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "3600000",
    ),
    ("producer.id.expiration.ms", "86400000"),
    (
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "10000",
    ),
];

/// One entry of `controller.quorum.voters` (`id@host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
}

/// What a process does (`process.roles`): broker, controller, or both (combined).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    pub broker: bool,
    pub controller: bool,
}

impl std::fmt::Display for Roles {
    /// As `process.roles` writes them: `broker`, `controller` or `broker,controller`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let roles = [(self.broker, "broker"), (self.controller, "controller")];
        let named: Vec<&str> = roles
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
        f.write_str(&named.join(","))
    }
}

/// The typed configuration of one broker process.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub roles: Roles,
    /// The inter-broker listener's address (for a controller-only node: its controller
    /// listener, which serves no Kafka clients).
    pub listener: SocketAddr,
    /// Every listener that serves Kafka clients, the inter-broker one included (none for a
    /// controller-only node).
    pub listeners: Vec<Listener>,
    /// `inter.broker.listener.name`: the listener other brokers replicate from.
    pub inter_broker_listener: String,
    /// How this broker secures its connections to that listener of the others.
    pub inter_broker_client: inter_broker::InterBrokerClient,
    /// The listener named in `controller.listener.names`, where controllers talk Raft and
    /// brokers reach the active controller; `None` for a single node without quorum peers.
    pub controller_listener: Option<SocketAddr>,
    /// That listener's name (`CONTROLLER`): Kafka clients on it (admin tools with
    /// `--bootstrap-controller`) are served the controller's APIs only.
    pub controller_listener_name: Option<String>,
    /// The controller listener's TLS when it is SSL: served by controllers, and used by
    /// every node to reach them.
    pub controller_tls: Option<tls::TlsSettings>,
    /// The metadata quorum. For a combined node with none configured: itself alone.
    pub voters: Vec<Voter>,
    pub broker_session_timeout_ms: u64,
    pub broker_heartbeat_interval_ms: u64,
    pub quorum_election_timeout_ms: u64,
    pub default_replication_factor: i32,
    /// The inter-broker listener's advertised host and port (other brokers connect there).
    pub advertised_host: String,
    pub advertised_port: u16,
    /// `log.dirs`: where partitions live, each directory failing on its own (KIP-112).
    pub log_dirs: Vec<PathBuf>,
    /// `metadata.log.dir`, else the first of `log.dirs`: the metadata quorum's log,
    /// `meta.properties`, the clean-shutdown marker of the node and the cleaner's
    /// checkpoint.
    pub metadata_log_dir: PathBuf,
    pub num_partitions: i32,
    pub auto_create_topics_enable: bool,
    pub socket_request_max_bytes: usize,
    /// Requests read from one connection but not yet answered (named after Kafka's
    /// broker-wide `queued.max.requests`; applied per connection here).
    pub queued_max_requests: usize,
    /// Request bytes read from all connections but not yet answered
    /// (`queued.max.request.bytes`); `None` when unbounded.
    pub queued_max_request_bytes: Option<usize>,
    /// `max.connections`, `max.connections.per.ip` and its overrides.
    pub connection_limits: ConnectionLimits,
    /// `connections.max.idle.ms`: how long a client connection may wait between requests
    /// before it is closed (`None`: forever).
    pub connections_max_idle: Option<std::time::Duration>,
    /// `http.listeners`: where /metrics, /healthz, /readyz and the live page are served.
    pub http_listeners: Vec<SocketAddr>,
    /// `broker.rack`, registered with the controller and shown to clients.
    pub rack: Option<String>,
    /// `replica.selector.class` is Kafka's RackAwareReplicaSelector: leaders send consumers
    /// in another replica's rack to that replica (fetch from follower, KIP-392).
    pub rack_aware_reads: bool,
    /// Every broker key with its value, defaults included (DescribeConfigs, topic defaults).
    pub values: ConfigMap,
    /// The keys set explicitly by the file or flags (DescribeConfigs reports their source).
    pub explicit: ConfigMap,
}

/// Flattens nested TOML tables into dotted keys: `[log] dirs = "x"` → `log.dirs = x`.
fn flatten(prefix: &str, value: &toml::Value, out: &mut ConfigMap) {
    match value {
        toml::Value::Table(table) => {
            for (key, inner) in table {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&name, inner, out);
            }
        }
        toml::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        toml::Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect();
            out.insert(prefix.to_string(), parts.join(","));
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// Reads a TOML config file into a flat map of Kafka keys.
pub fn read_file(path: &Path) -> Result<ConfigMap, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let value: toml::Value = text.parse().map_err(|source| ConfigError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    let mut map = ConfigMap::new();
    flatten("", &value, &mut map);
    Ok(map)
}

fn parse<T: std::str::FromStr>(values: &ConfigMap, key: &'static str) -> Result<T, ConfigError> {
    let raw = values.get(key).map(String::as_str).unwrap_or_default();
    raw.trim().parse().map_err(|_| ConfigError::Invalid {
        key,
        value: raw.to_string(),
    })
}

/// Parses `host:port` (brackets allowed around an IPv6 host).
pub(crate) fn parse_host_port(
    key: &'static str,
    address: &str,
) -> Result<(String, u16), ConfigError> {
    let invalid = || ConfigError::Invalid {
        key,
        value: address.to_string(),
    };
    let (host, port) = address.trim().rsplit_once(':').ok_or_else(invalid)?;
    let port = port.parse().map_err(|_| invalid())?;
    Ok((
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
    ))
}

/// Parses `controller.quorum.voters`: `id@host:port,...`.
pub fn parse_voters(raw: &str) -> Result<Vec<Voter>, ConfigError> {
    let invalid = || ConfigError::Invalid {
        key: "controller.quorum.voters",
        value: raw.to_string(),
    };
    raw.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|voter| {
            let (id, address) = voter.split_once('@').ok_or_else(invalid)?;
            let node_id = id.trim().parse().map_err(|_| invalid())?;
            let (host, port) = parse_host_port("controller.quorum.voters", address)?;
            Ok(Voter {
                node_id,
                host,
                port,
            })
        })
        .collect()
}

fn parse_roles(raw: &str) -> Result<Roles, ConfigError> {
    let mut roles = Roles {
        broker: false,
        controller: false,
    };
    for role in raw.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        match role {
            "broker" => roles.broker = true,
            "controller" => roles.controller = true,
            _ => {
                return Err(ConfigError::Invalid {
                    key: "process.roles",
                    value: raw.to_string(),
                })
            }
        }
    }
    if !roles.broker && !roles.controller {
        return Err(ConfigError::Invalid {
            key: "process.roles",
            value: raw.to_string(),
        });
    }
    Ok(roles)
}

fn inconsistent(reason: String) -> ConfigError {
    ConfigError::InconsistentQuorum { reason }
}

/// Checks that the roles, the controller listener and the voters fit together, as Kafka's
/// KafkaConfig does at start; returns the voters to use.
fn check_quorum(
    node_id: i32,
    roles: Roles,
    controller_listener: Option<(&str, u16)>,
    mut voters: Vec<Voter>,
) -> Result<Vec<Voter>, ConfigError> {
    for (i, voter) in voters.iter().enumerate() {
        if voters[..i].iter().any(|v| v.node_id == voter.node_id) {
            let id = voter.node_id;
            return Err(inconsistent(format!(
                "node id {id} appears twice in controller.quorum.voters"
            )));
        }
        if voters[..i]
            .iter()
            .any(|v| v.host == voter.host && v.port == voter.port)
        {
            return Err(inconsistent(format!(
                "two voters share the address {}:{}",
                voter.host, voter.port
            )));
        }
    }
    let me = voters.iter().find(|v| v.node_id == node_id);
    match (roles.controller, me, controller_listener) {
        (false, Some(_), _) => Err(inconsistent(format!(
            "node.id {node_id} is in controller.quorum.voters but process.roles has no controller"
        ))),
        (false, None, _) if voters.is_empty() => Err(inconsistent(
            "a broker-only node needs controller.quorum.voters to find the controllers".into(),
        )),
        (false, None, _) => Ok(voters),
        (true, None, None) if voters.is_empty() => {
            voters.push(Voter {
                node_id,
                host: String::new(),
                port: 0,
            });
            Ok(voters)
        }
        (true, None, _) => Err(inconsistent(format!(
            "node.id {node_id} has the controller role but is not in controller.quorum.voters"
        ))),
        (true, Some(_), None) => Err(inconsistent(
            "a controller needs a listener named in controller.listener.names".into(),
        )),
        (true, Some(voter), Some((host, port))) if voter.port != port || voter.host != host => {
            Err(inconsistent(format!(
                "controller.quorum.voters says node {node_id} is at {}:{}, but its controller \
                 listener is {host}:{port}",
                voter.host, voter.port
            )))
        }
        (true, Some(_), Some(_)) => Ok(voters),
    }
}

fn socket_addr(key: &'static str, host: &str, port: u16) -> Result<SocketAddr, ConfigError> {
    format!("{host}:{port}")
        .parse()
        .or_else(|_| format!("[{host}]:{port}").parse())
        .map_err(|_| ConfigError::Invalid {
            key,
            value: format!("{host}:{port}"),
        })
}

/// `http.listeners`: `host:port` addresses (an `http://` prefix allowed), comma-separated.
fn http_listeners(value: &str) -> Result<Vec<SocketAddr>, ConfigError> {
    let invalid = || ConfigError::Invalid {
        key: "http.listeners",
        value: value.to_string(),
    };
    value
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| {
            let a = a.strip_prefix("http://").unwrap_or(a).trim_end_matches('/');
            let (host, port) = a.rsplit_once(':').ok_or_else(invalid)?;
            let port = port.parse().map_err(|_| invalid())?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let host = if host.is_empty() { "0.0.0.0" } else { host };
            socket_addr("http.listeners", host, port)
        })
        .collect()
}

/// The listener names of `controller.listener.names`, upper case.
fn controller_listener_names(values: &ConfigMap) -> Vec<String> {
    values["controller.listener.names"]
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .collect()
}

/// The listeners of a node and the quorum they imply.
struct Listeners {
    listener: SocketAddr,
    clients: Vec<Listener>,
    inter_broker: String,
    inter_broker_client: inter_broker::InterBrokerClient,
    controller: Option<SocketAddr>,
    controller_name: Option<String>,
    controller_tls: Option<tls::TlsSettings>,
    voters: Vec<Voter>,
    advertised: (String, u16),
}

impl Listeners {
    fn from_values(values: &ConfigMap, node_id: i32, roles: Roles) -> Result<Self, ConfigError> {
        let controller_names = controller_listener_names(values);
        let entries = listeners::parse_entries("listeners", &values["listeners"])?;
        let controller = entries.iter().find(|e| controller_names.contains(&e.name));
        let voters = check_quorum(
            node_id,
            roles,
            controller.map(|e| (e.host.as_str(), e.port)),
            parse_voters(&values["controller.quorum.voters"])?,
        )?;
        let controller_listener = match controller {
            Some(e) => Some(socket_addr("listeners", &e.host, e.port)?),
            None => None,
        };
        let alone = voters.len() <= 1 && roles.controller;
        let controller_tls = controller_tls(values, &controller_names, alone)?;
        let clients = listeners::client_listeners(values, &entries, &controller_names, |h, p| {
            socket_addr("listeners", h, p)
        })?;
        let invalid = || ConfigError::Invalid {
            key: "listeners",
            value: values["listeners"].clone(),
        };
        if !roles.broker {
            let e = controller.ok_or_else(invalid)?;
            return Ok(Listeners {
                listener: socket_addr("listeners", &e.host, e.port)?,
                clients: Vec::new(),
                inter_broker: String::new(),
                inter_broker_client: inter_broker::InterBrokerClient::default(),
                controller: controller_listener,
                controller_name: controller.map(|e| e.name.clone()),
                controller_tls,
                voters,
                advertised: (e.host.clone(), e.port),
            });
        }
        if clients.is_empty() {
            return Err(invalid());
        }
        let inter = &clients[listeners::inter_broker_index(values, &clients)?];
        // A lone node never connects to itself: its inter-broker listener may be secured
        // without the settings a broker needs to log in to another one.
        let inter_broker_client = match alone {
            true => inter_broker::InterBrokerClient::default(),
            false => inter_broker::client(values, inter)?,
        };
        Ok(Listeners {
            listener: inter.address,
            inter_broker: inter.name.clone(),
            inter_broker_client,
            advertised: (inter.advertised_host.clone(), inter.advertised_port),
            clients,
            controller: controller_listener,
            controller_name: controller.map(|e| e.name.clone()),
            controller_tls,
            voters,
        })
    }
}

/// The TLS of the controller listener (the first of `controller.listener.names`) when
/// its protocol is SSL; with other nodes to reach (not `alone`), it needs a truststore to
/// check their certificates.
fn controller_tls(
    values: &ConfigMap,
    controller_names: &[String],
    alone: bool,
) -> Result<Option<tls::TlsSettings>, ConfigError> {
    let Some(name) = controller_names.first() else {
        return Ok(None);
    };
    let map = listeners::protocol_map(values)?;
    let key = "controller.listener.names";
    let protocol = listeners::protocol_of(name, &map, controller_names, key, name)?;
    if protocol != SecurityProtocol::Ssl {
        return Ok(None);
    }
    let settings = tls::settings(values, name)?;
    if settings.trust.is_none() && !alone {
        return Err(ConfigError::Unenforced {
            key: format!("{}ssl.truststore.location", tls::listener_prefix(name)),
            value: String::new(),
            reason: format!(
                "nodes reach each other's controller listener {name} over SSL and check its \
                 certificate: set ssl.truststore.location (or ssl.truststore.certificates) for it"
            ),
        });
    }
    Ok(Some(settings))
}

/// Kafka's coarser time keys, each read when the finer ones are not set, as Kafka's
/// KafkaConfig resolves them (`log.retention.ms`, else `.minutes`, else `.hours`): the
/// milliseconds key and its alternatives with their milliseconds per unit.
const TIME_UNIT_KEYS: &[(&str, &[(&str, i64)])] = &[
    (
        "log.retention.ms",
        &[
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", 3_600_000),
        ],
    ),
    ("log.roll.ms", &[("log.roll.hours", 3_600_000)]),
    (
        "log.roll.jitter.ms",
        &[("log.roll.jitter.hours", 3_600_000)],
    ),
];

/// Sets each milliseconds key of [`TIME_UNIT_KEYS`] that `explicit` leaves out from the
/// first coarser key it sets (a `server.properties` with `log.retention.hours=24` keeps
/// a day). A negative retention means no limit (-1), as in Kafka.
fn resolve_time_units(explicit: &mut ConfigMap) -> Result<(), ConfigError> {
    for (millis_key, coarser) in TIME_UNIT_KEYS {
        if explicit.contains_key(*millis_key) {
            continue;
        }
        let Some((key, unit, raw)) = coarser
            .iter()
            .find_map(|(key, unit)| explicit.get(*key).map(|raw| (*key, *unit, raw.clone())))
        else {
            continue;
        };
        let count: i64 = raw.trim().parse().map_err(|_| ConfigError::Invalid {
            key,
            value: raw.clone(),
        })?;
        let millis = count.saturating_mul(unit);
        let millis = if *millis_key == "log.retention.ms" && millis < 0 {
            -1
        } else {
            millis
        };
        explicit.insert((*millis_key).to_string(), millis.to_string());
    }
    Ok(())
}

/// Every key of `explicit` that highwater does not know, with the known key it is closest
/// to when that one is a likely typo (at most two edits away, or a third of its length).
pub fn unknown_keys(explicit: &ConfigMap) -> Vec<ConfigError> {
    let known = || {
        let broker = BROKER_DEFAULTS.iter().map(|(k, _)| *k);
        let units = TIME_UNIT_KEYS
            .iter()
            .flat_map(|(_, c)| c.iter().map(|(k, _)| *k));
        broker
            .chain(units)
            .chain(tls::TLS_DEFAULTS.iter().map(|(k, _)| *k))
            .chain(topic::TOPIC_KEYS.iter().map(|k| k.name))
            .chain(security::AUTHORIZER_KEYS.iter().copied())
            .chain(security::TOKEN_KEYS.iter().map(|(k, _)| *k))
    };
    explicit
        .keys()
        .filter(|key| {
            !known().any(|k| k == key.as_str()) && !tls::is_tls_key(key) && !sasl::is_sasl_key(key)
        })
        .map(|key| {
            let closest = known()
                .map(|k| (edit_distance(key, k), k))
                .min_by_key(|(d, _)| *d)
                .filter(|(d, k)| *d <= 2.max(k.len() / 3))
                .map(|(_, k)| k);
            ConfigError::UnknownKey {
                key: key.clone(),
                suggestion: closest,
            }
        })
        .collect()
}

/// Levenshtein distance between two keys (ASCII in practice).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

impl BrokerConfig {
    /// Builds the configuration from explicitly set keys on top of the defaults.
    pub fn from_map(mut explicit: ConfigMap) -> Result<Self, ConfigError> {
        resolve_time_units(&mut explicit)?;
        let mut values: ConfigMap = BROKER_DEFAULTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        values.extend(
            tls::TLS_DEFAULTS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        values.extend(explicit.clone());
        security::check_enforced(&values, &controller_listener_names(&values))?;
        for error in unknown_keys(&explicit) {
            tracing::warn!("{error}: ignored (--strict-config refuses it)");
        }
        let node_id = parse(&values, "node.id")?;
        let roles = parse_roles(&values["process.roles"])?;
        let listeners = Listeners::from_values(&values, node_id, roles)?;
        let socket_request_max_bytes = parse(&values, "socket.request.max.bytes")?;
        let log_dirs: Vec<PathBuf> = values["log.dirs"]
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect();
        let Some(first_dir) = log_dirs.first().cloned() else {
            return Err(ConfigError::Invalid {
                key: "log.dirs",
                value: values["log.dirs"].clone(),
            });
        };
        let metadata_log_dir = match values.get("metadata.log.dir").map(|d| d.trim()) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => first_dir,
        };
        Ok(BrokerConfig {
            node_id,
            roles,
            listener: listeners.listener,
            listeners: listeners.clients,
            inter_broker_listener: listeners.inter_broker,
            inter_broker_client: listeners.inter_broker_client,
            controller_listener: listeners.controller,
            controller_listener_name: listeners.controller_name,
            controller_tls: listeners.controller_tls,
            voters: listeners.voters,
            broker_session_timeout_ms: parse(&values, "broker.session.timeout.ms")?,
            broker_heartbeat_interval_ms: parse(&values, "broker.heartbeat.interval.ms")?,
            quorum_election_timeout_ms: parse(&values, "controller.quorum.election.timeout.ms")?,
            default_replication_factor: parse(&values, "default.replication.factor")?,
            advertised_host: listeners.advertised.0,
            advertised_port: listeners.advertised.1,
            log_dirs,
            metadata_log_dir,
            num_partitions: parse(&values, "num.partitions")?,
            auto_create_topics_enable: parse(&values, "auto.create.topics.enable")?,
            socket_request_max_bytes,
            queued_max_requests: parse::<usize>(&values, "queued.max.requests")?.max(1),
            queued_max_request_bytes: connections::queued_max_request_bytes(
                &values,
                socket_request_max_bytes,
            )?,
            connection_limits: connections::connection_limits(&values)?,
            connections_max_idle: connections::max_idle(&values)?,
            http_listeners: http_listeners(&values["http.listeners"])?,
            rack: Some(values["broker.rack"].trim().to_string()).filter(|r| !r.is_empty()),
            rack_aware_reads: read_replicas::rack_aware(&values)?,
            values,
            explicit,
        })
    }

    /// Parses the value of a broker key, naming the key when it is not valid.
    pub fn parse<T: std::str::FromStr>(&self, key: &'static str) -> Result<T, ConfigError> {
        parse(&self.values, key)
    }

    /// The value of a broker key (defaults included).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_named_with_a_near_miss_only_when_there_is_one() {
        let map: ConfigMap = [
            ("log.retention.msec", "1"),
            ("zzz.qqq", "2"),
            ("node.id", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let named: Vec<String> = unknown_keys(&map).iter().map(ToString::to_string).collect();
        assert_eq!(
            named,
            [
                "unknown configuration key log.retention.msec (did you mean log.retention.ms?)",
                "unknown configuration key zzz.qqq",
            ]
        );
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn nested_tables_flatten_to_kafka_keys() {
        let value: toml::Value = "node.id = 3\n[log]\ndirs = \"/tmp/x\"\nsegment.bytes = 1024\n"
            .parse()
            .expect("toml");
        let mut map = ConfigMap::new();
        flatten("", &value, &mut map);
        assert_eq!(map["log.dirs"], "/tmp/x");
        assert_eq!(map["log.segment.bytes"], "1024");
        assert_eq!(map["node.id"], "3");
    }

    #[test]
    fn listener_accepts_kafka_and_plain_forms() {
        let mut map = ConfigMap::new();
        map.insert("listeners".into(), "PLAINTEXT://127.0.0.1:9999".into());
        let config = BrokerConfig::from_map(map).expect("config");
        assert_eq!(config.listener.port(), 9999);
        assert_eq!(config.advertised_host, "127.0.0.1");
    }

    fn quorum_config(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::from_map(map)
    }

    const VOTERS: &str = "1@127.0.0.1:9192,2@127.0.0.1:9193";

    #[test]
    fn http_listeners_are_host_port_pairs_and_off_when_empty() {
        assert_eq!(http_listeners("").expect("off"), Vec::<SocketAddr>::new());
        let parsed = http_listeners("127.0.0.1:9644, http://[::1]:9645/").expect("two");
        assert_eq!(
            parsed[0],
            "127.0.0.1:9644".parse::<SocketAddr>().expect("v4")
        );
        assert_eq!(parsed[1], "[::1]:9645".parse::<SocketAddr>().expect("v6"));
        assert_eq!(http_listeners(":9646").expect("any host")[0].port(), 9646);
        for bad in ["9644", "host:port", "127.0.0.1:99999"] {
            assert!(http_listeners(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_combined_node_finds_its_client_and_controller_listeners() {
        let config = quorum_config(&[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192",
            ),
            ("controller.quorum.voters", VOTERS),
        ])
        .expect("config");
        assert_eq!(config.listener.port(), 9092);
        assert_eq!(config.controller_listener.map(|l| l.port()), Some(9192));
        assert_eq!(config.voters.len(), 2);
    }

    #[test]
    fn the_single_node_default_votes_for_itself() {
        let config = quorum_config(&[]).expect("config");
        assert_eq!(config.voters.len(), 1);
        assert_eq!(config.voters[0].node_id, 1);
        assert!(config.controller_listener.is_none());
    }

    #[test]
    fn an_inconsistent_quorum_is_refused_with_the_reason() {
        let cases = [
            vec![
                (
                    "listeners",
                    "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192",
                ),
                (
                    "controller.quorum.voters",
                    "1@127.0.0.1:9192,1@127.0.0.1:9193",
                ),
            ],
            vec![
                ("node.id", "3"),
                (
                    "listeners",
                    "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192",
                ),
                ("controller.quorum.voters", VOTERS),
            ],
            vec![
                (
                    "listeners",
                    "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9999",
                ),
                ("controller.quorum.voters", VOTERS),
            ],
            vec![("process.roles", "broker")],
            vec![
                ("process.roles", "broker"),
                ("controller.quorum.voters", VOTERS),
            ],
        ];
        for case in cases {
            let error = quorum_config(&case).expect_err("must be refused");
            assert!(
                matches!(error, ConfigError::InconsistentQuorum { .. }),
                "{case:?}: {error}"
            );
        }
    }

    #[test]
    fn a_bad_number_is_refused_with_its_key() {
        let mut map = ConfigMap::new();
        map.insert("num.partitions".into(), "many".into());
        let error = BrokerConfig::from_map(map).expect_err("must fail");
        assert!(error.to_string().contains("num.partitions"));
    }
}
