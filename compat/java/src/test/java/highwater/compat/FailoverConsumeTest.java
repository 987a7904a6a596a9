package highwater.compat;

import static highwater.compat.Compat.TIMEOUT_S;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * A Java consumer keeps consuming across a kill -9 of the partition's leader, run by
 * compat/cluster/run.sh with the brokers' pids (skipped otherwise): every acknowledged
 * record arrives exactly once and in order, before and after the change (the client
 * validates its position with OffsetForLeaderEpoch, KIP-320).
 */
class FailoverConsumeTest {

    private static final int FIRST = 3000;
    private static final int SECOND = 1000;

    private static void produce(String topic, int from, int count) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = Compat.producer(Map.of())) {
            for (int value = from; value < from + count; value++) {
                byte[] bytes = Integer.toString(value).getBytes(StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(topic, 0, null, bytes));
            }
            producer.flush();
        }
    }

    /** The partition's leader once it is a node other than {@code exclude}. */
    private static int leader(Admin admin, String topic, int exclude) throws Exception {
        Node[] found = new Node[1];
        Compat.waitFor("a leader of " + topic + " other than " + exclude, () -> {
            try {
                found[0] = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get(TIMEOUT_S, SECONDS).get(topic).partitions().get(0).leader();
                return found[0] != null && found[0].id() != exclude;
            } catch (Exception e) {
                return false;
            }
        });
        return found[0].id();
    }

    private static void consumeUntil(KafkaConsumer<byte[], byte[]> consumer, List<Integer> seen,
            int count) {
        long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
        while (seen.size() < count) {
            assertTrue(System.nanoTime() < deadline, "only " + seen.size() + " of " + count);
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                seen.add(Integer.parseInt(new String(r.value(), StandardCharsets.UTF_8)));
            }
        }
    }

    @Test
    void a_consumer_reads_every_record_once_across_a_leader_kill() throws Exception {
        String pids = System.getProperty("cluster.pids");
        Assumptions.assumeTrue(pids != null, "run by compat/cluster/run.sh");
        Map<Integer, Long> pidOf = java.util.Arrays.stream(pids.split(","))
                .map(item -> item.split(":"))
                .collect(Collectors.toMap(p -> Integer.parseInt(p[0]), p -> Long.parseLong(p[1])));
        String topic = Compat.uniqueTopic("failover");
        try (Admin admin = Compat.admin()) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 3)))
                    .all().get(TIMEOUT_S, SECONDS);
            int before = leader(admin, topic, -1);
            produce(topic, 0, FIRST);
            List<Integer> seen = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> consumer = Compat.consumer(Map.of())) {
                consumer.assign(List.of(new TopicPartition(topic, 0)));
                consumer.seekToBeginning(List.of(new TopicPartition(topic, 0)));
                consumeUntil(consumer, seen, FIRST / 3);
                ProcessHandle.of(pidOf.get(before)).orElseThrow().destroyForcibly();
                System.out.println("killed node " + before);
                int after = leader(admin, topic, before);
                consumeUntil(consumer, seen, FIRST);
                assertNotEquals(before, after, "a new leader");
                produce(topic, FIRST, SECOND);
                consumeUntil(consumer, seen, FIRST + SECOND);
            }
            List<Integer> expected = IntStream.range(0, FIRST + SECOND).boxed().toList();
            assertEquals(expected, seen, "records lost, duplicated or out of order");
        }
    }
}
