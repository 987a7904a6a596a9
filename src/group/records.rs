//! The records the group coordinator keeps in `__consumer_offsets`, in Apache Kafka's own
//! key and value layouts so that Kafka's tools can read the topic: offset commits (key
//! version 1, value version 3), classic group metadata (key version 2, value version 3) and
//! the epoch of a KIP-848 consumer group (key version 3, value version 0).
//! A `None` value is a tombstone. Pure encoding and decoding, no state.
//!
//! Invariant: every length read from a record is checked against the bytes left before
//! anything is allocated.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::error::RecordError;

/// Key version of an offset commit (Kafka's `OffsetCommitKey`, versions 0 and 1 alike).
const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// Key version of a classic group's metadata (Kafka's `GroupMetadataKey`).
const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// Key version of a consumer group's metadata (Kafka's `ConsumerGroupMetadataKey`).
const CONSUMER_GROUP_METADATA_KEY_VERSION: i16 = 3;
/// Value version of a consumer group's metadata (a flexible version: tagged fields follow).
const CONSUMER_GROUP_METADATA_VALUE_VERSION: i16 = 0;
/// Value version of an offset commit written here (has the leader epoch, no expiry).
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// Value version of group metadata written here (has static member instance ids).
const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// Which group partition an offset belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffsetKey {
    pub group: String,
    pub topic: String,
    pub partition: i32,
}

/// A committed offset with what came with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// One member of a classic group as persisted after a rebalance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A classic group's state after a rebalance (or when it became empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGroup {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp_ms: i64,
    pub members: Vec<StoredMember>,
}

/// A decoded `__consumer_offsets` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorRecord {
    Offset(OffsetKey, Option<CommittedOffset>),
    Group(String, Option<StoredGroup>),
    /// A KIP-848 consumer group and its group epoch (its members are not persisted).
    ConsumerGroup(String, Option<i32>),
}

impl CoordinatorRecord {
    /// The record's key and value bytes.
    pub fn encode(&self) -> (Bytes, Option<Bytes>) {
        match self {
            CoordinatorRecord::Offset(key, value) => {
                (encode_offset_key(key), value.as_ref().map(encode_offset))
            }
            CoordinatorRecord::Group(group, value) => {
                (encode_group_key(group), value.as_ref().map(encode_group))
            }
            CoordinatorRecord::ConsumerGroup(group, epoch) => (
                encode_key(CONSUMER_GROUP_METADATA_KEY_VERSION, group),
                epoch.map(encode_consumer_group),
            ),
        }
    }

    /// Decodes a record; `Ok(None)` for key versions this coordinator does not keep.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Self>, RecordError> {
        let mut key = key;
        let version = read_i16(&mut key)?;
        match version {
            0 | OFFSET_COMMIT_KEY_VERSION => {
                let offset_key = OffsetKey {
                    group: read_string(&mut key)?,
                    topic: read_string(&mut key)?,
                    partition: read_i32(&mut key)?,
                };
                let value = value.map(decode_offset).transpose()?;
                Ok(Some(CoordinatorRecord::Offset(offset_key, value)))
            }
            GROUP_METADATA_KEY_VERSION => {
                let group = read_string(&mut key)?;
                let value = value.map(decode_group).transpose()?;
                Ok(Some(CoordinatorRecord::Group(group, value)))
            }
            CONSUMER_GROUP_METADATA_KEY_VERSION => {
                let group = read_string(&mut key)?;
                let epoch = value.map(decode_consumer_group).transpose()?;
                Ok(Some(CoordinatorRecord::ConsumerGroup(group, epoch)))
            }
            _ => Ok(None),
        }
    }
}

fn encode_offset_key(key: &OffsetKey) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(OFFSET_COMMIT_KEY_VERSION);
    put_string(&mut buf, &key.group);
    put_string(&mut buf, &key.topic);
    buf.put_i32(key.partition);
    buf.freeze()
}

fn encode_group_key(group: &str) -> Bytes {
    encode_key(GROUP_METADATA_KEY_VERSION, group)
}

fn encode_key(version: i16, group: &str) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    put_string(&mut buf, group);
    buf.freeze()
}

/// Kafka's ConsumerGroupMetadataValue v0: the epoch, then no tagged fields.
fn encode_consumer_group(epoch: i32) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(CONSUMER_GROUP_METADATA_VALUE_VERSION);
    buf.put_i32(epoch);
    buf.put_u8(0);
    buf.freeze()
}

