//! Where replicas go and who leads: replica assignment for new partitions (rack-unaware
//! round robin, as Kafka's placer does without racks) and leader election from the ISR,
//! then the eligible leader replicas (KIP-966), then (unclean) any replica (Kafka's
//! PartitionChangeBuilder rules, in our own words).
//!
//! Pure functions over a [`ClusterState`]; the active controller turns their answers into
//! records. Must not: change state.

use serde::{Deserialize, Serialize};

use super::state::{ClusterState, PartitionChange};
use crate::metadata::{PartitionImage, TopicImage, NO_LEADER};

/// Replicas for `count` new partitions numbered from `first_index`, `factor` replicas each,
/// over `brokers` (sorted, unfenced): partition i starts at broker `(start + i)` and takes
/// the next ones round the ring, so leaders and followers spread evenly.
pub fn assign_replicas(
    brokers: &[i32],
    first_index: i32,
    count: i32,
    factor: usize,
    start: usize,
) -> Vec<Vec<i32>> {
    (0..count)
        .map(|i| {
            let first = start + (first_index + i) as usize;
            (0..factor)
                .map(|j| brokers[(first + j) % brokers.len()])
                .collect()
        })
        .collect()
}

/// Whether the topic allows electing a replica outside the ISR.
fn unclean_allowed(topic: &TopicImage, broker_default: bool) -> bool {
    topic
        .configs
        .get("unclean.leader.election.enable")
        .map_or(broker_default, |v| v.trim() == "true")
}

/// The first usable eligible leader replica (KIP-966) other than `gone`: when no ISR
/// member can lead, one of them does, alone in the new ISR, without losing a record below
/// the high watermark.
fn eligible(partition: &PartitionImage, gone: i32, usable: &dyn Fn(i32) -> bool) -> Option<i32> {
    partition
        .elr
        .iter()
        .copied()
        .find(|r| *r != gone && usable(*r))
}

/// The last known leader, when neither the ISR nor the ELR has a member left (all of
/// them came back from a crash, or never): it holds at least as much as any other
/// replica of the last epoch, so electing it keeps the partition available, as Kafka's
/// controller does by default.
fn last_known(partition: &PartitionImage, usable: &dyn Fn(i32) -> bool) -> Option<i32> {
    let none_left = partition.isr.is_empty() && partition.elr.is_empty();
    match partition.last_known_elr.as_slice() {
        [leader] if none_left && usable(*leader) => Some(*leader),
        _ => None,
    }
}

/// The change that takes `gone` (fenced or shutting down) out of `partition`: out of the
/// ISR (the last member too: it then joins the eligible leader replicas, KIP-966), and
/// out of the lead in favour of the first usable ISR member in replica order, else an
/// eligible replica, else with unclean election any usable replica.
fn without_broker(
    topic: &TopicImage,
    partition: &PartitionImage,
    gone: i32,
    usable: &dyn Fn(i32) -> bool,
    unclean_default: bool,
) -> Option<(i32, Vec<i32>)> {
    if !partition.replicas.contains(&gone) {
        return None;
    }
    let remaining: Vec<i32> = partition
        .isr
        .iter()
        .copied()
        .filter(|r| *r != gone)
        .collect();
    let isr = remaining.clone();
    if partition.leader != gone {
        return (isr != partition.isr).then_some((partition.leader, isr));
    }
    let clean = partition
        .replicas
        .iter()
        .copied()
        .find(|r| remaining.contains(r) && usable(*r));
    if let Some(leader) = clean {
        return Some((leader, isr));
    }
    if let Some(leader) = eligible(partition, gone, usable) {
        return Some((leader, vec![leader]));
    }
    if unclean_allowed(topic, unclean_default) {
        let any = partition
            .replicas
            .iter()
            .copied()
            .find(|r| *r != gone && usable(*r));
        if let Some(leader) = any {
            return Some((leader, vec![leader]));
        }
    }
    // No one else may lead: the partition goes offline (no leader, a new leader epoch).
    // The broker that was its last ISR member joins the ELR (see `with_elr`) and is
    // remembered as the last known leader: it leads again, at a newer epoch, when it comes
    // back after a clean shutdown, or after a crash if no eligible replica can (KIP-966).
    // It never resumes at the epoch it had: after a crash it may have lost its unflushed
    // tail, and only a new epoch lets followers that hold more of the old one find the
    // divergence (KIP-101).
    Some((NO_LEADER, isr))
}

