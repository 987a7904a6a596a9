//! Command-line interface: `highwater serve --config FILE`, with flags that override keys
//! of the file, `highwater dev` (a throwaway test broker) and `highwater dump FILE...`. Loads configuration and starts the broker, or
//! hands the files to [`crate::dump`]; no logic of its own.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::api::Broker;
use crate::config::{self, BrokerConfig, ConfigMap};

/// A Kafka wire-protocol compatible broker.
#[derive(Debug, Parser)]
#[command(name = "highwater", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs a node: broker, controller or both (`process.roles`).
    Serve(ServeArgs),
    /// Prints segment files (.log, .index, .timeindex) like Kafka's kafka-dump-log.
    Dump(DumpArgs),
    /// A throwaway single node for tests and CI: a free (or given) port, data in a
    /// temporary directory removed on exit; prints its bootstrap address as the first line
    /// of stdout once it serves.
    Dev(DevArgs),
}

/// Flags of `dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Port to listen on (0: a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Nodes to run: 1, or a replicated cluster of that many in this process.
    #[arg(long, default_value_t = 1)]
    pub nodes: u16,
    /// Any other key, as key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Log filter when RUST_LOG is not set.
    #[arg(long, default_value = "warn")]
    pub log_level: String,
}

/// What a test broker starts with: one replica of every internal topic, no wait for more
/// group members, one partition per new topic.
const DEV_DEFAULTS: &[(&str, &str)] = &[
    ("node.id", "1"),
    ("process.roles", "broker,controller"),
    ("num.partitions", "1"),
    ("auto.create.topics.enable", "true"),
    ("group.initial.rebalance.delay.ms", "0"),
    ("offsets.topic.replication.factor", "1"),
    ("transaction.state.log.replication.factor", "1"),
    ("transaction.state.log.min.isr", "1"),
];

/// Flags of `dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// Segment files: a 20-digit base offset, then .log, .index or .timeindex.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Check CRCs, contiguous offsets and torn tails of a .log, and that index entries
    /// point at the right batches of the sibling .log; exit non-zero on any problem.
    #[arg(long)]
    pub verify: bool,
    /// Also decode every record of a .log (offset, timestamp, key and value sizes).
    #[arg(long)]
    pub deep: bool,
}

/// Flags of `serve`. Each named flag overrides the Kafka key in brackets.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// TOML file with Kafka config keys (e.g. config/server.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Address to listen on, e.g. 127.0.0.1:9092 [listeners].
    #[arg(long)]
    pub listeners: Option<String>,
    /// Address clients are told to use [advertised.listeners].
    #[arg(long)]
    pub advertised_listeners: Option<String>,
    /// Data directory [log.dirs].
    #[arg(long)]
    pub log_dirs: Option<String>,
    /// This node's id [node.id].
    #[arg(long)]
    pub node_id: Option<i32>,
    /// Any other key, as key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Log filter when RUST_LOG is not set (e.g. info, debug, highwater=trace).
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Refuse to start on a configuration key highwater does not know (by default it is
    /// ignored with a warning).
    #[arg(long)]
    pub strict_config: bool,
}

impl ServeArgs {
    /// The file's keys with the flags applied on top.
    pub fn config_map(&self) -> anyhow::Result<ConfigMap> {
        let mut map = match &self.config {
            Some(path) => config::read_file(path)?,
            None => ConfigMap::new(),
        };
        let named = [
            ("listeners", self.listeners.clone()),
            ("advertised.listeners", self.advertised_listeners.clone()),
            ("log.dirs", self.log_dirs.clone()),
            ("node.id", self.node_id.map(|n| n.to_string())),
        ];
        for (key, value) in named {
            if let Some(value) = value {
                map.insert(key.to_string(), value);
            }
        }
        for pair in &self.overrides {
            let (key, value) = pair
                .split_once('=')
                .with_context(|| format!("--set expects KEY=VALUE, got {pair:?}"))?;
            map.insert(key.trim().to_string(), value.trim().to_string());
        }
        Ok(map)
    }
}

