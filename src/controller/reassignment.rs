//! Partition reassignment (KIP-455) as Kafka's controller runs it, as pure functions over
//! one partition: a reassignment first adds the target replicas to the partition (the
//! target first, then the replicas it removes), the new ones catch up as followers and join
//! the ISR, and the change that finds every target replica in the ISR completes it: the
//! removed replicas leave the replicas and the ISR, and a new leader is elected from the
//! target if the old one left. A cancelled reassignment reverts to the original replicas.
//!
//! Must not: change state; the active controller turns these answers into records.

use super::state::{Assignment, PartitionChange};
use crate::metadata::{PartitionImage, NO_LEADER};

/// `a` without the members of `b`, in `a`'s order.
fn without(a: &[i32], b: &[i32]) -> Vec<i32> {
    a.iter().copied().filter(|r| !b.contains(r)).collect()
}

/// The assignment that starts moving `current` to `target` (the replicas it has now, those
/// of a reassignment under way included, as Kafka counts them): the target first, then the
/// replicas being removed; adding and removing sorted.
pub fn start(current: &PartitionImage, target: &[i32]) -> Assignment {
    let mut removing = without(&current.replicas, target);
    removing.sort_unstable();
    let mut adding = without(target, &current.replicas);
    adding.sort_unstable();
    let mut replicas = target.to_vec();
    replicas.extend(&removing);
    Assignment {
        replicas,
        adding,
        removing,
    }
}

/// The replicas and ISR `assignment` ends with when the ISR is `isr`, if it may end now:
/// the ISR keeps a member outside the removed ones and holds every target replica
/// (Kafka's maybeCompleteReassignment).
pub fn completed(assignment: &Assignment, isr: &[i32]) -> Option<(Vec<i32>, Vec<i32>)> {
    if assignment.adding.is_empty() && assignment.removing.is_empty() {
        return None;
    }
    let isr = without(isr, &assignment.removing);
    let replicas = without(&assignment.replicas, &assignment.removing);
    let done = !isr.is_empty() && !replicas.is_empty() && replicas.iter().all(|r| isr.contains(r));
    done.then_some((replicas, isr))
}

/// A cancelled reassignment: the original replicas (without those being added) and the
/// ISR without them. When every ISR member was being added the ISR becomes the first
/// original replica alone, an unclean choice (`true`) the caller may only make where
/// unclean election is allowed (Kafka's PartitionReassignmentRevert).
pub fn revert(current: &PartitionImage) -> Option<(Assignment, Vec<i32>, bool)> {
    let replicas = without(&current.replicas, &current.adding_replicas);
    let isr = without(&current.isr, &current.adding_replicas);
    let first = *replicas.first()?;
    let unclean = isr.is_empty();
    let isr = if unclean { vec![first] } else { isr };
    let assignment = Assignment {
        replicas,
        adding: Vec::new(),
        removing: Vec::new(),
    };
    Some((assignment, isr, unclean))
}

/// Finishes a `change` of `current`: completes the reassignment it leaves (its own
/// assignment, else the one under way) when its ISR allows, and, when the leader is left
/// outside the ISR, elects the first target replica in the ISR that is `usable` (none:
/// no leader, at a new epoch).
pub fn settle(
    current: &PartitionImage,
    mut change: PartitionChange,
    usable: &dyn Fn(i32) -> bool,
) -> PartitionChange {
    let assignment = change.assignment.clone().unwrap_or_else(|| Assignment {
        replicas: current.replicas.clone(),
        adding: current.adding_replicas.clone(),
        removing: current.removing_replicas.clone(),
    });
    if let Some((replicas, isr)) = completed(&assignment, &change.isr) {
        change.assignment = Some(Assignment {
            replicas,
            adding: Vec::new(),
            removing: Vec::new(),
        });
        change.isr = isr;
    }
    if change.leader != NO_LEADER && !change.isr.contains(&change.leader) {
        let replicas = change
            .assignment
            .as_ref()
            .map_or(&current.replicas, |a| &a.replicas);
        change.leader = replicas
            .iter()
            .copied()
            .find(|r| change.isr.contains(r) && usable(*r))
            .unwrap_or(NO_LEADER);
    }
    change
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionImage {
        let mut p = PartitionImage::new(replicas.to_vec());
        p.isr = isr.to_vec();
        p.leader = leader;
        p
    }

    #[test]
    fn a_move_adds_the_target_first_and_removes_the_rest_later() {
        let p = partition(&[1, 2], &[1, 2], 1);
        let moving = start(&p, &[2, 3]);
        assert_eq!(moving.replicas, [2, 3, 1]);
        assert_eq!(
            (moving.adding.clone(), moving.removing.clone()),
            (vec![3], vec![1])
        );
        assert_eq!(completed(&moving, &[1, 2]), None, "3 has not caught up");
        assert_eq!(
            completed(&moving, &[1, 2, 3]),
            Some((vec![2, 3], vec![2, 3]))
        );
        let reorder = start(&p, &[2, 1]);
        assert!(reorder.adding.is_empty() && reorder.removing.is_empty());
        assert_eq!(completed(&reorder, &[1, 2]), None, "nothing to complete");
    }

    #[test]
    fn completing_a_move_off_the_leader_elects_a_target_replica() {
        let mut p = partition(&[2, 3, 1], &[1, 2], 1);
        p.adding_replicas = vec![3];
        p.removing_replicas = vec![1];
        let joined = PartitionChange::new("t", 0, 1, vec![1, 2, 3]);
        let done = settle(&p, joined, &|_| true);
        let assignment = done.assignment.expect("completed");
        assert_eq!(assignment.replicas, [2, 3]);
        assert!(assignment.adding.is_empty() && assignment.removing.is_empty());
        assert_eq!((done.leader, done.isr), (2, vec![2, 3]));
        let waiting = settle(&p, PartitionChange::new("t", 0, 1, vec![1, 2]), &|_| true);
        assert_eq!(waiting.assignment, None, "3 not yet in the ISR");
        let no_one = settle(&p, PartitionChange::new("t", 0, 1, vec![1, 2, 3]), &|_| {
            false
        });
        assert_eq!(no_one.leader, NO_LEADER, "no target replica is usable");
    }

    #[test]
    fn a_cancel_reverts_to_the_original_replicas_and_flags_an_unclean_one() {
        let mut p = partition(&[2, 3, 1], &[1, 2], 1);
        p.adding_replicas = vec![3];
        p.removing_replicas = vec![1];
        let (assignment, isr, unclean) = revert(&p).expect("revert");
        assert_eq!(
            (assignment.replicas, isr, unclean),
            (vec![2, 1], vec![1, 2], false)
        );
        let mut all_new = partition(&[3, 4, 1], &[3], 3);
        all_new.adding_replicas = vec![3, 4];
        all_new.removing_replicas = vec![1];
        let (_, isr, unclean) = revert(&all_new).expect("revert");
        assert_eq!((isr, unclean), (vec![1], true));
    }
}
