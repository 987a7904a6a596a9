// kafkajs's round trip over a secured listener (compat/tls/run.sh): produces the lines
// one, two, three to partition 0 of --topic (created on first use) and reads them back from
// the beginning, printing each; exits 1 on an error or after 30 s. TLS with --ca (and
// --cert/--key for a client certificate); SASL with --mechanism and --user/--password, or
// OAUTHBEARER with the token in --token-file.
'use strict';
const fs = require('fs');
const path = require('path');
const { Kafka, logLevel } = require(path.join(__dirname, '../../node/node_modules/kafkajs'));

function flags() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  return out;
}

async function main() {
  const a = flags();
  const ssl = { ca: [fs.readFileSync(a.ca, 'utf8')] };
  if (a.cert) {
    ssl.cert = fs.readFileSync(a.cert, 'utf8');
    ssl.key = fs.readFileSync(a.key, 'utf8');
  }
  let sasl;
  if (a.mechanism === 'OAUTHBEARER') {
    const value = fs.readFileSync(a['token-file'], 'ascii').trim();
    sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value }) };
  } else if (a.mechanism) {
    sasl = { mechanism: a.mechanism.toLowerCase(), username: a.user, password: a.password };
  }
  // kafkajs re-authenticates before a request once the session has less than this left
  // (10 s by default); the OAUTHBEARER sessions here last 5 s, and Kafka refuses more than
  // one re-authentication a second.
  const kafka = new Kafka({ clientId: 'compat-tls-kafkajs', brokers: [a.bootstrap], ssl, sasl,
    reauthenticationThreshold: 1000, logLevel: logLevel.WARN });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: a.topic, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic: a.topic, acks: -1,
    messages: ['one', 'two', 'three'].map((value) => ({ value, partition: 0 })) });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `compat-tls-${a.topic}` });
  await consumer.connect();
  await consumer.subscribe({ topic: a.topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${got.length} of 3 in 30 s`)), 30000);
    consumer.run({ eachMessage: async ({ message }) => {
      got.push(message.value.toString());
      if (got.length === 3) { clearTimeout(timer); resolve(); }
    } }).catch(reject);
  });
  await consumer.disconnect();
  console.log(got.join('\n'));
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
