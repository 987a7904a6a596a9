//! A real highwater cluster inside a test: [`Cluster::start`] runs one or more nodes in
//! this process (each on its own tokio runtime and threads, so that one can be killed
//! without touching the others), replicating over loopback with the same code as
//! production, on a temporary directory removed when the cluster is dropped. It is what
//! `highwater dev` runs too.
//!
//! Nothing is fsynced in a process that started a cluster (`crate::log::fsync`): its
//! data does not outlive it.
//!
//! Fault hooks: [`Cluster::stop`] (controlled shutdown), [`Cluster::kill`] (the node's
//! tasks are dropped where they stand: no controlled shutdown, no log close, no
//! clean-shutdown marker; its next start recovers as after `kill -9`; what it had
//! written is in the page cache and survives, as after a process kill) and
//! [`Cluster::restart`]; [`Cluster::cut`] / [`Cluster::heal`] / [`Cluster::delay`] on the
//! link between two nodes or between the clients and a node; and the next requests of an
//! API answered with an error code ([`Cluster::fail_next`]) or dropped
//! ([`Cluster::drop_next`]), like franz-go's kfake `ControlKey`.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use highwater::testkit::{Cluster, Endpoint};
//! let cluster = Cluster::start(3).await?;
//! let bootstrap = cluster.bootstrap(); // "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
//! cluster.cut(Endpoint::Node(1), Endpoint::Node(2));
//! cluster.kill(3).await?;
//! cluster.restart(3).await?;
//! # Ok(()) }
//! ```

mod control;
pub mod ports;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;

use crate::api::Broker;
use crate::config::{BrokerConfig, ConfigMap};
use crate::faults::{Faults, Injected};
use crate::node::{self, Node, Shutdown, ShutdownTrigger};

pub use crate::faults::Endpoint;
pub use control::Control;
pub use kafka_protocol::messages::ApiKey;

/// Most nodes a cluster may have.
pub const NODES_MAX: u16 = 9;
/// How long a stopped or killed node's runtime waits for its blocking work to end.
const RUNTIME_GRACE: Duration = Duration::from_secs(1);
/// How long a started cluster's nodes may take to see each other unfenced.
const UNFENCED_WAIT: Duration = Duration::from_secs(30);
/// A node's metadata images as they are published.
type Images = tokio::sync::watch::Receiver<Arc<crate::metadata::MetadataImage>>;
/// Worker threads of each node's runtime.
const NODE_WORKER_THREADS: usize = 2;

/// What every test node starts with: one partition per new topic, no wait for more group
/// members, internal topics replicated as far as the cluster allows, and a broker session
/// of 3 s instead of 9 s (a killed node's leaderships move, and its restart is accepted,
/// once its session has expired, as in Kafka: tests should not wait 9 s for it).
const DEFAULTS: &[(&str, &str)] = &[
    ("process.roles", "broker,controller"),
    ("broker.session.timeout.ms", "3000"),
    ("broker.heartbeat.interval.ms", "500"),
    ("num.partitions", "1"),
    ("auto.create.topics.enable", "true"),
    ("group.initial.rebalance.delay.ms", "0"),
    ("offsets.topic.replication.factor", "1"),
    ("transaction.state.log.replication.factor", "1"),
    ("transaction.state.log.min.isr", "1"),
];

/// How a cluster is started.
#[derive(Debug, Clone)]
pub struct Options {
    /// Nodes, 1 to [`NODES_MAX`]; each is broker and controller.
    pub nodes: u16,
    /// Address every listener binds.
    pub host: String,
    /// Client port of the first node (0: a free one; the others always take free ones).
    pub port: u16,
    /// Config keys on top of the defaults, for every node (`http.listeners` for the first
    /// node only).
    pub settings: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            nodes: 1,
            host: "127.0.0.1".into(),
            port: 0,
            settings: Vec::new(),
        }
    }
}

