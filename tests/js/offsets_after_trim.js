// KafkaJS's side of tests/integration/conformance/test_offsets_after_trim.py. Reads one JSON object on
// stdin: {broker, trimmed, compacted, deleteBefore}. Deletes the trimmed topic's records before
// deleteBefore (admin.deleteTopicRecords), then for both topics: the earliest and latest offsets
// (admin.fetchTopicOffsets: ListOffsets -2 and -1), what a new group reads from the beginning
// (fromBeginning: true, up to the latest offset), and what a new group that starts at the end
// (fromBeginning: false) reads once it has fetched and one record (key and value "new") is
// appended to each topic.
// Prints {low, high, earliest, latest}, each keyed by topic; records as [offset, key, value].
const { Kafka, logLevel } = require("kafkajs");

const text = (b) => (b === null || b === undefined ? null : b.toString());

function readUntil(consumer, done, what) {
  const seen = {};
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out reading ${what}: ${JSON.stringify(seen)}`)), 30000);
    consumer.run({ eachMessage: async ({ topic, message }) => {
      (seen[topic] = seen[topic] || []).push([Number(message.offset), text(message.key), text(message.value)]);
      if (done(seen)) {
        clearTimeout(timer);
        resolve(seen);
      }
    } }).catch(reject);
  });
}

async function main() {
  const spec = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const topics = [spec.trimmed, spec.compacted];
  const kafka = new Kafka({ clientId: "offsets-after-trim", brokers: [spec.broker], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.fetchTopicMetadata({ topics }); // deleteTopicRecords needs the topic loaded
  await admin.deleteTopicRecords({ topic: spec.trimmed, partitions: [{ partition: 0, offset: String(spec.deleteBefore) }] });
  const out = { low: {}, high: {}, earliest: {}, latest: {} };
  for (const topic of topics) {
    const [p0] = (await admin.fetchTopicOffsets(topic)).filter((p) => p.partition === 0);
    out.low[topic] = Number(p0.low);
    out.high[topic] = Number(p0.high);
  }
  await admin.disconnect();

  const earliest = kafka.consumer({ groupId: `earliest-${Date.now()}`, maxWaitTimeInMs: 100 });
  await earliest.connect();
  await earliest.subscribe({ topics, fromBeginning: true });
  out.earliest = await readUntil(earliest, (seen) => topics.every((t) => {
    const recs = seen[t] || [];
    return recs.length > 0 && recs[recs.length - 1][0] >= out.high[t] - 1;
  }), "from the beginning");
  await earliest.disconnect();

  const producer = kafka.producer();
  await producer.connect();
  const latest = kafka.consumer({ groupId: `latest-${Date.now()}`, maxWaitTimeInMs: 100 });
  await latest.connect();
  await latest.subscribe({ topics, fromBeginning: false });
  // A completed fetch means the group's starting offsets were resolved: only then append.
  let appended = null;
  latest.on(latest.events.FETCH, () => {
    if (appended === null) {
      appended = Promise.all(topics.map((topic) => producer.send({ topic, acks: -1,
                                                                    messages: [{ partition: 0, key: "new", value: "new" }] })));
    }
  });
  out.latest = await readUntil(latest, (seen) => topics.every((t) => (seen[t] || []).length > 0), "from the end");
  await appended;
  await latest.disconnect();
  await producer.disconnect();
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});
