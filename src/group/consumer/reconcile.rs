//! Reconciliation of one member towards its target assignment, as Kafka's
//! CurrentAssignmentBuilder does it: a member first gives up the partitions that are no
//! longer its own (UNREVOKED_PARTITIONS, at its current epoch) and acknowledges that by
//! leaving them out of the owned partitions it reports; only then does it move to the target
//! epoch and receive the partitions no other member still holds (UNRELEASED_PARTITIONS
//! until all are free). Pure functions, no state.
//!
//! Invariant: a partition is never handed to a member while another member still holds it
//! (assigned or pending revocation), so no partition has two owners at any epoch.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::assignor::Assignment;

/// Where a member stands in its reconciliation (Kafka's MemberState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Reconciled to its member epoch's target.
    Stable,
    /// Must revoke `pending_revocation` before moving on.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members still hold.
    UnreleasedPartitions,
}

impl MemberState {
    /// The name Kafka logs and stores.
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "STABLE",
            MemberState::UnrevokedPartitions => "UNREVOKED_PARTITIONS",
            MemberState::UnreleasedPartitions => "UNRELEASED_PARTITIONS",
        }
    }
}

/// A member's assignment state: what reconciliation reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignmentState {
    pub state: MemberState,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Partitions the member may consume.
    pub assigned: Assignment,
    /// Partitions the member must give up before it gets new ones.
    pub pending_revocation: Assignment,
}

impl AssignmentState {
    /// The state of a member that has just joined.
    pub fn joining() -> Self {
        AssignmentState {
            state: MemberState::Stable,
            member_epoch: 0,
            previous_member_epoch: 0,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }

    /// Whether the member is stable at `target_epoch`.
    pub fn is_reconciled_to(&self, target_epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == target_epoch
    }

    fn with_epoch(&self, epoch: i32, state: MemberState) -> AssignmentState {
        AssignmentState {
            state,
            member_epoch: epoch,
            previous_member_epoch: self.member_epoch,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }
}

/// What reconciliation needs besides the member's own state.
pub struct Target<'a> {
    pub epoch: i32,
    pub assignment: &'a Assignment,
    /// Partitions the member reported owning in this heartbeat; `None` if it did not say.
    pub owned: Option<&'a Assignment>,
    /// Whether another member still holds a partition (assigned or pending revocation).
    pub held_by_other: &'a dyn Fn(Uuid, i32) -> bool,
}

/// The member's next state (the same state when it cannot move on yet).
pub fn reconcile(current: &AssignmentState, target: &Target<'_>) -> AssignmentState {
    match current.state {
        MemberState::Stable if current.member_epoch == target.epoch => current.clone(),
        MemberState::UnrevokedPartitions if owns_any(target.owned, &current.pending_revocation) => {
            current.clone()
        }
        _ => next_assignment(current, target),
    }
}

/// Whether the member still owns any of `revoking` (it does when it did not say).
fn owns_any(owned: Option<&Assignment>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(topic, partitions)| {
        revoking
            .get(topic)
            .is_some_and(|pending| !pending.is_disjoint(partitions))
    })
}

fn next_assignment(current: &AssignmentState, target: &Target<'_>) -> AssignmentState {
    let topics: BTreeSet<Uuid> = target
        .assignment
        .keys()
        .chain(current.assigned.keys())
        .copied()
        .collect();
    let mut kept = Assignment::new();
    let mut revoking = Assignment::new();
    let mut pending = Assignment::new();
    let mut unreleased = false;
    let empty = BTreeSet::new();
    for topic in topics {
        let wanted = target.assignment.get(&topic).unwrap_or(&empty);
        let had = current.assigned.get(&topic).unwrap_or(&empty);
        let keep: BTreeSet<i32> = had.intersection(wanted).copied().collect();
        let revoke: BTreeSet<i32> = had.difference(wanted).copied().collect();
        let mut new: BTreeSet<i32> = wanted.difference(had).copied().collect();
        let revoking_now = current.pending_revocation.get(&topic);
        let before = new.len();
        new.retain(|p| {
            !(target.held_by_other)(topic, *p) || revoking_now.is_some_and(|r| r.contains(p))
        });
        unreleased |= new.len() != before;
        insert_non_empty(&mut kept, topic, keep);
        insert_non_empty(&mut revoking, topic, revoke);
        insert_non_empty(&mut pending, topic, new);
    }
    if !revoking.is_empty() && owns_any(target.owned, &revoking) {
        let mut next = current.with_epoch(current.member_epoch, MemberState::UnrevokedPartitions);
        next.assigned = kept;
        next.pending_revocation = revoking;
        return next;
    }
    let state = match unreleased {
        true => MemberState::UnreleasedPartitions,
        false => MemberState::Stable,
    };
    let mut next = current.with_epoch(target.epoch, state);
    for (topic, partitions) in pending {
        kept.entry(topic).or_default().extend(partitions);
    }
    next.assigned = kept;
    next
}

fn insert_non_empty(map: &mut Assignment, topic: Uuid, partitions: BTreeSet<i32>) {
    if !partitions.is_empty() {
        map.insert(topic, partitions);
    }
}