/// A running cluster; dropping it kills every node and removes its data.
#[derive(Debug, Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    bootstrap: String,
    faults: Faults,
    nodes: Mutex<Vec<Slot>>,
}

#[derive(Debug)]
struct Slot {
    config: Arc<BrokerConfig>,
    running: Option<Running>,
}

/// A node's thread and how to end it.
#[derive(Debug)]
struct Running {
    stop: ShutdownTrigger,
    kill: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<anyhow::Result<()>>,
}

impl Cluster {
    /// Starts `nodes` nodes on free loopback ports and waits until every one serves.
    pub async fn start(nodes: u16) -> anyhow::Result<Cluster> {
        Cluster::start_with(Options {
            nodes,
            ..Options::default()
        })
        .await
    }

    /// Starts a cluster as `options` say and waits until every node serves.
    pub async fn start_with(options: Options) -> anyhow::Result<Cluster> {
        if options.nodes == 0 || options.nodes > NODES_MAX {
            anyhow::bail!("{} nodes: a cluster has 1 to {NODES_MAX}", options.nodes);
        }
        // Its data is removed with it: fsyncs would only slow the start and every write.
        crate::log::fsync::skip_in_this_process();
        let dir = std::env::temp_dir().join(format!("highwater-dev-{}", uuid::Uuid::new_v4()));
        let nodes = usize::from(options.nodes);
        let listeners = client_listeners(&options)?;
        let clients: Vec<SocketAddr> = listeners
            .iter()
            .map(std::net::TcpListener::local_addr)
            .collect::<Result<_, _>>()?;
        let controllers = match nodes {
            1 => clients.clone(),
            _ => (0..nodes)
                .map(|_| SocketAddr::from(([127, 0, 0, 1], ports::free_port())))
                .collect(),
        };
        let faults = Faults::settable();
        let mut slots = Vec::with_capacity(nodes);
        for (i, client) in clients.iter().enumerate() {
            let mut map = node_config(i + 1, *client, &controllers, &dir);
            for (key, value) in &options.settings {
                if key == "http.listeners" && i > 0 {
                    continue;
                }
                map.insert(key.clone(), value.clone());
            }
            let config = Arc::new(BrokerConfig::from_map(map)?);
            faults.register(config.node_id, *client);
            if let Some(controller) = config.controller_listener {
                faults.register(config.node_id, controller);
            }
            slots.push(Slot {
                config,
                running: None,
            });
        }
        let bootstrap: Vec<String> = clients.iter().map(ToString::to_string).collect();
        let cluster = Cluster {
            inner: Arc::new(Inner {
                dir,
                bootstrap: bootstrap.join(","),
                faults,
                nodes: Mutex::new(slots),
            }),
        };
        let ready: Vec<_> = listeners
            .into_iter()
            .enumerate()
            .map(|(i, listener)| cluster.launch(i, Some(listener)))
            .collect::<anyhow::Result<_>>()?;
        let mut images = Vec::with_capacity(nodes);
        for (i, ready) in ready.into_iter().enumerate() {
            images.push(cluster.wait_ready(i, ready).await?);
        }
        cluster.wait_all_unfenced(images).await?;
        Ok(cluster)
    }

    /// The clients' bootstrap servers: `host:port` of every node, comma-separated.
    pub fn bootstrap(&self) -> &str {
        &self.inner.bootstrap
    }

    /// The Kafka listener of `node` (1-based, its `node.id`).
    pub fn address(&self, node: i32) -> anyhow::Result<SocketAddr> {
        self.with_slot(node, |slot| slot.config.listener)
    }

    /// The controller listener of `node` (`None` for a single node, which has none):
    /// where admin tools run with `--bootstrap-controller` connect.
    pub fn controller_address(&self, node: i32) -> anyhow::Result<Option<SocketAddr>> {
        self.with_slot(node, |slot| slot.config.controller_listener)
    }

    /// Ids of the nodes, with whether each is running.
    pub fn nodes(&self) -> Vec<(i32, bool)> {
        let slots = self.lock();
        slots
            .iter()
            .map(|s| (s.config.node_id, s.running.is_some()))
            .collect()
    }

