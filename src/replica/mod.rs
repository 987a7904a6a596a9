//! Partitions hosted by this broker: appends with acks, reads capped at the high
//! watermark, and the wake-ups that let parked fetches answer as soon as data arrives.

pub mod checkpoints;
pub mod cleaner;
pub mod error;
pub mod fetch_session;
pub mod fetcher;
pub mod invariants;
pub mod journal;
pub mod leader_state;
pub mod log_dirs;
pub mod log_mover;
pub mod manager;
pub mod parallel;
pub mod partition;
pub mod quota;
pub mod read_replica;
pub mod replica_fetchers;
pub mod roles;
pub mod tcp_link;

pub use error::ReplicaError;
pub use manager::ReplicaManager;
pub use partition::{IsrChange, Partition, PartitionOffsets, ReplicaState, Role, TopicPartition};
