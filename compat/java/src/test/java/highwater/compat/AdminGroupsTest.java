package highwater.compat;

import static highwater.compat.Compat.TIMEOUT_S;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.GroupSubscribedToTopicException;
import org.apache.kafka.common.errors.UnknownMemberIdException;
import org.junit.jupiter.api.Test;

/**
 * The Admin client's group operations: ListGroups, DescribeGroups, OffsetFetch, OffsetCommit
 * (alterConsumerGroupOffsets), OffsetDelete and DeleteGroups, on an active and an empty
 * classic group, including the refusals for an active group.
 */
class AdminGroupsTest {

    @Test
    void admin_lists_describes_alters_and_deletes_a_group_and_its_offsets() throws Exception {
        String topic = Compat.uniqueTopic("group-admin");
        String group = GroupMember.uniqueGroup("admin");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        GroupMember.Ledger ledger = new GroupMember.Ledger();
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, 2, Map.of());
            Map<TopicPartition, Long> ends = GroupMember.produce(topic, 2, 5);

            try (GroupMember m = new GroupMember("admin-m", group, topic, ledger,
                    GroupMember.classic(10_000))) {
                Compat.waitFor("the member holding both partitions",
                        () -> m.assignment().size() == 2);
                Compat.waitFor("everything consumed", () -> ledger.seenAllBelow(ends));
                m.commitPositions();

                GroupListing listing = listing(admin, group).orElseThrow(
                        () -> new AssertionError("listGroups lacks " + group));
                assertEquals(Optional.of(GroupType.CLASSIC), listing.type());
                assertEquals("consumer", listing.protocol());
                assertEquals(Optional.of(GroupState.STABLE), listing.groupState());
                assertFalse(listing.isSimpleConsumerGroup());

                ConsumerGroupDescription d = ClassicGroupTest.describe(admin, group);
                assertEquals(group, d.groupId());
                assertEquals(GroupState.STABLE, d.groupState());
                assertEquals(GroupType.CLASSIC, d.type());
                assertFalse(d.isSimpleConsumerGroup());
                assertNotNull(d.coordinator(), "a coordinator");
                assertEquals(1, d.members().size());
                MemberDescription md = d.members().iterator().next();
                assertEquals("admin-m", md.clientId());
                assertEquals(m.memberId(), md.consumerId());
                assertEquals(Set.of(p0, p1), md.assignment().topicPartitions());
                assertFalse(md.host().isEmpty(), "the member's host");

                assertEquals(Map.of(p0, 5L, p1, 5L), GroupMember.committed(admin, group));

                // An active group refuses deletion and offset changes.
                assertCause(GroupNotEmptyException.class,
                        admin.deleteConsumerGroups(List.of(group)).all());
                assertCause(GroupSubscribedToTopicException.class,
                        admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all());
                assertCause(UnknownMemberIdException.class, admin.alterConsumerGroupOffsets(
                        group, Map.of(p0, new OffsetAndMetadata(1))).all());
                assertEquals(Map.of(p0, 5L, p1, 5L), GroupMember.committed(admin, group));
            }

            // The member left: the group is empty but keeps its offsets.
            Compat.waitFor("the group empty", () -> {
                try {
                    ConsumerGroupDescription d = ClassicGroupTest.describe(admin, group);
                    return d.groupState() == GroupState.EMPTY && d.members().isEmpty();
                } catch (Exception e) {
                    return false;
                }
            });
            assertEquals(Optional.of(GroupState.EMPTY), listing(admin, group).orElseThrow()
                    .groupState());

            admin.alterConsumerGroupOffsets(group, Map.of(
                    p0, new OffsetAndMetadata(2, "two"),
                    p1, new OffsetAndMetadata(3, "three"))).all().get(TIMEOUT_S, SECONDS);
            Map<TopicPartition, OffsetAndMetadata> got = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(TIMEOUT_S, SECONDS);
            assertEquals(2, got.get(p0).offset());
            assertEquals("two", got.get(p0).metadata());
            assertEquals(3, got.get(p1).offset());
            assertEquals("three", got.get(p1).metadata());