fn init_tracing(default_filter: &str) {
    // openraft narrates every election at info and reports a voter that is not up yet as
    // an error; it is silent unless the filter names it (e.g. --log-level info,openraft=warn).
    // Our own logs say who is the active controller, who is fenced and what fails to persist.
    let default_filter = match default_filter.contains("openraft") {
        true => default_filter.to_string(),
        false => format!("{default_filter},openraft=off"),
    };
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::EnvFilter;
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|f| EnvFilter::try_new(f).is_ok());
    let text = from_env.unwrap_or(default_filter);
    let filter = EnvFilter::try_new(&text).unwrap_or_else(|_| EnvFilter::new("info"));
    // Reloadable, so that kafka-configs --entity-type broker-loggers changes levels live.
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let output = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .init();
    crate::log_levels::install(&text, handle);
}

/// SIGTERM or ctrl-c, listened for from the moment the process starts: a signal that
/// arrives while the node opens (log recovery, waiting for the quorum or to be unfenced)
/// stops it cleanly instead of killing it with the signal's default action.
#[derive(Clone)]
struct Shutdown(tokio::sync::watch::Receiver<bool>);

impl Shutdown {
    /// Installs the handlers at once (inside the runtime).
    fn listen() -> anyhow::Result<Self> {
        let (requested, shutdown) = tokio::sync::watch::channel(false);
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
            let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
                tracing::info!("shutdown requested");
                let _ = requested.send(true);
            });
        }
        #[cfg(not(unix))]
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            let _ = requested.send(true);
        });
        Ok(Shutdown(shutdown))
    }

    /// Completes once a signal has arrived (at once if one already has).
    async fn requested(mut self) {
        let _ = self.0.wait_for(|requested| *requested).await;
    }
}

/// Runs `highwater dump`: each file to stdout; with `--verify`, the problems found are
/// listed on stderr and the command fails.
pub fn dump(args: &DumpArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let options = crate::dump::DumpOptions {
        verify: args.verify,
        deep: args.deep,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut reports = Vec::with_capacity(args.files.len());
    for path in &args.files {
        reports.push(crate::dump::dump_file(path, options, &mut out)?);
    }
    out.flush()?;
    let failed: Vec<_> = reports.iter().filter(|r| !r.passed()).collect();
    if !args.verify || failed.is_empty() {
        return Ok(());
    }
    let mut problems = 0;
    for report in &failed {
        for problem in &report.problems {
            eprintln!("{}: {problem}", report.path.display());
        }
        problems += report.problems.len() + report.omitted;
    }
    anyhow::bail!(
        "verify failed: {problems} problem(s) in {} of {} files",
        failed.len(),
        reports.len()
    )
}

/// Runs `highwater serve`.
pub fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    init_tracing(&args.log_level);
    let map = args.config_map()?;
    if args.strict_config {
        if let Some(error) = config::unknown_keys(&map).into_iter().next() {
            return Err(anyhow::Error::new(error).context("refusing to start (--strict-config)"));
        }
    }
    let config = Arc::new(BrokerConfig::from_map(map)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let shutdown = Shutdown::listen()?;
        // Bound first so that a taken port fails at once; connections wait in the backlog
        // until the broker is ready.
        let listener = match config.roles.broker {
            true => Some(
                tokio::net::TcpListener::bind(config.listener)
                    .await
                    .with_context(|| format!("cannot listen on {}", config.listener))?,
            ),
            false => None,
        };
        run_node(config, listener, shutdown, || {}).await
    })
}

