// KafkaJS's admin.fetchTopicOffsetsByTimestamp for tests/integration/conformance/test_offsets_for_times.py.
// argv: broker, topic, then timestamps. Prints [offset of partition 0 for each timestamp].
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [broker, topic, ...timestamps] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "offsets-by-time", brokers: [broker], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const out = [];
  for (const ts of timestamps) {
    const found = await admin.fetchTopicOffsetsByTimestamp(topic, Number(ts));
    out.push(Number(found.find((p) => p.partition === 0).offset));
  }
  await admin.disconnect();
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});
