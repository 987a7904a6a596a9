// Helpers for bench/hwbench that Kafka's own tools cannot do against a broker without
// consumer groups. Compiled by hwbench (context.prepare) against the Kafka 4.1.1 jars in
// .kafka-ref/libs.
//
//   create-topics BOOTSTRAP NAME:PARTITIONS[:RF]...
//                                                Admin.createTopics (RF 1 unless given), then
//                                                waits until every partition has a leader
//                                                and every replica is in the ISR.
//   consume BOOTSTRAP TOPIC RECORDS TIMEOUT_MS   reads every partition from the beginning
//                                                with assign(), as ConsumerPerformance does
//                                                with subscribe() (same consumer settings).
//   end-to-end BOOTSTRAP TOPIC RECORDS ACKS SIZE a port of org.apache.kafka.tools
//                                                .EndToEndLatency without group.id and without
//                                                its closing commitSync().
//   producer-perf BROKER_PIDS CLK_TCK WARMUP_RECORDS ARGS...
//                                                runs Kafka's own ProducerPerformance twice in
//                                                this JVM: a warm-up of WARMUP_RECORDS, then
//                                                the measured run with ARGS, reading the
//                                                brokers' CPU time (/proc/PID/stat, summed
//                                                over the comma-separated BROKER_PIDS) around
//                                                the measured run only.
//
// Why: ConsumerPerformance 4.1.1 always calls subscribe() (a consumer group), and
// EndToEndLatency 4.1.1 sets group.id and calls commitSync() once its loop is done, which
// needs a group coordinator; highwater has none yet. ProducerPerformance 4.1.1 has no
// warm-up option, and in a fresh JVM its first seconds (JIT, class loading) dominate the p99
// of a fixed-rate run of a few seconds. Each command prints one line "RESULT key=value ..."
// for hwbench/tools.py and exits non-zero on any failure.
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.tools.ProducerPerformance;

public final class BenchTool {
    /** How long create-topics waits for every partition to have a leader. */
    private static final long LEADERS_TIMEOUT_MS = 60_000;
    /** EndToEndLatency's poll timeout for the one record it just produced. */
    private static final Duration END_TO_END_POLL_TIMEOUT = Duration.ofMillis(60_000);

