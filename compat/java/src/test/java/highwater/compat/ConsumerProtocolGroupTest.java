package highwater.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * The KIP-848 consumer protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe) with the
 * Java client's group.protocol=consumer: the broker assigns the partitions.
 */
class ConsumerProtocolGroupTest {
    private static final int PARTITIONS = 6;

    @Test
    void two_members_split_six_partitions_and_the_survivor_resumes_from_the_last_commit()
            throws Exception {
        // Goal: as in ClassicGroupTest, with server-side assignment: disjoint and complete
        // assignments; after b leaves, a takes all partitions from b's last commit.
        String topic = Compat.uniqueTopic("group848");
        String group = GroupMember.uniqueGroup("kip848");
        GroupMember.Ledger ledger = new GroupMember.Ledger();
        Map<String, Object> cfg = Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, PARTITIONS, Map.of());
            try (GroupMember a = new GroupMember("a848", group, topic, ledger, cfg);
                    GroupMember b = new GroupMember("b848", group, topic, ledger, cfg)) {
                GroupMember.awaitEvenSplit(topic, PARTITIONS, List.of(a, b));
                int epoch = a.generation();
                assertTrue(epoch > 0, "a member epoch: " + epoch);

                ConsumerGroupDescription d = ClassicGroupTest.describe(admin, group);
                assertEquals(GroupType.CONSUMER, d.type());
                assertEquals(GroupState.STABLE, d.groupState());
                assertEquals(2, d.members().size());
                Set<String> ids = new HashSet<>();
                for (MemberDescription m : d.members()) {
                    ids.add(m.consumerId());
                    GroupMember mine = m.clientId().equals("a848") ? a : b;
                    assertEquals(mine.assignment(), m.assignment().topicPartitions(),
                            "ConsumerGroupDescribe assignment of " + m.clientId());
                }
                assertEquals(Set.of(a.memberId(), b.memberId()), ids, "member ids");
                assertEquals(Optional.of(GroupType.CONSUMER),
                        AdminGroupsTest.listing(admin, group).orElseThrow().type());

                Map<TopicPartition, Long> ends1 = GroupMember.produce(topic, PARTITIONS, 20);
                Compat.waitFor("phase 1 consumed", () -> ledger.seenAllBelow(ends1));
                a.commitPositions();
                b.commitPositions();
                assertEquals(ends1, GroupMember.committed(admin, group), "phase 1 committed");

                Map<TopicPartition, Long> ends2 = GroupMember.produce(topic, PARTITIONS, 10);
                Compat.waitFor("phase 2 consumed", () -> ledger.seenAllBelow(ends2));
                a.commitPositions();
                Set<TopicPartition> ofB = b.assignment();
                b.close(CloseOptions.groupMembershipOperation(
                        GroupMembershipOperation.LEAVE_GROUP));
                Compat.waitFor("a holding all 6", () -> a.assignment().size() == PARTITIONS);
                assertTrue(a.generation() > epoch, "a's epoch grew");

                Map<TopicPartition, Long> ends3 = GroupMember.produce(topic, PARTITIONS, 10);
                Compat.waitFor("phase 3 consumed", () -> ledger.seenAllBelow(ends3));
                for (int p = 0; p < PARTITIONS; p++) {
                    TopicPartition tp = new TopicPartition(topic, p);
                    boolean bs = ofB.contains(tp);
                    ledger.assertDelivered(tp, 0, ends1.get(tp), 1, "committed by both");
                    ledger.assertDelivered(tp, ends1.get(tp), ends2.get(tp), bs ? 2 : 1,
                            bs ? "consumed by b, not committed" : "committed by a");
                    ledger.assertDelivered(tp, ends2.get(tp), ends3.get(tp), 1, "phase 3");
                }
                a.commitPositions();
                assertEquals(ends3, GroupMember.committed(admin, group), "final commits");
                assertEquals(1, ClassicGroupTest.describe(admin, group).members().size());
            }
        }
    }
}
