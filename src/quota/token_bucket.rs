//! A token bucket, as Kafka's `TokenBucket` measures the controller mutation quota
//! (KIP-599): it holds up to `samples × window` seconds' worth of the quota, is refilled at
//! the quota's rate, and each mutation takes as many tokens as partitions it creates or
//! deletes — going below zero, so that one large request is let through and the next ones
//! wait until the debt is paid back.

use super::rate::Windows;

/// One client's tokens.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    windows: Windows,
    /// Tokens at `updated_ms`; `None` before the first use (a new bucket is full).
    tokens: Option<f64>,
    updated_ms: u64,
    /// When the bucket is full again if nothing more is taken.
    full_at_ms: u64,
}

impl TokenBucket {
    pub fn new(windows: Windows) -> TokenBucket {
        TokenBucket {
            windows,
            tokens: None,
            updated_ms: 0,
            full_at_ms: 0,
        }
    }

    /// The most the bucket holds at `rate` per second.
    fn burst(&self, rate: f64) -> f64 {
        f64::from(self.windows.samples) * self.windows.window_ms as f64 / 1000.0 * rate
    }

    /// The tokens at `now_ms`, refilled at `rate` per second.
    pub fn tokens(&mut self, rate: f64, now_ms: u64) -> f64 {
        let burst = self.burst(rate);
        let elapsed = now_ms.saturating_sub(self.updated_ms) as f64 / 1000.0;
        let tokens = self
            .tokens
            .map_or(burst, |tokens| (tokens + rate * elapsed).min(burst));
        self.tokens = Some(tokens);
        self.updated_ms = now_ms;
        tokens
    }

    /// Takes `value` tokens at `now_ms` (the bucket may go below zero).
    pub fn record(&mut self, value: f64, rate: f64, now_ms: u64) {
        let tokens = self.tokens(rate, now_ms) - value;
        self.tokens = Some(tokens);
        let refill_ms = (self.burst(rate) - tokens).max(0.0) / rate * 1000.0;
        self.full_at_ms = now_ms.saturating_add(refill_ms.ceil() as u64);
    }

    /// How long, in ms, until the bucket is back at zero at `rate` (Kafka's
    /// ControllerMutationQuotaManager.throttleTimeMs); 0 when it is not below.
    pub fn throttle_ms(&mut self, rate: f64, now_ms: u64) -> u64 {
        let tokens = self.tokens(rate, now_ms);
        match tokens < 0.0 {
            true => (-tokens / rate * 1000.0).round() as u64,
            false => 0,
        }
    }

    /// Whether the bucket is full again (it can be forgotten).
    pub fn is_idle(&self, now_ms: u64) -> bool {
        now_ms >= self.full_at_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::rate::DEFAULT_WINDOWS;

    #[test]
    fn a_bucket_starts_full_goes_into_debt_and_is_refilled_at_the_rate() {
        let mut bucket = TokenBucket::new(DEFAULT_WINDOWS);
        // 2 per second: 22 tokens at most.
        assert_eq!(bucket.tokens(2.0, 5_000), 22.0);
        assert_eq!(bucket.throttle_ms(2.0, 5_000), 0);
        bucket.record(30.0, 2.0, 5_000);
        assert_eq!(bucket.tokens(2.0, 5_000), -8.0);
        // 8 tokens short at 2 per second: 4 s.
        assert_eq!(bucket.throttle_ms(2.0, 5_000), 4_000);
        assert_eq!(bucket.throttle_ms(2.0, 6_000), 3_000);
        assert_eq!(bucket.throttle_ms(2.0, 9_000), 0);
        assert!(!bucket.is_idle(9_000));
        // Full again 15 s after the debt: 30 tokens at 2 per second.
        assert!(bucket.is_idle(20_000));
        assert_eq!(bucket.tokens(2.0, 60_000), 22.0);
    }
}