    private BenchTool() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        switch (args[0]) {
            case "create-topics" -> createTopics(args[1], Arrays.copyOfRange(args, 2, args.length));
            case "consume" -> {
                if (args.length != 5 && args.length != 6) {
                    usage();
                }
                String isolation = args.length == 6 ? args[5] : "read_uncommitted";
                consume(args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4]),
                        isolation);
            }
            case "end-to-end" -> {
                if (args.length != 6) {
                    usage();
                }
                endToEnd(args[1], args[2], Integer.parseInt(args[3]), args[4],
                        Integer.parseInt(args[5]));
            }
            case "producer-perf" -> {
                if (args.length < 5) {
                    usage();
                }
                producerPerf(args[1], Long.parseLong(args[2]), Long.parseLong(args[3]),
                        Arrays.copyOfRange(args, 4, args.length));
            }
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: BenchTool create-topics BOOTSTRAP NAME:PARTITIONS[:RF]... | "
                + "consume BOOTSTRAP TOPIC RECORDS TIMEOUT_MS [ISOLATION_LEVEL] | "
                + "end-to-end BOOTSTRAP TOPIC RECORDS ACKS SIZE | "
                + "producer-perf BROKER_PID[,PID...] CLK_TCK WARMUP_RECORDS PRODUCER_PERFORMANCE_ARGS...");
        System.exit(2);
    }

    private static void createTopics(String bootstrap, String[] specs) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        Map<String, Integer> replicasByName = new HashMap<>();
        for (String spec : specs) {
            String[] parts = spec.split(":", 3);
            short replicas = parts.length == 3 ? Short.parseShort(parts[2]) : (short) 1;
            topics.add(new NewTopic(parts[0], Integer.parseInt(parts[1]), replicas));
            replicasByName.put(parts[0], (int) replicas);
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(topics).all().get(60, TimeUnit.SECONDS);
            List<String> names = topics.stream().map(NewTopic::name).toList();
            long deadline = System.currentTimeMillis() + LEADERS_TIMEOUT_MS;
            while (!allHaveLeaders(admin, names, replicasByName)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no leader for some partition of " + names
                            + " after " + LEADERS_TIMEOUT_MS + " ms");
                }
                Thread.sleep(50);
            }
        }
        System.out.printf("RESULT topics=%d%n", topics.size());
    }

    private static boolean allHaveLeaders(Admin admin, List<String> names,
            Map<String, Integer> replicasByName) throws Exception {
        Map<String, TopicDescription> described;
        try {
            described = admin.describeTopics(names).allTopicNames().get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                // A multi-broker cluster: the broker asked may not have the new topic yet.
                return false;
            }
            throw e;
        }
        for (TopicDescription description : described.values()) {
            for (TopicPartitionInfo partition : description.partitions()) {
                int wanted = replicasByName.get(description.name());
                if (partition.replicas().size() != wanted) {
                    throw new IllegalStateException(description.name() + "-"
                            + partition.partition() + " has " + partition.replicas().size()
                            + " replicas, asked for " + wanted);
                }
                if (partition.leader() == null || partition.leader().id() < 0
                        || partition.isr().size() < partition.replicas().size()) {
                    return false;
                }
            }
        }
        return true;
    }

    private static void producerPerf(String brokerPids, long clockTicksPerSecond,
            long warmupRecords, String[] args) throws Exception {
        if (warmupRecords > 0) {
            String[] warmup = args.clone();
            int at = Arrays.asList(warmup).indexOf("--num-records");
            if (at < 0 || at + 1 >= warmup.length) {
                throw new IllegalArgumentException("producer-perf needs --num-records N");
            }
            warmup[at + 1] = Long.toString(warmupRecords);
            System.out.println("BENCH warm-up run");
            ProducerPerformance.main(warmup);
        }
        System.out.println("BENCH measured run");
        System.out.flush();
        long[] before = processStats(brokerPids);
        long begin = System.nanoTime();
        ProducerPerformance.main(args);
        long wallNs = System.nanoTime() - begin;
        long[] after = processStats(brokerPids);
        System.out.printf("RESULT broker_cpu_s=%.4f wall_s=%.4f broker_minflt=%d "
                + "broker_majflt=%d%n", (after[0] - before[0]) / (double) clockTicksPerSecond,
                wallNs / 1e9, after[1] - before[1], after[2] - before[2]);
    }

    /** processStat summed over comma-separated pids (the brokers of a cluster). */
    private static long[] processStats(String pids) throws IOException {
        long[] sum = new long[3];
        for (String pid : pids.split(",")) {
            long[] one = processStat(pid);
            for (int i = 0; i < sum.length; i++) {
                sum[i] += one[i];
            }
        }
        return sum;
    }

    /** utime + stime (clock ticks), minor and major page faults of a process (proc(5)). */
    private static long[] processStat(String pid) throws IOException {
        String stat = Files.readString(Path.of("/proc", pid, "stat"));
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return new long[] {Long.parseLong(fields[11]) + Long.parseLong(fields[12]),
                Long.parseLong(fields[7]), Long.parseLong(fields[9])};
    }

    /** ConsumerPerformance's consumer settings (4.1.1 defaults), without group.id. */
    private static Properties consumerPerformanceProps(String bootstrap) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, 2 * 1024 * 1024);
        props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 1024 * 1024);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.CHECK_CRCS_CONFIG, "false");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "perf-consumer-client");
        return props;
    }

    private static void consume(String bootstrap, String topic, long records, long timeoutMs,
            String isolation) {
        Properties props = consumerPerformanceProps(bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                partitions.add(new TopicPartition(info.topic(), info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long start = System.nanoTime();
            long lastRecord = start;
            long count = 0;
            long bytes = 0;
            while (count < records) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
                long now = System.nanoTime();
                if (batch.isEmpty()) {
                    if (now - lastRecord > timeoutMs * 1_000_000L) {
                        throw new IllegalStateException("consumed " + count + " of " + records
                                + " records of " + topic + ": none for " + timeoutMs + " ms");
                    }
                    continue;
                }
                for (ConsumerRecord<byte[], byte[]> record : batch) {
                    count++;
                    bytes += record.key() == null ? 0 : record.key().length;
                    bytes += record.value() == null ? 0 : record.value().length;
                }
                lastRecord = now;
            }
            if (count != records) {
                throw new IllegalStateException("consumed " + count + " records of " + topic
                        + ", expected exactly " + records);
            }
            double seconds = (lastRecord - start) / 1e9;
            System.out.printf("RESULT records=%d bytes=%d seconds=%.6f mb_per_s=%.4f "
                    + "records_per_s=%.1f%n", count, bytes, seconds,
                    bytes / 1048576.0 / seconds, count / seconds);
        }
    }

    private static void endToEnd(String bootstrap, String topic, int records, String acks,
            int size) throws Exception {
        if (!acks.equals("1") && !acks.equals("all")) {
            throw new IllegalArgumentException("acks must be 1 or all, as in EndToEndLatency");
        }
        Map<String, Object> consumerProps = new HashMap<>();
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest");
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class);
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class);
        consumerProps.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "0");
        Map<String, Object> producerProps = new HashMap<>();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        producerProps.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Long.MAX_VALUE);
        producerProps.put(ProducerConfig.ACKS_CONFIG, acks);
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        long[] latenciesNs = new long[records];
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps);
                KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                partitions.add(new TopicPartition(info.topic(), info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToEnd(partitions);
            consumer.assignment().forEach(consumer::position);
            Random random = new Random(0);
            for (int i = 0; i < records; i++) {
                byte[] message = new byte[size];
                Arrays.fill(message, (byte) (random.nextInt(26) + 65));
                long begin = System.nanoTime();
                producer.send(new ProducerRecord<>(topic, message)).get();
                ConsumerRecords<byte[], byte[]> got = consumer.poll(END_TO_END_POLL_TIMEOUT);
                latenciesNs[i] = System.nanoTime() - begin;
                validate(got, message, i);
            }
        }
        printLatencies(latenciesNs);
    }

    private static void validate(ConsumerRecords<byte[], byte[]> got, byte[] sent, int index) {
        if (got.count() != 1) {
            throw new IllegalStateException("record " + index + ": poll returned " + got.count()
                    + " records, expected exactly the one just sent");
        }
        byte[] value = got.iterator().next().value();
        if (!Arrays.equals(value, sent)) {
            throw new IllegalStateException("record " + index + ": consumed value differs");
        }
    }

    /** Percentiles picked as EndToEndLatency does (sorted[(int) (n * q)]), in milliseconds. */
    private static void printLatencies(long[] latenciesNs) {
        long total = 0;
        for (long latency : latenciesNs) {
            total += latency;
        }
        Arrays.sort(latenciesNs);
        int n = latenciesNs.length;
        System.out.printf("RESULT records=%d avg_ms=%.4f p50_ms=%.4f p99_ms=%.4f p999_ms=%.4f "
                + "max_ms=%.4f%n", n, total / 1e6 / n, latenciesNs[(int) (n * 0.5)] / 1e6,
                latenciesNs[(int) (n * 0.99)] / 1e6, latenciesNs[(int) (n * 0.999)] / 1e6,
                latenciesNs[n - 1] / 1e6);
    }
}
