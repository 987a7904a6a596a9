package highwater.compat;

import static highwater.compat.Compat.TIMEOUT_S;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;

/** AdminClient against the broker: topics, cluster, configs and partitions. */
class AdminTest {

    // Topic-level configs every Kafka 4.1 broker describes, each with its default.
    private static final Set<String> TOPIC_CONFIGS = Set.of(
            "cleanup.policy", "compression.type", "delete.retention.ms",
            "file.delete.delay.ms", "flush.messages", "flush.ms", "index.interval.bytes",
            "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.type",
            "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
            "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
            "preallocate", "retention.bytes", "retention.ms", "segment.bytes",
            "segment.index.bytes", "segment.jitter.ms", "segment.ms",
            "unclean.leader.election.enable");

    @Test
    void create_list_describe_and_delete_a_topic() throws Exception {
        // Goal: the topic life cycle through the Admin API. Method: create with 3 partitions,
        // check list and describe, delete, then wait until it is gone from both.
        try (Admin admin = Compat.admin()) {
            String topic = Compat.uniqueTopic("admin-life");
            Node node = bootstrapNode(admin);
            TopicDescription d = Compat.createTopic(admin, topic, 3, Map.of());

            assertTrue(admin.listTopics().names().get(TIMEOUT_S, SECONDS).contains(topic));
            assertEquals(topic, d.name());
            assertFalse(d.isInternal());
            assertNotEquals(Uuid.ZERO_UUID, d.topicId(), "a topic id (Metadata v10+)");
            assertEquals(List.of(0, 1, 2),
                    d.partitions().stream().map(TopicPartitionInfo::partition).toList());
            for (TopicPartitionInfo p : d.partitions()) {
                assertEquals(node.id(), p.leader().id(), "leader of partition " + p.partition());
                assertEquals(List.of(node.id()), ids(p.replicas()));
                assertEquals(List.of(node.id()), ids(p.isr()));
            }

            admin.deleteTopics(List.of(topic)).all().get(TIMEOUT_S, SECONDS);
            Compat.waitFor("the deleted topic to leave listTopics", () -> {
                try {
                    return !admin.listTopics().names().get(TIMEOUT_S, SECONDS).contains(topic);
                } catch (Exception e) {
                    return false;
                }
            });
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> admin.describeTopics(List.of(topic)).allTopicNames()
                            .get(TIMEOUT_S, SECONDS));
            assertInstanceOf(UnknownTopicOrPartitionException.class, e.getCause());
        }
    }

    @Test
    void creating_an_existing_topic_fails_with_topic_exists() throws Exception {
        // Goal: CreateTopics reports TOPIC_ALREADY_EXISTS (36). Method: create twice.
        try (Admin admin = Compat.admin()) {
            String topic = Compat.uniqueTopic("admin-dup");
            Compat.createTopic(admin, topic, 1, Map.of());
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1)))
                            .all().get(TIMEOUT_S, SECONDS));
            assertInstanceOf(TopicExistsException.class, e.getCause());
        }
    }

    @Test
    void deleting_an_unknown_topic_fails_with_unknown_topic() throws Exception {
        // Goal: DeleteTopics reports UNKNOWN_TOPIC_OR_PARTITION (3) for a missing name.
        try (Admin admin = Compat.admin()) {
            String topic = Compat.uniqueTopic("admin-missing");
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> admin.deleteTopics(List.of(topic)).all().get(TIMEOUT_S, SECONDS));
            assertInstanceOf(UnknownTopicOrPartitionException.class, e.getCause());
        }
    }

    @Test
    void describe_cluster_names_the_bootstrap_broker() throws Exception {
        // Goal: DescribeCluster (or Metadata) gives a cluster id and advertises the very
        // address the client bootstrapped from.
        try (Admin admin = Compat.admin()) {
            DescribeClusterResult r = admin.describeCluster();
            String clusterId = r.clusterId().get(TIMEOUT_S, SECONDS);
            assertNotNull(clusterId);
            assertFalse(clusterId.isBlank());
            assertNotNull(r.controller().get(TIMEOUT_S, SECONDS));
            assertNotNull(bootstrapNode(admin));
        }
    }

    @Test
    void describe_configs_of_a_topic_lists_overrides_and_defaults() throws Exception {
        // Goal: DescribeConfigs returns the override with source DYNAMIC_TOPIC_CONFIG and
        // every other topic config with its default. Method: create with retention.ms set.
        try (Admin admin = Compat.admin()) {
            String topic = Compat.uniqueTopic("admin-configs");
            Compat.createTopic(admin, topic, 1, Map.of("retention.ms", "3600000"));
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(res)).all()
                    .get(TIMEOUT_S, SECONDS).get(res);

            ConfigEntry retention = config.get("retention.ms");
            assertNotNull(retention, "retention.ms described");
            assertEquals("3600000", retention.value());
            assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source());
            assertFalse(retention.isDefault());

            Set<String> names = config.entries().stream().map(ConfigEntry::name)
                    .collect(Collectors.toSet());
            Set<String> missing = TOPIC_CONFIGS.stream().filter(n -> !names.contains(n))
                    .collect(Collectors.toSet());
            assertTrue(missing.isEmpty(), "topic configs not described: " + missing);
            assertEquals("delete", config.get("cleanup.policy").value());
            assertTrue(Integer.parseInt(config.get("max.message.bytes").value()) > 0);
            assertNotEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    config.get("segment.bytes").source(), "segment.bytes was not set");
        }
    }

    @Test
    void describe_configs_of_an_unknown_topic_fails() throws Exception {
        // Goal: DescribeConfigs answers UNKNOWN_TOPIC_OR_PARTITION for a missing topic.
        try (Admin admin = Compat.admin()) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC,
                    Compat.uniqueTopic("admin-noconfigs"));
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> admin.describeConfigs(List.of(res)).all().get(TIMEOUT_S, SECONDS));
            assertInstanceOf(UnknownTopicOrPartitionException.class, e.getCause());
        }
    }

    @Test
    void create_partitions_grows_a_topic_and_the_new_partition_takes_writes() throws Exception {
        // Goal: CreatePartitions adds usable partitions and refuses to shrink. Method: grow
        // 1 -> 3, describe, produce to partition 2, read its end offset; then ask for 2.
        try (Admin admin = Compat.admin()) {
            String topic = Compat.uniqueTopic("admin-grow");
            Compat.createTopic(admin, topic, 1, Map.of());
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3)))
                    .all().get(TIMEOUT_S, SECONDS);
            Compat.waitFor("3 partitions with leaders", () -> {
                try {
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                            .get(TIMEOUT_S, SECONDS).get(topic);
                    return d.partitions().size() == 3
                            && d.partitions().stream().allMatch(p -> p.leader() != null);
                } catch (Exception e) {
                    return false;
                }
            });

            try (KafkaProducer<byte[], byte[]> producer = Compat.producer(Map.of())) {
                RecordMetadata md = producer.send(new ProducerRecord<>(topic, 2,
                        "k".getBytes(), "v".getBytes())).get(TIMEOUT_S, SECONDS);
                assertEquals(2, md.partition());
                assertEquals(0, md.offset());
            }
            TopicPartition p2 = new TopicPartition(topic, 2);
            long end = admin.listOffsets(Map.of(p2, OffsetSpec.latest())).all()
                    .get(TIMEOUT_S, SECONDS).get(p2).offset();
            assertEquals(1, end);

            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2)))
                            .all().get(TIMEOUT_S, SECONDS));
            assertInstanceOf(InvalidPartitionsException.class, e.getCause());
        }
    }

    /** The node whose advertised host:port is the bootstrap address; fails if none is. */
    private static Node bootstrapNode(Admin admin) throws Exception {
        Collection<Node> nodes = admin.describeCluster().nodes().get(TIMEOUT_S, SECONDS);
        String bootstrap = Compat.bootstrap();
        return nodes.stream().filter(n -> (n.host() + ":" + n.port()).equals(bootstrap))
                .findFirst().orElseThrow(() -> new AssertionError(
                        "no broker advertises " + bootstrap + "; nodes: " + nodes));
    }

    private static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).toList();
    }
}