    /// Where the nodes keep their data (`node-N` below it for a cluster of several).
    pub fn data_dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The cluster's faults (cut and delayed links, injected answers).
    pub fn faults(&self) -> &Faults {
        &self.inner.faults
    }

    /// Cuts the link between `a` and `b` both ways until [`Cluster::heal`]: every
    /// exchange between two nodes fails at once; a client's request to a node is not
    /// answered and its connection is closed.
    pub fn cut(&self, a: Endpoint, b: Endpoint) {
        self.inner.faults.cut(a, b);
    }

    /// Restores the link between `a` and `b` (and removes its delay).
    pub fn heal(&self, a: Endpoint, b: Endpoint) {
        self.inner.faults.heal(a, b);
    }

    /// Delays every exchange over the link between `a` and `b` by `delay`.
    pub fn delay(&self, a: Endpoint, b: Endpoint, delay: Duration) {
        self.inner.faults.delay(a, b, delay);
    }

    /// Answers the next `count` client requests of `api` to `node` with the Kafka error
    /// `code`; refused for an API whose answers carry no error a client reads (drop those).
    pub fn fail_next(&self, node: i32, api: ApiKey, count: u32, code: i16) -> anyhow::Result<()> {
        if !crate::api::injected::supports(api) {
            anyhow::bail!(
                "{api:?} cannot be answered with an error code; these can: {:?}",
                crate::api::injected::ERROR_APIS
            );
        }
        self.with_slot(node, |_| ())?;
        self.inner
            .faults
            .inject(node, api as i16, count, Injected::Error(code));
        Ok(())
    }

    /// Drops the next `count` client requests of `api` to `node`: no answer, and the
    /// connection is closed, as if the broker had died mid-request.
    pub fn drop_next(&self, node: i32, api: ApiKey, count: u32) -> anyhow::Result<()> {
        self.with_slot(node, |_| ())?;
        self.inner
            .faults
            .inject(node, api as i16, count, Injected::Drop);
        Ok(())
    }

    /// Stops `node` cleanly (controlled shutdown, logs closed) and waits until it has.
    pub async fn stop(&self, node: i32) -> anyhow::Result<()> {
        let running = self.take_running(node)?;
        running.stop.request();
        join(running.thread).await
    }

    /// Kills `node`: its tasks are dropped where they stand (see the module docs).
    pub async fn kill(&self, node: i32) -> anyhow::Result<()> {
        let running = self.take_running(node)?;
        let _ = running.kill.send(());
        join(running.thread).await
    }

    /// Starts a stopped or killed `node` again on its data and ports, and waits until
    /// it serves. After a kill that is once the controller has let the old incarnation's
    /// session expire (`broker.session.timeout.ms`, 3 s here), as Kafka's does.
    pub async fn restart(&self, node: i32) -> anyhow::Result<()> {
        let (index, address) = {
            let slots = self.lock();
            let index = index_of(&slots, node)?;
            if slots[index].running.is_some() {
                anyhow::bail!("node {node} is running");
            }
            (index, slots[index].config.listener)
        };
        let listener = std::net::TcpListener::bind(address)
            .with_context(|| format!("node {node}: cannot listen on {address} again"))?;
        let ready = self.launch(index, Some(listener))?;
        self.wait_ready(index, ready).await.map(drop)
    }

    /// Stops every running node cleanly, all at once (a quorum that stops one node at a
    /// time loses its majority halfway), and waits until they have.
    pub async fn shutdown(&self) -> anyhow::Result<()> {
        let running: Vec<Running> = {
            let mut slots = self.lock();
            slots.iter_mut().filter_map(|s| s.running.take()).collect()
        };
        for node in &running {
            node.stop.request();
        }
        let mut outcome = Ok(());
        for node in running {
            if let Err(error) = join(node.thread).await {
                outcome = Err(error);
            }
        }
        outcome
    }

