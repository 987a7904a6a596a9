//! Errors of configuration loading and validation.

use std::path::PathBuf;

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse config file {path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("invalid value {value:?} for {key}")]
    Invalid { key: &'static str, value: String },
    #[error("unknown configuration key {key}{}", hint(.suggestion))]
    UnknownKey {
        key: String,
        suggestion: Option<&'static str>,
    },
    #[error("invalid value {value:?} for {key}: {reason}")]
    Conflict {
        key: &'static str,
        value: String,
        reason: String,
    },
    #[error(
        "refusing to start: {key} = {value:?} is a security setting highwater does not \
         enforce ({reason}); remove it or use a PLAINTEXT listener"
    )]
    Unenforced {
        key: String,
        value: String,
        reason: String,
    },
    #[error("inconsistent quorum configuration: {reason}")]
    InconsistentQuorum { reason: String },
    #[error("Unknown topic config name: {key}")]
    UnknownTopicConfig { key: String },
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    InvalidTopicConfig {
        key: String,
        value: String,
        reason: String,
    },
}

/// ` (did you mean X?)` when a known key is close to the unknown one.
fn hint(suggestion: &Option<&'static str>) -> String {
    suggestion.map_or_else(String::new, |s| format!(" (did you mean {s}?)"))
}
