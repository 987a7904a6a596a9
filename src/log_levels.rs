//! The broker's loggers and their levels, changed while it runs: Kafka's BROKER_LOGGER
//! config resource (`kafka-configs --entity-type broker-loggers`: DescribeConfigs lists the
//! loggers, IncrementalAlterConfigs sets or resets one). A logger is a module of this crate
//! (`highwater::replica`, …) or `root`, the level of everything not named; levels are
//! Kafka's names (TRACE, DEBUG, INFO, WARN, ERROR, OFF; ALL and FATAL read as TRACE and
//! ERROR). The process's log filter is rebuilt from these levels on every change.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use tracing_subscriber::{reload, EnvFilter, Registry};

/// The root logger's name, as Kafka calls it.
pub const ROOT: &str = "root";

/// The loggers listed besides `root`: the crate's modules and the Raft library.
const LOGGERS: &[&str] = &[
    "highwater",
    "highwater::api",
    "highwater::controller",
    "highwater::group",
    "highwater::http",
    "highwater::log",
    "highwater::metadata",
    "highwater::replica",
    "highwater::server",
    "highwater::txn",
    "openraft",
];

/// The levels set: the root's and each named logger's.
struct Levels {
    root: String,
    named: BTreeMap<String, String>,
    /// Swaps the running subscriber's filter (absent when this process installed none of
    /// its own, as in tests: the levels are still kept and described).
    handle: Option<reload::Handle<EnvFilter, Registry>>,
}

fn levels() -> &'static Mutex<Levels> {
    static LEVELS: OnceLock<Mutex<Levels>> = OnceLock::new();
    LEVELS.get_or_init(|| {
        Mutex::new(Levels {
            root: "INFO".into(),
            named: BTreeMap::new(),
            handle: None,
        })
    })
}

/// Why a logger change is refused, in Kafka's words.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LevelError {
    #[error("Logger {0} does not exist!")]
    UnknownLogger(String),
    #[error("Cannot set the log level of {logger} to {level} as it is not a supported log level. Valid log4j levels are ALL, DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN")]
    UnknownLevel { logger: String, level: String },
    #[error("Removing the log level of the root logger is not allowed")]
    RootRemoval,
}

/// Kafka's level name `level` as a tracing level (upper case), if it is one.
fn tracing_level(level: &str) -> Option<&'static str> {
    Some(match level.trim().to_ascii_uppercase().as_str() {
        "ALL" | "TRACE" => "TRACE",
        "DEBUG" => "DEBUG",
        "INFO" => "INFO",
        "WARN" => "WARN",
        "ERROR" | "FATAL" => "ERROR",
        "OFF" => "OFF",
        _ => return None,
    })
}

/// Takes the filter the process starts with (`info,openraft=off`: plain directives of a
/// level or `target=level`; others are kept out of the listing) and installs `handle` to
/// apply later changes through.
pub fn install(filter: &str, handle: reload::Handle<EnvFilter, Registry>) {
    let mut levels = levels().lock().unwrap_or_else(PoisonError::into_inner);
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        match directive.split_once('=') {
            None => {
                if let Some(level) = tracing_level(directive) {
                    levels.root = level.into();
                }
            }
            Some((target, level)) => {
                if let Some(level) = tracing_level(level) {
                    levels.named.insert(target.to_string(), level.into());
                }
            }
        }
    }
    levels.handle = Some(handle);
}

/// Every logger with its effective level (the most specific level set for it or a parent
/// module, else the root's), `root` first.
pub fn describe() -> Vec<(String, String)> {
    let levels = levels().lock().unwrap_or_else(PoisonError::into_inner);
    let mut all = vec![(ROOT.to_string(), levels.root.clone())];
    let named = LOGGERS
        .iter()
        .map(|l| l.to_string())
        .chain(levels.named.keys().cloned());
    let named: std::collections::BTreeSet<String> = named.collect();
    for logger in named {
        let level = effective(&levels, &logger);
        all.push((logger, level));
    }
    all
}

fn effective(levels: &Levels, logger: &str) -> String {
    levels
        .named
        .iter()
        .filter(|(target, _)| {
            logger == target.as_str() || logger.starts_with(&format!("{target}::"))
        })
        .max_by_key(|(target, _)| target.len())
        .map_or_else(|| levels.root.clone(), |(_, level)| level.clone())
}

/// The level `logger` would be set to (None: the root's), or why it cannot be.
pub fn check(logger: &str, level: Option<&str>) -> Result<Option<&'static str>, LevelError> {
    // A logger the start-up filter named (`RUST_LOG=highwater::replica::fetcher=debug`) is
    // listed, so it can be changed too.
    let started_with = || {
        let levels = levels().lock().unwrap_or_else(PoisonError::into_inner);
        levels.named.contains_key(logger)
    };
    let known = logger == ROOT || LOGGERS.contains(&logger) || started_with();
    if !known {
        return Err(LevelError::UnknownLogger(logger.to_string()));
    }
    match level {
        Some(raw) => Ok(Some(tracing_level(raw).ok_or_else(|| {
            LevelError::UnknownLevel {
                logger: logger.to_string(),
                level: raw.to_string(),
            }
        })?)),
        None if logger == ROOT => Err(LevelError::RootRemoval),
        None => Ok(None),
    }
}

/// Sets `logger` to `level` (None: back to the root's level, as Kafka's DELETE does).
pub fn set(logger: &str, level: Option<&str>) -> Result<(), LevelError> {
    let level = check(logger, level)?;
    let mut levels = levels().lock().unwrap_or_else(PoisonError::into_inner);
    match (logger, level) {
        (ROOT, Some(level)) => levels.root = level.into(),
        (_, Some(level)) => {
            levels.named.insert(logger.to_string(), level.into());
        }
        (_, None) => {
            levels.named.remove(logger);
        }
    }
    let directives = filter_string(&levels);
    tracing::info!(logger, level = level.unwrap_or("(root)"), %directives, "log level changed");
    if let Some(handle) = &levels.handle {
        match EnvFilter::try_new(&directives) {
            Ok(filter) => {
                if let Err(error) = handle.reload(filter) {
                    tracing::error!(%error, "cannot apply the new log levels");
                }
            }
            Err(error) => tracing::error!(%error, %directives, "the log levels make no filter"),
        }
    }
    Ok(())
}

/// The filter directives of `levels`: the root level, then each named one.
fn filter_string(levels: &Levels) -> String {
    let mut directives = vec![levels.root.to_ascii_lowercase()];
    for (target, level) in &levels.named {
        directives.push(format!("{target}={}", level.to_ascii_lowercase()));
    }
    directives.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_kafkas_names_and_filters_are_built_from_them() {
        assert_eq!(tracing_level("fatal"), Some("ERROR"));
        assert_eq!(tracing_level("ALL"), Some("TRACE"));
        assert_eq!(tracing_level("VERBOSE"), None);
        let levels = Levels {
            root: "WARN".into(),
            named: [("highwater::replica".to_string(), "DEBUG".to_string())].into(),
            handle: None,
        };
        assert_eq!(effective(&levels, "highwater::replica"), "DEBUG");
        assert_eq!(effective(&levels, "highwater::api"), "WARN");
        assert_eq!(filter_string(&levels), "warn,highwater::replica=debug");
    }
}