            admin.deleteConsumerGroupOffsets(group, Set.of(p0)).all().get(TIMEOUT_S, SECONDS);
            assertEquals(Map.of(p1, 3L), GroupMember.committed(admin, group));

            // A new member starts p1 at the altered offset 3 and p0, whose offset was
            // deleted, from auto.offset.reset=earliest.
            GroupMember.Ledger again = new GroupMember.Ledger();
            try (GroupMember m2 = new GroupMember("admin-m2", group, topic, again,
                    GroupMember.classic(10_000))) {
                Compat.waitFor("m2 read both partitions to the end",
                        () -> again.seenAllBelow(Map.of(p0, 5L))
                                && again.count(p1, 4) == 1);
                again.assertDelivered(p0, 0, 5, 1, "p0 from the beginning");
                again.assertDelivered(p1, 0, 3, 0, "p1 below the altered offset");
                again.assertDelivered(p1, 3, 5, 1, "p1 from the altered offset");
            }

            Compat.waitFor("the group empty again", () -> {
                try {
                    return ClassicGroupTest.describe(admin, group).groupState()
                            == GroupState.EMPTY;
                } catch (Exception e) {
                    return false;
                }
            });
            admin.deleteConsumerGroups(List.of(group)).all().get(TIMEOUT_S, SECONDS);
            assertTrue(listing(admin, group).isEmpty(), "listGroups after deletion");
            assertTrue(GroupMember.committed(admin, group).isEmpty(), "offsets after deletion");
            assertCause(GroupIdNotFoundException.class,
                    admin.deleteConsumerGroups(List.of(group)).all());
        }
    }

    @Test
    void offsets_committed_by_admin_alone_make_a_simple_group() throws Exception {
        // Goal: OffsetCommit for a group that has never had members creates it (a "simple"
        // group with no protocol), and DescribeGroups of an unknown group fails or says DEAD.
        String topic = Compat.uniqueTopic("group-simple");
        String group = GroupMember.uniqueGroup("simple");
        TopicPartition p0 = new TopicPartition(topic, 0);
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, 1, Map.of());
            GroupMember.produce(topic, 1, 3);
            admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(2)))
                    .all().get(TIMEOUT_S, SECONDS);
            assertEquals(Map.of(p0, 2L), GroupMember.committed(admin, group));
            GroupListing listing = listing(admin, group).orElseThrow(
                    () -> new AssertionError("listGroups lacks " + group));
            assertEquals(Optional.of(GroupState.EMPTY), listing.groupState());
            assertTrue(listing.isSimpleConsumerGroup(), "no protocol type: " + listing);
            ConsumerGroupDescription d = ClassicGroupTest.describe(admin, group);
            assertEquals(GroupState.EMPTY, d.groupState());
            assertTrue(d.members().isEmpty());

            String unknown = GroupMember.uniqueGroup("never");
            assertCause(GroupIdNotFoundException.class,
                    admin.describeConsumerGroups(List.of(unknown)).all());
            admin.deleteConsumerGroups(List.of(group)).all().get(TIMEOUT_S, SECONDS);
            assertTrue(listing(admin, group).isEmpty());
        }
    }

    static Optional<GroupListing> listing(Admin admin, String group) throws Exception {
        return admin.listGroups().all().get(TIMEOUT_S, SECONDS).stream()
                .filter(g -> g.groupId().equals(group)).findFirst();
    }

    static void assertCause(Class<? extends Throwable> want, Future<?> f) {
        ExecutionException e = assertThrows(ExecutionException.class,
                () -> f.get(TIMEOUT_S, SECONDS), "expected " + want.getSimpleName());
        assertInstanceOf(want, e.getCause(), e.toString());
    }
}
