//! The node's listeners, as Kafka names them: `listeners` (`NAME://host:port`, several),
//! `advertised.listeners` (what clients are told, per name), `listener.security.protocol.map`
//! (each name's security protocol), `controller.listener.names` (the quorum's) and
//! `inter.broker.listener.name` (where brokers replicate from each other).
//!
//! Must not: bind sockets or read key material (the server does both).

use std::net::SocketAddr;

use super::tls::{self, TlsSettings};
use super::{parse_host_port, ConfigError, ConfigMap};

/// Kafka's default `listener.security.protocol.map`: every protocol is also the name of a
/// listener that uses it.
pub const DEFAULT_PROTOCOL_MAP: &str = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,\
                                    SASL_SSL:SASL_SSL";

/// A listener's security protocol (Kafka's `SecurityProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name of the protocol, as the protocol map writes it.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }

    /// Whether clients authenticate with SASL before any other request.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// Whether connections start with a TLS handshake.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

/// One listener that serves Kafka clients (not a controller listener).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Upper case, as Kafka compares listener names.
    pub name: String,
    pub address: SocketAddr,
    pub protocol: SecurityProtocol,
    /// What clients of this listener are told to connect to (`advertised.listeners`,
    /// else the listener's own address).
    pub advertised_host: String,
    pub advertised_port: u16,
    /// For SSL and SASL_SSL: the listener's certificate, key and client authentication.
    pub tls: Option<TlsSettings>,
    /// For SASL_PLAINTEXT and SASL_SSL: the mechanisms offered and PLAIN's users.
    pub sasl: Option<super::sasl::SaslSettings>,
}

/// A parsed `NAME://host:port` entry.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// Splits `NAME://host:port,host:port,...` into entries; a listener without a name is
/// `PLAINTEXT`.
pub(super) fn parse_entries(key: &'static str, raw: &str) -> Result<Vec<Entry>, ConfigError> {
    raw.split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|listener| {
            let (name, address) = listener
                .split_once("://")
                .unwrap_or(("PLAINTEXT", listener));
            let (host, port) = parse_host_port(key, address)?;
            Ok(Entry {
                name: name.trim().to_ascii_uppercase(),
                host,
                port,
            })
        })
        .collect()
}

/// `listener.security.protocol.map` as (listener name, protocol) pairs, names upper case.
pub fn protocol_map(values: &ConfigMap) -> Result<Vec<(String, SecurityProtocol)>, ConfigError> {
    let key = "listener.security.protocol.map";
    let raw = values.get(key).map_or(DEFAULT_PROTOCOL_MAP, String::as_str);
    let invalid = || ConfigError::Invalid {
        key,
        value: raw.to_string(),
    };
    raw.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (name, protocol) = entry.split_once(':').ok_or_else(invalid)?;
            let protocol = SecurityProtocol::from_name(&protocol.trim().to_ascii_uppercase())
                .ok_or_else(invalid)?;
            Ok((name.trim().to_ascii_uppercase(), protocol))
        })
        .collect()
}

/// The security protocol of listener `name`: the map's, or PLAINTEXT for a controller
/// listener the map leaves out (as KRaft allows).
pub fn protocol_of(
    name: &str,
    map: &[(String, SecurityProtocol)],
    controller_names: &[String],
    key: &'static str,
    raw: &str,
) -> Result<SecurityProtocol, ConfigError> {
    match map.iter().find(|(n, _)| n == name) {
        Some((_, protocol)) => Ok(*protocol),
        None if controller_names.iter().any(|c| c == name) => Ok(SecurityProtocol::Plaintext),
        None => Err(ConfigError::Conflict {
            key,
            value: raw.to_string(),
            reason: format!(
                "listener {name} has no security protocol in listener.security.protocol.map"
            ),
        }),
    }
}

/// The client listeners of `entries` (those not named in `controller.listener.names`), each
/// with its protocol and advertised address. Names must be distinct.
pub(super) fn client_listeners(
    values: &ConfigMap,
    entries: &[Entry],
    controller_names: &[String],
    to_address: impl Fn(&str, u16) -> Result<SocketAddr, ConfigError>,
) -> Result<Vec<Listener>, ConfigError> {
    let raw = &values["listeners"];
    let map = protocol_map(values)?;
    let advertised = parse_entries("advertised.listeners", &values["advertised.listeners"])?;
    let mut listeners: Vec<Listener> = Vec::new();
    for entry in entries
        .iter()
        .filter(|e| !controller_names.contains(&e.name))
    {
        if listeners.iter().any(|l| l.name == entry.name) {
            return Err(ConfigError::Invalid {
                key: "listeners",
                value: raw.clone(),
            });
        }
        let protocol = protocol_of(&entry.name, &map, controller_names, "listeners", raw)?;
        let (advertised_host, advertised_port) = advertised
            .iter()
            .find(|a| a.name == entry.name)
            .map_or((entry.host.clone(), entry.port), |a| {
                (a.host.clone(), a.port)
            });
        let tls = match protocol.uses_tls() {
            true => Some(tls::settings(values, &entry.name)?),
            false => None,
        };
        let sasl = match protocol.uses_sasl() {
            true => Some(super::sasl::settings(values, &entry.name)?),
            false => None,
        };
        listeners.push(Listener {
            name: entry.name.clone(),
            address: to_address(&entry.host, entry.port)?,
            protocol,
            advertised_host,
            advertised_port,
            tls,
            sasl,
        });
    }
    if let Some(stray) = advertised.iter().find(|a| {
        !controller_names.contains(&a.name) && !listeners.iter().any(|l| l.name == a.name)
    }) {
        return Err(ConfigError::Conflict {
            key: "advertised.listeners",
            value: values["advertised.listeners"].clone(),
            reason: format!("{} is not one of the names in listeners", stray.name),
        });
    }
    Ok(listeners)
}

