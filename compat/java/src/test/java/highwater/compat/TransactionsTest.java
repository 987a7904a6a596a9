package highwater.compat;

import static highwater.compat.Compat.TIMEOUT_S;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CloseOptions.GroupMembershipOperation;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Transactions with the Java client (kafka-clients 4.1.1; against Kafka 4.1.1 it uses
 * transaction version 2, KIP-890: no AddPartitionsToTxn or AddOffsetsToTxn, EndTxn v5,
 * Produce v13, TxnOffsetCommit v5): a KIP-447 read-process-write pipeline that loses an
 * instance mid-transaction and still copies every input record exactly once, and the
 * exceptions a zombie producer gets once a successor with its transactional.id fenced it.
 * Every blocking call is bounded: producers block at most max.block.ms (30 s) and are closed
 * with a timeout (close() without one waits forever, and aborts an open transaction first),
 * consumers use a 30 s default.api.timeout.ms, and each test has a JUnit timeout.
 */
class TransactionsTest {
    private static final int PARTITIONS = 3;
    private static final int PER_PARTITION = 33_334;
    private static final int TXN_TIMEOUT_MS = 60_000;

    static KafkaProducer<byte[], byte[]> txnProducer(String transactionalId) {
        Map<String, Object> cfg = new HashMap<>();
        cfg.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        cfg.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, TXN_TIMEOUT_MS);
        cfg.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        cfg.put(ProducerConfig.CLIENT_ID_CONFIG, transactionalId);
        return Compat.producer(cfg);
    }

    static void closeQuietly(KafkaProducer<?, ?> p) {
        try {
            p.close(Duration.ofSeconds(TIMEOUT_S));
        } catch (Exception ignored) {
            // Closing after a failure; the failure is what counts.
        }
    }

    /**
     * One instance of the pipeline on its own thread: a consumer in the group (classic
     * protocol, read_committed) and a transactional producer. Each poll's records are copied
     * to the output in one transaction that also carries the consumer's positions
     * (sendOffsetsToTransaction with the consumer's group metadata). An abortable error aborts
     * the transaction and rewinds to the committed offsets. With crashAfter >= 0 the instance
     * "crashes" in its transaction after that many commits: it flushes the transaction's
     * records into the log, then closes its producer with a zero timeout (no EndTxn) and its
     * consumer without leaving the group.
     */
    static final class Instance implements AutoCloseable {
        final String name;
        final String transactionalId;
        final int crashAfter;
        final AtomicInteger commits = new AtomicInteger();
        final AtomicInteger aborts = new AtomicInteger();
        volatile int crashRecords = -1;
        volatile Set<TopicPartition> assignment = Set.of();
        volatile boolean running = true;
        volatile Throwable failure;
        private final KafkaConsumer<byte[], byte[]> consumer;
        private final KafkaProducer<byte[], byte[]> producer;
        private final String output;
        private final Thread thread;

        Instance(String name, String transactionalId, String group, String input,
                String output, int crashAfter) {
            this.name = name;
            this.transactionalId = transactionalId;
            this.output = output;
            this.crashAfter = crashAfter;
            Map<String, Object> cfg = new HashMap<>(GroupMember.classic(6_000));
            cfg.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cfg.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            cfg.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            cfg.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
            cfg.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 30_000);
            consumer = Compat.consumer(cfg);
            producer = txnProducer(transactionalId);
            thread = new Thread(() -> loop(input), "eos-" + name);
            thread.setDaemon(true);
            thread.start();
        }

        private void loop(String input) {
            try {
                producer.initTransactions();
                consumer.subscribe(List.of(input));
                while (running) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                    assignment = Set.copyOf(consumer.assignment());
                    if (records.isEmpty()) {
                        continue;
                    }
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        producer.send(new ProducerRecord<>(output, r.partition(), r.key(),
                                r.value()));
                        next.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                    }
                    if (crashAfter >= 0 && commits.get() >= crashAfter) {
                        producer.flush();
                        crashRecords = records.count();
                        producer.close(Duration.ZERO);
                        consumer.close(CloseOptions.groupMembershipOperation(
                                GroupMembershipOperation.REMAIN_IN_GROUP)
                                .withTimeout(Duration.ZERO));
                        running = false;
                        return;
                    }
                    try {
                        producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                        producer.commitTransaction();
                        commits.incrementAndGet();
                    } catch (ProducerFencedException | InvalidProducerEpochException e) {
                        throw e; // fatal: nothing else may use this transactional.id
                    } catch (KafkaException e) {
                        // E.g. CommitFailedException: the group moved on to a new generation.
                        aborts.incrementAndGet();
                        producer.abortTransaction();
                        rewind();
                    }
                }
                producer.close(Duration.ofSeconds(TIMEOUT_S));
                consumer.close(CloseOptions.timeout(Duration.ofSeconds(TIMEOUT_S)));
            } catch (Throwable e) {
                failure = e;
                running = false;
                producer.close(Duration.ZERO);
                try {
                    consumer.close(CloseOptions.timeout(Duration.ZERO));
                } catch (Throwable ignored) {
                    // Already failing.
                }
            }
        }

        /** Seeks every assigned partition back to the group's committed offset. */
        private void rewind() {
            Set<TopicPartition> mine = consumer.assignment();
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(mine);
            for (TopicPartition tp : mine) {
                OffsetAndMetadata om = committed.get(tp);
                if (om == null) {
                    consumer.seekToBeginning(List.of(tp));
                } else {
                    consumer.seek(tp, om.offset());
                }
            }
        }

        void checkAlive() {
            if (failure != null) {
                throw new AssertionError("instance " + name + " failed", failure);
            }
        }

        /** Stops the loop (it closes its clients) and waits for the thread. */
        @Override
        public void close() throws InterruptedException {
            running = false;
            thread.join(SECONDS.toMillis(2 * TIMEOUT_S + 10));
        }

        @Override
        public String toString() {
            return name + "(commits " + commits + ", aborts " + aborts + ")";
        }
    }

    /** The group's committed offsets (OffsetFetch with requireStable), empty on error. */
    static Map<TopicPartition, Long> stableCommits(Admin admin, String group) {
        Map<TopicPartition, Long> out = new TreeMap<>(
                (a, b) -> Integer.compare(a.partition(), b.partition()));
        try {
            admin.listConsumerGroupOffsets(group,
                    new ListConsumerGroupOffsetsOptions().requireStable(true))
                    .partitionsToOffsetAndMetadata().get(TIMEOUT_S, SECONDS)
                    .forEach((tp, om) -> out.put(tp, om == null ? -1L : om.offset()));
        } catch (Exception e) {
            // UNSTABLE_OFFSET_COMMIT while a transaction holding offsets is open: not yet.
            return Map.of();
        }
        return out;
    }

    /**
     * Reads every partition from the start at the given isolation level until its position
     * reaches the given end; returns the values read, by partition.
     */
    static Map<Integer, List<String>> readAll(String topic, String isolation,
            Map<TopicPartition, Long> ends) throws Exception {
        Map<Integer, List<String>> got = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> c = Compat.consumer(
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            c.assign(ends.keySet());
            c.seekToBeginning(ends.keySet());
            ends.keySet().forEach(tp -> got.put(tp.partition(), new ArrayList<>()));
            long deadline = System.nanoTime() + Duration.ofSeconds(TIMEOUT_S).toNanos();
            while (!ends.entrySet().stream()
                    .allMatch(e -> c.position(e.getKey()) >= e.getValue())) {
                if (System.nanoTime() > deadline) {
                    fail("timed out reading " + topic + " (" + isolation + ") to " + ends);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    got.get(r.partition()).add(new String(r.value()));
                }
            }
        }
        return got;
    }

    @Test
    @Timeout(170)
    void read_process_write_copies_every_record_exactly_once_across_a_crashed_instance()
            throws Exception {
        // Goal: KIP-447 exactly-once: consumed offsets committed through the producer's
        // transactions, with the consumer's group metadata, so a transaction's output and its
        // input offsets become visible together. An instance that dies inside a transaction
        // loses nothing and duplicates nothing: its successor (same transactional.id) aborts
        // the open transaction in initTransactions(), and whoever takes its partition resumes
        // at the last committed offset. Method: three instances split 3 input partitions;
        // 100,002 records; b crashes after 3 commits with a transaction open and flushed; b2
        // takes b's place; when the group's stable offsets reach the ends, a read_committed
        // consumer of the output must see each input value exactly once, and a
        // read_uncommitted one must also see the crashed transaction's records.
        String input = Compat.uniqueTopic("eos-in");
        String output = Compat.uniqueTopic("eos-out");
        String group = GroupMember.uniqueGroup("eos");
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, input, PARTITIONS, Map.of());
            Compat.createTopic(admin, output, PARTITIONS, Map.of());
            List<Instance> all = new ArrayList<>();
            Instance b = new Instance("b", group + "-b", group, input, output, 3);
            all.add(b);
            try {
                all.add(new Instance("a", group + "-a", group, input, output, -1));
                all.add(new Instance("c", group + "-c", group, input, output, -1));
                Compat.waitFor("each instance holding one partition", () -> {
                    all.forEach(Instance::checkAlive);
                    return all.stream().allMatch(i -> i.assignment.size() == 1);
                });
                Map<TopicPartition, Long> ends = GroupMember.produce(input, PARTITIONS,
                        PER_PARTITION);

                Compat.waitFor("b to crash in a transaction", () -> {
                    all.forEach(Instance::checkAlive);
                    return !b.running;
                });
                assertTrue(b.crashRecords > 0, "b crashed with records in a transaction");
                Instance b2 = new Instance("b2", b.transactionalId, group, input, output, -1);
                all.add(b2);

                long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
                Map<TopicPartition, Long> commits = Map.of();
                while (!ends.equals(commits)) {
                    for (Instance i : all) {
                        i.checkAlive();
                    }
                    if (System.nanoTime() > deadline) {
                        fail("after 90 s the group's committed offsets are " + commits
                                + ", not " + ends + "; " + all);
                    }
                    Thread.sleep(200);
                    commits = new HashMap<>(stableCommits(admin, group));
                }
                for (Instance i : all) {
                    i.close();
                    i.checkAlive();
                }
                System.out.println("read-process-write: " + all + "; b crashed with "
                        + b.crashRecords + " records in its open transaction");
                assertEquals(3, b.commits.get());
            } finally {
                for (Instance i : all) {
                    i.close();
                }
            }

            // Every transaction is complete once b2 has aborted b's and the others committed;
            // the markers are written after EndTxn returns, so wait for LSO = HWM.
            Map<TopicPartition, Long> hwm = new HashMap<>();
            Compat.waitFor("the output's LSO to reach its high watermark", () -> {
                try (KafkaConsumer<byte[], byte[]> ru = Compat.consumer(Map.of());
                        KafkaConsumer<byte[], byte[]> rc = Compat.consumer(Map.of(
                                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
                    List<TopicPartition> tps = new ArrayList<>();
                    for (int p = 0; p < PARTITIONS; p++) {
                        tps.add(new TopicPartition(output, p));
                    }
                    Map<TopicPartition, Long> high = ru.endOffsets(tps);
                    hwm.putAll(high);
                    return high.equals(rc.endOffsets(tps));
                }
            });
            Map<Integer, List<String>> committed = readAll(output, "read_committed", hwm);
            Map<Integer, List<String>> uncommitted = readAll(output, "read_uncommitted", hwm);
            int extra = 0;
            for (int p = 0; p < PARTITIONS; p++) {
                List<String> want = new ArrayList<>();
                for (int i = 0; i < PER_PARTITION; i++) {
                    want.add("p" + p + "-" + i);
                }
                assertEquals(want, committed.get(p),
                        "output partition " + p + ", read_committed: each input once, in order");
                extra += uncommitted.get(p).size() - PER_PARTITION;
            }
            assertTrue(extra >= b.crashRecords, "read_uncommitted also sees the "
                    + b.crashRecords + " records of b's open transaction; extra " + extra);
        }
    }

    /**
     * A zombie: a producer with an open transaction holding one record (offset 0), fenced by
     * a successor with its transactional.id whose initTransactions() has returned (which
     * aborted the zombie's transaction: marker at offset 1).
     */
    private static final class Fenced {
        final String topic = Compat.uniqueTopic("txn-fence");
        final TopicPartition tp = new TopicPartition(topic, 0);
        final KafkaProducer<byte[], byte[]> zombie;
        final KafkaProducer<byte[], byte[]> successor;

        Fenced() throws Exception {
            try (Admin admin = Compat.admin()) {
                Compat.createTopic(admin, topic, 1, Map.of());
            }
            zombie = txnProducer(topic + "-txn");
            successor = txnProducer(topic + "-txn");
            try {
                zombie.initTransactions();
                zombie.beginTransaction();
                assertEquals(0, send(zombie, "zombie-0").get(TIMEOUT_S, SECONDS).offset());
                successor.initTransactions();
            } catch (Throwable e) {
                close();
                throw e;
            }
        }

        Future<RecordMetadata> send(KafkaProducer<byte[], byte[]> p, String value) {
            return p.send(new ProducerRecord<>(topic, 0, null, value.getBytes()));
        }

        /** The successor commits a record: read_committed sees only it. */
        void successorCommitsAlone() throws Exception {
            successor.beginTransaction();
            RecordMetadata mine = send(successor, "successor-0").get(TIMEOUT_S, SECONDS);
            successor.commitTransaction();
            assertEquals(2, mine.offset(), "after zombie-0 and the abort marker");
            closeQuietly(zombie);
            closeQuietly(successor);

            Map<TopicPartition, Long> ends = Map.of(tp, 4L);
            Compat.waitFor("the commit marker", () -> {
                try (KafkaConsumer<byte[], byte[]> rc = Compat.consumer(
                        Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
                    return rc.endOffsets(List.of(tp)).get(tp) == 4L;
                }
            });
            assertEquals(List.of("successor-0"), readAll(topic, "read_committed", ends).get(0));
            assertEquals(List.of("zombie-0", "successor-0"),
                    readAll(topic, "read_uncommitted", ends).get(0));
        }

        void close() {
            closeQuietly(zombie);
            closeQuietly(successor);
        }
    }

    @Test
    @Timeout(90)
    void a_fenced_producers_commit_fails_with_producer_fenced() throws Exception {
        // Goal: initTransactions() of a second producer with the same transactional.id aborts
        // the first one's open transaction and fences it: the first one's commit (EndTxn with
        // the old epoch; Kafka answers PRODUCER_FENCED, 90) throws ProducerFencedException,
        // which is fatal: abort and begin throw it too. The successor works.
        Fenced f = new Fenced();
        try {
            assertInstanceOf(ProducerFencedException.class,
                    assertThrows(KafkaException.class, f.zombie::commitTransaction), "commit");
            assertInstanceOf(ProducerFencedException.class,
                    assertThrows(KafkaException.class, f.zombie::abortTransaction), "abort");
            assertInstanceOf(ProducerFencedException.class,
                    assertThrows(KafkaException.class, f.zombie::beginTransaction), "begin");
            f.successorCommitsAlone();
        } finally {
            f.close();
        }
    }

    @Test
    @Timeout(90)
    void a_fenced_producers_send_fails_with_invalid_producer_epoch_then_abort_is_fenced()
            throws Exception {
        // Goal: a fenced producer's Produce (Kafka: INVALID_PRODUCER_EPOCH, 47) fails its send
        // with InvalidProducerEpochException, and its commit with the same exception, which is
        // abortable (KIP-588), not fatal; the abort that follows (EndTxn: PRODUCER_FENCED)
        // throws the fatal ProducerFencedException, and so does begin. The zombie's second
        // record is never appended: the successor's record lands at offset 2.
        Fenced f = new Fenced();
        try {
            Future<RecordMetadata> late = f.send(f.zombie, "zombie-1");
            ExecutionException sent = assertThrows(ExecutionException.class,
                    () -> late.get(TIMEOUT_S, SECONDS));
            assertInstanceOf(InvalidProducerEpochException.class, sent.getCause(), "send");
            assertInstanceOf(InvalidProducerEpochException.class,
                    assertThrows(KafkaException.class, f.zombie::commitTransaction), "commit");
            assertInstanceOf(ProducerFencedException.class,
                    assertThrows(KafkaException.class, f.zombie::abortTransaction), "abort");
            assertInstanceOf(ProducerFencedException.class,
                    assertThrows(KafkaException.class, f.zombie::beginTransaction), "begin");
            f.successorCommitsAlone();
        } finally {
            f.close();
        }
    }

    @Test
    @Timeout(90)
    void every_transaction_ends_at_a_new_producer_epoch() throws Exception {
        // Goal: transaction version 2 (KIP-890 part 2), which Kafka 4.1 finalizes: the producer
        // adds no partition itself and every EndTxn (v5) bumps its epoch, so DescribeTransactions
        // shows the epoch one higher after each committed or aborted transaction (under
        // transaction version 1 it stays); read_committed sees the committed records only.
        String topic = Compat.uniqueTopic("txn-epochs");
        String id = topic + "-txn";
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, 1, Map.of());
            KafkaProducer<byte[], byte[]> p = txnProducer(id);
            try {
                p.initTransactions();
                int first = epochOf(admin, id);
                for (int i = 0; i < 3; i++) {
                    p.beginTransaction();
                    p.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes()))
                            .get(TIMEOUT_S, SECONDS);
                    if (i == 1) {
                        p.abortTransaction();
                    } else {
                        p.commitTransaction();
                    }
                }
                assertEquals(first + 3, epochOf(admin, id), "one epoch per transaction");
            } finally {
                closeQuietly(p);
            }
        }
        // Three records, three markers.
        Map<TopicPartition, Long> ends = Map.of(new TopicPartition(topic, 0), 6L);
        assertEquals(List.of("v0", "v2"), readAll(topic, "read_committed", ends).get(0));
    }

    static int epochOf(Admin admin, String transactionalId) throws Exception {
        return admin.describeTransactions(List.of(transactionalId))
                .description(transactionalId).get(TIMEOUT_S, SECONDS).producerEpoch();
    }
}