/// Every change that moves leadership and ISR membership away from broker `gone`.
pub fn move_away_from(
    state: &ClusterState,
    gone: i32,
    usable: &dyn Fn(i32) -> bool,
    unclean_default: bool,
) -> Vec<PartitionChange> {
    changes_where(state, usable, |topic, _, partition, usable| {
        without_broker(topic, partition, gone, usable, unclean_default)
    })
}

/// Every change that moves leadership and ISR membership of `partitions` away from broker
/// `gone` (its replicas there went offline with a log directory).
pub fn move_replicas_away(
    state: &ClusterState,
    gone: i32,
    partitions: &[(String, i32)],
    usable: &dyn Fn(i32) -> bool,
    unclean_default: bool,
) -> Vec<PartitionChange> {
    changes_where(state, usable, |topic, index, partition, usable| {
        let listed = partitions
            .iter()
            .any(|(t, i)| *t == topic.name && *i == index);
        listed
            .then(|| without_broker(topic, partition, gone, usable, unclean_default))
            .flatten()
    })
}

/// A change for every partition to which `change` gives a new (leader, ISR). `change` is
/// handed `usable` narrowed to the brokers whose replica of that partition is not offline,
/// so no election picks a replica on a failed log directory.
fn changes_where(
    state: &ClusterState,
    usable: &dyn Fn(i32) -> bool,
    change: impl Fn(&TopicImage, i32, &PartitionImage, &dyn Fn(i32) -> bool) -> Option<(i32, Vec<i32>)>,
) -> Vec<PartitionChange> {
    let mut changes = Vec::new();
    for topic in state.topics.values() {
        for (index, partition) in topic.partitions.iter().enumerate() {
            let index = index as i32;
            let here = |b: i32| usable(b) && !state.replica_offline(b, &topic.name, index);
            if let Some((leader, isr)) = change(topic, index, partition, &here) {
                changes.push(PartitionChange::new(&topic.name, index, leader, isr));
            }
        }
    }
    changes
}

/// How [`elect_leaders`] may choose.
#[derive(Debug, Clone, Copy)]
pub struct Election {
    /// Also give partitions back to their first replica (preferred-leader election).
    pub preferred: bool,
    /// The broker's `unclean.leader.election.enable`, which topics may override.
    pub unclean_default: bool,
}

/// The leader partition `p` of `topic` should have, if it should change.
fn wanted_leader(
    topic: &TopicImage,
    p: &PartitionImage,
    usable: &dyn Fn(i32) -> bool,
    election: Election,
) -> Option<(i32, Vec<i32>)> {
    let leader_ok = p.leader != NO_LEADER && usable(p.leader);
    let first = p.replicas.first().copied().unwrap_or(NO_LEADER);
    if leader_ok {
        let prefer = election.preferred && first != p.leader;
        return (prefer && p.isr.contains(&first) && usable(first)).then(|| (first, p.isr.clone()));
    }
    let clean = p
        .replicas
        .iter()
        .copied()
        .find(|r| p.isr.contains(r) && usable(*r));
    if let Some(leader) = clean {
        return Some((leader, p.isr.clone()));
    }
    if let Some(leader) = eligible(p, NO_LEADER, usable).or_else(|| last_known(p, usable)) {
        return Some((leader, vec![leader]));
    }
    if unclean_allowed(topic, election.unclean_default) {
        // Unclean: a replica outside the ISR leads, alone in the new ISR.
        return p
            .replicas
            .iter()
            .copied()
            .find(|r| usable(*r))
            .map(|leader| (leader, vec![leader]));
    }
    None
}

/// Elections for partitions whose leader is missing or not usable: the first usable ISR
/// member in replica order, else (if the topic allows unclean election) the first usable
/// replica; with `preferred`, also partitions whose first replica is usable, in the ISR
/// and not leading (preferred-leader election).
pub fn elect_leaders(
    state: &ClusterState,
    usable: &dyn Fn(i32) -> bool,
    election: Election,
) -> Vec<PartitionChange> {
    changes_where(state, usable, |topic, _, p, usable| {
        wanted_leader(topic, p, usable, election).filter(|(l, _)| *l != p.leader)
    })
}

/// What a requested election (the ElectLeaders API) did to one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionOutcome {
    Elected,
    /// The preferred replica already leads, or (unclean) a live leader exists.
    NotNeeded,
    /// The preferred replica is not live or not in the ISR.
    PreferredLeaderNotAvailable,
    /// No live replica may lead.
    EligibleLeadersNotAvailable,
    UnknownPartition,
}

