// kafkajs (2.2.4, pinned in package.json) against the broker at COMPAT_BOOTSTRAP: produce
// and consume through a consumer group, transactions read by read_committed and
// read_uncommitted consumers, and a consume-transform-produce loop committing its offsets
// in the transaction (sendOffsets). Each test uses topics and ids of its own.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { Kafka, logLevel } = require('kafkajs');

const bootstrap = process.env.COMPAT_BOOTSTRAP;
if (!bootstrap) throw new Error('COMPAT_BOOTSTRAP is not set');
const run = `${process.pid}-${Date.now()}`;
const kafka = new Kafka({
  clientId: 'highwater-compat',
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  retry: { retries: 8, initialRetryTime: 200 },
});

async function createTopic(topic, numPartitions) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const created = await admin.createTopics({
      topics: [{ topic, numPartitions, replicationFactor: 1 }],
      waitForLeaders: true,
    });
    assert.equal(created, true, `topic ${topic} created`);
  } finally {
    await admin.disconnect();
  }
}

// Reads `topic` from the beginning with a new group until `count` messages came (or
// `idleMs` passed with nothing new once `count` is reached, to catch extra ones).
async function consumeAll(topic, count, { readUncommitted = false, idleMs = 1500 } = {}) {
  const consumer = kafka.consumer({
    groupId: `read-${topic}-${readUncommitted ? 'uncommitted' : 'committed'}-${run}`,
    readUncommitted,
    maxWaitTimeInMs: 200,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const values = [];
  let last = Date.now();
  await consumer.run({
    eachMessage: async ({ message }) => {
      values.push(message.value.toString());
      last = Date.now();
    },
  });
  const deadline = Date.now() + 30000;
  while (Date.now() < deadline) {
    if (values.length >= count && Date.now() - last > idleMs) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await consumer.disconnect();
  return values;
}

test('produce with keys and consume them all through a consumer group', async () => {
  const topic = `kafkajs-plain-${run}`;
  await createTopic(topic, 3);
  const producer = kafka.producer();
  await producer.connect();
  const messages = Array.from({ length: 100 }, (_, i) => ({ key: `k${i % 7}`, value: `v${i}` }));
  const results = await producer.send({ topic, messages, acks: -1 });
  await producer.disconnect();
  assert.ok(results.every((r) => r.errorCode === 0), JSON.stringify(results));
  const values = await consumeAll(topic, 100);
  assert.deepEqual([...values].sort(), messages.map((m) => m.value).sort());
});

test('aborted transactions reach read_uncommitted consumers only', async () => {
  const topic = `kafkajs-txn-${run}`;
  await createTopic(topic, 2);
  const producer = kafka.producer({
    transactionalId: `kafkajs-txn-${run}`,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  const expected = [];
  for (const [name, count, commit] of [['first', 10, true], ['aborted', 5, false], ['last', 10, true]]) {
    const transaction = await producer.transaction();
    const messages = Array.from({ length: count }, (_, i) => ({ value: `${name}-${i}` }));
    await transaction.send({ topic, messages });
    if (commit) {
      await transaction.commit();
      expected.push(...messages.map((m) => m.value));
    } else {
      await transaction.abort();
    }
  }
  await producer.disconnect();
  const committed = await consumeAll(topic, 20);
  assert.deepEqual([...committed].sort(), [...expected].sort(), 'read_committed');
  const uncommitted = await consumeAll(topic, 25, { readUncommitted: true });
  assert.equal(uncommitted.length, 25, 'read_uncommitted sees the aborted records too');
  assert.equal(uncommitted.filter((v) => v.startsWith('aborted-')).length, 5);
});

test('consume-transform-produce commits its offsets in the transaction', async () => {
  const input = `kafkajs-in-${run}`;
  const output = `kafkajs-out-${run}`;
  const groupId = `kafkajs-etl-${run}`;
  await createTopic(input, 1);
  await createTopic(output, 1);
  const source = kafka.producer();
  await source.connect();
  await source.send({ topic: input, messages: Array.from({ length: 30 }, (_, i) => ({ value: `${i}` })) });
  await source.disconnect();

  const producer = kafka.producer({
    transactionalId: `kafkajs-etl-${run}`,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic: input, fromBeginning: true });
  let copied = 0;
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, heartbeat }) => {
      const transaction = await producer.transaction();
      const messages = batch.messages.map((m) => ({ value: `copy-${m.value.toString()}` }));
      await transaction.send({ topic: output, messages });
      const next = (BigInt(batch.lastOffset()) + 1n).toString();
      await transaction.sendOffsets({
        consumerGroupId: groupId,
        topics: [{ topic: input, partitions: [{ partition: batch.partition, offset: next }] }],
      });
      await transaction.commit();
      copied += messages.length;
      await heartbeat();
    },
  });
  const deadline = Date.now() + 30000;
  while (copied < 30 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await consumer.disconnect();
  await producer.disconnect();
  assert.equal(copied, 30, 'every input record copied');

  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchOffsets({ groupId, topics: [input] });
  await admin.disconnect();
  assert.equal(offsets[0].partitions[0].offset, '30', 'the transaction committed the offsets');
  const values = await consumeAll(output, 30);
  assert.deepEqual(values.sort(), Array.from({ length: 30 }, (_, i) => `copy-${i}`).sort());
});
