//! Which replica a consumer reads a partition from (KIP-392, fetch from follower).
//!
//! The leader picks: with `replica.selector.class` set to Kafka's RackAwareReplicaSelector,
//! a consumer whose `client.rack` holds a replica but not the leader is sent to the most
//! caught-up replica there, named in the fetch answer's `preferred_read_replica`; the
//! consumer then fetches from that follower, which serves it up to its own high watermark.
//! Only in-sync followers that already hold the fetch offset are candidates, as in Kafka:
//! a lagging follower would keep the consumer behind for as long as it lags.

use crate::ids::{BrokerId, Offset};

/// A replica the leader could send a consumer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaView {
    pub broker_id: BrokerId,
    pub log_end_offset: Offset,
    /// Time since its log end offset last reached the leader's (0 for the leader).
    pub since_caught_up_ms: i64,
}

/// Kafka's RackAwareReplicaSelector: the leader when the client names no rack, when no
/// replica is in its rack, or when the leader is; otherwise the replica in its rack with the
/// highest log end offset (then the most recently caught up). `rack_of` gives a broker's
/// rack, `None` for one the client cannot be sent to (unregistered or fenced). Returns the
/// follower to read from, `None` to read from the leader.
pub fn rack_aware(
    client_rack: &str,
    leader: ReplicaView,
    followers: &[ReplicaView],
    rack_of: impl Fn(BrokerId) -> Option<String>,
) -> Option<BrokerId> {
    if client_rack.is_empty() || rack_of(leader.broker_id).as_deref() == Some(client_rack) {
        return None;
    }
    followers
        .iter()
        .filter(|f| rack_of(f.broker_id).as_deref() == Some(client_rack))
        .max_by_key(|f| (f.log_end_offset, -f.since_caught_up_ms))
        .map(|f| f.broker_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(broker_id: i32, log_end_offset: i64, since_caught_up_ms: i64) -> ReplicaView {
        ReplicaView {
            broker_id: BrokerId(broker_id),
            log_end_offset: Offset(log_end_offset),
            since_caught_up_ms,
        }
    }

    /// Brokers 1, 2, 3 in racks a, b, b; broker 4 is fenced.
    fn rack_of(id: BrokerId) -> Option<String> {
        ["a", "b", "b"]
            .get(id.0 as usize - 1)
            .map(|r| r.to_string())
    }

    #[test]
    fn a_client_without_a_rack_or_in_the_leaders_rack_reads_from_the_leader() {
        let leader = view(1, 10, 0);
        let followers = [view(2, 10, 0)];
        assert_eq!(rack_aware("", leader, &followers, rack_of), None);
        assert_eq!(rack_aware("a", leader, &followers, rack_of), None);
        assert_eq!(rack_aware("c", leader, &followers, rack_of), None);
    }

    #[test]
    fn a_client_in_a_followers_rack_reads_from_the_most_caught_up_one_there() {
        let leader = view(1, 10, 0);
        let followers = [view(2, 9, 0), view(3, 10, 50)];
        assert_eq!(
            rack_aware("b", leader, &followers, rack_of),
            Some(BrokerId(3))
        );
        let tied = [view(2, 10, 10), view(3, 10, 50)];
        assert_eq!(rack_aware("b", leader, &tied, rack_of), Some(BrokerId(2)));
    }

    #[test]
    fn a_follower_the_client_cannot_reach_is_never_chosen() {
        let leader = view(1, 10, 0);
        assert_eq!(rack_aware("b", leader, &[view(4, 10, 0)], rack_of), None);
    }
}
