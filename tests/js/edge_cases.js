// KafkaJS against one broker: the edge cases tests/integration/conformance/test_client_edge_cases.py
// checks with every client library. argv: broker, a topic with max.message.bytes=10000, a topic
// for records, a topic for offsets after DeleteRecords. Prints one JSON object of what it saw, with
// Kafka's error codes where a request failed.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [broker, limited, records, trimmed] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "edge-cases", brokers: [broker], logLevel: logLevel.NOTHING,
                            retry: { retries: 2 } });
  const out = {};
  const producer = kafka.producer();
  await producer.connect();

  // Max message size: just under the topic's max.message.bytes is accepted, just over refused.
  const send = async (bytes) => {
    try {
      await producer.send({ topic: limited, acks: -1, messages: [{ value: Buffer.alloc(bytes, 120) }] });
      return 0;
    } catch (err) {
      return (err.cause && err.cause.code) || err.code || err.name;
    }
  };
  out.under = await send(9000);
  out.over = await send(10100);

  // Keys, values and headers: null and empty are different things and must come back as sent.
  await producer.send({ topic: records, acks: -1, messages: [
    { key: null, value: "v-null-key" },
    { key: "", value: "v-empty-key" },
    { key: "k-null-value", value: null },
    { key: "k-empty-value", value: "" },
    { key: "k-headers", value: "v", headers: { a: "1", b: "" } },
  ] });
  const consumer = kafka.consumer({ groupId: `edge-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic: records, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out reading records")), 30000);
    consumer.run({ eachMessage: async ({ message }) => {
      const headers = {};
      for (const [k, v] of Object.entries(message.headers || {})) headers[k] = v === null ? null : v.toString();
      seen.push({ key: message.key === null ? null : message.key.toString(),
                  value: message.value === null ? null : message.value.toString(), headers });
      if (seen.length === 5) { clearTimeout(timer); resolve(); }
    } });
  });
  await consumer.disconnect();
  out.records = seen;

  // Earliest and latest offsets after DeleteRecords moved the log start.
  const admin = kafka.admin();
  await admin.connect();
  await producer.send({ topic: trimmed, acks: -1, messages: Array.from({ length: 10 }, (_, i) => ({ value: `r${i}` })) });
  await admin.fetchTopicMetadata({ topics: [trimmed] }); // deleteTopicRecords needs it loaded
  await admin.deleteTopicRecords({ topic: trimmed, partitions: [{ partition: 0, offset: "4" }] });
  const offsets = await admin.fetchTopicOffsets(trimmed);
  out.low = Number(offsets[0].low);
  out.high = Number(offsets[0].high);
  const byTime = await admin.fetchTopicOffsetsByTimestamp(trimmed, Date.now() + 60000);
  out.after_last = Number(byTime[0].offset);

  // An illegal topic name and a topic that does not exist.
  try {
    await admin.createTopics({ topics: [{ topic: "bad name!" }] });
    out.bad_name = 0;
  } catch (err) {
    out.bad_name = (err.errors && err.errors[0] && err.errors[0].code) || err.code || err.name;
  }
  try {
    await admin.fetchTopicMetadata({ topics: [`missing-${Date.now()}`] });
    out.missing = 0;
  } catch (err) {
    out.missing = err.code || err.name;
  }
  await admin.disconnect();
  await producer.disconnect();
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});
