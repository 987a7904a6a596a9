//! Per-partition state of idempotent producers (ProducerStateManager in Apache Kafka):
//! for each producer id, its epoch and the metadata of its last five batches, so that a
//! retried batch is recognised and answered with its original offset instead of being
//! written twice, and a gap in sequence numbers is refused.
//!
//! It also follows transactions (TransactionStateManager's partition half): the first
//! offset of each producer's open transaction, which bounds the last stable offset, and the
//! aborted transactions a read_committed consumer must drop. The log cleaner takes an
//! aborted transaction off that list once it has removed all its batches, and only then
//! may remove its marker (`cleaned_transactions.rs`).
//!
//! The state is saved in producer snapshots (`producer_snapshot.rs`) and the aborted
//! transactions in the segments' `.txnindex` files; opening a log loads both and replays
//! the batch headers after the latest snapshot (`producer_recovery.rs`).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use super::batch::BatchHeader;
use super::control::Marker;
use super::error::LogError;
use super::producer_snapshot::SnapshotEntry;
pub use super::txn_index::AbortedTransaction;

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
    /// The first offset of the producer's open transaction here.
    open_transaction: Option<i64>,
    /// The coordinator epoch of the producer's last marker (-1: none).
    coordinator_epoch: i32,
    /// The max timestamp of its last batch.
    last_timestamp: i64,
}

/// One producer as DescribeProducers reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerView {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction (-1: none).
    pub current_txn_start_offset: i64,
}

