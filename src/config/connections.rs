//! The keys that bound what clients may make the broker hold, after Kafka's
//! `SocketServerConfigs`: `queued.max.request.bytes` (request bytes read but not yet
//! answered, broker-wide), `max.connections`, `max.connections.per.ip`,
//! `max.connections.per.ip.overrides` and `connections.max.idle.ms`.
//!
//! Must not: know about sockets; the server enforces these values.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::{parse, ConfigError, ConfigMap};

/// `connections.max.idle.ms`: how long a connection may go without a request (`None`:
/// forever, when negative, as in Kafka).
pub fn max_idle(values: &ConfigMap) -> Result<Option<std::time::Duration>, ConfigError> {
    let ms: i64 = parse(values, "connections.max.idle.ms")?;
    Ok(u64::try_from(ms).ok().map(std::time::Duration::from_millis))
}

/// The connection limits of the client listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// `max.connections`: the listener's connections at once.
    pub connections_max: usize,
    /// `max.connections.per.ip`: connections at once from one address.
    pub connections_per_ip_max: usize,
    /// `max.connections.per.ip.overrides` (`ip:count,…`): per-address exceptions.
    pub per_ip_overrides: BTreeMap<IpAddr, usize>,
}

/// `queued.max.request.bytes`: `None` when unbounded (a value <= 0, as in Kafka). Kafka's
/// rule holds: a bound must admit the largest request (`socket.request.max.bytes`).
pub fn queued_max_request_bytes(
    values: &ConfigMap,
    socket_request_max_bytes: usize,
) -> Result<Option<usize>, ConfigError> {
    let key = "queued.max.request.bytes";
    let bytes: i64 = parse(values, key)?;
    if bytes <= 0 {
        return Ok(None);
    }
    let bytes = usize::try_from(bytes).map_err(|_| ConfigError::Invalid {
        key,
        value: bytes.to_string(),
    })?;
    if bytes < socket_request_max_bytes {
        return Err(ConfigError::Conflict {
            key,
            value: bytes.to_string(),
            reason: format!(
                "must be at least socket.request.max.bytes ({socket_request_max_bytes}) or -1"
            ),
        });
    }
    Ok(Some(bytes))
}

/// Reads `max.connections`, `max.connections.per.ip` and its overrides.
pub fn connection_limits(values: &ConfigMap) -> Result<ConnectionLimits, ConfigError> {
    let limits = ConnectionLimits {
        connections_max: parse(values, "max.connections")?,
        connections_per_ip_max: parse(values, "max.connections.per.ip")?,
        per_ip_overrides: parse_overrides(&values["max.connections.per.ip.overrides"])?,
    };
    if limits.connections_per_ip_max == 0 && limits.per_ip_overrides.is_empty() {
        return Err(ConfigError::Conflict {
            key: "max.connections.per.ip",
            value: "0".into(),
            reason: "0 only with max.connections.per.ip.overrides set".into(),
        });
    }
    Ok(limits)
}

/// Parses `ip:count,ip:count`. Kafka also takes host names and resolves them; highwater
/// takes IP addresses only and refuses a name rather than ignore it.
fn parse_overrides(raw: &str) -> Result<BTreeMap<IpAddr, usize>, ConfigError> {
    let invalid = || ConfigError::Invalid {
        key: "max.connections.per.ip.overrides",
        value: raw.to_string(),
    };
    let mut overrides = BTreeMap::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (ip, count) = entry.rsplit_once(':').ok_or_else(invalid)?;
        let ip = ip.trim().trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = ip.parse().map_err(|_| invalid())?;
        let count: usize = count.trim().parse().map_err(|_| invalid())?;
        overrides.insert(ip, count);
    }
    Ok(overrides)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> ConfigMap {
        let mut map: ConfigMap = super::super::BROKER_DEFAULTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        map
    }

    #[test]
    fn the_request_byte_budget_is_bounded_by_default() {
        // Goal: highwater's default is a bound (Kafka's -1 is not), and -1 still unbounds.
        let bound = queued_max_request_bytes(&values(&[]), 100 << 20).expect("valid");
        assert_eq!(bound, Some(256 << 20));
        let unbounded = values(&[("queued.max.request.bytes", "-1")]);
        assert_eq!(
            queued_max_request_bytes(&unbounded, 100 << 20).expect("ok"),
            None
        );
    }

    #[test]
    fn a_budget_below_the_largest_request_is_refused() {
        // Goal: Kafka's rule queued.max.request.bytes >= socket.request.max.bytes.
        let small = values(&[("queued.max.request.bytes", "1024")]);
        let error = queued_max_request_bytes(&small, 2048).expect_err("refused");
        assert!(
            error.to_string().contains("socket.request.max.bytes"),
            "{error}"
        );
    }

    #[test]
    fn per_ip_overrides_parse_ipv4_and_ipv6_and_refuse_names() {
        // Goal: `ip:count` entries are read exactly; a host name is an error, not ignored.
        let map = values(&[("max.connections.per.ip.overrides", "127.0.0.1:5, [::1]:7")]);
        let limits = connection_limits(&map).expect("valid");
        assert_eq!(limits.per_ip_overrides.len(), 2);
        assert_eq!(
            limits.per_ip_overrides[&"::1".parse::<IpAddr>().expect("ip")],
            7
        );
        let named = values(&[("max.connections.per.ip.overrides", "broker1:5")]);
        assert!(connection_limits(&named).is_err());
    }

    #[test]
    fn a_zero_per_ip_limit_needs_overrides() {
        // Goal: Kafka's rule that max.connections.per.ip = 0 requires overrides.
        let zero = values(&[("max.connections.per.ip", "0")]);
        assert!(connection_limits(&zero).is_err());
    }
}
