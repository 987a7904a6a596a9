package highwater.compat;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.TreeSet;

/**
 * Reads which compression codecs the broker stored for a partition, with a raw Fetch v4
 * (supported by Kafka 4.x and highwater). A consumer cannot see a batch's codec, so this is
 * how the tests check that a compressed batch was stored as sent, not recompressed or
 * expanded. Assumes the bootstrap broker leads the partition (single-node brokers).
 */
final class StoredCodecs {
    private static final String[] NAMES = {"none", "gzip", "snappy", "lz4", "zstd"};
    private static final int MAX_BYTES = 64 * 1024 * 1024;

    private StoredCodecs() {}

    /** The distinct codec names of all batches from offset 0 to the high watermark. */
    static Set<String> of(String topic, int partition) throws IOException {
        String[] hostPort = Compat.bootstrap().split(":");
        Set<String> codecs = new TreeSet<>();
        try (Socket socket = new Socket(hostPort[0], Integer.parseInt(hostPort[1]))) {
            socket.setSoTimeout(30_000);
            DataOutputStream out = new DataOutputStream(socket.getOutputStream());
            DataInputStream in = new DataInputStream(socket.getInputStream());
            long offset = 0;
            for (int correlationId = 1; ; correlationId++) {
                out.write(fetchRequest(correlationId, topic, partition, offset));
                out.flush();
                byte[] body = new byte[in.readInt()];
                in.readFully(body);
                ByteBuffer r = ByteBuffer.wrap(body);
                if (r.getInt() != correlationId) {
                    throw new IOException("correlation id mismatch");
                }
                r.getInt(); // throttle_time_ms
                r.getInt(); // one topic
                short nameLength = r.getShort();
                r.position(r.position() + nameLength); // its name
                r.getInt(); // one partition
                r.getInt(); // partition index
                short error = r.getShort();
                long highWatermark = r.getLong();
                r.getLong(); // last_stable_offset
                int aborted = r.getInt();
                r.position(r.position() + Math.max(aborted, 0) * 16);
                int size = r.getInt();
                if (error != 0) {
                    throw new IOException("Fetch error " + error + " at offset " + offset);
                }
                if (offset >= highWatermark) {
                    return codecs;
                }
                long next = readBatches(r, Math.max(size, 0), codecs);
                if (next < 0) {
                    throw new IOException("no complete batch at offset " + offset);
                }
                offset = next;
            }
        }
    }

    /** Adds each complete batch's codec; returns the offset after the last one, or -1. */
    private static long readBatches(ByteBuffer r, int size, Set<String> codecs) {
        int start = r.position();
        int end = start + size;
        long next = -1;
        int pos = start;
        while (pos + 61 <= end) {
            long baseOffset = r.getLong(pos);
            int length = r.getInt(pos + 8);
            if (pos + 12 + length > end) {
                break; // cut off by the size limit
            }
            short attributes = r.getShort(pos + 21);
            int lastOffsetDelta = r.getInt(pos + 23);
            int codec = attributes & 7;
            codecs.add(codec < NAMES.length ? NAMES[codec] : String.valueOf(codec));
            next = baseOffset + lastOffsetDelta + 1;
            pos += 12 + length;
        }
        return next;
    }

    private static byte[] fetchRequest(int correlationId, String topic, int partition,
            long offset) throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        DataOutputStream d = new DataOutputStream(buf);
        d.writeShort(1); // Fetch
        d.writeShort(4); // version
        d.writeInt(correlationId);
        writeString(d, "compat-stored-codecs");
        d.writeInt(-1); // replica_id
        d.writeInt(100); // max_wait_ms
        d.writeInt(1); // min_bytes
        d.writeInt(MAX_BYTES);
        d.writeByte(0); // read_uncommitted
        d.writeInt(1);
        writeString(d, topic);
        d.writeInt(1);
        d.writeInt(partition);
        d.writeLong(offset);
        d.writeInt(MAX_BYTES);
        byte[] request = buf.toByteArray();
        ByteBuffer framed = ByteBuffer.allocate(4 + request.length);
        framed.putInt(request.length).put(request);
        return framed.array();
    }

    private static void writeString(DataOutputStream d, String s) throws IOException {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        d.writeShort(b.length);
        d.write(b);
    }
}