/// A transaction's offsets on this partition, from its first record to its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Completed {
    first_offset: i64,
    marker_offset: i64,
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
    /// First offset → producer id, of every open transaction.
    open: BTreeMap<i64, i64>,
    /// Transactions whose marker may still be above the high watermark, in marker order:
    /// they stay unstable until it passes the marker.
    completed: VecDeque<Completed>,
    /// Aborted transactions, in marker order.
    aborted: Vec<AbortedTransaction>,
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
        if header.base_sequence < 0 {
            // No sequence: a coordinator's own transactional write (a transactional
            // offset commit), fenced by epoch but not de-duplicated.
            return Ok(SequenceCheck::Append);
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

    /// Checks a transaction marker the coordinator asks to write: an older producer epoch
    /// than the partition saw is refused (INVALID_PRODUCER_EPOCH), as is an older
    /// coordinator epoch (a deposed coordinator: TRANSACTION_COORDINATOR_FENCED).
    pub fn check_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), LogError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if producer_epoch < entry.epoch {
            return Err(LogError::InvalidProducerEpoch {
                producer_id,
                epoch: producer_epoch,
                current_epoch: entry.epoch,
            });
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(LogError::CoordinatorFenced {
                producer_id,
                coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records an appended batch (whose base offset is now assigned); `marker` is the
    /// transaction marker a control batch holds. Returns the transaction an ABORT marker
    /// ended here (for the segment's `.txnindex`).
    pub fn update(
        &mut self,
        header: &BatchHeader,
        marker: Option<Marker>,
    ) -> Option<AbortedTransaction> {
        if !header.has_producer_id() {
            return None;
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry {
                coordinator_epoch: -1,
                ..ProducerEntry::default()
            });
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = header.max_timestamp;
        if header.is_control() {
            let marker = marker?;
            entry.coordinator_epoch = marker.coordinator_epoch;
            let first_offset = entry.open_transaction.take()?;
            self.open.remove(&first_offset);
            let marker_offset = header.base_offset;
            self.completed.push_back(Completed {
                first_offset,
                marker_offset,
            });
            if marker.commit {
                return None;
            }
            let aborted = AbortedTransaction {
                producer_id: header.producer_id,
                first_offset,
                last_offset: marker_offset,
            };
            self.aborted.push(aborted);
            return Some(aborted);
        }
        if header.is_transactional() && entry.open_transaction.is_none() {
            entry.open_transaction = Some(header.base_offset);
            self.open.insert(header.base_offset, header.producer_id);
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
        None
    }

    /// The first offset of the earliest open transaction, if any.
    pub fn first_open_offset(&self) -> Option<i64> {
        self.open.keys().next().copied()
    }

    /// Every producer as a snapshot holds it (its last batch only, as in Kafka), by id.
    pub fn snapshot_entries(&self) -> Vec<SnapshotEntry> {
        let mut entries: Vec<SnapshotEntry> = self
            .producers
            .iter()
            .map(|(producer_id, entry)| {
                let last = entry.batches.back();
                SnapshotEntry {
                    producer_id: *producer_id,
                    epoch: entry.epoch,
                    last_sequence: last.map_or(-1, |b| b.last_sequence),
                    last_offset: last.map_or(-1, |b| b.last_offset),
                    offset_delta: last
                        .map_or(0, |b| b.last_sequence.wrapping_sub(b.first_sequence)),
                    timestamp: entry.last_timestamp,
                    coordinator_epoch: entry.coordinator_epoch,
                    current_txn_first_offset: entry.open_transaction.unwrap_or(-1),
                }
            })
            .collect();
        entries.sort_by_key(|e| e.producer_id);
        entries
    }

    /// The state a snapshot holds (the table must be empty).
    pub fn load_snapshot(&mut self, entries: &[SnapshotEntry]) {
        for e in entries {
            let mut batches = VecDeque::new();
            if e.last_offset >= 0 {
                batches.push_back(BatchMetadata {
                    first_sequence: e.last_sequence.wrapping_sub(e.offset_delta),
                    last_sequence: e.last_sequence,
                    first_offset: e.last_offset - i64::from(e.offset_delta),
                    last_offset: e.last_offset,
                });
            }
            let open_transaction =
                (e.current_txn_first_offset >= 0).then_some(e.current_txn_first_offset);
            if let Some(first) = open_transaction {
                self.open.insert(first, e.producer_id);
            }
            let entry = ProducerEntry {
                epoch: e.epoch,
                batches,
                open_transaction,
                coordinator_epoch: e.coordinator_epoch,
                last_timestamp: e.timestamp,
            };
            self.producers.insert(e.producer_id, entry);
        }
    }

    /// Adds aborted transactions read from `.txnindex` files (in marker order, all before
    /// any the table found itself).
    pub fn load_aborted(&mut self, aborted: impl IntoIterator<Item = AbortedTransaction>) {
        let found = std::mem::take(&mut self.aborted);
        self.aborted.extend(aborted);
        self.aborted.extend(found);
    }

    /// The first offset no read_committed consumer may read yet: the first offset of the
    /// earliest transaction that is open, or whose marker is not below `high_watermark`.
    pub fn first_unstable_offset(&self, high_watermark: i64) -> Option<i64> {
        let open = self.open.keys().next().copied();
        let unreplicated = self
            .completed
            .iter()
            .rev()
            .take_while(|c| c.marker_offset >= high_watermark)
            .map(|c| c.first_offset)
            .min();
        [open, unreplicated].into_iter().flatten().min()
    }

    /// Forgets completed transactions whose markers are below `high_watermark` (stable).
    pub fn retire_stable(&mut self, high_watermark: i64) {
        while self
            .completed
            .front()
            .is_some_and(|c| c.marker_offset < high_watermark)
        {
            self.completed.pop_front();
        }
    }

    /// Aborted transactions with records in `start .. upper` (what a read_committed fetch
    /// of that range must be told about), oldest first.
    pub fn aborted_between(&self, start: i64, upper: i64) -> Vec<AbortedTransaction> {
        let from = self.aborted.partition_point(|a| a.last_offset < start);
        self.aborted[from..]
            .iter()
            .filter(|a| a.first_offset < upper)
            .copied()
            .collect()
    }

    /// Forgets aborted transactions wholly below `log_start_offset` (retention removed them).
    pub fn forget_aborted_before(&mut self, log_start_offset: i64) {
        let gone = self
            .aborted
            .partition_point(|a| a.last_offset < log_start_offset);
        self.aborted.drain(..gone);
    }

    /// Forgets the aborted transactions of `gone` (told by producer id and marker offset)
    /// because the log cleaner removed all their batches. They must go no later than their
    /// markers: a read_committed consumer told of an aborted transaction skips its
    /// producer's transactional batches until it reads the ABORT marker.
    pub fn forget_aborted(&mut self, gone: &[AbortedTransaction]) {
        if gone.is_empty() {
            return;
        }
        let gone: HashSet<(i64, i64)> = gone
            .iter()
            .map(|a| (a.producer_id, a.last_offset))
            .collect();
        self.aborted
            .retain(|a| !gone.contains(&(a.producer_id, a.last_offset)));
    }

    /// The open transactions: (producer id, first offset), earliest first.
    pub fn open_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.open
            .iter()
            .map(|(first, producer)| (*producer, *first))
    }

    /// Forgets producers with no open transaction whose last batch is older than
    /// `expiration_ms` (`producer.id.expiration.ms`); returns how many went.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            entry.open_transaction.is_some()
                || now_ms.saturating_sub(entry.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    /// Whether `producer_id` at `producer_epoch` has a transaction open here.
    pub fn has_open_transaction(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.epoch == producer_epoch && e.open_transaction.is_some())
    }

    /// Every producer known here (DescribeProducers), by producer id.
    pub fn describe(&self) -> Vec<ProducerView> {
        self.snapshot_entries()
            .into_iter()
            .map(|e| ProducerView {
                producer_id: e.producer_id,
                producer_epoch: e.epoch,
                last_sequence: e.last_sequence,
                last_timestamp: e.timestamp,
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: e.current_txn_first_offset,
            })
            .collect()
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
        table.update(&first, None);
        match table.check(&header(7, 0, 3, 0)).expect("check") {
            SequenceCheck::Duplicate(b) => assert_eq!(b.first_offset, 100),
            other => panic!("expected a duplicate, got {other:?}"),
        }
    }

    #[test]
    fn a_gap_is_out_of_order() {
        let mut table = ProducerStateTable::default();
        table.update(&header(7, 0, 3, 0), None);
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
        table.update(&h, None);
        assert!(matches!(
            table.check(&header(7, 1, 1, 0)),
            Err(LogError::InvalidProducerEpoch { .. })
        ));
    }

    fn transactional(producer_id: i64, sequence: i32, count: i32, offset: i64) -> BatchHeader {
        let mut h = header(producer_id, sequence, count, offset);
        h.attributes |= 1 << 4;
        h
    }

    fn marker(producer_id: i64, offset: i64, commit: bool) -> (BatchHeader, Option<Marker>) {
        let mut h = header(producer_id, -1, 1, offset);
        h.attributes |= (1 << 4) | (1 << 5);
        let marker = Marker {
            commit,
            coordinator_epoch: 0,
        };
        (h, Some(marker))
    }

    #[test]
    fn an_open_transaction_holds_the_stable_offset_until_its_marker_is_replicated() {
        let mut table = ProducerStateTable::default();
        table.update(&header(1, 0, 5, 0), None);
        table.update(&transactional(2, 0, 3, 5), None);
        table.update(&transactional(2, 3, 2, 8), None);
        table.update(&header(1, 5, 5, 10), None);
        assert_eq!(table.first_unstable_offset(15), Some(5), "open");
        let (h, m) = marker(2, 15, true);
        table.update(&h, m);
        assert_eq!(
            table.first_unstable_offset(15),
            Some(5),
            "marker not replicated"
        );
        assert_eq!(table.first_unstable_offset(16), None, "marker below the HW");
        table.retire_stable(16);
        assert_eq!(table.first_unstable_offset(15), None, "retired");
        assert!(table.aborted_between(0, 16).is_empty(), "committed");
    }

    #[test]
    fn an_aborted_transaction_is_listed_for_the_ranges_it_overlaps() {
        let mut table = ProducerStateTable::default();
        table.update(&transactional(2, 0, 3, 0), None);
        table.update(&transactional(3, 0, 3, 3), None);
        let (h, m) = marker(2, 6, false);
        table.update(&h, m);
        assert_eq!(
            table.first_unstable_offset(100),
            Some(3),
            "producer 3 still open"
        );
        let aborted = AbortedTransaction {
            producer_id: 2,
            first_offset: 0,
            last_offset: 6,
        };
        assert_eq!(table.aborted_between(0, 3), vec![aborted]);
        assert_eq!(
            table.aborted_between(6, 7),
            vec![aborted],
            "the marker itself"
        );
        assert!(table.aborted_between(7, 9).is_empty(), "after the marker");
        table.forget_aborted_before(7);
        assert!(
            table.aborted_between(0, 9).is_empty(),
            "below the log start"
        );
        // A new transaction of producer 2 starts at its next transactional batch.
        table.update(&transactional(2, 3, 1, 7), None);
        assert_eq!(table.first_unstable_offset(100), Some(3));
        assert_eq!(
            table.open_transactions().collect::<Vec<_>>(),
            [(3, 3), (2, 7)]
        );
    }

    /// Goal: the cleaner's removal of an aborted transaction takes off that one only,
    /// told by producer and marker offset. Method: two aborted transactions, one removed.
    #[test]
    fn forgetting_an_aborted_transaction_keeps_the_others() {
        let mut table = ProducerStateTable::default();
        table.update(&transactional(2, 0, 2, 0), None);
        let (h, m) = marker(2, 2, false);
        table.update(&h, m);
        table.update(&transactional(3, 0, 2, 3), None);
        let (h, m) = marker(3, 5, false);
        table.update(&h, m);
        let gone = AbortedTransaction {
            producer_id: 2,
            first_offset: 1, // the cleaner may know a later first offset
            last_offset: 2,
        };
        table.forget_aborted(&[gone]);
        let left: Vec<i64> = table
            .aborted_between(0, 6)
            .iter()
            .map(|a| a.producer_id)
            .collect();
        assert_eq!(left, [3]);
    }

    #[test]
    fn idle_producers_expire_unless_a_transaction_is_open() {
        let mut table = ProducerStateTable::default();
        let mut idle = header(1, 0, 1, 0);
        idle.max_timestamp = 1_000;
        table.update(&idle, None);
        let mut open = transactional(2, 0, 1, 1);
        open.max_timestamp = 1_000;
        table.update(&open, None);
        assert_eq!(table.expire(5_000, 10_000), 0, "not idle long enough");
        assert_eq!(table.expire(20_000, 10_000), 1);
        assert_eq!(
            table.describe().len(),
            1,
            "the open transaction's producer stays"
        );
        assert!(table.has_open_transaction(2, 0));
    }

    #[test]
    fn a_marker_from_an_older_coordinator_or_producer_epoch_is_refused() {
        let mut table = ProducerStateTable::default();
        let mut h = transactional(2, 0, 1, 0);
        h.producer_epoch = 4;
        table.update(&h, None);
        let (mut m, _) = marker(2, 1, true);
        m.producer_epoch = 4;
        let newer = Marker {
            commit: true,
            coordinator_epoch: 3,
        };
        table.update(&m, Some(newer));
        assert!(table.check_marker(2, 4, 3).is_ok());
        assert!(matches!(
            table.check_marker(2, 4, 2),
            Err(LogError::CoordinatorFenced { .. })
        ));
        assert!(matches!(
            table.check_marker(2, 3, 3),
            Err(LogError::InvalidProducerEpoch { .. })
        ));
    }
}