/// The epoch of a ConsumerGroupMetadataValue; its tagged fields (a metadata hash, a
/// creation time) are not kept.
fn decode_consumer_group(mut value: &[u8]) -> Result<i32, RecordError> {
    let version = read_i16(&mut value)?;
    if version != CONSUMER_GROUP_METADATA_VALUE_VERSION {
        return Err(RecordError::UnknownVersion { version });
    }
    read_i32(&mut value)
}

fn encode_offset(value: &CommittedOffset) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(OFFSET_COMMIT_VALUE_VERSION);
    buf.put_i64(value.offset);
    buf.put_i32(value.leader_epoch);
    put_string(&mut buf, &value.metadata);
    buf.put_i64(value.commit_timestamp_ms);
    buf.freeze()
}

fn decode_offset(mut value: &[u8]) -> Result<CommittedOffset, RecordError> {
    let version = read_i16(&mut value)?;
    if !(0..=OFFSET_COMMIT_VALUE_VERSION).contains(&version) {
        return Err(RecordError::UnknownVersion { version });
    }
    let offset = read_i64(&mut value)?;
    let leader_epoch = if version >= 3 {
        read_i32(&mut value)?
    } else {
        -1
    };
    let metadata = read_string(&mut value)?;
    let commit_timestamp_ms = read_i64(&mut value)?;
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

fn encode_group(value: &StoredGroup) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(GROUP_METADATA_VALUE_VERSION);
    put_string(&mut buf, &value.protocol_type);
    buf.put_i32(value.generation);
    put_nullable_string(&mut buf, value.protocol.as_deref());
    put_nullable_string(&mut buf, value.leader.as_deref());
    buf.put_i64(value.state_timestamp_ms);
    buf.put_i32(value.members.len() as i32);
    for member in &value.members {
        put_string(&mut buf, &member.member_id);
        put_nullable_string(&mut buf, member.group_instance_id.as_deref());
        put_string(&mut buf, &member.client_id);
        put_string(&mut buf, &member.client_host);
        buf.put_i32(member.rebalance_timeout_ms);
        buf.put_i32(member.session_timeout_ms);
        put_bytes(&mut buf, &member.subscription);
        put_bytes(&mut buf, &member.assignment);
    }
    buf.freeze()
}

fn decode_group(mut value: &[u8]) -> Result<StoredGroup, RecordError> {
    let version = read_i16(&mut value)?;
    if !(0..=GROUP_METADATA_VALUE_VERSION).contains(&version) {
        return Err(RecordError::UnknownVersion { version });
    }
    let protocol_type = read_string(&mut value)?;
    let generation = read_i32(&mut value)?;
    let protocol = read_nullable_string(&mut value)?;
    let leader = read_nullable_string(&mut value)?;
    let state_timestamp_ms = if version >= 2 {
        read_i64(&mut value)?
    } else {
        -1
    };
    let count = read_i32(&mut value)?;
    // Each member takes at least 26 bytes: a bound before reserving.
    let count = usize::try_from(count).map_err(|_| RecordError::Truncated)?;
    let mut members = Vec::with_capacity(count.min(value.len() / 26));
    for _ in 0..count {
        members.push(decode_member(&mut value, version)?);
    }
    Ok(StoredGroup {
        protocol_type,
        generation,
        protocol,
        leader,
        state_timestamp_ms,
        members,
    })
}

fn decode_member(value: &mut &[u8], version: i16) -> Result<StoredMember, RecordError> {
    let member_id = read_string(value)?;
    let group_instance_id = match version >= 3 {
        true => read_nullable_string(value)?,
        false => None,
    };
    let client_id = read_string(value)?;
    let client_host = read_string(value)?;
    let session_timeout_first = version == 0;
    let (rebalance_timeout_ms, session_timeout_ms) = if session_timeout_first {
        let session = read_i32(value)?;
        (session, session)
    } else {
        (read_i32(value)?, read_i32(value)?)
    };
    Ok(StoredMember {
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        subscription: read_bytes(value)?,
        assignment: read_bytes(value)?,
    })
}

fn put_string(buf: &mut BytesMut, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(buf, s),
        None => buf.put_i16(-1),
    }
}

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(b.len() as i32);
    buf.put_slice(b);
}

fn need(buf: &[u8], n: usize) -> Result<(), RecordError> {
    match buf.len() >= n {
        true => Ok(()),
        false => Err(RecordError::Truncated),
    }
}

