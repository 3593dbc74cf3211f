// KafkaJS's own Produce and ListOffsets requests aimed at chosen brokers, for
// tests/integration/conformance/test_not_leader.py. KafkaJS has no public call that sends to one
// broker, so this reaches the Cluster its producer and admin use (the client's private
// createCluster symbol) and calls the Broker.produce / Broker.listOffsets that the producer and
// admin call, on the Broker the Cluster holds for each node id: KafkaJS encodes the requests at the
// versions it negotiated and turns each partition error into its KafkaJSProtocolError.
// argv: bootstrap, topic, node ids. Prints {nodeId: {produce: code, listOffsets: code}}, 0 for no error.
const { Kafka, logLevel } = require("kafkajs");

const codeOf = async (call) => {
  try {
    await call();
    return 0;
  } catch (err) {
    if (err.name !== "KafkaJSProtocolError") throw err;
    return err.code;
  }
};

async function main() {
  const [bootstrap, topic, ...nodeIds] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "not-leader", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING });
  const createCluster = Object.getOwnPropertySymbols(kafka).find((s) => s.description === "private:Kafka:createCluster");
  const cluster = kafka[createCluster]({ allowAutoTopicCreation: false });
  await cluster.connect();
  await cluster.addTargetTopic(topic); // loads the topic's metadata, and with it every broker
  const out = {};
  for (const nodeId of nodeIds) {
    const broker = await cluster.findBroker({ nodeId });
    out[nodeId] = {
      produce: await codeOf(() => broker.produce({ acks: -1, timeout: 5000, topicData: [
        { topic, partitions: [{ partition: 0, messages: [{ key: "k", value: `to ${nodeId}` }] }] }] })),
      listOffsets: await codeOf(() => broker.listOffsets({ replicaId: -1, isolationLevel: 0, topics: [
        { topic, partitions: [{ partition: 0, timestamp: -1 }] }] })),
    };
  }
  await cluster.disconnect();
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(`${err.name}: ${err.message}`);
  process.exit(1);
});
