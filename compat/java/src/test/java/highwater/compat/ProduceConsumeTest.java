package highwater.compat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Idempotent producer to assign()ed consumer, byte for byte, under each compression. */
class ProduceConsumeTest {
    private static final int RECORDS = 100_000;
    private static final int PARTITIONS = 3;
    private static final int DISTINCT_KEYS = 997;

    @ParameterizedTest(name = "compression={0}")
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void idempotent_producer_records_come_back_byte_exact_and_in_order(String compression)
            throws Exception {
        // Goal: 100,000 keyed records with 2 headers and explicit timestamps survive the
        // broker unchanged. Method: produce with acks=all and idempotence, note each acked
        // offset, then read all partitions from the beginning and compare every field.
        String topic = Compat.uniqueTopic("roundtrip-" + compression);
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, PARTITIONS, Map.of());
        }
        long baseTs = System.currentTimeMillis() - 3_600_000L;
        long[] ackedOffset = produceAll(topic, compression, baseTs);
        consumeAndCheck(topic, compression, baseTs, ackedOffset);
        for (int p = 0; p < PARTITIONS; p++) {
            assertEquals(Set.of(compression), StoredCodecs.of(topic, p),
                    "codecs of the batches stored in partition " + p);
        }
    }

    private static long[] produceAll(String topic, String compression, long baseTs)
            throws Exception {
        long[] acked = new long[RECORDS];
        AtomicReference<Throwable> firstError = new AtomicReference<>();
        Map<String, Object> cfg = Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        try (KafkaProducer<byte[], byte[]> producer = Compat.producer(cfg)) {
            for (int i = 0; i < RECORDS; i++) {
                final int idx = i;
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, null,
                        baseTs + i, key(i), value(i), headers(i, compression));
                producer.send(r, (md, e) -> {
                    if (e != null) {
                        firstError.compareAndSet(null, e);
                        return;
                    }
                    if (md.partition() != expectedPartition(idx)) {
                        firstError.compareAndSet(null, new AssertionError(
                                "record " + idx + " acked on partition " + md.partition()));
                    }
                    acked[idx] = md.offset();
                });
            }
            producer.flush();
        }
        if (firstError.get() != null) {
            throw new AssertionError("produce failed: " + firstError.get(), firstError.get());
        }
        return acked;
    }

    private static void consumeAndCheck(String topic, String compression, long baseTs,
            long[] acked) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        Map<String, Object> cfg = Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 5000);
        try (KafkaConsumer<byte[], byte[]> consumer = Compat.consumer(cfg)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> begin = consumer.beginningOffsets(tps);
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long[] perPartition = new long[PARTITIONS];
            for (int i = 0; i < RECORDS; i++) {
                perPartition[expectedPartition(i)]++;
            }
            for (TopicPartition tp : tps) {
                assertEquals(0L, begin.get(tp), "beginning offset of " + tp);
                assertEquals(perPartition[tp.partition()], end.get(tp), "end offset of " + tp);
            }

            long[] nextOffset = new long[PARTITIONS];
            int[] lastIndex = new int[PARTITIONS];
            Arrays.fill(lastIndex, -1);
            boolean[] seen = new boolean[RECORDS];
            int count = 0;
            long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
            while (count < RECORDS) {
                if (System.nanoTime() > deadline) {
                    fail("read " + count + " of " + RECORDS + " records before the deadline");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    int i = ByteBuffer.wrap(r.headers().lastHeader("seq").value()).getInt();
                    int p = r.partition();
                    String where = "record " + i + " at " + p + "@" + r.offset();
                    assertEquals(nextOffset[p], r.offset(), "offsets are contiguous: " + where);
                    assertEquals(acked[i], r.offset(), "offset acked for " + where);
                    assertEquals(expectedPartition(i), p, where);
                    assertTrue(i > lastIndex[p], "send order kept: " + where);
                    assertFalse(seen[i], "no duplicate: " + where);
                    checkRecord(r, i, compression, baseTs, where);
                    nextOffset[p]++;
                    lastIndex[p] = i;
                    seen[i] = true;
                    count++;
                }
            }
            assertEquals(0, consumer.poll(Duration.ofMillis(500)).count(), "no extra records");
            for (TopicPartition tp : tps) {
                assertEquals(end.get(tp), consumer.position(tp), "position at end of " + tp);
            }
        }
    }

    private static void checkRecord(ConsumerRecord<byte[], byte[]> r, int i, String compression,
            long baseTs, String where) {
        assertArrayEquals(key(i), r.key(), "key of " + where);
        assertArrayEquals(value(i), r.value(), "value of " + where);
        assertEquals(TimestampType.CREATE_TIME, r.timestampType(), where);
        assertEquals(baseTs + i, r.timestamp(), "timestamp of " + where);
        Header[] want = headers(i, compression).toArray(new Header[0]);
        Header[] got = r.headers().toArray();
        assertEquals(want.length, got.length, "header count of " + where);
        for (int h = 0; h < want.length; h++) {
            assertEquals(want[h].key(), got[h].key(), "header key of " + where);
            if (want[h].value() == null) {
                assertNull(got[h].value(), "null header value of " + where);
            } else {
                assertArrayEquals(want[h].value(), got[h].value(), "header value of " + where);
            }
        }
    }

    private static byte[] key(int i) {
        return ("key-" + (i % DISTINCT_KEYS)).getBytes(StandardCharsets.UTF_8);
    }

    /** Mixed content: text, a repeated run (compressible) and bytes 0..255 (not text). */
    private static byte[] value(int i) {
        int len = 8 + (i * 31) % 300;
        byte[] v = new byte[len];
        byte[] prefix = ("v" + i + ":").getBytes(StandardCharsets.UTF_8);
        for (int b = 0; b < len; b++) {
            v[b] = b < prefix.length ? prefix[b] : (byte) (b % 3 == 0 ? 'x' : (i + b) & 0xff);
        }
        return v;
    }

    private static List<Header> headers(int i, String compression) {
        byte[] tag = i % 10 == 0 ? null
                : (compression + "/" + (i % 7)).getBytes(StandardCharsets.UTF_8);
        return List.of(new RecordHeader("seq", ByteBuffer.allocate(4).putInt(i).array()),
                new RecordHeader("tag", tag));
    }

    /** Kafka's default partitioner for a keyed record: murmur2 of the key bytes. */
    private static final int[] PARTITION_OF_KEY = new int[DISTINCT_KEYS];

    static {
        for (int k = 0; k < DISTINCT_KEYS; k++) {
            PARTITION_OF_KEY[k] = Utils.toPositive(Utils.murmur2(key(k))) % PARTITIONS;
        }
    }

    private static int expectedPartition(int i) {
        return PARTITION_OF_KEY[i % DISTINCT_KEYS];
    }
}
