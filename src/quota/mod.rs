//! Client quotas enforced, as Kafka's ClientQuotaManager and ClientRequestQuotaManager
//! enforce them (KIP-13, KIP-124, KIP-219): a client's produced bytes, fetched bytes and
//! request handling time are counted per user and/or client id — whichever the quota that
//! applies names (`ClientQuotas::tags`) — over sliding windows ([`rate::Rate`]); a client
//! over its bound is told how long to back off (`throttle_time_ms`) and its connection is
//! not read for that long. Nothing is counted while no quota of the kind is set. Topic and
//! partition creations and deletions are counted against the controller mutation quota
//! (KIP-599) in a [`token_bucket::TokenBucket`] instead.

pub mod rate;
pub mod token_bucket;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::metadata::client_quotas::{
    ClientQuotas, QuotaTags, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
};
use rate::{Rate, Windows, DEFAULT_WINDOWS};
use token_bucket::TokenBucket;

/// Rates kept before idle ones are forgotten.
const RATES_BEFORE_SWEEP: usize = 1024;

/// Who a request's usage is counted for: the principal's name (`User:` left out, as Kafka's
/// quota user is) and the client id.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    pub user: &'a str,
    pub client_id: &'a str,
}

impl<'a> Client<'a> {
    /// The client behind `principal` (`User:alice`) and `client_id`.
    pub fn new(principal: &'a str, client_id: Option<&'a str>) -> Client<'a> {
        let user = principal.strip_prefix("User:").unwrap_or(principal);
        Client {
            user,
            client_id: client_id.unwrap_or(""),
        }
    }
}

/// How one client's usage of a quota is measured.
pub trait Usage {
    fn new(windows: Windows) -> Self;
    /// Whether the usage no longer counts (it can be forgotten).
    fn is_idle(&mut self, now_ms: u64) -> bool;
}

impl Usage for Rate {
    fn new(windows: Windows) -> Self {
        Rate::new(windows)
    }
    fn is_idle(&mut self, now_ms: u64) -> bool {
        Rate::is_idle(self, now_ms)
    }
}

impl Usage for TokenBucket {
    fn new(windows: Windows) -> Self {
        TokenBucket::new(windows)
    }
    fn is_idle(&mut self, now_ms: u64) -> bool {
        TokenBucket::is_idle(self, now_ms)
    }
}

/// The usage of one quota key by every client.
#[derive(Debug)]
pub struct QuotaManager<U = Rate> {
    key: &'static str,
    windows: Windows,
    /// Longest throttle answered (the request quota's is one window, as Kafka's).
    max_throttle_ms: Option<u64>,
    started: Instant,
    rates: Mutex<HashMap<QuotaTags, U>>,
}

impl<U: Usage> QuotaManager<U> {
    fn new(key: &'static str, max_throttle_ms: Option<u64>) -> QuotaManager<U> {
        QuotaManager {
            key,
            windows: DEFAULT_WINDOWS,
            max_throttle_ms,
            started: Instant::now(),
            rates: Mutex::new(HashMap::new()),
        }
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Whether any quota of this kind is set.
    pub fn enabled(&self, quotas: &ClientQuotas) -> bool {
        quotas.any(self.key)
    }

    /// Runs `f` on `client`'s rate and bound, when a quota bounds it.
    fn with_rate<T>(
        &self,
        quotas: &ClientQuotas,
        client: Client<'_>,
        f: impl FnOnce(&mut U, f64, u64) -> T,
    ) -> Option<T> {
        if !quotas.any(self.key) {
            return None;
        }
        let tags = quotas.tags(self.key, client.user, client.client_id);
        let bound = quotas.limit(self.key, &tags)?;
        let now = self.now_ms();
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        if rates.len() >= RATES_BEFORE_SWEEP && !rates.contains_key(&tags) {
            rates.retain(|_, rate| !rate.is_idle(now));
        }
        let rate = rates.entry(tags).or_insert_with(|| U::new(self.windows));
        Some(f(rate, bound, now))
    }
}

impl QuotaManager<Rate> {
    /// Counts `value` for `client` and answers how long it must back off (0 within quota).
    pub fn record(&self, quotas: &ClientQuotas, client: Client<'_>, value: f64) -> u64 {
        let throttle = self.with_rate(quotas, client, |rate, bound, now| {
            rate.record(value, now);
            rate.throttle_ms(bound, now)
        });
        let throttle = throttle.unwrap_or(0);
        self.max_throttle_ms
            .map_or(throttle, |max| throttle.min(max))
    }

