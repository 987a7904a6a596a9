//! A follower's fetch session with one leader (KIP-227), as Kafka's FetchSessionHandler
//! keeps it: the first request names every partition followed there and opens a session;
//! each later one names only the partitions whose position changed (fetch offset, last
//! fetched epoch, leader epoch) and those no longer followed, and the leader answers only
//! partitions with something new. An idle follower of thousands of partitions then sends
//! and applies a few bytes per round instead of every partition.
//!
//! Any failure — no answer, a session error, an answer without a session — makes the next
//! request a full one: it closes the session it names and opens a new one.
//!
//! The positions are read again only when this broker's replication version moved (see
//! [`super::partition::ReplicationChanges`]) or the partitions followed are others: an
//! idle follower's request is then built without touching a partition.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::FetchRequest;

use super::partition::{Partition, TopicPartition};
use crate::ids::{LeaderEpoch, Offset};

/// The `session_epoch` of a full request (opens a session).
const INITIAL_EPOCH: i32 = 0;

/// Where a follower asked the leader to read one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub fetch_offset: Offset,
    pub last_fetched_epoch: LeaderEpoch,
    pub current_leader_epoch: LeaderEpoch,
}

impl Position {
    /// The partition's position now: its log end and the epoch of its last batch.
    pub fn of(partition: &Partition) -> Position {
        let (last_fetched_epoch, fetch_offset) = partition.last_fetched_epoch();
        Position {
            fetch_offset,
            last_fetched_epoch,
            current_leader_epoch: partition.leader_epoch(),
        }
    }
}

/// The session with one leader, and what the leader holds of each partition in it.
#[derive(Debug, Default)]
pub struct FetchSession {
    /// The leader's id for the session (0: none).
    id: i32,
    /// The epoch of the next request (0: full).
    next_epoch: i32,
    /// Each partition's position as last sent in a request the leader answered.
    held: HashMap<TopicPartition, Position>,
    /// The followed partitions with their positions as last read.
    positions: Vec<(Arc<Partition>, Position)>,
    /// The replication version read before them, and how many times they were read.
    positions_version: Option<u64>,
    positions_reads: u64,
    /// The read of the positions the leader holds all of (a request built from them
    /// was answered), if any.
    held_reads: Option<u64>,
}

/// What one request of a session sends: the partitions named and those forgotten.
#[derive(Debug)]
pub struct Outgoing {
    pub session_id: i32,
    pub session_epoch: i32,
    pub named: Vec<(TopicPartition, Position)>,
    pub forgotten: Vec<TopicPartition>,
    /// The read of the session's positions it was built from.
    positions_read: Option<u64>,
}

impl FetchSession {
    /// Reads the positions of `partitions` (all followed at this leader) unless they were
    /// read at the replication version there is now, for the same partitions.
    pub fn read_positions(&mut self, partitions: &[Arc<Partition>]) {
        let version = partitions.first().map(|p| p.replication_version());
        let same = version.is_some()
            && version == self.positions_version
            && self.positions.len() == partitions.len()
            && self
                .positions
                .iter()
                .zip(partitions)
                .all(|((read, _), p)| Arc::ptr_eq(read, p));
        if same {
            return;
        }
        self.positions = partitions
            .iter()
            .map(|p| (Arc::clone(p), Position::of(p)))
            .collect();
        self.positions_version = version;
        self.positions_reads += 1;
    }

    /// The partitions followed and their positions, as last read.
    pub fn positions(&self) -> &[(Arc<Partition>, Position)] {
        &self.positions
    }

    /// The next request for the positions last read: an incremental one naming nothing,
    /// without comparing them, when the leader holds them all already.
    pub fn next_for_positions(&self) -> Outgoing {
        let reads = Some(self.positions_reads);
        if self.next_epoch != INITIAL_EPOCH && self.held_reads == reads {
            return Outgoing {
                session_id: self.id,
                session_epoch: self.next_epoch,
                named: Vec::new(),
                forgotten: Vec::new(),
                positions_read: reads,
            };
        }
        let followed = self
            .positions
            .iter()
            .map(|(p, at)| (&p.topic_partition, *at));
        Outgoing {
            positions_read: reads,
            ..self.next(followed)
        }
    }

    /// The partitions the next request names (all of them when it is a full one), given
    /// every partition followed at this leader and its position now.
    pub fn next<'a>(
        &self,
        followed: impl Iterator<Item = (&'a TopicPartition, Position)> + Clone,
    ) -> Outgoing {
        let full = self.next_epoch == INITIAL_EPOCH;
        let mut still_held = 0;
        let named = followed
            .clone()
            .filter(|(tp, position)| {
                let held = self.held.get(*tp);
                still_held += usize::from(held.is_some());
                full || held != Some(position)
            })
            .map(|(tp, position)| (tp.clone(), position))
            .collect();
        // Every partition held is still followed unless fewer were found than are held.
        let forgotten = match full || still_held == self.held.len() {
            true => Vec::new(),
            false => {
                let now: HashSet<&TopicPartition> = followed.map(|(tp, _)| tp).collect();
                self.held
                    .keys()
                    .filter(|tp| !now.contains(tp))
                    .cloned()
                    .collect()
            }
        };
        Outgoing {
            session_id: self.id,
            session_epoch: self.next_epoch,
            named,
            forgotten,
            positions_read: None,
        }
    }

