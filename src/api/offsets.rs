//! Committed offsets of groups: OffsetCommit, OffsetFetch (one group before v8, batched
//! from v8) and OffsetDelete. Partitions of topics that do not exist are refused with
//! UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees them, as in Kafka.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse,
};

use super::errors::refusal_error;
use super::groups::log_group_error;
use super::refusal::Refusal;
use super::{str_bytes, topic_name, Broker, HandlerError, Outcome, Request};
use crate::acl::{Operation, ResourceType};
use crate::group::{CommittedOffset, Committer, GroupError, OffsetCommit, PartitionResults};
use crate::metadata::MetadataImage;

/// OffsetFetch v8+ asks for several groups at once.
const FETCH_BATCHED_VERSION: i16 = 8;
/// OffsetFetch v2+ has a top-level error code.
const FETCH_TOP_LEVEL_ERROR_VERSION: i16 = 2;

/// Items per topic, topics in first-seen order.
type ByTopic<T> = Vec<(String, Vec<(i32, T)>)>;

/// Partitions named by topic and index.
type Partitions = Vec<(String, i32)>;

fn group_by_topic<T>(items: impl IntoIterator<Item = (String, i32, T)>) -> ByTopic<T> {
    let mut topics: ByTopic<T> = Vec::new();
    for (topic, partition, item) in items {
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, partitions)) => partitions.push((partition, item)),
            None => topics.push((topic, vec![(partition, item)])),
        }
    }
    topics
}

fn partition_exists(image: &MetadataImage, topic: &str, partition: i32) -> bool {
    image
        .topic(topic)
        .is_some_and(|t| t.partition(partition).is_some())
}

/// Per-topic error codes of a commit or delete: each partition's own, or the group-level
/// refusal (logged once) for every partition asked for; refused partitions last.
fn by_topic(
    request: &Request,
    group: &str,
    results: Result<PartitionResults, GroupError>,
    wanted: Partitions,
    refused: Vec<(String, i32, i16)>,
) -> ByTopic<i16> {
    let mut codes: Vec<(String, i32, i16)> = match results {
        Ok(results) => results
            .into_iter()
            .map(|(topic, partition, result)| {
                let code = match result {
                    Ok(()) => 0,
                    Err(error) => log_group_error(request, group, &error).code(),
                };
                (topic, partition, code)
            })
            .collect(),
        Err(error) => {
            let code = log_group_error(request, group, &error).code();
            wanted.into_iter().map(|(t, p)| (t, p, code)).collect()
        }
    };
    codes.extend(refused);
    group_by_topic(codes)
}

/// Splits the partitions of a request into those the principal may use with `operation`
/// (READ for a commit or delete) that exist, and the others with their refusal: topics
/// it may not use TOPIC_AUTHORIZATION_FAILED, unknown ones UNKNOWN_TOPIC_OR_PARTITION.
fn known_partitions<'a>(
    broker: &Broker,
    request: &Request,
    operation: Operation,
    partitions: impl Iterator<Item = (String, i32)> + 'a,
) -> (Partitions, Vec<(String, i32, i16)>) {
    let image = broker.image();
    let mut known = Vec::new();
    let mut refused = Vec::new();
    for (topic, partition) in partitions {
        let code = if !broker.authorize(request, operation, (ResourceType::Topic, &topic)) {
            refusal_error(Refusal::TopicAuthorizationFailed).code()
        } else if !partition_exists(&image, &topic, partition) {
            refusal_error(Refusal::UnknownTopic).code()
        } else {
            known.push((topic, partition));
            continue;
        };
        refused.push((topic, partition, code));
    }
    (known, refused)
}

