// KafkaJS's admin.alterConfigs (the legacy AlterConfigs API, whole-set semantics) on a BROKER
// resource, then admin.describeConfigs of it, for tests/integration/test_configs_catalog.py.
// argv: bootstrap, broker id, name=value. Prints {error, value, source} of that config after the change.
const { Kafka, ConfigResourceTypes, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, brokerId, setting] = process.argv.slice(2);
  const [name, value] = setting.split("=");
  const admin = new Kafka({ clientId: "broker-config", brokers: [bootstrap], logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  let error = null;
  try {
    await admin.alterConfigs({ validateOnly: false, resources: [
      { type: ConfigResourceTypes.BROKER, name: brokerId, configEntries: [{ name, value }] }] });
  } catch (err) {
    error = err.type || err.name;
  }
  const described = await admin.describeConfigs({ includeSynonyms: false, resources: [
    { type: ConfigResourceTypes.BROKER, name: brokerId, configNames: [name] }] });
  const entry = described.resources[0].configEntries.find((e) => e.configName === name);
  await admin.disconnect();
  console.log(JSON.stringify({ error, value: entry ? entry.configValue : null, source: entry ? entry.configSource : null }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
