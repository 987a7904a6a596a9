//! The server-side assignors of KIP-848 consumer groups (`group.consumer.assignors`):
//! `uniform` and `range`. Each turns the members' subscriptions and the partition counts of
//! the subscribed topics into a target assignment. Pure functions, no state.
//!
//! - `uniform` (after Kafka's UniformAssignor): every partition of a subscribed topic goes
//!   to one of its subscribers, member partition counts differ by at most one wherever the
//!   subscriptions allow it, and a partition stays with its previous target owner unless the
//!   balance needs it elsewhere (sticky across epochs).
//! - `range` (after Kafka's RangeAssignor): per topic, the subscribers sorted by member id
//!   get contiguous ranges; the first `partitions % subscribers` get one more.
//!
//! Invariant of every result: each partition of a subscribed topic is assigned to exactly
//! one member subscribed to that topic, and to nobody else.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

/// Partitions per topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// The assignor names Kafka ships; `group.consumer.assignors` may list these.
pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";

/// A topic as the assignors see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicMetadata {
    pub topic_id: Uuid,
    pub partitions: i32,
}

/// One member's input to an assignor.
#[derive(Debug, Clone)]
pub struct AssignorMember<'a> {
    pub member_id: &'a str,
    pub subscribed: &'a BTreeSet<String>,
}

/// The target assignment of every member (members subscribed to nothing get an empty one).
pub type TargetAssignment = HashMap<String, Assignment>;

/// Runs the assignor called `name` (which must be one of [`UNIFORM`] and [`RANGE`]; any
/// other name runs `uniform`, the default).
pub fn assign(
    name: &str,
    members: &[AssignorMember<'_>],
    topics: &BTreeMap<String, TopicMetadata>,
    previous: &TargetAssignment,
) -> TargetAssignment {
    match name {
        RANGE => range(members, topics),
        _ => uniform(members, topics, previous),
    }
}

/// Kafka's range assignment: contiguous ranges per topic over the sorted subscribers.
pub fn range(
    members: &[AssignorMember<'_>],
    topics: &BTreeMap<String, TopicMetadata>,
) -> TargetAssignment {
    let mut result = empty_result(members);
    for (name, topic) in topics {
        let mut subscribers: Vec<&str> = members
            .iter()
            .filter(|m| m.subscribed.contains(name))
            .map(|m| m.member_id)
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        subscribers.sort_unstable();
        let count = subscribers.len() as i32;
        let (quota, extra) = (topic.partitions / count, topic.partitions % count);
        let mut next = 0;
        for (index, member) in subscribers.iter().enumerate() {
            let share = quota + i32::from((index as i32) < extra);
            if share == 0 {
                continue;
            }
            let partitions = result.entry(member.to_string()).or_default();
            partitions
                .entry(topic.topic_id)
                .or_default()
                .extend(next..next + share);
            next += share;
        }
    }
    result
}

/// One partition during a uniform assignment: who may own it and who does.
struct Slot<'a> {
    topic_id: Uuid,
    partition: i32,
    eligible: Vec<&'a str>,
    owner: Option<&'a str>,
}

/// Kafka's uniform assignment: balanced and sticky (see the module documentation).
pub fn uniform(
    members: &[AssignorMember<'_>],
    topics: &BTreeMap<String, TopicMetadata>,
    previous: &TargetAssignment,
) -> TargetAssignment {
    let mut sorted: Vec<&AssignorMember<'_>> = members.iter().collect();
    sorted.sort_unstable_by_key(|m| m.member_id);
    let previous_owner = previous_owners(previous);
    let mut counts: HashMap<&str, usize> = sorted.iter().map(|m| (m.member_id, 0)).collect();
    let mut slots = Vec::new();
    for (name, topic) in topics {
        let eligible: Vec<&str> = sorted
            .iter()
            .filter(|m| m.subscribed.contains(name))
            .map(|m| m.member_id)
            .collect();
        if eligible.is_empty() {
            continue;
        }
        for partition in 0..topic.partitions {
            let owner = previous_owner
                .get(&(topic.topic_id, partition))
                .and_then(|owner| eligible.iter().find(|m| **m == owner.as_str()).copied());
            if let Some(owner) = owner {
                *counts.entry(owner).or_default() += 1;
            }
            slots.push(Slot {
                topic_id: topic.topic_id,
                partition,
                eligible: eligible.clone(),
                owner,
            });
        }
    }
    place_unowned(&mut slots, &mut counts);
    balance(&mut slots, &mut counts);
    let mut result = empty_result(members);
    for slot in slots {
        if let Some(owner) = slot.owner {
            let partitions = result.entry(owner.to_string()).or_default();
            partitions
                .entry(slot.topic_id)
                .or_default()
                .insert(slot.partition);
        }
    }
    result
}

fn empty_result(members: &[AssignorMember<'_>]) -> TargetAssignment {
    members
        .iter()
        .map(|m| (m.member_id.to_string(), Assignment::new()))
        .collect()
}

fn previous_owners(previous: &TargetAssignment) -> HashMap<(Uuid, i32), &String> {
    let mut owners = HashMap::new();
    for (member, assignment) in previous {
        for (topic_id, partitions) in assignment {
            for partition in partitions {
                owners.insert((*topic_id, *partition), member);
            }
        }
    }
    owners
}

/// The eligible member with the fewest partitions (ties to the smallest member id, as
/// `eligible` is sorted).
fn least_loaded<'a>(eligible: &[&'a str], counts: &HashMap<&str, usize>) -> Option<&'a str> {
    eligible
        .iter()
        .min_by_key(|m| counts.get(*m).copied().unwrap_or_default())
        .copied()
}

