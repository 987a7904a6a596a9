//! Per-partition state of idempotent producers (ProducerStateManager in Apache Kafka):
//! for each producer id, its epoch and the metadata of its last five batches, so that a
//! retried batch is recognised and answered with its original offset instead of being
//! written twice, and a gap in sequence numbers is refused.
//!
//! The state is rebuilt from the batch headers of the log when a partition is opened.

use std::collections::{HashMap, VecDeque};

use super::batch::BatchHeader;
use super::error::LogError;

/// How many batches per producer are remembered for de-duplication (Kafka's
/// `NUM_BATCHES_TO_RETAIN`, which matches the producer's max in-flight requests).
pub const BATCHES_RETAINED_MAX: usize = 5;

/// What is remembered of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
}

#[derive(Debug, Clone, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
}

/// The outcome of checking a batch against the producer's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// The batch is new and in sequence (or not idempotent): append it.
    Append,
    /// The batch was already appended: answer with its original offsets.
    Duplicate(BatchMetadata),
}

/// All producers of one partition.
#[derive(Debug, Default)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
}

fn in_sequence(last: i32, next: i32) -> bool {
    next == last.wrapping_add(1) || (last == i32::MAX && next == 0)
}

impl ProducerStateTable {
    /// Checks an incoming batch from a client.
    pub fn check(&self, header: &BatchHeader) -> Result<SequenceCheck, LogError> {
        if !header.has_producer_id() {
            return Ok(SequenceCheck::Append);
        }
        let producer_id = header.producer_id;
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(SequenceCheck::Append);
        };
        if header.producer_epoch < entry.epoch {
            return Err(LogError::InvalidProducerEpoch {
                producer_id,
                epoch: header.producer_epoch,
                current_epoch: entry.epoch,
            });
        }
        if header.producer_epoch > entry.epoch {
            if header.base_sequence != 0 {
                return Err(LogError::OutOfOrderSequence {
                    producer_id,
                    first_sequence: header.base_sequence,
                    last_sequence: -1,
                });
            }
            return Ok(SequenceCheck::Append);
        }
        let duplicate = entry.batches.iter().find(|b| {
            b.first_sequence == header.base_sequence && b.last_sequence == header.last_sequence()
        });
        if let Some(batch) = duplicate {
            return Ok(SequenceCheck::Duplicate(*batch));
        }
        let last_sequence = entry.batches.back().map_or(-1, |b| b.last_sequence);
        if !in_sequence(last_sequence, header.base_sequence) {
            return Err(LogError::OutOfOrderSequence {
                producer_id,
                first_sequence: header.base_sequence,
                last_sequence,
            });
        }
        Ok(SequenceCheck::Append)
    }

    /// Records an appended batch (whose base offset is now assigned).
    pub fn update(&mut self, header: &BatchHeader) {
        if !header.has_producer_id() {
            return;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(BatchMetadata {
            first_sequence: header.base_sequence,
            last_sequence: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
        });
        while entry.batches.len() > BATCHES_RETAINED_MAX {
            entry.batches.pop_front();
        }
    }

    /// Number of producers known.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is known.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;

    fn header(producer_id: i64, sequence: i32, count: i32, offset: i64) -> BatchHeader {
        let mut h = BatchHeader::parse(&encode_batch(count, producer_id, sequence, 0)).expect("h");
        h.base_offset = offset;
        h
    }

    #[test]
    fn a_retried_batch_is_a_duplicate_with_its_original_offset() {
        let mut table = ProducerStateTable::default();
        let first = header(7, 0, 3, 100);
        assert_eq!(table.check(&first).expect("check"), SequenceCheck::Append);
        table.update(&first);
        match table.check(&header(7, 0, 3, 0)).expect("check") {
            SequenceCheck::Duplicate(b) => assert_eq!(b.first_offset, 100),
            other => panic!("expected a duplicate, got {other:?}"),
        }
    }

    #[test]
    fn a_gap_is_out_of_order() {
        let mut table = ProducerStateTable::default();
        table.update(&header(7, 0, 3, 0));
        assert!(matches!(
            table.check(&header(7, 5, 1, 0)),
            Err(LogError::OutOfOrderSequence {
                last_sequence: 2,
                ..
            })
        ));
        assert_eq!(
            table.check(&header(7, 3, 1, 0)).expect("next"),
            SequenceCheck::Append
        );
    }

    #[test]
    fn an_older_epoch_is_refused() {
        let mut table = ProducerStateTable::default();
        let mut h = header(7, 0, 1, 0);
        h.producer_epoch = 2;
        table.update(&h);
        assert!(matches!(
            table.check(&header(7, 1, 1, 0)),
            Err(LogError::InvalidProducerEpoch { .. })
        ));
    }
}
