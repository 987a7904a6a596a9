//! The storage engine: a partition's log of segments, its indexes, leader epoch cache,
//! producer state and checkpoint files, laid out on disk as Apache Kafka lays them out.
//!
//! Must not: know about the network, replication or Kafka error codes.

pub mod batch;
pub mod batch_encode;
pub mod batch_rewrite;
pub mod checkpoint;
pub mod cleaned_transactions;
pub mod cleaner;
pub mod cleaner_swap;
pub mod config;
pub mod control;
pub mod epoch_cache;
pub mod error;
pub mod fsync;
pub mod index_file;
pub mod mmap;
pub mod offset_index;
pub mod offset_map;
pub mod partition_log;
pub mod producer_recovery;
pub mod producer_snapshot;
pub mod producer_state;
pub mod records;
pub mod recovery;
pub mod replication;
pub mod retention;
pub mod roll_sync;
pub mod segment;
pub mod segments;
pub mod time_index;
pub mod timestamp_lookup;
pub mod txn_index;

pub use config::{CompactionConfig, LogConfig, OpenOptions};
pub use error::LogError;
pub use partition_log::{AppendInfo, Log};
