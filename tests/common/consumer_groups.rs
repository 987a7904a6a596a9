//! Raw KIP-848 helpers: a simulated consumer that sends ConsumerGroupHeartbeat, applies
//! the assignment it gets at once (revoking and taking partitions) and reports what it
//! owns in its next heartbeat, as Java's consumer does.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::*;
use uuid::Uuid;

use super::groups::{gid, s};
use super::{name, Client};

/// Partitions per topic id.
pub type Owned = BTreeMap<Uuid, BTreeSet<i32>>;

/// A first heartbeat (epoch 0) of `member_id` subscribing to `topics`.
pub fn heartbeat_join(
    group: &str,
    member_id: &str,
    topics: &[&str],
) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s(member_id))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| name(t)).collect()))
        .with_topic_partitions(Some(Vec::new()))
}

/// A simulated consumer of the consumer protocol.
#[derive(Debug, Clone)]
pub struct Member {
    pub group: String,
    pub member_id: String,
    pub epoch: i32,
    pub owned: Owned,
    pub instance_id: Option<String>,
    pub rebalance_timeout_ms: i32,
}

/// One heartbeat's outcome.
pub type Beat = ConsumerGroupHeartbeatResponse;

fn wire_owned(owned: &Owned) -> Vec<TopicPartitions> {
    owned
        .iter()
        .map(|(id, partitions)| {
            TopicPartitions::default()
                .with_topic_id(*id)
                .with_partitions(partitions.iter().copied().collect())
        })
        .collect()
}

impl Member {
    /// A member with a fresh client-generated id (KIP-1082), not yet joined.
    pub fn new(group: &str) -> Member {
        Member {
            group: group.to_string(),
            member_id: Uuid::new_v4().to_string(),
            epoch: 0,
            owned: Owned::new(),
            instance_id: None,
            rebalance_timeout_ms: 30_000,
        }
    }

    /// Joins (epoch 0) subscribed to `topics`; panics on an error.
    pub async fn join(&mut self, client: &mut Client, topics: &[&str]) -> Beat {
        let request = heartbeat_join(&self.group, &self.member_id, topics)
            .with_instance_id(self.instance_id.as_deref().map(s))
            .with_rebalance_timeout_ms(self.rebalance_timeout_ms);
        self.epoch = 0;
        self.owned.clear();
        let response = client.call(&request, 1).await;
        assert_eq!(response.error_code, 0, "join: {:?}", response.error_message);
        self.apply(&response);
        response
    }

    /// A regular heartbeat reporting the owned partitions; applies the answer.
    pub async fn beat(&mut self, client: &mut Client) -> Beat {
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(gid(&self.group))
            .with_member_id(s(&self.member_id))
            .with_member_epoch(self.epoch)
            .with_instance_id(self.instance_id.as_deref().map(s))
            .with_rebalance_timeout_ms(-1)
            .with_topic_partitions(Some(wire_owned(&self.owned)));
        let response = client.call(&request, 1).await;
        if response.error_code == 0 {
            self.apply(&response);
        }
        response
    }

    /// Leaves with `epoch` (-1, or -2 for a static member's temporary leave).
    pub async fn leave(&mut self, client: &mut Client, epoch: i32) -> Beat {
        let request = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(gid(&self.group))
            .with_member_id(s(&self.member_id))
            .with_member_epoch(epoch)
            .with_instance_id(self.instance_id.as_deref().map(s));
        client.call(&request, 1).await
    }

    /// Takes the epoch and assignment of an answer.
    pub fn apply(&mut self, response: &Beat) {
        self.epoch = response.member_epoch;
        if let Some(assignment) = &response.assignment {
            self.owned = assignment
                .topic_partitions
                .iter()
                .map(|t| (t.topic_id, t.partitions.iter().copied().collect()))
                .collect();
        }
    }

    /// How many partitions the member owns.
    pub fn count(&self) -> usize {
        self.owned.values().map(BTreeSet::len).sum()
    }
}

/// ConsumerGroupDescribe v1 of one group.
pub async fn describe(client: &mut Client, group: &str) -> DescribedGroup {
    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid(group)]);
    let mut response = client.call(&request, 1).await;
    response.groups.remove(0)
}

/// Whether any partition is owned by two of `members`.
pub fn overlap(members: &[&Member]) -> Option<(Uuid, i32)> {
    let mut seen = BTreeSet::new();
    for member in members {
        for (topic, partitions) in &member.owned {
            for partition in partitions {
                if !seen.insert((*topic, *partition)) {
                    return Some((*topic, *partition));
                }
            }
        }
    }
    None
}

/// Heartbeats every member in turn until the group is Stable with every member at the
/// group epoch, checking after each heartbeat that no partition has two owners. Returns
/// the number of rounds it took.
pub async fn settle(client: &mut Client, members: &mut [&mut Member]) -> usize {
    for round in 0..50 {
        for i in 0..members.len() {
            let response = members[i].beat(client).await;
            assert_eq!(response.error_code, 0, "{:?}", response.error_message);
            let all: Vec<&Member> = members.iter().map(|m| &**m).collect();
            assert_eq!(overlap(&all), None, "a partition has two owners");
        }
        let group = describe(client, &members[0].group).await;
        let at_epoch = members.iter().all(|m| m.epoch == group.group_epoch);
        if group.group_state.as_str() == "Stable" && at_epoch {
            return round;
        }
    }
    panic!("group never became stable");
}
