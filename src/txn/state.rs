//! One transactional id's state and the transaction state machine (Kafka's
//! TransactionMetadata and the transitions of TransactionCoordinator, transaction version
//! 1): which producer id and epoch own the id, the partitions of its open transaction, and
//! where the transaction stands. Pure: each operation checks the request against the state
//! and returns the state to write; the coordinator writes it and only then applies it.
//!
//! Empty → Ongoing (AddPartitionsToTxn) → PrepareCommit | PrepareAbort (EndTxn, a timeout,
//! a new instance fencing this one) → CompleteCommit | CompleteAbort (markers written) →
//! Ongoing again with the next AddPartitionsToTxn; InitProducerId moves a completed or
//! empty id to Empty at a new epoch.

use std::collections::BTreeSet;

use super::error::TxnError;

/// A topic-partition in a transaction.
pub type TxnPartition = (String, i32);

/// Where a transaction stands (Kafka's codes in `__transaction_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The code Kafka stores for the state.
    pub fn code(self) -> i8 {
        TxnState::ALL.iter().position(|s| *s == self).unwrap_or(0) as i8
    }

    /// The state of a stored code.
    pub fn from_code(code: i8) -> Option<TxnState> {
        TxnState::ALL.get(usize::try_from(code).ok()?).copied()
    }

    /// The name DescribeTransactions and ListTransactions report.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Whether markers are being written (the transaction is decided, not finished).
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// The highest epoch a producer id is used at before a new id is allocated.
pub const EPOCH_MAX: i16 = i16::MAX - 1;

/// One transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump (a retried InitProducerId that lost its answer).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TxnPartition>,
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// A write of this state is in flight: requests get CONCURRENT_TRANSACTIONS.
    pub pending: Option<TxnState>,
}

/// What InitProducerId must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitPlan {
    /// Write this state, then answer its producer id and epoch.
    Write(TransactionMetadata),
    /// The epoch is exhausted: allocate a new producer id, then write.
    NewProducerId,
    /// An open transaction of an older instance: write this (abort at a bumped epoch),
    /// write its markers, and answer CONCURRENT_TRANSACTIONS (the client retries).
    FenceOngoing(TransactionMetadata),
}

/// What EndTxn must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndPlan {
    /// A retry of an EndTxn already completed: answer success.
    AlreadyDone,
    /// Write this prepared state, then the markers, then complete.
    Prepare(TransactionMetadata),
}

