package highwater.compat;

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The Kafka Streams word count of StreamsEosTest, with processing.guarantee=exactly_once_v2:
 * input lines (String values) are split into words, re-keyed by word (a repartition topic),
 * counted in a RocksDB store (a compacted changelog topic) and every count update is written
 * to the output topic (String word, Long count). The test runs it in-process and, to crash
 * it with a SIGKILL, as a child JVM through {@link #main}.
 */
final class WordCountApp {
    private WordCountApp() {}

    static Properties config(String bootstrap, String applicationId, String stateDir) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // A member killed without LeaveGroup is dropped after 6 s (the broker's minimum)
        // rather than Streams' 45 s, so its successor's rebalance finishes soon.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6_000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1_500);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // Bounded client calls (Streams' defaults are 60 s and more).
        p.put(StreamsConfig.producerPrefix("max.block.ms"), 30_000);
        p.put(StreamsConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        return p;
    }

    static KafkaStreams build(String bootstrap, String applicationId, String input,
            String output, String stateDir) {
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(input)
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .groupBy((key, word) -> word, Grouped.as("words"))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return new KafkaStreams(b.build(), config(bootstrap, applicationId, stateDir));
    }

    /**
     * Child-JVM entry: BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR. Prints every state
     * change; runs until killed (or, on SIGTERM, closes within 30 s).
     */
    public static void main(String[] args) throws InterruptedException {
        KafkaStreams streams = build(args[0], args[1], args[2], args[3], args[4]);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("wordcount state " + before + " -> " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace(System.out);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
        }));
        streams.start();
        done.await();
        streams.close(Duration.ofSeconds(30));
        System.exit(1);
    }
}
