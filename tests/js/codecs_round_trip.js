// KafkaJS's side of tests/integration/conformance/test_codecs_acks.py. Reads one JSON object on
// stdin: {broker, records: [{key, value, headers}], combos: [{topic, codec, acks}]}. For each combo
// one producer sends the records to partition 0 of its topic in one send() with that compression
// and acks; then one consumer reads every topic from the beginning. Prints
// {topic: {sent: [offsets the producer reported], records: [{offset, key, value, headers}]}}.
const { Kafka, logLevel } = require("kafkajs");
const { CODECS } = require("./codecs");

const text = (b) => (b === null || b === undefined ? null : b.toString());

async function main() {
  const spec = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const kafka = new Kafka({ clientId: "codecs-acks", brokers: [spec.broker], logLevel: logLevel.NOTHING,
                            retry: { retries: 3 } });
  const out = {};
  const producer = kafka.producer();
  await producer.connect();
  const messages = spec.records.map((r) => ({ partition: 0, key: r.key, value: r.value, headers: r.headers }));
  for (const { topic, codec, acks } of spec.combos) {
    const sent = await producer.send({ topic, acks, compression: CODECS[codec], messages });
    // One RecordMetadata per partition: the base offset, or -1 where acks=0 gets no answer.
    out[topic] = { sent: sent.map((m) => Number(m.baseOffset)), records: [] };
  }
  await producer.disconnect();

  const want = spec.records.length;
  const consumer = kafka.consumer({ groupId: `codecs-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topics: spec.combos.map((c) => c.topic), fromBeginning: true });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out reading: ${JSON.stringify(
      Object.fromEntries(Object.entries(out).map(([t, o]) => [t, o.records.length])))}`)), 30000);
    consumer.run({ eachMessage: async ({ topic, message }) => {
      const headers = {};
      for (const [k, v] of Object.entries(message.headers || {})) headers[k] = text(v);
      out[topic].records.push({ offset: Number(message.offset), key: text(message.key), value: text(message.value),
                                headers });
      if (Object.values(out).every((o) => o.records.length >= want)) {
        clearTimeout(timer);
        resolve();
      }
    } });
  });
  await consumer.disconnect();
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});