/// The requested election of one partition: preferred (its first replica, if live and in
/// the ISR), or unclean (only when it has no live leader: a live ISR member, else any live
/// replica), as Kafka's ElectLeaders does (KIP-460).
pub fn elect_requested(
    p: &PartitionImage,
    usable: &dyn Fn(i32) -> bool,
    unclean: bool,
) -> (ElectionOutcome, Option<(i32, Vec<i32>)>) {
    let first = p.replicas.first().copied().unwrap_or(NO_LEADER);
    let leader_live = p.leader != NO_LEADER && usable(p.leader);
    if !unclean {
        if first == p.leader && leader_live {
            return (ElectionOutcome::NotNeeded, None);
        }
        if usable(first) && p.isr.contains(&first) {
            return (ElectionOutcome::Elected, Some((first, p.isr.clone())));
        }
        return (ElectionOutcome::PreferredLeaderNotAvailable, None);
    }
    if leader_live {
        return (ElectionOutcome::NotNeeded, None);
    }
    let clean = p
        .replicas
        .iter()
        .copied()
        .find(|r| p.isr.contains(r) && usable(*r));
    let any = p.replicas.iter().copied().find(|r| usable(*r));
    match (clean, any) {
        (Some(leader), _) => (ElectionOutcome::Elected, Some((leader, p.isr.clone()))),
        (None, Some(leader)) => (ElectionOutcome::Elected, Some((leader, vec![leader]))),
        (None, None) => (ElectionOutcome::EligibleLeadersNotAvailable, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigMap;
    use uuid::Uuid;

    fn state_with(replicas: &[i32], isr: &[i32], leader: i32, unclean: bool) -> ClusterState {
        let mut configs = ConfigMap::new();
        if unclean {
            configs.insert("unclean.leader.election.enable".into(), "true".into());
        }
        let mut partition = PartitionImage::new(replicas.to_vec());
        partition.isr = isr.to_vec();
        partition.leader = leader;
        let topic = TopicImage {
            name: "t".into(),
            topic_id: Uuid::nil(),
            partitions: vec![partition],
            configs,
        };
        let mut state = ClusterState::default();
        state.topics.insert("t".into(), topic);
        state
    }

    #[test]
    fn an_eligible_leader_replica_leads_when_no_isr_member_can() {
        // ISR [1] (below min ISR 2), ELR [2]: when 1 goes, 2 leads alone rather than the
        // partition staying offline (KIP-966).
        let mut state = state_with(&[1, 2, 3], &[1], 1, false);
        state.topics.get_mut("t").expect("t").partitions[0].elr = vec![2];
        let usable = |b: i32| b == 2 || b == 3;
        let changes = move_away_from(&state, 1, &usable, false);
        assert_eq!((changes[0].leader, changes[0].isr.clone()), (2, vec![2]));
        // Without an ELR member the partition goes offline with an empty ISR (1 joins
        // the ELR when the controller proposes the change: `with_elr`).
        state.topics.get_mut("t").expect("t").partitions[0]
            .elr
            .clear();
        let offline = move_away_from(&state, 1, &usable, false);
        assert_eq!(
            (offline[0].leader, offline[0].isr.clone()),
            (NO_LEADER, vec![])
        );
    }

    /// `t`-0 offline after its last ISR member 1 went: ISR empty, `elr`, last known
    /// leader 1.
    fn offline_with(elr: &[i32]) -> ClusterState {
        let mut state = state_with(&[1, 2, 3], &[], NO_LEADER, false);
        let partition = &mut state.topics.get_mut("t").expect("t").partitions[0];
        partition.elr = elr.to_vec();
        partition.last_known_elr = vec![1];
        state
    }

    #[test]
    fn an_offline_partition_elects_an_eligible_replica_then_its_last_known_leader() {
        let elected = |state: &ClusterState, usable: &dyn Fn(i32) -> bool| {
            let changes = elect_leaders(state, usable, PLAIN);
            changes.first().map(|c| (c.leader, c.isr.clone()))
        };
        let back_clean = offline_with(&[1, 2]);
        assert_eq!(elected(&back_clean, &|b| b == 2), Some((2, vec![2])));
        assert_eq!(elected(&back_clean, &|b| b == 3), None, "3 is not eligible");
        // 1 came back from a crash (struck from the ELR); 2 is still eligible: wait for it.
        let crashed = offline_with(&[2]);
        assert_eq!(elected(&crashed, &|b| b == 1), None);
        // Nobody eligible is left: the last known leader leads.
        let none_left = offline_with(&[]);
        assert_eq!(elected(&none_left, &|b| b == 1), Some((1, vec![1])));
        assert_eq!(elected(&none_left, &|b| b == 2), None);
    }

    #[test]
    fn round_robin_spreads_leaders_over_brokers() {
        let replicas = assign_replicas(&[1, 2, 3], 0, 3, 2, 0);
        assert_eq!(replicas, vec![vec![1, 2], vec![2, 3], vec![3, 1]]);
    }

    #[test]
    fn a_gone_leader_is_replaced_by_the_next_usable_isr_member() {
        let state = state_with(&[1, 2, 3], &[1, 2, 3], 1, false);
        let changes = move_away_from(&state, 1, &|b| b != 2, false);
        assert_eq!((changes[0].leader, changes[0].isr.clone()), (3, vec![2, 3]));
    }

    #[test]
    fn without_an_isr_candidate_only_an_unclean_topic_elects_outside_it() {
        // A clean topic goes offline; its last ISR member joins the ELR.
        let clean = state_with(&[1, 2], &[1], 1, false);
        let offline = move_away_from(&clean, 1, &|b| b != 1, false);
        assert_eq!(
            (offline[0].leader, offline[0].isr.clone()),
            (NO_LEADER, vec![])
        );
        let gone = offline_with(&[1]);
        assert!(
            move_away_from(&gone, 1, &|b| b != 1, false).is_empty(),
            "an offline partition is not changed again"
        );
        let back = elect_leaders(&gone, &|_| true, PLAIN);
        assert_eq!(
            (back[0].leader, back[0].isr.clone()),
            (1, vec![1]),
            "elected on return"
        );
        let unclean = state_with(&[1, 2], &[1], 1, true);
        let changes = move_away_from(&unclean, 1, &|b| b != 1, false);
        assert_eq!((changes[0].leader, changes[0].isr.clone()), (2, vec![2]));
    }

    const PLAIN: Election = Election {
        preferred: false,
        unclean_default: false,
    };

    #[test]
    fn preferred_election_returns_the_lead_to_the_first_replica() {
        let state = state_with(&[1, 2], &[1, 2], 2, false);
        assert!(elect_leaders(&state, &|_| true, PLAIN).is_empty());
        let preferred = Election {
            preferred: true,
            ..PLAIN
        };
        let changes = elect_leaders(&state, &|_| true, preferred);
        assert_eq!(changes[0].leader, 1);
    }

    #[test]
    fn requested_elections_follow_kafkas_outcomes() {
        let mut p = PartitionImage::new(vec![1, 2]);
        assert_eq!(
            elect_requested(&p, &|_| true, false).0,
            ElectionOutcome::NotNeeded
        );
        p.leader = 2;
        let (outcome, change) = elect_requested(&p, &|_| true, false);
        assert_eq!(
            (outcome, change.map(|c| c.0)),
            (ElectionOutcome::Elected, Some(1))
        );
        let outcome = elect_requested(&p, &|b| b == 2, false).0;
        assert_eq!(outcome, ElectionOutcome::PreferredLeaderNotAvailable);
        assert_eq!(
            elect_requested(&p, &|_| true, true).0,
            ElectionOutcome::NotNeeded
        );
        p.isr = vec![2];
        let (outcome, change) = elect_requested(&p, &|b| b == 1, true);
        assert_eq!(
            (outcome, change),
            (ElectionOutcome::Elected, Some((1, vec![1])))
        );
        let outcome = elect_requested(&p, &|_| false, true).0;
        assert_eq!(outcome, ElectionOutcome::EligibleLeadersNotAvailable);
    }

    #[test]
    fn a_returning_replica_outside_the_isr_leads_only_when_unclean_is_allowed() {
        let clean = state_with(&[1, 2], &[1], 1, false);
        assert!(elect_leaders(&clean, &|b| b == 2, PLAIN).is_empty());
        let unclean = state_with(&[1, 2], &[1], 1, true);
        let changes = elect_leaders(&unclean, &|b| b == 2, PLAIN);
        assert_eq!((changes[0].leader, changes[0].isr.clone()), (2, vec![2]));
    }
}