    /// The control API of `highwater dev --http` on this cluster.
    pub fn control(&self) -> Control {
        Control::new(self.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.inner
            .nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn with_slot<T>(&self, node: i32, read: impl FnOnce(&Slot) -> T) -> anyhow::Result<T> {
        let slots = self.lock();
        let index = index_of(&slots, node)?;
        Ok(read(&slots[index]))
    }

    fn take_running(&self, node: i32) -> anyhow::Result<Running> {
        let mut slots = self.lock();
        let index = index_of(&slots, node)?;
        slots[index]
            .running
            .take()
            .with_context(|| format!("node {node} is not running"))
    }

    /// Starts the node of slot `index` on its own thread and runtime; the receiver
    /// completes when it serves (or fails when it could not start).
    fn launch(
        &self,
        index: usize,
        listener: Option<std::net::TcpListener>,
    ) -> anyhow::Result<tokio::sync::oneshot::Receiver<Images>> {
        let mut slots = self.lock();
        let slot = &mut slots[index];
        let config = Arc::clone(&slot.config);
        let faults = self.inner.faults.clone();
        let (stop, shutdown) = Shutdown::manual();
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        let (served, ready) = tokio::sync::oneshot::channel();
        let node_id = config.node_id;
        let thread = std::thread::Builder::new()
            .name(format!("highwater-node-{node_id}"))
            .spawn(move || run_thread(config, listener, faults, shutdown, killed, served))
            .with_context(|| format!("node {node_id}: cannot start its thread"))?;
        slot.running = Some(Running { stop, kill, thread });
        Ok(ready)
    }

    /// Waits until the node of slot `index` serves, then its metadata images; when it
    /// stops instead, its error.
    async fn wait_ready(
        &self,
        index: usize,
        ready: tokio::sync::oneshot::Receiver<Images>,
    ) -> anyhow::Result<Images> {
        if let Ok(images) = ready.await {
            return Ok(images);
        }
        let running = {
            let mut slots = self.lock();
            slots[index].running.take()
        };
        match running {
            Some(running) => join(running.thread)
                .await
                .and_then(|()| anyhow::bail!("node {} stopped before it served", index + 1)),
            None => anyhow::bail!("node {} was stopped before it served", index + 1),
        }
    }

    /// Waits until every node's metadata shows every broker of the cluster unfenced: a
    /// node serves once it is unfenced itself, and learns of the others' a moment later.
    async fn wait_all_unfenced(&self, images: Vec<Images>) -> anyhow::Result<()> {
        let brokers = self.lock().iter().filter(|s| s.config.roles.broker).count();
        for (i, mut image) in images.into_iter().enumerate() {
            let seen = image.wait_for(|image| image.unfenced_brokers().count() >= brokers);
            match tokio::time::timeout(UNFENCED_WAIT, seen).await {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => anyhow::bail!("node {} stopped before it served", i + 1),
                Err(_) => anyhow::bail!(
                    "node {} did not see the {brokers} brokers unfenced within {UNFENCED_WAIT:?}",
                    i + 1
                ),
            }
        }
        Ok(())
    }
}

impl Drop for Inner {
    /// Kills what still runs (its threads are waited for) and removes the data.
    fn drop(&mut self) {
        let slots = std::mem::take(self.nodes.get_mut().unwrap_or_else(PoisonError::into_inner));
        for running in slots.into_iter().filter_map(|s| s.running) {
            let _ = running.kill.send(());
            let _ = running.thread.join();
        }
        if let Err(error) = std::fs::remove_dir_all(&self.dir) {
            if error.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %self.dir.display(), %error, "cannot remove the cluster's data");
            }
        }
    }
}

