"""IncrementalAlterConfigs operations and dynamic broker updates, as Kafka 3.9's broker applies them.

Expected answers: ``ConfigAdminManager.preprocess`` (duplicate keys and null values are
INVALID_REQUEST), ``ConfigAdminManager.prepareIncrementalConfigs`` (APPEND / SUBTRACT only on LIST
configs, starting from the config's default when unset; DELETE drops the key, known or not),
``DynamicBrokerConfig.validateConfigs`` (read-only configs and per-broker configs at the cluster
default are INVALID_CONFIG).
"""

from __future__ import annotations

import pytest

from headwater.metadata.configs import apply_incremental, effective_topic_config, validate_broker_update
from headwater.protocol.config_resources import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from headwater.protocol.errors import ErrorCode, KafkaError


def code_of(fn: object, *args: object, **kw: object) -> tuple[ErrorCode, str | None]:
    with pytest.raises(KafkaError) as exc:
        fn(*args, **kw)  # type: ignore[operator]
    return exc.value.code, exc.value.message


def test_duplicate_keys_and_null_values_are_invalid_requests() -> None:
    assert code_of(apply_incremental, {}, [("retention.ms", OP_SET, "1"), ("retention.ms", OP_DELETE, None)]) == (
        ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    assert code_of(apply_incremental, {}, [("retention.ms", OP_SET, None), ("segment.ms", OP_APPEND, None)]) == (
        ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms, segment.ms")


def test_append_and_subtract_work_on_lists_only_and_start_from_the_default() -> None:
    configs = {"retention.ms": "5"}
    out = apply_incremental(configs, [("cleanup.policy", OP_APPEND, "compact")])
    assert out == {"retention.ms": "5", "cleanup.policy": "delete,compact"}  # from the default "delete"
    assert configs == {"retention.ms": "5"}  # the input is not changed
    assert apply_incremental(out, [("cleanup.policy", OP_SUBTRACT, "delete")])["cleanup.policy"] == "compact"
    assert code_of(apply_incremental, {}, [("retention.ms", OP_APPEND, "1")]) == (
        ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: retention.ms")
    assert code_of(apply_incremental, {}, [("retention.ms", 7, "1")])[0] == ErrorCode.INVALID_REQUEST


def test_delete_drops_any_key() -> None:
    assert apply_incremental({"retention.ms": "5"}, [("retention.ms", OP_DELETE, None), ("no.such", OP_DELETE, None)]) == {}


def test_dynamic_broker_updates() -> None:
    validate_broker_update({"log.retention.ms": "1000", "reassignment.throttled.rate": "100"}, per_broker=False)
    code, message = code_of(validate_broker_update, {"broker.id": "2"}, per_broker=True)
    assert (code, message) == (ErrorCode.INVALID_CONFIG, "Cannot update these configs dynamically: Set(broker.id)")
    code, message = code_of(validate_broker_update, {"listeners": "PLAINTEXT://a:1"}, per_broker=False)
    assert code == ErrorCode.INVALID_CONFIG and message is not None and "broker id must be specified" in message
    assert code_of(validate_broker_update, {"reassignment.max.concurrent.moves.per.broker": "0"}, per_broker=False) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value 0 for configuration reassignment.max.concurrent.moves.per.broker: Value must be at least 1")


def test_a_topic_follows_the_dynamic_broker_value_of_its_synonym() -> None:
    """DynamicLogConfig: log.retention.ms set on this broker beats the default entity and the static file."""
    static = {"log.retention.hours": "1"}
    assert effective_topic_config({}, static)["retention.ms"][0] == "3600000"
    value, source = effective_topic_config({}, static, {"log.retention.ms": "5000"}, {"log.retention.ms": "7000"})["retention.ms"]
    assert (value, source.name) == ("5000", "DYNAMIC_BROKER_CONFIG")
    value, source = effective_topic_config({}, static, {}, {"log.retention.ms": "7000"})["retention.ms"]
    assert (value, source.name) == ("7000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    value, source = effective_topic_config({"retention.ms": "9"}, static, {"log.retention.ms": "5000"})["retention.ms"]
    assert (value, source.name) == ("9", "DYNAMIC_TOPIC_CONFIG")
