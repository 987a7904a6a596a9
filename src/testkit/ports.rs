//! Ports for the nodes a test or `highwater dev` starts, chosen below the kernel's
//! ephemeral range (32768–60999 by default) so that neither another listener on port 0
//! nor an outgoing connection can take a port between the moment it is chosen and the
//! moment a node binds it — or binds it again when it restarts. Ports chosen by binding
//! port 0 and closing it were taken so under parallel tests, and a node failed to start
//! with "Address already in use".
//!
//! Each process draws from its own block of the range (by process id) and never hands out
//! the same port twice; a port something already listens on is skipped.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The range drawn from: above the well-known services, below the ephemeral range.
const FIRST: u32 = 12_000;
const LAST: u32 = 32_000;
/// Ports per process before it wraps into the next process's block.
const BLOCK: u32 = 1_000;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A listener on `host` at a port of the range not handed out before by this process.
pub fn listen(host: &str) -> std::io::Result<TcpListener> {
    let span = LAST - FIRST;
    let start = (std::process::id() % (span / BLOCK)) * BLOCK;
    loop {
        let drawn = NEXT.fetch_add(1, Ordering::Relaxed);
        if drawn >= span {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("no free port left in {FIRST}..{LAST}"),
            ));
        }
        let port = u16::try_from(FIRST + (start + drawn) % span).expect("below 65536");
        match TcpListener::bind((host, port)) {
            Ok(listener) => return Ok(listener),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A port on 127.0.0.1 nobody listens on, not handed out before by this process (for a
/// node started later, as a process or in this one).
pub fn free_port() -> u16 {
    listen("127.0.0.1")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port on 127.0.0.1")
}
