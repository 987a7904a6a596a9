//! The follower's fetcher: one Kafka Fetch request (v12, as a replica) per round to a
//! leader, in a fetch session ([`super::fetch_session`]) for every partition this broker
//! follows there, with each partition's log end offset as fetch offset and the epoch of
//! its last batch (an incremental request names only the partitions whose position
//! moved); the answer is appended as is,
//! or, when the leader reports a diverging epoch, the log is truncated where it diverges
//! (Kafka's rule, never to the high watermark) and the next round fetches from there.
//!
//! How requests reach a leader is a [`LeaderLink`]: a TCP connection between brokers, or a
//! scripted in-process network in tests, so the same code runs in both.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::error::ReplicaError;
use super::fetch_session::{FetchSession, Position};
use super::partition::Partition;
use crate::ids::{BrokerId, LeaderEpoch, Offset};

/// The Fetch version followers send: topic names, replica id in the body, last fetched
/// epoch and diverging epoch (KIP-595's truncation without OffsetForLeaderEpoch).
pub const REPLICA_FETCH_VERSION: i16 = 12;
/// Bytes asked per partition and per request in one round.
pub const REPLICA_FETCH_PARTITION_BYTES: i32 = 1 << 20;
pub const REPLICA_FETCH_RESPONSE_BYTES: i32 = 10 << 20;

/// Why a round of fetching did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("leader {leader} is not reachable: {reason}")]
    Unreachable { leader: BrokerId, reason: String },
}

/// Carries a follower's Fetch to a leader and its answer back.
pub trait LeaderLink: Send {
    fn fetch(
        &mut self,
        leader: BrokerId,
        request: FetchRequest,
    ) -> impl Future<Output = Result<FetchResponse, LinkError>> + Send;
}

/// What one round did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    pub appended_bytes: usize,
    /// Of `appended_bytes`, those of partitions under the follower throttle.
    pub throttled_bytes: usize,
    pub truncations: usize,
    pub errors: usize,
}

/// Fetches once from `leader` for `partitions` in `session` and applies the answer.
pub async fn fetch_round<L: LeaderLink>(
    link: &mut L,
    session: &mut FetchSession,
    ids: (BrokerId, BrokerId),
    partitions: &[Arc<Partition>],
    max_wait_ms: i32,
) -> Result<Round, LinkError> {
    session.read_positions(partitions);
    match exchange(link, session, ids, max_wait_ms).await? {
        Some(response) => Ok(apply_answer(session.positions(), ids.1, &response)),
        None => Ok(Round {
            errors: 1,
            ..Round::default()
        }),
    }
}

/// Sends the session's next request and returns the leader's answer (`None`: refused as a
/// whole). A session the leader no longer knows (it restarted, or evicted it) is refused;
/// the request is then sent again at once as a full one that opens a new session.
async fn exchange<L: LeaderLink>(
    link: &mut L,
    session: &mut FetchSession,
    (local_id, leader): (BrokerId, BrokerId),
    max_wait_ms: i32,
) -> Result<Option<FetchResponse>, LinkError> {
    for attempt in 1..=2 {
        let outgoing = session.next_for_positions();
        let request = outgoing.fill(
            FetchRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(local_id.0))
                .with_max_wait_ms(max_wait_ms)
                .with_min_bytes(1)
                .with_max_bytes(REPLICA_FETCH_RESPONSE_BYTES),
        );
        let response = match link.fetch(leader, request).await {
            Ok(response) => response,
            Err(error) => {
                session.failed();
                return Err(error);
            }
        };
        if response.error_code == 0 {
            session.answered(outgoing, response.session_id);
            return Ok(Some(response));
        }
        tracing::debug!(
            %leader,
            error_code = response.error_code,
            session_id = outgoing.session_id,
            session_epoch = outgoing.session_epoch,
            "replica fetch refused as a whole; the next one opens a new session"
        );
        session.failed();
        if attempt == 2 || !outgoing.in_session() {
            break;
        }
    }
    Ok(None)
}

/// Applies each partition of `response`, found through a map, not a scan: a round of
/// thousands of partitions stays linear in their number.
fn apply_answer(
    followed: &[(Arc<Partition>, Position)],
    leader: BrokerId,
    response: &FetchResponse,
) -> Round {
    let mut round = Round::default();
    if response.responses.iter().all(|t| t.partitions.is_empty()) {
        // An idle session's answer: no partition to find among those followed.
        return round;
    }
    let by_name: HashMap<(&str, i32), usize> = followed
        .iter()
        .enumerate()
        .map(|(i, (p, _))| {
            (
                (
                    p.topic_partition.topic.as_str(),
                    p.topic_partition.partition,
                ),
                i,
            )
        })
        .collect();
    for topic in &response.responses {
        for data in &topic.partitions {
            let key = (topic.topic.0.as_str(), data.partition_index);
            let Some(&index) = by_name.get(&key) else {
                continue;
            };
            let (partition, position) = &followed[index];
            match apply(partition, position.current_leader_epoch, data) {
                Ok(Applied::Appended(bytes)) => {
                    round.appended_bytes += bytes;
                    if partition.is_throttled(super::partition::THROTTLED_AS_FOLLOWER) {
                        round.throttled_bytes += bytes;
                    }
                }
                Ok(Applied::Truncated) => round.truncations += 1,
                Err(error) => {
                    round.errors += 1;
                    tracing::debug!(partition = %partition.topic_partition, %leader, %error,
                        "follower fetch failed");
                }
            }
        }
    }
    round
}

