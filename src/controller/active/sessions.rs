//! Broker sessions as the active controller keeps them (Kafka's BrokerHeartbeatManager):
//! the last registration or heartbeat of each broker, in the leader's memory only. Time is
//! passed in (monotonic milliseconds from the controller's [`crate::clock::Clock`]), so the
//! rules below are checked without waiting for a session to run out.

use std::collections::HashMap;

/// The sessions of one leader term.
#[derive(Debug)]
pub(super) struct Sessions {
    /// The Raft term in which these sessions were started.
    term: u64,
    /// When this node started leading in `term`: a broker not heard from since expires one
    /// session timeout after it.
    leading_since: i64,
    /// The last registration or heartbeat of each broker received in `term`.
    last_seen: HashMap<i32, i64>,
    /// When the sessions were last checked: a longer gap than half a session means this
    /// process itself was not running (paused, starved), and cannot tell who was.
    last_check: i64,
}

impl Sessions {
    pub(super) fn new(now_ms: i64) -> Sessions {
        Sessions {
            term: 0,
            leading_since: now_ms,
            last_seen: HashMap::new(),
            last_check: now_ms,
        }
    }

    /// Gives every broker a fresh session from `now_ms` (Kafka's controller does this when
    /// it becomes active): a broker is fenced only after a whole session not heard from by
    /// a controller that was running all along.
    fn restart(&mut self, term: u64, now_ms: i64) {
        self.term = term;
        self.leading_since = now_ms;
        self.last_seen.clear();
    }

    /// A registration or heartbeat from `node_id`.
    pub(super) fn touch(&mut self, node_id: i32, now_ms: i64) {
        self.last_seen.insert(node_id, now_ms);
    }

    /// Whether `node_id` was heard from within `timeout_ms` (a broker never heard from in
    /// this term does not block a new registration of the same id).
    pub(super) fn alive(&self, node_id: i32, now_ms: i64, timeout_ms: i64) -> bool {
        self.last_seen
            .get(&node_id)
            .is_some_and(|seen| now_ms - seen < timeout_ms)
    }

    /// The unfenced brokers among `brokers` (id, broker epoch) whose session ran out by
    /// `now_ms`, as checked by the leader of `term`. A new term, or a gap since the last
    /// check longer than half a session, starts every session afresh instead.
    pub(super) fn expired(
        &mut self,
        term: u64,
        now_ms: i64,
        timeout_ms: i64,
        brokers: &[(i32, i64)],
    ) -> Vec<(i32, i64)> {
        let gap = now_ms - self.last_check;
        self.last_check = now_ms;
        if self.term != term {
            tracing::info!(
                term,
                "active controller: every broker starts a fresh session"
            );
            self.restart(term, now_ms);
        } else if gap > timeout_ms / 2 {
            tracing::warn!(
                gap_ms = gap,
                "controller was not running; every broker starts a fresh session"
            );
            self.restart(term, now_ms);
        }
        brokers
            .iter()
            .filter(|(id, _)| {
                let seen = self.last_seen.get(id).copied();
                now_ms - seen.unwrap_or(self.leading_since) >= timeout_ms
            })
            .copied()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: i64 = 9_000;
    const BROKERS: [(i32, i64); 2] = [(1, 10), (2, 20)];

    /// Checks every 100 ms from `from` to `to` in `term` (as the leader's duty loop does)
    /// while broker 1 keeps heartbeating, returning the first expiries seen with their time.
    fn check_until(
        sessions: &mut Sessions,
        term: u64,
        (from, to): (i64, i64),
    ) -> Option<(i64, Vec<(i32, i64)>)> {
        (from..=to).step_by(100).find_map(|now| {
            sessions.touch(1, now);
            let expired = sessions.expired(term, now, TIMEOUT, &BROKERS);
            (!expired.is_empty()).then_some((now, expired))
        })
    }

    /// Goal: a broker that stops heartbeating is fenced one session after its last
    /// heartbeat, and one that keeps heartbeating never is.
    #[test]
    fn a_silent_broker_expires_one_session_after_its_last_heartbeat() {
        let mut sessions = Sessions::new(0);
        for now in (0..5_000).step_by(100) {
            sessions.touch(2, now);
            assert_eq!(check_until(&mut sessions, 1, (now, now)), None);
        }
        // Broker 2 goes silent after 4 900; broker 1 keeps heartbeating.
        let first = check_until(&mut sessions, 1, (5_000, 30_000));
        assert_eq!(first, Some((4_900 + TIMEOUT, vec![(2, 20)])));
        assert!(sessions.alive(1, 4_900 + TIMEOUT, TIMEOUT));
        assert!(!sessions.alive(2, 4_900 + TIMEOUT, TIMEOUT));
    }

    /// Goal: a new leader (a new term) never fences a healthy broker it simply has not heard
    /// from yet: every broker gets a whole session from the start of the term.
    #[test]
    fn a_new_term_gives_every_broker_a_whole_session() {
        let mut sessions = Sessions::new(0);
        sessions.touch(2, 0);
        assert_eq!(check_until(&mut sessions, 1, (0, 0)), None);
        // Term 2 begins at 8 000, nearly a session after broker 2's last heartbeat.
        assert!(sessions.expired(2, 8_000, TIMEOUT, &BROKERS).is_empty());
        assert!(!sessions.alive(2, 8_000, TIMEOUT), "sessions start afresh");
        let first = check_until(&mut sessions, 2, (8_100, 30_000));
        assert_eq!(first, Some((8_000 + TIMEOUT, vec![(2, 20)])));
    }

    /// Goal: a controller that was itself paused (longer than half a session between two
    /// checks) cannot tell who was silent, and fences no one for it.
    #[test]
    fn a_paused_controller_starts_every_session_afresh() {
        let mut sessions = Sessions::new(0);
        sessions.touch(2, 0);
        assert_eq!(check_until(&mut sessions, 1, (0, 0)), None);
        // Paused from 100 to 20 000: both brokers look silent for two sessions.
        assert!(sessions.expired(1, 20_000, TIMEOUT, &BROKERS).is_empty());
        let first = check_until(&mut sessions, 1, (20_000, 40_000));
        assert_eq!(first, Some((20_000 + TIMEOUT, vec![(2, 20)])));
    }
}