impl std::fmt::Debug for Target<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("epoch", &self.epoch)
            .field("owned", &self.owned.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Uuid = Uuid::from_u128(7);

    fn parts(list: &[i32]) -> Assignment {
        let mut a = Assignment::new();
        if !list.is_empty() {
            a.insert(T, list.iter().copied().collect());
        }
        a
    }

    fn stable(epoch: i32, assigned: &[i32]) -> AssignmentState {
        AssignmentState {
            state: MemberState::Stable,
            member_epoch: epoch,
            previous_member_epoch: epoch - 1,
            assigned: parts(assigned),
            pending_revocation: Assignment::new(),
        }
    }

    #[test]
    fn a_member_revokes_before_it_gets_new_partitions() {
        // Goal: with partitions to give up and new ones to get, the member first revokes at
        // its current epoch, and gets the new ones at the target epoch only once its owned
        // partitions no longer include the revoked ones. Method: three reconcile steps.
        let member = stable(1, &[0, 1, 2]);
        let target = parts(&[2, 3]);
        let free = |_: Uuid, _: i32| false;
        let owned = parts(&[0, 1, 2]);
        let step = |m: &AssignmentState, owned: Option<&Assignment>| {
            reconcile(
                m,
                &Target {
                    epoch: 2,
                    assignment: &target,
                    owned,
                    held_by_other: &free,
                },
            )
        };
        let revoking = step(&member, Some(&owned));
        assert_eq!(revoking.state, MemberState::UnrevokedPartitions);
        assert_eq!(revoking.member_epoch, 1);
        assert_eq!(revoking.assigned, parts(&[2]));
        assert_eq!(revoking.pending_revocation, parts(&[0, 1]));
        let still = step(&revoking, Some(&owned));
        assert_eq!(
            still, revoking,
            "no progress while the member owns revoked partitions"
        );
        let unknown = step(&revoking, None);
        assert_eq!(
            unknown, revoking,
            "no progress when the member did not report"
        );
        let done = step(&revoking, Some(&parts(&[2])));
        assert_eq!(done.state, MemberState::Stable);
        assert_eq!(done.member_epoch, 2);
        assert_eq!(done.previous_member_epoch, 1);
        assert_eq!(done.assigned, parts(&[2, 3]));
        assert!(done.pending_revocation.is_empty());
    }

    #[test]
    fn a_partition_held_by_another_member_is_not_assigned() {
        // Goal: a partition still owned by another member is held back (UNRELEASED) and
        // given once it is free. Method: reconcile with partition 3 held, then free.
        let member = stable(1, &[0]);
        let target = parts(&[0, 3]);
        let held = |_: Uuid, p: i32| p == 3;
        let waiting = reconcile(
            &member,
            &Target {
                epoch: 2,
                assignment: &target,
                owned: Some(&parts(&[0])),
                held_by_other: &held,
            },
        );
        assert_eq!(waiting.state, MemberState::UnreleasedPartitions);
        assert_eq!(waiting.member_epoch, 2);
        assert_eq!(waiting.assigned, parts(&[0]));
        let free = |_: Uuid, _: i32| false;
        let done = reconcile(
            &waiting,
            &Target {
                epoch: 2,
                assignment: &target,
                owned: Some(&parts(&[0])),
                held_by_other: &free,
            },
        );
        assert_eq!(done.state, MemberState::Stable);
        assert_eq!(done.assigned, parts(&[0, 3]));
    }

    #[test]
    fn two_members_never_own_a_partition_at_once() {
        // Goal: while partitions move from A to B, no partition is ever in both A's and B's
        // assignment (assigned or pending revocation). Method: step both members alternately
        // through a move of 3 of A's 6 partitions to the new member B, checking each step.
        let all: Vec<i32> = (0..6).collect();
        let mut a = stable(1, &all);
        let mut b = AssignmentState::joining();
        let target_a = parts(&[0, 1, 2]);
        let target_b = parts(&[3, 4, 5]);
        let holds = |m: &AssignmentState, p: i32| {
            [&m.assigned, &m.pending_revocation]
                .iter()
                .any(|x| x.get(&T).is_some_and(|s| s.contains(&p)))
        };
        for round in 0..4 {
            let b_now = b.clone();
            let held_by_b = move |_: Uuid, p: i32| holds(&b_now, p);
            let owned_a = a.assigned.clone();
            a = reconcile(
                &a,
                &Target {
                    epoch: 2,
                    assignment: &target_a,
                    owned: Some(&owned_a),
                    held_by_other: &held_by_b,
                },
            );
            let a_now = a.clone();
            let held_by_a = move |_: Uuid, p: i32| holds(&a_now, p);
            let owned_b = b.assigned.clone();
            b = reconcile(
                &b,
                &Target {
                    epoch: 2,
                    assignment: &target_b,
                    owned: Some(&owned_b),
                    held_by_other: &held_by_a,
                },
            );
            for p in 0..6 {
                assert!(
                    !(holds(&a, p) && holds(&b, p)),
                    "round {round}: {p} owned twice"
                );
            }
        }
        assert_eq!(a.assigned, target_a);
        assert_eq!(b.assigned, target_b);
        assert!(a.is_reconciled_to(2) && b.is_reconciled_to(2));
    }
}