/// Runs `highwater dev`: binds the ports, starts `--nodes` nodes (one, or a real
/// replicated cluster in this process, the quorum and replication over loopback) on a
/// fresh temporary directory, prints the bootstrap address (`host:port`, comma-separated
/// for several nodes) once every node serves, and removes the directory when it stops.
pub fn dev(args: &DevArgs) -> anyhow::Result<()> {
    init_tracing(&args.log_level);
    if args.nodes == 0 || args.nodes > DEV_NODES_MAX {
        anyhow::bail!("--nodes {}: 1 to {DEV_NODES_MAX} nodes", args.nodes);
    }
    let dir = std::env::temp_dir().join(format!("highwater-dev-{}", uuid::Uuid::new_v4()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(run_dev(args, &dir));
    if let Err(error) = std::fs::remove_dir_all(&dir) {
        tracing::warn!(dir = %dir.display(), %error, "cannot remove the dev data directory");
    }
    outcome
}

/// Most nodes `highwater dev --nodes` starts.
const DEV_NODES_MAX: u16 = 9;

/// The config of dev node `node` of `nodes` (1-based), before the user's `--set` keys:
/// a single node has no controller listener; several form a quorum of them all, with
/// every internal topic replicated to up to three of them.
fn dev_config(
    node: usize,
    client: SocketAddr,
    controllers: &[SocketAddr],
    dir: &Path,
) -> ConfigMap {
    let mut map: ConfigMap = DEV_DEFAULTS
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
    map
}

async fn run_dev(args: &DevArgs, dir: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let shutdown = Shutdown::listen()?;
    let nodes = usize::from(args.nodes);
    let mut listeners = Vec::with_capacity(nodes);
    for node in 0..nodes {
        // The first node takes --port; the others (and every controller) a free one.
        let port = if node == 0 { args.port } else { 0 };
        let wanted = format!("{}:{port}", args.host);
        let listener = tokio::net::TcpListener::bind(&wanted)
            .await
            .with_context(|| format!("cannot listen on {wanted}"))?;
        listeners.push(listener);
    }
    let clients: Vec<SocketAddr> = listeners
        .iter()
        .map(|l| l.local_addr())
        .collect::<Result<_, _>>()?;
    let controllers = match nodes {
        1 => clients.clone(),
        _ => free_loopback_addresses(nodes)?,
    };
    let bootstrap: Vec<String> = clients.iter().map(ToString::to_string).collect();
    let bootstrap = bootstrap.join(",");
    let serving = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut runs = Vec::with_capacity(nodes);
    for (i, listener) in listeners.into_iter().enumerate() {
        let mut map = dev_config(i + 1, clients[i], &controllers, dir);
        for pair in &args.overrides {
            let (key, value) = pair
                .split_once('=')
                .with_context(|| format!("--set expects KEY=VALUE, got {pair:?}"))?;
            map.insert(key.trim().to_string(), value.trim().to_string());
        }
        let config = Arc::new(BrokerConfig::from_map(map)?);
        let (serving, bootstrap) = (Arc::clone(&serving), bootstrap.clone());
        runs.push(run_node(
            config,
            Some(listener),
            shutdown.clone(),
            move || {
                let all = serving.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == nodes;
                if all {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{bootstrap}");
                    let _ = out.flush();
                }
            },
        ));
    }
    futures_util::future::try_join_all(runs).await?;
    Ok(())
}

/// `count` free loopback addresses (bound and released: another process could take one
/// in between, which start-up then reports).
fn free_loopback_addresses(count: usize) -> anyhow::Result<Vec<SocketAddr>> {
    let held: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    Ok(held
        .iter()
        .map(|l| l.local_addr())
        .collect::<Result<_, _>>()?)
}

/// Opens the broker on `config`, calls `ready` once it serves, and runs it until
/// `shutdown`. A shutdown requested while the broker opens ends the start there (what was
/// done so far is recovered at the next start, as after a crash).
async fn run_node(
    config: Arc<BrokerConfig>,
    listener: Option<tokio::net::TcpListener>,
    shutdown: Shutdown,
    ready: impl FnOnce(),
) -> anyhow::Result<()> {
    {
        let http = crate::http::bind(&config.http_listeners)
            .await
            .context("cannot start")?;
        let broker = tokio::select! {
            broker = Broker::open(Arc::clone(&config)) => Arc::new(broker.context("cannot start")?),
            () = shutdown.clone().requested() => {
                tracing::info!(node_id = config.node_id, "stopped while starting");
                return Ok(());
            }
        };
        let dirs: Vec<String> = config
            .log_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let controller = config
            .controller_listener
            .map_or_else(|| "none".to_string(), |l| l.to_string());
        tracing::info!(
            "highwater {} started: node {} as {}, Kafka clients on {}, controllers on {}, \
             log.dirs {}, {} partitions",
            env!("CARGO_PKG_VERSION"),
            config.node_id,
            config.roles,
            config.listener,
            controller,
            dirs.join(","),
            broker.replicas.len(),
        );
        let background = Arc::clone(&broker);
        let background = tokio::spawn(async move { background.run_background().await });
        let http: Vec<_> = http
            .into_iter()
            .map(|listener| tokio::spawn(crate::http::serve(Arc::clone(&broker), listener)))
            .collect();
        ready();
        match listener {
            Some(listener) => {
                crate::server::run(Arc::clone(&broker), listener, shutdown.requested()).await
            }
            None => {
                shutdown.requested().await;
                broker.controller.shutdown().await;
            }
        }
        background.abort();
        for task in http {
            task.abort();
        }
        Ok(())
    }
}
