//! Three combined nodes as real processes (the shipped `config/cluster/node-*.toml` on free
//! ports and temporary directories, with a short broker session), and the client calls that
//! observe them. Each node's log goes to `<dir>/node-N.log` (to the test's stderr with
//! `HIGHWATER_CLUSTER_LOG=1`); a test that fails keeps the directory and says where.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, DescribeClusterRequest, DescribeClusterResponse,
    MetadataRequest, MetadataResponse,
};

use super::netns::Network;
use super::{name, Client};

/// The broker session of these tests (Kafka's default is 9000 ms).
pub const SESSION_MS: u64 = 2000;
/// How long a condition may take to appear before a test fails.
pub const WAIT: Duration = Duration::from_secs(30);

use highwater::testkit::ports::free_port;

/// `highwater serve --config FILE` with the quorum in `voters`, a short broker session and
/// election timeout; stdout discarded.
pub fn serve(config_file: &str, voters: &str) -> Command {
    serve_in(
        Command::new(env!("CARGO_BIN_EXE_highwater")),
        config_file,
        voters,
    )
}

/// [`serve`]'s arguments added to `command` (the binary, maybe run through a wrapper).
fn serve_in(mut command: Command, config_file: &str, voters: &str) -> Command {
    let config = format!(
        "{}/config/cluster/{config_file}",
        env!("CARGO_MANIFEST_DIR")
    );
    command
        .args(["serve", "--config", &config])
        .args(["--set", &format!("controller.quorum.voters={voters}")])
        .args(["--set", &format!("broker.session.timeout.ms={SESSION_MS}")])
        .args(["--set", "broker.heartbeat.interval.ms=200"])
        .args(["--set", "controller.quorum.election.timeout.ms=500"])
        // Off unless a test turns it on at a free port (the shipped files name fixed ones).
        .args(["--set", "http.listeners="])
        .stdout(Stdio::null());
    command
}

