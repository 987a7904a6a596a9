//! What the log cleaner knows of transactions while it reads a log in offset order
//! (CleanedTransactionMetadata in Apache Kafka, in our own words):
//!
//! - which transactional batches belong to an aborted transaction: their records are
//!   removed and never enter the offset map (an aborted record must not hide an older
//!   committed value of its key);
//! - whether a transaction marker may go: only when no batch of its transaction was read in
//!   this round. A batch read counts even if this round removes it, so a marker always
//!   outlives its batches by at least one round, and is never removed while a batch of its
//!   transaction (even an empty one) is left before it: a batch without its marker would
//!   reopen as a transaction that never ends and hold the last stable offset for ever.
//!
//! The aborted transactions come from the producer state's aborted list (Kafka reads its
//! `.txnindex` files instead). A batch is aborted only if it lies between the first offset
//! and the marker of one of its producer's aborted transactions (a producer's transactions
//! on one partition never overlap, so that test is exact).
//!
//! Like Kafka's cleaned transaction index, the list must lose an aborted transaction no
//! later than the log loses its marker: a read_committed consumer told of an aborted
//! transaction skips the producer's transactional batches from its first offset until it
//! reads the ABORT marker, so without the marker it would skip later committed ones too.
//! The pass therefore reports the aborted transactions of which no batch was left (their
//! marker was read with no batch before it, or their marker is gone), and the swap of the
//! cleaned segment removes them from the producer state; the marker goes a round later at
//! the earliest.
//!
//! Must not: decide anything about non-transactional batches, or about the records kept.
//! Invariant: batches are read in increasing offset order.

use std::collections::{HashMap, HashSet, VecDeque};

use super::batch::BatchHeader;
use super::producer_state::AbortedTransaction;

/// The transaction state of one cleaning pass (building the offset map, or writing the
/// cleaned segments: each pass has its own).
#[derive(Debug, Default)]
pub struct CleanedTransactions {
    /// Per producer, its aborted transactions whose marker was not passed yet, by first
    /// offset.
    aborted: HashMap<i64, VecDeque<AbortedTransaction>>,
    /// Producers with a transactional batch read since their last marker.
    read_since_marker: HashSet<i64>,
    /// Aborted transactions found to have no batch left, not yet taken.
    without_batches: Vec<AbortedTransaction>,
}

impl CleanedTransactions {
    /// The state of a pass over a log whose aborted transactions are `aborted` (in marker
    /// order, as the producer state lists them).
    pub fn new(aborted: &[AbortedTransaction]) -> Self {
        let mut by_producer: HashMap<i64, VecDeque<AbortedTransaction>> = HashMap::new();
        for transaction in aborted {
            by_producer
                .entry(transaction.producer_id)
                .or_default()
                .push_back(*transaction);
        }
        for transactions in by_producer.values_mut() {
            transactions
                .make_contiguous()
                .sort_by_key(|t| t.first_offset);
        }
        CleanedTransactions {
            aborted: by_producer,
            read_since_marker: HashSet::new(),
            without_batches: Vec::new(),
        }
    }

    /// Passes `producer_id`'s aborted transactions whose marker lies before `offset`: the
    /// pass did not read those markers, so they are gone, and nothing of the transactions
    /// is left before them.
    fn pass_markers_before(&mut self, producer_id: i64, offset: i64) {
        if let Some(transactions) = self.aborted.get_mut(&producer_id) {
            while let Some(passed) = transactions.front().filter(|t| t.last_offset < offset) {
                self.without_batches.push(*passed);
                transactions.pop_front();
            }
        }
    }

    /// Reads a data batch; returns whether it belongs to an aborted transaction.
    pub fn on_batch_read(&mut self, header: &BatchHeader) -> bool {
        if !header.is_transactional() || header.is_control() {
            return false;
        }
        let producer_id = header.producer_id;
        self.read_since_marker.insert(producer_id);
        self.pass_markers_before(producer_id, header.base_offset);
        self.aborted
            .get(&producer_id)
            .and_then(VecDeque::front)
            .is_some_and(|t| t.first_offset <= header.base_offset)
    }

    /// Reads a transaction marker (a control batch holding COMMIT or ABORT); returns
    /// whether no batch of its transaction was read in this pass, so that the marker may
    /// go once its delete horizon has passed.
    pub fn on_marker_read(&mut self, header: &BatchHeader) -> bool {
        let producer_id = header.producer_id;
        self.pass_markers_before(producer_id, header.base_offset);
        let own = self.aborted.get_mut(&producer_id).and_then(|transactions| {
            let own = transactions.front()?.last_offset == header.base_offset;
            own.then(|| transactions.pop_front()).flatten()
        });
        let may_go = !self.read_since_marker.remove(&producer_id);
        if let Some(aborted) = own.filter(|_| may_go) {
            self.without_batches.push(aborted);
        }
        may_go
    }

