//! Record batches the broker writes itself (the group coordinator's records) and tests
//! write as a client would: records without a producer, encoded by kafka-protocol.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// The record at `offset` (its position in the batch) of a batch without a producer: no
/// idempotence, no transaction. Its sequence is `offset - 1`, which keeps the records in
/// one batch and makes the batch's base sequence -1, as Kafka's producers send it.
pub fn plain_record(
    offset: i64,
    timestamp: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
) -> Record {
    Record {
        transactional: false,
        control: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: offset as i32 - 1,
        timestamp,
        key,
        value,
        headers: Default::default(),
        delete_horizon: false,
    }
}

/// `records` as one record batch v2 compressed with `compression`.
pub fn encode_batch(records: &[Record], compression: Compression) -> anyhow::Result<Bytes> {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, records, &options)?;
    Ok(buf.freeze())
}
