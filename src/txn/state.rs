//! One transactional id's state and the transaction state machine (Kafka's
//! TransactionMetadata and the transitions of TransactionCoordinator): which producer id
//! and epoch own the id, the partitions of its open transaction, and where the transaction
//! stands. Pure: each operation checks the request against the state and returns the state
//! to write; the coordinator writes it and only then applies it.
//!
//! Empty → Ongoing (AddPartitionsToTxn) → PrepareCommit | PrepareAbort (EndTxn, a timeout,
//! a new instance fencing this one) → CompleteCommit | CompleteAbort (markers written) →
//! Ongoing again with the next AddPartitionsToTxn; InitProducerId moves a completed or
//! empty id to Empty at a new epoch.
//!
//! Transaction version 2 (KIP-890 part 2, a client sending EndTxn v5 and letting the
//! partition leaders add partitions for it): every EndTxn bumps the epoch (the markers
//! carry the new one, which fences any late write of the transaction), so a retried EndTxn
//! comes at the epoch before; an epoch exhausted by the bump hands the id a new producer
//! id once the markers are written.

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
    /// The transaction version of the client's last transaction (2: an epoch per
    /// transaction).
    pub client_transaction_version: i16,
    /// The producer id before the last rotation (-1: none).
    pub previous_producer_id: i64,
    /// The producer id the id moves to once the decided transaction is complete (an
    /// epoch exhausted under transaction version 2; -1: none).
    pub next_producer_id: i64,
}

