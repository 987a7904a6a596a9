package highwater.compat;

import static highwater.compat.Compat.TIMEOUT_S;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CloseOptions.GroupMembershipOperation;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * Consumer groups on the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
 * OffsetCommit, OffsetFetch) with the Java client: assignments, takeover after a member
 * leaves, commits, cooperative rebalancing and static membership. Every member polls on its
 * own thread ({@link GroupMember}).
 */
class ClassicGroupTest {
    private static final int PARTITIONS = 6;

    @Test
    void three_members_split_six_partitions_and_survivors_resume_from_the_last_commit()
            throws Exception {
        // Goal: disjoint, complete assignments; when a member leaves, the others take over
        // its partitions from its last committed offsets: nothing before a commit is
        // delivered twice, nothing is missed. Method: phase 1 consumed and committed by
        // all; phase 2 consumed by all but committed only by a and b; c leaves; phase 3.
        // Then c's phase-2 records must have been delivered exactly twice, all else once.
        String topic = Compat.uniqueTopic("group-takeover");
        String group = GroupMember.uniqueGroup("takeover");
        GroupMember.Ledger ledger = new GroupMember.Ledger();
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, PARTITIONS, Map.of());
            Map<String, Object> cfg = GroupMember.classic(10_000);
            try (GroupMember a = new GroupMember("a", group, topic, ledger, cfg);
                    GroupMember b = new GroupMember("b", group, topic, ledger, cfg);
                    GroupMember c = new GroupMember("c", group, topic, ledger, cfg)) {
                List<GroupMember> all = List.of(a, b, c);
                GroupMember.awaitEvenSplit(topic, PARTITIONS, all);
                int generation = a.generation();
                assertTrue(generation > 0, "a generation after joining: " + generation);
                // Produced only now: before the split, partitions changed hands uncommitted.
                Map<TopicPartition, Long> ends1 = GroupMember.produce(topic, PARTITIONS, 20);

                // The coordinator reports the same three members and assignments.
                ConsumerGroupDescription d = describe(admin, group);
                assertEquals(GroupState.STABLE, d.groupState());
                assertEquals(GroupType.CLASSIC, d.type());
                assertEquals("range", d.partitionAssignor());
                Map<String, Set<TopicPartition>> reported = new HashMap<>();
                for (MemberDescription m : d.members()) {
                    reported.put(m.clientId(), m.assignment().topicPartitions());
                }
                Map<String, Set<TopicPartition>> seen = new HashMap<>();
                Map<String, String> memberIds = new HashMap<>();
                for (GroupMember m : all) {
                    seen.put(m.name, m.assignment());
                    memberIds.put(m.name, m.memberId());
                }
                assertEquals(seen, reported, "DescribeGroups assignments");
                Set<String> ids = new HashSet<>();
                d.members().forEach(m -> ids.add(m.consumerId()));
                assertEquals(new HashSet<>(memberIds.values()), ids, "member ids");

                Compat.waitFor("phase 1 consumed", () -> ledger.seenAllBelow(ends1));
                for (GroupMember m : all) {
                    m.commitPositions();
                }
                assertEquals(ends1, GroupMember.committed(admin, group), "phase 1 committed");

                Map<TopicPartition, Long> ends2 = GroupMember.produce(topic, PARTITIONS, 10);
                Compat.waitFor("phase 2 consumed", () -> ledger.seenAllBelow(ends2));
                a.commitPositions();
                b.commitPositions();
                Set<TopicPartition> ofC = c.assignment();
                c.close(CloseOptions.groupMembershipOperation(
                        GroupMembershipOperation.LEAVE_GROUP));

                List<GroupMember> survivors = List.of(a, b);
                GroupMember.awaitEvenSplit(topic, PARTITIONS, survivors);
                assertTrue(a.generation() > generation, "a new generation after c left");

                Map<TopicPartition, Long> ends3 = GroupMember.produce(topic, PARTITIONS, 10);
                Compat.waitFor("phase 3 consumed", () -> ledger.seenAllBelow(ends3));
                for (int p = 0; p < PARTITIONS; p++) {
                    TopicPartition tp = new TopicPartition(topic, p);
                    boolean cs = ofC.contains(tp);
                    ledger.assertDelivered(tp, 0, ends1.get(tp), 1, "committed by all");
                    ledger.assertDelivered(tp, ends1.get(tp), ends2.get(tp), cs ? 2 : 1,
                            cs ? "consumed by c, not committed" : "committed by a or b");
                    ledger.assertDelivered(tp, ends2.get(tp), ends3.get(tp), 1, "phase 3");
                }
                a.commitPositions();
                b.commitPositions();
                assertEquals(ends3, GroupMember.committed(admin, group), "final commits");
            }
        }
    }

    @Test
    void cooperative_sticky_members_give_up_only_the_partitions_that_move() throws Exception {
        // Goal: with CooperativeStickyAssignor a joining member takes partitions from the
        // others without them revoking everything (incremental rebalance). Method: a alone
        // holds 6; b joins, then c; record each member's revocations.
        String topic = Compat.uniqueTopic("group-coop");
        String group = GroupMember.uniqueGroup("coop");
        GroupMember.Ledger ledger = new GroupMember.Ledger();
        Map<String, Object> cfg = GroupMember.classic(10_000);
        cfg.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                CooperativeStickyAssignor.class.getName());
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, PARTITIONS, Map.of());
            Map<TopicPartition, Long> ends = GroupMember.produce(topic, PARTITIONS, 5);
            try (GroupMember a = new GroupMember("a", group, topic, ledger, cfg)) {
                Compat.waitFor("a holding all 6", () -> a.assignment().size() == PARTITIONS);
                Compat.waitFor("a consumed everything", () -> ledger.seenAllBelow(ends));
                assertEquals(List.of("assigned [0, 1, 2, 3, 4, 5]"), a.events());
                a.commitPositions(); // so that partitions moving later start at the end
                try (GroupMember b = new GroupMember("b", group, topic, ledger, cfg)) {
                    GroupMember.awaitEvenSplit(topic, PARTITIONS, List.of(a, b));
                    Set<TopicPartition> aAfterB = a.assignment();
                    // a revoked exactly the 3 partitions b got, never all 6.
                    assertEquals(List.of("revoked " + GroupMember.sorted(b.assignment())),
                            revocations(a), "a's revocations when b joined");
                    assertEquals(3, a.smallestAssignmentAfterFirst(),
                            "a never dropped below its final 3 partitions");
                    assertTrue(lost(a).isEmpty(), "a lost nothing");
                    assertEquals("cooperative-sticky", describe(admin, group)
                            .partitionAssignor());

                    try (GroupMember c = new GroupMember("c", group, topic, ledger, cfg)) {
                        GroupMember.awaitEvenSplit(topic, PARTITIONS, List.of(a, b, c));
                        assertTrue(aAfterB.containsAll(a.assignment()), "a kept 2 of its 3");
                        assertEquals(2, revocations(a).size(), "a revoked once more");
                        assertEquals(1, revocations(b).size(), "b revoked once");
                        assertEquals(2, a.smallestAssignmentAfterFirst());
                        assertEquals(2, b.smallestAssignmentAfterFirst());
                        // Each record was delivered once: partitions moved only after a
                        // had read and committed all of them.
                        for (int p = 0; p < PARTITIONS; p++) {
                            TopicPartition tp = new TopicPartition(topic, p);
                            ledger.assertDelivered(tp, 0, ends.get(tp), 1, "read by a once");
                        }
                    }
                }
            }
        }
    }

    @Test
    void a_static_member_rejoins_with_its_partitions_without_a_rebalance() throws Exception {
        // Goal: static membership (group.instance.id): a member that closes without leaving
        // and comes back within session.timeout.ms gets the same partitions and the others
        // see no rebalance; one that stays away longer is removed. Method: a and b with
        // instance ids; b closes with REMAIN_IN_GROUP, a new consumer with b's instance id
        // joins; then it goes away for good and a takes over after the session timeout.
        String topic = Compat.uniqueTopic("group-static");
        String group = GroupMember.uniqueGroup("static");
        GroupMember.Ledger ledger = new GroupMember.Ledger();
        int sessionMs = 8_000;
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, PARTITIONS, Map.of());
            try (GroupMember a = new GroupMember("a", group, topic, ledger, staticCfg("a",
                    sessionMs));
                    GroupMember b = new GroupMember("b", group, topic, ledger, staticCfg("b",
                            sessionMs))) {
                GroupMember.awaitEvenSplit(topic, PARTITIONS, List.of(a, b));
                int generation = a.generation();
                Set<TopicPartition> ofA = a.assignment();
                Set<TopicPartition> ofB = b.assignment();
                String oldMemberId = b.memberId();
                List<String> aEvents = a.events();

                long closedAt = System.nanoTime();
                b.close(CloseOptions.groupMembershipOperation(
                        GroupMembershipOperation.REMAIN_IN_GROUP));
                // Still a member: the coordinator keeps b's instance until its session ends.
                ConsumerGroupDescription d = describe(admin, group);
                assertEquals(2, d.members().size(), "b is still a member: " + d);
                assertTrue(d.members().stream().anyMatch(
                        m -> m.groupInstanceId().equals(Optional.of("b"))), d.toString());

                try (GroupMember b2 = new GroupMember("b2", group, topic, ledger,
                        staticCfg("b", sessionMs))) {
                    Compat.waitFor("b's instance back with its partitions",
                            () -> b2.assignment().equals(ofB));
                    long away = (System.nanoTime() - closedAt) / 1_000_000;
                    assertTrue(away < sessionMs, "rejoined within the session (" + away + " ms)");
                    assertFalse(b2.memberId().equals(oldMemberId), "a new member id");
                    Thread.sleep(2_000); // several heartbeats: a rebalance would show by now
                    assertEquals(generation, a.generation(), "a's generation");
                    assertEquals(generation, b2.generation(), "b's instance's generation");
                    assertEquals(aEvents, a.events(), "no callbacks on a");
                    assertEquals(ofA, a.assignment());
                    assertEquals(GroupState.STABLE, describe(admin, group).groupState());

                    b2.close(CloseOptions.groupMembershipOperation(
                            GroupMembershipOperation.REMAIN_IN_GROUP));
                    long gone = System.nanoTime();
                    Compat.waitFor("a taking over after b's session expired",
                            () -> a.assignment().size() == PARTITIONS);
                    long waited = (System.nanoTime() - gone) / 1_000_000;
                    assertTrue(waited > sessionMs / 2, "a took over only after the session"
                            + " timeout, after " + waited + " ms");
                    assertTrue(a.generation() > generation, "a new generation");
                    assertEquals(1, describe(admin, group).members().size());
                }
            }
        }
    }

    private static Map<String, Object> staticCfg(String instance, int sessionMs) {
        Map<String, Object> cfg = GroupMember.classic(sessionMs);
        cfg.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
        return cfg;
    }

    private static List<String> revocations(GroupMember m) {
        List<String> out = new ArrayList<>();
        m.events().stream().filter(e -> e.startsWith("revoked ")).forEach(out::add);
        return out;
    }

    private static List<String> lost(GroupMember m) {
        return m.events().stream().filter(e -> e.startsWith("lost ")).toList();
    }

    static ConsumerGroupDescription describe(Admin admin, String group) throws Exception {
        return admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                .get(TIMEOUT_S, SECONDS);
    }
}
