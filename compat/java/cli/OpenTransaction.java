import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer that leaves its transaction open for cli-tools.sh's
 * kafka-transactions tests. Run with Java's source launcher and the jars of .kafka-ref/libs:
 *
 *   java -cp '.kafka-ref/libs/*' OpenTransaction.java BOOTSTRAP TRANSACTIONAL_ID TOPIC
 *       [--committed-first] P...
 *
 * With --committed-first it first commits a transaction of one record "committed-P" on each
 * partition P of TOPIC (printing "committed TOPIC P OFFSET"). Then it begins a transaction, writes one record "open-P" to each partition P of TOPIC, prints
 * "open TOPIC P OFFSET" for each, then "ready", and waits for a command line on stdin:
 * "commit" or "abort" ends the transaction (printing "committed" or "aborted") and exits;
 * end of input exits with the transaction still open (the producer closed without waiting).
 * Every client call is bounded (30 s).
 */
public class OpenTransaction {
    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable e) {
            // Printed here: JDK 17's source launcher fails on its own ("0 > -7") while it
            // trims the stack trace of an exception thrown out of main.
            e.printStackTrace();
            System.exit(1);
        }
    }

    static void run(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[1]);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 300_000);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, args[1]);
        String topic = args[2];
        KafkaProducer<String, String> producer =
                new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        try {
            producer.initTransactions();
            int first = 3;
            if (args[first].equals("--committed-first")) {
                first++;
                producer.beginTransaction();
                for (int i = first; i < args.length; i++) {
                    int partition = Integer.parseInt(args[i]);
                    RecordMetadata m = producer.send(new ProducerRecord<>(topic, partition,
                            null, "committed-" + partition)).get();
                    System.out.println("committed " + topic + " " + partition + " "
                            + m.offset());
                }
                producer.commitTransaction();
            }
            producer.beginTransaction();
            for (int i = first; i < args.length; i++) {
                int partition = Integer.parseInt(args[i]);
                RecordMetadata m = producer.send(new ProducerRecord<>(topic, partition, null,
                        "open-" + partition)).get();
                System.out.println("open " + topic + " " + partition + " " + m.offset());
            }
            System.out.println("ready");
            System.out.flush();
            BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.equals("commit")) {
                    producer.commitTransaction();
                    System.out.println("committed");
                    break;
                } else if (line.equals("abort")) {
                    producer.abortTransaction();
                    System.out.println("aborted");
                    break;
                }
            }
            System.out.flush();
        } finally {
            // A zero timeout: close() would otherwise abort an open transaction first.
            producer.close(Duration.ZERO);
        }
    }
}
