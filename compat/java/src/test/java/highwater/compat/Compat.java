package highwater.compat;

import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Shared set-up for the compat tests: the broker address, clients, and unique topics. */
final class Compat {
    static final long TIMEOUT_S = 30;

    private Compat() {}

    /** The broker under test, from -Dbootstrap=host:port (compat/java/run.sh sets it). */
    static String bootstrap() {
        String b = System.getProperty("bootstrap");
        if (b == null || b.isBlank()) {
            throw new IllegalStateException("set -Dbootstrap=host:port");
        }
        return b;
    }

    /** A topic name no earlier run used, so reruns on one broker never collide. */
    static String uniqueTopic(String prefix) {
        return "compat-java-" + prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        return Admin.create(p);
    }

    /** An idempotent producer (the 4.x default) with acks=all, plus any overrides. */
    static KafkaProducer<byte[], byte[]> producer(Map<String, Object> overrides) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60_000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.putAll(overrides);
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** A consumer without group.id: it is used only with assign(), never subscribe(). */
    static KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> overrides) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.putAll(overrides);
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** Creates a topic and waits until Metadata shows a leader for every partition. */
    static TopicDescription createTopic(Admin admin, String name, int partitions,
            Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs)))
                .all().get(TIMEOUT_S, TimeUnit.SECONDS);
        TopicDescription[] found = new TopicDescription[1];
        waitFor("leaders for all partitions of " + name, () -> {
            try {
                TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames()
                        .get(TIMEOUT_S, TimeUnit.SECONDS).get(name);
                found[0] = d;
                return d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(p -> p.leader() != null);
            } catch (Exception e) {
                return false;
            }
        });
        return found[0];
    }

    /** Polls a condition every 100 ms until it holds, failing after TIMEOUT_S seconds. */
    static void waitFor(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(TIMEOUT_S).toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out after " + TIMEOUT_S + "s waiting for " + what);
            }
            Thread.sleep(100);
        }
    }
}
