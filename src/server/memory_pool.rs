//! The broker-wide budget of request bytes read from sockets but not yet answered
//! (`queued.max.request.bytes`, after Kafka's `MemoryPool` in `SocketServer`). A reader
//! takes a frame's length from the pool before reading its body and gives it back when the
//! request has been answered; while the pool cannot cover a frame, that connection is not
//! read from (the kernel's socket buffers then push back on the client), and it is never
//! closed for it.
//!
//! Like Kafka's pool, admission is not first-come-first-served: a small frame that fits is
//! admitted even while a large one waits, so control traffic keeps flowing. Beyond Kafka,
//! frames larger than [`SMALL_FRAME_BYTES_MAX`] may not take the last
//! `capacity / RESERVE_DIVISOR` bytes (unless the pool is otherwise empty, so any frame up
//! to the capacity is admitted eventually): clients stalled in the middle of large frames
//! cannot starve ApiVersions, Metadata or an ordinary produce.
//!
//! Thread safety: lock-free (one atomic counter); waiters are woken by a `Notify`.
//! Invariant: `0 <= available <= capacity`, and `capacity - available` is the sum of the
//! bytes held by live [`PoolPermit`]s.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Frames up to this size (a produce of one `message.max.bytes` batch with its headers)
/// may use the pool's reserve.
pub const SMALL_FRAME_BYTES_MAX: usize = 2 * 1024 * 1024;
/// The fraction of the pool (1 / this) that larger frames leave free for small ones.
pub const RESERVE_DIVISOR: usize = 8;

/// A pool of request bytes: broker-wide (shared by every connection of a listener, with a
/// reserve for small frames) or one connection's own (no reserve).
#[derive(Debug)]
pub struct MemoryPool {
    /// `None`: unbounded (`queued.max.request.bytes` <= 0, Kafka's `MemoryPool.NONE`).
    capacity: Option<usize>,
    /// Bytes that frames above [`SMALL_FRAME_BYTES_MAX`] must leave free.
    reserve_bytes: usize,
    available: AtomicUsize,
    freed: Notify,
}

/// Bytes taken from a [`MemoryPool`]; given back when dropped.
#[derive(Debug)]
pub struct PoolPermit {
    pool: Arc<MemoryPool>,
    bytes: usize,
}

impl MemoryPool {
    /// The broker-wide pool of `capacity` bytes (an unbounded one for `None`), keeping
    /// `capacity / RESERVE_DIVISOR` for small frames.
    pub fn new(capacity: Option<usize>) -> Arc<MemoryPool> {
        let reserve_bytes = capacity.map_or(0, |c| c / RESERVE_DIVISOR);
        Self::with_reserve(capacity, reserve_bytes)
    }

    /// One connection's pool: `capacity` bytes, first come first served, no reserve.
    pub fn per_connection(capacity: usize) -> Arc<MemoryPool> {
        Self::with_reserve(Some(capacity), 0)
    }

    fn with_reserve(capacity: Option<usize>, reserve_bytes: usize) -> Arc<MemoryPool> {
        Arc::new(MemoryPool {
            capacity,
            reserve_bytes,
            available: AtomicUsize::new(capacity.unwrap_or(0)),
            freed: Notify::new(),
        })
    }

    /// Bytes not held by any permit (`None` for an unbounded pool).
    pub fn available(&self) -> Option<usize> {
        self.capacity
            .map(|_| self.available.load(Ordering::Acquire))
    }

