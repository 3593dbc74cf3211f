"""kcat 1.7.1 (Debian, librdkafka 2.0.2) against a real broker process.

kcat has no command to create a topic, so its broker has ``auto.create.topics.enable=true`` and
``num.partitions=3``: the first produce creates a 3-partition topic, which ``kcat -L`` must then show.
For each of acks=all / acks=1 and none / gzip / snappy / lz4 / zstd, 100,000 keyed 100-byte
messages go in through ``kcat -P -K:`` and come back through ``kcat -C -o beginning -e`` (assigned
partitions, no group) with ``-f '%p %o %k %s %T'``. kcat cannot set per-message timestamps, so the
check is that librdkafka's CreateTime timestamps lie inside the produce window and never go back
within a partition. ListOffsets goes through ``kcat -Q`` (earliest -2, latest -1, and timestamps).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hw_support import Consumed, Workload, check_consumed, expected_offset_for_time, timestamp_probes

from headwater.admin.local import BrokerProcess, free_port

KCAT = "/usr/bin/kcat"
N_MESSAGES = 100_000
PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = {"all": ["-X", "acks=all"], "1": ["-X", "request.required.acks=1"]}
COMBOS = [(acks, codec) for acks in ACKS for codec in CODECS]
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def kcat_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(1, free_port(), tmp_path_factory.mktemp("kcat-broker"),
                      props={"auto.create.topics.enable": "true", "num.partitions": str(PARTITIONS)})
    try:
        b.start()
        yield b
    finally:
        b.stop()


def kcat(broker: BrokerProcess, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run([KCAT, "-b", broker.bootstrap, *args], input=stdin, capture_output=True, text=True,
                            timeout=TIMEOUT_S)
    assert result.returncode == 0, f"kcat {' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]}"
    return result.stdout


def metadata(broker: BrokerProcess, topic: str | None = None) -> dict:
    return json.loads(kcat(broker, "-L", "-J", *(["-t", topic] if topic else [])))


def test_metadata_and_auto_created_topic(kcat_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    md = metadata(kcat_broker)
    assert md["controllerid"] == 1
    assert md["brokers"] == [{"id": 1, "name": kcat_broker.bootstrap}]
    topic = topic_name()
    kcat(kcat_broker, "-P", "-t", topic, "-K:", stdin="a:1\nb:2\n")
    md = metadata(kcat_broker, topic)
    (t,) = md["topics"]
    assert t["topic"] == topic and "error" not in t
    assert [p["partition"] for p in t["partitions"]] == list(range(PARTITIONS))
    for p in t["partitions"]:
        assert p["leader"] == 1 and p["replicas"] == [{"id": 1}] and p["isrs"] == [{"id": 1}]
    # The whole listing has it too.
    assert topic in {t["topic"] for t in metadata(kcat_broker)["topics"]}


def query_offsets(broker: BrokerProcess, topic: str, ts: int) -> dict[int, int]:
    args: list[str] = ["-Q", "-J"]
    for p in range(PARTITIONS):
        args += ["-t", f"{topic}:{p}:{ts}"]
    out = json.loads(kcat(broker, *args))[topic]
    return {int(k): v["offset"] for k, v in out.items() if k != "topic"}


@pytest.mark.parametrize(("acks", "codec"), COMBOS)
def test_produce_consume_list_offsets(kcat_broker: BrokerProcess, topic_name: Callable[..., str], acks: str,
                                      codec: str, tmp_path: Path) -> None:
    topic = topic_name()
    workload = Workload.starting_now(N_MESSAGES)
    started = int(time.time() * 1000)
    kcat(kcat_broker, "-P", "-t", topic, "-K:", "-z", codec, *ACKS[acks], "-X", "linger.ms=5",
         stdin=workload.kcat_lines())
    finished = int(time.time() * 1000)
    (t,) = metadata(kcat_broker, topic)["topics"]
    assert len(t["partitions"]) == PARTITIONS

    out = kcat(kcat_broker, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%p %o %k %s %T\n")
    consumed = []
    for line in out.splitlines():
        p, o, k, v, ts = line.split(" ")
        consumed.append(Consumed(int(p), int(o), k.encode(), v.encode(), int(ts)))
    assert len(consumed) == N_MESSAGES
    per_partition = check_consumed(workload, consumed, PARTITIONS, client_timestamps=False,
                                   timestamp_window=(started, finished))

    assert query_offsets(kcat_broker, topic, -2) == {p: 0 for p in range(PARTITIONS)}
    assert query_offsets(kcat_broker, topic, -1) == {p: len(per_partition[p]) for p in range(PARTITIONS)}
    probes = sorted({ts for recs in per_partition.values() for ts in timestamp_probes(recs)})
    for ts in probes:
        expected = {p: expected_offset_for_time(per_partition[p], ts) for p in range(PARTITIONS)}
        assert query_offsets(kcat_broker, topic, ts) == expected, f"offsets for timestamp {ts}"