fn read_i16(buf: &mut &[u8]) -> Result<i16, RecordError> {
    need(buf, 2)?;
    Ok(buf.get_i16())
}

fn read_i32(buf: &mut &[u8]) -> Result<i32, RecordError> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}

fn read_i64(buf: &mut &[u8]) -> Result<i64, RecordError> {
    need(buf, 8)?;
    Ok(buf.get_i64())
}

fn read_nullable_string(buf: &mut &[u8]) -> Result<Option<String>, RecordError> {
    let len = read_i16(buf)?;
    let Ok(len) = usize::try_from(len) else {
        return Ok(None);
    };
    need(buf, len)?;
    let s = std::str::from_utf8(&buf[..len]).map_err(|_| RecordError::InvalidString)?;
    let s = s.to_string();
    buf.advance(len);
    Ok(Some(s))
}

fn read_string(buf: &mut &[u8]) -> Result<String, RecordError> {
    read_nullable_string(buf)?.ok_or(RecordError::UnexpectedNull)
}

fn read_bytes(buf: &mut &[u8]) -> Result<Bytes, RecordError> {
    let len = read_i32(buf)?;
    let Ok(len) = usize::try_from(len) else {
        return Ok(Bytes::new());
    };
    need(buf, len)?;
    let bytes = Bytes::copy_from_slice(&buf[..len]);
    buf.advance(len);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(record: &CoordinatorRecord) -> CoordinatorRecord {
        let (key, value) = record.encode();
        CoordinatorRecord::decode(&key, value.as_deref())
            .expect("decodes")
            .expect("known version")
    }

    #[test]
    fn offset_commit_round_trips() {
        let key = OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 7,
        };
        let value = CommittedOffset {
            offset: 42,
            leader_epoch: 3,
            metadata: "meta".into(),
            commit_timestamp_ms: 1_700_000_000_000,
        };
        let record = CoordinatorRecord::Offset(key.clone(), Some(value));
        assert_eq!(round_trip(&record), record);
        let tombstone = CoordinatorRecord::Offset(key, None);
        assert_eq!(round_trip(&tombstone), tombstone);
    }

    #[test]
    fn consumer_group_metadata_matches_kafkas_layout() {
        // Goal: key version 3 with the group id; value version 0, the epoch, and an empty
        // tagged-field section, as Kafka's ConsumerGroupMetadata{Key,Value} are encoded.
        // Method: compare bytes, then round trip record and tombstone.
        let record = CoordinatorRecord::ConsumerGroup("g".into(), Some(7));
        let (key, value) = record.encode();
        assert_eq!(&key[..], &[0, 3, 0, 1, b'g']);
        assert_eq!(value.as_deref(), Some(&[0, 0, 0, 0, 0, 7, 0][..]));
        assert_eq!(round_trip(&record), record);
        let tombstone = CoordinatorRecord::ConsumerGroup("g".into(), None);
        assert_eq!(round_trip(&tombstone), tombstone);
    }

    #[test]
    fn group_metadata_round_trips() {
        let member = StoredMember {
            member_id: "m-1".into(),
            group_instance_id: Some("i-1".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 45_000,
            subscription: Bytes::from_static(b"sub"),
            assignment: Bytes::from_static(b"assign"),
        };
        let group = StoredGroup {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            state_timestamp_ms: 1,
            members: vec![member],
        };
        let record = CoordinatorRecord::Group("g".into(), Some(group));
        assert_eq!(round_trip(&record), record);
    }

    #[test]
    fn offset_key_matches_kafkas_layout() {
        let key = OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 1,
        };
        let (bytes, _) = CoordinatorRecord::Offset(key, None).encode();
        assert_eq!(&bytes[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 1]);
    }

    #[test]
    fn truncated_and_huge_lengths_are_refused_without_allocating() {
        assert!(CoordinatorRecord::decode(&[0, 1, 0, 9, b'g'], None).is_err());
        let mut value = vec![0, 3, 0, 0, 0, 0, 0, 0, 0, 0];
        value.extend_from_slice(&[0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff]);
        let key = [0, 2, 0, 1, b'g'];
        assert!(CoordinatorRecord::decode(&key, Some(&value)).is_err());
    }

    #[test]
    fn unknown_key_versions_are_skipped() {
        let decoded = CoordinatorRecord::decode(&[0, 9, 0, 0], Some(&[])).expect("ok");
        assert_eq!(decoded, None);
    }
}
