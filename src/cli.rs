//! Command-line interface: `highwater serve --config FILE`, with flags that override keys
//! of the file, `highwater dev` (a throwaway test broker) and `highwater dump FILE...`. Loads configuration and starts the broker, or
//! hands the files to [`crate::dump`]; no logic of its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::config::{self, BrokerConfig, ConfigMap};
use crate::node::{self, Node, Shutdown};
use crate::testkit::{Cluster, Options};

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
    /// Serve the fault API here (`POST /faults/...`: kill, stop and restart nodes, cut
    /// or delay links, fail or drop requests; see `highwater::testkit`).
    #[arg(long, value_name = "HOST:PORT")]
    pub http: Option<SocketAddr>,
    /// Any other key, as key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Log filter when RUST_LOG is not set.
    #[arg(long, default_value = "warn")]
    pub log_level: String,
}

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

/// Flags of `serve`. Each named flag overrides the Kafka key it names.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// TOML file with Kafka config keys (e.g. config/server.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Address to listen on, e.g. 127.0.0.1:9092 (Kafka's listeners).
    #[arg(long)]
    pub listeners: Option<String>,
    /// Address clients are told to use (Kafka's advertised.listeners).
    #[arg(long)]
    pub advertised_listeners: Option<String>,
    /// Data directory (Kafka's log.dirs).
    #[arg(long)]
    pub log_dirs: Option<String>,
    /// This node's id (Kafka's node.id).
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

/// Raises the soft limit on open files to the hard limit, as the JVM does for Kafka: every
/// partition holds its active segment's log open (and its two indexes while they take
/// entries), so a shell's soft limit of 1,024 would otherwise fail a log directory at a few
/// hundred partitions.
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    if limit.current >= limit.maximum {
        return;
    }
    let raised = rustix::process::Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::debug!(from = ?limit.current, to = ?limit.maximum, "open-file limit raised")
        }
        Err(error) => tracing::warn!(soft = ?limit.current, hard = ?limit.maximum, %error,
            "cannot raise the open-file limit; many partitions may exhaust it"),
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
    raise_open_file_limit();
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
        let shutdown = Shutdown::on_signals()?;
        // Bound first so that a taken port fails at once; connections wait in the backlog
        // until the broker is ready.
        let mut listeners = Vec::with_capacity(config.listeners.len());
        for listener in config.listeners.iter().filter(|_| config.roles.broker) {
            let socket = tokio::net::TcpListener::bind(listener.address)
                .await
                .with_context(|| {
                    format!("cannot listen on {} ({})", listener.address, listener.name)
                })?;
            listeners.push(socket);
        }
        let node = Node {
            config,
            listeners,
            faults: Default::default(),
        };
        node::run(node, shutdown, |_| {}).await
    })
}

/// Runs `highwater dev`: a [`Cluster`] of `--nodes` nodes (one, or a real replicated
/// cluster in this process, the quorum and replication over loopback) on a fresh
/// temporary directory; prints the bootstrap address (`host:port`, comma-separated for
/// several nodes) once every node serves, serves the fault API on `--http`, and stops
/// every node cleanly (and removes the directory) on SIGTERM or ctrl-c.
pub fn dev(args: &DevArgs) -> anyhow::Result<()> {
    init_tracing(&args.log_level);
    raise_open_file_limit();
    let mut settings = Vec::with_capacity(args.overrides.len());
    for pair in &args.overrides {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("--set expects KEY=VALUE, got {pair:?}"))?;
        settings.push((key.trim().to_string(), value.trim().to_string()));
    }
    let options = Options {
        nodes: args.nodes,
        host: args.host.clone(),
        port: args.port,
        settings,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(run_dev(options, args.http))
}

async fn run_dev(options: Options, http: Option<SocketAddr>) -> anyhow::Result<()> {
    use std::io::Write;
    let shutdown = Shutdown::on_signals()?;
    let control = match http {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("--http {address}: cannot listen"))?,
        ),
        None => None,
    };
    let cluster = tokio::select! {
        cluster = Cluster::start_with(options) => cluster?,
        () = shutdown.clone().requested() => return Ok(()),
    };
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", cluster.bootstrap());
        let _ = out.flush();
    }
    let control = control.map(|listener| {
        let routes: Arc<dyn crate::http::Control> = Arc::new(cluster.control());
        tokio::spawn(crate::http::serve_control(routes, listener))
    });
    shutdown.requested().await;
    if let Some(task) = control {
        task.abort();
        let _ = task.await;
    }
    cluster.shutdown().await
}