/// Gives every partition without a (still subscribed) previous owner to its least loaded
/// subscriber.
fn place_unowned<'a>(slots: &mut [Slot<'a>], counts: &mut HashMap<&'a str, usize>) {
    for slot in slots.iter_mut().filter(|s| s.owner.is_none()) {
        if let Some(member) = least_loaded(&slot.eligible, counts) {
            slot.owner = Some(member);
            *counts.entry(member).or_default() += 1;
        }
    }
}

/// Moves partitions from a member to a subscriber with at least two fewer, until no such
/// move exists. Each move lowers the sum of squared counts, so the loop ends; the moves
/// taken are the ones balance needs, everything else stays where it was.
fn balance<'a>(slots: &mut [Slot<'a>], counts: &mut HashMap<&'a str, usize>) {
    let mut moved = true;
    while moved {
        moved = false;
        for slot in slots.iter_mut() {
            let Some(owner) = slot.owner else { continue };
            let Some(target) = least_loaded(&slot.eligible, counts) else {
                continue;
            };
            let owner_count = counts.get(owner).copied().unwrap_or_default();
            let target_count = counts.get(target).copied().unwrap_or_default();
            if target_count + 1 < owner_count {
                slot.owner = Some(target);
                counts.insert(owner, owner_count - 1);
                counts.insert(target, target_count + 1);
                moved = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(list: &[(&str, u128, i32)]) -> BTreeMap<String, TopicMetadata> {
        list.iter()
            .map(|(name, id, partitions)| {
                let topic = TopicMetadata {
                    topic_id: Uuid::from_u128(*id),
                    partitions: *partitions,
                };
                (name.to_string(), topic)
            })
            .collect()
    }

    fn subscriptions(list: &[(&str, &[&str])]) -> Vec<(String, BTreeSet<String>)> {
        list.iter()
            .map(|(id, topics)| {
                let set = topics.iter().map(|t| t.to_string()).collect();
                (id.to_string(), set)
            })
            .collect()
    }

    fn members(subs: &[(String, BTreeSet<String>)]) -> Vec<AssignorMember<'_>> {
        subs.iter()
            .map(|(id, set)| AssignorMember {
                member_id: id,
                subscribed: set,
            })
            .collect()
    }

    fn count(assignment: &Assignment) -> usize {
        assignment.values().map(BTreeSet::len).sum()
    }

    /// Checks the module invariant: every partition exactly once, to a subscriber.
    fn assert_complete_and_disjoint(
        result: &TargetAssignment,
        subs: &[(String, BTreeSet<String>)],
        topics: &BTreeMap<String, TopicMetadata>,
    ) {
        for (name, topic) in topics {
            let subscribed = subs.iter().any(|(_, set)| set.contains(name));
            for partition in 0..topic.partitions {
                let owners: Vec<&String> = result
                    .iter()
                    .filter(|(_, a)| {
                        a.get(&topic.topic_id)
                            .is_some_and(|p| p.contains(&partition))
                    })
                    .map(|(m, _)| m)
                    .collect();
                let expected = usize::from(subscribed);
                assert_eq!(owners.len(), expected, "{name}-{partition}: {owners:?}");
                for owner in owners {
                    let set = &subs.iter().find(|(id, _)| id == owner).expect("member").1;
                    assert!(set.contains(name), "{owner} got {name} without subscribing");
                }
            }
        }
    }

    #[test]
    fn uniform_balances_within_one_partition() {
        // Goal: 3 members on 2 topics of 7 and 4 partitions get 4/4/3. Method: count.
        let t = topics(&[("a", 1, 7), ("b", 2, 4)]);
        let subs = subscriptions(&[
            ("m1", &["a", "b"]),
            ("m2", &["a", "b"]),
            ("m3", &["a", "b"]),
        ]);
        let result = uniform(&members(&subs), &t, &TargetAssignment::new());
        assert_complete_and_disjoint(&result, &subs, &t);
        let mut counts: Vec<usize> = result.values().map(count).collect();
        counts.sort_unstable();
        assert_eq!(counts, vec![3, 4, 4]);
    }

    #[test]
    fn uniform_is_sticky_when_a_member_joins() {
        // Goal: a joining member takes partitions only from others, and only as many as
        // balance needs. Method: assign 6 partitions to 2 members, add a third, compare.
        let t = topics(&[("a", 1, 6)]);
        let two = subscriptions(&[("m1", &["a"]), ("m2", &["a"])]);
        let first = uniform(&members(&two), &t, &TargetAssignment::new());
        let three = subscriptions(&[("m1", &["a"]), ("m2", &["a"]), ("m3", &["a"])]);
        let second = uniform(&members(&three), &t, &first);
        assert_complete_and_disjoint(&second, &three, &t);
        for member in ["m1", "m2"] {
            let before = &first[member][&Uuid::from_u128(1)];
            let after = &second[member][&Uuid::from_u128(1)];
            assert_eq!(after.len(), 2, "{member}");
            assert!(
                after.is_subset(before),
                "{member} got a new partition: {after:?}"
            );
        }
        assert_eq!(count(&second["m3"]), 2);
    }

    #[test]
    fn uniform_gives_everything_to_the_last_member() {
        // Goal: when one of two members leaves, the other gets all partitions and keeps its
        // own. Method: assign to two, then to one with the first result as previous.
        let t = topics(&[("a", 1, 6)]);
        let two = subscriptions(&[("m1", &["a"]), ("m2", &["a"])]);
        let first = uniform(&members(&two), &t, &TargetAssignment::new());
        let one = subscriptions(&[("m2", &["a"])]);
        let second = uniform(&members(&one), &t, &first);
        assert_eq!(count(&second["m2"]), 6);
        assert!(first["m2"][&Uuid::from_u128(1)].is_subset(&second["m2"][&Uuid::from_u128(1)]));
    }

    #[test]
    fn uniform_respects_heterogeneous_subscriptions() {
        // Goal: only subscribers get a topic's partitions, and balance holds where it can.
        // Method: m1 on a+b, m2 on b only; a has 4 partitions and b has 4.
        let t = topics(&[("a", 1, 4), ("b", 2, 4)]);
        let subs = subscriptions(&[("m1", &["a", "b"]), ("m2", &["b"])]);
        let result = uniform(&members(&subs), &t, &TargetAssignment::new());
        assert_complete_and_disjoint(&result, &subs, &t);
        assert_eq!(count(&result["m1"]), 4);
        assert_eq!(count(&result["m2"]), 4);
        assert!(!result["m2"].contains_key(&Uuid::from_u128(1)));
    }

    #[test]
    fn range_assigns_contiguous_ranges_per_topic() {
        // Goal: Kafka's ranges: 7 partitions over 3 members are 0-2, 3-4, 5-6 in member id
        // order, for every topic alike. Method: compare with the expected ranges.
        let t = topics(&[("a", 1, 7), ("b", 2, 3)]);
        let subs = subscriptions(&[("m2", &["a", "b"]), ("m1", &["a", "b"]), ("m3", &["a"])]);
        let result = range(&members(&subs), &t);
        assert_complete_and_disjoint(&result, &subs, &t);
        let a = |m: &str| {
            result[m][&Uuid::from_u128(1)]
                .iter()
                .copied()
                .collect::<Vec<_>>()
        };
        assert_eq!(a("m1"), vec![0, 1, 2]);
        assert_eq!(a("m2"), vec![3, 4]);
        assert_eq!(a("m3"), vec![5, 6]);
        let b = |m: &str| {
            result[m][&Uuid::from_u128(2)]
                .iter()
                .copied()
                .collect::<Vec<_>>()
        };
        assert_eq!(b("m1"), vec![0, 1]);
        assert_eq!(b("m2"), vec![2]);
        assert!(!result["m3"].contains_key(&Uuid::from_u128(2)));
    }

    #[test]
    fn unsubscribed_topics_are_not_assigned() {
        // Goal: a topic nobody subscribes to stays unassigned. Method: both assignors.
        let t = topics(&[("a", 1, 2), ("z", 9, 3)]);
        let subs = subscriptions(&[("m1", &["a"])]);
        for name in [UNIFORM, RANGE] {
            let result = assign(name, &members(&subs), &t, &TargetAssignment::new());
            assert_complete_and_disjoint(&result, &subs, &t);
            assert!(!result["m1"].contains_key(&Uuid::from_u128(9)), "{name}");
        }
    }
}
