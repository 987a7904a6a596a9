//! Fetch sessions (KIP-227): a consumer or follower that fetches many partitions sends
//! them all once (a full request, `session_epoch` 0) and gets a session id; its next
//! requests (incremental, epochs 1, 2, …) carry only the partitions whose fetch position
//! changed and those it forgets, and the answer only the partitions with something new:
//! records, an error, or a moved high watermark, last stable offset or log start offset.
//!
//! As in Kafka: epoch -1 closes the session named (and asks for none); a full request
//! replaces the session it names; an unknown session id is answered
//! FETCH_SESSION_ID_NOT_FOUND, an epoch out of sequence INVALID_FETCH_SESSION_EPOCH, a
//! session opened with topic ids used by name (or the reverse) FETCH_SESSION_TOPIC_ID_ERROR.
//! A follower's session whose last read found every partition caught up, with nothing to
//! send, is at rest: while this broker's replication version
//! ([`crate::replica::ReplicaManager::replication_version`]) has not moved since, its
//! incremental requests that name no partition are answered without reading any (an idle
//! follower of thousands of partitions otherwise has all of them read twice a second).
//!
//! At most `max.incremental.fetch.session.cache.slots` sessions are kept (0: none, every
//! fetch is answered sessionless); when all are taken, a new session evicts the least
//! recently used one idle for two minutes, else one of lower priority (a consumer's before
//! a follower's, then the one with fewest partitions), else it is answered sessionless.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, TopicName};
use uuid::Uuid;

use super::refusal::Refusal;

/// A session unused this long may be evicted for a new one (Kafka's
/// `min.incremental.fetch.session.eviction.ms`).
const EVICTABLE_AFTER: Duration = Duration::from_secs(120);
/// The `session_epoch` that closes a session, or asks for none.
const FINAL_EPOCH: i32 = -1;
/// The `session_epoch` of a full request that opens a session.
const INITIAL_EPOCH: i32 = 0;
/// Fetch v7 brought sessions, v13 topic ids.
const SESSIONS_VERSION: i16 = 7;
const TOPIC_IDS_VERSION: i16 = 13;

/// The fetch sessions of one broker.
#[derive(Debug)]
pub struct FetchSessions {
    slots: usize,
    sessions: Mutex<HashMap<i32, Session>>,
}

#[derive(Debug)]
struct Session {
    /// In the order they are read: a partition that returned records moves to the end, so
    /// that a response's byte budget reaches every partition in turn.
    partitions: IndexMap<Key, Cached>,
    next_epoch: i32,
    last_used: Instant,
    /// A follower's session, kept before a consumer's.
    follower: bool,
    uses_topic_ids: bool,
    /// Set while a follower's session is at rest.
    rest: Option<Rest>,
}

/// A follower's session at rest: its last read found every partition caught up (the
/// follower's fetch offset at the leader's log end) with nothing to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rest {
    /// This broker's replication version, read before that read.
    pub version: u64,
    /// The last time (ms, the partitions' clock) the version was seen unchanged.
    pub seen_ms: i64,
}

/// A partition as the client names it: by topic id from v13, by name before.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    topic: TopicName,
    topic_id: Uuid,
    partition: i32,
}

#[derive(Debug, Clone)]
struct Cached {
    /// The client's latest position and limits for the partition.
    fetch: FetchPartition,
    sent: Sent,
}

/// What the client was last told of a partition: an incremental answer leaves out a
/// partition whose answer would repeat it without records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
}

/// Nothing told yet (or an error, which is told again until it clears).
const NOTHING_SENT: Sent = Sent {
    high_watermark: -1,
    last_stable_offset: -1,
    log_start_offset: -1,
};

impl Sent {
    fn of(data: &PartitionData) -> Sent {
        Sent {
            high_watermark: data.high_watermark,
            last_stable_offset: data.last_stable_offset,
            log_start_offset: data.log_start_offset,
        }
    }
}

/// How one Fetch uses the sessions, decided before it reads.
#[derive(Debug)]
pub enum SessionUse {
    /// No session: the request's partitions, answered with session id 0.
    None,
    /// A full request that opens a session once it is answered.
    Open,
    /// An incremental request on session `id`, which reads the session's `topics`; a
    /// session woken from rest says until when it rested.
    Incremental {
        id: i32,
        topics: Vec<FetchTopic>,
        rested_until_ms: Option<i64>,
    },
    /// An incremental request naming no partition on session `id`, at rest: answered
    /// without reading while the replication version is `rest.version`, else woken
    /// ([`FetchSessions::wake`]).
    Resting { id: i32, rest: Rest },
}

