"""The broker reads Kafka's controlled shutdown settings, with KafkaConfig's defaults (the same ones
DescribeConfigs reports for them)."""

from __future__ import annotations

import pytest

from headwater.metadata.config_table import BROKER_CONFIGS
from headwater.server.config import ConfigError, broker_config

BASE = {"broker.id": "1", "log.dirs": "/tmp/hw-unused"}


def test_defaults_are_kafkas_and_the_catalogs() -> None:
    config = broker_config(dict(BASE))
    assert (config.controlled_shutdown_enable, config.controlled_shutdown_max_retries,
            config.controlled_shutdown_retry_backoff_ms) == (True, 3, 5000)
    assert BROKER_CONFIGS["controlled.shutdown.enable"].default == "true"
    assert BROKER_CONFIGS["controlled.shutdown.max.retries"].default == "3"
    assert BROKER_CONFIGS["controlled.shutdown.retry.backoff.ms"].default == "5000"


def test_values_are_read() -> None:
    config = broker_config({**BASE, "controlled.shutdown.enable": "false", "controlled.shutdown.max.retries": "7",
                            "controlled.shutdown.retry.backoff.ms": "250"})
    assert (config.controlled_shutdown_enable, config.controlled_shutdown_max_retries,
            config.controlled_shutdown_retry_backoff_ms) == (False, 7, 250)


def test_a_bad_value_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match=r"controlled\.shutdown\.enable"):
        broker_config({**BASE, "controlled.shutdown.enable": "sometimes"})
