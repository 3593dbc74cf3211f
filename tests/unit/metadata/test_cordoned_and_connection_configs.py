"""KIP-1066's cordoned.log.dirs and the connection-limit configs as KafkaConfig checks them.

Expected behaviour:
- ``AbstractKafkaConfig.cordonedLogDirs`` (apache/kafka trunk, KIP-1066, Kafka 4.3): ``*`` anywhere in the
  list cordons every log dir; otherwise the entries are the cordoned dirs.
- ``DynamicLogConfig.validateCordonedLogDirs`` (apache/kafka trunk): every entry must be an entry of
  ``log.dirs``, else ``ConfigException(cordoned.log.dirs, <the list>, "Invalid entries in cordoned.log.dirs:
  [<bad>]. All cordoned log dirs must be entries of log.dirs or log.dir.")``.
- ``DynamicThreadPool.validateReconfiguration``, ``LogCleaner.validateReconfiguration`` (3.9): a thread count
  changed to under half or over double the current one (log cleaner threads: or under 1) is refused, and
  ``DynamicBrokerConfig.processReconfiguration`` reports it as "Invalid dynamic configuration".
- ``KafkaConfig`` 3.9 (``maxConnectionsPerIpOverrides`` and ``validateValues``) with
  ``Csv.parseCsvMap`` (server-common, 3.9): the overrides split at the last ``:``; a pair without one fails
  in ``String.substring``; a count that is not an int fails in ``toInt``; hosts must match
  ``Utils.VALID_HOST_CHARACTERS``; ``max.connections.per.ip=0`` needs overrides.
"""

from __future__ import annotations

import pytest

from headwater.metadata import zk
from headwater.metadata.configs import (
    check_broker_configs,
    check_reconfiguration,
    connection_limits,
    cordoned_log_dirs,
)
from headwater.protocol.errors import ErrorCode, KafkaError

DIRS = ["/data/d1", "/data/d2"]


@pytest.mark.parametrize(("value", "cordoned"), [
    ("", []),
    ("  ", []),
    ("/data/d1", ["/data/d1"]),
    ("/data/d2 , /data/d1", ["/data/d1", "/data/d2"]),
    ("/data/d2/", ["/data/d2"]),  # the same path
    ("*", DIRS),
    ("*,/data/d1", DIRS),  # cordonedLogDirs: contains("*") means every dir
])
def test_cordoned_log_dirs_resolve(value: str, cordoned: list[str]) -> None:
    assert cordoned_log_dirs(value, DIRS) == cordoned


def test_entries_outside_log_dirs_are_refused_with_kafkas_message() -> None:
    with pytest.raises(KafkaError) as refused:
        cordoned_log_dirs("/x,/data/d1,/y", DIRS)
    assert refused.value.code == ErrorCode.INVALID_CONFIG
    assert refused.value.message == (
        "Invalid value [/x, /data/d1, /y] for configuration cordoned.log.dirs: Invalid entries in cordoned.log.dirs: "
        "[/x, /y]. All cordoned log dirs must be entries of log.dirs or log.dir.")
    with pytest.raises(KafkaError):
        cordoned_log_dirs("/data/d1,,/data/d2", DIRS)  # an empty entry names no log dir


@pytest.mark.parametrize(("props", "message"), [
    ({"max.connections.per.ip.overrides": "hostA"},
     "Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, length 5"),
    ({"max.connections.per.ip.overrides": "hostA:many"}, 'For input string: "many"'),
    ({"max.connections.per.ip.overrides": "host A:3,hostB:2"},
     "max.connections.per.ip.overrides contains invalid addresses : host A"),
    ({"max.connections.per.ip": "0"},
     "requirement failed: max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
     "property is set."),
    ({"cordoned.log.dirs": "/elsewhere"},
     "Invalid value [/elsewhere] for configuration cordoned.log.dirs: Invalid entries in cordoned.log.dirs: "
     "[/elsewhere]. All cordoned log dirs must be entries of log.dirs or log.dir."),
])
def test_whole_config_checks(props: dict[str, str], message: str) -> None:
    # Set dynamically (per broker) or statically, the merged config is what KafkaConfig checks.
    for static, dynamic in ((props, {}), ({}, props)):
        with pytest.raises(KafkaError) as refused:
            check_broker_configs(static, dynamic, {}, DIRS)
        assert (refused.value.code, refused.value.message) == (ErrorCode.INVALID_CONFIG, message)


def test_valid_connection_limits_and_their_levels() -> None:
    check_broker_configs({"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "10.0.0.1:5, ::1:7"},
                         {}, {}, DIRS)
    limits = connection_limits({"max.connections": "100", "listener.name.external.max.connections": "20"},
                               {"max.connections.per.ip": "3"}, {"max.connections": "50",
                                                                 "max.connections.per.ip.overrides": "10.0.0.1:5,::1:7"},
                               ["PLAINTEXT", "EXTERNAL"])
    assert limits.max_connections == 50  # the cluster default over server.properties
    assert limits.per_ip == 3
    assert dict(limits.per_ip_overrides) == {"10.0.0.1": 5, "::1": 7}  # split at the last ':'
    assert dict(limits.per_listener) == {"EXTERNAL": 20}
    assert connection_limits({}, {}, {}).max_connections == (1 << 31) - 1


def test_registration_carries_cordoned_dirs_only_while_some_are() -> None:
    ep = (zk.Endpoint("PLAINTEXT", "b1", 9092, "PLAINTEXT"),)
    plain = zk.BrokerRegistration(1, ep, 1700000000000, log_dirs=("/d1", "/d2"))
    assert b"log_dirs" not in zk.encode_broker(plain)  # Kafka's v5 registration, byte for byte
    partly = zk.BrokerRegistration(1, ep, 1700000000000, log_dirs=("/d1", "/d2"), cordoned_log_dirs=("/d1",))
    decoded = zk.decode_broker(1, zk.encode_broker(partly))
    assert (decoded.log_dirs, decoded.cordoned_log_dirs, decoded.cordoned) == (("/d1", "/d2"), ("/d1",), False)
    whole = zk.decode_broker(1, zk.encode_broker(
        zk.BrokerRegistration(1, ep, 1, log_dirs=("/d1", "/d2"), cordoned_log_dirs=("/d2", "/d1"))))
    assert whole.cordoned


@pytest.mark.parametrize(("static", "new_default", "ok"), [
    ({}, {"num.io.threads": "16"}, True),     # 8 -> 16: double is allowed
    ({}, {"num.io.threads": "17"}, False),
    ({}, {"num.io.threads": "4"}, True),
    ({}, {"num.io.threads": "3"}, False),
    ({"background.threads": "4"}, {"background.threads": "9"}, False),
    ({}, {"num.network.threads": "7"}, False),  # 3 -> 7
    ({}, {"log.cleaner.threads": "0"}, False),  # LogCleaner: at least 1, although ConfigDef allows 0
    ({}, {"log.cleaner.threads": "2"}, True),
    ({}, {"log.cleaner.backoff.ms": "10"}, True),
    ({"log.cleaner.threads": "0"}, {"log.cleaner.backoff.ms": "10"}, False),  # any cleaner change checks threads
])
def test_thread_counts_move_by_at_most_a_factor_of_two(static: dict[str, str], new_default: dict[str, str],
                                                       ok: bool) -> None:
    if ok:
        check_reconfiguration(static, {}, {}, {}, new_default)
        return
    with pytest.raises(KafkaError) as refused:
        check_reconfiguration(static, {}, {}, {}, new_default)
    assert (refused.value.code, refused.value.message) == (ErrorCode.INVALID_CONFIG, "Invalid dynamic configuration")