    /// Takes back `value` counted for `client` (a throttled fetch sends nothing).
    pub fn unrecord(&self, quotas: &ClientQuotas, client: Client<'_>, value: f64) {
        self.with_rate(quotas, client, |rate, _, now| rate.record(-value, now));
    }

    /// The most a client can take at once without being throttled for sure (Kafka caps a
    /// consumer's fetch at this): its bound over all windows but the current one.
    pub fn max_value_in_window(&self, quotas: &ClientQuotas, client: Client<'_>) -> Option<f64> {
        let windows = self.windows;
        self.with_rate(quotas, client, |_, bound, _| {
            bound * f64::from(windows.samples - 1) * windows.window_ms as f64 / 1000.0
        })
    }
}

impl QuotaManager<TokenBucket> {
    /// How long `client` must wait before it may mutate again (0: it may now).
    pub fn exceeded_ms(&self, quotas: &ClientQuotas, client: Client<'_>) -> u64 {
        let throttle = self.with_rate(quotas, client, |bucket, rate, now| {
            bucket.throttle_ms(rate, now)
        });
        throttle.unwrap_or(0)
    }

    /// Takes `permits` (partitions created or deleted) from `client`'s tokens and answers
    /// how long it must now wait (0 while tokens are left).
    pub fn take(&self, quotas: &ClientQuotas, client: Client<'_>, permits: f64) -> u64 {
        let throttle = self.with_rate(quotas, client, |bucket, rate, now| {
            bucket.record(permits, rate, now);
            bucket.throttle_ms(rate, now)
        });
        throttle.unwrap_or(0)
    }
}

/// Every client quota a broker enforces.
#[derive(Debug)]
pub struct Quotas {
    /// Bytes of Produce requests (`producer_byte_rate`).
    pub produce: QuotaManager,
    /// Record bytes of Fetch responses to consumers (`consumer_byte_rate`).
    pub fetch: QuotaManager,
    /// Time handling requests, in percent of one thread (`request_percentage`).
    pub request: QuotaManager,
    /// Partitions created or deleted (`controller_mutation_rate`).
    pub controller_mutation: QuotaManager<TokenBucket>,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            produce: QuotaManager::new(PRODUCER_BYTE_RATE, None),
            fetch: QuotaManager::new(CONSUMER_BYTE_RATE, None),
            request: QuotaManager::new(REQUEST_PERCENTAGE, Some(DEFAULT_WINDOWS.window_ms)),
            controller_mutation: QuotaManager::new(CONTROLLER_MUTATION_RATE, None),
        }
    }
}

/// Handling time as Kafka's request quota counts it: percent of one thread for a second.
pub fn request_percentage(handling: std::time::Duration) -> f64 {
    handling.as_secs_f64() * 100.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::client_quotas::{EntityName, QuotaChange, QuotaEntity};

    fn quotas(key: &str, value: f64) -> ClientQuotas {
        let mut quotas = ClientQuotas::default();
        quotas.apply(&QuotaChange {
            entity: QuotaEntity {
                client_id: Some(EntityName::Default),
                ..QuotaEntity::default()
            },
            key: key.to_string(),
            value: Some(value),
        });
        quotas
    }

    #[test]
    fn a_client_over_its_byte_rate_is_throttled_and_others_are_not() {
        let manager: QuotaManager = QuotaManager::new(PRODUCER_BYTE_RATE, None);
        let quotas = quotas(PRODUCER_BYTE_RATE, 1000.0);
        let app = Client::new("User:ANONYMOUS", Some("app"));
        assert_eq!(manager.record(&quotas, app, 5_000.0), 0);
        // 15,000 over 10 s is 1,500/s: 5 s to get back to 1,000/s.
        assert_eq!(manager.record(&quotas, app, 10_000.0), 5_000);
        let other = Client::new("User:ANONYMOUS", Some("other"));
        assert_eq!(manager.record(&quotas, other, 5_000.0), 0);
        assert_eq!(manager.max_value_in_window(&quotas, app), Some(10_000.0));
    }

    #[test]
    fn nothing_is_counted_without_a_quota_and_request_throttles_are_capped() {
        let manager: QuotaManager = QuotaManager::new(REQUEST_PERCENTAGE, Some(1000));
        let none = ClientQuotas::default();
        let app = Client::new("User:alice", Some("app"));
        assert_eq!(manager.record(&none, app, 1e9), 0);
        assert!(manager.rates.lock().expect("rates").is_empty());
        let quotas = quotas(REQUEST_PERCENTAGE, 10.0);
        assert_eq!(manager.record(&quotas, app, 1e6), 1000);
    }
}