/// Answers OffsetCommit.
pub async fn offset_commit(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: OffsetCommitRequest = request.decode()?;
    let group = body.group_id.0.to_string();
    let asked = body.topics.iter().flat_map(|t| {
        t.partitions
            .iter()
            .map(|p| (t.name.0.to_string(), p.partition_index))
    });
    let (known, refused) = known_partitions(broker, request, Operation::Read, asked);
    let commits: Vec<OffsetCommit> = body
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), p)))
        .filter(|(name, p)| known.contains(&(name.clone(), p.partition_index)))
        .map(|(name, p)| OffsetCommit {
            topic: name,
            partition: p.partition_index,
            offset: p.committed_offset,
            leader_epoch: p.committed_leader_epoch,
            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
        })
        .collect();
    let committer = Committer {
        member_id: body.member_id.to_string(),
        group_instance_id: body.group_instance_id.as_ref().map(|i| i.to_string()),
        generation_id: body.generation_id_or_member_epoch,
        api_version: request.version(),
        transactional: false,
    };
    let wanted = commits
        .iter()
        .map(|c| (c.topic.clone(), c.partition))
        .collect();
    let result = match commits.is_empty() {
        true => Ok(Vec::new()),
        false => {
            broker
                .groups
                .commit_offsets(&broker.replicas, &group, &committer, commits)
                .await
        }
    };
    let topics = by_topic(request, &group, result, wanted, refused)
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, code)| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(index)
                        .with_error_code(code)
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(partitions)
        })
        .collect();
    request.respond(&OffsetCommitResponse::default().with_topics(topics))
}

/// Answers OffsetDelete.
pub async fn offset_delete(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: OffsetDeleteRequest = request.decode()?;
    let group = body.group_id.0.to_string();
    if !broker.authorize(request, Operation::Delete, (ResourceType::Group, &group)) {
        let code = refusal_error(Refusal::GroupAuthorizationFailed).code();
        return request.respond(&OffsetDeleteResponse::default().with_error_code(code));
    }
    let asked = body.topics.iter().flat_map(|t| {
        t.partitions
            .iter()
            .map(|p| (t.name.0.to_string(), p.partition_index))
    });
    let (known, unknown) = known_partitions(broker, request, Operation::Read, asked);
    let result = broker
        .groups
        .delete_offsets(&broker.replicas, &group, known.clone())
        .await;
    let top_level = match &result {
        Err(error) => log_group_error(request, &group, error).code(),
        Ok(_) => 0,
    };
    if top_level != 0 {
        return request.respond(&OffsetDeleteResponse::default().with_error_code(top_level));
    }
    let topics = by_topic(request, &group, result, known, unknown)
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, code)| {
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(index)
                        .with_error_code(code)
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(partitions)
        })
        .collect();
    request.respond(&OffsetDeleteResponse::default().with_topics(topics))
}

/// One partition's committed offset (None: nothing committed), or why it is not told:
/// UNSTABLE_OFFSET_COMMIT while a transactional commit of it awaits its marker and the
/// client asked for stable offsets (KIP-447 `require_stable`).
type FetchedOffset = Result<Option<CommittedOffset>, ResponseError>;

/// One group's answer to OffsetFetch: offsets per topic, or the group-level error.
type FetchedGroup = Result<ByTopic<FetchedOffset>, ResponseError>;

fn fetch_group(
    broker: &Broker,
    request: &Request,
    group: &str,
    (member, require_stable): (Option<(&str, i32)>, bool),
    wanted: Option<Partitions>,
) -> FetchedGroup {
    if !broker.authorize(request, Operation::Describe, (ResourceType::Group, group)) {
        return Err(refusal_error(Refusal::GroupAuthorizationFailed));
    }
    // Topics the principal may not describe: refused where asked for, left out of "all".
    let all = wanted.is_none();
    let fetched = broker
        .groups
        .fetch_offsets(group, member, wanted)
        .map_err(|error| log_group_error(request, group, &error))?;
    let described =
        |topic: &str| broker.authorize(request, Operation::Describe, (ResourceType::Topic, topic));
    Ok(group_by_topic(fetched.into_iter().filter_map(
        |((topic, partition), offset)| {
            let allowed = described(&topic);
            if all && !allowed {
                return None;
            }
            let unstable =
                require_stable && broker.groups.has_pending_offset(group, &topic, partition);
            let offset = match (allowed, unstable) {
                (false, _) => Err(refusal_error(Refusal::TopicAuthorizationFailed)),
                (true, true) => Err(refusal_error(Refusal::UnstableOffsetCommit)),
                (true, false) => Ok(offset),
            };
            Some((topic, partition, offset))
        },
    )))
}

