//! Time, read in one place. A broker reads the system clock; the replication simulator
//! gives its brokers a clock that only moves when the test moves it, so that follower lag,
//! ISR shrinks and every other time-driven decision replay exactly from a seed. Code in
//! the replica, fetcher and controller paths takes a [`Clock`] (or the time it read from
//! one) instead of reading the system clock itself.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Milliseconds since the Unix epoch, from the system clock (record timestamps and the
/// places that have no [`Clock`] to hand: the storage layer, the coordinators).
pub fn system_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A source of time: the system's, or one moved by hand.
#[derive(Clone, Debug)]
pub struct Clock(Source);

#[derive(Clone, Debug)]
enum Source {
    System { started: Instant },
    Manual(Arc<AtomicI64>),
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock(Source::System {
            started: Instant::now(),
        })
    }

    /// A clock that reads `start_ms` until [`Clock::advance`] moves it; its copies share it.
    pub fn manual(start_ms: i64) -> Clock {
        Clock(Source::Manual(Arc::new(AtomicI64::new(start_ms))))
    }

    /// Wall-clock milliseconds since the Unix epoch (timestamps, and follower lag as Kafka
    /// measures it).
    pub fn now_ms(&self) -> i64 {
        match &self.0 {
            Source::System { .. } => system_now_ms(),
            Source::Manual(now) => now.load(Ordering::SeqCst),
        }
    }

    /// Milliseconds that never go back (a wall clock set back does not move them): for
    /// session timeouts. Only differences between two readings mean anything.
    pub fn monotonic_ms(&self) -> i64 {
        match &self.0 {
            Source::System { started } => started.elapsed().as_millis() as i64,
            Source::Manual(now) => now.load(Ordering::SeqCst),
        }
    }

    /// Moves a manual clock `ms` on (never back); the system clock moves on its own and
    /// is left as it is.
    pub fn advance(&self, ms: i64) {
        if let Source::Manual(now) = &self.0 {
            now.fetch_add(ms.max(0), Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced_and_its_copies_share_it() {
        let clock = Clock::manual(1_000);
        let copy = clock.clone();
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance(250);
        assert_eq!(copy.now_ms(), 1_250);
        assert_eq!(copy.monotonic_ms(), 1_250);
        clock.advance(-5_000);
        assert_eq!(clock.now_ms(), 1_250, "a clock is never moved back");
    }

    #[test]
    fn the_system_clock_reads_the_wall_clock() {
        let clock = Clock::system();
        let before = system_now_ms();
        let now = clock.now_ms();
        assert!(now >= before && now - before < 60_000);
        clock.advance(3_600_000);
        assert!(
            clock.now_ms() - system_now_ms() < 60_000,
            "not moved by hand"
        );
        assert!(clock.monotonic_ms() >= 0);
    }
}