    /// Records the leader's answer to `sent`: the session it gave (`session_id`, 0 for
    /// none) when the answer had no top-level error.
    pub fn answered(&mut self, sent: Outgoing, session_id: i32) {
        if session_id == 0 {
            // Answered without a session (the leader keeps none, or had no slot): the
            // next request is full again.
            self.failed();
            self.id = 0;
            return;
        }
        if sent.session_epoch == INITIAL_EPOCH {
            self.held.clear();
        }
        for tp in sent.forgotten {
            self.held.remove(&tp);
        }
        self.held.extend(sent.named);
        self.held_reads = sent.positions_read;
        self.id = session_id;
        self.next_epoch = match self.next_epoch {
            i32::MAX => 1,
            epoch => epoch + 1,
        };
    }

    /// After a failed round (no answer, or a session error): the next request is full and
    /// closes this session on the leader.
    pub fn failed(&mut self) {
        self.next_epoch = INITIAL_EPOCH;
        self.held.clear();
        self.held_reads = None;
    }
}

impl Outgoing {
    /// Whether this request used or closed a session (a refusal may be the session's).
    pub fn in_session(&self) -> bool {
        self.session_id != 0 || self.session_epoch != INITIAL_EPOCH
    }

    /// The Fetch request topics and forgotten topics of this request.
    pub fn topics(&self) -> (Vec<FetchTopic>, Vec<ForgottenTopic>) {
        let mut topics: Vec<FetchTopic> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (tp, position) in &self.named {
            let fetch = FetchPartition::default()
                .with_partition(tp.partition)
                .with_current_leader_epoch(position.current_leader_epoch.0)
                .with_fetch_offset(position.fetch_offset.0)
                .with_last_fetched_epoch(position.last_fetched_epoch.0)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(super::fetcher::REPLICA_FETCH_PARTITION_BYTES);
            let at = *index.entry(tp.topic.as_str()).or_insert_with(|| {
                topics.push(FetchTopic::default().with_topic(crate::wire::topic_name(&tp.topic)));
                topics.len() - 1
            });
            topics[at].partitions.push(fetch);
        }
        let mut forgotten: Vec<ForgottenTopic> = Vec::new();
        for tp in &self.forgotten {
            match forgotten
                .iter_mut()
                .find(|t| t.topic.0.as_str() == tp.topic)
            {
                Some(topic) => topic.partitions.push(tp.partition),
                None => forgotten.push(
                    ForgottenTopic::default()
                        .with_topic(crate::wire::topic_name(&tp.topic))
                        .with_partitions(vec![tp.partition]),
                ),
            }
        }
        (topics, forgotten)
    }

    /// Applies this request's session and partitions to `request`.
    pub fn fill(&self, request: FetchRequest) -> FetchRequest {
        let (topics, forgotten) = self.topics();
        request
            .with_session_id(self.session_id)
            .with_session_epoch(self.session_epoch)
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition {
            topic: "t".into(),
            partition,
        }
    }

    fn at(fetch_offset: i64) -> Position {
        Position {
            fetch_offset: Offset(fetch_offset),
            last_fetched_epoch: LeaderEpoch(0),
            current_leader_epoch: LeaderEpoch(0),
        }
    }

    fn next(session: &FetchSession, followed: &[(TopicPartition, Position)]) -> Outgoing {
        session.next(followed.iter().map(|(tp, p)| (tp, *p)))
    }

    fn named(outgoing: &Outgoing) -> Vec<i32> {
        outgoing.named.iter().map(|(tp, _)| tp.partition).collect()
    }

    #[test]
    fn after_a_full_request_only_changed_and_forgotten_partitions_are_sent() {
        let mut session = FetchSession::default();
        let mut followed = vec![(tp(0), at(0)), (tp(1), at(0)), (tp(2), at(0))];
        let full = next(&session, &followed);
        assert_eq!((full.session_id, full.session_epoch), (0, 0));
        assert_eq!(named(&full), [0, 1, 2]);
        session.answered(full, 77);

        let idle = next(&session, &followed);
        assert_eq!((idle.session_id, idle.session_epoch), (77, 1));
        assert!(
            idle.named.is_empty() && idle.forgotten.is_empty(),
            "{idle:?}"
        );
        session.answered(idle, 77);

        followed[1].1 = at(5);
        followed.pop();
        let moved = next(&session, &followed);
        assert_eq!(moved.session_epoch, 2);
        assert_eq!(named(&moved), [1], "the partition whose offset moved");
        assert_eq!(moved.forgotten, [tp(2)], "the partition no longer followed");
        session.answered(moved, 77);
        let idle = next(&session, &followed);
        assert!(
            idle.named.is_empty() && idle.forgotten.is_empty(),
            "{idle:?}"
        );
    }

    #[test]
    fn a_failure_or_an_answer_without_a_session_makes_the_next_request_full() {
        let mut session = FetchSession::default();
        let followed = vec![(tp(0), at(0)), (tp(1), at(3))];
        session.answered(next(&session, &followed), 9);
        session.failed();
        let full = next(&session, &followed);
        assert_eq!(
            (full.session_id, full.session_epoch),
            (9, 0),
            "closes session 9 and opens another"
        );
        assert_eq!(named(&full), [0, 1]);
        session.answered(full, 0);
        let again = next(&session, &followed);
        assert_eq!((again.session_id, again.session_epoch), (0, 0));
        assert_eq!(named(&again), [0, 1]);
    }
}
