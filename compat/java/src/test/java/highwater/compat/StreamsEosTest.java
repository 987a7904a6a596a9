package highwater.compat;

import static highwater.compat.Compat.TIMEOUT_S;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Kafka Streams 4.1.1 with processing.guarantee=exactly_once_v2 (WordCountApp: split, a
 * repartition by word, a RocksDB count with its changelog, counts to the output), crashed
 * with a SIGKILL while it processes and restarted with the same application.id and state
 * dir. The restarted instance has the crashed one's process id (kept in the state dir), so
 * its producer has the same transactional.id and its initTransactions() aborts the crashed
 * instance's open transaction; the RocksDB store, without a checkpoint after a crash under
 * EOS, is rebuilt from the changelog's committed records. A read_committed consumer of the
 * output must then see, for every word, counts that only grow and end at the true count.
 * Against a broker without transactions the Streams producer's initTransactions() times
 * out and the bounded waits below fail the test.
 */
class StreamsEosTest {
    private static final int PARTITIONS = 3;
    private static final int LINES = 600;
    private static final int WORDS_PER_LINE = 5;
    private static final String[] VOCABULARY = {"alpha", "bravo", "charlie", "delta", "echo",
        "foxtrot", "golf", "hotel", "india", "juliett", "kilo", "lima"};