/// The nodes' client listeners: the first at `options.port` unless it is 0, the others
/// (and that one then) at ports of [`ports`], which no outgoing connection takes while a
/// node is down.
fn client_listeners(options: &Options) -> anyhow::Result<Vec<std::net::TcpListener>> {
    (0..options.nodes)
        .map(|node| match options.port {
            port if node == 0 && port != 0 => {
                let wanted = format!("{}:{port}", options.host);
                std::net::TcpListener::bind(&wanted)
                    .with_context(|| format!("cannot listen on {wanted}"))
            }
            _ => ports::listen(&options.host)
                .with_context(|| format!("cannot listen on {}", options.host)),
        })
        .collect()
}

fn index_of(slots: &[Slot], node: i32) -> anyhow::Result<usize> {
    slots
        .iter()
        .position(|s| s.config.node_id == node)
        .with_context(|| format!("no node {node} in this cluster"))
}

/// Waits for a node's thread without blocking the caller's runtime.
async fn join(thread: std::thread::JoinHandle<anyhow::Result<()>>) -> anyhow::Result<()> {
    let joined = tokio::task::spawn_blocking(move || thread.join())
        .await
        .context("waiting for a node")?;
    joined.map_err(|_| anyhow::anyhow!("a node's thread panicked"))?
}

/// A node's thread: its own runtime runs the node until it is stopped, killed, or fails;
/// then every task left on the runtime is dropped, as at a process exit.
fn run_thread(
    config: Arc<BrokerConfig>,
    listener: Option<std::net::TcpListener>,
    faults: Faults,
    shutdown: Shutdown,
    killed: tokio::sync::oneshot::Receiver<()>,
    served: tokio::sync::oneshot::Sender<Images>,
) -> anyhow::Result<()> {
    let node_id = config.node_id;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(NODE_WORKER_THREADS)
        .thread_name(format!("highwater-node-{node_id}-worker"))
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async move {
        let mut listeners = Vec::new();
        if let Some(listener) = listener {
            listener.set_nonblocking(true)?;
            listeners.push(tokio::net::TcpListener::from_std(listener)?);
        }
        let node = Node {
            config,
            listeners,
            faults,
        };
        let ready = move |broker: &Broker| {
            let _ = served.send(broker.controller.subscribe());
        };
        tokio::select! {
            outcome = node::run(node, shutdown, ready) => outcome,
            _ = killed => {
                tracing::warn!(node_id, "node killed");
                Ok(())
            }
        }
    });
    runtime.shutdown_timeout(RUNTIME_GRACE);
    outcome.with_context(|| format!("node {node_id}"))
}

/// The config of node `node` of a cluster (1-based) before the caller's settings: a
/// single node has no controller listener; several form a quorum of them all, with every
/// internal topic replicated to up to three of them.
fn node_config(
    node: usize,
    client: SocketAddr,
    controllers: &[SocketAddr],
    dir: &Path,
) -> ConfigMap {
    let mut map: ConfigMap = DEFAULTS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    map.insert("node.id".into(), node.to_string());
    map.insert("listeners".into(), format!("PLAINTEXT://{client}"));
    if controllers.len() > 1 {
        let voters: Vec<String> = controllers
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{}@{c}", i + 1))
            .collect();
        let controller = controllers[node - 1];
        map.insert(
            "listeners".into(),
            format!("PLAINTEXT://{client},CONTROLLER://{controller}"),
        );
        map.insert("controller.listener.names".into(), "CONTROLLER".into());
        map.insert("controller.quorum.voters".into(), voters.join(","));
        let factor = controllers.len().min(3);
        let min_isr = factor.div_ceil(2).max(1);
        for key in [
            "default.replication.factor",
            "offsets.topic.replication.factor",
            "transaction.state.log.replication.factor",
        ] {
            map.insert(key.into(), factor.to_string());
        }
        map.insert("transaction.state.log.min.isr".into(), min_isr.to_string());
        map.insert("min.insync.replicas".into(), min_isr.to_string());
    }
    let log_dir = match controllers.len() {
        1 => dir.to_path_buf(),
        _ => dir.join(format!("node-{node}")),
    };
    map.insert("log.dirs".into(), log_dir.display().to_string());
    map.insert("http.listeners".into(), String::new());
    map
}