/// Three combined nodes; every process is killed when the cluster is dropped.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub client_ports: Vec<u16>,
    pub controller_ports: Vec<u16>,
    pub children: Vec<Option<Child>>,
    /// `KEY=VALUE` settings every node starts with, besides those of [`serve`].
    settings: Vec<String>,
    /// `KEY=VALUE` settings of one node (1-based), after the common ones.
    node_settings: Vec<(usize, String)>,
    /// The nodes' network namespaces, when the test partitions the network; otherwise
    /// every node listens on 127.0.0.1.
    pub network: Option<Network>,
    /// With split roles (`config/cluster/split/`), the three controller-only processes
    /// (ids 3000–3002, never struck by the tests); the nodes are then broker-only.
    controllers: Vec<Child>,
    split: bool,
    /// Ports of a third listener, `INTERNAL`, on each node (none unless
    /// [`Cluster::start_with_internal`]): its protocol and keys are the test's settings.
    internal_ports: Vec<u16>,
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// Starts the three nodes with `settings` (`KEY=VALUE`) added to each.
    pub fn start_with(settings: &[&str]) -> Cluster {
        Cluster::start_with_nodes(tempfile::tempdir().expect("tempdir"), settings, &[])
    }

    /// Starts the three nodes in `dir` with `settings` added to each and `node_settings`
    /// (node, `KEY=VALUE`) to one.
    pub fn start_with_nodes(
        dir: tempfile::TempDir,
        settings: &[&str],
        node_settings: &[(usize, String)],
    ) -> Cluster {
        Cluster::launch(dir, settings, node_settings, false)
    }

    /// Like [`Cluster::start_with_nodes`], each node with a third listener, `INTERNAL://`
    /// on a free port, which `settings` configure (as the inter-broker one, say).
    pub fn start_with_internal(
        dir: tempfile::TempDir,
        settings: &[&str],
        node_settings: &[(usize, String)],
    ) -> Cluster {
        Cluster::launch(dir, settings, node_settings, true)
    }

    fn launch(
        dir: tempfile::TempDir,
        settings: &[&str],
        node_settings: &[(usize, String)],
        internal: bool,
    ) -> Cluster {
        let ports = |n: usize| (0..n).map(|_| free_port()).collect();
        let mut cluster = Cluster {
            dir,
            client_ports: ports(3),
            controller_ports: ports(3),
            children: vec![None, None, None],
            settings: settings.iter().map(|s| (*s).to_string()).collect(),
            node_settings: node_settings.to_vec(),
            network: None,
            controllers: Vec::new(),
            split: false,
            internal_ports: ports(if internal { 3 } else { 0 }),
        };
        for node in 1..=3 {
            cluster.spawn(node);
        }
        cluster
    }

    /// Like [`Cluster::start_with_nodes`], each node in its own network namespace (see
    /// [`Network`]), listening on port 9092 (clients) and 9093 (the quorum) of its own
    /// address; `Err` when namespaces cannot be made here.
    pub fn start_in_namespaces(
        dir: tempfile::TempDir,
        settings: &[&str],
        node_settings: &[(usize, String)],
    ) -> Result<Cluster, String> {
        let mut cluster = Cluster {
            dir,
            client_ports: vec![9092; 3],
            controller_ports: vec![9093; 3],
            children: vec![None, None, None],
            settings: settings.iter().map(|s| (*s).to_string()).collect(),
            node_settings: node_settings.to_vec(),
            network: Some(Network::create(3)?),
            controllers: Vec::new(),
            split: false,
            internal_ports: Vec::new(),
        };
        for node in 1..=3 {
            cluster.spawn(node);
        }
        Ok(cluster)
    }

    /// Three controller-only processes, then three broker-only nodes (the shipped
    /// `config/cluster/split/` files on free ports), with `settings` added to each, the
    /// controllers included (they decide with the cluster's defaults, as Kafka's do).
    pub fn start_split(settings: &[&str]) -> Cluster {
        let mut cluster = Cluster {
            dir: tempfile::tempdir().expect("tempdir"),
            client_ports: (0..3).map(|_| free_port()).collect(),
            controller_ports: (0..3).map(|_| free_port()).collect(),
            children: vec![None, None, None],
            settings: settings.iter().map(|s| (*s).to_string()).collect(),
            node_settings: Vec::new(),
            network: None,
            controllers: Vec::new(),
            split: true,
            internal_ports: Vec::new(),
        };
        for i in 1..=3 {
            let listener = format!("CONTROLLER://127.0.0.1:{}", cluster.controller_ports[i - 1]);
            let data = cluster.dir.path().join(format!("controller-{i}"));
            let mut command = serve(&format!("split/controller-{i}.toml"), &cluster.voters());
            command
                .args(["--listeners", &listener])
                .args(["--log-dirs", &data.display().to_string()]);
            for setting in &cluster.settings {
                command.args(["--set", setting]);
            }
            cluster.log_to(&mut command, &format!("controller-{i}"));
            cluster
                .controllers
                .push(command.spawn().expect("spawn highwater"));
        }
        for node in 1..=3 {
            cluster.spawn(node);
        }
        cluster
    }

    /// kill -9 of controller `i` (1-based) of a split cluster, reaped.
    pub fn kill_controller(&mut self, i: usize) {
        let controller = &mut self.controllers[i - 1];
        let _ = controller.kill();
        let _ = controller.wait();
    }

    /// Sends `node`'s stderr to `<dir>/NAME.log` unless `HIGHWATER_CLUSTER_LOG` is set.
    fn log_to(&self, command: &mut Command, name: &str) {
        if std::env::var_os("HIGHWATER_CLUSTER_LOG").is_none() {
            let log = self.dir.path().join(format!("{name}.log"));
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .expect("node log file");
            command.stderr(file);
        }
    }

    /// The address `node` listens on.
    fn host(&self, node: usize) -> String {
        match &self.network {
            Some(network) => network.node_ip(node).to_string(),
            None => "127.0.0.1".into(),
        }
    }

    pub fn voters(&self) -> String {
        let voters: Vec<String> = self
            .controller_ports
            .iter()
            .enumerate()
            .map(|(i, port)| match self.split {
                false => format!("{}@{}:{port}", i + 1, self.host(i + 1)),
                true => format!("{}@127.0.0.1:{port}", 3000 + i),
            })
            .collect();
        voters.join(",")
    }

    /// The data directory of `node` (its `log.dirs`).
    pub fn data_dir(&self, node: usize) -> std::path::PathBuf {
        self.dir.path().join(format!("node-{node}"))
    }

    pub fn command(&self, node: usize, node_id: usize) -> Command {
        let host = self.host(node);
        let (config, mut listeners) = match self.split {
            true => (
                format!("split/broker-{node}.toml"),
                format!("PLAINTEXT://{host}:{}", self.client_ports[node - 1]),
            ),
            false => (
                format!("node-{node}.toml"),
                format!(
                    "PLAINTEXT://{host}:{},CONTROLLER://{host}:{}",
                    self.client_ports[node - 1],
                    self.controller_ports[node - 1]
                ),
            ),
        };
        if let Some(port) = self.internal_ports.get(node - 1) {
            listeners.push_str(&format!(",INTERNAL://{host}:{port}"));
        }
        let data = self.data_dir(node);
        let binary = env!("CARGO_BIN_EXE_highwater");
        let program = match &self.network {
            Some(network) => network.command(node, binary),
            None => Command::new(binary),
        };
        let mut command = serve_in(program, &config, &self.voters());
        command
            .args(["--listeners", &listeners])
            .args(["--node-id", &node_id.to_string()])
            .args(["--log-dirs", &data.display().to_string()]);
        for setting in &self.settings {
            command.args(["--set", setting]);
        }
        for (_, setting) in self.node_settings.iter().filter(|(n, _)| *n == node) {
            command.args(["--set", setting]);
        }
        self.log_to(&mut command, &format!("node-{node}"));
        command
    }

    /// Waits until `node` exits (after a SIGTERM: its controlled shutdown), at most
    /// [`WAIT`].
    pub fn wait_exit(&mut self, node: usize) {
        let mut child = self.children[node - 1].take().expect("running");
        let deadline = Instant::now() + WAIT;
        while child.try_wait().expect("wait").is_none() {
            assert!(Instant::now() < deadline, "node {node} did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn spawn(&mut self, node: usize) {
        let child = self.command(node, node).spawn().expect("spawn highwater");
        self.children[node - 1] = Some(child);
    }

    pub fn signal(&self, node: usize, name: &str) {
        let child = self.children[node - 1].as_ref().expect("running");
        let status = Command::new("kill")
            .args([name, &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {name}");
    }

    /// kill -9 of `node`, reaped.
    pub fn kill(&mut self, node: usize) {
        if let Some(mut child) = self.children[node - 1].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn addr(&self, node: usize) -> SocketAddr {
        format!("{}:{}", self.host(node), self.client_ports[node - 1])
            .parse()
            .expect("addr")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in 1..=3 {
            if let Some(child) = &self.children[node - 1] {
                // A stopped process must be continued to die of SIGKILL promptly.
                let _ = Command::new("kill")
                    .args(["-CONT", &child.id().to_string()])
                    .status();
            }
            self.kill(node);
        }
        for controller in &mut self.controllers {
            let _ = controller.kill();
            let _ = controller.wait();
        }
        if std::thread::panicking() {
            let empty = tempfile::tempdir().expect("tempdir");
            let kept = std::mem::replace(&mut self.dir, empty).keep();
            eprintln!("cluster data and node logs kept in {}", kept.display());
        }
    }
}

/// Metadata v12 from `addr` (all topics), or `None` if the node does not answer.
pub async fn metadata(addr: SocketAddr) -> Option<MetadataResponse> {
    let mut client = Client::try_connect(addr).await?;
    let request = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false);
    client.try_call(&request, 12).await
}

/// DescribeCluster v2 from `addr`, fenced brokers included.
pub async fn describe_cluster(addr: SocketAddr) -> Option<DescribeClusterResponse> {
    let mut client = Client::try_connect(addr).await?;
    let request = DescribeClusterRequest::default().with_include_fenced_brokers(true);
    client.try_call(&request, 2).await
}

/// Metadata from `node` once it shows `brokers` unfenced brokers.
pub async fn with_brokers(cluster: &Cluster, node: usize, brokers: usize) -> MetadataResponse {
    let addr = cluster.addr(node);
    eventually(
        &format!("{brokers} brokers seen by node {node}"),
        || async move { metadata(addr).await.filter(|m| m.brokers.len() == brokers) },
    )
    .await
}

/// Creates `topic` with one partition on replicas `replicas` (the first leads).
pub async fn create_assigned(cluster: &Cluster, topic: &str, replicas: &[i32]) {
    let mut client = Client::connect(cluster.addr(1)).await;
    let assignment = CreatableReplicaAssignment::default()
        .with_partition_index(0)
        .with_broker_ids(replicas.iter().copied().map(BrokerId).collect());
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![assignment])])
        .with_timeout_ms(15_000);
    assert_eq!(client.call(&request, 7).await.topics[0].error_code, 0);
}

/// The ISR of `topic`-0 as `node` reports it, once it has a leader.
pub async fn isr(cluster: &Cluster, node: usize, topic: &str) -> (Vec<i32>, Vec<i32>) {
    let addr = cluster.addr(node);
    eventually(&format!("{topic} led"), || async move {
        let metadata = metadata(addr).await?;
        let found = metadata
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
        let p = found.partitions.first().filter(|p| p.leader_id.0 >= 0)?;
        let ids = |v: &Vec<BrokerId>| v.iter().map(|b| b.0).collect::<Vec<i32>>();
        Some((ids(&p.isr_nodes), ids(&p.offline_replicas)))
    })
    .await
}

/// The active controller as `node` reports it (DescribeCluster's controller id).
pub async fn active_controller(cluster: &Cluster, node: usize) -> i32 {
    let addr = cluster.addr(node);
    eventually("an active controller", || async move {
        describe_cluster(addr)
            .await
            .map(|d| d.controller_id.0)
            .filter(|id| *id > 0)
    })
    .await
}

/// Polls `probe` until it returns `Some`, failing after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
