//! A rate over sliding samples, as Kafka's `Rate` over a `SampledStat` measures quota
//! usage: values are summed into samples of one window each (at most `samples` kept), and
//! the rate is their sum over the time they cover — never less than `samples - 1` whole
//! windows, so a burst right after a quiet spell is not measured as a huge rate.

use std::collections::VecDeque;

/// The windows a rate is measured over (Kafka's `quota.window.num`, `quota.window.size.seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    pub samples: u32,
    pub window_ms: u64,
}

/// Kafka's defaults: 11 samples of one second.
pub const DEFAULT_WINDOWS: Windows = Windows {
    samples: 11,
    window_ms: 1000,
};

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: u64,
    value: f64,
}

/// One client's usage of one quota.
#[derive(Debug, Clone)]
pub struct Rate {
    windows: Windows,
    samples: VecDeque<Sample>,
}

impl Rate {
    pub fn new(windows: Windows) -> Rate {
        Rate {
            windows,
            samples: VecDeque::with_capacity(windows.samples as usize),
        }
    }

    /// Adds `value` at `now_ms` (negative to take back what was recorded).
    pub fn record(&mut self, value: f64, now_ms: u64) {
        self.purge(now_ms);
        let current = self
            .samples
            .back()
            .filter(|s| now_ms < s.start_ms + self.windows.window_ms);
        if current.is_none() {
            if self.samples.len() == self.windows.samples as usize {
                self.samples.pop_front();
            }
            self.samples.push_back(Sample {
                start_ms: now_ms,
                value: 0.0,
            });
        }
        if let Some(sample) = self.samples.back_mut() {
            sample.value += value;
        }
    }

    /// Drops the samples too old to count.
    fn purge(&mut self, now_ms: u64) {
        let age = u64::from(self.windows.samples) * self.windows.window_ms;
        while self
            .samples
            .front()
            .is_some_and(|s| now_ms.saturating_sub(s.start_ms) >= age)
        {
            self.samples.pop_front();
        }
    }

    /// Whether no sample counts any more (the rate can be forgotten).
    pub fn is_idle(&mut self, now_ms: u64) -> bool {
        self.purge(now_ms);
        self.samples.is_empty()
    }

    /// The time the samples cover, at least `samples - 1` windows and 1 ms.
    fn window_size_ms(&self, now_ms: u64) -> u64 {
        let oldest = self.samples.front().map_or(now_ms, |s| s.start_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / self.windows.window_ms;
        let min_full = u64::from(self.windows.samples.saturating_sub(1));
        if full < min_full {
            elapsed += (min_full - full) * self.windows.window_ms;
        }
        elapsed.max(1)
    }

    /// The rate per second at `now_ms`.
    pub fn measure(&mut self, now_ms: u64) -> f64 {
        self.purge(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total * 1000.0 / self.window_size_ms(now_ms) as f64
    }

    /// How long to wait, in ms, until the rate is back at `bound` if nothing more is
    /// recorded (Kafka's QuotaUtils.throttleTime: (O - T) / T × W); 0 within the bound.
    pub fn throttle_ms(&mut self, bound: f64, now_ms: u64) -> u64 {
        let observed = self.measure(now_ms);
        if observed <= bound {
            return 0;
        }
        ((observed - bound) / bound * self.window_size_ms(now_ms) as f64).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_counts_at_least_the_whole_windows_but_one() {
        let mut rate = Rate::new(DEFAULT_WINDOWS);
        rate.record(10_000.0, 0);
        // 10,000 over 10 s (10 windows counted even though only the first has passed).
        assert_eq!(rate.measure(0), 1000.0);
        assert_eq!(rate.throttle_ms(1000.0, 0), 0);
        // At 500/s: (1000 - 500) / 500 × 10 s = 10 s to get back under.
        assert_eq!(rate.throttle_ms(500.0, 0), 10_000);
    }

    #[test]
    fn old_samples_stop_counting() {
        let mut rate = Rate::new(DEFAULT_WINDOWS);
        rate.record(5_000.0, 0);
        rate.record(5_000.0, 5_000);
        assert_eq!(rate.measure(5_000), 1000.0);
        // At 11 s the first sample is 11 windows old.
        assert_eq!(rate.measure(11_000), 5000.0 / 10.0);
        rate.record(-5_000.0, 11_000);
        assert_eq!(rate.measure(11_000), 0.0);
        assert!(rate.is_idle(30_000));
    }

    #[test]
    fn at_most_the_configured_samples_are_kept() {
        let mut rate = Rate::new(Windows {
            samples: 2,
            window_ms: 100,
        });
        for t in 0..10 {
            rate.record(1.0, t * 100);
        }
        assert_eq!(rate.samples.len(), 2);
    }
}
