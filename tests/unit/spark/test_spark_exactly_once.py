"""exactlyOnce write options, the names of transactional ids and groups, the commit record, and the
check that Spark delivered a task's whole input. No broker, no Spark session."""

from __future__ import annotations

import pickle
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from headwater.spark import transactional
from headwater.spark.errors import TopicSourceError
from headwater.spark.options import ExactlyOnce, parse_write_options
from headwater.spark.source import TopicWriter
from headwater.spark.transactional import (
    TaskWrite,
    decode_record,
    encode_record,
    is_recorded,
    record_group,
    spark_input_cut,
    stream_task_write,
    transactional_config,
    transactional_id,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"}


def parse(streaming: bool = False, **options: str) -> Any:
    # Spark hands a data source its options with lower-case names.
    return parse_write_options({k.lower(): v for k, v in {**BASE, **options}.items()}, streaming=streaming)


def test_exactly_once_is_off_by_default() -> None:
    assert parse().exactly_once is None
    assert parse(exactlyOnce="false").exactly_once is None


def test_exactly_once_options() -> None:
    opts = parse(exactlyOnce="true", transactionalIdPrefix="orders-etl.v2")
    assert opts.exactly_once == ExactlyOnce(prefix="orders-etl.v2", job_id=None, transaction_timeout_ms=60_000)
    opts = parse(
        exactlyOnce="TRUE", transactionalIdPrefix="p", jobId="2026-11-22", **{"kafka.transaction.timeout.ms": "900000"}
    )
    assert opts.exactly_once == ExactlyOnce(prefix="p", job_id="2026-11-22", transaction_timeout_ms=900_000)
    assert opts.client_config["transaction.timeout.ms"] == "900000"
    assert parse(True, exactlyOnce="true", transactionalIdPrefix="q").exactly_once == ExactlyOnce("q")


@pytest.mark.parametrize(
    ("streaming", "options", "message"),
    [
        (False, {"exactlyOnce": "true"}, "needs the option transactionalIdPrefix"),
        (False, {"transactionalIdPrefix": "p"}, "transactionalIdPrefix is only used with exactlyOnce=true"),
        (False, {"jobId": "j"}, "jobId is only used with exactlyOnce=true"),
        (True, {"exactlyOnce": "true", "transactionalIdPrefix": "p", "jobId": "j"}, "jobId is for batch writes"),
        (False, {"exactlyOnce": "true", "transactionalIdPrefix": "has space"}, "transactionalIdPrefix must be"),
        (False, {"exactlyOnce": "true", "transactionalIdPrefix": "p", "jobId": "a/b"}, "jobId must be"),
        (False, {"exactlyOnce": "true", "transactionalIdPrefix": "x" * 201}, "transactionalIdPrefix must be"),
        (False, {"exactlyOnce": "sometimes"}, "exactlyOnce must be true or false"),
        (False, {"exactlyOnce": "true", "transactionalIdPrefix": "p", "kafka.transaction.timeout.ms": "0"},
         "kafka.transaction.timeout.ms must be at least 1"),
        (False, {"kafka.transactional.id": "mine"}, "option kafka.transactional.id is not supported"),
    ],
)
def test_bad_exactly_once_options(streaming: bool, options: dict[str, str], message: str) -> None:
    with pytest.raises(TopicSourceError, match=message):
        parse(streaming, **options)


def test_transactional_id_and_group_per_spark_partition() -> None:
    assert transactional_id("orders-etl", 0) == "orders-etl-0"
    assert transactional_id("orders-etl", 17) == "orders-etl-17"
    assert record_group("orders-etl", 17) == "orders-etl-17"
    # Distinct partitions never share a name, also for prefixes ending in digits.
    names = {transactional_id("q1", p) for p in range(200)}
    assert len(names) == 200


def test_transactional_producer_config() -> None:
    opts = parse(
        exactlyOnce="true", transactionalIdPrefix="p", flushTimeoutMs="300000", **{"kafka.linger.ms": "20"}
    )
    config = transactional_config(opts, "p-3")
    assert config["transactional.id"] == "p-3"
    assert config["transaction.timeout.ms"] == 60_000
    # librdkafka refuses a message timeout beyond the transaction timeout.
    assert config["message.timeout.ms"] == 60_000
    assert config["enable.idempotence"] is True and config["acks"] == "all"
    assert config["linger.ms"] == "20"
    short = parse(exactlyOnce="true", transactionalIdPrefix="p", flushTimeoutMs="5000")
    assert transactional_config(short, "p-0")["message.timeout.ms"] == 5000


def test_record_round_trip_and_foreign_metadata() -> None:
    write = TaskWrite(partition=3, write_id="0b7c-query", batch_id=41, attempt=2)
    assert decode_record(encode_record(write)) == ("0b7c-query", 41)
    for foreign in (None, "", "not json", "[]", '{"v": 2, "writeId": "x", "batchId": 1}',
                    '{"v": 1, "writeId": 5, "batchId": 1}', '{"v": 1, "writeId": "x", "batchId": true}'):
        assert decode_record(foreign) is None


def test_is_recorded() -> None:
    batch_5 = encode_record(TaskWrite(0, "query-a", 5))
    assert is_recorded([batch_5], TaskWrite(0, "query-a", 5))
    assert is_recorded([batch_5], TaskWrite(0, "query-a", 4))  # an earlier batch committed before it
    assert not is_recorded([batch_5], TaskWrite(0, "query-a", 6))
    # A new checkpoint (new query id) or another job with the same prefix writes again.
    assert not is_recorded([batch_5], TaskWrite(0, "query-b", 5))
    assert not is_recorded([], TaskWrite(0, "query-a", 0))
    assert is_recorded([None, "junk", batch_5], TaskWrite(0, "query-a", 5))


def test_batch_writer_fixes_its_write_id_on_the_driver() -> None:
    random_id = TopicWriter(parse(exactlyOnce="true", transactionalIdPrefix="p"))
    # Every task (and every attempt) unpickles the same writer, so the same id.
    first, second = (pickle.loads(pickle.dumps(random_id)) for _ in range(2))
    assert first._write_id == second._write_id == random_id._write_id
    assert random_id._write_id != TopicWriter(parse(exactlyOnce="true", transactionalIdPrefix="p"))._write_id
    given = TopicWriter(parse(exactlyOnce="true", transactionalIdPrefix="p", jobId="nightly-7"))
    assert given._write_id == "nightly-7"
    assert TopicWriter(parse())._write_id is None


def test_outside_a_spark_task() -> None:
    assert spark_input_cut() is False
    with pytest.raises(TopicSourceError, match="run in Spark tasks only"):
        stream_task_write()


class _Task:
    @staticmethod
    def get() -> object:
        return object()


@pytest.fixture
def worker_connection(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[socket.socket, socket.socket]]:
    """A stand-in for the worker's connection to Spark: our end is what ``infile`` wraps."""
    ours, spark_end = socket.socketpair()
    infile = ours.makefile("rb")
    monkeypatch.setattr(transactional, "TaskContext", _Task)
    monkeypatch.setattr(transactional, "_worker_input", lambda: infile)
    try:
        yield ours, spark_end
    finally:
        infile.close()
        ours.close()
        spark_end.close()


def test_input_complete_while_the_connection_is_open(worker_connection: tuple[socket.socket, socket.socket]) -> None:
    _, spark_end = worker_connection
    assert spark_input_cut() is False  # open, nothing unread: Spark waits for the result
    spark_end.sendall(b"\xff\xff\xff\xfc")  # END_OF_STREAM, not read by the writer yet
    assert spark_input_cut() is False
    assert spark_input_cut() is False  # peeking does not consume it


def test_input_cut_after_close(worker_connection: tuple[socket.socket, socket.socket]) -> None:
    _, spark_end = worker_connection
    spark_end.close()
    assert spark_input_cut() is True


def test_input_cut_refuses_to_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transactional, "TaskContext", _Task)
    monkeypatch.setattr(transactional, "_worker_input", lambda: None)
    with pytest.raises(TopicSourceError, match="refusing to commit"):
        spark_input_cut()