/// The listener brokers replicate over: `inter.broker.listener.name`, else the listener
/// named after `security.inter.broker.protocol` (PLAINTEXT by default), as Kafka picks it;
/// a node with one client listener and neither key set uses that one (Kafka would refuse
/// to start; a single SSL listener is a common test broker).
pub(super) fn inter_broker_index(
    values: &ConfigMap,
    listeners: &[Listener],
) -> Result<usize, ConfigError> {
    let named = values
        .get("inter.broker.listener.name")
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty());
    let by_protocol = values
        .get("security.inter.broker.protocol")
        .map(|p| p.trim().to_ascii_uppercase())
        .filter(|p| !p.is_empty());
    let (key, name) = match (named, by_protocol) {
        (Some(name), _) => ("inter.broker.listener.name", name),
        (None, None) if listeners.len() == 1 => return Ok(0),
        (None, protocol) => (
            "security.inter.broker.protocol",
            protocol.unwrap_or_else(|| "PLAINTEXT".to_string()),
        ),
    };
    listeners
        .iter()
        .position(|l| l.name == name)
        .ok_or_else(|| ConfigError::Conflict {
            key,
            value: name.clone(),
            reason: "no listener of `listeners` has that name (set inter.broker.listener.name \
                     to one of them)"
                .into(),
        })
}

#[cfg(test)]
mod tests {
    use crate::config::{BrokerConfig, ConfigError, ConfigMap, SecurityProtocol};

    fn config(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        let map: ConfigMap = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::from_map(map)
    }

    #[test]
    fn named_listeners_take_their_protocol_and_advertised_address_by_name() {
        let config = config(&[
            (
                "listeners",
                "INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093",
            ),
            (
                "listener.security.protocol.map",
                "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            ),
            ("advertised.listeners", "EXTERNAL://kafka.example:19093"),
            ("inter.broker.listener.name", "internal"),
        ])
        .expect("config");
        let seen: Vec<(&str, SecurityProtocol, &str, u16)> = config
            .listeners
            .iter()
            .map(|l| {
                let host = l.advertised_host.as_str();
                (l.name.as_str(), l.protocol, host, l.advertised_port)
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                ("INTERNAL", SecurityProtocol::Plaintext, "127.0.0.1", 9092),
                (
                    "EXTERNAL",
                    SecurityProtocol::Plaintext,
                    "kafka.example",
                    19093
                ),
            ]
        );
        assert_eq!(config.inter_broker_listener, "INTERNAL");
        assert_eq!(config.listener.port(), 9092);
        assert_eq!(
            (config.advertised_host.as_str(), config.advertised_port),
            ("127.0.0.1", 9092)
        );
    }

    #[test]
    fn the_inter_broker_listener_must_exist_when_there_are_several() {
        let two = (
            "listeners",
            "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
        );
        let map = (
            "listener.security.protocol.map",
            "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        );
        let refused = config(&[two, map]).expect_err("no PLAINTEXT listener");
        assert!(
            refused
                .to_string()
                .contains("security.inter.broker.protocol"),
            "{refused}"
        );
        let refused =
            config(&[two, map, ("inter.broker.listener.name", "OTHER")]).expect_err("unknown");
        assert!(
            refused.to_string().contains("inter.broker.listener.name"),
            "{refused}"
        );
        let one = config(&[("listeners", "INTERNAL://127.0.0.1:9092"), map]).expect("one");
        assert_eq!(one.inter_broker_listener, "INTERNAL");
    }

    #[test]
    fn a_secured_inter_broker_listener_needs_client_settings_only_where_there_are_other_brokers() {
        let ssl = ("listeners", "SSL://127.0.0.1:9093");
        let keystore = ("ssl.keystore.location", "/broker.pem");
        let single = config(&[ssl, keystore]).expect("a lone SSL listener on one node");
        assert_eq!(single.inter_broker_listener, "SSL");
        assert_eq!(
            single.inter_broker_client.tls, None,
            "never connects to itself"
        );
        let cluster = [
            (
                "listeners",
                "SSL://127.0.0.1:9093,CONTROLLER://127.0.0.1:9193",
            ),
            keystore,
            (
                "controller.quorum.voters",
                "1@127.0.0.1:9193,2@127.0.0.1:9194",
            ),
        ];
        match config(&cluster) {
            Err(ConfigError::Unenforced { key, .. }) => {
                assert_eq!(key, "listener.name.ssl.ssl.truststore.location")
            }
            other => panic!("{other:?}"),
        }
        let trusted = [&cluster[..], &[("ssl.truststore.location", "/ca.pem")]].concat();
        let client = config(&trusted).expect("trusted").inter_broker_client;
        let tls = client.tls.expect("TLS to the other brokers");
        assert!(tls.verify_host, "Kafka's default checks host names");
        assert_eq!(client.sasl, None);
    }

    #[test]
    fn listener_names_are_distinct_and_advertised_names_are_listeners() {
        let twice = (
            "listeners",
            "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093",
        );
        assert!(config(&[twice]).is_err());
        let stray = ("advertised.listeners", "OTHER://h:1");
        let refused = config(&[("listeners", "PLAINTEXT://127.0.0.1:9092"), stray])
            .expect_err("stray advertised listener");
        assert!(
            refused.to_string().contains("advertised.listeners"),
            "{refused}"
        );
        let unmapped = ("listeners", "EXTERNAL://127.0.0.1:9092");
        let refused = config(&[unmapped]).expect_err("no protocol");
        assert!(refused.to_string().contains("EXTERNAL"), "{refused}");
    }
}
