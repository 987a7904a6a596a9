//! highwater: a Kafka wire-protocol compatible broker.
//!
//! Modules are layered; each imports only from the ones below it (`docs/ARCHITECTURE.md`,
//! `docs/STYLE.md`): `cli` → `testkit` → `node` → `server`, `http`, `dump` → `api` → `txn`
//! → `group` → `controller`, `replica` → `metadata` → `log` → `config`, `clock`, `faults`,
//! `log_levels`, `metrics`, `sasl`, `acl`, `wire`, `ids`.
//! Siblings on one level (`server` and `http`, `controller` and `replica`) do not import
//! each other either; `tests/layers.rs` checks it.
//! `dump` (the offline `highwater dump` tool) reads `log`'s file formats; only `cli` uses it.
#![deny(unsafe_code)]

pub mod acl;
pub mod api;
pub mod cli;
pub mod clock;
pub mod config;
pub mod controller;
pub mod dump;
pub mod faults;
pub mod group;
pub mod http;
pub mod ids;
pub mod log;
pub mod log_levels;
pub mod metadata;
pub mod metrics;
pub mod node;
pub mod peer;
pub mod quota;
pub mod replica;
pub mod sasl;
pub mod server;
pub mod testkit;
pub mod tls;
pub mod txn;
pub mod wire;
pub mod x500;
