//! highwater: a Kafka wire-protocol compatible broker.
//!
//! Modules are layered; each imports only from the ones below it (see STYLE.md):
//! `server` → `api` → `replica` → `metadata` → `log` → `config`.
#![deny(unsafe_code)]

pub mod log;