    /** Waits up to limitS seconds for a condition, checking it every 200 ms. */
    static void waitFor(long limitS, String what, BooleanSupplier condition)
            throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(limitS).toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out after " + limitS + "s waiting for " + what);
            }
            Thread.sleep(200);
        }
    }

    /** The group's committed offsets; with requireStable, empty while any is unstable. */
    static Map<TopicPartition, Long> committed(Admin admin, String group, boolean stable) {
        Map<TopicPartition, Long> out = new HashMap<>();
        try {
            admin.listConsumerGroupOffsets(group,
                    new ListConsumerGroupOffsetsOptions().requireStable(stable))
                    .partitionsToOffsetAndMetadata().get(TIMEOUT_S, SECONDS)
                    .forEach((tp, om) -> {
                        if (om != null) {
                            out.put(tp, om.offset());
                        }
                    });
        } catch (Exception e) {
            return Map.of();
        }
        return out;
    }

    /** The group's committed offsets on the input topic, by partition. */
    static Map<Integer, Long> inputCommits(Admin admin, String group, String input,
            boolean stable) {
        Map<Integer, Long> out = new TreeMap<>();
        committed(admin, group, stable).forEach((tp, o) -> {
            if (tp.topic().equals(input)) {
                out.put(tp.partition(), o);
            }
        });
        return out;
    }

    /** The class path of the test JVM, for the child JVM (surefire's, not its booter jar). */
    static String testClassPath() {
        String cp = System.getProperty("surefire.test.class.path");
        return cp != null && !cp.isBlank() ? cp : System.getProperty("java.class.path");
    }

    /** Reads a topic (String keys, Long values) from the start to the given ends. */
    /** A consumer of the output (String words, Long counts), without a group. */
    static KafkaConsumer<String, Long> countsConsumer(String isolation) {
        Map<String, Object> cfg = new HashMap<>();
        cfg.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Compat.bootstrap());
        cfg.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cfg.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        cfg.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        cfg.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        return new KafkaConsumer<>(cfg, new StringDeserializer(), new LongDeserializer());
    }

    static List<ConsumerRecord<String, Long>> readCounts(String topic, String isolation,
            Map<TopicPartition, Long> ends) {
        List<ConsumerRecord<String, Long>> got = new ArrayList<>();
        try (KafkaConsumer<String, Long> c = countsConsumer(isolation)) {
            c.assign(ends.keySet());
            c.seekToBeginning(ends.keySet());
            long deadline = System.nanoTime() + Duration.ofSeconds(TIMEOUT_S).toNanos();
            while (!ends.entrySet().stream()
                    .allMatch(e -> c.position(e.getKey()) >= e.getValue())) {
                if (System.nanoTime() > deadline) {
                    fail("timed out reading " + topic + " (" + isolation + ") to " + ends);
                }
                c.poll(Duration.ofMillis(200)).forEach(got::add);
            }
        }
        return got;
    }

    @Test
    @Timeout(240)
    void word_count_with_exactly_once_v2_survives_a_kill_9_and_counts_every_word_once(
            @TempDir Path tmp) throws Exception {
        String input = Compat.uniqueTopic("streams-in");
        String output = Compat.uniqueTopic("streams-out");
        String appId = Compat.uniqueTopic("streams-app");
        String stateDir = tmp.resolve("state").toString();
        Path childLog = tmp.resolve("child.log");

        // 600 lines of 5 words (3,000 words over 12), on the 3 input partitions in turn.
        Random random = new Random(20261201L);
        List<String> lines = new ArrayList<>();
        Map<String, Long> want = new TreeMap<>();
        for (int i = 0; i < LINES; i++) {
            List<String> words = new ArrayList<>();
            for (int w = 0; w < WORDS_PER_LINE; w++) {
                String word = VOCABULARY[random.nextInt(VOCABULARY.length)];
                words.add(word);
                want.merge(word, 1L, Long::sum);
            }
            lines.add(String.join(" ", words));
        }
        // A third before the first instance starts; the rest trickles in while it runs, is
        // killed and is replaced.
        int firstBatch = LINES / 3;

        Process child = null;
        KafkaStreams second = null;
        AtomicReference<Throwable> producerFailure = new AtomicReference<>();
        Thread trickle = null;
        long t0 = System.nanoTime();
        try (Admin admin = Compat.admin();
                KafkaProducer<byte[], byte[]> producer = Compat.producer(Map.of())) {
            Compat.createTopic(admin, input, PARTITIONS, Map.of());
            Compat.createTopic(admin, output, PARTITIONS, Map.of());
            for (int i = 0; i < firstBatch; i++) {
                producer.send(new ProducerRecord<>(input, i % PARTITIONS, null,
                        lines.get(i).getBytes(StandardCharsets.UTF_8)));
            }
            producer.flush();

            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            child = new ProcessBuilder(java, "-Xmx256m", "-XX:+UseSerialGC",
                    "-cp", testClassPath(), WordCountApp.class.getName(),
                    Compat.bootstrap(), appId, input, output, stateDir)
                    .redirectErrorStream(true)
                    .redirectOutput(childLog.toFile())
                    .start();
            Process first = child;
            waitFor(90, "the first instance (child JVM) to commit input offsets", () -> {
                if (!first.isAlive()) {
                    fail("the first instance exited with " + first.exitValue());
                }
                return inputCommits(admin, appId, input, false).values().stream()
                        .mapToLong(Long::longValue).sum() > 0;
            });
            System.out.println("streams: first instance committing after "
                    + (System.nanoTime() - t0) / 1_000_000 + " ms: "
                    + inputCommits(admin, appId, input, false));

            // The rest: 10 lines every 100 ms (about 4 s).
            trickle = new Thread(() -> {
                try {
                    for (int i = firstBatch; i < LINES; i++) {
                        producer.send(new ProducerRecord<>(input, i % PARTITIONS, null,
                                lines.get(i).getBytes(StandardCharsets.UTF_8)));
                        if (i % 10 == 9) {
                            producer.flush();
                            Thread.sleep(100);
                        }
                    }
                    producer.flush();
                } catch (Throwable e) {
                    producerFailure.set(e);
                }
            }, "trickle");
            trickle.start();
            // Killed once it has committed some of the trickle, so that it dies while it
            // processes (a transaction open every 100 ms commit interval).
            waitFor(60, "the first instance to commit past the first third", () -> {
                if (!first.isAlive()) {
                    fail("the first instance exited with " + first.exitValue());
                }
                return inputCommits(admin, appId, input, false).values().stream()
                        .mapToLong(Long::longValue).sum() > firstBatch + 30;
            });
            Map<Integer, Long> atKill = inputCommits(admin, appId, input, false);
            child.destroyForcibly(); // SIGKILL: no commit, no EndTxn, no LeaveGroup
            assertTrue(child.waitFor(30, SECONDS), "the child JVM died");
            System.out.println("streams: killed the first instance after "
                    + (System.nanoTime() - t0) / 1_000_000 + " ms; its commits then "
                    + atKill);

            second = WordCountApp.build(Compat.bootstrap(), appId, input, output, stateDir);
            AtomicReference<Throwable> streamsFailure = new AtomicReference<>();
            second.setUncaughtExceptionHandler(e -> {
                streamsFailure.set(e);
                return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                        .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            second.start();
            trickle.join(SECONDS.toMillis(TIMEOUT_S));
            assertTrue(!trickle.isAlive() && producerFailure.get() == null,
                    "the input producer finished: " + producerFailure.get());

            List<TopicPartition> inTps = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                inTps.add(new TopicPartition(input, p));
            }
            Map<Integer, Long> ends = new TreeMap<>();
            try (KafkaConsumer<byte[], byte[]> c = Compat.consumer(Map.of())) {
                c.endOffsets(inTps).forEach((tp, o) -> ends.put(tp.partition(), o));
            }
            KafkaStreams s = second;
            AtomicReference<Map<Integer, Long>> last = new AtomicReference<>(Map.of());
            try {
                waitFor(90, "the restarted instance to commit the input's ends " + ends, () -> {
                    if (streamsFailure.get() != null) {
                        throw new AssertionError("the restarted instance failed",
                                streamsFailure.get());
                    }
                    last.set(inputCommits(admin, appId, input, true));
                    return ends.equals(last.get());
                });
            } catch (AssertionError e) {
                throw new AssertionError(e.getMessage() + "; last stable commits " + last.get()
                        + ", streams state " + s.state(), e);
            }
            System.out.println("streams: the restarted instance committed every input record "
                    + (System.nanoTime() - t0) / 1_000_000 + " ms after the start");
            // The counts come after the repartition topic: follow the output (read_committed)
            // until every word has its true count.
            Map<String, Long> seen = new TreeMap<>();
            try (KafkaConsumer<String, Long> c = countsConsumer("read_committed")) {
                List<TopicPartition> tps = new ArrayList<>();
                for (int p = 0; p < PARTITIONS; p++) {
                    tps.add(new TopicPartition(output, p));
                }
                c.assign(tps);
                c.seekToBeginning(tps);
                try {
                    waitFor(60, "the output's counts to reach the true counts", () -> {
                        if (streamsFailure.get() != null) {
                            throw new AssertionError("the restarted instance failed",
                                    streamsFailure.get());
                        }
                        c.poll(Duration.ofMillis(200))
                                .forEach(r -> seen.put(r.key(), r.value()));
                        return want.equals(seen);
                    });
                } catch (AssertionError e) {
                    throw new AssertionError(e.getMessage() + ": want " + want + ", read "
                            + seen + ", streams state " + s.state(), e);
                }
            }
            System.out.println("streams: the output has every true count "
                    + (System.nanoTime() - t0) / 1_000_000 + " ms after the start");
            second.close(Duration.ofSeconds(TIMEOUT_S));
            second = null;

            // The last transaction's markers may land after its EndTxn; wait for LSO = HWM.
            List<TopicPartition> outTps = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                outTps.add(new TopicPartition(output, p));
            }
            Map<TopicPartition, Long> hwm = new HashMap<>();
            waitFor(TIMEOUT_S, "the output's LSO to reach its high watermark", () -> {
                try (KafkaConsumer<byte[], byte[]> ru = Compat.consumer(Map.of());
                        KafkaConsumer<byte[], byte[]> rc = Compat.consumer(Map.of(
                                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
                    Map<TopicPartition, Long> high = ru.endOffsets(outTps);
                    hwm.clear();
                    hwm.putAll(high);
                    return high.equals(rc.endOffsets(outTps));
                }
            });

            List<ConsumerRecord<String, Long>> committedOut =
                    readCounts(output, "read_committed", hwm);
            List<ConsumerRecord<String, Long>> uncommittedOut =
                    readCounts(output, "read_uncommitted", hwm);
            Map<String, Long> lastCount = new TreeMap<>();
            List<String> regressions = new ArrayList<>();
            for (ConsumerRecord<String, Long> r : committedOut) {
                Long before = lastCount.put(r.key(), r.value());
                if (before != null && r.value() <= before) {
                    regressions.add(r.key() + ": " + before + " then " + r.value() + " at "
                            + r.partition() + "/" + r.offset());
                }
            }
            System.out.println("streams: output read_committed " + committedOut.size()
                    + " records, read_uncommitted " + uncommittedOut.size()
                    + " (the rest: the killed instance's aborted transaction); hwm " + hwm);
            assertEquals(want, lastCount, "the last count of every word (read_committed)");
            assertEquals(List.of(), regressions,
                    "read_committed counts of a word only grow (no recount after the crash)");
        } catch (Throwable e) {
            if (Files.exists(childLog)) {
                System.out.println("---- the first instance's output ----");
                System.out.println(Files.readString(childLog));
            }
            throw e;
        } finally {
            if (trickle != null) {
                trickle.join(SECONDS.toMillis(TIMEOUT_S));
            }
            if (second != null) {
                second.close(Duration.ofSeconds(TIMEOUT_S));
            }
            if (child != null && child.isAlive()) {
                child.destroyForcibly();
            }
        }
    }
}