    /// The aborted transactions found since the last call to have no batch left; once the
    /// segments read meanwhile are swapped for their cleaned copies, no read_committed
    /// consumer needs to be told of them.
    pub fn take_without_batches(&mut self) -> Vec<AbortedTransaction> {
        std::mem::take(&mut self.without_batches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::tests::encode_batch;

    fn header(producer_id: i64, offset: i64, count: i32, control: bool) -> BatchHeader {
        let mut h = BatchHeader::parse(&encode_batch(count, producer_id, 0, 0)).expect("header");
        h.base_offset = offset;
        h.attributes |= 1 << 4;
        if control {
            h.attributes |= 1 << 5;
        }
        h
    }

    fn aborted(producer_id: i64, first_offset: i64, last_offset: i64) -> AbortedTransaction {
        AbortedTransaction {
            producer_id,
            first_offset,
            last_offset,
        }
    }

    /// Goal: only the batches between an aborted transaction's first offset and its marker
    /// are aborted, those of another producer or of a later transaction are not. Method:
    /// two producers, one aborted and one committed transaction each, read in order.
    #[test]
    fn only_batches_inside_an_aborted_transaction_are_aborted() {
        let mut txns = CleanedTransactions::new(&[aborted(1, 0, 4), aborted(2, 10, 12)]);
        assert!(txns.on_batch_read(&header(1, 0, 2, false)));
        assert!(!txns.on_batch_read(&header(2, 2, 2, false)), "committed");
        assert!(
            !txns.on_marker_read(&header(1, 4, 1, true)),
            "its batch was read"
        );
        assert!(!txns.on_marker_read(&header(2, 5, 1, true)));
        assert!(
            !txns.on_batch_read(&header(1, 6, 2, false)),
            "a later transaction"
        );
        assert!(txns.on_batch_read(&header(2, 10, 2, false)));
        let mut plain = header(1, 13, 1, false);
        plain.attributes &= !(1 << 4);
        assert!(!txns.on_batch_read(&plain), "not transactional");
    }

    /// Goal: a marker may go only when no batch of its transaction was read in the pass,
    /// and a stale aborted entry (its batches and marker removed) aborts nothing later.
    /// Method: a pass over a log whose first transaction was already cleaned away.
    #[test]
    fn a_marker_without_batches_may_go_and_stale_entries_abort_nothing() {
        let mut txns = CleanedTransactions::new(&[aborted(1, 0, 3), aborted(1, 8, 9)]);
        assert!(txns.on_marker_read(&header(1, 3, 1, true)), "no batch left");
        assert!(
            !txns.on_batch_read(&header(1, 5, 2, false)),
            "committed after it"
        );
        assert!(!txns.on_marker_read(&header(1, 7, 1, true)));
        assert!(txns.on_batch_read(&header(1, 8, 1, false)));
        assert_eq!(txns.take_without_batches(), [aborted(1, 0, 3)]);
        let mut cleaned_away = CleanedTransactions::new(&[aborted(1, 0, 3)]);
        assert!(
            !cleaned_away.on_batch_read(&header(1, 5, 2, false)),
            "the entry's marker lies before the batch"
        );
        assert_eq!(cleaned_away.take_without_batches(), [aborted(1, 0, 3)]);
    }

    /// Goal: an aborted transaction whose batches this pass read is not reported as
    /// without batches, even if the pass removes them all. Method: one aborted batch and
    /// its marker, read in one pass and then in the next as a cleaning leaves them.
    #[test]
    fn an_aborted_transaction_is_reported_without_batches_a_pass_after_its_last_batch() {
        let mut first = CleanedTransactions::new(&[aborted(1, 0, 2)]);
        assert!(first.on_batch_read(&header(1, 0, 2, false)));
        assert!(!first.on_marker_read(&header(1, 2, 1, true)));
        assert!(first.take_without_batches().is_empty());
        let mut second = CleanedTransactions::new(&[aborted(1, 0, 2)]);
        assert!(second.on_marker_read(&header(1, 2, 1, true)));
        assert_eq!(second.take_without_batches(), [aborted(1, 0, 2)]);
        assert!(second.take_without_batches().is_empty(), "taken once");
    }
}
