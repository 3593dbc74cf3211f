"""``flush_deliveries`` raises a fatal client error as a KafkaException (which the writers turn into a
TopicSourceError), where the client's own flush() raises an object no except clause catches.

The error is real, raised by librdkafka itself (``rd_kafka_test_fatal_error``, its API for testing
this path) in a producer on librdkafka's in-process mock cluster (``test.mock.num.brokers``).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from headwater.spark.producer import flush_deliveries


def _inject_fatal_error(producer: Producer, code: int, reason: bytes) -> None:
    [lib] = Path(confluent_kafka.__file__).parent.parent.glob("confluent_kafka.libs/librdkafka*.so*")
    rdkafka = ctypes.CDLL(str(lib))  # the library the client already loaded
    rdkafka.rd_kafka_test_fatal_error.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]
    # The client object's first field after the Python object header is its rd_kafka_t handle.
    handle = ctypes.c_void_p.from_address(id(producer) + object.__basicsize__).value
    assert rdkafka.rd_kafka_test_fatal_error(handle, code, reason) == 0


def test_a_fatal_error_while_flushing_is_raised_as_a_kafka_exception() -> None:
    producer = Producer({"test.mock.num.brokers": 1, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 50, "log_level": 0})
    delivered: list[KafkaError | None] = []
    for i in range(20):
        producer.produce("events", value=b"%d" % i, on_delivery=lambda err, _msg: delivered.append(err))
    _inject_fatal_error(producer, KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, b"sequence desynchronised")
    with pytest.raises(KafkaException) as raised:
        flush_deliveries(producer, 10)
    error = raised.value.args[0]
    assert error.fatal() and error.code() == KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "sequence desynchronised" in error.str()
    assert None not in delivered  # nothing reported as delivered


def test_flush_deliveries_waits_for_every_answer() -> None:
    producer = Producer({"test.mock.num.brokers": 1, "enable.idempotence": True, "acks": "all", "log_level": 0})
    delivered: list[KafkaError | None] = []
    for i in range(50):
        producer.produce("events", value=b"%d" % i, on_delivery=lambda err, _msg: delivered.append(err))
    assert flush_deliveries(producer, 30) == 0
    assert delivered == [None] * 50