enum Applied {
    Appended(usize),
    Truncated,
}

fn apply(
    partition: &Partition,
    fetched_epoch: LeaderEpoch,
    data: &PartitionData,
) -> Result<Applied, FetchError> {
    if data.error_code != 0 {
        return Err(FetchError::Leader {
            code: data.error_code,
        });
    }
    let diverging = &data.diverging_epoch;
    if diverging.epoch >= 0 || diverging.end_offset >= 0 {
        partition.truncate_for_diverging_epoch(
            fetched_epoch,
            LeaderEpoch(diverging.epoch),
            Offset(diverging.end_offset),
        )?;
        return Ok(Applied::Truncated);
    }
    let records = data.records.as_deref().unwrap_or_default();
    partition.append_as_follower(
        fetched_epoch,
        records,
        Offset(data.high_watermark),
        Offset(data.log_start_offset),
    )?;
    Ok(Applied::Appended(records.len()))
}

/// Why one partition of a round failed.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("the leader answered error code {code}")]
    Leader { code: i16 },
    #[error(transparent)]
    Replica(#[from] ReplicaError),
}

impl Partition {
    /// Truncates after the leader reported that this log diverges after `end_offset` of
    /// `epoch` (Kafka's rule): if this log knows `epoch`, to the lesser end of it here and
    /// there; if its nearest lower epoch differs, to that epoch's end here (the next fetch
    /// asks again); if the leader knows nothing, to the high watermark.
    pub fn truncate_for_diverging_epoch(
        &self,
        fetched_epoch: LeaderEpoch,
        epoch: LeaderEpoch,
        end_offset: Offset,
    ) -> Result<bool, ReplicaError> {
        let (local_epoch, local_end, log_end_offset) = {
            let log = self.log();
            let leo = log.log_end_offset();
            let (e, o) = log.epoch_cache().end_offset_for(epoch, leo);
            (e, o, leo)
        };
        let target = if end_offset.0 < 0 {
            self.high_watermark()
        } else if local_epoch.0 < 0 {
            end_offset.min(log_end_offset)
        } else if local_epoch != epoch {
            local_end.min(log_end_offset)
        } else {
            local_end.min(end_offset).min(log_end_offset)
        };
        tracing::info!(partition = %self.topic_partition, %epoch, %end_offset, %target,
            "leader reported a diverging epoch");
        self.truncate_to(fetched_epoch, target)
    }
}

/// The bytes of a follower's Fetch as a Kafka request frame, without the length prefix.
pub fn encode_fetch(
    request: &FetchRequest,
    local_id: BrokerId,
    correlation_id: i32,
) -> bytes::Bytes {
    use kafka_protocol::messages::{ApiKey, RequestHeader};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(REPLICA_FETCH_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(
            crate::faults::broker_client_id(local_id.0),
        )));
    let mut buf = bytes::BytesMut::new();
    let header_version = ApiKey::Fetch.request_header_version(REPLICA_FETCH_VERSION);
    // Encoding into memory only fails for values a version cannot carry; these all fit.
    if let Err(error) = header
        .encode(&mut buf, header_version)
        .and_then(|()| request.encode(&mut buf, REPLICA_FETCH_VERSION))
    {
        tracing::error!(%error, "cannot encode a replica fetch");
    }
    buf.freeze()
}

/// Decodes a Fetch response frame (without its length prefix) of [`REPLICA_FETCH_VERSION`].
pub fn decode_fetch_response(
    mut frame: bytes::Bytes,
    leader: BrokerId,
) -> Result<FetchResponse, LinkError> {
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::{Decodable, HeaderVersion};
    let unreachable = |e: anyhow::Error| LinkError::Unreachable {
        leader,
        reason: format!("bad fetch response: {e}"),
    };
    let header_version = FetchResponse::header_version(REPLICA_FETCH_VERSION);
    ResponseHeader::decode(&mut frame, header_version).map_err(unreachable)?;
    FetchResponse::decode(&mut frame, REPLICA_FETCH_VERSION).map_err(unreachable)
}
