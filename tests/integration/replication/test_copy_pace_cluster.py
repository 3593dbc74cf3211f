"""reassignment.copy.max.cpu.pressure on a real cluster: the config as an operator sets it, the
metrics that show it, and a move that completes with every record while the copy may pause.

What comes from Kafka: a dynamic broker config set at the cluster default reaches every broker
(``DynamicBrokerConfig``), a value below a config's range is refused with INVALID_CONFIG and the
message Kafka's ``ConfigDef.Range`` writes ("Value must be at least"), and a move ends on its
target replicas with the leader's records (KIP-455). The pause is headwater's own; the test holds
it to its documented contract (docs/replication.md, "The copy's pace under CPU pressure"): the
copy still finishes (the pause has a ceiling), and once a copy has run 100 ms the broker being
added reports the CPU pressure it judged, or -1 where Linux has no PSI.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from cluster_support import LocalCluster, run_cli, wait_for
from confluent_kafka import Consumer, TopicPartition
from metrics_support import VALUE_BYTES, load, scrape

from headwater.cli import main as headwater_cli

KEY = "reassignment.copy.max.cpu.pressure"
PSI = Path("/proc/pressure/cpu")


def configs(cluster: LocalCluster, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(headwater_cli, ["configs", "--bootstrap-server", cluster.bootstrap, "--alter",
                                                "--entity-type", "brokers", "--entity-default", *args],
                                catch_exceptions=False)
    return result.exit_code, result.output


def pace(cluster: LocalCluster, broker: int, name: str) -> float:
    values = list(scrape(cluster, broker).get(f"headwater_reassignment_copy_{name}", {}).values())
    return values[0] if values else float("nan")


def count(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copy-pace-check", "enable.auto.commit": False,
                         "log_level": 3})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.close()
    return high - low


def test_a_move_with_the_copy_paced_by_cpu_pressure(metered_cluster: LocalCluster) -> None:
    c, topic = metered_cluster, "paced"
    assert all(pace(c, b, "max_cpu_pressure") == 1.0 for b in c.brokers)  # the default: never pause

    code, out = configs(c, "--add-config", f"{KEY}=-0.5")
    assert code != 0 and "Value must be at least 0.0" in out, out
    code, out = configs(c, "--add-config", f"{KEY}=0.0")  # pause whenever anything waits for a CPU
    assert code == 0, out
    wait_for(lambda: all(pace(c, b, "max_cpu_pressure") == 0.0 for b in c.brokers), 30,
             "every broker to take the cluster-wide value")

    run_cli("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", topic, "--replica-assignment", "1:2:3")
    c.wait_full_isr([topic], 1)
    records = 2_400  # ~24 MiB: at the 20 MB/s a static throttle allows, well over one 100 ms window
    load(c.bootstrap, topic, records * VALUE_BYTES, acks="all")
    # A static rate as well, so the copy lasts long enough to be judged even where nothing waits.
    code, out = configs(c, "--add-config", "reassignment.throttled.rate=20000000")
    assert code == 0, out
    plan = c.data_dir / "plan-paced.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2, 4]}]}))
    out = run_cli("reassign", "--bootstrap-server", c.bootstrap, "--execute", "--reassignment-json-file", str(plan))
    assert f"Successfully started partition reassignment for {topic}-0" in out, out

    def done() -> bool:
        out = run_cli("reassign", "--bootstrap-server", c.bootstrap, "--verify", "--reassignment-json-file", str(plan))
        return f"Reassignment of partition {topic}-0 is completed." in out

    wait_for(done, 120, "the paced move to complete", interval_s=1.0)
    assert c.describe(topic)[0].replicas == (1, 2, 4)
    assert count(c.bootstrap, topic) == records
    if PSI.exists():
        wait_for(lambda: pace(c, 4, "cpu_pressure") >= 0, 10, "broker 4 to report the pressure it judged")
        assert pace(c, 4, "cpu_pressure") <= 1.0
    else:
        assert pace(c, 4, "cpu_pressure") == -1
    assert 0 <= pace(c, 4, "pause_ms") <= 50

    code, out = configs(c, "--delete-config", f"{KEY},reassignment.throttled.rate")
    assert code == 0, out
    wait_for(lambda: all(pace(c, b, "max_cpu_pressure") == 1.0 for b in c.brokers), 30, "the default back")
