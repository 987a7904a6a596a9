//! The `highwater` binary.

use clap::Parser;
use highwater::cli::{Cli, Command};

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Serve(args) => highwater::cli::serve(&args),
        Command::Dump(args) => highwater::cli::dump(&args),
    }
}
