//! Limits on the number of client connections, after Kafka's `ConnectionQuotas`:
//! `max.connections` for the listener (when reached, the accept loop waits for a connection
//! to close; pending clients wait in the kernel's backlog) and `max.connections.per.ip`
//! with `max.connections.per.ip.overrides` (a connection past its address's limit is
//! accepted and closed at once, logged with the address).
//!
//! The limits are dynamic broker configs: [`ConnectionQuotas::set_limits`] applies new
//! ones to the next connections (open ones stay open, as in Kafka).
//!
//! Thread safety: the per-address counts and the limits sit behind `std::sync::Mutex`es
//! held only for a map update or a read, never across an `.await`; the listener's count
//! and maximum sit in one watch channel, changed atomically.
//! Invariant: the count of an address equals its live [`IpSlot`]s; zero counts are removed;
//! the listener's count equals its live [`ListenerSlot`]s.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

pub use crate::config::ConnectionLimits;

/// The listener's open connections and `max.connections`.
#[derive(Debug, Clone, Copy)]
struct Occupancy {
    open: usize,
    max: usize,
}

/// Counts the connections of one listener.
#[derive(Debug)]
pub struct ConnectionQuotas {
    limits: Mutex<ConnectionLimits>,
    occupancy: Arc<watch::Sender<Occupancy>>,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection counted against `max.connections`; the slot frees when dropped.
#[derive(Debug)]
pub struct ListenerSlot(Arc<watch::Sender<Occupancy>>);

impl Drop for ListenerSlot {
    fn drop(&mut self) {
        self.0.send_modify(|o| o.open -= 1);
    }
}

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
        let occupancy = Occupancy {
            open: 0,
            max: limits.connections_max,
        };
        Arc::new(ConnectionQuotas {
            limits: Mutex::new(limits),
            occupancy: Arc::new(watch::Sender::new(occupancy)),
            per_ip: Mutex::new(HashMap::new()),
        })
    }

    /// Applies new limits to the connections accepted from now on (a lower maximum closes
    /// none: the listener accepts again once enough have closed).
    pub fn set_limits(&self, limits: ConnectionLimits) {
        let max = limits.connections_max;
        *self.limits.lock().unwrap_or_else(PoisonError::into_inner) = limits;
        self.occupancy.send_modify(|o| o.max = max);
    }

    /// Whether `max.connections` is reached (the next accept would wait).
    pub fn listener_full(&self) -> bool {
        let o = *self.occupancy.borrow();
        o.open >= o.max
    }

    /// Waits for a free `max.connections` slot.
    pub async fn listener_slot(&self) -> ListenerSlot {
        let mut changes = self.occupancy.subscribe();
        loop {
            let taken = self.occupancy.send_if_modified(|o| {
                let free = o.open < o.max;
                if free {
                    o.open += 1;
                }
                free
            });
            if taken {
                return ListenerSlot(Arc::clone(&self.occupancy));
            }
            // The sender lives as long as `self`: this wait ends with a change.
            let _ = changes.wait_for(|o| o.open < o.max).await;
        }
    }

    /// Completes once more connections are counted than `max.connections` allows (it was
    /// lowered while they were open).
    pub async fn over_limit(&self) {
        let mut changes = self.occupancy.subscribe();
        let _ = changes.wait_for(|o| o.open > o.max).await;
    }

    /// The connection limit of `ip` (its override, or `max.connections.per.ip`).
    pub fn per_ip_max(&self, ip: IpAddr) -> usize {
        let limits = self.limits.lock().unwrap_or_else(PoisonError::into_inner);
        limits
            .per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(limits.connections_per_ip_max)
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

    #[tokio::test]
    async fn a_new_maximum_applies_to_the_next_connections() {
        // Goal: max.connections changed live (a dynamic broker config): lowered, the open
        // connections stay and the next waits; raised, it is admitted at once.
        let quotas = ConnectionQuotas::new(ConnectionLimits {
            connections_max: 2,
            connections_per_ip_max: 10,
            per_ip_overrides: Default::default(),
        });
        let a = quotas.listener_slot().await;
        let _b = quotas.listener_slot().await;
        assert!(quotas.listener_full());
        let mut limits = quotas.limits.lock().expect("limits").clone();
        limits.connections_max = 1;
        quotas.set_limits(limits.clone());
        drop(a);
        assert!(quotas.listener_full(), "one open, maximum one");
        let waiting = {
            let quotas = Arc::clone(&quotas);
            tokio::spawn(async move { quotas.listener_slot().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        limits.connections_max = 3;
        quotas.set_limits(limits);
        let _c = waiting.await.expect("admitted once raised");
        assert!(!quotas.listener_full(), "two open, maximum three");
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
