//! Network partitions for the multi-process fault tests, made with Linux network namespaces
//! (root and iproute2's `ip`; nothing leaves the machine). Each node runs in its own
//! namespace with one veth whose other end sits on a bridge in the test's namespace, so
//! that the test's clients reach every node at `10.254.S.N` and the nodes reach each other
//! through the same bridge. Two faults:
//! - [`Network::isolate`]: the node's link goes down, so that nothing reaches it and
//!   nothing it sends arrives (silent loss, both directions, clients included);
//! - [`Network::cut_from_peers`]: blackhole routes between the node and every other node,
//!   while the clients still reach it (a deposed leader that clients can still talk to).
//!
//! [`Network::heal`] undoes either. Everything is deleted when the network is dropped.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Distinguishes the networks of one test process.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The namespaces, veths and bridge of one cluster.
pub struct Network {
    /// A prefix unique on this machine (≤ 8 characters: interface names have 15 at most).
    tag: String,
    /// The third octet of `10.254.S.0/24`.
    subnet: u8,
    nodes: usize,
}

/// Runs `ip ARGS`, failing with its stderr.
fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip").args(args).output().map_err(|e| {
        format!(
            "ip {}: {e} (network namespaces need iproute2)",
            args.join(" ")
        )
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "ip {}: {} (network namespaces need root)",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

impl Network {
    /// Creates a namespace per node (1-based) on a fresh bridge.
    pub fn create(nodes: usize) -> Result<Network, String> {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let network = Network {
            tag: format!("hw{}", (pid * 4 + n) % 100_000),
            subnet: ((pid + 37 * n) % 250) as u8,
            nodes,
        };
        network.remove();
        network.build()?;
        Ok(network)
    }

    fn namespace(&self, node: usize) -> String {
        format!("{}-{node}", self.tag)
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    /// The veth end on the bridge.
    fn host_link(&self, node: usize) -> String {
        format!("{}v{node}", self.tag)
    }

    /// The address of `node` (the test's own end of the bridge is `.254`).
    pub fn node_ip(&self, node: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 254, self.subnet, node as u8)
    }

    fn build(&self) -> Result<(), String> {
        let bridge = self.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        let own = format!("10.254.{}.254/24", self.subnet);
        ip(&["addr", "add", &own, "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for node in 1..=self.nodes {
            let ns = self.namespace(node);
            let host = self.host_link(node);
            ip(&["netns", "add", &ns])?;
            let args = ["link", "add", &host, "type", "veth", "peer", "name", "eth0"];
            ip(&[&args[..], &["netns", &ns]].concat())?;
            ip(&["link", "set", &host, "master", &bridge])?;
            ip(&["link", "set", &host, "up"])?;
            let addr = format!("{}/24", self.node_ip(node));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// `program` run inside the namespace of `node` (`ip netns exec` executes it in place,
    /// so the child's pid is the program's own).
    pub fn command(&self, node: usize, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.namespace(node), program]);
        command
    }

    /// Nothing reaches `node` and nothing it sends arrives, until [`Network::heal`].
    pub fn isolate(&self, node: usize) {
        ip(&["link", "set", &self.host_link(node), "down"]).expect("isolate");
    }

    /// `node` and every other node can no longer reach each other; clients still reach
    /// all of them.
    pub fn cut_from_peers(&self, node: usize) {
        for peer in (1..=self.nodes).filter(|p| *p != node) {
            self.blackhole("add", node, peer).expect("cut");
            self.blackhole("add", peer, node).expect("cut");
        }
    }

    /// Undoes [`Network::isolate`] and [`Network::cut_from_peers`] for `node`.
    pub fn heal(&self, node: usize) {
        ip(&["link", "set", &self.host_link(node), "up"]).expect("heal");
        for peer in (1..=self.nodes).filter(|p| *p != node) {
            let _ = self.blackhole("del", node, peer);
            let _ = self.blackhole("del", peer, node);
        }
    }

    /// Adds or deletes, in the namespace of `from`, the blackhole route to `to`.
    fn blackhole(&self, verb: &str, from: usize, to: usize) -> Result<(), String> {
        let ns = self.namespace(from);
        let to = format!("{}/32", self.node_ip(to));
        ip(&["-n", &ns, "route", verb, "blackhole", &to])
    }

    /// Deletes the namespaces (their veths go with them) and the bridge, ignoring what
    /// does not exist.
    fn remove(&self) {
        for node in 1..=self.nodes {
            let _ = ip(&["netns", "del", &self.namespace(node)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.remove();
    }
}