impl SessionUse {
    /// The partitions to read: the request's, or the whole session's.
    pub fn topics<'a>(&'a self, body: &'a FetchRequest) -> &'a [FetchTopic] {
        match self {
            SessionUse::Incremental { topics, .. } => topics,
            SessionUse::Resting { .. } => &[],
            SessionUse::None | SessionUse::Open => &body.topics,
        }
    }

    /// Until when a session woken from rest rested.
    pub fn rested_until_ms(&self) -> Option<i64> {
        match self {
            SessionUse::Incremental {
                rested_until_ms, ..
            } => *rested_until_ms,
            _ => None,
        }
    }

    /// The session id of an answer that sends nothing (a throttled consumer's, as Kafka's
    /// `getThrottledResponse`): a full request opens no session, an incremental one keeps
    /// its session unchanged.
    pub fn id_sending_nothing(&self) -> i32 {
        match self {
            SessionUse::Incremental { id, .. } | SessionUse::Resting { id, .. } => *id,
            SessionUse::None | SessionUse::Open => 0,
        }
    }
}

impl FetchSessions {
    /// A cache of at most `slots` sessions.
    pub fn new(slots: usize) -> Self {
        FetchSessions {
            slots,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The sessions kept now, and the partitions they hold.
    pub fn counts(&self) -> (usize, usize) {
        let sessions = self.lock();
        let partitions = sessions.values().map(|s| s.partitions.len()).sum();
        (sessions.len(), partitions)
    }

    /// Decides how a Fetch at `version` uses the sessions; an incremental request's
    /// changes (partitions added, updated, forgotten) are applied to its session here.
    pub fn begin(&self, body: &FetchRequest, version: i16) -> Result<SessionUse, Refusal> {
        if version < SESSIONS_VERSION {
            return Ok(SessionUse::None);
        }
        let mut sessions = self.lock();
        if matches!(body.session_epoch, FINAL_EPOCH | INITIAL_EPOCH) {
            if body.session_id != 0 {
                sessions.remove(&body.session_id);
            }
            let open = body.session_epoch == INITIAL_EPOCH && self.slots > 0;
            return Ok(match open {
                true => SessionUse::Open,
                false => SessionUse::None,
            });
        }
        let session = sessions
            .get_mut(&body.session_id)
            .ok_or(Refusal::FetchSessionNotFound)?;
        if session.next_epoch != body.session_epoch {
            return Err(Refusal::FetchSessionEpoch);
        }
        if session.uses_topic_ids != (version >= TOPIC_IDS_VERSION) {
            return Err(Refusal::FetchSessionTopicIds);
        }
        let changes = body.topics.iter().any(|t| !t.partitions.is_empty())
            || body
                .forgotten_topics_data
                .iter()
                .any(|t| !t.partitions.is_empty());
        session.next_epoch = next_epoch(session.next_epoch);
        session.last_used = Instant::now();
        match session.rest {
            Some(rest) if !changes => {
                return Ok(SessionUse::Resting {
                    id: body.session_id,
                    rest,
                })
            }
            _ => session.rest = None,
        }
        for (key, fetch) in requested(&body.topics) {
            session
                .partitions
                .entry(key)
                .and_modify(|cached| cached.fetch = fetch.clone())
                .or_insert_with(|| Cached {
                    fetch: fetch.clone(),
                    sent: NOTHING_SENT,
                });
        }
        for forgotten in &body.forgotten_topics_data {
            for &partition in &forgotten.partitions {
                session.partitions.shift_remove(&Key {
                    topic: forgotten.topic.clone(),
                    topic_id: forgotten.topic_id,
                    partition,
                });
            }
        }
        Ok(SessionUse::Incremental {
            id: body.session_id,
            topics: session.topics(),
            rested_until_ms: None,
        })
    }

    /// A session at rest whose replication version moved: the read of all its partitions,
    /// which were caught up until `seen_ms`. FETCH_SESSION_ID_NOT_FOUND if it is gone
    /// meanwhile (a full request of the same follower replaced it).
    pub fn wake(&self, id: i32, seen_ms: i64) -> Result<SessionUse, Refusal> {
        let mut sessions = self.lock();
        let session = sessions.get_mut(&id).ok_or(Refusal::FetchSessionNotFound)?;
        session.rest = None;
        Ok(SessionUse::Incremental {
            id,
            topics: session.topics(),
            rested_until_ms: Some(seen_ms),
        })
    }

    /// A session at rest stayed so until `seen_ms` (its request was answered without
    /// reading).
    pub fn rested(&self, id: i32, seen_ms: i64) {
        if let Some(rest) = self.lock().get_mut(&id).and_then(|s| s.rest.as_mut()) {
            rest.seen_ms = rest.seen_ms.max(seen_ms);
        }
    }

    /// Completes a Fetch that read `session.topics(body)` and answers `responses` (in the
    /// same order):
    /// opens its session, or leaves out of an incremental answer the partitions with
    /// nothing new; a follower's session found at `rest` is at rest from now. Returns the
    /// session id to answer (0: none).
    pub fn finish(
        &self,
        session: SessionUse,
        body: &FetchRequest,
        responses: &mut Vec<FetchableTopicResponse>,
        (version, follower): (i16, bool),
        rest: Option<Rest>,
    ) -> i32 {
        let read = session.topics(body);
        let rest = rest.filter(|_| follower);
        match &session {
            SessionUse::None => 0,
            SessionUse::Open => self.open(read, responses, (version, follower), rest),
            SessionUse::Incremental { id, .. } | SessionUse::Resting { id, .. } => {
                if let Some(session) = self.lock().get_mut(id) {
                    session.keep_only_news(read, responses);
                    session.rest = rest;
                }
                *id
            }
        }
    }

    fn open(
        &self,
        read: &[FetchTopic],
        responses: &[FetchableTopicResponse],
        (version, follower): (i16, bool),
        rest: Option<Rest>,
    ) -> i32 {
        let mut partitions = IndexMap::new();
        for ((key, fetch), data) in requested(read).zip(answered(responses)) {
            let sent = sent_after(data);
            partitions.insert(
                key,
                Cached {
                    fetch: fetch.clone(),
                    sent,
                },
            );
        }
        let session = Session {
            partitions,
            next_epoch: 1,
            last_used: Instant::now(),
            follower,
            uses_topic_ids: version >= TOPIC_IDS_VERSION,
            rest,
        };
        let mut sessions = self.lock();
        if sessions.len() >= self.slots && !evict_for(&mut sessions, &session) {
            tracing::debug!(
                slots = self.slots,
                "fetch session cache full; answering sessionless"
            );
            return 0;
        }
        let id = loop {
            let id = (Uuid::new_v4().as_u128() as u32 & 0x7fff_ffff) as i32;
            if id != 0 && !sessions.contains_key(&id) {
                break id;
            }
        };
        sessions.insert(id, session);
        id
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i32, Session>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Session {
    /// Every partition of the session, grouped by topic in the session's order.
    fn topics(&self) -> Vec<FetchTopic> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for (key, cached) in &self.partitions {
            let same = topics
                .last()
                .is_some_and(|t| t.topic == key.topic && t.topic_id == key.topic_id);
            if !same {
                topics.push(
                    FetchTopic::default()
                        .with_topic(key.topic.clone())
                        .with_topic_id(key.topic_id),
                );
            }
            if let Some(topic) = topics.last_mut() {
                topic.partitions.push(cached.fetch.clone());
            }
        }
        topics
    }

    /// Drops from `responses` the partitions with nothing new for the client, records
    /// what the others tell it, and moves those that returned records to the end.
    fn keep_only_news(&mut self, read: &[FetchTopic], responses: &mut Vec<FetchableTopicResponse>) {
        let mut returned_records = Vec::new();
        for (topic, response) in read.iter().zip(responses.iter_mut()) {
            let mut partitions = topic.partitions.iter();
            response.partitions.retain(|data| {
                let Some(fetch) = partitions.next() else {
                    return true;
                };
                let key = key_of(topic, fetch);
                let Some(cached) = self.partitions.get_mut(&key) else {
                    return true;
                };
                let has_records = data.records.as_ref().is_some_and(|r| !r.is_empty());
                let news = has_records
                    || data.error_code != 0
                    || data.diverging_epoch.epoch >= 0
                    || Sent::of(data) != cached.sent;
                cached.sent = sent_after(data);
                if has_records {
                    returned_records.push(key);
                }
                news
            });
        }
        responses.retain(|topic| !topic.partitions.is_empty());
        for key in returned_records {
            if let Some(cached) = self.partitions.shift_remove(&key) {
                self.partitions.insert(key, cached);
            }
        }
    }
}

/// What the client is told by `data`: an error is told again until it clears.
fn sent_after(data: &PartitionData) -> Sent {
    match data.error_code {
        0 => Sent::of(data),
        _ => NOTHING_SENT,
    }
}

fn key_of(topic: &FetchTopic, fetch: &FetchPartition) -> Key {
    Key {
        topic: topic.topic.clone(),
        topic_id: topic.topic_id,
        partition: fetch.partition,
    }
}

/// Every partition of `topics` with its key, in order.
fn requested(topics: &[FetchTopic]) -> impl Iterator<Item = (Key, &FetchPartition)> {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (key_of(t, p), p)))
}

/// Every partition answered, in order.
fn answered(responses: &[FetchableTopicResponse]) -> impl Iterator<Item = &PartitionData> {
    responses.iter().flat_map(|t| t.partitions.iter())
}

/// The epoch after `epoch`: 1 again after `i32::MAX` (0 and -1 have their own meaning).
fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        i32::MAX => 1,
        e => e + 1,
    }
}

