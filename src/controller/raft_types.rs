//! openraft's types for the metadata quorum: records in, record results out. Its own file
//! so that the controller's listener (`rpc.rs`, which carries Raft's messages) and the
//! quorum (which sends them through it) both read it without reading each other.

use std::io::Cursor;

use super::state::{Record, RecordResult};

openraft::declare_raft_types!(
    /// openraft's types for the metadata quorum.
    pub TypeConfig:
        D = Record,
        R = RecordResult,
);
