//! highwater: a Kafka wire-protocol compatible broker.
//!
//! Modules are layered; each imports only from the ones below it (see STYLE.md):
//! `cli` → `server` → `api` → `controller`, `replica` → `metadata` → `log` → `config`.
#![deny(unsafe_code)]

pub mod api;
pub mod cli;
pub mod config;
pub mod controller;
pub mod log;
pub mod metadata;
pub mod replica;
pub mod server;