/// The transaction version from which every transaction has its own epoch.
pub const EPOCH_PER_TRANSACTION_VERSION: i16 = 2;

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
    /// The epoch bump would exhaust the epochs: allocate a producer id, then decide again.
    NewProducerId,
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
            client_transaction_version: 0,
            previous_producer_id: -1,
            next_producer_id: -1,
        }
    }

    /// Whether the last transaction ran at transaction version 2.
    fn epoch_per_transaction(&self) -> bool {
        self.client_transaction_version >= EPOCH_PER_TRANSACTION_VERSION
    }

    /// The producer id and epoch the client goes on with after this state: the next
    /// producer id at epoch 0 once one is chosen.
    pub fn producer_for_client(&self) -> (i64, i16) {
        match self.next_producer_id {
            -1 => (self.producer_id, self.producer_epoch),
            next => (next, 0),
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

    /// AddPartitionsToTxn / AddOffsetsToTxn (`client_version` 0), or a partition leader
    /// adding a partition for a transaction version 2 client (`client_version` 2): `None`
    /// when every partition is already in the open transaction (nothing to write).
    pub fn add_partitions(
        &self,
        (producer_id, producer_epoch): (i64, i16),
        partitions: &[TxnPartition],
        client_version: i16,
        now_ms: i64,
    ) -> Result<Option<TransactionMetadata>, TxnError> {
        if self.state.is_preparing() && producer_id == self.next_producer_id {
            // The client already has the producer id the completion moves to.
            return Err(self.concurrent());
        }
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
            next.client_transaction_version = client_version;
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

    /// EndTxn from the client, of `client_version` (2 from EndTxn v5); `next_producer_id`
    /// is the producer id allocated after [`EndPlan::NewProducerId`].
    pub fn end(
        &self,
        (producer_id, producer_epoch): (i64, i16),
        commit: bool,
        (client_version, next_producer_id): (i16, Option<i64>),
        now_ms: i64,
    ) -> Result<EndPlan, TxnError> {
        let version_2 = client_version >= EPOCH_PER_TRANSACTION_VERSION;
        match self.epoch_per_transaction() || version_2 {
            true => self.check_end_owner(producer_id, producer_epoch)?,
            false => self.check_owner(producer_id, producer_epoch)?,
        }
        let operation = if commit { "commit" } else { "abort" };
        // Under version 2 an end at the epoch before the current one retries an end that
        // bumped it; one at the current epoch is a new end.
        let retry = producer_epoch != self.producer_epoch || producer_id != self.producer_id;
        let bumped = |commit| self.bumped(commit, client_version, next_producer_id, now_ms);
        match (self.state, commit) {
            (TxnState::Ongoing, _) if version_2 => bumped(commit),
            (TxnState::Ongoing, _) => Ok(EndPlan::Prepare(self.prepared(commit, now_ms))),
            // Kafka's transaction version 2 lets a client abort a transaction it added
            // nothing to (none open, or the last one complete): the epoch moves on and no
            // marker is written.
            (TxnState::Empty, false) if version_2 => bumped(false),
            (TxnState::CompleteCommit, false) | (TxnState::CompleteAbort, false)
                if version_2 && !retry =>
            {
                bumped(false)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false)
                if !version_2 || retry =>
            {
                Ok(EndPlan::AlreadyDone)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(self.concurrent())
            }
            _ => Err(self.invalid_state(operation)),
        }
    }

    /// The transaction decided at a bumped epoch (transaction version 2), moving to the
    /// next producer id when the epoch is exhausted.
    fn bumped(
        &self,
        commit: bool,
        client_version: i16,
        next_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<EndPlan, TxnError> {
        let mut next = self.prepared(commit, now_ms);
        next.client_transaction_version = client_version;
        next.last_producer_epoch = self.producer_epoch;
        next.producer_epoch = self.producer_epoch.saturating_add(1);
        if self.producer_epoch >= EPOCH_MAX {
            match next_producer_id {
                None => return Ok(EndPlan::NewProducerId),
                Some(id) => next.next_producer_id = id,
            }
        }
        Ok(EndPlan::Prepare(next))
    }

    /// The owner check of an EndTxn under transaction version 2 (Kafka's): an open (or
    /// no) transaction needs the current epoch; a decided one is only ended again by a
    /// retry, at the epoch before the bump (or, after a rotation to a new producer id, at
    /// the last epoch of the previous one); a completed one by a retry or at the current
    /// epoch (an abort of a transaction that added nothing).
    fn check_end_owner(&self, producer_id: i64, producer_epoch: i16) -> Result<(), TxnError> {
        let retried_bump = self.producer_epoch == producer_epoch.saturating_add(1);
        let retried_rotation = self.previous_producer_id == producer_id
            && producer_epoch == EPOCH_MAX
            && self.producer_epoch == 0;
        if producer_id != self.producer_id && !retried_rotation {
            return Err(TxnError::InvalidProducerIdMapping {
                transactional_id: self.transactional_id.clone(),
                producer_id,
            });
        }
        let valid = match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => retried_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retried_bump || retried_rotation || producer_epoch == self.producer_epoch
            }
            _ => producer_epoch == self.producer_epoch,
        };
        if !valid {
            return Err(TxnError::ProducerFenced {
                transactional_id: self.transactional_id.clone(),
                producer_epoch,
                current: self.producer_epoch,
            });
        }
        match self.pending {
            Some(_) => Err(self.concurrent()),
            None => Ok(()),
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
        // Under transaction version 2 the abort bumps once more (as Kafka's fence then
        // abort does), so that the producer's own EndTxn at its epoch is fenced rather than
        // taken for a retry of an abort it never sent.
        let bump = match self.epoch_per_transaction() {
            true => 2,
            false => 1,
        };
        if self.producer_epoch <= EPOCH_MAX - bump {
            next.last_producer_epoch = self.producer_epoch;
            next.producer_epoch = self.producer_epoch + bump;
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

    /// The markers are written: the transaction is complete and its partitions forgotten
    /// (and the id moves to its next producer id, if one was chosen).
    pub fn completed(&self, now_ms: i64) -> TransactionMetadata {
        let mut next = self.clone();
        if self.next_producer_id >= 0 {
            next.previous_producer_id = self.producer_id;
            next.producer_id = self.next_producer_id;
            next.next_producer_id = -1;
            next.last_producer_epoch = self.producer_epoch;
            next.producer_epoch = 0;
        }
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
        meta.add_partitions((7, 0), &[("a".into(), 0)], 0, 100)
            .expect("add")
            .expect("changed")
    }

    #[test]
    fn a_transaction_goes_through_prepare_to_complete() {
        let meta = ongoing();
        assert_eq!((meta.state, meta.start_ms), (TxnState::Ongoing, 100));
        assert_eq!(
            meta.add_partitions((7, 0), &[("a".into(), 0)], 0, 200),
            Ok(None),
            "nothing new"
        );
        let EndPlan::Prepare(prepared) = meta.end((7, 0), true, (0, None), 300).expect("end")
        else {
            panic!("prepare expected");
        };
        assert_eq!(prepared.state, TxnState::PrepareCommit);
        assert!(matches!(
            prepared.add_partitions((7, 0), &[("b".into(), 0)], 0, 301),
            Err(TxnError::ConcurrentTransactions { .. })
        ));
        let done = prepared.completed(400);
        assert_eq!(done.state, TxnState::CompleteCommit);
        assert!(done.partitions.is_empty());
        assert_eq!(
            done.end((7, 0), true, (0, None), 401),
            Ok(EndPlan::AlreadyDone),
            "retry"
        );
        assert!(matches!(
            done.end((7, 0), false, (0, None), 401),
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
            aborted.add_partitions((7, 0), &[("a".into(), 0)], 0, 700),
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
            aborted.completed(0).end((7, 0), false, (0, None), 0),
            Err(TxnError::ProducerFenced { .. })
        ));
    }

    #[test]
    fn a_wrong_producer_id_or_a_pending_write_is_refused() {
        let meta = ongoing();
        assert!(matches!(
            meta.add_partitions((8, 0), &[], 0, 0),
            Err(TxnError::InvalidProducerIdMapping { .. })
        ));
        let mut pending = meta.clone();
        pending.pending = Some(TxnState::PrepareCommit);
        assert!(matches!(
            pending.end((7, 0), true, (0, None), 0),
            Err(TxnError::ConcurrentTransactions { .. })
        ));
        assert!(matches!(
            TransactionMetadata::new("t", 7, 1).end((7, 0), true, (0, None), 0),
            Err(TxnError::InvalidTxnState { .. })
        ));
    }

    #[test]
    fn state_codes_match_kafkas() {
        assert_eq!(TxnState::CompleteAbort.code(), 5);
        assert_eq!(TxnState::from_code(7), Some(TxnState::PrepareEpochFence));
        assert_eq!(TxnState::from_code(8), None);
    }

    /// An open transaction of a transaction version 2 client at epoch `epoch`.
    fn ongoing_v2(epoch: i16) -> TransactionMetadata {
        let mut meta = TransactionMetadata::new("t", 7, 60_000);
        meta.producer_epoch = epoch;
        meta.add_partitions((7, epoch), &[("a".into(), 0)], 2, 100)
            .expect("add")
            .expect("changed")
    }

    fn end_v2(meta: &TransactionMetadata, epoch: i16, commit: bool) -> Result<EndPlan, TxnError> {
        meta.end((7, epoch), commit, (2, None), 300)
    }

    #[test]
    fn under_transaction_version_2_every_end_bumps_the_epoch_and_a_retry_comes_at_the_old_one() {
        let meta = ongoing_v2(3);
        assert_eq!(meta.client_transaction_version, 2);
        let EndPlan::Prepare(prepared) = end_v2(&meta, 3, true).expect("end") else {
            panic!("prepare expected");
        };
        assert_eq!(
            (prepared.producer_epoch, prepared.last_producer_epoch),
            (4, 3)
        );
        assert_eq!(prepared.producer_for_client(), (7, 4));
        assert!(matches!(
            end_v2(&prepared, 3, true),
            Err(TxnError::ConcurrentTransactions { .. })
        ));
        let done = prepared.completed(400);
        assert_eq!(end_v2(&done, 3, true), Ok(EndPlan::AlreadyDone), "a retry");
        assert!(matches!(
            end_v2(&done, 4, true),
            Err(TxnError::InvalidTxnState { .. })
        ));
        assert!(matches!(
            end_v2(&done, 3, false),
            Err(TxnError::InvalidTxnState { .. })
        ));
        assert!(matches!(
            end_v2(&done, 2, false),
            Err(TxnError::ProducerFenced { .. })
        ));
        // The next transaction starts at the new epoch; the old one is fenced.
        assert!(matches!(
            done.add_partitions((7, 3), &[("a".into(), 0)], 2, 500),
            Err(TxnError::ProducerFenced { .. })
        ));
        let next = done
            .add_partitions((7, 4), &[("b".into(), 1)], 2, 500)
            .expect("add")
            .expect("changed");
        assert_eq!((next.state, next.start_ms), (TxnState::Ongoing, 500));
    }

    #[test]
    fn under_transaction_version_2_an_abort_of_nothing_moves_the_epoch_on() {
        // franz-go aborts a transaction it added no partition to (its records dropped by
        // a rebalance before any was sent); Kafka 4.1 answers with the next epoch.
        let empty = TransactionMetadata::new("t", 7, 1);
        assert!(matches!(
            end_v2(&empty, 0, true),
            Err(TxnError::InvalidTxnState { .. })
        ));
        let EndPlan::Prepare(aborting) = end_v2(&empty, 0, false).expect("abort") else {
            panic!("prepare expected");
        };
        assert_eq!(
            (aborting.state, aborting.producer_for_client()),
            (TxnState::PrepareAbort, (7, 1))
        );
        assert!(aborting.partitions.is_empty(), "no marker to write");
        let aborted = aborting.completed(400);
        assert_eq!(
            end_v2(&aborted, 0, false),
            Ok(EndPlan::AlreadyDone),
            "a retry"
        );
        let EndPlan::Prepare(again) = end_v2(&aborted, 1, false).expect("abort again") else {
            panic!("prepare expected");
        };
        assert_eq!(again.producer_for_client(), (7, 2));
        assert!(
            matches!(
                empty.end((7, 0), false, (0, None), 0),
                Err(TxnError::InvalidTxnState { .. })
            ),
            "not before version 2"
        );
    }

    #[test]
    fn an_exhausted_epoch_moves_the_id_to_a_new_producer_id_once_complete() {
        let meta = ongoing_v2(EPOCH_MAX);
        assert_eq!(end_v2(&meta, EPOCH_MAX, true), Ok(EndPlan::NewProducerId));
        let Ok(EndPlan::Prepare(prepared)) = meta.end((7, EPOCH_MAX), true, (2, Some(99)), 300)
        else {
            panic!("prepare expected");
        };
        assert_eq!(prepared.producer_epoch, i16::MAX, "the markers' epoch");
        assert_eq!(prepared.producer_for_client(), (99, 0));
        let done = prepared.completed(400);
        assert_eq!((done.producer_id, done.producer_epoch), (99, 0));
        assert_eq!(done.previous_producer_id, 7);
        assert_eq!(
            end_v2(&done, EPOCH_MAX, true),
            Ok(EndPlan::AlreadyDone),
            "a retry"
        );
        assert!(done
            .add_partitions((99, 0), &[("a".into(), 0)], 2, 500)
            .is_ok());
    }

    #[test]
    fn under_transaction_version_2_a_timed_out_transaction_fences_the_producers_own_end() {
        let meta = ongoing_v2(3);
        let aborted = meta.timed_out(60_101).expect("expired").completed(60_200);
        assert_eq!(aborted.producer_epoch, 5);
        assert!(matches!(
            end_v2(&aborted, 3, false),
            Err(TxnError::ProducerFenced { .. })
        ));
    }
}
