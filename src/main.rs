//! The `highwater` binary.

use std::process::ExitCode;

use clap::Parser;
use highwater::cli::{Cli, Command};

/// Runs the command; an error that stops it is printed as one line with its causes (never
/// a backtrace, whatever RUST_BACKTRACE says), and the exit code is 1.
fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Serve(args) => highwater::cli::serve(&args),
        Command::Dump(args) => highwater::cli::dump(&args),
        Command::Dev(args) => highwater::cli::dev(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("highwater: {error:#}");
            ExitCode::FAILURE
        }
    }
}
