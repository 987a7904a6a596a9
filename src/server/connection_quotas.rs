//! Limits on the number of client connections, after Kafka's `ConnectionQuotas`:
//! `max.connections` for the listener (when reached, the accept loop waits for a connection
//! to close; pending clients wait in the kernel's backlog) and `max.connections.per.ip`
//! with `max.connections.per.ip.overrides` (a connection past its address's limit is
//! accepted and closed at once, logged with the address).
//!
//! Thread safety: the per-address counts sit behind a `std::sync::Mutex` held only for a
//! map update, never across an `.await`.
//! Invariant: the count of an address equals its live [`IpSlot`]s; zero counts are removed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use crate::config::ConnectionLimits;

/// Counts the connections of one listener.
#[derive(Debug)]
pub struct ConnectionQuotas {
    limits: ConnectionLimits,
    slots: Arc<Semaphore>,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection counted against `max.connections`; the slot frees when dropped.
#[derive(Debug)]
pub struct ListenerSlot(#[allow(dead_code)] OwnedSemaphorePermit);

/// One connection counted against its address's limit; freed when dropped.
#[derive(Debug)]
pub struct IpSlot {
    quotas: Arc<ConnectionQuotas>,
    ip: IpAddr,
}

/// A connection refused because its address already has its maximum.
#[derive(Debug, thiserror::Error)]
#[error("{ip} already has the configured maximum of {max} connections")]
pub struct TooManyConnections {
    pub ip: IpAddr,
    pub max: usize,
}

impl ConnectionQuotas {
    /// Quotas enforcing `limits`.
    pub fn new(limits: ConnectionLimits) -> Arc<ConnectionQuotas> {
        let slots = limits.connections_max.min(Semaphore::MAX_PERMITS);
        Arc::new(ConnectionQuotas {
            limits,
            slots: Arc::new(Semaphore::new(slots)),
            per_ip: Mutex::new(HashMap::new()),
        })
    }

    /// Whether `max.connections` is reached (the next accept would wait).
    pub fn listener_full(&self) -> bool {
        self.slots.available_permits() == 0
    }

    /// Waits for a free `max.connections` slot.
    pub async fn listener_slot(&self) -> ListenerSlot {
        match Arc::clone(&self.slots).acquire_owned().await {
            Ok(permit) => ListenerSlot(permit),
            // The semaphore is never closed; wait for ever rather than exceed the limit.
            Err(_) => std::future::pending().await,
        }
    }

    /// The connection limit of `ip` (its override, or `max.connections.per.ip`).
    pub fn per_ip_max(&self, ip: IpAddr) -> usize {
        self.limits
            .per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.limits.connections_per_ip_max)
    }

    /// Counts one more connection from `ip`, or refuses it when `ip` is at its limit.
    pub fn ip_slot(self: &Arc<Self>, ip: IpAddr) -> Result<IpSlot, TooManyConnections> {
        let max = self.per_ip_max(ip);
        let mut counts = self.per_ip.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(ip).or_insert(0);
        if *count >= max {
            if *count == 0 {
                counts.remove(&ip);
            }
            return Err(TooManyConnections { ip, max });
        }
        *count += 1;
        Ok(IpSlot {
            quotas: Arc::clone(self),
            ip,
        })
    }

    /// Live connections from `ip`.
    pub fn connections_from(&self, ip: IpAddr) -> usize {
        let counts = self.per_ip.lock().unwrap_or_else(PoisonError::into_inner);
        counts.get(&ip).copied().unwrap_or(0)
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut counts = self
            .quotas
            .per_ip
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.ip);
            }
        } else {
            debug_assert!(false, "an IpSlot outlived its count");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(per_ip: usize, overrides: &[(&str, usize)]) -> Arc<ConnectionQuotas> {
        ConnectionQuotas::new(ConnectionLimits {
            connections_max: 100,
            connections_per_ip_max: per_ip,
            per_ip_overrides: overrides
                .iter()
                .map(|(ip, n)| (ip.parse().expect("ip"), *n))
                .collect(),
        })
    }

    #[test]
    fn an_address_past_its_limit_is_refused_until_one_closes() {
        // Goal: the per-IP count is exact across refusals and closes.
        let quotas = quotas(2, &[]);
        let ip: IpAddr = "10.0.0.1".parse().expect("ip");
        let first = quotas.ip_slot(ip).expect("1 of 2");
        let _second = quotas.ip_slot(ip).expect("2 of 2");
        assert!(quotas.ip_slot(ip).is_err(), "third refused");
        drop(first);
        assert!(quotas.ip_slot(ip).is_ok(), "a slot freed");
    }

    #[test]
    fn an_override_replaces_the_default_for_its_address_only() {
        // Goal: max.connections.per.ip.overrides applies per address.
        let quotas = quotas(1, &[("10.0.0.2", 3)]);
        let other: IpAddr = "10.0.0.1".parse().expect("ip");
        let special: IpAddr = "10.0.0.2".parse().expect("ip");
        let _a = quotas.ip_slot(other).expect("1 of 1");
        assert!(quotas.ip_slot(other).is_err());
        let slots: Vec<_> = (0..3).map(|_| quotas.ip_slot(special)).collect();
        assert!(slots.iter().all(Result::is_ok), "3 of 3 for the override");
        assert!(quotas.ip_slot(special).is_err());
    }

    #[test]
    fn a_zero_limit_refuses_without_leaving_a_count() {
        // Goal: refusals do not leak entries in the per-address map.
        let quotas = quotas(0, &[]);
        let ip: IpAddr = "10.0.0.3".parse().expect("ip");
        assert!(quotas.ip_slot(ip).is_err());
        assert_eq!(quotas.connections_from(ip), 0);
    }
}