    /// Waits until `bytes` can be taken, then takes them. Callers cap `bytes` at the
    /// capacity first (`queued.max.request.bytes >= socket.request.max.bytes` is checked
    /// when the config is read), so every request is admitted once the pool drains.
    pub async fn acquire(self: &Arc<Self>, bytes: usize) -> PoolPermit {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check, so a release between check and await wakes us.
            freed.as_mut().enable();
            if let Some(permit) = self.try_acquire(bytes) {
                return permit;
            }
            freed.await;
        }
    }

    /// Takes `bytes` if the admission rule allows it now.
    pub fn try_acquire(self: &Arc<Self>, bytes: usize) -> Option<PoolPermit> {
        let Some(capacity) = self.capacity else {
            return Some(self.permit(0));
        };
        let reserve = if bytes > SMALL_FRAME_BYTES_MAX {
            self.reserve_bytes
        } else {
            0
        };
        let mut available = self.available.load(Ordering::Acquire);
        loop {
            let fits = available >= bytes.saturating_add(reserve)
                || (available == capacity && bytes <= capacity);
            if !fits {
                return None;
            }
            match self.available.compare_exchange_weak(
                available,
                available - bytes,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(self.permit(bytes)),
                Err(now) => available = now,
            }
        }
    }

    fn permit(self: &Arc<Self>, bytes: usize) -> PoolPermit {
        PoolPermit {
            pool: Arc::clone(self),
            bytes,
        }
    }
}

impl PoolPermit {
    /// Bytes this permit holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for PoolPermit {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let before = self.pool.available.fetch_add(self.bytes, Ordering::AcqRel);
        debug_assert!(
            self.pool.capacity.is_some_and(|c| before + self.bytes <= c),
            "a permit returned more than was taken"
        );
        self.pool.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn bytes_return_to_the_pool_when_the_permit_drops() {
        // Goal: accounting is exact. Method: take, check, drop, check.
        let pool = MemoryPool::new(Some(64 * MIB));
        let permit = pool.try_acquire(10 * MIB).expect("fits");
        assert_eq!(pool.available(), Some(54 * MIB));
        drop(permit);
        assert_eq!(pool.available(), Some(64 * MIB));
    }

    #[test]
    fn a_large_frame_leaves_the_reserve_to_small_ones() {
        // Goal: large frames cannot take the last capacity/8 bytes; small ones can.
        let pool = MemoryPool::new(Some(64 * MIB));
        let first = pool.try_acquire(40 * MIB).expect("pool empty");
        assert!(
            pool.try_acquire(20 * MIB).is_none(),
            "would eat the reserve"
        );
        let small = pool.try_acquire(SMALL_FRAME_BYTES_MAX).expect("small fits");
        drop((first, small));
        assert!(pool.try_acquire(20 * MIB).is_some());
    }

    #[test]
    fn a_frame_as_large_as_the_pool_is_admitted_when_the_pool_is_empty() {
        // Goal: the reserve never makes a legal frame wait for ever.
        let pool = MemoryPool::new(Some(64 * MIB));
        let whole = pool.try_acquire(64 * MIB).expect("empty pool admits it");
        assert!(pool.try_acquire(1).is_none(), "nothing left");
        drop(whole);
        assert_eq!(pool.available(), Some(64 * MIB));
    }

    #[test]
    fn a_connection_pool_has_no_reserve() {
        // Goal: one connection's budget is plain: large frames fill it to the last byte.
        let pool = MemoryPool::per_connection(16 * MIB);
        let first = pool.try_acquire(10 * MIB).expect("empty");
        let second = pool.try_acquire(6 * MIB).expect("fits exactly, no reserve");
        assert!(pool.try_acquire(1).is_none(), "full");
        drop((first, second));
    }

    #[test]
    fn an_unbounded_pool_admits_everything() {
        // Goal: queued.max.request.bytes <= 0 keeps Kafka's meaning (no bound).
        let pool = MemoryPool::new(None);
        assert!(pool.try_acquire(usize::MAX).is_some());
        assert_eq!(pool.available(), None);
    }

    #[tokio::test]
    async fn a_waiting_reader_is_woken_when_bytes_are_freed() {
        // Goal: acquire waits while the pool is full and resumes on release.
        let pool = MemoryPool::new(Some(8 * MIB));
        let held = pool.try_acquire(8 * MIB).expect("empty");
        let waiter = tokio::spawn({
            let pool = Arc::clone(&pool);
            async move { pool.acquire(MIB).await.bytes() }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "pool is full");
        drop(held);
        let woken = tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await;
        assert_eq!(woken.expect("woken").expect("join"), MIB);
    }
}
