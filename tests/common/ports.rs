//! Free ports for the processes a test starts, chosen below the kernel's ephemeral range
//! (32768–60999 here) so that neither another listener on port 0 nor an outgoing
//! connection can take a port between the moment it is chosen and the moment the process
//! binds it — a port chosen by binding port 0 and closing it was taken so under parallel
//! tests, and a node exited with "Address already in use".
//!
//! Each test process draws from its own block of the range (by process id) and never hands
//! out the same port twice; a port something already listens on is skipped.

use std::sync::atomic::{AtomicU32, Ordering};

/// The range drawn from: above the well-known services, below the ephemeral range.
const FIRST: u32 = 12_000;
const LAST: u32 = 32_000;
/// Ports per test process before it wraps into the next process's block.
const BLOCK: u32 = 1_000;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A port on 127.0.0.1 nobody listens on, not handed out before by this process.
pub fn free_port() -> u16 {
    let span = LAST - FIRST;
    let start = (std::process::id() % (span / BLOCK)) * BLOCK;
    loop {
        let drawn = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(drawn < span, "no free port left in {FIRST}..{LAST}");
        let port = FIRST + (start + drawn) % span;
        let port = u16::try_from(port).expect("the range is below 65536");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}
