// One fresh KafkaJS producer, bootstrapped at argv[2], sends one message to the new topic argv[3]
// (auto-created by the broker) and prints {"ms": <time to the acknowledgement>} or exits 1.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [broker, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "headwater-conformance", brokers: [broker], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  const start = Date.now();
  await producer.connect();
  await producer.send({ topic, messages: [{ value: "v" }] });
  const ms = Date.now() - start;
  await producer.disconnect();
  console.log(JSON.stringify({ ms }));
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});