/// (offset, leader epoch, metadata, error code) of a partition's answer.
fn fetched_fields(offset: FetchedOffset) -> (i64, i32, String, i16) {
    match offset {
        Ok(Some(o)) => (o.offset, o.leader_epoch, o.metadata, 0),
        Ok(None) => (-1, -1, String::new(), 0),
        Err(code) => (-1, -1, String::new(), code.code()),
    }
}

/// Answers OffsetFetch.
pub fn offset_fetch(broker: &Broker, request: &Request) -> Result<Outcome, HandlerError> {
    let body: OffsetFetchRequest = request.decode()?;
    if request.version() >= FETCH_BATCHED_VERSION {
        let groups = body
            .groups
            .iter()
            .map(|g| {
                let group = g.group_id.0.to_string();
                let wanted = g.topics.as_ref().map(|topics| {
                    topics
                        .iter()
                        .flat_map(|t| {
                            t.partition_indexes
                                .iter()
                                .map(|p| (t.name.0.to_string(), *p))
                        })
                        .collect()
                });
                let member = g.member_id.as_ref().map(|m| (m.as_str(), g.member_epoch));
                batched_group(
                    g.group_id.clone(),
                    fetch_group(
                        broker,
                        request,
                        &group,
                        (member, body.require_stable),
                        wanted,
                    ),
                )
            })
            .collect();
        return request.respond(&OffsetFetchResponse::default().with_groups(groups));
    }
    let group = body.group_id.0.to_string();
    let wanted = body.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(|p| (t.name.0.to_string(), *p))
            })
            .collect()
    });
    let fetched = fetch_group(
        broker,
        request,
        &group,
        (None, body.require_stable),
        wanted.clone(),
    );
    request.respond(&single_group(request.version(), fetched, wanted))
}

fn batched_group(
    group_id: kafka_protocol::messages::GroupId,
    fetched: FetchedGroup,
) -> OffsetFetchResponseGroup {
    let response = OffsetFetchResponseGroup::default().with_group_id(group_id);
    let topics = match fetched {
        Err(code) => return response.with_error_code(code.code()),
        Ok(topics) => topics,
    };
    let topics = topics
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, offset)| {
                    let (committed, epoch, metadata, code) = fetched_fields(offset);
                    OffsetFetchResponsePartitions::default()
                        .with_partition_index(index)
                        .with_committed_offset(committed)
                        .with_committed_leader_epoch(epoch)
                        .with_metadata(Some(str_bytes(&metadata)))
                        .with_error_code(code)
                })
                .collect();
            OffsetFetchResponseTopics::default()
                .with_name(topic_name(&topic))
                .with_partitions(partitions)
        })
        .collect();
    response.with_topics(topics)
}

/// The v1-7 answer; v1 has no top-level error, so a group-level error goes on every
/// partition asked for.
fn single_group(
    version: i16,
    fetched: FetchedGroup,
    wanted: Option<Partitions>,
) -> OffsetFetchResponse {
    let (topics, code) = match fetched {
        Ok(topics) => (topics, 0),
        Err(code) if version < FETCH_TOP_LEVEL_ERROR_VERSION => {
            let none = wanted
                .unwrap_or_default()
                .into_iter()
                .map(|(t, p)| (t, p, Ok(None)));
            let topics = group_by_topic(none);
            (topics, code.code())
        }
        Err(code) => return OffsetFetchResponse::default().with_error_code(code.code()),
    };
    let partition_code = match version < FETCH_TOP_LEVEL_ERROR_VERSION {
        true => code,
        false => 0,
    };
    let topics = topics
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, offset)| {
                    let (committed, epoch, metadata, own_code) = fetched_fields(offset);
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(index)
                        .with_committed_offset(committed)
                        .with_committed_leader_epoch(epoch)
                        .with_metadata(Some(str_bytes(&metadata)))
                        .with_error_code(if own_code != 0 {
                            own_code
                        } else {
                            partition_code
                        })
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}
