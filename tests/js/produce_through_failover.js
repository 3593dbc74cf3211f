// One idempotent KafkaJS producer for tests/integration/conformance/test_not_leader.py: sends
// `count` records `kafkajs-<i>`, one send() at a time with acks=-1 to partition 0 of `topic`, a pause
// of `pauseMs` between them. Prints "started" once the first is acknowledged (the test then stops
// the partition's leader), and at the end {"offsets": [offset of each record], "errors": [...]}.
// argv: bootstrap (comma-separated), topic, count, pauseMs.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, count, pauseMs] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "through-failover", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING,
                            retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 1000 } });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const out = { offsets: [], errors: [] };
  for (let i = 0; i < Number(count); i++) {
    try {
      const [meta] = await producer.send({ topic, acks: -1, messages: [{ partition: 0, value: `kafkajs-${i}` }] });
      out.offsets.push(Number(meta.baseOffset));
    } catch (err) {
      out.errors.push(`${i}: ${err.name}: ${err.message}`);
    }
    if (i === 0) console.log("started");
    await new Promise((resolve) => setTimeout(resolve, Number(pauseMs)));
  }
  await producer.disconnect();
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});
