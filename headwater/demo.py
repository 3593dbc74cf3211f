"""``headwater demo``: one broker, one topic, a real Kafka client producing and consuming.

Everything the demo does goes through the Kafka protocol with kafka-python, exactly as an
application would; the broker is a separate process that the demo starts and stops by PID.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from rich.console import Console
from rich.table import Table

from headwater.admin.local import BrokerProcess, free_port

TOPIC = "demo-events"
PARTITIONS = 3


def _event_numbers(pairs: list[bytes]) -> list[int]:
    return [int(kv.split(b"event ")[1].split(b":")[0]) for kv in pairs]


def run_demo(data_dir: Path | None, messages: int) -> int:
    console = Console(highlight=False)
    own_dir = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="headwater-demo-")) if data_dir is None else data_dir
    broker = BrokerProcess(broker_id=1, port=free_port(), data_dir=root)
    console.rule("[bold]headwater demo")
    console.print(f"1. Starting a broker (id 1) on {broker.bootstrap}, data in {root}")
    try:
        t0 = time.monotonic()
        broker.start()
        console.print(f"   ready in {time.monotonic() - t0:.2f} s (pid {broker.proc.pid if broker.proc else '?'})")

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="headwater-demo")
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        console.print(f"2. Created topic [bold]{TOPIC}[/] with {PARTITIONS} partitions through CreateTopics")

        sent_digest = hashlib.sha256()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                                 compression_type="gzip", client_id="headwater-demo")
        t0 = time.monotonic()
        futures = []
        for i in range(messages):
            key = f"user-{i % 100}".encode()
            value = f"event {i}: clicked button {i % 7}".encode()
            sent_digest.update(key + value)
            futures.append(producer.send(TOPIC, key=key, value=value))
        producer.flush()
        acked = [f.get(timeout=30) for f in futures]
        produce_s = time.monotonic() - t0
        producer.close()
        per_partition: dict[int, int] = {}
        for md in acked:
            per_partition[md.partition] = per_partition.get(md.partition, 0) + 1
        console.print(f"3. Produced {messages:,} keyed messages (gzip, acks=all) in {produce_s:.2f} s "
                      f"= {messages / produce_s:,.0f} msg/s; every one acknowledged with an offset")

        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                 client_id="headwater-demo", consumer_timeout_ms=10000)
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        got = 0
        by_partition: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        t0 = time.monotonic()
        for record in consumer:
            by_partition[record.partition].append(record.key + record.value)
            got += 1
            if got == messages:
                break
        consume_s = time.monotonic() - t0
        consumer.close()
        console.print(f"4. Consumed {got:,} messages back from offset 0 with assign() in {consume_s:.2f} s")

        table = Table(title=f"topic {TOPIC}")
        table.add_column("partition", justify="right")
        table.add_column("messages acknowledged", justify="right")
        table.add_column("log end offset", justify="right")
        table.add_column("messages read", justify="right")
        for p in range(PARTITIONS):
            table.add_row(str(p), f"{per_partition.get(p, 0):,}", f"{end[tps[p]]:,}", f"{len(by_partition[p]):,}")
        console.print(table)

        # Same key -> same partition, and within a partition the order is the produce order: so
        # the multiset of (key, value) pairs must match what was sent.
        recv_digest = hashlib.sha256()
        ordered = sorted((kv for lst in by_partition.values() for kv in lst), key=lambda kv: _event_numbers([kv])[0])
        for kv in ordered:
            recv_digest.update(kv)
        in_order = all(_event_numbers(lst) == sorted(_event_numbers(lst)) for lst in by_partition.values())
        ok = got == messages and recv_digest.digest() == sent_digest.digest() and in_order
        console.print(f"5. Everything that was acknowledged was read back intact and in order: [bold]{'yes' if ok else 'NO'}[/]")
        admin.close()

        broker.stop()
        broker.start()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, client_id="headwater-demo")
        after = consumer.end_offsets(tps)
        consumer.close()
        same = after == end
        ok = ok and same
        console.print(f"6. Restarted the broker on the same data: log end offsets {'unchanged' if same else 'CHANGED'} "
                      f"({', '.join(str(after[tp]) for tp in tps)})")
    except Exception as exc:
        console.print(f"[red]demo failed: {exc}[/]")
        console.print(broker.log_tail())
        ok = False
    finally:
        code = broker.stop()
        console.print(f"7. Broker stopped with SIGTERM (exit code {code}); logs flushed and checkpointed")
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    console.rule("[bold green]demo passed" if ok else "[bold red]demo failed")
    return 0 if ok else 1