impl TransactionMetadata {
    /// A new transactional id owned by `producer_id` at epoch 0.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32) -> Self {
        TransactionMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch: 0,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: -1,
            pending: None,
        }
    }

    fn concurrent(&self) -> TxnError {
        TxnError::ConcurrentTransactions {
            transactional_id: self.transactional_id.clone(),
            state: self.pending.unwrap_or(self.state).name(),
        }
    }

    fn invalid_state(&self, operation: &'static str) -> TxnError {
        TxnError::InvalidTxnState {
            transactional_id: self.transactional_id.clone(),
            state: self.state.name(),
            operation,
        }
    }

    /// Checks that `producer_id` at `producer_epoch` owns the id now.
    fn check_owner(&self, producer_id: i64, producer_epoch: i16) -> Result<(), TxnError> {
        if self.pending.is_some() {
            return Err(self.concurrent());
        }
        if producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping {
                transactional_id: self.transactional_id.clone(),
                producer_id,
            });
        }
        if producer_epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced {
                transactional_id: self.transactional_id.clone(),
                producer_epoch,
                current: self.producer_epoch,
            });
        }
        Ok(())
    }

    /// InitProducerId for an existing id; `expected` is the producer id and epoch the
    /// client passed (KIP-360), or `None`.
    pub fn init_producer_id(
        &self,
        expected: Option<(i64, i16)>,
        timeout_ms: i32,
        now_ms: i64,
    ) -> Result<InitPlan, TxnError> {
        if self.pending.is_some() || self.state.is_preparing() {
            return Err(self.concurrent());
        }
        let mut next = self.clone();
        next.timeout_ms = timeout_ms;
        next.last_update_ms = now_ms;
        if self.state == TxnState::Ongoing {
            next.last_producer_epoch = self.producer_epoch;
            next.producer_epoch = self.producer_epoch.saturating_add(1);
            next.state = TxnState::PrepareAbort;
            return Ok(InitPlan::FenceOngoing(next));
        }
        if let Some((producer_id, epoch)) = expected {
            let retried = epoch == self.last_producer_epoch && producer_id == self.producer_id;
            if retried {
                return Ok(InitPlan::Write(next));
            }
            if producer_id != self.producer_id || epoch != self.producer_epoch {
                return Err(TxnError::ProducerFenced {
                    transactional_id: self.transactional_id.clone(),
                    producer_epoch: epoch,
                    current: self.producer_epoch,
                });
            }
        }
        if self.producer_epoch >= EPOCH_MAX {
            return Ok(InitPlan::NewProducerId);
        }
        next.last_producer_epoch = self.producer_epoch;
        next.producer_epoch = self.producer_epoch + 1;
        next.state = TxnState::Empty;
        next.partitions.clear();
        next.start_ms = -1;
        Ok(InitPlan::Write(next))
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: `None` when every partition is already in
    /// the open transaction (nothing to write).
    pub fn add_partitions(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TxnPartition],
        now_ms: i64,
    ) -> Result<Option<TransactionMetadata>, TxnError> {
        self.check_owner(producer_id, producer_epoch)?;
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                return Err(self.concurrent())
            }
            TxnState::Dead => return Err(self.invalid_state("AddPartitionsToTxn")),
            _ => {}
        }
        let ongoing = self.state == TxnState::Ongoing;
        if ongoing && partitions.iter().all(|p| self.partitions.contains(p)) {
            return Ok(None);
        }
        let mut next = self.clone();
        if !ongoing {
            next.partitions.clear();
            next.start_ms = now_ms;
        }
        next.state = TxnState::Ongoing;
        next.partitions.extend(partitions.iter().cloned());
        next.last_update_ms = now_ms;
        Ok(Some(next))
    }

    /// KIP-890's verification for a transactional produce: the producer owns the id and
    /// its open transaction holds the partitions.
    pub fn verify(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TxnPartition],
    ) -> Result<(), TxnError> {
        self.check_owner(producer_id, producer_epoch)?;
        let open = self.state == TxnState::Ongoing
            && partitions.iter().all(|p| self.partitions.contains(p));
        match open {
            true => Ok(()),
            false => Err(self.invalid_state("produce to a partition outside the transaction")),
        }
    }

    /// EndTxn from the client.
    pub fn end(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Result<EndPlan, TxnError> {
        self.check_owner(producer_id, producer_epoch)?;
        let operation = if commit { "commit" } else { "abort" };
        match (self.state, commit) {
            (TxnState::Ongoing, _) => Ok(EndPlan::Prepare(self.prepared(commit, now_ms))),
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok(EndPlan::AlreadyDone)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(self.concurrent())
            }
            _ => Err(self.invalid_state(operation)),
        }
    }

    /// The transaction decided: markers are to be written for its partitions.
    fn prepared(&self, commit: bool, now_ms: i64) -> TransactionMetadata {
        let mut next = self.clone();
        next.state = match commit {
            true => TxnState::PrepareCommit,
            false => TxnState::PrepareAbort,
        };
        next.last_update_ms = now_ms;
        next
    }

    /// An open transaction past its timeout: aborted at a bumped epoch, which fences the
    /// producer that let it lapse (its next request fails and it must abort).
    pub fn timed_out(&self, now_ms: i64) -> Option<TransactionMetadata> {
        let expired = self.state == TxnState::Ongoing
            && self.pending.is_none()
            && now_ms > self.start_ms.saturating_add(i64::from(self.timeout_ms));
        if !expired {
            return None;
        }
        let mut next = self.prepared(false, now_ms);
        if self.producer_epoch < EPOCH_MAX {
            next.last_producer_epoch = self.producer_epoch;
            next.producer_epoch = self.producer_epoch + 1;
        }
        Some(next)
    }

    /// The id idle past `expiration_ms` with no transaction open: it goes (Dead, written
    /// as a tombstone).
    pub fn expired(&self, now_ms: i64, expiration_ms: i64) -> Option<TransactionMetadata> {
        let idle = matches!(
            self.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        ) && self.pending.is_none()
            && now_ms.saturating_sub(self.last_update_ms) >= expiration_ms;
        idle.then(|| {
            let mut next = self.clone();
            next.state = TxnState::Dead;
            next
        })
    }

    /// The markers are written: the transaction is complete and its partitions forgotten.
    pub fn completed(&self, now_ms: i64) -> TransactionMetadata {
        let mut next = self.clone();
        next.state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            _ => TxnState::CompleteAbort,
        };
        next.partitions.clear();
        next.last_update_ms = now_ms;
        next.pending = None;
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TransactionMetadata {
        let meta = TransactionMetadata::new("t", 7, 60_000);
        meta.add_partitions(7, 0, &[("a".into(), 0)], 100)
            .expect("add")
            .expect("changed")
    }

    #[test]
    fn a_transaction_goes_through_prepare_to_complete() {
        let meta = ongoing();
        assert_eq!((meta.state, meta.start_ms), (TxnState::Ongoing, 100));
        assert_eq!(
            meta.add_partitions(7, 0, &[("a".into(), 0)], 200),
            Ok(None),
            "nothing new"
        );
        let EndPlan::Prepare(prepared) = meta.end(7, 0, true, 300).expect("end") else {
            panic!("prepare expected");
        };
        assert_eq!(prepared.state, TxnState::PrepareCommit);
        assert!(matches!(
            prepared.add_partitions(7, 0, &[("b".into(), 0)], 301),
            Err(TxnError::ConcurrentTransactions { .. })
        ));
        let done = prepared.completed(400);
        assert_eq!(done.state, TxnState::CompleteCommit);
        assert!(done.partitions.is_empty());
        assert_eq!(done.end(7, 0, true, 401), Ok(EndPlan::AlreadyDone), "retry");
        assert!(matches!(
            done.end(7, 0, false, 401),
            Err(TxnError::InvalidTxnState { .. })
        ));
    }

    #[test]
    fn a_new_instance_fences_the_old_one_and_aborts_its_transaction() {
        let meta = ongoing();
        let InitPlan::FenceOngoing(fenced) = meta.init_producer_id(None, 1000, 500).expect("init")
        else {
            panic!("fence expected");
        };
        assert_eq!(
            (fenced.state, fenced.producer_epoch),
            (TxnState::PrepareAbort, 1)
        );
        let aborted = fenced.completed(600);
        assert!(matches!(
            aborted.add_partitions(7, 0, &[("a".into(), 0)], 700),
            Err(TxnError::ProducerFenced { .. })
        ));
        let InitPlan::Write(next) = aborted.init_producer_id(None, 1000, 700).expect("init") else {
            panic!("write expected");
        };
        assert_eq!((next.state, next.producer_epoch), (TxnState::Empty, 2));
    }

    #[test]
    fn a_timed_out_transaction_is_aborted_at_a_new_epoch() {
        let meta = ongoing();
        assert_eq!(meta.timed_out(60_100), None);
        let aborted = meta.timed_out(60_101).expect("expired");
        assert_eq!(
            (aborted.state, aborted.producer_epoch),
            (TxnState::PrepareAbort, 1)
        );
        assert!(matches!(
            aborted.completed(0).end(7, 0, false, 0),
            Err(TxnError::ProducerFenced { .. })
        ));
    }

    #[test]
    fn a_wrong_producer_id_or_a_pending_write_is_refused() {
        let meta = ongoing();
        assert!(matches!(
            meta.add_partitions(8, 0, &[], 0),
            Err(TxnError::InvalidProducerIdMapping { .. })
        ));
        let mut pending = meta.clone();
        pending.pending = Some(TxnState::PrepareCommit);
        assert!(matches!(
            pending.end(7, 0, true, 0),
            Err(TxnError::ConcurrentTransactions { .. })
        ));
        assert!(matches!(
            TransactionMetadata::new("t", 7, 1).end(7, 0, true, 0),
            Err(TxnError::InvalidTxnState { .. })
        ));
    }

    #[test]
    fn state_codes_match_kafkas() {
        assert_eq!(TxnState::CompleteAbort.code(), 5);
        assert_eq!(TxnState::from_code(7), Some(TxnState::PrepareEpochFence));
        assert_eq!(TxnState::from_code(8), None);
    }
}