/// Makes room for `new` in a full cache; false when no session may give way to it.
fn evict_for(sessions: &mut HashMap<i32, Session>, new: &Session) -> bool {
    let priority = |s: &Session| (s.follower, s.partitions.len());
    let stale = sessions
        .iter()
        .filter(|(_, s)| s.last_used.elapsed() >= EVICTABLE_AFTER)
        .min_by_key(|(_, s)| s.last_used)
        .map(|(id, _)| *id);
    let weaker = || {
        sessions
            .iter()
            .filter(|(_, s)| priority(s) < priority(new))
            .min_by_key(|(_, s)| (priority(s), s.last_used))
            .map(|(id, _)| *id)
    };
    match stale.or_else(weaker) {
        Some(id) => {
            tracing::debug!(
                session_id = id,
                "fetch session evicted for a new one (cache full)"
            );
            sessions.remove(&id);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn data(error_code: i16, high_watermark: i64) -> PartitionData {
        PartitionData::default()
            .with_partition_index(0)
            .with_error_code(error_code)
            .with_high_watermark(high_watermark)
            .with_records(Some(Bytes::new()))
    }

    fn opened(sessions: &FetchSessions) -> (i32, FetchRequest) {
        let topic = FetchTopic::default()
            .with_topic(TopicName(
                kafka_protocol::protocol::StrBytes::from_static_str("t"),
            ))
            .with_partitions(vec![FetchPartition::default().with_partition(0)]);
        let body = FetchRequest::default()
            .with_session_epoch(INITIAL_EPOCH)
            .with_topics(vec![topic]);
        let open = sessions.begin(&body, 12).expect("open");
        let mut answer = vec![FetchableTopicResponse::default().with_partitions(vec![data(0, 5)])];
        let id = sessions.finish(open, &body, &mut answer, (12, false), None);
        (id, body.with_topics(vec![]).with_session_id(id))
    }

    /// Answers incremental request `epoch` with `answer` for the one partition; returns
    /// whether the partition was kept in the answer.
    fn told(
        sessions: &FetchSessions,
        body: &FetchRequest,
        epoch: i32,
        answer: PartitionData,
    ) -> bool {
        let body = body.clone().with_session_epoch(epoch);
        let used = sessions.begin(&body, 12).expect("incremental");
        let mut responses = vec![FetchableTopicResponse::default().with_partitions(vec![answer])];
        sessions.finish(used, &body, &mut responses, (12, false), None);
        !responses.is_empty()
    }

    #[test]
    fn an_error_is_told_until_it_clears_and_then_the_partition_once_more() {
        let sessions = FetchSessions::new(10);
        let (id, body) = opened(&sessions);
        assert_ne!(id, 0);
        assert!(!told(&sessions, &body, 1, data(0, 5)), "nothing new");
        assert!(told(&sessions, &body, 2, data(6, -1)), "an error");
        assert!(told(&sessions, &body, 3, data(6, -1)), "the error again");
        assert!(told(&sessions, &body, 4, data(0, 5)), "cleared: told again");
        assert!(!told(&sessions, &body, 5, data(0, 5)));
        assert!(
            told(&sessions, &body, 6, data(0, 6)),
            "a moved high watermark"
        );
        assert_eq!(sessions.counts(), (1, 1));
    }

    #[test]
    fn the_epoch_after_the_largest_is_one() {
        assert_eq!(next_epoch(1), 2);
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
