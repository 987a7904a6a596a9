package highwater.compat;

import static highwater.compat.Compat.TIMEOUT_S;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One consumer in a group, polled on its own thread (so a rebalance never waits for another
 * member's poll loop). It records every record it is given in a shared {@link Ledger}, every
 * rebalance callback as an event, and after each poll its assignment and generation. Other
 * calls (commitSync, close) run on its thread through {@link #call}.
 */
final class GroupMember implements AutoCloseable {
    final String name;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Ledger ledger;
    private final LinkedBlockingQueue<Runnable> tasks = new LinkedBlockingQueue<>();
    private final List<String> events = new ArrayList<>();
    private final Thread thread;
    private volatile Set<TopicPartition> assignment = Set.of();
    private volatile int generation = -1;
    private volatile String memberId = "";
    private volatile boolean running = true;
    private volatile Throwable failure;
    /** The smallest assignment seen after the first non-empty one (-1 before that). */
    private volatile int smallestAfterFirst = -1;

    /** Settings for the classic protocol with quick rebalances, as the tests use them. */
    static Map<String, Object> classic(int sessionTimeoutMs) {
        Map<String, Object> m = new HashMap<>();
        m.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        m.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionTimeoutMs);
        m.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
        return m;
    }

    GroupMember(String name, String groupId, String topic, Ledger ledger,
            Map<String, Object> overrides) {
        this.name = name;
        this.ledger = ledger;
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Compat.bootstrap());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.putAll(overrides);
        consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(),
                new ByteArrayDeserializer());
        thread = new Thread(() -> loop(topic), "member-" + name);
        thread.setDaemon(true);
        thread.start();
    }

    private void loop(String topic) {
        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                    event("revoked", ps);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                    event("assigned", ps);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> ps) {
                    event("lost", ps);
                }
            });
            while (running) {
                Runnable task;
                while ((task = tasks.poll()) != null) {
                    task.run();
                }
                if (!running) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    ledger.seen(new TopicPartition(r.topic(), r.partition()), r.offset());
                }
                Set<TopicPartition> now = Set.copyOf(consumer.assignment());
                if (!now.isEmpty() && smallestAfterFirst < 0) {
                    smallestAfterFirst = now.size();
                } else if (smallestAfterFirst >= 0) {
                    smallestAfterFirst = Math.min(smallestAfterFirst, now.size());
                }
                assignment = now;
                generation = consumer.groupMetadata().generationId();
                memberId = consumer.groupMetadata().memberId();
            }
        } catch (Throwable e) {
            failure = e;
            running = false;
            try {
                consumer.close(CloseOptions.timeout(Duration.ZERO));
            } catch (Throwable ignored) {
                // Already failing.
            }
        }
    }

    private void event(String kind, Collection<TopicPartition> ps) {
        synchronized (events) {
            events.add(kind + " " + sorted(ps));
        }
    }

    /** Runs fn on the member's thread (between polls) and returns its result. */
    <T> T call(Function<KafkaConsumer<byte[], byte[]>, T> fn) throws Exception {
        CompletableFuture<T> f = new CompletableFuture<>();
        tasks.add(() -> {
            try {
                f.complete(fn.apply(consumer));
            } catch (Throwable e) {
                f.completeExceptionally(e);
            }
        });
        checkAlive();
        return f.get(TIMEOUT_S * 2, TimeUnit.SECONDS);
    }

    /** commitSync() of the current positions, that is, of everything it has recorded. */
    Map<TopicPartition, Long> commitPositions() throws Exception {
        return call(c -> {
            Map<TopicPartition, Long> positions = new HashMap<>();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (TopicPartition tp : c.assignment()) {
                long pos = c.position(tp);
                positions.put(tp, pos);
                offsets.put(tp, new OffsetAndMetadata(pos));
            }
            c.commitSync(offsets);
            return positions;
        });
    }

    /** Closes the consumer on its thread with the given options and ends the thread. */
    void close(CloseOptions options) throws Exception {
        if (!running) {
            return;
        }
        call(c -> {
            c.close(options);
            running = false;
            return null;
        });
        thread.join(TimeUnit.SECONDS.toMillis(TIMEOUT_S));
    }

    @Override
    public void close() throws Exception {
        close(CloseOptions.timeout(Duration.ofSeconds(10)));
    }

    void checkAlive() {
        if (failure != null) {
            throw new AssertionError("member " + name + " failed", failure);
        }
    }

    Set<TopicPartition> assignment() {
        checkAlive();
        return assignment;
    }

    int generation() {
        return generation;
    }

    String memberId() {
        return memberId;
    }

    int smallestAssignmentAfterFirst() {
        return smallestAfterFirst;
    }

    List<String> events() {
        synchronized (events) {
            return List.copyOf(events);
        }
    }

    static String sorted(Collection<TopicPartition> ps) {
        TreeSet<Integer> s = new TreeSet<>();
        ps.forEach(tp -> s.add(tp.partition()));
        return s.toString();
    }

    // ---------------------------------------------------------------------------------------

    /** How many times each (partition, offset) was delivered, over all members. */
    static final class Ledger {
        private final ConcurrentHashMap<TopicPartition, ConcurrentHashMap<Long, AtomicInteger>>
                counts = new ConcurrentHashMap<>();

        void seen(TopicPartition tp, long offset) {
            counts.computeIfAbsent(tp, k -> new ConcurrentHashMap<>())
                    .computeIfAbsent(offset, k -> new AtomicInteger()).incrementAndGet();
        }

        int count(TopicPartition tp, long offset) {
            var m = counts.get(tp);
            AtomicInteger n = m == null ? null : m.get(offset);
            return n == null ? 0 : n.get();
        }

        /** Every offset below each end offset was delivered at least once. */
        boolean seenAllBelow(Map<TopicPartition, Long> ends) {
            for (var e : ends.entrySet()) {
                for (long o = 0; o < e.getValue(); o++) {
                    if (count(e.getKey(), o) == 0) {
                        return false;
                    }
                }
            }
            return true;
        }

        /** Asserts that every offset in [from, to) of tp was delivered exactly `times`. */
        void assertDelivered(TopicPartition tp, long from, long to, int times, String why) {
            for (long o = from; o < to; o++) {
                assertEquals(times, count(tp, o), tp + " offset " + o + " deliveries (" + why
                        + ")");
            }
        }
    }

    // ---------------------------------------------------------------------------------------

    /** Produces n records to each partition of topic; returns the new end offsets. */
    static Map<TopicPartition, Long> produce(String topic, int partitions, int n)
            throws Exception {
        Map<TopicPartition, Long> ends = new HashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = Compat.producer(Map.of())) {
            List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>>
                    fs = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                for (int i = 0; i < n; i++) {
                    fs.add(producer.send(new ProducerRecord<>(topic, p, null,
                            ("p" + p + "-" + i).getBytes())));
                }
            }
            producer.flush();
            for (var f : fs) {
                var md = f.get(TIMEOUT_S, TimeUnit.SECONDS);
                ends.merge(new TopicPartition(topic, md.partition()), md.offset() + 1,
                        Math::max);
            }
        }
        return ends;
    }

    /** Asserts that the members' assignments are pairwise disjoint and cover all partitions. */
    static void assertDisjointAndComplete(String topic, int partitions,
            List<GroupMember> members) {
        Set<TopicPartition> union = new HashSet<>();
        int total = 0;
        StringBuilder all = new StringBuilder();
        for (GroupMember m : members) {
            Set<TopicPartition> a = m.assignment();
            total += a.size();
            union.addAll(a);
            all.append(m.name).append('=').append(sorted(a)).append(' ');
        }
        Set<TopicPartition> want = new HashSet<>();
        for (int p = 0; p < partitions; p++) {
            want.add(new TopicPartition(topic, p));
        }
        assertEquals(want, union, "assignments cover every partition: " + all);
        assertEquals(partitions, total, "assignments are disjoint: " + all);
    }

    /** Waits until each member holds exactly its share (partitions / members). */
    static void awaitEvenSplit(String topic, int partitions, List<GroupMember> members)
            throws InterruptedException {
        int share = partitions / members.size();
        Compat.waitFor(members.size() + " members holding " + share + " partitions each",
                () -> members.stream().allMatch(m -> m.assignment().size() == share)
                        && members.stream().mapToInt(GroupMember::generation).distinct()
                                .count() == 1);
        assertDisjointAndComplete(topic, partitions, members);
    }

    /** The group's committed offsets, read through the Admin client. */
    static Map<TopicPartition, Long> committed(Admin admin, String group) throws Exception {
        Map<TopicPartition, Long> out = new HashMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get(TIMEOUT_S, TimeUnit.SECONDS)
                .forEach((tp, om) -> {
                    if (om == null) {
                        fail("null offset for " + tp);
                    }
                    out.put(tp, om.offset());
                });
        return out;
    }

    static String uniqueGroup(String prefix) {
        return Compat.uniqueTopic(prefix).replace("compat-java-", "compat-java-group-");
    }
}
