package highwater.compat;

import static highwater.compat.Compat.TIMEOUT_S;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** ListOffsets (by timestamp, earliest, latest, max timestamp) and fetch positions. */
class OffsetsTest {
    // Timestamps (relative to a base) of offsets 0..7: out of order at 3, a tie at 4/5,
    // and the largest (60) is not the last record.
    private static final long[] TS = {10, 20, 30, 25, 40, 40, 60, 50};
    // Target timestamp -> expected offset: the first offset whose timestamp is >= target
    // (Kafka finds the first batch whose max timestamp is >= target, then the first record
    // in it at or past the target). -1 means past the end.
    private static final long[][] EXPECTED = {
        {-100_000, 0}, {5, 0}, {10, 0}, {11, 1}, {20, 1}, {21, 2}, {25, 2}, {26, 2}, {30, 2},
        {31, 4}, {40, 4}, {41, 6}, {50, 6}, {51, 6}, {60, 6}, {61, -1}, {100_000, -1},
    };

    @Test
    void offsets_for_times_when_each_record_is_its_own_batch() throws Exception {
        // Goal: timestamp lookup across batches. Method: send and wait for each record.
        checkTimestampLookups(true);
    }

    @Test
    void offsets_for_times_when_all_records_share_one_batch() throws Exception {
        // Goal: timestamp lookup inside one batch: the answer is a record's offset, not the
        // batch's base offset. Method: long linger, one flush.
        checkTimestampLookups(false);
    }

    private void checkTimestampLookups(boolean batchPerRecord) throws Exception {
        String topic = Compat.uniqueTopic(batchPerRecord ? "ts-batches" : "ts-onebatch");
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 3_600_000L;
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, 1, Map.of());
            produce(topic, base, batchPerRecord);

            try (KafkaConsumer<byte[], byte[]> consumer = Compat.consumer(Map.of())) {
                for (long[] e : EXPECTED) {
                    long target = base + e[0];
                    OffsetAndTimestamp got = consumer.offsetsForTimes(Map.of(tp, target))
                            .get(tp);
                    String what = "consumer offsetsForTimes(base+" + e[0] + ")";
                    if (e[1] < 0) {
                        assertNull(got, what);
                    } else {
                        assertEquals(e[1], got.offset(), what);
                        assertEquals(base + TS[(int) e[1]], got.timestamp(), what);
                    }
                    ListOffsetsResultInfo info = admin.listOffsets(
                            Map.of(tp, OffsetSpec.forTimestamp(target))).all()
                            .get(TIMEOUT_S, SECONDS).get(tp);
                    assertEquals(e[1], info.offset(), "admin " + what);
                }
                assertEquals(0L, consumer.beginningOffsets(List.of(tp)).get(tp));
                assertEquals((long) TS.length, consumer.endOffsets(List.of(tp)).get(tp));
            }

            ListOffsetsResultInfo max = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp()))
                    .all().get(TIMEOUT_S, SECONDS).get(tp);
            assertEquals(6, max.offset(), "MAX_TIMESTAMP: the record with the largest ts");
            assertEquals(base + 60, max.timestamp());
            assertEquals(0, admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all()
                    .get(TIMEOUT_S, SECONDS).get(tp).offset());
            assertEquals(TS.length, admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all()
                    .get(TIMEOUT_S, SECONDS).get(tp).offset());
        }
    }

    private static void produce(String topic, long base, boolean batchPerRecord)
            throws Exception {
        Map<String, Object> cfg = new HashMap<>();
        if (!batchPerRecord) {
            cfg.put(ProducerConfig.LINGER_MS_CONFIG, 10_000);
        }
        try (KafkaProducer<byte[], byte[]> producer = Compat.producer(cfg)) {
            var futures = new java.util.ArrayList<java.util.concurrent.Future<RecordMetadata>>();
            for (int i = 0; i < TS.length; i++) {
                var f = producer.send(new ProducerRecord<>(topic, 0, base + TS[i],
                        ("k" + i).getBytes(), ("v" + i).getBytes()));
                if (batchPerRecord) {
                    f.get(TIMEOUT_S, SECONDS);
                }
                futures.add(f);
            }
            producer.flush();
            for (int i = 0; i < TS.length; i++) {
                assertEquals(i, futures.get(i).get(TIMEOUT_S, SECONDS).offset());
            }
        }
    }

    @Test
    void an_empty_partition_has_no_offsets_for_times() throws Exception {
        // Goal: ListOffsets on an empty partition: earliest = latest = 0, no timestamp match,
        // and MAX_TIMESTAMP answers offset -1.
        String topic = Compat.uniqueTopic("ts-empty");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Compat.admin();
                KafkaConsumer<byte[], byte[]> consumer = Compat.consumer(Map.of())) {
            Compat.createTopic(admin, topic, 1, Map.of());
            assertNull(consumer.offsetsForTimes(Map.of(tp, 0L)).get(tp));
            assertEquals(0L, consumer.beginningOffsets(List.of(tp)).get(tp));
            assertEquals(0L, consumer.endOffsets(List.of(tp)).get(tp));
            ListOffsetsResultInfo max = admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp()))
                    .all().get(TIMEOUT_S, SECONDS).get(tp);
            assertEquals(-1, max.offset());
            assertEquals(-1, max.timestamp());
        }
    }

    @Test
    void fetching_from_the_middle_of_a_batch_starts_at_that_offset() throws Exception {
        // Goal: a fetch offset inside a batch returns the whole batch and the client skips the
        // earlier records. Method: one 8-record batch, seek to 3, poll.
        String topic = Compat.uniqueTopic("mid-batch");
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 3_600_000L;
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, 1, Map.of());
        }
        produce(topic, base, false);
        try (KafkaConsumer<byte[], byte[]> consumer = Compat.consumer(Map.of())) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 3);
            List<ConsumerRecord<byte[], byte[]>> got = new java.util.ArrayList<>();
            long deadline = System.nanoTime() + Duration.ofSeconds(TIMEOUT_S).toNanos();
            while (got.size() < TS.length - 3 && System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(got::add);
            }
            assertEquals(TS.length - 3, got.size(), "records from offset 3 on");
            for (int j = 0; j < got.size(); j++) {
                assertEquals(3 + j, got.get(j).offset());
                assertEquals("v" + (3 + j), new String(got.get(j).value()));
                assertEquals(base + TS[3 + j], got.get(j).timestamp());
            }
        }
    }

    @Test
    void fetching_past_the_log_end_is_offset_out_of_range() throws Exception {
        // Goal: Fetch beyond the log end offset answers OFFSET_OUT_OF_RANGE (1). Method: a
        // consumer with auto.offset.reset=none seeks past the end and polls.
        String topic = Compat.uniqueTopic("out-of-range");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Compat.admin()) {
            Compat.createTopic(admin, topic, 1, Map.of());
        }
        produce(topic, System.currentTimeMillis(), true);
        Map<String, Object> cfg = Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        try (KafkaConsumer<byte[], byte[]> consumer = Compat.consumer(cfg)) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 1000);
            OffsetOutOfRangeException e = assertThrows(OffsetOutOfRangeException.class, () -> {
                long deadline = System.nanoTime() + Duration.ofSeconds(TIMEOUT_S).toNanos();
                while (System.nanoTime() < deadline) {
                    ConsumerRecords<byte[], byte[]> rs = consumer.poll(Duration.ofMillis(200));
                    assertTrue(rs.isEmpty(), "no records past the end");
                }
            });
            assertEquals(1000L, e.offsetOutOfRangePartitions().get(tp));
        }
    }
}
